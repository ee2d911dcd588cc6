"""Push streams: the RFC 214 pipeline against reactivex (RxPY), and a stream
over a subscription against a plain subscriber callback, in one run.

    python benchmarks/streams.py

* ``filter -> map -> window -> reduce`` over 1M integers: actorbus.streams
  (``window(60 s, sum, max_count=100)``, a time-or-count window) against RxPY's
  ``buffer_with_time_or_count(60 s, 100)``, its own time-or-count window, and
  against ``buffer_with_count(100)`` (no timer at all) as a second row.
  Budget: >= 1x RxPY's events/s.
* per-event CPU of a stream over a subscription (``subscribe(...).for_each``)
  against a plain subscriber callback: process CPU time (every thread) per
  delivered notification, same publisher, same bus.  Budget: <= 2x.

Rounds are interleaved and the best of each is kept (``_common``).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reactivex
from _common import Row, best_of, print_table, row
from reactivex import operators as ops

from actorbus import Actor, Bus, Notification
from actorbus.streams import PushStream, subscribe

EVENTS = 1_000_000
NOTIFICATIONS = 200_000
ROUNDS = 3


def _keep(x: int) -> bool:
    return x % 3 != 0


def _double(x: int) -> int:
    return x * 2


def _add(a: int, b: int) -> int:
    return a + b


def ours() -> tuple[float, int]:
    t0 = time.perf_counter()
    total = (
        PushStream.of(range(EVENTS))
        .filter(_keep)
        .map(_double)
        .window(60.0, sum, max_count=100)
        .reduce(_add)
        .result()
    )
    return EVENTS / (time.perf_counter() - t0), total


def rx(timed: bool) -> tuple[float, int]:
    out: list[int] = []
    window = ops.buffer_with_time_or_count(60.0, 100) if timed else ops.buffer_with_count(100)
    t0 = time.perf_counter()
    reactivex.from_iterable(range(EVENTS)).pipe(
        ops.filter(_keep), ops.map(_double), window, ops.map(sum), ops.reduce(_add)
    ).subscribe(out.append)
    return EVENTS / (time.perf_counter() - t0), out[0]


class Tick(Notification, type_name="benchmarks.streams.Tick"):
    n: int


class Plain(Actor):
    def __init__(self, done: threading.Event) -> None:
        super().__init__("plain")
        self.count = 0
        self.done = done

    def startup(self) -> None:
        self.subscribe(Tick, "/t", on_message=self.take)

    def take(self, msg: Tick, _: Any) -> None:
        self.count += 1
        if self.count == NOTIFICATIONS:
            self.done.set()


class Streamed(Actor):
    def __init__(self, done: threading.Event) -> None:
        super().__init__("streamed")
        self.count = 0
        self.done = done

    def startup(self) -> None:
        self.future = subscribe(self, Tick, "/t").for_each(self.take)

    def take(self, msg: Tick) -> None:
        self.count += 1
        if self.count == NOTIFICATIONS:
            self.done.set()


def cpu_per_event(kind: type[Actor]) -> float:
    """Microseconds of process CPU per notification published and delivered."""
    done = threading.Event()
    with Bus() as bus:
        actor = kind(done)  # type: ignore[call-arg]
        bus.register(actor)
        bus.startup([actor]).wait(10)
        feed = bus.publisher(Tick, "/t")
        if not feed.is_feed_up():
            deadline = time.monotonic() + 10
            while not feed.is_feed_up() and time.monotonic() < deadline:
                time.sleep(0.001)
        messages = [Tick("/t", 0, n=i) for i in range(NOTIFICATIONS)]
        c0 = time.process_time()
        for m in messages:
            feed.publish(m)
        if not done.wait(120):
            raise RuntimeError(f"{kind.__name__}: not every notification arrived")
        return (time.process_time() - c0) / NOTIFICATIONS * 1e6


def main() -> list[Row]:
    ours_r, rx_timed, rx_count = [], [], []
    plain, streamed = [], []
    expected = sum(_double(x) for x in range(EVENTS) if _keep(x))
    for _ in range(ROUNDS):
        for results, run in (
            (ours_r, ours),
            (rx_timed, lambda: rx(True)),
            (rx_count, lambda: rx(False)),
        ):
            rate, total = run()
            if total != expected:
                raise RuntimeError(f"wrong total {total}, expected {expected}")
            results.append(rate)
        plain.append(cpu_per_event(Plain))
        streamed.append(cpu_per_event(Streamed))
    best = best_of(ours_r, float)
    best_timed = best_of(rx_timed, float)
    best_count = best_of(rx_count, float)
    p, s = best_of(plain, float, lowest=True), best_of(streamed, float, lowest=True)
    return [
        row(
            "stream filter->map->window(time|100)->reduce, 1M events",
            best,
            "events/s",
            baseline_name="RxPY buffer_with_time_or_count",
            baseline_value=best_timed,
            budget=">= 1x RxPY",
            ok=best >= best_timed,
        ),
        row(
            "stream filter->map->window(time|100)->reduce, 1M events",
            best,
            "events/s",
            baseline_name="RxPY buffer_with_count (no timer)",
            baseline_value=best_count,
            budget=">= 1x RxPY",
            ok=best >= best_count,
        ),
        row(
            "stream over a subscription, CPU per event",
            s,
            "us",
            baseline_name="plain subscriber callback",
            baseline_value=p,
            budget="<= 2x plain",
            ok=s <= 2 * p,
            note=f"{NOTIFICATIONS} local notifications, process CPU (all threads)",
        ),
    ]


if __name__ == "__main__":
    print_table(main())
