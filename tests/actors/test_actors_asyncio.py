"""What only the asyncio kind does: awaiting ``async def`` callbacks, one at a time
per actor, with other actors running meanwhile; and how the thread kinds refuse them."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actorbus import Actor, ActorRuntime, UsageError, current_actor
from actorbus.actors.dispatcher import AsyncioDispatcher
from actorbus.config import DispatcherConfig, DispatcherKind

WAIT = 10.0
LOOP = DispatcherConfig(name="loop", kind=DispatcherKind.ASYNCIO)
THREADS = DispatcherConfig(name="threads", kind=DispatcherKind.BLOCKING)


class Awaiter(Actor):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.log: list[str] = []
        self.inside = 0
        self.overlaps = 0
        self.actors: list[Actor | None] = []

    async def step(self, tag: str, release: asyncio.Event | None = None) -> None:
        self.inside += 1
        if self.inside > 1:
            self.overlaps += 1
        self.log.append(f"begin {tag}")
        self.actors.append(current_actor())
        if release is not None:
            await release.wait()
        else:
            await asyncio.sleep(0.001)
        self.actors.append(current_actor())
        self.log.append(f"end {tag}")
        self.inside -= 1

    def sync(self, tag: str) -> None:
        self.log.append(f"sync {tag}")


def test_async_callbacks_are_awaited_in_order_one_at_a_time(
    make_runtime: Callable[..., ActorRuntime],
) -> None:
    runtime = make_runtime(LOOP)
    slow, fast = Awaiter("slow"), Awaiter("fast")
    for a in (slow, fast):
        runtime.register(a)
    loop = runtime.dispatcher("loop").loop
    assert loop is not None
    release = asyncio.Event()  # only touched on the loop thread
    fast_done = threading.Event()
    slow_done = threading.Event()

    slow.post(slow.step, "1", release)  # parks until released
    slow.post(slow.sync, "2")
    slow.post(slow.step, "3")
    slow.post(slow_done.set)
    for i in range(3):
        fast.post(fast.step, str(i))
    fast.post(fast_done.set)
    # the other actor runs while "slow" is suspended in its first callback
    assert fast_done.wait(WAIT)
    assert slow.log == ["begin 1"]
    loop.call_soon_threadsafe(release.set)
    assert slow_done.wait(WAIT)
    assert slow.log == ["begin 1", "end 1", "sync 2", "begin 3", "end 3"]
    assert fast.log == [f"{what} {i}" for i in range(3) for what in ("begin", "end")]
    assert slow.overlaps == fast.overlaps == 0
    # current_actor() is right again after every resumption, though others ran between
    assert set(slow.actors) == {slow}
    assert set(fast.actors) == {fast}
    assert runtime.dispatcher("loop").stats().task_failures == 0


def test_async_callback_failure_is_logged_and_actor_keeps_running(
    make_runtime: Callable[..., ActorRuntime], log_records: list[dict[str, Any]]
) -> None:
    runtime = make_runtime(LOOP)

    class Broken(Actor):
        async def fail(self) -> None:
            await asyncio.sleep(0)
            raise KeyError("gone")

    a = Broken("broken")
    runtime.register(a)
    done = threading.Event()
    a.post(a.fail)
    a.post(done.set)
    assert done.wait(WAIT)
    errors = [r["message"] for r in log_records if r["level"].name == "ERROR"]
    assert len(errors) == 1
    assert "'broken'" in errors[0]
    assert "Broken.fail" in errors[0]
    assert runtime.dispatcher("loop").stats().task_failures == 1


def test_async_startup_and_shutdown_are_awaited(
    make_runtime: Callable[..., ActorRuntime],
) -> None:
    runtime = make_runtime(LOOP)

    class AsyncLife(Actor):
        def __init__(self) -> None:
            super().__init__("async-life")
            self.steps: list[str] = []

        async def startup(self) -> None:
            await asyncio.sleep(0.001)
            self.steps.append(f"started on {threading.current_thread().name}")

        async def shutdown(self) -> None:
            await asyncio.sleep(0.001)
            self.steps.append("stopped")

    a = AsyncLife()
    runtime.startup(a).wait(WAIT)
    assert a.is_started
    assert a.steps == ["started on actorbus-loop-0"]
    runtime.shutdown(a).wait(WAIT)
    assert not a.is_started
    assert a.steps[-1] == "stopped"


def test_async_startup_failure_is_reported(make_runtime: Callable[..., ActorRuntime]) -> None:
    runtime = make_runtime(LOOP)

    class AsyncRefuses(Actor):
        async def startup(self) -> None:
            await asyncio.sleep(0)
            raise ConnectionError("refused")

    a = AsyncRefuses("async-refuses")
    with pytest.raises(ConnectionError, match="refused"):
        runtime.startup(a).wait(WAIT)
    assert not a.is_started


def test_thread_dispatcher_refuses_async_callbacks(
    make_runtime: Callable[..., ActorRuntime], log_records: list[dict[str, Any]]
) -> None:
    runtime = make_runtime(THREADS)
    a = Awaiter("on-threads")
    runtime.register(a)
    done = threading.Event()
    a.post(a.step, "never")
    a.post(done.set)
    assert done.wait(WAIT)
    assert a.log == []  # the coroutine was closed, never run (and no "never awaited" warning)
    errors = [r["message"] for r in log_records if r["level"].name == "ERROR"]
    assert len(errors) == 1
    assert "returned a coroutine" in errors[0]
    assert "asyncio" in errors[0]
    assert runtime.dispatcher("threads").stats().task_failures == 1


def test_async_startup_on_thread_dispatcher_fails_clearly(
    make_runtime: Callable[..., ActorRuntime],
) -> None:
    runtime = make_runtime(THREADS)

    class AsyncStart(Actor):
        async def startup(self) -> None:
            await asyncio.sleep(0)

    a = AsyncStart("async-start")
    with pytest.raises(UsageError, match="async def.*'threads' is not an asyncio dispatcher"):
        runtime.startup(a).wait(WAIT)
    assert not a.is_started


def test_completion_can_be_awaited(make_runtime: Callable[..., ActorRuntime]) -> None:
    runtime = make_runtime(THREADS, LOOP)

    class Slow(Actor):
        def startup(self) -> None:
            self.ok = True

    on_threads, on_loop = Slow("t"), Slow("l")
    runtime.register(on_threads)
    runtime.register(on_loop, dispatcher="loop")

    async def main() -> bool:
        await runtime.startup([on_threads, on_loop])
        return on_threads.is_started and on_loop.is_started

    assert asyncio.run(main())


def test_posting_from_the_loop_thread_keeps_order(
    make_runtime: Callable[..., ActorRuntime],
) -> None:
    runtime = make_runtime(LOOP)
    a, b = Actor("a"), Actor("b")
    for x in (a, b):
        runtime.register(x)
    got: list[int] = []
    done = threading.Event()

    def fan_out() -> None:  # runs on the loop thread: posts use call_soon
        for i in range(100):
            b.post(got.append, i)
        b.post(done.set)

    a.post(fan_out)
    assert done.wait(WAIT)
    assert got == list(range(100))


def _on_loop(runtime: ActorRuntime, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` as one callback of the dispatcher's loop (as a network read is) and
    return its result."""
    loop = runtime.dispatcher("loop").loop
    assert loop is not None
    result: list[Any] = []
    done = threading.Event()

    def call() -> None:
        try:
            result.append(fn())
        finally:
            done.set()

    loop.call_soon_threadsafe(call)
    assert done.wait(WAIT)
    return result[0] if result else None


