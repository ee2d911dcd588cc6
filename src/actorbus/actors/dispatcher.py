"""Dispatchers: run queues of runnable mailboxes and the threads that drain them.

Theory of operation
-------------------
A dispatcher owns a *run queue* of runnable mailboxes (see
:mod:`actorbus.actors.mailbox` for how a mailbox gets on it exactly once) and
worker threads named ``actorbus-<dispatcher>-<i>``.  A worker takes a mailbox
off the run queue and drains it in a batch, one task after another, on its own
thread.  After each task it checks the *run quantum*: if another mailbox is
waiting on the run queue, the mailbox still has tasks and the batch has run
longer than ``quantum_ns``, the mailbox goes back on the run queue (a *quantum
overrun*) and the worker takes the next one.  The quantum is not preemptive: a
single long task keeps its thread.  When nobody is waiting the clock is not
read at all, since handing the thread back would only give it to the same
mailbox again; the batch's start time is kept, so a newcomer is served after
at most one more task.  A batch that starts with a single task (the usual
hop of a message from a link) runs it without reading the clock; if more
tasks came meanwhile, the batch goes on and its quantum counts from then.

When the deque is empty the worker puts the mailbox's token back, looks at the
deque once more and reschedules the mailbox if a task slipped in (the mailbox
module explains why this strands nothing).

Thread kinds differ only in how an idle worker waits for the run queue:

* ``blocking`` — :class:`queue.SimpleQueue` ``get()``; an idle thread sleeps in
  the kernel and costs nothing.  The right default.
* ``spinning`` — polls the run queue forever.
* ``spin+park`` — polls up to ``spin_limit`` times in a row, then sleeps
  ``park_time_ns`` between polls until work shows up (the OS rounds short
  sleeps up to tens of microseconds).
* ``spin+yield`` — polls up to ``spin_limit`` times in a row, then waits in the
  kernel, as a blocking worker does, until a post wakes it.

Under the GIL a poll must not keep the interpreter: a thread that wants it from
a busy thread gets it only at the switch interval (5 ms by default), so a worker
that polled with the GIL held would make every hand-off from another Python
thread (a link's I/O thread, a poster) wait that long.  Every empty poll of
every polling kind therefore ends with ``os.sched_yield()`` (``_release_gil``),
which drops the GIL and offers the CPU to whoever waits for either.  A polling
worker is awake when the next mailbox arrives, so it skips the kernel wake-up a
blocking worker needs; it pays with a busy core (docs/actors.md has figures).

The ``asyncio`` kind runs one event loop thread (uvloop when importable).  A
mailbox is scheduled with ``loop.call_soon_threadsafe`` when a post from
another thread makes it runnable, with ``loop.call_soon`` from the loop thread
itself: one call per scheduling, not per task.  A task whose result is a
coroutine (an ``async def`` callback) is awaited before the actor's next task;
other actors keep running on the loop meanwhile.  The quantum is checked
against the clock after every task.

A network link whose selector shares the loop (``SelectorConfig.dispatcher``)
brackets each read with :meth:`AsyncioDispatcher.defer_runs` and
:meth:`AsyncioDispatcher.run_deferred`: mailboxes made runnable on the loop
thread in between are not given to ``call_soon`` but run when the read's
protocol work is done, still inside that loop callback.  Nothing about the
actors changes (same thread, one task at a time, mailbox order, the quantum;
no actor code is on the stack when they run); what goes is one loop iteration
(a poll) per hop, and the link writes what the actors answered in the same
callback.

Held wake-ups
-------------
A blocking worker woken while the waking thread still holds the GIL finds the
interpreter taken, sleeps again on it, and needs a second wake-up when it is
released, so a hand-off whose poster goes on working after the ``put``
delivers later than one whose poster did that work first (docs/performance.md,
"Figures measured once").  A thread that delivers a batch (a link's I/O thread handling a read)
brackets it with :func:`hold_wakes` and :func:`release_wakes`: the tasks go into
the mailboxes at once (a worker already awake takes them), but the ``put`` that
wakes a sleeping worker waits for the end of the batch, when the thread is about
to give up the GIL.  Only blocking dispatchers hold wake-ups (a polling worker
needs none); holds are per thread, so other posters are not affected.

Thread priority is accepted and reported but not applied: CPython has no
portable thread-priority API, and a lowered OS priority on a thread that holds
the GIL would slow every other thread (priority inversion).

Counters (:meth:`Dispatcher.stats`) are kept per worker thread, written only
by that thread and summed when read, so counting needs no lock.
"""

