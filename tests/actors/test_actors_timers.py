"""Timers: the pure TimerQueue on a fake clock, then the real timer thread."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorbus import Actor, ActorRuntime, current_actor
from actorbus.actors import TimerError, TimerQueue
from actorbus.actors.errors import RuntimeClosedError
from actorbus.actors.timers import TimerService
from actorbus.testing import wait_until

WAIT = 10.0
MS = 1_000_000  # ns

Make = Callable[..., ActorRuntime]


# ------------------------------------------------------------ pure logic, fake clock


def test_one_shot_is_due_at_its_deadline_not_before() -> None:
    q: TimerQueue[str] = TimerQueue()
    tid = q.add("a", 100)
    assert q.next_deadline() == 100
    assert q.pop_due(99) == []
    assert q.pop_due(100) == ["a"]
    assert q.pop_due(10_000) == []
    assert tid not in q
    assert len(q) == 0
    assert q.next_deadline() is None


def test_due_items_come_earliest_first_ties_in_insertion_order() -> None:
    q: TimerQueue[str] = TimerQueue()
    q.add("late", 300)
    q.add("first", 100)
    q.add("second", 100)
    q.add("mid", 200)
    assert q.pop_due(250) == ["first", "second", "mid"]
    assert q.pop_due(300) == ["late"]


def test_cancel_before_due_means_never() -> None:
    q: TimerQueue[str] = TimerQueue()
    keep = q.add("keep", 50)
    drop = q.add("drop", 10)
    assert q.cancel(drop)
    assert not q.cancel(drop)
    assert not q.cancel(12345)
    assert q.next_deadline() == 50  # the dead slot at the top is skipped
    assert q.pop_due(100) == ["keep"]
    assert not q.cancel(keep)  # fired one-shot: nothing to cancel


def test_repeating_timer_is_fixed_rate_without_drift() -> None:
    q: TimerQueue[str] = TimerQueue()
    tid = q.add("tick", 10 * MS, 10 * MS)
    now = 0
    deadlines = []
    for k in range(1, 101):
        now = k * 10 * MS + 3 * MS  # every pop is 3 ms late
        assert q.pop_due(now) == ["tick"]
        deadlines.append(q.deadline(tid))
    # lateness never accumulates: deadlines stay on the original grid
    assert deadlines == [(k + 1) * 10 * MS for k in range(1, 101)]
    assert q.missed(tid) == 0


def test_repeating_timer_skips_whole_periods_it_slept_through() -> None:
    q: TimerQueue[str] = TimerQueue()
    tid = q.add("tick", 10, 10)
    assert q.pop_due(45) == ["tick"]  # due at 10; 20, 30 and 40 are over too
    assert q.missed(tid) == 3
    assert q.deadline(tid) == 50
    assert q.pop_due(49) == []
    assert q.pop_due(50) == ["tick"]
    assert q.cancel(tid)
    assert q.pop_due(1_000) == []


def test_cancelled_slots_are_compacted() -> None:
    q: TimerQueue[int] = TimerQueue()
    ids = [q.add(i, 1_000 + i) for i in range(1_000)]
    for tid in ids[:900]:
        q.cancel(tid)
    assert len(q) == 100
    assert len(q._heap) < 500  # compacted, not left to rot
    assert q.pop_due(10_000) == list(range(900, 1_000))


def test_clear_returns_what_was_armed() -> None:
    q: TimerQueue[str] = TimerQueue()
    q.add("a", 1)
    q.add("b", 2, 5)
    assert sorted(q.clear()) == ["a", "b"]
    assert q.pop_due(100) == []


def test_negative_period_is_refused() -> None:
    with pytest.raises(TimerError, match="period_ns=-1"):
        TimerQueue[str]().add("x", 0, -1)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 1_000), st.sampled_from([0, 0, 7, 50])),
        st.tuples(st.just("cancel"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("advance"), st.integers(0, 300), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_queue_matches_a_naive_model(program: list[tuple[str, int, int]]) -> None:
    """Random add/cancel/advance programs against a list-based model."""
    q: TimerQueue[int] = TimerQueue()
    model: dict[int, list[int]] = {}  # id -> [deadline, period]
    ids: list[int] = []
    now = 0
    for op, a, b in program:
        if op == "add":
            tid = q.add(len(ids), now + a, b)
            ids.append(tid)
            model[tid] = [now + a, b]
        elif op == "cancel":
            if ids:
                tid = ids[a % len(ids)]
                assert q.cancel(tid) == (tid in model)
                model.pop(tid, None)
        else:
            now += a
            due = sorted(
                ((d, tid) for tid, (d, _) in model.items() if d <= now),
            )
            expected = [ids.index(tid) for _, tid in due]
            got = q.pop_due(now)
            assert sorted(got) == sorted(expected)
            for d, tid in due:
                period = model[tid][1]
                if period:
                    k = (now - d) // period + 1
                    model[tid][0] = d + k * period
                else:
                    del model[tid]
        assert len(q) == len(model)
        assert q.next_deadline() == (min(d for d, _ in model.values()) if model else None)


# ------------------------------------------------------------------- timer thread


class Clocked(Actor):
    def __init__(self) -> None:
        super().__init__("clocked")
        self.times: list[int] = []
        self.threads: set[str] = set()
        self.done = threading.Event()
        self.limit = 0

    def tick(self) -> None:
        self.times.append(time.monotonic_ns())
        self.threads.add(threading.current_thread().name)
        if len(self.times) == self.limit:
            self.done.set()


def test_one_shot_fires_once_after_its_delay(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Clocked()
    a.limit = 1
    runtime.register(a)
    start = time.monotonic_ns()
    handle = a.schedule(0.02, a.tick)
    assert handle.active and not handle.repeating and handle.period_s is None
    assert a.done.wait(WAIT)
    assert a.times[0] - start >= 20 * MS
    assert not handle.active and not handle.cancelled
    assert not handle.cancel()  # already fired: harmless
    assert a.threads == {"actorbus-default-0"}
    assert len(runtime.timers) == 0


def test_repeating_timer_keeps_its_rate(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Clocked()
    a.limit = 10
    runtime.register(a)
    start = time.monotonic_ns()
    handle = a.schedule_every(0.01, a.tick)
    assert handle.repeating and handle.period_s == pytest.approx(0.01)
    assert a.done.wait(WAIT)
    handle.cancel()
    # the k-th tick is never early (drift is checked exactly with the fake clock)
    for k, t in enumerate(a.times[:10], start=1):
        assert t - start >= k * 10 * MS
    print(f"10 ticks of 10 ms took {(a.times[9] - start) / MS:.1f} ms")
    assert a.times[9] - start < 10 * 10 * MS + 1_000 * MS


def test_cancel_on_the_actor_beats_an_already_queued_expiry(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Actor("canceller")
    runtime.register(a)
    fired: list[str] = []
    queued = threading.Event()
    outcome: list[object] = []
    handles = []

    def busy_then_cancel() -> None:
        # first in the mailbox: the timer's expiry queues up behind this task
        assert queued.wait(WAIT)
        assert a._ab_mailbox is not None
        outcome.append(a._ab_mailbox.depth)
        outcome.append(handles[0].cancel())
        a.post(done.set)  # behind the queued expiry

    done = threading.Event()
    a.post(busy_then_cancel)
    handles.append(a.schedule(0.0, fired.append, "timer"))
    # same deadline or later, popped after it: once this ran, the expiry is posted
    runtime.timers.call_later(0.0, queued.set)
    assert done.wait(WAIT)
    assert outcome == [1, True]  # the expiry was queued, and still cancellable
    assert fired == []  # ... and it never ran
    assert handles[0].cancelled


def test_busy_actor_skips_repeats_instead_of_piling_them(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Actor("busy")
    runtime.register(a)
    ticks: list[int] = []
    gate = threading.Event()
    a.post(gate.wait, WAIT)  # the actor is busy ...
    handle = a.schedule_every(0.002, ticks.append, 1)
    seen = threading.Event()
    later = runtime.timers.call_later(0.1, seen.set)  # ... for 50 periods
    assert seen.wait(WAIT)
    assert a._ab_mailbox is not None and a._ab_mailbox.depth == 1  # one expiry queued, not 25
    gate.set()
    done = threading.Event()
    a.post(done.set)
    assert done.wait(WAIT)
    handle.cancel()
    assert handle.skipped >= 1
    assert not later.active


def test_call_later_runs_on_the_timer_thread(make_runtime: Make) -> None:
    runtime = make_runtime()
    where: list[tuple[str, object]] = []
    done = threading.Event()

    def note(tag: str) -> None:
        where.append((threading.current_thread().name, current_actor()))
        done.set()

    runtime.timers.call_later(0.001, note, "x")
    assert done.wait(WAIT)
    assert where == [("actorbus-timer", None)]


def test_call_later_errors_are_logged_and_thread_survives(
    make_runtime: Make, log_records: list[dict[str, object]]
) -> None:
    runtime = make_runtime()

    def fail() -> None:
        raise ZeroDivisionError("nope")

    runtime.timers.call_later(0.0, fail)
    done = threading.Event()
    runtime.timers.call_later(0.001, done.set)
    assert done.wait(WAIT)
    messages = [str(r["message"]) for r in log_records]
    assert any("timer" in m and "fail" in m and "nope" in m for m in messages)


@pytest.mark.parametrize(
    ("delay", "message"),
    [
        (-1.0, "delay_s=-1.0 for actor 'x': expected a finite number of seconds >= 0"),
        (math.nan, "delay_s=nan"),
        (math.inf, "delay_s=inf"),
        ("1", "delay_s='1' for actor 'x': expected a number of seconds"),
        (True, "delay_s=True"),
    ],
)
def test_bad_delays_are_refused(make_runtime: Make, delay: object, message: str) -> None:
    runtime = make_runtime()
    a = Actor("x")
    runtime.register(a)
    with pytest.raises(TimerError, match=message):
        a.schedule(delay, print)  # type: ignore[arg-type]


def test_bad_periods_are_refused(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Actor("x")
    runtime.register(a)
    with pytest.raises(
        TimerError, match="period_s=0 for actor 'x': expected a finite number of seconds > 0"
    ):
        a.schedule_every(0, print)
    with pytest.raises(TimerError, match="period_s=-2"):
        a.schedule_every(-2, print)


def test_timers_die_with_the_runtime() -> None:
    runtime = ActorRuntime()
    a = Actor("mortal")
    runtime.register(a)
    handle = a.schedule(60, print)
    timers = runtime.timers
    runtime.close()
    assert handle.cancelled
    with pytest.raises(RuntimeClosedError):
        timers.call_later(1, print)


class _CountingCondition(threading.Condition):
    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        super().notify(n)


def test_a_later_timer_does_not_wake_the_thread_an_earlier_one_does() -> None:
    """Request timeouts are added and cancelled per request: each later than the
    thread's alarm, so none costs a wake-up of the timer thread."""
    timers = TimerService()
    cond = timers._cond = _CountingCondition(timers._lock)  # the queue's lock
    timers.start()
    try:
        timeout = timers.call_later(60.0, lambda: None)
        # asleep with its alarm at that timer (not still asleep on the empty queue,
        # ``inf``, before the notify of the call above got it running)
        assert wait_until(lambda: -math.inf < timers._sleeps_until < math.inf, WAIT)
        before = cond.notified
        for _ in range(100):  # as a requestor does: its last timeout is cancelled first
            timeout.cancel()
            timeout = timers.call_later(60.0, lambda: None)
        assert cond.notified == before
        fired = threading.Event()
        timers.call_later(0.001, fired.set)  # earlier than the alarm: wakes it, fires on time
        assert fired.wait(WAIT)
        assert cond.notified == before + 1
        assert timers.wakeups >= 1
    finally:
        timers.stop()


@pytest.mark.parametrize("delay", [-1, -0.5, math.nan, math.inf, -math.inf, True, "1", None])
def test_call_later_refuses_a_bad_delay(delay: object) -> None:
    timers = TimerService()
    with pytest.raises(TimerError, match="delay_s=.* for call_later"):
        timers.call_later(delay, print)  # type: ignore[arg-type]
    assert len(timers) == 0


def test_call_later_takes_int_and_float_delays_and_cancels() -> None:
    timers = TimerService()
    timers.start()
    try:
        fired: list[object] = []
        done = threading.Event()
        timers.call_later(0, fired.append, "int")
        timers.call_later(0.0, fired.append, "float")
        cancelled = timers.call_later(0.001, fired.append, "cancelled")
        assert cancelled.cancel() is True
        assert cancelled.cancel() is False
        assert cancelled.cancelled
        later = timers.call_later(3600, fired.append, "later")
        assert len(timers) >= 1
        timers.call_later(0.002, done.set)
        assert done.wait(WAIT)
        assert sorted(fired) == ["float", "int"]  # type: ignore[type-var]
        assert later.cancel() is True
        assert len(timers) == 0
    finally:
        timers.stop()