def test_deferred_runs_happen_inside_the_callback_in_order(
    make_runtime: Callable[..., ActorRuntime],
) -> None:
    """defer_runs/run_deferred (what a link sharing the loop does around a read):
    the actors made runnable in between run at run_deferred, inside the same loop
    callback, in the order they became runnable; one task at a time per actor."""
    runtime = make_runtime(LOOP)
    dispatcher = runtime.dispatcher("loop")
    assert isinstance(dispatcher, AsyncioDispatcher)
    a, b = Actor("a"), Actor("b")
    for x in (a, b):
        runtime.register(x)
    got: list[tuple[str, int]] = []
    loop_thread: list[int] = []

    def read() -> tuple[list[tuple[str, int]], list[tuple[str, int]], bool]:
        loop_thread.append(threading.get_ident())
        assert dispatcher.defer_runs()
        assert not dispatcher.defer_runs()  # nested: left to the outer caller
        b.post(got.append, ("b", 0))
        a.post(got.append, ("a", 0))
        b.post(got.append, ("b", 1))
        before = list(got)
        dispatcher.run_deferred()
        return before, list(got), current_actor() is None

    before_stats = dispatcher.stats()
    before, after, no_actor = _on_loop(runtime, read)
    assert before == []  # nothing ran while deferred
    assert after == [("b", 0), ("b", 1), ("a", 0)]  # all ran before the callback returned
    assert no_actor
    stats = dispatcher.stats()
    assert stats.drained_after_read - before_stats.drained_after_read == 2
    assert stats.tasks_run - before_stats.tasks_run == 3


def test_deferred_runs_keep_the_quantum_and_lose_nothing(
    make_runtime: Callable[..., ActorRuntime],
) -> None:
    """A deferred actor with more work than its quantum goes back to the loop (other
    deferred actors still run at once); a task that raises does not stop the rest."""
    runtime = make_runtime(dataclasses.replace(LOOP, quantum_ns=200_000))
    dispatcher = runtime.dispatcher("loop")
    assert isinstance(dispatcher, AsyncioDispatcher)
    busy, failing, quick = Actor("busy"), Actor("failing"), Actor("quick")
    for x in (busy, failing, quick):
        runtime.register(x)
    busy_ran: list[int] = []
    quick_ran: list[int] = []
    done = threading.Event()

    def work(i: int) -> None:
        busy_ran.append(i)
        t = time.perf_counter_ns() + 50_000
        while time.perf_counter_ns() < t:  # 50 us of work per task
            pass

    def boom(_: object) -> None:
        raise RuntimeError("task failure on purpose")

    def read() -> tuple[int, list[int]]:
        assert dispatcher.defer_runs()
        for i in range(200):
            busy.post(work, i)
        busy.post(done.set)
        failing.post(boom, None)
        quick.post(quick_ran.append, 1)
        dispatcher.run_deferred()
        return len(busy_ran), list(quick_ran)

    ran_inline, quick_inline = _on_loop(runtime, read)
    assert 0 < ran_inline < 200  # the quantum ended the deferred drain
    assert quick_inline == [1]  # the others ran anyway
    assert done.wait(WAIT)
    assert busy_ran == list(range(200))  # the rest ran later, in order
    stats = dispatcher.stats()
    assert stats.quantum_overruns >= 1
    assert stats.task_failures == 1