from __future__ import annotations

import abc
import functools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

from actorbus._log import logger
from actorbus.actors._context import _tls
from actorbus.actors._dispatcher_base import (
    _CHUNK,
    Dispatcher,
    DispatcherStats,
    MailboxStats,
    _Counters,
)
from actorbus.actors.asyncio_dispatcher import AsyncioDispatcher
from actorbus.actors.mailbox import Mailbox
from actorbus.config.schema import DispatcherConfig, DispatcherKind

__all__ = [
    "AsyncioDispatcher",
    "BlockingDispatcher",
    "Dispatcher",
    "DispatcherStats",
    "MailboxStats",
    "SpinParkDispatcher",
    "SpinYieldDispatcher",
    "SpinningDispatcher",
    "hold_wakes",
    "make_dispatcher",
    "release_wakes",
]


# ------------------------------------------------------------------ thread kinds


class _ThreadDispatcher(Dispatcher):
    """Worker threads draining mailboxes; subclasses choose how idle threads wait."""

    #: ``waiting()`` is true when another mailbox is on the run queue.
    _waiting: Callable[[], int]

    def _start_threads(self) -> None:
        for i, name in enumerate(self.thread_names):
            t = threading.Thread(target=self._run_worker, args=(i,), name=name, daemon=True)
            self._threads.append(t)
            t.start()

    def _run_worker(self, index: int) -> None:
        try:
            self._worker(self._counters[index])
        except BaseException as exc:  # pragma: no cover - a bug in the worker loop itself
            logger.opt(exception=exc).critical(
                "dispatcher {!r}: worker thread {!r} died: {}",
                self.name,
                threading.current_thread().name,
                exc,
            )
            raise

    @abc.abstractmethod
    def _worker(self, c: _Counters) -> None:
        """Take mailboxes off the run queue and drain them until told to stop."""

    def _drain(self, mailbox: Mailbox, c: _Counters) -> None:
        """Run the mailbox's tasks in a batch (the worker holds its token).

        Tasks are taken in chunks of what the deque holds (at most
        ``_CHUNK``): only this worker pops, so a chunk needs no emptiness
        check per task, and the depth is sampled once per chunk for
        ``max_depth``.
        """
        queue = mailbox.tasks
        popleft = queue.popleft
        _tls.actor = mailbox.actor
        mailbox.running = True
        depth = len(queue) >> 1  # two items per task
        if depth > mailbox.peak:  # noqa: PLR1730 (no builtin call per drain)
            mailbox.peak = depth
        if depth == 1 and self._one_task(mailbox, popleft(), popleft(), c):
            return  # the usual batch of a message from a link: one task, done
        n = 0
        waiting = self._waiting
        clock = perf_counter_ns
        deadline = clock() + self._quantum_ns
        depth = len(queue) >> 1
        if depth > mailbox.peak:  # noqa: PLR1730
            mailbox.peak = depth
        while depth:
            if depth > _CHUNK:  # noqa: PLR1730
                depth = _CHUNK
            for i in range(depth):
                fn = popleft()
                arg = popleft()
                try:
                    r = fn(arg)
                except Exception as exc:
                    self._task_failed(mailbox, fn, arg, exc, c)
                except BaseException as exc:
                    self._task_fatal(mailbox, fn, arg, exc)
                else:
                    if r is not None:
                        self._task_returned(mailbox, fn, arg, r, c)
                if queue and waiting() and clock() > deadline:
                    c.tasks += n + i + 1
                    c.overruns += 1
                    mailbox.tasks_run += n + i + 1
                    mailbox.quantum_overruns += 1
                    mailbox.running = False
                    _tls.actor = None
                    self._schedule(mailbox)  # the token is still ours: back on the run queue
                    return
            n += depth
            if not queue:
                break
            depth = len(queue) >> 1
            if depth > mailbox.peak:  # noqa: PLR1730
                mailbox.peak = depth
        c.tasks += n
        mailbox.tasks_run += n
        mailbox.running = False
        _tls.actor = None
        if mailbox.idle_again():  # a task slipped in: go again
            self._schedule(mailbox)

    def _one_task(self, mailbox: Mailbox, fn: Any, arg: Any, c: _Counters) -> bool:
        """Run a batch's only task, with no quantum to keep; True when the batch
        is over (nothing came meanwhile), False when more tasks are waiting and
        the caller goes on as for any batch (the quantum counted from then)."""
        try:
            r = fn(arg)
        except Exception as exc:
            self._task_failed(mailbox, fn, arg, exc, c)
        except BaseException as exc:
            self._task_fatal(mailbox, fn, arg, exc)
        else:
            if r is not None:
                self._task_returned(mailbox, fn, arg, r, c)
        c.tasks += 1
        mailbox.tasks_run += 1
        if mailbox.tasks:
            return False
        mailbox.running = False
        _tls.actor = None
        if mailbox.idle_again():  # a task slipped in: go again
            self._schedule(mailbox)
        return True


