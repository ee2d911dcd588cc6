"""Remote links between two processes, next to raw asyncio+uvloop sockets doing the
same work in the same run.

What is measured (each number the best of ``--rounds`` rounds, our rounds
interleaved with the baseline's so background load hits both alike; every round
starts two fresh processes on 127.0.0.1):

(a) **one-way notifications/s** — process *source* publishes N notifications of
    ``Point`` (subject, timestamp, an int, a 32-byte payload; built before the
    clock starts) from its main thread as fast as ``publish()`` returns; process
    *sink* counts them in a subscriber actor's callback.  Rate = N / (time the
    last one is counted - time the first ``publish()`` began), both read from
    ``time.monotonic_ns()``, which is one clock for every process on the host.
    Baseline: a uvloop client packs one NOTIFY frame per message (msgpack array
    with the same fields and a 4-byte length prefix, the bytes protocol 3 sent)
    and writes them 100 frames per ``write()`` with one kept ``msgpack.Packer``
    (as the link protocol does), awaiting ``drain()``; a uvloop server reads them
    with one streaming ``msgpack.Unpacker`` and counts.  Reference rows: the same
    with ``msgpack.packb()`` per frame, with one frame per ``write()``, and with
    each 100 messages in one NOTIFY_RUN frame (the frame a link now sends for a
    run of notifications waiting to be written: docs/protocol.md), which is the
    raw floor of what the link does.  Budget: >= 40 % of the kept-Packer,
    100-frames-per-write baseline.  One more row runs the same with both nodes
    holding a secret (the link authenticated at logon), against the plain link:
    authentication costs the logon only, so the rate is the same.  And one more
    over a TLS link (TLS 1.3, a certificate made for the run by the ``openssl``
    command; the row is left out without it), against the plain link: budget
    >= 0.8x.  The records are made in C (OpenSSL), the Python work per message
    is the plain link's.
(b) **request/reply round trip** — a requestor actor in one process sends the
    next request from its reply callback to a replier actor in the other that
    answers at once; each round trip is timed with ``perf_counter_ns`` from
    ``request()`` to the reply callback.  Baseline: one uvloop client writes a
    request frame and awaits the reply frame from a uvloop server that answers
    in ``data_received``.  Budget: p50 <= 2x the baseline; p99 reported.

    Reference rows (no budget): the raw echo in the default bus's shape, each
    node's loop thread handing every frame to a worker thread over a
    ``SimpleQueue`` and the worker writing its frame on the socket itself (as a
    link's direct write does), against the plain raw echo (what two thread
    hand-offs cost on this host: the floor under any design that runs actors on
    threads of their own) and against the default bus (what our code costs on
    top of them).

Both are run twice: with the default bus (actors on a blocking dispatcher, the
link on its own I/O thread: a message crosses two threads on each node) and
with the receiving actors on an asyncio dispatcher whose event loop the link
shares (``SelectorConfig.dispatcher``; docs/links.md): no thread hand-off
between socket and actor.  The second is the configuration for latency.

(c) **request/reply with polling loops** — (b) on the shared loop again, with
    the selector of both nodes ``spin+park`` (docs/links.md, "Polling
    selectors": the loop polls instead of sleeping in epoll, so no wake-up of a
    sleeping vCPU per message), next to the raw uvloop round trip whose loops
    poll the same way (the same self-rescheduling ``call_soon`` callback, with
    the same spin limit and park time, activity being bytes received).  No
    budget: the rows show what polling buys at the price of a busy core per node.

(d) **request/reply with both processes on one CPU** — (b) for the default bus,
    the shared loop and the raw baseline again, with every thread of both
    processes pinned to one CPU (``os.sched_setaffinity``, Linux).  No budget:
    the rows show what the baseline's time is made of.  On a VM whose idle vCPUs
    halt at once (this one: cpuidle ``haltpoll`` with ``guest_halt_poll_ns=0``),
    waking a thread on the other, halted vCPU costs some 25 us, and the raw round
    trip pays four of those: one CPU wakes no sleeping vCPU, and the raw round
    trip falls to about a quarter.  What is left of ours is our Python and the
    thread hand-offs, so these ratios are the ones a machine with cheap wake-ups
    would show (docs/performance.md, "What the round-trip baseline is made of").

(e) **request/reply with idle vCPUs polling** (``--halt-poll-ns NS``, root, a
    guest whose cpuidle driver is ``haltpoll``) — (b) for the raw echo, the raw
    echo with a worker thread per node, the default bus and the shared loop,
    with the guest kernel's ``guest_halt_poll_ns`` set to NS for these rows
    (restored afterwards, also on Ctrl-C): an idle vCPU polls that long before
    it halts, so a thread woken within NS of its CPU going idle costs no wake-up
    of a halted vCPU.  This is a host with cheap wake-ups on two CPUs, which the
    one-CPU rows approximate: the raw round trip falls to a fifth, ours by
    less, and the ratios are what such a host shows.  No budget; off by default
    because it changes a kernel setting for every process while it runs.

``--gil`` adds rows for polling with *threaded* actors: (b) with the actors on a
blocking dispatcher and each node's selector polling, either on its own I/O
thread (``spinning``, ``spin+park``, ``spin+yield``) or ``spin+park`` on the loop
of an asyncio dispatcher that runs no actors (docs/links.md: a polling loop takes
the GIL on every poll, and the actors' threads wait for it); and (b) with the
selector blocking and the actors on a ``spin+park`` or ``spin+yield``
dispatcher with the default spin limit (docs/actors.md: a polling worker gives
the GIL up after every empty poll).  All against the default bus in the same
rounds.

Run: ``.venv/bin/python benchmarks/remote.py [--quick] [--gil] [--halt-poll-ns NS]``
(about two minutes, 30 s more with ``--halt-poll-ns``; a process role runs when
``--role`` is given).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import queue
import shutil
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RoleProc, Row, best_of, percentile, print_table, row

from actorbus.actors import Actor
from actorbus.bus.feeds import IncomingRequest, RequestFeed, RequestHandle
from actorbus.bus.message import Notification, Reply, ReplyStatus, Request
from actorbus.bus.scope import FeedState
from actorbus.config.schema import BusConfig, DispatcherConfig, DispatcherKind, SelectorConfig
from actorbus.net import tls_client_context, tls_server_context
from actorbus.node import Bus

__all__ = ["main"]

SUBJECT = "/bench/points"
PAYLOAD = b"p" * 32
BATCH = 100  # frames per write in the batched baseline
TIMEOUT = 120.0
#: A request with no reply after this long is counted as lost, not timed.
LOST_AFTER = 2.0


class Point(Notification, type_name="bench.Point"):
    value: int
    payload: bytes


class Pong(Reply, type_name="bench.Pong"):
    value: int


class Ping(Request, type_name="bench.Ping", replies=(Pong,)):
    value: int


def _uvloop() -> asyncio.AbstractEventLoop:
    import uvloop

    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def _say(*words: object) -> None:
    print(*words, flush=True)


# ============================================================ process roles: ours


#: spinLimit and parkTime of the polling selectors, and of the raw polling loops.
SPIN_LIMIT = SelectorConfig("x").spin_limit
PARK_TIME_NS = SelectorConfig("x").park_time_ns


def _config(
    on_loop: bool,
    selector: DispatcherKind = DispatcherKind.ASYNCIO,
    threaded_actors: bool = False,
) -> BusConfig:
    """The default bus, or (``on_loop``) one whose actors run on an asyncio dispatcher
    whose event loop the links share: no thread hand-off between socket and actor.
    ``selector``: how the links' loop waits for I/O (the default blocks in epoll).
    ``threaded_actors`` (with ``on_loop``): the links stay on the asyncio dispatcher's
    loop, the actors run on a blocking dispatcher (the default one)."""
    if not on_loop:
        if selector is DispatcherKind.ASYNCIO:
            return BusConfig()
        return BusConfig(selectors=(SelectorConfig("net", kind=selector, is_default=True),))
    io = DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=not threaded_actors)
    main = (DispatcherConfig("main", is_default=True),) if threaded_actors else ()
    return BusConfig(
        dispatchers=(io, *main),
        selectors=(SelectorConfig("net", kind=selector, dispatcher="io", is_default=True),),
    )


_POLLING = (DispatcherKind.SPINNING, DispatcherKind.SPIN_PARK, DispatcherKind.SPIN_YIELD)
#: The bus of each "ours" role prefix.  ``ours``: the default bus; ``auth``: the
#: default bus, its link authenticated with a secret (the logon proves it; nothing
#: after the logon changes); ``tls``: the default bus, its link over TLS; ``loop``: actors
#: on an asyncio dispatcher whose loop the links share; ``park``: the same with a
#: spin+park selector; ``gil-KIND``: the default bus with its selector polling as
#: KIND on its own I/O thread; ``gil-shared``: the links on a spin+park selector
#: sharing an asyncio dispatcher's loop, the actors on a blocking dispatcher (the
#: last two for the ``--gil`` rows); ``gil-dKIND``: the default selector, the actors
#: on a KIND polling dispatcher (also ``--gil``).
_BUSES: dict[str, BusConfig] = {
    "ours": _config(False),
    "auth": _config(False),
    "tls": _config(False),
    "loop": _config(True),
    "park": _config(True, DispatcherKind.SPIN_PARK),
    **{f"gil-{kind.value}": _config(False, kind) for kind in _POLLING},
    "gil-shared": _config(True, DispatcherKind.SPIN_PARK, threaded_actors=True),
    **{
        f"gil-d{kind.value}": BusConfig(
            dispatchers=(DispatcherConfig("main", kind=kind, is_default=True),)
        )
        for kind in (DispatcherKind.SPIN_PARK, DispatcherKind.SPIN_YIELD)
    },
}


class Sink(Actor):
    """Counts ``n`` notifications of ``message_class`` on ``subject`` (by
    default :class:`Point` on SUBJECT); ``up`` is set when the feed is UP,
    ``done`` (and ``t_last`` taken) at the last."""

    def __init__(
        self, n: int, message_class: type[Notification] = Point, subject: str = SUBJECT
    ) -> None:
        super().__init__(name="sink")
        self.n = n
        self.key = (message_class, subject)
        self.count = 0
        self.up = threading.Event()
        self.done = threading.Event()
        self.t_last = 0

    def startup(self) -> None:
        self.subscribe(*self.key, on_message=self.got, on_status=self.status)

    def status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.up.set()

    def got(self, message: Notification, feed: Any) -> None:
        self.count += 1
        if self.count == self.n:
            self.t_last = time.monotonic_ns()
            self.done.set()


#: The secret of the ``auth`` rows (both processes hold it).
_SECRET = b"benchmark-secret-0123456789abcdef"


#: The directory of the ``tls`` rows' CA and server certificate (made by the parent).
_TLS_ENV = "ACTORBUS_BENCH_TLS_DIR"


def _tls(server: bool) -> ssl.SSLContext:
    """The ``tls`` rows' context: the sink's server side, the source's client side."""
    where = Path(os.environ[_TLS_ENV])
    if server:
        return tls_server_context(where / "server.pem", where / "server.key")
    return tls_client_context(where / "ca.pem")


