"""Fuzz target for the link handshake and its state machine: two protocol ends
driven by a script the input spells, over a "network" the input also controls.

Each input is a program.  Byte by byte it tells a client and a server what to
do — log on, accept, reject, complete, log off, advertise, notify, request,
tick the clock — and tells the network what to do with the bytes in flight:
deliver them, deliver part, drop them, duplicate them, inject garbage or a
hand-built frame, end the stream.  The application side reacts to events the
way a shell would (accepting a logon, completing its own).

Contract checked after every step (``AssertionError`` when broken):

* ``receive_data``, ``tick``, ``data_to_send`` and ``next_deadline`` never raise;
  ``next_event`` raises only ProtocolError, and leaves the link CLOSED;
* commands raise only the declared errors (UsageError, LinkClosedError,
  MessageTooLargeError), and a refused command queues no data frame and uses
  no sequence number;
* a CLOSED end stays CLOSED; a client is never LOGON_RECEIVED, a server never
  LOGON_SENT; a CONNECTED end knows its peer; at most one max frame is buffered;
* when the network was honest (nothing dropped, duplicated or injected) and both
  ends got to CONNECTED, the sequence numbers saw no gap and no duplicate.

Every program runs twice — each delivery whole, then each delivery cut into
reads at points the input chooses — and both runs must observe the same thing:
events, errors, states, counters (``bytes_in`` aside: it stops counting at a
protocol error) and every byte either end sent.

With atheris installed::

    .venv/bin/python fuzz/fuzz_handshake.py -max_total_time=600 corpus/handshake/

Without it, :func:`one_input` is the whole target (tests/reliability drives it
with hypothesis); :func:`seeds` gives programs that reach CONNECTED.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzing import fuzz, instrumented

# Coverage instrumentation only when run as the fuzzer, not when a test imports us.
with instrumented(__name__):
    from actorbus.bus.message import ReplyStatus
    from actorbus.bus.router import Role
    from actorbus.bus.scope import FeedState, Scope
    from actorbus.config import LinkSettings
    from actorbus.errors import (
        LinkClosedError,
        MessageTooLargeError,
        ProtocolError,
        UsageError,
    )
    from actorbus.net import LinkProtocol, ProtocolState, Side
    from actorbus.net.protocol import LogonAccepted, LogonRequested
    from actorbus.testing import encode_frame

__all__ = ["OPS", "SETTINGS", "Trace", "one_input", "run", "seeds"]

SETTINGS = LinkSettings(
    max_frame_size=1024, heartbeat_delay=1.0, heartbeat_reply_delay=2.0, logon_timeout=5.0
)

#: Operation names, indexed by ``opcode % len(OPS)``.
#: the simulated network holds at most about this many bytes per direction
#: (duplication stops here); the protocol's own limits are far below it
_WIRE_LIMIT = 1 << 20

OPS = (
    "logon",  # client.logon()
    "accept",  # server.accept_logon()
    "reject",  # X.reject_logon(reason)
    "complete",  # X.complete_logon()
    "logoff",  # X.logoff(reason)
    "send",  # X.<feed or data command>(...)
    "flush",  # X.data_to_send() onto the wire towards the other end
    "deliver",  # everything in flight towards X is received
    "deliver_part",  # the first N bytes in flight towards X are received
    "garbage",  # N input bytes are injected towards X
    "eof",  # X's stream ends
    "drop",  # bytes in flight towards X are lost
    "duplicate",  # bytes in flight towards X are sent twice
    "tick",  # the clock moves; X.tick(now)
    "events",  # X's application takes its events and reacts
    "frame",  # a hand-built frame of any type is injected towards X
)
_HONEST = frozenset(
    {
        "logon",
        "accept",
        "reject",
        "complete",
        "logoff",
        "send",
        "flush",
        "deliver",
        "tick",
        "events",
    }
)

#: Keys the commands use: valid, unknown at the receiver ("X..."), and invalid ones.
_KEYS: tuple[Any, ...] = (
    ("T", "a"),
    ("T", "b"),
    ("U", ""),
    ("Xunknown", "a"),
    ("", "empty type"),
    ("T", 5),
    "not a tuple",
)
_DECLARED = (UsageError, LinkClosedError, MessageTooLargeError)

#: What one run observed, step by step.
Trace = list[tuple[Any, ...]]


def _known(type_name: str) -> bool:
    return not type_name.startswith("X")


class _Program:
    """Reads the input: small ints, with zeros once it runs out."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def done(self) -> bool:
        return self.pos >= len(self.data)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, count: int) -> bytes:
        chunk = self.data[self.pos : self.pos + count]
        self.pos += len(chunk)
        return chunk


