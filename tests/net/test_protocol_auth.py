"""The logon's authentication in the sans-IO protocol (docs/protocol.md §3,
"Authentication"): a good secret links, a wrong one or none on one side is
refused before the server says anything of itself, a proof recorded from one
exchange is worthless in the next, and each side proves itself."""

from __future__ import annotations

import hashlib
import hmac

import msgpack
import pytest

from actorbus.errors import ProtocolError
from actorbus.net import PROTOCOL_VERSION, LinkProtocol, ProtocolState, Side
from actorbus.net.protocol import (
    AuthenticationFailed,
    FrameType,
    LogonAccepted,
    LogonComplete,
    LogonRejected,
    LogonRequested,
)
from actorbus.testing import (
    MemoryPipe,
    accept_for_client,
    all_types_known,
    authenticate,
    encode_frame,
)

KEY = b"k" * 32
OTHER = b"o" * 32
LOGON, CHALLENGE, PROOF = int(FrameType.LOGON), int(FrameType.CHALLENGE), int(FrameType.PROOF)
LOGON_ACCEPT, LOGON_REJECT = int(FrameType.LOGON_ACCEPT), int(FrameType.LOGON_REJECT)


def frames_of(data: bytes) -> list[tuple[object, ...]]:
    out = []
    while data:
        size = int.from_bytes(data[:4], "big")
        out.append(msgpack.unpackb(data[4 : 4 + size], use_list=False))
        data = data[4 + size :]
    return out


def end(side: Side, node: str, secret: object = b"", run_id: str = "") -> LinkProtocol:
    return LinkProtocol(
        side,
        node,
        0.0,
        is_known_type=all_types_known,
        secret=secret,  # type: ignore[arg-type]
        run_id=run_id,
    )


def test_the_same_secret_links_both_ends() -> None:
    pipe = MemoryPipe(client_secret=KEY, server_secret=KEY)
    client_seen, server_seen = pipe.logon()
    assert client_seen == [LogonAccepted("server-node"), LogonComplete()]
    assert server_seen == [LogonRequested("client-node"), LogonComplete()]
    assert pipe.client.counters.auth_failures == pipe.server.counters.auth_failures == 0


@pytest.mark.parametrize(
    ("client_key", "server_key"),
    [(OTHER, KEY), (b"", KEY), (KEY, b"")],
    ids=["wrong secret", "client without secret", "server without secret"],
)
def test_a_client_that_does_not_prove_the_key_learns_nothing(
    client_key: bytes, server_key: bytes
) -> None:
    cli = end(Side.CLIENT, "cli", client_key, run_id="c-run")
    srv = end(Side.SERVER, "srv-node-id", server_key, run_id="srv-run-id")
    cli.logon()
    authenticate(cli, srv)
    assert srv.next_event() == AuthenticationFailed("cli")
    assert srv.state is ProtocolState.CLOSED
    assert srv.peer_node_id is None  # the node id claimed nothing
    assert srv.counters.auth_failures == 1
    assert srv.counters.corrupt_frames == 0  # a wrong key is no protocol error
    assert srv.close_reason == (
        "authentication failed: the proof of the peer claiming node 'cli' does not match "
        "this node's secret"
    )
    # everything the server ever sent: a random challenge, then the refusal
    answer = srv.data_to_send()
    cli.receive_data(answer, 0.0)
    assert list(cli.events()) == [LogonRejected("authentication failed")]
    assert cli.state is ProtocolState.CLOSED
    sent = frames_of(answer)
    assert [f[0] for f in sent] == [LOGON_REJECT]
    assert sent[0] == (LOGON_REJECT, "authentication failed")
    assert srv.counters.bytes_out == len(answer) + 4 + len(msgpack.packb((CHALLENGE, b"x" * 32)))
    for secret_or_identity in (b"srv-node-id", b"srv-run-id", KEY, OTHER):
        assert secret_or_identity not in answer


def test_the_server_sends_nothing_of_itself_before_the_proof() -> None:
    srv = end(Side.SERVER, "srv-node-id", KEY, run_id="srv-run-id")
    srv.receive_data(encode_frame(LOGON, PROTOCOL_VERSION, "cli", "", b"n" * 32), 0.0)
    assert srv.next_event() is None  # nothing for the application: no claim
    assert srv.state is ProtocolState.IDLE
    challenge = srv.data_to_send()
    [(frame_type, nonce)] = frames_of(challenge)
    assert frame_type == CHALLENGE and type(nonce) is bytes and len(nonce) == 32
    assert b"srv-node-id" not in challenge and b"srv-run-id" not in challenge


def test_a_proof_recorded_from_one_logon_is_refused_in_the_next() -> None:
    # A logon that worked, recorded by someone on the path ...
    cli = end(Side.CLIENT, "cli", KEY)
    srv = end(Side.SERVER, "srv", KEY)
    cli.logon()
    logon = cli.data_to_send()
    srv.receive_data(logon, 0.0)
    cli.receive_data(srv.data_to_send(), 0.0)
    proof = cli.data_to_send()
    srv.receive_data(proof, 0.0)
    assert srv.next_event() == LogonRequested("cli")
    srv.accept_logon()
    accept = srv.data_to_send()
    cli.receive_data(accept, 0.0)
    assert cli.next_event() == LogonAccepted("srv")
    # ... replayed byte for byte to the same server node: its challenge is new
    replayed = end(Side.SERVER, "srv", KEY)
    replayed.receive_data(logon, 0.0)
    assert replayed.data_to_send() != b""  # a challenge with a fresh nonce
    replayed.receive_data(proof, 0.0)
    assert replayed.next_event() == AuthenticationFailed("cli")
    assert replayed.counters.auth_failures == 1
    # ... and the server's answer replayed to the same client node: its nonce is new
    fooled = end(Side.CLIENT, "cli", KEY)
    fooled.logon()
    fooled.receive_data(frames_and(CHALLENGE, srv), 0.0)
    fooled.data_to_send()
    fooled.receive_data(accept, 0.0)
    assert fooled.next_event() == AuthenticationFailed("srv")
    assert fooled.counters.auth_failures == 1


