"""The behaviour every dispatcher kind must show, run once per kind.

Ordering, no overlap, lifecycle on the actor's own thread, the failure
contract, timers, counters, current_actor(), and a close that leaves nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actorbus import Actor, ActorRuntime, BusConfig, current_actor
from actorbus.config import DispatcherConfig

WAIT = 10.0


class Recorder(Actor):
    """Records (poster, seq) per poster, flags overlapping callbacks and order breaks."""

    def __init__(self, name: str, posters: int) -> None:
        super().__init__(name)
        self.last = [-1] * posters
        self.inside = False
        self.overlaps = 0
        self.order_errors = 0
        self.count = 0
        self.threads: set[str] = set()

    def on_task(self, poster: int, seq: int) -> None:
        if self.inside:
            self.overlaps += 1
        self.inside = True
        if seq != self.last[poster] + 1:
            self.order_errors += 1
        self.last[poster] = seq
        self.count += 1
        self.threads.add(threading.current_thread().name)
        self.inside = False


def _latch(n: int) -> tuple[threading.Event, Any]:
    done = threading.Event()
    left = [n]
    lock = threading.Lock()

    def arrive() -> None:
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()

    return done, arrive


def test_order_per_poster_and_no_overlap(runtime: ActorRuntime) -> None:
    posters, per_poster = 3, 2_000
    actors = [Recorder(f"rec-{i}", posters) for i in range(4)]
    for a in actors:
        runtime.register(a)
    done, arrive = _latch(posters * len(actors))

    def poster(p: int) -> None:
        pairs = [(a.post, a.on_task) for a in actors]
        for seq in range(per_poster):
            for post, fn in pairs:
                post(fn, p, seq)
        for a in actors:
            a.post(arrive)

    threads = [threading.Thread(target=poster, args=(p,)) for p in range(posters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done.wait(WAIT)
    for a in actors:
        assert a.count == posters * per_poster
        assert a.order_errors == 0
        assert a.overlaps == 0
        assert a.last == [per_poster - 1] * posters
        assert all(name.startswith("actorbus-d-") for name in a.threads)


class Lifecycle(Actor):
    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.events: list[tuple[str, str]] = []

    def startup(self) -> None:
        self.events.append(("startup", threading.current_thread().name))

    def shutdown(self) -> None:
        self.events.append(("shutdown", threading.current_thread().name))


def test_lifecycle_runs_on_own_dispatcher_and_restarts(runtime: ActorRuntime) -> None:
    a = Lifecycle("life")
    runtime.register(a)
    assert not a.is_started
    started = runtime.startup(a)
    seen: list[bool] = []
    a.post(lambda: seen.append(a.is_started))  # posted after startup: must see it done
    started.wait(WAIT)
    assert a.is_started
    runtime.shutdown(a).wait(WAIT)
    assert not a.is_started
    runtime.startup(a).wait(WAIT)  # a stopped actor starts again
    assert a.is_started
    runtime.shutdown(a).wait(WAIT)
    assert [e for e, _ in a.events] == ["startup", "shutdown", "startup", "shutdown"]
    assert all(thread.startswith("actorbus-d-") for _, thread in a.events)
    assert seen == [True]


def test_task_failure_is_logged_and_actor_keeps_running(
    runtime: ActorRuntime, log_records: list[dict[str, Any]]
) -> None:
    class Fragile(Actor):
        def explode(self, value: int) -> None:
            raise ValueError(f"bad value {value}")

    a = Fragile("fragile")
    runtime.register(a)
    runtime.startup(a).wait(WAIT)
    done = threading.Event()
    a.post(a.explode, 7)
    a.post(done.set)
    assert done.wait(WAIT)
    errors = [r for r in log_records if r["level"].name == "ERROR"]
    assert len(errors) == 1
    message = errors[0]["message"]
    assert "'fragile'" in message
    assert "Fragile.explode" in message
    assert "bad value 7" in message
    assert errors[0]["extra"]["actor"] == "fragile"
    assert a.is_started
    assert runtime.dispatcher("d").stats().task_failures == 1
    # the dispatcher's threads survived: more work still runs
    again = threading.Event()
    for _ in range(3):
        a.post(a.explode, 1)
    a.post(again.set)
    assert again.wait(WAIT)
    assert runtime.dispatcher("d").stats().task_failures == 4


def test_startup_failure_is_reported_and_actor_not_started(runtime: ActorRuntime) -> None:
    class Refuses(Actor):
        attempts = 0

        def startup(self) -> None:
            self.attempts += 1
            if self.attempts == 1:
                raise RuntimeError("no database")

    a = Refuses("refuses")
    completion = runtime.startup(a)
    with pytest.raises(RuntimeError, match="no database") as info:
        completion.wait(WAIT)
    assert any("startup() of actor 'refuses'" in note for note in info.value.__notes__)
    assert not a.is_started
    runtime.startup(a).wait(WAIT)  # the second attempt succeeds
    assert a.is_started


def test_shutdown_failure_is_reported_and_actor_stopped(runtime: ActorRuntime) -> None:
    class BadExit(Actor):
        def shutdown(self) -> None:
            raise OSError("flush failed")

    a = BadExit("bad-exit")
    runtime.startup(a).wait(WAIT)
    with pytest.raises(OSError, match="flush failed"):
        runtime.shutdown(a).wait(WAIT)
    assert not a.is_started


def test_timers_run_on_the_actors_dispatcher(runtime: ActorRuntime) -> None:
    class Ticker(Actor):
        def __init__(self) -> None:
            super().__init__("ticker")
            self.ticks = 0
            self.threads: set[str] = set()
            self.actors: set[Actor | None] = set()
            self.fired = threading.Event()
            self.ticked = threading.Event()
            self.cancelled_ran = False

        def startup(self) -> None:
            self.once = self.schedule(0.01, self.on_once, "x")
            self.every = self.schedule_every(0.005, self.on_tick)
            self.doomed = self.schedule(0.05, self.on_doomed)
            self.doomed.cancel()

        def on_once(self, arg: str) -> None:
            assert arg == "x"
            self.threads.add(threading.current_thread().name)
            self.actors.add(current_actor())
            self.fired.set()

        def on_tick(self) -> None:
            self.ticks += 1
            self.threads.add(threading.current_thread().name)
            self.actors.add(current_actor())
            if self.ticks == 3:
                self.every.cancel()
                self.ticked.set()

        def on_doomed(self) -> None:
            self.cancelled_ran = True

    a = Ticker()
    runtime.startup(a).wait(WAIT)
    assert a.fired.wait(WAIT)
    assert a.ticked.wait(WAIT)
    flushed = threading.Event()
    # a later one-shot proves the repeating one stayed cancelled past its next period
    a.schedule(0.03, flushed.set)
    assert flushed.wait(WAIT)
    assert a.ticks == 3
    assert not a.cancelled_ran
    assert not a.once.active and not a.once.cancelled
    assert a.every.cancelled and a.doomed.cancelled
    assert all(name.startswith("actorbus-d-") for name in a.threads)
    assert a.actors == {a}


def test_stats_count_tasks_and_depth(runtime: ActorRuntime) -> None:
    d = runtime.dispatcher("d")
    a, b, c = Actor("a"), Actor("b"), Actor("c")
    for x in (a, b, c):
        runtime.register(x)
    gate = threading.Event()
    blocking = threading.Event()

    def block() -> None:
        blocking.set()
        gate.wait(WAIT)

    a.post(block)
    assert blocking.wait(WAIT)
    for _ in range(100):
        a.post(int)
    stats = d.stats()
    by_name = {m.actor: m for m in stats.mailboxes}
    assert by_name["a"].state == "running"
    assert by_name["a"].depth == 100
    assert by_name["b"].state == "idle"
    assert stats.priority == 5
    assert stats.quantum_ns == 500_000
    gate.set()
    done = threading.Event()
    a.post(done.set)
    assert done.wait(WAIT)
    stats = d.stats()
    by_name = {m.actor: m for m in stats.mailboxes}
    assert by_name["a"].depth == 0
    assert by_name["a"].max_depth >= 100
    assert stats.tasks_run == 102
    assert stats.actors_scheduled >= 1
    assert stats.task_failures == 0
    assert stats.kind is runtime.dispatcher("d").kind


def test_current_actor_is_set_only_inside_tasks(runtime: ActorRuntime) -> None:
    a, b = Actor("one"), Actor("two")
    for x in (a, b):
        runtime.register(x)
    seen: dict[str, Actor | None] = {}
    done, arrive = _latch(2)

    def look(key: str) -> None:
        seen[key] = current_actor()
        arrive()

    a.post(look, "a")
    b.post(look, "b")
    assert done.wait(WAIT)
    assert seen == {"a": a, "b": b}
    assert current_actor() is None


def test_close_leaves_no_threads(kind_config: DispatcherConfig) -> None:
    runtime = ActorRuntime(BusConfig(dispatchers=(kind_config,)))
    a = Lifecycle("closing")
    runtime.startup(a).wait(WAIT)
    names = {t.name for t in threading.enumerate()}
    assert "actorbus-timer" in names
    assert "actorbus-d-0" in names
    runtime.close()
    runtime.close()  # idempotent
    assert [e for e, _ in a.events] == ["startup", "shutdown"]
    assert not [t for t in threading.enumerate() if t.name.startswith("actorbus")]
    assert not a.actor_context.is_registered