class _World:
    def __init__(self, split: bool) -> None:
        self.split = split
        self.now = 0.0
        self.ends = (
            LinkProtocol(Side.CLIENT, "cli", 0.0, is_known_type=_known, settings=SETTINGS),
            LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=_known, settings=SETTINGS),
        )
        # fixed nonces: both runs of a program send the same bytes
        self.ends[0]._nonce = b"c" * 32
        self.ends[1]._nonce = b"s" * 32
        # wire[i]: bytes in flight towards ends[i]
        self.wire = [bytearray(), bytearray()]
        self.closed = [False, False]
        self.honest = True
        self.trace: Trace = []


def _body(program: _Program) -> object:
    kind = program.byte() % 7
    if kind == 0:
        return program.byte() - 128
    if kind == 1:
        return program.take(program.byte() % 16).decode("latin-1")
    if kind == 2:
        return program.take(program.byte() % 16)
    if kind == 3:
        return tuple(program.byte() for _ in range(program.byte() % 5))
    if kind == 4:
        return b"x" * (program.byte() * 8)  # up to 2040 bytes: some exceed the frame limit
    if kind == 5:
        return object()  # msgpack cannot encode it: UsageError
    return float("nan")


def _int_arg(program: _Program) -> object:
    choice = program.byte() % 6
    if choice == 2:
        return program.byte()
    return (0, 1, None, -1, 2**64, True)[choice]


def _command(world: _World, end: LinkProtocol, program: _Program) -> None:
    """One feed or data command with arguments the input picks (some invalid)."""
    which = program.byte() % 10
    key = _KEYS[program.byte() % len(_KEYS)]
    role = (Role.PUBLISHER, Role.SUBSCRIBER, Role.REQUESTOR, Role.REPLIER, 9)[program.byte() % 5]
    if which == 0:
        scope = (Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY, 0)[program.byte() % 3]
        state = (FeedState.UP, FeedState.DOWN, 7)[program.byte() % 3]
        _try(world, "advertise", end.advertise, key, role, scope, state)
    elif which == 1:
        _try(world, "retract", end.retract, key, role)
    elif which == 2:
        _try(world, "subscribe", end.subscribe, key, role)
    elif which == 3:
        _try(world, "unsubscribe", end.unsubscribe, key, role)
    elif which == 4:
        _try(world, "feed_status", end.feed_status, key, role, program.byte() % 3 == 0)
    elif which in (5, 6):
        _try(world, "notify", end.notify, key, _body(program))
    elif which == 7:
        _try(world, "request", end.request, key, _int_arg(program), _body(program))
    elif which == 8:
        _try(world, "request_ack", end.request_ack, _int_arg(program), _int_arg(program))
    else:
        status = (ReplyStatus.OK_FINAL, ReplyStatus.OK_CONTINUING, ReplyStatus.ERROR, 5)[
            program.byte() % 4
        ]
        _try(world, "reply", end.reply, _int_arg(program), key, status, _body(program))


def _try(world: _World, name: str, fn: Any, *args: Any) -> None:
    """Run a command; only the declared errors may escape it, and a refused
    command must queue no data frame and use no sequence number."""
    ends = world.ends
    end = fn.__self__
    queued_before = end.data_queued
    seq_before = end.last_seq_sent
    try:
        fn(*args)
    except _DECLARED as exc:
        world.trace.append(("refused", name, type(exc).__name__))
        if end.data_queued != queued_before or end.last_seq_sent != seq_before:
            raise AssertionError(f"{name}() raised {exc!r} but queued a frame anyway") from exc
        return
    world.trace.append(("did", name, ends.index(end)))