class _HeldWakes(threading.local):
    """Per thread: the wake-ups :func:`hold_wakes` holds (``(put, mailbox)``
    pairs), or None when this thread holds none."""

    held: list[tuple[Callable[[Mailbox], object], Mailbox]] | None = None


_held_wakes = _HeldWakes()


def hold_wakes() -> bool:
    """(any thread, outside actor code) Until :func:`release_wakes`, hold the
    wake-ups of blocking dispatchers for mailboxes this thread makes runnable.

    For a thread that delivers a batch of messages and then gives up the GIL (a
    link's I/O thread handling a read): the tasks are queued at once, but the
    workers are woken when the batch is done, so each finds the interpreter free
    instead of waking into the delivering thread's GIL and sleeping again until
    it is released (module docstring, "Held wake-ups").  Returns False, and
    changes nothing, when this thread already holds wake-ups (nested callers
    leave the release to the outer one).  Call :func:`release_wakes` in a
    ``finally``: a held wake-up is a mailbox nobody runs.
    """
    if _held_wakes.held is not None:
        return False
    _held_wakes.held = []
    return True


def release_wakes() -> None:
    """Wake, in order, the workers of every mailbox :func:`hold_wakes` held."""
    held, _held_wakes.held = _held_wakes.held, None
    if held:
        for put, mailbox in held:
            put(mailbox)


class BlockingDispatcher(_ThreadDispatcher):
    """Idle workers sleep in ``queue.SimpleQueue.get()``."""

    kind = DispatcherKind.BLOCKING

    def __init__(self, config: DispatcherConfig) -> None:
        super().__init__(config)
        run_queue: queue.SimpleQueue[Mailbox | None] = queue.SimpleQueue()
        self._run_queue = run_queue
        self._put = run_queue.put
        self._waiting = run_queue.qsize

    def _schedule(self, mailbox: Mailbox) -> None:
        held = _held_wakes.held
        if held is None:
            self._put(mailbox)
        else:  # the thread is in hold_wakes(): the worker is woken by release_wakes()
            held.append((self._put, mailbox))

    def _signal_stop(self) -> None:
        for _ in self._threads:
            self._run_queue.put(None)

    def _worker(self, c: _Counters) -> None:
        get = self._run_queue.get
        drain = self._drain
        while True:
            mailbox = get()
            if mailbox is None:
                return
            c.scheduled += 1
            drain(mailbox, c)


