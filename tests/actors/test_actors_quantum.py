"""The run quantum: a busy actor does not starve another on a one-thread dispatcher."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from actorbus import Actor, ActorRuntime
from actorbus.config import DispatcherConfig

TASKS = 10_000
TASK_NS = 10_000  # each of the busy actor's tasks computes for 10 us


def _compute(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def test_busy_actor_does_not_starve_another(
    kind_config: DispatcherConfig, make_runtime: Callable[..., ActorRuntime]
) -> None:
    kind = kind_config.kind.value
    config = dataclasses.replace(kind_config, name="q", thread_count=1, quantum_ns=10_000)
    runtime = make_runtime(config)
    busy, other = Actor("busy"), Actor("other")
    runtime.register(busy)
    runtime.register(other)
    times: dict[str, int] = {}
    progress = [0]
    draining = threading.Event()
    finished = threading.Event()
    answered = threading.Event()

    def work() -> None:
        _compute(TASK_NS)
        progress[0] += 1
        if progress[0] == 1:
            times["busy first"] = time.perf_counter_ns()
        elif progress[0] == 100:
            draining.set()
        elif progress[0] == TASKS:
            times["busy last"] = time.perf_counter_ns()
            finished.set()

    def answer() -> None:
        times["other ran"] = time.perf_counter_ns()
        times["busy done when other ran"] = progress[0]
        answered.set()

    for _ in range(TASKS):
        busy.post(work)
    assert draining.wait(30)  # the busy actor is in the middle of its 10k tasks
    times["other posted"] = time.perf_counter_ns()
    other.post(answer)
    assert answered.wait(30)
    assert finished.wait(60)
    latency = times["other ran"] - times["other posted"]
    drain = times["busy last"] - times["busy first"]
    overruns = runtime.dispatcher("q").stats().quantum_overruns
    print(
        f"\n{kind}: second actor's first task ran {latency / 1e3:.0f} us after its post; "
        f"draining {TASKS:,} tasks took {drain / 1e6:.1f} ms; "
        f"busy actor had run {times['busy done when other ran']:,} tasks; overruns={overruns}"
    )
    assert times["busy done when other ran"] < TASKS
    assert latency < drain / 10
    assert overruns >= 1