@contextlib.contextmanager
def _tls_files() -> Iterator[bool]:
    """A CA and a server certificate for 127.0.0.1 in a temporary directory named
    by ``_TLS_ENV`` for the block; False (no TLS rows) without ``openssl``."""
    if shutil.which("openssl") is None:
        yield False
        return

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    with tempfile.TemporaryDirectory(prefix="bench-tls-") as where:
        curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
        openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
                "-subj", "/CN=bench CA", "-addext", "basicConstraints=critical,CA:TRUE")  # fmt: skip
        openssl("req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=sink")
        Path(where, "ext").write_text("subjectAltName=IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-out", "server.pem", "-days", "1", "-extfile", "ext")  # fmt: skip
        os.chmod(Path(where, "server.key"), 0o600)
        os.environ[_TLS_ENV] = where
        try:
            yield True
        finally:
            del os.environ[_TLS_ENV]


def role_ours_sink(
    n: int, config: BusConfig, secret: bytes | None = None, tls: bool = False
) -> None:
    with Bus(config, node_id="sink") as bus:
        service = bus.listen(0, secret=secret, tls=_tls(True) if tls else None)
        sink = Sink(n)
        bus.register(sink)
        bus.startup(sink).wait(10)
        _say("PORT", service.port)
        if not sink.done.wait(TIMEOUT):
            raise SystemExit(f"sink: only {sink.count} of {n} notifications arrived")
        _say("DONE", sink.t_last, bus.links[0].counters.messages_in)


