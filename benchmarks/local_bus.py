"""The local bus, actor to actor, next to Pykka doing the same work in the same run.

What is measured (one run, rounds interleaved with Pykka's so load hits both alike;
each number is the best of ``ROUNDS`` rounds):

(a) **pub -> sub 1:1** — a publisher actor (dispatcher ``pub``) publishes N
    notifications from one of its own tasks; one subscriber actor (dispatcher
    ``sub``) counts them in its callback and sets an Event on the last one; the
    clock runs from posting the burst task to that Event.  Pykka: a source actor
    ``tell``s N messages to one counting actor (each Pykka actor has its own
    thread, so this is the same two-thread shape).  Budget: >= 4x Pykka.
(b) **pub -> sub 1:10 fan-out** — the same with 10 subscriber actors on one
    dispatcher; deliveries/s = 10 N / time.  Pykka: the source ``tell``s each
    message to 10 actors.  Budget: >= 6x Pykka.
(c) **request/reply** — a requestor actor sends the next request from its reply
    callback, to a replier actor that answers at once; per round trip latency is
    taken with ``perf_counter_ns`` at ``request()`` and in the reply callback.
    Once across two threaded (blocking) dispatchers, once with both actors on one
    asyncio dispatcher.  Pykka, two ways: ``actor_ref.ask(msg)`` from a caller
    thread, and actor-to-actor (a requestor actor calling ``ask`` on the replier
    and waiting on the future, which is what a Pykka actor does to make a
    request).  The baseline is whichever of the two has the lower p50 (the
    stricter); the table names it.  Budget: p50 <= 1.0x Pykka across threads,
    <= 0.6x Pykka on one asyncio loop.
(d) **memory** — in a fresh subprocess: 1k actors, 1k keys, 100 subscribers per
    key (100k subscriptions): RSS (VmRSS) must stay under 200 MB; then the feeds
    are closed and opened again twice, and RSS after each close must not grow
    (<= 4 MB from the first close to the last) and the router's key count must
    return to what it was before (0 benchmark keys).

Messages are built once and the same immutable instance is sent every time, on
both sides, so the numbers are the cost of moving a message, not of building it.

Run: ``.venv/bin/python benchmarks/local_bus.py [--quick] [--metrics]``  (about a
minute; ``--metrics``: every bus serves ``/metrics``, docs/inspect.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pykka

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, percentile, print_table, row

from actorbus.actors import Actor
from actorbus.bus.feeds import IncomingRequest, RequestHandle, SubscribeFeed
from actorbus.bus.message import Notification, Reply, Request
from actorbus.config import GatewaySettings
from actorbus.config.schema import BusConfig, DispatcherConfig, DispatcherKind
from actorbus.node import Bus

__all__ = ["main"]

ROUNDS = 5
N_TELL = 200_000
N_FANOUT = 20_000  # x 10 subscribers
N_RR = 10_000
MEM_BUDGET_MB = 200.0
MEM_GROWTH_MB = 4.0
TIMEOUT = 120.0


class Tick(Notification):
    value: int


class Pong(Reply):
    value: int


class Ping(Request, replies=(Pong,)):
    value: int


#: set (by --metrics): every bus serves /metrics (a J.REP gateway with metrics
#: on, which times requests), to show what that costs the paths measured here
METRICS_ENV = "ACTORBUS_BENCH_METRICS"


def _bus(*dispatchers: tuple[str, DispatcherKind]) -> Bus:
    configs = tuple(
        DispatcherConfig(name=name, kind=kind, thread_count=1, is_default=i == 0)
        for i, (name, kind) in enumerate(dispatchers)
    )
    bus = Bus(BusConfig(dispatchers=configs))
    if os.environ.get(METRICS_ENV) == "1":
        bus.serve_jrep(0, name="metrics", settings=GatewaySettings(metrics=True))
    return bus


class _Countdown:
    """Sets ``event`` when ``parties`` callers have each called :meth:`arrive`."""

    def __init__(self, parties: int) -> None:
        self.event = threading.Event()
        self._left = parties
        self._lock = threading.Lock()

    def arrive(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self.event.set()

    def wait(self, what: str) -> None:
        if not self.event.wait(TIMEOUT):
            raise RuntimeError(f"{what}: not finished within {TIMEOUT:.0f} s")


# =============================================================== actorbus: pub/sub


class Source(Actor):
    def __init__(self, subject: str) -> None:
        super().__init__(name="source")
        self.subject = subject
        self.message = Tick(subject, value=1)

    def startup(self) -> None:
        self.feed = self.publisher(Tick, self.subject, on_status=_ignore_status, up=True)

    def burst(self, n: int) -> None:
        publish = self.feed.publish
        message = self.message
        for _ in range(n):
            publish(message)


class Sink(Actor):
    def __init__(self, name: str, subject: str) -> None:
        super().__init__(name=name)
        self.subject = subject
        self.left = 0
        self.done: _Countdown | None = None

    def startup(self) -> None:
        self.feed = self.subscribe(Tick, self.subject, on_message=self.on_tick)

    def on_tick(self, message: Tick, feed: SubscribeFeed[Tick]) -> None:
        self.left -= 1
        if self.left == 0:
            assert self.done is not None
            self.done.arrive()


def _ignore_status(*_: object) -> None:
    return None


class PubSubRig:
    """One publisher actor and ``fan`` subscriber actors, on two dispatchers."""

    def __init__(self, fan: int, kind: DispatcherKind = DispatcherKind.BLOCKING) -> None:
        self.bus = _bus(("pub", kind), ("sub", kind))
        self.source = Source("/bench/tick")
        self.sinks = [Sink(f"sink-{i}", "/bench/tick") for i in range(fan)]
        for s in self.sinks:
            self.bus.register(s, dispatcher="sub")
        self.bus.register(self.source, dispatcher="pub")
        self.bus.startup(self.sinks).wait(10)
        self.bus.startup(self.source).wait(10)

    def run(self, n: int) -> tuple[float, float]:
        """(deliveries/s, process CPU ns per delivery): n notifications to every subscriber."""
        done = _Countdown(len(self.sinks))
        for s in self.sinks:
            s.left = n
            s.done = done
        cpu = time.process_time_ns()
        start = time.perf_counter()
        self.source.post(self.source.burst, n)
        done.wait("actorbus pub/sub")
        elapsed = time.perf_counter() - start
        deliveries = n * len(self.sinks)
        return deliveries / elapsed, (time.process_time_ns() - cpu) / deliveries

    def close(self) -> None:
        self.bus.close()


# ================================================================= pykka: tell


class PSink(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.left = 0
        self.done: _Countdown | None = None

    def on_receive(self, message: Any) -> None:
        if type(message) is tuple:  # ("arm", n, countdown)
            self.left, self.done = message[1], message[2]
            return
        self.left -= 1
        if self.left == 0:
            assert self.done is not None
            self.done.arrive()


class PSource(pykka.ThreadingActor):
    def __init__(self, targets: list[Any]) -> None:
        super().__init__()
        self.tells = [t.tell for t in targets]
        self.message = Tick("/bench/tick", value=1)

    def on_receive(self, message: Any) -> None:
        n = message
        payload = self.message
        tells = self.tells
        if len(tells) == 1:
            tell = tells[0]
            for _ in range(n):
                tell(payload)
        else:
            for _ in range(n):
                for tell in tells:
                    tell(payload)


class PykkaTellRig:
    def __init__(self, fan: int) -> None:
        self.sinks = [PSink.start() for _ in range(fan)]
        self.source = PSource.start(self.sinks)

    def run(self, n: int) -> tuple[float, float]:
        done = _Countdown(len(self.sinks))
        for s in self.sinks:
            s.ask(("arm", n, done))
        cpu = time.process_time_ns()
        start = time.perf_counter()
        self.source.tell(n)
        done.wait("pykka tell")
        elapsed = time.perf_counter() - start
        deliveries = n * len(self.sinks)
        return deliveries / elapsed, (time.process_time_ns() - cpu) / deliveries

    def close(self) -> None:
        self.source.stop()
        for ref in self.sinks:
            ref.stop()


# ========================================================= actorbus: request/reply


class Answerer(Actor):
    def __init__(self) -> None:
        super().__init__(name="answerer")

    def startup(self) -> None:
        self.pong = Pong("/bench/ping", value=1)
        self.feed = self.replier(Ping, "/bench/ping", on_request=self.on_request)

    def on_request(self, incoming: IncomingRequest[Ping]) -> None:
        incoming.reply(self.pong)


class Asker(Actor):
    def __init__(self) -> None:
        super().__init__(name="asker")
        self.ping = Ping("/bench/ping", value=1)
        self.left = 0
        self.sent = 0
        self.samples: list[int] = []
        self.done = threading.Event()

    def startup(self) -> None:
        self.feed = self.requestor(Ping, "/bench/ping", on_reply=self.on_reply)

    def go(self, n: int) -> None:
        self.left = n
        self.samples = []
        self.sent = time.perf_counter_ns()
        self.feed.request(self.ping)

    def on_reply(self, remaining: int, reply: Reply, handle: RequestHandle[Ping]) -> None:
        now = time.perf_counter_ns()
        if remaining:
            return
        self.samples.append(now - self.sent)
        self.left -= 1
        if self.left == 0:
            self.done.set()
            return
        self.sent = time.perf_counter_ns()
        self.feed.request(self.ping)


class RequestRig:
    """A requestor and a replier: on two blocking dispatchers, or one asyncio one."""

    def __init__(self, shared_asyncio: bool) -> None:
        if shared_asyncio:
            self.bus = _bus(("loop", DispatcherKind.ASYNCIO))
            where = ("loop", "loop")
        else:
            self.bus = _bus(("req", DispatcherKind.BLOCKING), ("rep", DispatcherKind.BLOCKING))
            where = ("req", "rep")
        self.answerer = Answerer()
        self.asker = Asker()
        self.bus.register(self.answerer, dispatcher=where[1])
        self.bus.register(self.asker, dispatcher=where[0])
        self.bus.startup(self.answerer).wait(10)
        self.bus.startup(self.asker).wait(10)

    def run(self, n: int) -> tuple[float, list[int]]:
        """(round trips/s, sorted latencies in ns)."""
        asker = self.asker
        asker.done.clear()
        start = time.perf_counter()
        asker.post(asker.go, n)
        if not asker.done.wait(TIMEOUT):
            raise RuntimeError(f"actorbus request/reply: not finished within {TIMEOUT:.0f} s")
        elapsed = time.perf_counter() - start
        return n / elapsed, sorted(asker.samples)

    def close(self) -> None:
        self.bus.close()


# ================================================================== pykka: ask


class PAnswerer(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.pong = Pong("/bench/ping", value=1)

    def on_receive(self, message: Any) -> Any:
        return self.pong


class PAsker(pykka.ThreadingActor):
    """Asks the replier actor and waits on the future, n times, from its own thread."""

    def __init__(self, target: Any) -> None:
        super().__init__()
        self.target = target
        self.ping = Ping("/bench/ping", value=1)

    def on_receive(self, message: Any) -> list[int]:
        n = message
        ask = self.target.ask
        ping = self.ping
        clock = time.perf_counter_ns
        samples = []
        for _ in range(n):
            t = clock()
            ask(ping)
            samples.append(clock() - t)
        return samples


class PykkaAskRig:
    def __init__(self) -> None:
        self.answerer = PAnswerer.start()
        self.asker = PAsker.start(self.answerer)
        self.ping = Ping("/bench/ping", value=1)

    def from_thread(self, n: int) -> tuple[float, list[int]]:
        ask = self.answerer.ask
        ping = self.ping
        clock = time.perf_counter_ns
        samples = []
        start = time.perf_counter()
        for _ in range(n):
            t = clock()
            ask(ping)
            samples.append(clock() - t)
        elapsed = time.perf_counter() - start
        return n / elapsed, sorted(samples)

    def actor_to_actor(self, n: int) -> tuple[float, list[int]]:
        start = time.perf_counter()
        samples: list[int] = self.asker.ask(n, block=True, timeout=TIMEOUT)
        elapsed = time.perf_counter() - start
        return n / elapsed, sorted(samples)

    def close(self) -> None:
        self.asker.stop()
        self.answerer.stop()


# ====================================================================== memory


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _ignore_message(message: object, feed: object) -> None:
    return None


class Holder(Actor):
    """Subscribes to its share of the keys on startup, closes them on shutdown."""

    def __init__(self, index: int, subjects: list[str], per_actor: int) -> None:
        super().__init__(name=f"holder-{index}")
        step = len(subjects) // per_actor
        self.mine = [subjects[(index + j * step) % len(subjects)] for j in range(per_actor)]
        self.feeds: list[SubscribeFeed[Tick]] = []

    def startup(self) -> None:
        subscribe = self.subscribe
        self.feeds = [subscribe(Tick, s, on_message=_ignore_message) for s in self.mine]

    def shutdown(self) -> None:
        for f in self.feeds:
            f.close()
        self.feeds = []


def memory_child(actors: int = 1000, keys: int = 1000, per_actor: int = 100) -> dict[str, Any]:
    """Run in a fresh process: open/close the subscriptions three times, report RSS."""
    gc.collect()
    rss_start = _rss_mb()
    bus = _bus(("mem", DispatcherKind.BLOCKING))
    base_keys = bus.router.key_count
    subjects = [f"/mem/{k}" for k in range(keys)]
    holders = [Holder(i, subjects, per_actor) for i in range(actors)]
    for h in holders:
        bus.register(h)
    cycles = []
    try:
        for _ in range(3):
            t0 = time.perf_counter()
            bus.startup(holders).wait(TIMEOUT)
            opened = time.perf_counter() - t0
            gc.collect()
            rss_open = _rss_mb()
            subs = sum(bus.router.feeds(k)["subscribers"] for k in _keys(subjects))
            keys_open = bus.router.key_count - base_keys
            t0 = time.perf_counter()
            bus.shutdown(holders).wait(TIMEOUT)
            closed = time.perf_counter() - t0
            gc.collect()
            cycles.append(
                {
                    "rss_open": rss_open,
                    "rss_closed": _rss_mb(),
                    "subscriptions": subs,
                    "keys_open": keys_open,
                    "keys_left": bus.router.key_count - base_keys,
                    "open_s": opened,
                    "close_s": closed,
                }
            )
    finally:
        bus.close()
    return {"rss_start": rss_start, "cycles": cycles}


def _keys(subjects: list[str]) -> list[Any]:
    from actorbus.bus.message import MessageKey

    return [MessageKey(Tick, s) for s in subjects]


def memory_rows(quick: bool) -> list[Row]:
    args = ["--memory-child"] + (["--quick"] if quick else [])
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory subprocess failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    cycles = data["cycles"]
    first = cycles[0]
    peak = max(c["rss_open"] for c in cycles)
    growth = cycles[-1]["rss_closed"] - cycles[0]["rss_closed"]
    keys_left = [c["keys_left"] for c in cycles]
    subs = first["subscriptions"]
    detail = "; ".join(
        f"cycle {i + 1}: open {c['rss_open']:.1f} MB ({c['open_s']:.1f} s), "
        f"closed {c['rss_closed']:.1f} MB ({c['close_s']:.1f} s), keys left {c['keys_left']}"
        for i, c in enumerate(cycles)
    )
    return [
        row(
            f"memory: {subs:,} subscriptions, {first['keys_open']:,} keys, RSS",
            peak,
            "MB",
            budget=f"< {MEM_BUDGET_MB:.0f} MB",
            ok=peak < MEM_BUDGET_MB,
            note=f"process RSS {data['rss_start']:.1f} MB before the bus; {detail}",
        ),
        row(
            "memory: RSS growth after 3 open/close cycles",
            growth,
            "MB",
            budget=f"<= {MEM_GROWTH_MB:.0f} MB",
            ok=growth <= MEM_GROWTH_MB,
        ),
        row(
            "memory: router keys left after each close",
            float(max(keys_left)),
            "keys",
            budget="0",
            ok=all(k == 0 for k in keys_left),
            note=f"per cycle: {keys_left} (system-notification keys excluded)",
        ),
    ]


# ======================================================================= main


Measure = Callable[[], tuple[float, float]]


def _interleave(ours: Measure, theirs: Measure, rounds: int) -> tuple[float, float, float, float]:
    """Best rate and lowest CPU cost of each over ``rounds`` alternating rounds
    (after one warm-up each): (our rate, their rate, our CPU ns, their CPU ns)."""
    ours()
    theirs()
    a = b = 0.0
    ca = cb = math.inf
    for _ in range(rounds):
        rate, cpu = ours()
        a, ca = max(a, rate), min(ca, cpu)
        rate, cpu = theirs()
        b, cb = max(b, rate), min(cb, cpu)
    return a, b, ca, cb


def cpu_share(seconds: float = 0.3) -> float:
    """The share of one CPU a plain Python loop gets right now (1.0 on an idle
    machine): a control for how loaded the machine is.  Under the GIL a
    process runs Python on at most one CPU at a time, so a pipeline that never
    waits shows the same share; one that waits on hand-offs shows less."""
    cpu = time.process_time()
    start = time.perf_counter()
    end = start + seconds
    x = 0
    while time.perf_counter() < end:
        for i in range(1000):
            x += i
    return (time.process_time() - cpu) / (time.perf_counter() - start)


def _best_latency(results: list[tuple[float, list[int]]]) -> tuple[float, float, float]:
    """(best rate, lowest p50 us, lowest p99 us) over the rounds, each taken on its
    own: noise only ever adds latency, and both sides are judged the same way."""
    return (
        max(rate for rate, _ in results),
        min(percentile(samples, 50) for _, samples in results) / 1e3,
        min(percentile(samples, 99) for _, samples in results) / 1e3,
    )


def throughput_rows(rounds: int, scale: float) -> list[Row]:
    rows: list[Row] = []
    cases = (
        ("pub->sub 1:1", 1, int(N_TELL * scale), "pykka tell actor->actor", 4),
        ("pub->sub 1:10 fan-out", 10, int(N_FANOUT * scale), "pykka tell to 10 actors", 6),
    )
    for label, fan, n, peer_name, factor in cases:
        ours_rig, peer_rig = PubSubRig(fan), PykkaTellRig(fan)
        try:
            ours, peer, cpu, peer_cpu = _interleave(
                lambda: ours_rig.run(n), lambda: peer_rig.run(n), rounds
            )
        finally:
            ours_rig.close()
            peer_rig.close()
        what = f"{n:,} notifications" + (f" x {fan} subscribers" if fan > 1 else "")
        rows.append(
            row(
                f"{label}, deliveries, two blocking dispatchers",
                ours,
                "msg/s",
                baseline_name=peer_name,
                baseline_value=peer,
                budget=f">= {factor}x peer",
                ok=ours >= factor * peer,
                note=(
                    f"{what} per round, best of {rounds}; best rounds used "
                    f"{ours * cpu / 1e9:.0%} vs {peer * peer_cpu / 1e9:.0%} of one CPU"
                ),
            )
        )
        rows.append(
            row(
                f"{label}, CPU per delivery (all threads)",
                cpu,
                "ns",
                baseline_name=peer_name,
                baseline_value=peer_cpu,
                budget=f"<= 1/{factor} peer",
                ok=cpu * factor <= peer_cpu,
                note="process CPU time / deliveries, lowest of the rounds: what the "
                "throughput ratio would be if the machine were otherwise idle",
            )
        )
    return rows


def request_rows(rounds: int, scale: float) -> list[Row]:
    n = int(N_RR * scale)
    threaded, shared = RequestRig(False), RequestRig(True)
    peer = PykkaAskRig()
    runs: dict[str, list[tuple[float, list[int]]]] = {k: [] for k in ("thr", "aio", "pt", "pa")}
    try:
        for _ in range(rounds + 1):  # the first round warms up and is dropped
            runs["thr"].append(threaded.run(n))
            runs["aio"].append(shared.run(n))
            runs["pt"].append(peer.from_thread(n))
            runs["pa"].append(peer.actor_to_actor(n))
    finally:
        threaded.close()
        shared.close()
        peer.close()
    best = {k: _best_latency(v[1:]) for k, v in runs.items()}
    peer_key = min(("pt", "pa"), key=lambda k: best[k][1])
    peer_name = {"pt": "pykka ask from a thread", "pa": "pykka ask actor->actor"}[peer_key]
    p_rate, p_p50, p_p99 = best[peer_key]
    other = "pa" if peer_key == "pt" else "pt"
    other_note = (
        f"the other pykka form ({'ask actor->actor' if other == 'pa' else 'ask from a thread'}): "
        f"p50 {best[other][1]:.1f} us, p99 {best[other][2]:.1f} us, {best[other][0]:,.0f} rt/s"
    )
    rows: list[Row] = []
    for key, label, factor in (
        ("thr", "two blocking dispatchers", 1.0),
        ("aio", "one asyncio dispatcher", 0.6),
    ):
        rate, p50, p99 = best[key]
        rows.append(
            row(
                f"request/reply p50, {label}",
                p50,
                "us",
                baseline_name=peer_name,
                baseline_value=p_p50,
                budget=f"<= {factor:g}x peer",
                ok=p50 <= factor * p_p50,
                note=(
                    f"{n:,} sequential round trips per round; p50, p99 and rate are each "
                    f"the best of {rounds} rounds"
                ),
            )
        )
        rows.append(
            row(
                f"request/reply p99, {label}",
                p99,
                "us",
                baseline_name=peer_name,
                baseline_value=p_p99,
            )
        )
        rows.append(
            row(
                f"request/reply round trips, {label}",
                rate,
                "rt/s",
                baseline_name=peer_name,
                baseline_value=p_rate,
                note=other_note if key == "thr" else "",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run every measurement, print the table, return the rows."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke test)")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--metrics", action="store_true", help="every bus serves /metrics (what it costs)"
    )
    args = parser.parse_args(argv if argv is not None else [])
    if args.metrics:
        os.environ[METRICS_ENV] = "1"  # the memory child's buses too
    if args.memory_child:
        result = memory_child(per_actor=10) if args.quick else memory_child()
        print(json.dumps(result))
        return []
    rounds = 1 if args.quick else ROUNDS
    scale = 0.05 if args.quick else 1.0
    started = time.perf_counter()
    rows: list[Row] = []
    before = cpu_share()
    rows += throughput_rows(rounds, scale)
    rows += request_rows(rounds, scale)
    after = cpu_share()
    rows.append(
        row(
            "control: CPU share of a plain Python loop",
            min(before, after) * 100,
            "%",
            note=(
                f"before {before:.0%}, after {after:.0%} of one CPU; 100% on an idle machine. "
                f"Below that, the throughput rows are load-bound: compare the CPU rows"
            ),
        )
    )
    rows += memory_rows(args.quick)
    elapsed = time.perf_counter() - started
    print_table(
        rows,
        f"local bus vs pykka {_pykka_version()}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, {elapsed:.0f} s",
    )
    return [dict(r) for r in rows]


def _pykka_version() -> str:
    from importlib.metadata import version

    return version("pykka")


if __name__ == "__main__":
    main(sys.argv[1:])