def _deliver(world: _World, index: int, data: bytes, program: _Program) -> None:
    end = world.ends[index]
    if world.split and len(data) > 1:
        rng = random.Random(program.byte())
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, 1 + rng.randrange(8))))
        bounds = [0, *cuts, len(data)]
        for a, b in itertools.pairwise(bounds):
            end.receive_data(data[a:b], world.now)
    else:
        program.byte()  # keep both runs reading the same program
        end.receive_data(data, world.now)


def _take_events(world: _World, index: int, program: _Program) -> None:
    end = world.ends[index]
    react = program.byte()
    while True:
        try:
            event = end.next_event()
        except ProtocolError:
            world.trace.append(("protocol-error", index))
            if end.state is not ProtocolState.CLOSED or end.error is None:
                raise AssertionError("a ProtocolError left the link open") from None
            return
        if event is None:
            return
        world.trace.append(("event", index, repr(event)))
        if isinstance(event, LogonRequested) and react & 1:
            _try(world, "accept", end.accept_logon)
            if react & 2:
                _try(world, "complete", end.complete_logon)
        elif isinstance(event, LogonAccepted) and react & 4:
            _try(world, "complete", end.complete_logon)


def _step(world: _World, program: _Program) -> None:
    op = OPS[program.byte() % len(OPS)]
    index = program.byte() & 1
    end = world.ends[index]
    if op not in _HONEST:
        world.honest = False
    if op == "logon":
        _try(world, op, world.ends[0].logon)
    elif op == "accept":
        _try(world, op, world.ends[1].accept_logon)
    elif op == "reject":
        _try(world, op, end.reject_logon, "refused by the fuzzer")
    elif op == "complete":
        _try(world, op, end.complete_logon)
    elif op == "logoff":
        _try(world, op, end.logoff, "bye")
    elif op == "send":
        _command(world, end, program)
    elif op == "flush":
        data = end.data_to_send()
        world.wire[1 - index] += data
        world.trace.append(("sent", index, data))
    elif op in ("deliver", "deliver_part"):
        wire = world.wire[index]
        count = len(wire) if op == "deliver" else min(len(wire), program.byte() * 4)
        data = bytes(wire[:count])
        del wire[:count]
        if data:
            _deliver(world, index, data, program)
    elif op == "garbage":
        world.wire[index] += program.take(program.byte() % 64)
    elif op == "eof":
        end.receive_data(b"", world.now)
    elif op == "drop":
        world.wire[index].clear()
    elif op == "duplicate":
        # bounded: doubling the bytes in flight on every "duplicate" grows
        # exponentially (a 69-byte program once asked for 16 GB of wire)
        if len(world.wire[index]) <= _WIRE_LIMIT:
            world.wire[index] += bytes(world.wire[index])
    elif op == "tick":
        world.now += program.byte() / 16
        end.tick(world.now)
        world.trace.append(("deadline", index, end.next_deadline()))
    elif op == "events":
        _take_events(world, index, program)
    else:
        frame_type = program.byte() % 28
        fields = [program.byte() for _ in range(program.byte() % 6)]
        fields = [f if f % 3 else f"s{f}" for f in fields]
        world.wire[index] += encode_frame(frame_type, *fields)
    world.trace.append(("op", op, index, *(e.state.name for e in world.ends)))
    _check(world)


def _check(world: _World) -> None:
    limit = SETTINGS.max_frame_size + 4
    for index, end in enumerate(world.ends):
        state = end.state
        if world.closed[index] and state is not ProtocolState.CLOSED:
            raise AssertionError(f"end {index} left CLOSED for {state.name}")
        world.closed[index] = state is ProtocolState.CLOSED
        if end.side is Side.CLIENT and state is ProtocolState.LOGON_RECEIVED:
            raise AssertionError("a client is LOGON_RECEIVED")
        if end.side is Side.SERVER and state is ProtocolState.LOGON_SENT:
            raise AssertionError("a server is LOGON_SENT")
        if state is ProtocolState.CONNECTED and end.peer_node_id is None:
            raise AssertionError("CONNECTED without a peer node id")
        if end.bytes_buffered > limit:
            raise AssertionError(f"end {index} buffers {end.bytes_buffered} bytes > {limit}")