def frames_and(frame_type: int, proto: LinkProtocol) -> bytes:
    """A frame ``frame_type`` carrying ``proto``'s nonce (a replayed CHALLENGE)."""
    return encode_frame(frame_type, proto._nonce)


def test_the_client_checks_the_servers_proof() -> None:
    cli = end(Side.CLIENT, "cli", KEY)
    cli.logon()
    cli.receive_data(accept_for_client(cli, "impostor", secret=OTHER), 0.0)
    assert cli.next_event() == AuthenticationFailed("impostor")
    assert cli.state is ProtocolState.CLOSED
    assert cli.peer_node_id is None
    assert cli.counters.auth_failures == 1
    assert frames_of(cli.data_to_send()) == [(int(FrameType.LOGOFF), "authentication failed")]


def test_a_server_that_skips_the_challenge_is_refused() -> None:
    cli = end(Side.CLIENT, "cli")
    cli.logon()
    cli.data_to_send()
    cli.receive_data(encode_frame(LOGON_ACCEPT, "srv", "", b"p" * 32), 0.0)
    with pytest.raises(ProtocolError, match="LOGON_ACCEPT arrived before any CHALLENGE"):
        cli.next_event()


@pytest.mark.parametrize(
    ("side", "frame", "match"),
    [
        (Side.SERVER, (PROOF, b"p" * 32), "PROOF arrived while the logon is IDLE"),
        (Side.CLIENT, (CHALLENGE, b"n" * 32), "CHALLENGE arrived while the logon is IDLE"),
        (Side.SERVER, (CHALLENGE, b"n" * 32), "the client sent CHALLENGE"),
        (Side.CLIENT, (PROOF, b"p" * 32), "the server sent PROOF"),
    ],
)
def test_authentication_frames_out_of_place(
    side: Side, frame: tuple[object, ...], match: str
) -> None:
    proto = end(side, "me")
    proto.receive_data(encode_frame(*frame), 0.0)
    with pytest.raises(ProtocolError, match=match):
        proto.next_event()


def test_malformed_proofs_are_protocol_errors() -> None:
    srv = end(Side.SERVER, "srv", KEY)
    srv.receive_data(encode_frame(LOGON, PROTOCOL_VERSION, "cli", "", b"n" * 32), 0.0)
    srv.receive_data(encode_frame(PROOF, b"short"), 0.0)
    with pytest.raises(ProtocolError, match="proof has 5 bytes, expected 32"):
        srv.next_event()
    assert srv.counters.auth_failures == 0
    assert srv.counters.corrupt_frames == 1


def test_a_key_per_client_node() -> None:
    keys = {"a": b"a" * 32, "b": b"b" * 32}

    def server(client: str, key: bytes) -> LinkProtocol:
        srv = end(Side.SERVER, "srv", keys.get)
        cli = end(Side.CLIENT, client, key)
        cli.logon()
        authenticate(cli, srv)
        return srv

    assert server("a", keys["a"]).next_event() == LogonRequested("a")
    assert server("b", keys["b"]).next_event() == LogonRequested("b")
    # a node proving another node's key, and a node with no key at all
    assert server("a", keys["b"]).next_event() == AuthenticationFailed("a")
    assert server("c", keys["a"]).next_event() == AuthenticationFailed("c")
    assert server("c", b"").next_event() == AuthenticationFailed("c")


def test_the_proofs_are_the_documented_hmacs() -> None:
    cli = end(Side.CLIENT, "cli", KEY, run_id="c-1")
    srv = end(Side.SERVER, "srv", KEY, run_id="s-1")
    cli.logon()
    [logon] = frames_of(cli.data_to_send())
    srv.receive_data(encode_frame(*logon), 0.0)
    [challenge] = frames_of(srv.data_to_send())
    cli.receive_data(encode_frame(*challenge), 0.0)
    [proof] = frames_of(cli.data_to_send())
    nonce_c, nonce_s = logon[4], challenge[1]

    def mac(*fields: object) -> bytes:
        packed = msgpack.packb(list(fields), use_bin_type=True)
        return hmac.new(KEY, packed, hashlib.sha256).digest()

    assert proof == (
        PROOF,
        mac("actorbus client proof", PROTOCOL_VERSION, nonce_c, nonce_s, "cli", "c-1"),
    )
    srv.receive_data(encode_frame(*proof), 0.0)
    assert srv.next_event() == LogonRequested("cli", "c-1")
    srv.accept_logon()
    [accept] = frames_of(srv.data_to_send())
    assert accept == (
        LOGON_ACCEPT,
        "srv",
        "s-1",
        mac(
            "actorbus server proof", PROTOCOL_VERSION, nonce_c, nonce_s, "cli", "c-1", "srv", "s-1"
        ),
    )


def test_every_connection_has_a_fresh_nonce() -> None:
    nonces = set()
    for _ in range(50):
        cli = end(Side.CLIENT, "cli")
        cli.logon()
        nonces.add(frames_of(cli.data_to_send())[0][4])
    assert len(nonces) == 50


@pytest.mark.parametrize("secret", ["text", 5, None])
def test_the_secret_argument_is_checked_without_showing_it(secret: object) -> None:
    from actorbus import UsageError

    with pytest.raises(UsageError, match="secret: expected bytes or a callable") as info:
        end(Side.CLIENT, "cli", secret)
    assert "text" not in str(info.value)
