"""Mailbox and dispatcher mechanics below the runtime: post never runs inline, the
idle/runnable/running states, no stranded task under racing posters, exports."""

from __future__ import annotations

import os
import random
import threading

import pytest

import actorbus.actors
from actorbus import UsageError
from actorbus.actors import Mailbox, make_dispatcher
from actorbus.actors.dispatcher import BlockingDispatcher, hold_wakes, release_wakes
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.errors import RegistrationError

WAIT = 10.0


@pytest.mark.parametrize("kind", list(DispatcherKind))
def test_post_never_runs_inline_and_waits_for_start(kind: DispatcherKind) -> None:
    d = make_dispatcher(DispatcherConfig(name="m", kind=kind, spin_limit=100))
    mailbox = Mailbox(d, name="box")
    ran: list[str] = []
    done = threading.Event()
    assert mailbox.state == "idle"
    mailbox.post(ran.append, "first")
    mailbox.post(ran.append, "second")
    mailbox.post(done.set)
    assert ran == []  # not inline, and nothing runs before start
    assert mailbox.state == "runnable"
    assert mailbox.depth == 3
    assert d.stats().run_queue_length == 1
    d.start()
    try:
        assert done.wait(WAIT)
        assert ran == ["first", "second"]
        assert mailbox.depth == 0
        assert mailbox.max_depth == 3
    finally:
        assert d.stop() == []
    assert mailbox.state in {"idle", "runnable"}  # snapshot after the last batch


def test_any_number_of_arguments() -> None:
    d = make_dispatcher(DispatcherConfig(name="args"))
    d.start()
    try:
        mailbox = Mailbox(d, name="args")
        got: list[tuple[object, ...]] = []
        done = threading.Event()
        mailbox.post(lambda: got.append(()))
        mailbox.post(lambda a: got.append((a,)), 1)
        mailbox.post(lambda a, b: got.append((a, b)), 1, 2)
        mailbox.post(lambda a, b, c, e: got.append((a, b, c, e)), 1, 2, 3, 4)
        mailbox.post(done.set)
        assert done.wait(WAIT)
        assert got == [(), (1,), (1, 2), (1, 2, 3, 4)]
    finally:
        d.stop()


def test_detach_and_repr() -> None:
    d = make_dispatcher(DispatcherConfig(name="r"))
    mailbox = Mailbox(d, name="shown")
    assert [m.actor for m in d.stats().mailboxes] == ["shown"]
    assert repr(mailbox) == "<Mailbox 'shown' on 'r' idle depth=0>"
    assert mailbox.dispatcher is d
    mailbox.detach()
    assert d.stats().mailboxes == ()
    assert "BlockingDispatcher 'r' blocking threads=1 new" in repr(d)


@pytest.mark.parametrize("kind", list(DispatcherKind))
def test_posting_after_stop_is_accepted_and_dropped(kind: DispatcherKind) -> None:
    d = make_dispatcher(DispatcherConfig(name="late", kind=kind, spin_limit=100))
    d.start()
    mailbox = Mailbox(d, name="late")
    assert d.stop() == []
    ran: list[int] = []
    mailbox.post(ran.append, 1)  # no exception, nothing runs
    assert ran == []
    with pytest.raises(UsageError, match="was stopped and cannot start again"):
        d.start()


def test_stop_from_own_thread_is_refused() -> None:
    d = make_dispatcher(DispatcherConfig(name="self"))
    d.start()
    try:
        mailbox = Mailbox(d, name="self")
        outcome: list[BaseException] = []
        done = threading.Event()

        def stop_inside() -> None:
            try:
                d.stop()
            except UsageError as exc:
                outcome.append(exc)
            done.set()

        mailbox.post(stop_inside)
        assert done.wait(WAIT)
        assert "from its own thread" in str(outcome[0])
    finally:
        d.stop()