def role_ours_source(n: int, port: int, secret: bytes | None = None, tls: bool = False) -> None:
    with Bus(node_id="source") as bus:
        up = threading.Event()
        link = bus.connect("127.0.0.1", port, secret=secret, tls=_tls(False) if tls else None)
        link.wait_logged_on(10)
        feed = bus.publisher(
            Point, SUBJECT, on_status=lambda state, f: up.set() if state is FeedState.UP else None
        )
        messages = [Point(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
        if not up.wait(10):
            raise SystemExit("source: the sink never subscribed")
        publish = feed.publish
        t0 = time.monotonic_ns()
        for message in messages:
            publish(message)
        t1 = time.monotonic_ns()
        _say("SENT", t0, t1)
        sys.stdin.read()  # keep the link up until the parent has the sink's result


class _Replier(Actor):
    def startup(self) -> None:
        self.replier(Ping, SUBJECT, on_request=self.answer)

    def answer(self, request: IncomingRequest[Ping]) -> None:
        request.reply(Pong(SUBJECT, value=request.request.value))


def role_ours_replier(config: BusConfig) -> None:
    with Bus(config, node_id="replier") as bus:
        service = bus.listen(0)
        replier = _Replier(name="replier")
        bus.register(replier)
        bus.startup(replier).wait(10)
        _say("PORT", service.port)
        sys.stdin.read()


class Requestor(Actor):
    """Sends ``ping`` (by default a :class:`Ping`) and, once the whole reply is
    in, the next one, ``warmup + n`` times in all, along ``route`` (node ids) if
    given; ``times`` holds each round trip's nanoseconds, ``lost`` counts the
    requests that timed out (see LOST_AFTER)."""

    def __init__(
        self, n: int, warmup: int, ping: Request | None = None, route: list[str] | None = None
    ) -> None:
        super().__init__(name="requestor")
        self.n = n
        self.warmup = warmup
        self.route = route
        self.sent_at = 0
        self.times: list[int] = []
        self.done = threading.Event()
        self.up = threading.Event()
        self.feed: RequestFeed[Request] | None = None
        self.ping = ping if ping is not None else Ping(SUBJECT, value=1)
        self.lost = 0

    def startup(self) -> None:
        self.feed = self.requestor(
            type(self.ping), self.ping.subject, on_reply=self.got, on_status=self.status
        )

    def status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.up.set()

    def go(self) -> None:
        self.send()

    def send(self) -> None:
        assert self.feed is not None
        self.sent_at = time.perf_counter_ns()
        self.feed.request(self.ping, timeout=LOST_AFTER, route_to=self.route)

    def got(self, remaining: int, reply: Reply, handle: RequestHandle[Request]) -> None:
        now = time.perf_counter_ns()
        if remaining:
            return
        if reply.status is ReplyStatus.ERROR:
            self.lost += 1  # timed out: not a round trip (see LOST_AFTER)
        else:
            self.times.append(now - self.sent_at)
        if len(self.times) + self.lost < self.n + self.warmup:
            self.send()
        else:
            self.done.set()


def role_ours_requestor(n: int, port: int, config: BusConfig) -> None:
    with Bus(config, node_id="requestor") as bus:
        bus.connect("127.0.0.1", port).wait_logged_on(10)
        requestor = Requestor(n, warmup=max(n // 10, 100))
        bus.register(requestor)
        bus.startup(requestor).wait(10)
        if not requestor.up.wait(10):
            raise SystemExit("requestor: the replier never came up")
        requestor.post(requestor.go)
        if not requestor.done.wait(TIMEOUT):
            raise SystemExit("requestor: round trips did not finish")
        times = sorted(requestor.times[requestor.warmup :])
        _say("RTT", percentile(times, 50) / 1000, percentile(times, 99) / 1000, requestor.lost)


# ============================================================= process roles: raw

_PREFIX = struct.Struct(">I")
_PACK = msgpack.Packer(use_bin_type=True).pack  # one packer, as the link protocol keeps


def _notify_frame(i: int, seq: int, pack: Any = _PACK) -> bytes:
    # The frame a link sends: [NOTIFY=21, seq, key id, body], body = the wire form.
    body = pack((21, seq, 0, (SUBJECT, 1_700_000_000_000 + i, i, PAYLOAD)))
    return _PREFIX.pack(len(body)) + body


class _Frames:
    """Length-prefixed msgpack frames from a byte stream, with one streaming
    Unpacker (the same technique the link protocol uses)."""

    def __init__(self) -> None:
        self.unpacker = msgpack.Unpacker(use_list=False, raw=False)
        self.buffered = 0
        self.need = -1

    def feed(self, data: bytes) -> list[Any]:
        unpacker = self.unpacker
        unpacker.feed(data)
        buffered = self.buffered + len(data)
        need = self.need
        frames = []
        while True:
            if need < 0:
                if buffered < 4:
                    break
                need = _PREFIX.unpack(unpacker.read_bytes(4))[0]
                buffered -= 4
            if buffered < need:
                break
            frames.append(unpacker.unpack())
            buffered -= need
            need = -1
        self.buffered, self.need = buffered, need
        return frames


class _CountingProtocol(asyncio.Protocol):
    def __init__(self, n: int, done: asyncio.Future[int]) -> None:
        self.n = n
        self.done = done
        self.count = 0
        self.frames = _Frames()

    def data_received(self, data: bytes) -> None:
        count = self.count
        for frame in self.frames.feed(data):
            if frame[0] == 21:
                count += 1
            elif frame[0] == 26:
                count += len(frame[3])
        self.count = count
        if count >= self.n and not self.done.done():
            self.done.set_result(time.monotonic_ns())


def role_raw_sink(n: int) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        server = await loop.create_server(lambda: _CountingProtocol(n, done), "127.0.0.1", 0)
        _say("PORT", server.sockets[0].getsockname()[1])
        t_last = await asyncio.wait_for(done, TIMEOUT)
        _say("DONE", t_last, n)
        server.close()
        await server.wait_closed()

    asyncio.set_event_loop(_uvloop())
    asyncio.get_event_loop().run_until_complete(run())


def _run_frame(first: int, seq: int, count: int, pack: Any = _PACK) -> bytes:
    # [NOTIFY_RUN=26, seq, key id, [body, ...]]: ``count`` messages from ``first``
    bodies = [(SUBJECT, 1_700_000_000_000 + i, i, PAYLOAD) for i in range(first, first + count)]
    body = pack((26, seq, 0, bodies))
    return _PREFIX.pack(len(body)) + body


def role_raw_source(n: int, port: int, batch: int, packb: int = 0, runs: int = 0) -> None:
    pack = msgpack.packb if packb else _PACK

    async def run() -> None:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        values = list(range(n))
        t0 = time.monotonic_ns()
        if runs:  # each ``batch`` messages in one NOTIFY_RUN frame, one write each
            for first in range(0, n, batch):
                writer.write(_run_frame(first, first + 1, min(batch, n - first), pack))
                await writer.drain()
        else:
            frames: list[bytes] = []
            for i in values:
                frames.append(_notify_frame(i, i + 1, pack))
                if len(frames) >= batch:
                    writer.write(b"".join(frames))
                    frames.clear()
                    await writer.drain()
            if frames:
                writer.write(b"".join(frames))
            await writer.drain()
        _say("SENT", t0, time.monotonic_ns())
        await loop.run_in_executor(None, sys.stdin.read)
        writer.close()
        await writer.wait_closed()

    loop = _uvloop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(run())


class _EchoProtocol(asyncio.Protocol):
    """Answers every request frame with a reply frame (as a replier node would)."""

    def __init__(self) -> None:
        self.frames = _Frames()
        self.transport: Any = None
        self.seq = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        out = []
        for frame in self.frames.feed(data):
            # [REQUEST=22, seq, kid, request_id, (subject, ts, value)]
            #   -> [REPLY=24, seq, kid, request_id, status, (mask, subject, ts, status, value)]
            self.seq += 1
            body = frame[4]
            reply = _PACK((24, self.seq, 1, frame[3], 0, (0, body[0], body[1], 0, body[2])))
            out.append(_PREFIX.pack(len(reply)) + reply)
        if out:
            self.transport.write(b"".join(out))


class _SpinPark:
    """What a spin+park selector does, for the raw roles: a callback that
    reschedules itself with ``call_soon`` keeps the loop polling with timeout 0;
    after ``SPIN_LIMIT`` polls in a row with nothing received it polls every
    ``PARK_TIME_NS`` (rounded up to whole milliseconds, as the selector does)
    with ``call_later`` instead.  The protocol sets ``active`` when it reads."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.active = False
        self.running = True
        self.idle = 0
        self.delay = max(1, math.ceil(PARK_TIME_NS / 1_000_000)) / 1000
        self._call_soon = loop.call_soon
        self._call_later = loop.call_later
        loop.call_soon(self.poll)

    def poll(self) -> None:
        if not self.running:
            return
        if self.active:
            self.active = False
            self.idle = 0
        elif self.idle < SPIN_LIMIT:
            self.idle += 1
        else:
            self._call_later(self.delay, self.poll)
            return
        self._call_soon(self.poll)


class _MarksActivity:
    """Mixed in before a protocol on a polling loop: marks activity, as a link
    does when it reads."""

    def __init__(self, poller: _SpinPark) -> None:
        super().__init__()
        self.poller = poller

    def data_received(self, data: bytes) -> None:
        self.poller.active = True
        super().data_received(data)  # type: ignore[misc]


class _SpinningEcho(_MarksActivity, _EchoProtocol):
    """The echo on a polling loop."""


def role_raw_replier(spin: int = 0) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        if spin:
            poller = _SpinPark(loop)
            server = await loop.create_server(lambda: _SpinningEcho(poller), "127.0.0.1", 0)
        else:
            server = await loop.create_server(_EchoProtocol, "127.0.0.1", 0)
        _say("PORT", server.sockets[0].getsockname()[1])
        await loop.run_in_executor(None, sys.stdin.read)
        if spin:
            poller.running = False
        server.close()
        await server.wait_closed()

    loop = _uvloop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(run())


class _AskingProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.frames = _Frames()
        self.waiter: asyncio.Future[Any] | None = None

    def data_received(self, data: bytes) -> None:
        for frame in self.frames.feed(data):
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(frame)


class _SpinningAsker(_MarksActivity, _AskingProtocol):
    """The asking side on a polling loop."""


def role_raw_requestor(n: int, port: int, spin: int = 0) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        poller = _SpinPark(loop) if spin else None
        transport, proto = await loop.create_connection(
            (lambda: _SpinningAsker(poller)) if poller is not None else _AskingProtocol,
            "127.0.0.1",
            port,
        )
        warmup = max(n // 10, 100)
        times: list[int] = []
        for i in range(n + warmup):
            start = time.perf_counter_ns()
            body = (SUBJECT, 1_700_000_000_000 + i, i)
            frame = _PACK((22, i + 1, 0, i, body))
            proto.waiter = loop.create_future()
            transport.write(_PREFIX.pack(len(frame)) + frame)
            await proto.waiter
            times.append(time.perf_counter_ns() - start)
        if poller is not None:
            poller.running = False
        transport.close()
        got = sorted(times[warmup:])
        _say("RTT", percentile(got, 50) / 1000, percentile(got, 99) / 1000, 0)

    loop = _uvloop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(run())


# ============================================ process roles: raw, with worker threads
#
# The raw echo in the default bus's shape: each node's event loop runs on an I/O
# thread that hands every frame it reads to a worker thread over a SimpleQueue
# (the frames of a read all queued before the loop waits again, as a link's held
# wake-ups do), and the worker writes its frame on the socket itself (a link's
# direct write).  No framework code: what is left of the difference to the plain
# raw echo is what a thread hand-off costs on this host, the floor under any
# design that runs the actors on threads of their own.


class _HandingProtocol(asyncio.Protocol):
    """Puts ``(socket fd, frame)`` on ``to_worker`` for every frame it reads."""

    def __init__(self, to_worker: queue.SimpleQueue[tuple[int, Any] | None]) -> None:
        self.frames = _Frames()
        self.to_worker = to_worker
        self.fd = -1

    def connection_made(self, transport: Any) -> None:
        self.fd = transport.get_extra_info("socket").fileno()

    def data_received(self, data: bytes) -> None:
        put, fd = self.to_worker.put, self.fd
        for frame in self.frames.feed(data):
            put((fd, frame))


def _write_frame(fd: int, body: bytes) -> None:
    """Write one frame on the (non-blocking) socket from a worker thread."""
    data = _PREFIX.pack(len(body)) + body
    if os.write(fd, data) != len(data):  # a few dozen bytes into an idle socket
        raise RuntimeError("raw threaded baseline: short write")


def _loop_thread(loop: asyncio.AbstractEventLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run_forever, name="io", daemon=True)
    thread.start()
    return thread


def _stop_loop(loop: asyncio.AbstractEventLoop, io: threading.Thread, *closing: Any) -> None:
    for thing in closing:
        loop.call_soon_threadsafe(thing.close)
    loop.call_soon_threadsafe(loop.stop)
    io.join(TIMEOUT)
    loop.close()


def role_rawthread_replier() -> None:
    loop = _uvloop()
    to_worker: queue.SimpleQueue[tuple[int, Any] | None] = queue.SimpleQueue()
    server = loop.run_until_complete(
        loop.create_server(lambda: _HandingProtocol(to_worker), "127.0.0.1", 0)
    )
    io = _loop_thread(loop)

    def work() -> None:
        seq = 0
        while (item := to_worker.get()) is not None:
            fd, frame = item  # as _EchoProtocol answers
            seq += 1
            body = frame[4]
            _write_frame(fd, _PACK((24, seq, 1, frame[3], 0, (0, body[0], body[1], 0, body[2]))))

    worker = threading.Thread(target=work, name="worker")
    worker.start()
    _say("PORT", server.sockets[0].getsockname()[1])
    sys.stdin.read()
    to_worker.put(None)
    worker.join(TIMEOUT)
    _stop_loop(loop, io, server)


def role_rawthread_requestor(n: int, port: int) -> None:
    loop = _uvloop()
    replies: queue.SimpleQueue[tuple[int, Any] | None] = queue.SimpleQueue()
    transport, proto = loop.run_until_complete(
        loop.create_connection(lambda: _HandingProtocol(replies), "127.0.0.1", port)
    )
    io = _loop_thread(loop)
    warmup = max(n // 10, 100)
    times: list[int] = []
    get, fd = replies.get, proto.fd
    for i in range(n + warmup):  # this thread is the requestor's worker
        start = time.perf_counter_ns()
        _write_frame(fd, _PACK((22, i + 1, 0, i, (SUBJECT, 1_700_000_000_000 + i, i))))
        get()
        times.append(time.perf_counter_ns() - start)
    _stop_loop(loop, io, transport)
    got = sorted(times[warmup:])
    _say("RTT", percentile(got, 50) / 1000, percentile(got, 99) / 1000, 0)


# ==================================================================== the parent


class _Proc(RoleProc):
    """A role of this script in a subprocess, pinned to CPU ``cpu`` if given."""

    script = __file__

    def __init__(self, *args: object, cpu: int | None = None) -> None:
        # pinned by _role() before anything else runs
        super().__init__(*args, env=None if cpu is None else {_CPU_ENV: str(cpu)})


def _one_way(
    kind: str, n: int, batch: int = BATCH, packb: bool = False, runs: bool = False
) -> float:
    """Notifications per second from a source process to a sink process."""
    with _Proc(f"{kind}-sink", n) as sink:
        port = int(sink.expect("PORT")[0])
        extra = (batch, int(packb), int(runs)) if kind == "raw" else ()
        with _Proc(f"{kind}-source", n, port, *extra) as source:
            t0, _ = map(int, source.expect("SENT"))
            t_last, _count = map(int, sink.expect("DONE"))
    return n / ((t_last - t0) / 1e9)


def _round_trip(kind: str, n: int, cpu: int | None = None) -> tuple[float, float, int]:
    """(p50 us, p99 us, requests lost) of ``n`` sequential round trips; with
    ``cpu``, every thread of both processes on that CPU."""
    with _Proc(f"{kind}-replier", cpu=cpu) as replier:
        port = int(replier.expect("PORT")[0])
        with _Proc(f"{kind}-requestor", n, port, cpu=cpu) as requestor:
            p50, p99, lost = requestor.expect("RTT")
    return float(p50), float(p99), int(lost)


#: the --gil rows: bus (a key of _BUSES) and what the row says about it
_GIL_ROWS = {
    **{f"gil-{kind.value}": f"I/O thread {kind.value}" for kind in _POLLING},
    "gil-shared": "I/O on a spin+park asyncio loop",
    **{
        f"gil-d{kind.value}": f"blocking I/O thread, actors' dispatcher {kind.value}"
        for kind in (DispatcherKind.SPIN_PARK, DispatcherKind.SPIN_YIELD)
    },
}


_LOOP_NOTE = "receiving actors on an asyncio dispatcher whose loop the link shares"
_RAWTHREAD_NOTE = (
    "the raw echo in the default bus's shape: each node's loop thread hands every "
    "frame to a worker thread (SimpleQueue), which writes its frame on the socket"
)
_LOOP_NOTE_ONE_WAY = (
    f"{_LOOP_NOTE} (for latency: one thread reads, decodes and runs the subscriber)"
)


def main(argv: list[str] | None = None) -> list[Row]:
    """Run the benchmark, print a table, return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--gil",
        action="store_true",
        help="add round trips of threaded actors with polling I/O threads (the GIL's cost)",
    )
    parser.add_argument(
        "--halt-poll-ns",
        type=int,
        metavar="NS",
        help="add rows (e): round trips with idle vCPUs polling NS before they halt "
        "(sets the haltpoll guest_halt_poll_ns for those rows; root)",
    )
    args = parser.parse_args(argv)
    if args.halt_poll_ns is not None:
        problem = _halt_poll_problem(args.halt_poll_ns)
        if problem:
            parser.error(problem)
    n_notify = 50_000 if args.quick else 200_000
    n_rtt = 2_000 if args.quick else 10_000
    rounds = 1 if args.quick else args.rounds

    ours_rate, loop_rate, raw_rate, raw_packb, raw_single, raw_runs = [], [], [], [], [], []
    auth_rate: list[float] = []
    tls_rate: list[float] = []
    with _tls_files() as has_tls:
        for _ in range(rounds):
            ours_rate.append(_one_way("ours", n_notify))
            auth_rate.append(_one_way("auth", n_notify))
            if has_tls:
                tls_rate.append(_one_way("tls", n_notify))
            loop_rate.append(_one_way("loop", n_notify))
            raw_rate.append(_one_way("raw", n_notify, BATCH))
            raw_packb.append(_one_way("raw", n_notify, BATCH, packb=True))
            raw_runs.append(_one_way("raw", n_notify, BATCH, runs=True))
            raw_single.append(_one_way("raw", n_notify, 1))
    ours_rtt, loop_rtt, raw_rtt, rawthread_rtt = [], [], [], []
    for _ in range(rounds):
        ours_rtt.append(_round_trip("ours", n_rtt))
        loop_rtt.append(_round_trip("loop", n_rtt))
        raw_rtt.append(_round_trip("raw", n_rtt))
        rawthread_rtt.append(_round_trip("rawthread", n_rtt))
    # The polling rows after the others (a polling process keeps a CPU busy, which
    # changes what the next process pays to wake one), interleaved with their own
    # baselines: (c) with the raw polling loops, --gil with the default bus.
    park_rtt, rawspin_rtt, gil_base = [], [], []
    gil_rtt: dict[str, list[tuple[float, float, int]]] = {k: [] for k in _GIL_ROWS}
    for _ in range(rounds):
        park_rtt.append(_round_trip("park", n_rtt))
        rawspin_rtt.append(_round_trip("rawspin", n_rtt))
        if args.gil:
            gil_base.append(_round_trip("ours", n_rtt))
            for bus, results in gil_rtt.items():
                results.append(_round_trip(bus, n_rtt))

    # (d) both processes on one CPU, after the polling rows for the same reason
    one_cpu = _one_cpu()
    pinned: dict[str, list[tuple[float, float, int]]] = {
        "ours": [],
        "loop": [],
        "raw": [],
        "rawthread": [],
    }
    if one_cpu is not None:
        for _ in range(rounds):
            for kind, results in pinned.items():
                results.append(_round_trip(kind, n_rtt, cpu=one_cpu))

    # (e) idle vCPUs polling: last, since it changes what every process pays to wake
    polled: dict[str, list[tuple[float, float, int]]] = {
        "raw": [],
        "rawthread": [],
        "ours": [],
        "loop": [],
    }
    if args.halt_poll_ns is not None:
        with _halt_poll(args.halt_poll_ns):
            for _ in range(rounds):
                for kind, results in polled.items():
                    results.append(_round_trip(kind, n_rtt))

    base, single, base_packb = max(raw_rate), max(raw_single), max(raw_packb)
    base_runs = max(raw_runs)
    raw_p = best_of(raw_rtt, key=lambda r: r[0], lowest=True)
    note = f"N={n_notify}, best of {rounds}; 2 processes on 127.0.0.1"
    rows: list[Row] = []
    for kind, rates, label in (
        ("ours", ours_rate, "one-way notify, link (pub -> sub actor)"),
        ("loop", loop_rate, "one-way notify, sub actor on the link's loop"),
    ):
        rate = max(rates)
        rows.append(
            row(
                label,
                rate,
                "msg/s",
                baseline_name=f"raw uvloop, {BATCH} frames/write",
                baseline_value=base,
                budget=">= 0.40x" if kind == "ours" else "",
                ok=rate >= 0.40 * base if kind == "ours" else None,
                note=note if kind == "ours" else f"{note}; {_LOOP_NOTE_ONE_WAY}",
            )
        )
    rate = max(ours_rate)
    rows += [
        row(
            "one-way notify, authenticated link (pub -> sub actor)",
            max(auth_rate),
            "msg/s",
            baseline_name="the same link without a secret",
            baseline_value=rate,
            note=f"{note}; both nodes hold a secret: the logon proves it (CHALLENGE/PROOF), "
            "nothing after the logon changes",
        ),
        *(
            [
                row(
                    "one-way notify, TLS link (pub -> sub actor)",
                    max(tls_rate),
                    "msg/s",
                    baseline_name="the same link without TLS",
                    baseline_value=rate,
                    budget=">= 0.80x",
                    ok=max(tls_rate) >= 0.80 * rate,
                    note=f"{note}; TLS 1.3 (ECDSA P-256 certificate), the client verifying "
                    "it: records are made and read in C, the Python work per message "
                    "is the plain link's",
                )
            ]
            if tls_rate
            else []
        ),
        row(
            "one-way notify, link (pub -> sub actor)",
            rate,
            "msg/s",
            baseline_name=f"raw uvloop, {BATCH}/write, packb()",
            baseline_value=base_packb,
            note="the raw sender calls msgpack.packb per frame instead of keeping a Packer",
        ),
        row(
            "one-way notify, link (pub -> sub actor)",
            rate,
            "msg/s",
            baseline_name=f"raw uvloop, {BATCH} per NOTIFY_RUN frame",
            baseline_value=base_runs,
            note=f"the raw sender puts each {BATCH} messages in one NOTIFY_RUN frame (one "
            "write each), as the link does with the runs it finds waiting: the raw floor of "
            "the link's own framing",
        ),
        row(
            "one-way notify, link (pub -> sub actor)",
            rate,
            "msg/s",
            baseline_name="raw uvloop, 1 frame/write",
            baseline_value=single,
            note=note,
        ),
    ]
    for kind, results, label in (
        ("ours", ours_rtt, "request/reply round trip {} (actors)"),
        ("loop", loop_rtt, "request/reply round trip {}, actors on the link's loop"),
    ):
        ours_p = best_of(results, key=lambda r: r[0], lowest=True)
        where = "" if kind == "ours" else f"; {_LOOP_NOTE}"
        rows += [
            row(
                label.format("p50"),
                ours_p[0],
                "us",
                baseline_name="raw uvloop request/reply p50",
                baseline_value=raw_p[0],
                budget="<= 2.0x",
                ok=ours_p[0] <= 2.0 * raw_p[0],
                note=f"{n_rtt} sequential round trips, best of {rounds}; "
                f"lost requests: {sum(r[2] for r in results)}{where}",
            ),
            row(
                label.format("p99"),
                ours_p[1],
                "us",
                baseline_name="raw uvloop request/reply p99",
                baseline_value=raw_p[1],
                note="same runs as p50",
            ),
        ]
    # The threaded floor: the raw echo with a worker thread per node, against the
    # plain raw echo (what the two hand-offs cost) and under the default bus (what
    # our code costs on top of them).
    rawthread_p = best_of(rawthread_rtt, key=lambda r: r[0], lowest=True)
    ours_p = best_of(ours_rtt, key=lambda r: r[0], lowest=True)
    rows += [
        row(
            "request/reply round trip p50, raw uvloop, a worker thread per node",
            rawthread_p[0],
            "us",
            baseline_name="raw uvloop request/reply p50",
            baseline_value=raw_p[0],
            note=f"{_RAWTHREAD_NOTE}; the ratio is what two thread hand-offs cost here; "
            f"best of {rounds}",
        ),
        row(
            "request/reply round trip p50 (actors)",
            ours_p[0],
            "us",
            baseline_name="raw uvloop request/reply p50, a worker thread per node",
            baseline_value=rawthread_p[0],
            note="the default bus against the raw echo of the same shape: the ratio is "
            "what our code costs on top of the hand-offs; no budget",
        ),
    ]
    park_p = best_of(park_rtt, key=lambda r: r[0], lowest=True)
    rawspin_p = best_of(rawspin_rtt, key=lambda r: r[0], lowest=True)
    spin_note = (
        f"selectors spin+park on both nodes (spinLimit {SPIN_LIMIT}, parkTime "
        f"{PARK_TIME_NS} ns); the raw loops poll the same way; a busy core per node"
    )
    rows += [
        row(
            "request/reply round trip p50, actors on the link's loop, spin+park",
            park_p[0],
            "us",
            baseline_name="raw uvloop request/reply p50, loops polling (spin+park)",
            baseline_value=rawspin_p[0],
            note=f"{n_rtt} sequential round trips, best of {rounds}; lost requests: "
            f"{sum(r[2] for r in park_rtt)}; {_LOOP_NOTE}; {spin_note}",
        ),
        row(
            "request/reply round trip p99, actors on the link's loop, spin+park",
            park_p[1],
            "us",
            baseline_name="raw uvloop request/reply p99, loops polling (spin+park)",
            baseline_value=rawspin_p[1],
            note="same runs as p50",
        ),
    ]
    if one_cpu is not None:
        rows += _condition_rows(
            pinned,
            "one CPU",
            f"both processes pinned to CPU {one_cpu}: no wake-up of a halted vCPU, so "
            "these ratios show our Python and hand-offs",
            rounds,
        )
    if args.halt_poll_ns is not None:
        rows += _condition_rows(
            polled,
            f"idle vCPUs poll {args.halt_poll_ns / 1000:g} us",
            f"guest_halt_poll_ns={args.halt_poll_ns} for these rows: an idle vCPU polls "
            "before it halts, so a woken thread costs no wake-up of a halted vCPU",
            rounds,
        )
    if args.gil:
        base_p = best_of(gil_base, key=lambda r: r[0], lowest=True)
        for bus, results in gil_rtt.items():
            gil_p = best_of(results, key=lambda r: r[0], lowest=True)
            polling_worker = bus.startswith("gil-d")
            why = (
                "each polling worker gives the GIL up after every empty poll, and keeps "
                "a core busy while it polls"
                if polling_worker
                else "the polling loop takes the GIL on every poll and the actors' "
                "threads wait for it"
            )
            what = f"request/reply round trip {{}} (threaded actors), {_GIL_ROWS[bus]}"
            rows += [
                row(
                    what.format(label),
                    value,
                    "us",
                    baseline_name=f"the default bus (all blocking), {label}",
                    baseline_value=base_value,
                    note=f"both nodes so; {why}; best of {rounds}, interleaved with the "
                    f"default bus's; lost requests: {sum(r[2] for r in results)}",
                )
                for label, value, base_value in (
                    ("p50", gil_p[0], base_p[0]),
                    ("p99", gil_p[1], base_p[1]),
                )
            ]
            if polling_worker:
                rows.append(
                    row(
                        what.format("p50"),
                        gil_p[0],
                        "us",
                        baseline_name="raw uvloop request/reply p50",
                        baseline_value=raw_p[0],
                        note="no budget: the raw loops sleep in epoll, our workers poll",
                    )
                )
    print_table(rows)
    return rows


def _condition_rows(
    runs: dict[str, list[tuple[float, float, int]]], where: str, why: str, rounds: int
) -> list[Row]:
    """Rows (d) and (e): the round-trip p50 of the raw echo with a worker thread
    per node, the default bus and the shared loop, each against the raw echo,
    all run under one condition (``where``)."""
    raw_p50 = best_of(runs["raw"], key=lambda r: r[0], lowest=True)[0]
    return [
        row(
            f"request/reply round trip p50, {where}{label}",
            best_of(runs[kind], key=lambda r: r[0], lowest=True)[0],
            "us",
            baseline_name=f"raw uvloop request/reply p50, {where}",
            baseline_value=raw_p50,
            note=f"{why}; no budget; best of {rounds}; lost requests: "
            f"{sum(r[2] for r in runs[kind])}",
        )
        for kind, label in (
            ("rawthread", ", raw, a worker thread per node"),
            ("ours", " (actors)"),
            ("loop", ", actors on the link's loop"),
        )
    ]


#: environment variable naming the CPU a role process pins itself to (rows (d))
_CPU_ENV = "ACTORBUS_BENCH_CPU"


def _one_cpu() -> int | None:
    """The CPU for rows (d): the first one this process may use; None where threads
    cannot be pinned (not Linux) or only one CPU is usable anyway."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0] if len(cpus) > 1 else None


#: the guest kernel's idle-poll time (cpuidle driver haltpoll), rows (e)
_HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


def _halt_poll_problem(ns: int) -> str | None:
    """Why ``--halt-poll-ns`` cannot be used here, or None."""
    if ns < 0:
        return f"--halt-poll-ns must be >= 0 nanoseconds, got {ns}"
    if not _HALT_POLL.exists():
        return (
            f"--halt-poll-ns needs a guest kernel with the haltpoll cpuidle driver "
            f"({_HALT_POLL} does not exist); on bare metal, boot with idle=poll instead "
            "and run without the option"
        )
    if not os.access(_HALT_POLL, os.W_OK):
        return f"--halt-poll-ns writes {_HALT_POLL}: run as root"
    return None


@contextlib.contextmanager
def _halt_poll(ns: int) -> Iterator[None]:
    """Set ``guest_halt_poll_ns`` to ``ns`` for the block; the previous value
    comes back however the block ends."""
    before = _HALT_POLL.read_text().strip()
    _HALT_POLL.write_text(str(ns))
    try:
        yield
    finally:
        _HALT_POLL.write_text(before)


def _role(argv: list[str]) -> None:
    cpu = os.environ.get(_CPU_ENV)
    if cpu is not None:  # before any thread exists: every thread inherits it
        os.sched_setaffinity(0, {int(cpu)})
    role, *rest = argv
    values = [int(v) for v in rest]
    bus, _, what = role.rpartition("-")
    if bus in _BUSES:
        config = _BUSES[bus]
        secret = _SECRET if bus == "auth" else None
        tls = bus == "tls"
        if what == "sink":
            role_ours_sink(*values, config=config, secret=secret, tls=tls)
        elif what == "source":
            role_ours_source(*values, secret=secret, tls=tls)
        elif what == "replier":
            role_ours_replier(config)
        elif what == "requestor":
            role_ours_requestor(*values, config=config)
        else:
            raise SystemExit(f"unknown role {role!r}")
    elif role == "raw-sink":
        role_raw_sink(*values)
    elif role == "raw-source":
        role_raw_source(*values)
    elif role in ("raw-replier", "rawspin-replier"):
        role_raw_replier(spin=int(bus == "rawspin"))
    elif role in ("raw-requestor", "rawspin-requestor"):
        role_raw_requestor(*values, spin=int(bus == "rawspin"))
    elif role == "rawthread-replier":
        role_rawthread_replier()
    elif role == "rawthread-requestor":
        role_rawthread_requestor(*values)
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        _role(sys.argv[2:])
    else:
        main()