#: An empty poll's release of the GIL.  ``os.sched_yield()`` lets whichever thread
#: waits for the interpreter (or for this CPU) run; a poll that kept the GIL would
#: make every other Python thread (a link's I/O thread, posters, the timer thread)
#: wait up to the switch interval (5 ms) for it.
_release_gil: Callable[[], object] = (
    os.sched_yield if hasattr(os, "sched_yield") else functools.partial(time.sleep, 0)
)

#: ``_past_limit()`` found nothing: poll again
_EMPTY: Any = object()


class _PollingDispatcher(_ThreadDispatcher):
    """Workers poll the run queue and give the GIL up after every empty poll (see
    ``_release_gil``); after ``spin_limit`` empty polls in a row they do what the
    kind says (``_past_limit``) until work shows up."""

    def __init__(self, config: DispatcherConfig) -> None:
        super().__init__(config)
        run_queue: queue.SimpleQueue[Mailbox | None] = queue.SimpleQueue()
        self._run_queue = run_queue
        self._schedule = run_queue.put
        self._waiting = run_queue.qsize
        #: empty polls in a row before a worker does what ``_past_limit`` does.
        self._spin_limit = config.spin_limit

    def _signal_stop(self) -> None:
        for _ in self._threads:
            self._run_queue.put(None)

    def _past_limit(self, get: Callable[..., Mailbox | None]) -> Mailbox | None:
        """What an idle worker does past the spin limit: a mailbox (or None: stop)
        it waited for, or ``_EMPTY`` to poll again."""
        _release_gil()
        return _EMPTY  # type: ignore[no-any-return]

    def _worker(self, c: _Counters) -> None:
        run_queue = self._run_queue
        size = run_queue.qsize
        get = run_queue.get
        drain = self._drain
        release = _release_gil
        past_limit = self._past_limit
        limit = self._spin_limit
        spins = 0
        while True:
            if size():
                try:
                    mailbox = get(False)
                except queue.Empty:  # another worker took it
                    continue
            elif spins < limit:
                spins += 1
                release()
                continue
            else:
                mailbox = past_limit(get)
                if mailbox is _EMPTY:
                    continue
            if mailbox is None:
                return
            spins = 0
            c.scheduled += 1
            drain(mailbox, c)


class SpinningDispatcher(_PollingDispatcher):
    """Idle workers poll forever, giving the GIL up after each empty poll."""

    kind = DispatcherKind.SPINNING

    def __init__(self, config: DispatcherConfig) -> None:
        super().__init__(config)
        self._spin_limit = sys.maxsize  # never past it


class SpinParkDispatcher(_PollingDispatcher):
    """Idle workers poll ``spin_limit`` times, then sleep ``park_time_ns`` per poll."""

    kind = DispatcherKind.SPIN_PARK

    def __init__(self, config: DispatcherConfig) -> None:
        super().__init__(config)
        self._park_s = config.park_time_ns / 1e9

    def _past_limit(self, get: Callable[..., Mailbox | None]) -> Mailbox | None:
        time.sleep(self._park_s)
        return _EMPTY  # type: ignore[no-any-return]


class SpinYieldDispatcher(_PollingDispatcher):
    """Idle workers poll ``spin_limit`` times, then wait for work as a blocking
    worker does (a post wakes them); they spin again after each task."""

    kind = DispatcherKind.SPIN_YIELD

    def _past_limit(self, get: Callable[..., Mailbox | None]) -> Mailbox | None:
        return get()


_KINDS: dict[DispatcherKind, type[Dispatcher]] = {
    DispatcherKind.BLOCKING: BlockingDispatcher,
    DispatcherKind.SPINNING: SpinningDispatcher,
    DispatcherKind.SPIN_PARK: SpinParkDispatcher,
    DispatcherKind.SPIN_YIELD: SpinYieldDispatcher,
    DispatcherKind.ASYNCIO: AsyncioDispatcher,
}


def make_dispatcher(config: DispatcherConfig) -> Dispatcher:
    """Build the dispatcher ``config`` describes (not started: call :meth:`~Dispatcher.start`).

    Raises :class:`~actorbus.errors.ConfigError` for an impossible thread
    count, quantum, spin limit or park time.
    """
    return _KINDS[config.kind](config)