@pytest.mark.parametrize("kind", [DispatcherKind.BLOCKING, DispatcherKind.SPIN_YIELD])
def test_no_task_is_stranded_by_racing_posters(kind: DispatcherKind) -> None:
    """Random bursts from 4 posters into 16 mailboxes on 3 workers: every task runs,
    exactly once, in per-poster order.  Posters yield the CPU at random points to
    shake out the release-then-recheck window."""
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    d = make_dispatcher(DispatcherConfig(name="race", kind=kind, thread_count=3, spin_limit=50))
    d.start()
    try:
        boxes = [Mailbox(d, name=f"b{i}") for i in range(16)]
        seen: list[list[list[int]]] = [[[] for _ in range(4)] for _ in boxes]
        per_poster = 3_000
        totals = [0] * 4

        def poster(p: int) -> None:
            rng = random.Random(seed + p)
            counts = [0] * len(boxes)
            sent = 0
            while sent < per_poster:
                i = rng.randrange(len(boxes))
                for _ in range(rng.randint(1, 5)):
                    boxes[i].post(seen[i][p].append, counts[i])
                    counts[i] += 1
                    sent += 1
                if rng.random() < 0.2:
                    os.sched_yield()
            totals[p] = sent

        threads = [threading.Thread(target=poster, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done = threading.Event()
        left = [len(boxes)]
        lock = threading.Lock()

        def arrive() -> None:
            with lock:
                left[0] -= 1
                if not left[0]:
                    done.set()

        for box in boxes:
            box.post(arrive)
        assert done.wait(WAIT), f"tasks stranded (seed={seed}): {d.stats()}"
        total = sum(len(s) for per_box in seen for s in per_box)
        assert total == sum(totals)
        for per_box in seen:
            for s in per_box:
                assert s == list(range(len(s)))
        assert d.stats().tasks_run == total + len(boxes)
    finally:
        d.stop()


def test_public_exports() -> None:
    assert sorted(actorbus.actors.__all__) == sorted(
        [
            "Actor",
            "ActorContext",
            "ActorRuntime",
            "Completion",
            "Dispatcher",
            "DispatcherStats",
            "FailedTask",
            "Mailbox",
            "MailboxStats",
            "NotRegisteredError",
            "RuntimeClosedError",
            "TimerError",
            "TimerHandle",
            "TimerQueue",
            "TimerService",
            "UnknownDispatcherError",
            "current_actor",
            "make_dispatcher",
        ]
    )
    for name in actorbus.actors.__all__:
        assert getattr(actorbus.actors, name) is not None
    assert issubclass(actorbus.actors.UnknownDispatcherError, LookupError)
    assert issubclass(actorbus.actors.NotRegisteredError, RegistrationError)
    assert issubclass(actorbus.actors.TimerError, ValueError)


@pytest.mark.parametrize("kind", list(DispatcherKind))
def test_post_each_is_post_per_argument_scheduled_once(kind: DispatcherKind) -> None:
    d = make_dispatcher(DispatcherConfig(name="each", kind=kind, spin_limit=100))
    mailbox = Mailbox(d, name="each")
    ran: list[object] = []
    done = threading.Event()
    mailbox.post(ran.append, "before")
    mailbox.post_each(ran.append, [])
    mailbox.post_each(ran.append, [1, (2, 3), None])
    mailbox.post_each(ran.append, ["x"])
    mailbox.post(done.set)
    assert mailbox.depth == 6
    assert d.stats().run_queue_length == 1  # scheduled once
    d.start()
    try:
        assert done.wait(WAIT)
        assert ran == ["before", 1, (2, 3), None, "x"]
        assert mailbox.max_depth == 6
        mailbox.post_each(ran.append, list(range(3000)))
        done.clear()
        mailbox.post(done.set)
        assert done.wait(WAIT)
        assert ran[5:] == list(range(3000))
    finally:
        assert d.stop() == []


def test_held_wakes_queue_tasks_at_once_and_wake_the_worker_on_release() -> None:
    """A thread that holds wake-ups (a link's I/O thread handling a read) queues the
    task and makes the mailbox runnable, but the blocking worker is woken only by
    release_wakes(); other threads' posts are not held."""
    d = make_dispatcher(DispatcherConfig(name="held"))
    d.start()
    try:
        held_box = Mailbox(d, name="held")
        other_box = Mailbox(d, name="other")
        ran: list[str] = []
        done, other_done = threading.Event(), threading.Event()
        assert hold_wakes()
        try:
            assert not hold_wakes()  # nested: the outer holder releases
            held_box.post(ran.append, "held")
            held_box.post(done.set)
            assert held_box.state == "runnable"
            assert held_box.depth == 2
            assert isinstance(d, BlockingDispatcher)
            assert d._run_queue.qsize() == 0  # no worker was woken
            # another thread's post is not held, even while this thread holds
            poster = threading.Thread(target=other_box.post, args=(other_done.set,))
            poster.start()
            poster.join(WAIT)
            assert other_done.wait(WAIT)
            assert ran == []
            release_wakes()  # the nested call released nothing: this one wakes
        finally:
            release_wakes()  # a second release is harmless
        assert done.wait(WAIT)
        assert ran == ["held"]
        assert hold_wakes()  # released: a new hold opens
        release_wakes()
    finally:
        assert d.stop() == []