def _finish(world: _World) -> None:
    """Deliver what is left honestly; on an honest run, the numbers must agree."""
    for _ in range(3):
        for index, end in enumerate(world.ends):
            data = end.data_to_send()
            world.wire[1 - index] += data
            world.trace.append(("sent", index, data))
        for index, end in enumerate(world.ends):
            data = bytes(world.wire[index])
            world.wire[index].clear()
            if data:
                end.receive_data(data, world.now)
            _take_events(world, index, _Program(b"\x00"))
    both = all(e.state is ProtocolState.CONNECTED for e in world.ends)
    for index, end in enumerate(world.ends):
        counters = dataclasses.asdict(end.counters)
        counters.pop("bytes_in")
        world.trace.append(("final", index, end.state.name, tuple(counters.items())))
        if world.honest and both and (end.counters.gaps or end.counters.duplicates):
            raise AssertionError(
                f"honest network, both CONNECTED, yet end {index} counted "
                f"{end.counters.gaps} gaps and {end.counters.duplicates} duplicates"
            )


def run(data: bytes, split: bool) -> Trace:
    """Run the program ``data``; return what was observed."""
    world = _World(split)
    program = _Program(data)
    steps = 0
    while not program.done and steps < 200:
        _step(world, program)
        steps += 1
    _finish(world)
    return world.trace


def one_input(data: bytes) -> None:
    """The fuzz target: raises only when the protocol breaks its contract."""
    whole = run(data, split=False)
    cut = run(data, split=True)
    if whole != cut:
        for position, (a, b) in enumerate(zip(whole, cut, strict=False)):
            if a != b:
                raise AssertionError(f"step {position}: fed whole -> {a!r}\nfed in reads -> {b!r}")
        raise AssertionError(f"traces differ in length: {len(whole)} vs {len(cut)}")


def _op(name: str, end: int = 0, *args: int) -> bytes:
    return bytes([OPS.index(name), end, *args])


def seeds() -> list[bytes]:
    """Programs that log on (in several orders) and exchange a little data."""
    # LOGON, CHALLENGE and PROOF cross (the ends answer by themselves)
    authenticate = (
        _op("logon")
        + _op("flush", 0)
        + _op("deliver", 1, 3)
        + _op("flush", 1)
        + _op("deliver", 0, 5)
        + _op("flush", 0)
        + _op("deliver", 1, 7)
    )
    handshake = (
        authenticate
        + _op("events", 1, 3)  # accept and complete
        + _op("flush", 1)
        + _op("deliver", 0, 5)
        + _op("events", 0, 4)  # complete
        + _op("flush", 0)
        + _op("deliver", 1, 7)
        + _op("events", 1, 0)
    )
    # notify(("T", "a"), (1, 2, 3)) from the client; request(("T", "a"), 9, 1) from the server
    notify = _op("send", 0, 5, 0, 0, 3, 3, 1, 2, 3)
    request = _op("send", 1, 7, 0, 0, 2, 9, 0, 1)
    exchange = notify + request + _op("flush", 0) + _op("flush", 1)
    exchange += _op("deliver", 1, 11) + _op("deliver", 0, 13)
    exchange += _op("events", 0, 0) + _op("events", 1, 0)
    heartbeat = _op("tick", 0, 20) + _op("flush", 0) + _op("deliver", 1, 1) + _op("events", 1)
    timeout = _op("tick", 0, 20) + _op("tick", 0, 40) + _op("events", 0) + _op("flush", 0)
    reject = authenticate + _op("events", 1, 0)
    reject += _op("reject", 1) + _op("flush", 1) + _op("deliver", 0, 9) + _op("events", 0)
    garbage = handshake + _op("garbage", 1, 9) + b"\x00\x00\x00\x05\x95\x15\x01\x00\xc0"
    garbage += _op("deliver", 1, 3) + _op("events", 1)
    return [
        handshake,
        handshake + exchange,
        handshake + exchange + heartbeat,
        handshake + timeout,
        reject,
        garbage,
        handshake + _op("frame", 1, 21, 4, 1, 0, 7) + _op("deliver", 1) + _op("events", 1),
        handshake + _op("duplicate", 1) + exchange,
        _op("logon") + _op("flush", 0) + _op("eof", 1) + _op("events", 1),
    ]


def main() -> None:
    """Run under atheris (libFuzzer arguments in ``sys.argv``)."""
    fuzz(one_input)


if __name__ == "__main__":
    main()
