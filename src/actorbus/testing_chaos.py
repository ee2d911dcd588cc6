"""A fault-injecting TCP proxy for reliability tests (loopback only).

Theory of operation
-------------------
A :class:`ChaosProxy` sits between two nodes: the dialling node connects to the
proxy's port instead of the service, and the proxy dials the real service for
every connection it accepts.  It runs its own asyncio loop on its own thread
(``actorbus-chaos-<name>``), so the nodes under test never share a loop with
it; :meth:`ChaosProxy.start` returns once it listens and :meth:`ChaosProxy.stop`
returns once every socket is closed and the thread has ended.

Each connection is a pair of pumps, one per direction.  A pump reads what one
side sent and writes it to the other in order; on the way it may

* **slice** a chunk into several writes at random points (each its own TCP
  segment: ``TCP_NODELAY`` is set and the pump yields between pieces), so the
  receiver's parser sees frames and length prefixes cut anywhere;
* **delay** a chunk by a random time (order is kept: the pump waits).

The schedule (:class:`ChaosSchedule`) adds, at seeded random times,

* **resets** — every connection is aborted with ``SO_LINGER`` 0, so both ends
  get an RST and whatever the proxy or the kernels held is lost;
* **blackholes** — for a while every byte in both directions is read and
  thrown away while both sockets stay open, as a network partition looks to
  the two ends: no EOF, no RST, just silence.  A connection that lost bytes
  this way never forwards again (TCP would never deliver a stream with a hole
  in it); when one of its ends gives up and closes after the blackhole, the
  other end is reset, as a healed network answers a dead connection.  New
  connections made during a blackhole wait until it ends before the proxy
  dials the service (their SYN "gets through" late).

Randomness comes from ``random.Random`` seeded from :attr:`ChaosSchedule.seed`
(one stream for the schedule, one per connection and direction), so a failing
run can be repeated with the same seed.  What was injected is counted in
:attr:`ChaosProxy.counts` and logged with times in :attr:`ChaosProxy.log`.

Only loopback and addresses the test itself created may be used: the proxy
binds ``127.0.0.1`` by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from .errors import UsageError
from .testing import EventLog

__all__ = ["ChaosCounts", "ChaosProxy", "ChaosSchedule"]

#: Bytes read from a socket at a time.
_READ_SIZE: Final = 65_536
#: How long the proxy waits for the service to accept its dial.
_DIAL_TIMEOUT: Final = 5.0

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ChaosSchedule:
    """What a :class:`ChaosProxy` does, and how often.  Times are seconds; 0 = never.

    Intervals are drawn uniformly from ``mean * (1 - jitter) .. mean * (1 + jitter)``.
    """

    #: Seeds every random choice of the proxy (print it with the test's output).
    seed: int = 0
    #: Mean time between resets of every open connection.
    reset_interval: float = 0.0
    #: Mean time between blackholes.
    blackhole_interval: float = 0.0
    #: How long a blackhole lasts (make it longer than the heartbeat timeout to
    #: see links time out, shorter to see them ride it out).
    blackhole_duration: float = 0.0
    #: Chance that a chunk read from one side is cut into several writes.
    slice_probability: float = 0.0
    #: Most pieces a sliced chunk is cut into.
    max_pieces: int = 8
    #: Chance that a chunk is held back before it is written.
    delay_probability: float = 0.0
    #: Longest hold-back of one chunk.
    max_delay: float = 0.0
    #: Relative spread of the intervals around their mean (0 = exactly periodic).
    jitter: float = 0.5

    def __post_init__(self) -> None:
        for name in (
            "reset_interval",
            "blackhole_interval",
            "blackhole_duration",
            "max_delay",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise UsageError(f"ChaosSchedule.{name}={value!r}: expected seconds >= 0")
        for name in ("slice_probability", "delay_probability", "jitter"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise UsageError(f"ChaosSchedule.{name}={value!r}: expected a number in 0..1")
        if not isinstance(self.max_pieces, int) or self.max_pieces < 2:
            raise UsageError(f"ChaosSchedule.max_pieces={self.max_pieces!r}: expected an int >= 2")
        if self.blackhole_interval and not self.blackhole_duration:
            raise UsageError(
                "ChaosSchedule: blackhole_interval is set but blackhole_duration is 0; "
                "say how long each blackhole lasts"
            )


@dataclass(frozen=True, slots=True)
class ChaosCounts:
    """What a :class:`ChaosProxy` has done so far."""

    #: Connections accepted from the dialling side.
    connections: int = 0
    #: Connections aborted with an RST by a scheduled or manual reset.
    resets: int = 0
    #: Blackhole periods started.
    blackholes: int = 0
    #: Connections that lost bytes to a blackhole (and never forwarded again).
    blackholed_connections: int = 0
    #: Chunks cut into several writes, and the writes they became.
    slices: int = 0
    pieces: int = 0
    #: Chunks held back before writing.
    delays: int = 0
    #: Bytes passed on to the other side (counted as the write starts), and
    #: bytes thrown away.
    bytes_forwarded: int = 0
    bytes_swallowed: int = 0

    @property
    def faults(self) -> int:
        """Every fault injected: resets, blackholes, slices and delays."""
        return self.resets + self.blackholes + self.slices + self.delays


@dataclass(slots=True)
class _Counters:
    connections: int = 0
    resets: int = 0
    blackholes: int = 0
    blackholed_connections: int = 0
    slices: int = 0
    pieces: int = 0
    delays: int = 0
    bytes_forwarded: int = 0
    bytes_swallowed: int = 0

    def snapshot(self) -> ChaosCounts:
        return ChaosCounts(
            connections=self.connections,
            resets=self.resets,
            blackholes=self.blackholes,
            blackholed_connections=self.blackholed_connections,
            slices=self.slices,
            pieces=self.pieces,
            delays=self.delays,
            bytes_forwarded=self.bytes_forwarded,
            bytes_swallowed=self.bytes_swallowed,
        )


@dataclass(eq=False)
class _Conn:
    """One proxied connection: the dialler's side and the service's side."""

    index: int
    client: asyncio.StreamWriter
    client_reader: asyncio.StreamReader
    server: asyncio.StreamWriter | None = None
    server_reader: asyncio.StreamReader | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)
    #: lost bytes to a blackhole: never forwards again.
    poisoned: bool = False
    #: aborted (by a reset, or because the other side went away).
    dead: bool = False

    def writers(self) -> list[asyncio.StreamWriter]:
        return [w for w in (self.client, self.server) if w is not None]


class ChaosProxy:
    """A TCP proxy that injects faults on a seeded schedule (see the module docstring).

    ``target`` is the ``(host, port)`` of the real service.  Use as a context
    manager, or call :meth:`start` and :meth:`stop`.  Thread-safe: every public
    method may be called from any thread except the proxy's own.
    """

    def __init__(
        self,
        target: tuple[str, int],
        schedule: ChaosSchedule | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "proxy",
    ) -> None:
        self.target = target
        self.schedule = schedule if schedule is not None else ChaosSchedule()
        self.name = name
        #: ``(monotonic time, kind, detail)`` for every fault and connection event.
        self.log = EventLog()
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._counters = _Counters()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._stopped = threading.Event()
        # loop-thread state
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[_Conn] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._scheduler: asyncio.Task[None] | None = None
        self._blackhole_end: asyncio.TimerHandle | None = None
        self._healed: asyncio.Event | None = None
        self._closing = False
        self._next_index = 0

    def __repr__(self) -> str:
        return f"<ChaosProxy {self.name} :{self._port} -> {self.target[0]}:{self.target[1]}>"

    # ------------------------------------------------------------------ public

    @property
    def port(self) -> int:
        """The port the proxy listens on (valid after :meth:`start`)."""
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` to dial instead of the service."""
        return (self._host, self._port)

    @property
    def counts(self) -> ChaosCounts:
        """A snapshot of what was injected so far."""
        with self._lock:
            return self._counters.snapshot()

    @property
    def blackholed(self) -> bool:
        """True while a blackhole is in effect."""
        healed = self._healed
        return healed is not None and not healed.is_set()

    def start(self, timeout: float = 5.0) -> ChaosProxy:
        """Start listening; returns once the port is bound (``self``, for chaining)."""
        if self._thread is not None:
            raise UsageError(f"{self!r} was already started; make a new proxy")
        self._thread = threading.Thread(
            target=self._run, name=f"actorbus-chaos-{self.name}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"{self!r} did not start within {timeout:g} s")
        if self._startup_error is not None:
            self._thread.join(timeout)
            raise self._startup_error
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listener and every connection (with an RST), end the thread.

        Idempotent."""
        thread = self._thread
        if thread is None or self._stopped.is_set():
            if thread is not None:
                thread.join(timeout)
            return
        self._await(self._shutdown(), timeout)
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"{self!r}: its thread did not end within {timeout:g} s")

    def __enter__(self) -> ChaosProxy:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self, timeout: float = 5.0) -> int:
        """Reset every open connection now; return how many were reset."""
        return self._call(self._reset_all_now, timeout)

    def blackhole(self, duration: float, timeout: float = 5.0) -> None:
        """Start a blackhole of ``duration`` seconds now (extends one in progress)."""
        if not 0 < duration < float("inf"):
            raise UsageError(f"blackhole(duration={duration!r}): expected seconds > 0")
        self._call(self._start_blackhole_now, timeout, duration)

    def calm(self, timeout: float = 5.0) -> None:
        """Stop the schedule (no more resets, blackholes, slices or delays) and end
        a blackhole in progress.  Connections that lost bytes stay dead."""
        self._call(self._calm_now, timeout)

    def wait_for_connections(self, count: int, timeout: float = 5.0) -> None:
        """Block until the proxy has accepted ``count`` connections in total."""
        self.log.wait_for(
            lambda items: sum(1 for e in items if e[1] == "connect") >= count, timeout
        )

    # ------------------------------------------------------------- plumbing

    def _call(self, fn: Callable[..., T], timeout: float, *args: Any) -> T:
        """Run ``fn(*args)`` on the loop thread and return its result."""
        return self._await(_as_coroutine(fn, *args), timeout)

    def _await(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop thread and return its result."""
        loop = self._loop
        if loop is None or self._stopped.is_set():
            coro.close()
            raise UsageError(f"{self!r} is not running; start() it first")
        if self._thread is threading.current_thread():
            coro.close()
            raise UsageError(f"{self!r}: called from its own thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def _note(self, kind: str, detail: str = "") -> None:
        self.log.append((time.monotonic(), kind, detail))

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:  # reported to start(), which re-raises it
                self._startup_error = exc
                self._ready.set()
                return
            self._ready.set()
            loop.run_forever()
        finally:
            with contextlib.suppress(RuntimeError):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._stopped.set()
            self._ready.set()

    async def _open(self) -> None:
        self._healed = asyncio.Event()
        self._healed.set()
        self._server = await asyncio.start_server(self._accept, self._host, self._port)
        sockets = self._server.sockets
        self._port = sockets[0].getsockname()[1]
        schedule = self.schedule
        if schedule.reset_interval or schedule.blackhole_interval:
            self._scheduler = asyncio.get_running_loop().create_task(self._run_schedule())

    async def _shutdown(self) -> None:
        self._closing = True
        if self._scheduler is not None:
            self._scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scheduler
            self._scheduler = None
        self._end_blackhole()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for conn in list(self._conns):
            self._abort(conn)
        while self._handlers:
            await asyncio.gather(*list(self._handlers), return_exceptions=True)
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.stop)

    # ------------------------------------------------------------- schedule

    def _draw(self, rng: random.Random, mean: float) -> float:
        spread = self.schedule.jitter
        return rng.uniform(mean * (1 - spread), mean * (1 + spread))

    async def _run_schedule(self) -> None:
        schedule = self.schedule
        rng = random.Random(schedule.seed)
        loop = asyncio.get_running_loop()
        now = loop.time()
        next_reset = (
            now + self._draw(rng, schedule.reset_interval)
            if schedule.reset_interval
            else float("inf")
        )
        next_blackhole = (
            now + self._draw(rng, schedule.blackhole_interval)
            if schedule.blackhole_interval
            else float("inf")
        )
        while True:
            await asyncio.sleep(max(0.0, min(next_reset, next_blackhole) - loop.time()))
            now = loop.time()
            if now >= next_blackhole:
                self._start_blackhole_now(schedule.blackhole_duration)
                next_blackhole = (
                    now + schedule.blackhole_duration + self._draw(rng, schedule.blackhole_interval)
                )
                # No RST crosses a partition: a reset due during it waits for the end.
                next_reset = max(next_reset, now + schedule.blackhole_duration)
            elif now >= next_reset:
                self._reset_all_now()
                next_reset = now + self._draw(rng, schedule.reset_interval)

    def _calm_now(self) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel()
            self._scheduler = None
        self.schedule = ChaosSchedule(seed=self.schedule.seed)
        self._end_blackhole()
        self._note("calm")

    def _start_blackhole_now(self, duration: float) -> None:
        assert self._healed is not None
        loop = asyncio.get_running_loop()
        if self._blackhole_end is not None:
            self._blackhole_end.cancel()
        if self._healed.is_set():
            self._healed.clear()
            with self._lock:
                self._counters.blackholes += 1
            self._note("blackhole", f"{duration:.3f}s")
        self._blackhole_end = loop.call_later(duration, self._end_blackhole)

    def _end_blackhole(self) -> None:
        if self._blackhole_end is not None:
            self._blackhole_end.cancel()
            self._blackhole_end = None
        healed = self._healed
        if healed is None or healed.is_set():
            return
        healed.set()
        self._note("heal")
        # Ends that gave up during the partition: their peers now get an RST.
        for conn in list(self._conns):
            if conn.poisoned and any(t.done() for t in conn.pumps):
                self._abort(conn)

    def _reset_all_now(self) -> int:
        # (a connection that lost bytes to a blackhole is dead already, only silent)
        conns = [c for c in self._conns if not c.dead and not c.poisoned and c.server is not None]
        for conn in conns:
            self._abort(conn)
        if conns:
            with self._lock:
                self._counters.resets += len(conns)
            self._note("reset", f"{len(conns)} connection(s)")
        return len(conns)

    # ------------------------------------------------------------ connections

    def _abort(self, conn: _Conn) -> None:
        """Close both sides with an RST and stop the pumps."""
        if conn.dead:
            return
        conn.dead = True
        for writer in conn.writers():
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        current = asyncio.current_task()
        for pump in conn.pumps:
            if pump is not current:
                pump.cancel()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        assert self._healed is not None
        self._handlers.add(task)
        conn = _Conn(self._next_index, writer, reader)
        self._next_index += 1
        self._conns.add(conn)
        with self._lock:
            self._counters.connections += 1
        self._note("connect", f"#{conn.index}")
        try:
            if self._closing:
                return
            _no_delay(writer)
            await self._healed.wait()  # a SYN "sent" during a blackhole arrives after it
            if self._closing or conn.dead:
                return
            try:
                server_reader, server_writer = await asyncio.wait_for(
                    asyncio.open_connection(*self.target), _DIAL_TIMEOUT
                )
            except (TimeoutError, OSError) as exc:
                self._note("dial-failed", f"#{conn.index}: {exc}")
                return
            conn.server, conn.server_reader = server_writer, server_reader
            if conn.dead or self._closing:
                return
            _no_delay(server_writer)
            seed = self.schedule.seed * 1_000_003 + conn.index * 2
            conn.pumps = [
                asyncio.ensure_future(self._pump(conn, reader, server_writer, seed)),
                asyncio.ensure_future(self._pump(conn, server_reader, writer, seed + 1)),
            ]
            await asyncio.gather(*conn.pumps, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        finally:
            self._abort_or_close(conn)
            for w in conn.writers():
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await w.wait_closed()
            self._conns.discard(conn)
            self._handlers.discard(task)
            self._note("closed", f"#{conn.index}")

    def _abort_or_close(self, conn: _Conn) -> None:
        if conn.dead:
            for w in conn.writers():
                w.close()
            return
        for w in conn.writers():
            w.close()
        conn.dead = True

    async def _pump(
        self,
        conn: _Conn,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        seed: int,
    ) -> None:
        """Copy one direction, injecting slices and delays; handle EOF and errors."""
        rng = random.Random(seed)
        healed = self._healed
        assert healed is not None
        try:
            while True:
                data = await source.read(_READ_SIZE)
                if not data:
                    await self._source_ended(conn, sink)
                    return
                if conn.poisoned or not healed.is_set():
                    self._swallow(conn, len(data))
                    continue
                schedule = self.schedule
                if schedule.delay_probability and rng.random() < schedule.delay_probability:
                    with self._lock:
                        self._counters.delays += 1
                    await asyncio.sleep(rng.uniform(0.0, schedule.max_delay))
                    if conn.poisoned or not healed.is_set():
                        self._swallow(conn, len(data))
                        continue
                with self._lock:
                    self._counters.bytes_forwarded += len(data)
                if (
                    schedule.slice_probability
                    and len(data) > 1
                    and rng.random() < schedule.slice_probability
                ):
                    pieces = _cut(rng, data, schedule.max_pieces)
                    with self._lock:
                        self._counters.slices += 1
                        self._counters.pieces += len(pieces)
                    for piece in pieces:
                        sink.write(piece)
                        await sink.drain()
                        await asyncio.sleep(0)
                else:
                    sink.write(data)
                    await sink.drain()
        except (ConnectionError, OSError):
            # One side broke (RST, or the kernel gave up): the other gets an RST too.
            self._abort(conn)

    def _swallow(self, conn: _Conn, size: int) -> None:
        with self._lock:
            if not conn.poisoned:
                self._counters.blackholed_connections += 1
            self._counters.bytes_swallowed += size
        conn.poisoned = True

    async def _source_ended(self, conn: _Conn, sink: asyncio.StreamWriter) -> None:
        """EOF from one side: pass it on, unless the connection lost bytes."""
        healed = self._healed
        assert healed is not None
        if not conn.poisoned and healed.is_set():
            if sink.can_write_eof() and not sink.is_closing():
                sink.write_eof()
            return
        # A partition hides the FIN; once it heals, the other end gets an RST.
        await healed.wait()
        self._abort(conn)


async def _as_coroutine(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _cut(rng: random.Random, data: bytes, max_pieces: int) -> list[bytes]:
    """``data`` cut at 1 .. max_pieces-1 random points."""
    count = rng.randint(2, min(max_pieces, len(data)))
    points = sorted(rng.sample(range(1, len(data)), count - 1))
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]
