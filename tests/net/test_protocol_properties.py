"""Property tests: any bytes — arbitrary, or valid frame streams mutated — fed
whole or split at any point yield events or ProtocolError only, and the same
outcome however they are split.  Drives ``fuzz/fuzz_protocol.py``'s target.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from actorbus import FeedState, ReplyStatus, Scope
from actorbus.bus.router import Role
from actorbus.net import LinkProtocol, ProtocolState
from actorbus.net.protocol import (
    Advertised,
    CancelReceived,
    Event,
    FeedStatusReceived,
    LogonAccepted,
    LogonComplete,
    LogonRequested,
    NotificationReceived,
    ReplyReceived,
    RequestAcknowledged,
    RequestReceived,
    Subscribed,
)
from actorbus.testing import MemoryPipe
from fuzz_targets import load

SEED = 20_261_121


fuzz = load("fuzz_protocol", "fuzz_protocol")

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(autouse=True)
def _print_seed() -> None:
    print(f"hypothesis seed {SEED} (fixed with @seed)")


# ------------------------------------------------------------ arbitrary bytes


@seed(SEED)
@PROPERTY
@given(st.binary(max_size=3000))
def test_fuzz_target_on_arbitrary_bytes(data: bytes) -> None:
    fuzz.one_input(data)


@seed(SEED)
@PROPERTY
@given(mode=st.integers(0, 3), seed_byte=st.integers(0, 255), frames=st.lists(st.binary()))
def test_fuzz_target_on_length_prefixed_garbage(
    mode: int, seed_byte: int, frames: list[bytes]
) -> None:
    # Correct prefixes around garbage bodies reach the body checks more often.
    payload = b"".join(len(body).to_bytes(4, "big") + body for body in frames)
    fuzz.one_input(bytes([mode, seed_byte]) + payload)


# ------------------------------------------------------------ valid streams

KEYS = [("T", "a"), ("T", "b"), ("U", ""), ("XUnknown", "a")]  # X* is unknown there

wire_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=4).map(tuple),
    max_leaves=8,
)
keys = st.sampled_from(KEYS)
ids = st.integers(0, 2**64 - 1)
commands = st.lists(
    st.one_of(
        st.tuples(
            st.just("advertise"),
            keys,
            st.sampled_from([Role.PUBLISHER, Role.REPLIER]),
            st.sampled_from([Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY]),
            st.sampled_from(FeedState),
        ),
        st.tuples(st.just("subscribe"), keys, st.sampled_from([Role.SUBSCRIBER, Role.REQUESTOR])),
        st.tuples(st.just("feed_status"), keys, st.sampled_from(Role), st.booleans()),
        st.tuples(st.just("notify"), keys, wire_values),
        st.tuples(st.just("notify_many"), keys, st.lists(wire_values, max_size=5)),
        st.tuples(st.just("request"), keys, ids, wire_values),
        st.tuples(st.just("request_ack"), ids, st.integers(0, 2**32)),
        st.tuples(st.just("reply"), ids, keys, st.sampled_from(ReplyStatus), wire_values),
        st.tuples(st.just("cancel"), ids),
        st.tuples(st.just("complete")),
    ),
    max_size=25,
)


def _known(key: tuple[str, str]) -> bool:
    return fuzz.known_type(key[0])


def apply(sender: LinkProtocol, script: list[tuple[Any, ...]]) -> list[Event]:
    """Run ``script`` on ``sender``; return the events a receiver must see."""
    expected: list[Event] = []
    completed = sender.state is not ProtocolState.SYNCING  # connected senders completed already
    for name, *args in script:
        if name == "complete":
            if not completed:
                sender.complete_logon()
                expected.append(LogonComplete())
                completed = True
            continue
        method: Callable[..., None] = getattr(sender, name)
        method(*args)
        if name == "advertise" and _known(args[0]):
            expected.append(Advertised(*args))
        elif name == "subscribe" and _known(args[0]):
            expected.append(Subscribed(*args))
        elif name == "feed_status" and _known(args[0]):
            expected.append(FeedStatusReceived(*args))
        elif name == "notify" and _known(args[0]):
            expected.append(NotificationReceived(*args))
        elif name == "notify_many" and _known(args[0]):
            expected += [NotificationReceived(args[0], body) for body in args[1]]
        elif name == "request" and _known(args[0]):
            expected.append(RequestReceived(*args))
        elif name == "request_ack":
            expected.append(RequestAcknowledged(*args))
        elif name == "reply":
            expected.append(ReplyReceived(*args))
        elif name == "cancel":
            expected.append(CancelReceived(*args))
    return expected


def valid_stream(mode: int, script: list[tuple[Any, ...]]) -> tuple[bytes, list[Event]]:
    """What a correct peer sends to ``fuzz.make_receiver(mode)``, and its events."""
    pipe = MemoryPipe(
        client_id="cli",
        settings=fuzz.SETTINGS,
        client_knows=fuzz.known_type,
        server_knows=fuzz.known_type,
    )
    if mode == 3:  # a connected server talks to a connected client
        pipe.logon()
        return _sent(pipe.server, script)
    # the receiver's nonces: its proofs are the ones made here
    fuzz.fixed_nonce(pipe.client, fuzz.CLIENT_NONCE)
    fuzz.fixed_nonce(pipe.server, fuzz.SERVER_NONCE)
    pipe.client.logon()
    logon = pipe.client.data_to_send()
    pipe.server.receive_data(logon, 0.0)
    pipe.client.receive_data(pipe.server.data_to_send(), 0.0)  # CHALLENGE
    proof = pipe.client.data_to_send()
    pipe.server.receive_data(proof, 0.0)
    assert isinstance(pipe.server.next_event(), LogonRequested)
    pipe.server.accept_logon()
    if mode == 1:  # the server answers a client that awaits it
        accept = pipe.server.data_to_send()
        stream, expected = _sent(pipe.server, script)
        return accept + stream, [LogonAccepted("server-node"), *expected]
    pipe.client.receive_data(pipe.server.data_to_send(), 0.0)
    assert isinstance(pipe.client.next_event(), LogonAccepted)
    stream, expected = _sent(pipe.client, script)
    if mode == 0:  # LOGON, PROOF, then frames the server never accepted: an error
        return logon + proof + stream, [LogonRequested("cli")]
    return stream, expected


def _sent(sender: LinkProtocol, script: list[tuple[Any, ...]]) -> tuple[bytes, list[Event]]:
    expected = apply(sender, script)
    return sender.data_to_send(), expected


def _events(outcome: Any) -> list[str]:
    return [e for e in outcome[0] if e != "ConnectionClosed()"]


@seed(SEED)
@PROPERTY
@given(mode=st.integers(0, 3), script=commands)
def test_valid_streams_give_exactly_the_sent_events(
    mode: int, script: list[tuple[Any, ...]]
) -> None:
    stream, expected = valid_stream(mode, script)
    outcome = fuzz.run(fuzz.make_receiver(mode), [stream])
    # (notify_many with no bodies sends no frame)
    sends = any(not (c[0] == "notify_many" and not c[2]) for c in script)
    if mode == 0 and sends:  # frames behind a LOGON and PROOF nobody accepted
        assert _events(outcome) == [*map(repr, expected), "ProtocolError"]
    else:
        assert _events(outcome) == [repr(e) for e in expected]


mutations = st.lists(
    st.tuples(
        st.floats(0, 1, exclude_max=True),
        st.sampled_from(["flip", "insert", "delete"]),
        st.binary(min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=6,
)


def mutate(data: bytes, edits: list[tuple[float, str, bytes]]) -> bytes:
    out = bytearray(data)
    for where, how, what in edits:
        at = int(where * (len(out) + 1))
        if how == "insert" or not out:
            out[at:at] = what
        elif how == "delete":
            del out[min(at, len(out) - 1) : min(at, len(out) - 1) + len(what)]
        else:
            at = min(at, len(out) - 1)
            out[at] ^= what[0]
    return bytes(out)


@seed(SEED)
@PROPERTY
@given(
    mode=st.integers(0, 3),
    script=commands,
    edits=mutations,
    seed_byte=st.integers(0, 255),
)
def test_mutated_valid_streams(
    mode: int, script: list[tuple[Any, ...]], edits: list[tuple[float, str, bytes]], seed_byte: int
) -> None:
    stream, _ = valid_stream(mode, script)
    fuzz.one_input(bytes([mode, seed_byte]) + mutate(stream, edits))


@seed(SEED)
@PROPERTY
@given(
    mode=st.integers(0, 3),
    script=commands,
    edits=st.one_of(st.just([]), mutations),
    cuts=st.lists(st.floats(0, 1), max_size=12),
)
def test_split_anywhere_gives_the_same_outcome(
    mode: int,
    script: list[tuple[Any, ...]],
    edits: list[tuple[float, str, bytes]],
    cuts: list[float],
) -> None:
    stream, _ = valid_stream(mode, script)
    data = mutate(stream, edits) if edits else stream
    points = sorted({int(c * len(data)) for c in cuts} | {0, len(data)})
    reads = [data[a:b] for a, b in itertools.pairwise(points) if b > a]
    assert fuzz.run(fuzz.make_receiver(mode), reads) == fuzz.run(fuzz.make_receiver(mode), [data])
