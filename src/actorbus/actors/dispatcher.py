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
at most one more task.

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
released: measured on a 2-core VM, a hand-off whose poster keeps the GIL 10 us
after the ``put`` takes ~25 us, against ~18 us when the same 10 us of work comes
before it.  A thread that delivers a batch (a link's I/O thread handling a read)
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
import asyncio
import functools
import os
import queue
import sys
import threading
import time
import types
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, ClassVar

from actorbus._log import logger, report
from actorbus.actors._context import _tls
from actorbus.actors.failure import FailedTask, callback_label, describe_task, report_failure
from actorbus.actors.mailbox import Mailbox, MailboxState
from actorbus.config.schema import DispatcherConfig, DispatcherKind
from actorbus.errors import ConfigError, UsageError

#: the most tasks a worker runs between two samples of a mailbox's depth.
_CHUNK = 1024

__all__ = [
    "AsyncioDispatcher",
    "BlockingDispatcher",
    "Dispatcher",
    "DispatcherStats",
    "MailboxStats",
    "SpinParkDispatcher",
    "SpinYieldDispatcher",
    "SpinningDispatcher",
    "make_dispatcher",
]


@dataclass(frozen=True, slots=True)
class MailboxStats:
    """One actor's mailbox as seen by :meth:`Dispatcher.stats`."""

    actor: str
    state: MailboxState
    #: tasks queued now.
    depth: int
    #: highest depth seen so far.
    max_depth: int


@dataclass(frozen=True, slots=True)
class DispatcherStats:
    """A snapshot of one dispatcher's counters (all totals since it started)."""

    name: str
    kind: DispatcherKind
    thread_count: int
    #: configured priority; recorded, not applied (see the module docs).
    priority: int
    quantum_ns: int
    #: tasks run (including ones that raised).
    tasks_run: int
    #: tasks that raised, or returned a coroutine on a thread dispatcher.
    task_failures: int
    #: times a mailbox was taken off the run queue to be drained.
    actors_scheduled: int
    #: times a mailbox went back on the run queue because its quantum ran out.
    quantum_overruns: int
    #: mailboxes waiting on the run queue now.
    run_queue_length: int
    mailboxes: tuple[MailboxStats, ...]
    #: (asyncio) drains run at the end of a network read on the loop a link shares,
    #: in the read's own callback (see :meth:`AsyncioDispatcher.defer_runs`).
    #: Included in ``actors_scheduled``.
    drained_after_read: int = 0


class _Counters:
    """Counters of one worker thread; only that thread writes them."""

    __slots__ = ("after_read", "failures", "overruns", "scheduled", "tasks")

    def __init__(self) -> None:
        self.tasks = 0
        self.failures = 0
        self.scheduled = 0
        self.overruns = 0
        self.after_read = 0


class Dispatcher(abc.ABC):
    """A run queue of runnable mailboxes and the threads that drain them.

    Make one with :func:`make_dispatcher`; :meth:`start` it before posting,
    :meth:`stop` it to join its threads.  Tasks still queued at :meth:`stop`
    may not run.
    """

    #: the polling kind this class implements.
    kind: ClassVar[DispatcherKind]
    #: True when ``async def`` callbacks are awaited (the asyncio kind).
    is_async: ClassVar[bool] = False
    #: puts a mailbox whose token the caller holds on the run queue; set by each
    #: kind in ``__init__`` (often straight to the queue's C method).
    _schedule: Callable[[Mailbox], object]

    def __init__(self, config: DispatcherConfig) -> None:
        _validate(config)
        self.config = config
        self.name = config.name
        self._quantum_ns = config.quantum_ns
        self._mailboxes: dict[int, Mailbox] = {}
        self._mailboxes_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idents: frozenset[int] = frozenset()
        self._counters: list[_Counters] = [_Counters() for _ in range(self.thread_count)]
        self._lifecycle_lock = threading.Lock()
        self._started = False
        self._stopped = False

    # ------------------------------------------------------------------ properties

    @property
    def thread_count(self) -> int:
        """Worker threads this dispatcher runs."""
        return self.config.thread_count

    @property
    def priority(self) -> int:
        """Configured thread priority (recorded, not applied)."""
        return self.config.priority

    @property
    def quantum_ns(self) -> int:
        """The run quantum in nanoseconds."""
        return self._quantum_ns

    @property
    def thread_names(self) -> tuple[str, ...]:
        """Names of the worker threads (``actorbus-<name>-<i>``)."""
        return tuple(f"actorbus-{self.name}-{i}" for i in range(self.thread_count))

    @property
    def is_running(self) -> bool:
        """Started and not yet stopped."""
        return self._started and not self._stopped

    def owns_current_thread(self) -> bool:
        """True when called from one of this dispatcher's worker threads."""
        return threading.get_ident() in self._idents

    # ------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the worker threads.  Calling it again does nothing; after
        :meth:`stop` it raises :class:`~actorbus.errors.UsageError`."""
        with self._lifecycle_lock:
            if self._stopped:
                raise UsageError(
                    f"dispatcher {self.name!r} was stopped and cannot start again; "
                    f"make a new one with make_dispatcher()"
                )
            if self._started:
                return
            self._start_threads()
            self._idents = frozenset(t.ident for t in self._threads if t.ident is not None)
            self._started = True

    def stop(self, timeout: float = 5.0) -> list[str]:
        """Stop the worker threads and join them for up to ``timeout`` seconds.

        Workers finish the batch they are in; mailboxes still on the run queue
        are dropped.  Returns the names of threads still alive after
        ``timeout`` (empty when all were joined).  Calling it again only joins.
        """
        if self.owns_current_thread():
            raise UsageError(
                f"dispatcher {self.name!r} cannot be stopped from its own thread "
                f"{threading.current_thread().name!r}; stop it from another thread"
            )
        with self._lifecycle_lock:
            first = not self._stopped
            self._stopped = True
        if first and self._started:
            self._signal_stop()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in self._threads if t.is_alive()]

    @abc.abstractmethod
    def _start_threads(self) -> None:
        """Create and start the worker threads, filling ``self._threads``."""

    @abc.abstractmethod
    def _signal_stop(self) -> None:
        """Tell every worker to exit."""

    # --------------------------------------------------------------------- mailboxes

    def _attach(self, mailbox: Mailbox) -> None:
        with self._mailboxes_lock:
            self._mailboxes[id(mailbox)] = mailbox

    def _detach(self, mailbox: Mailbox) -> None:
        with self._mailboxes_lock:
            self._mailboxes.pop(id(mailbox), None)

    def stats(self) -> DispatcherStats:
        """A snapshot of the counters and of every attached mailbox."""
        with self._mailboxes_lock:
            mailboxes = list(self._mailboxes.values())
        per_actor = tuple(
            MailboxStats(actor=m.name, state=m.state, depth=m.depth, max_depth=m.max_depth)
            for m in mailboxes
        )
        counters = self._counters
        return DispatcherStats(
            name=self.name,
            kind=self.kind,
            thread_count=self.thread_count,
            priority=self.priority,
            quantum_ns=self._quantum_ns,
            tasks_run=sum(c.tasks for c in counters),
            task_failures=sum(c.failures for c in counters),
            actors_scheduled=sum(c.scheduled for c in counters),
            quantum_overruns=sum(c.overruns for c in counters),
            run_queue_length=sum(1 for m in per_actor if m.state == "runnable"),
            mailboxes=per_actor,
            drained_after_read=sum(c.after_read for c in counters),
        )

    # ------------------------------------------------------------- failure reports

    #: called with a BaseException that is not an Exception (KeyboardInterrupt,
    #: SystemExit) raised by actor code; the runtime sets it to stop the node.
    on_fatal: Callable[[BaseException], object] | None = None

    def _task_failed(
        self, mailbox: Mailbox, fn: object, arg: Any, exc: BaseException, c: _Counters
    ) -> None:
        """An ``Exception`` from a task: count it and hand it to the actor's
        ``on_failure`` (which reports it by default); the actor keeps running."""
        c.failures += 1
        try:
            task = describe_task(mailbox.name, self.name, fn, arg)
        except Exception:  # describing must never take the worker down with it
            task = FailedTask(mailbox.name, self.name, object.__repr__(fn))
        actor = mailbox.actor
        if actor is None:
            report_failure(exc, task, outcome="the dispatcher keeps running")
            return
        try:
            actor.on_failure(exc, task)  # type: ignore[arg-type]
        except Exception as hook_exc:
            report_failure(exc, task, outcome="the actor keeps running")
            report_failure(
                hook_exc,
                FailedTask(mailbox.name, self.name, callback_label(actor.on_failure)),
                outcome="the failure above was reported instead",
            )

    def _task_fatal(self, mailbox: Mailbox, fn: object, arg: Any, exc: BaseException) -> None:
        """A BaseException that is not an Exception from a task: not swallowed.
        Report it once and hand it to :attr:`on_fatal`, which stops the node and
        raises it again in the thread that waits for the node (docs/actors.md).
        The worker thread stays, so every actor can still shut down in order."""
        try:
            task = describe_task(mailbox.name, self.name, fn, arg)
        except Exception:
            task = FailedTask(mailbox.name, self.name, object.__repr__(fn))
        report(
            "CRITICAL",
            f"{task} on dispatcher {self.name!r} raised {type(exc).__name__}"
            f"{': ' + str(exc) if str(exc) else ''}; the node stops",
            exception=exc,
            actor=task.actor,
            dispatcher=self.name,
        )
        hook = self.on_fatal
        if hook is not None:
            hook(exc)

    def _task_returned(
        self, mailbox: Mailbox, fn: object, arg: Any, result: object, c: _Counters
    ) -> None:
        """A thread-kind task returned something; only an awaitable is a mistake
        (an ``async def`` callback the feed could not see as one at subscribe time)."""
        if isinstance(result, Coroutine) or hasattr(result, "__await__"):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            self._task_failed(
                mailbox,
                fn,
                arg,
                UsageError(
                    f"the callback returned a coroutine (or another awaitable), but dispatcher {self.name!r} is "
                    f"{self.kind.value!r}, which does not await; pin the actor to an asyncio "
                    f"dispatcher (runQueueType=asyncio) or make the callback synchronous"
                ),
                c,
            )

    def __repr__(self) -> str:
        state = "running" if self.is_running else ("stopped" if self._stopped else "new")
        return (
            f"<{type(self).__name__} {self.name!r} {self.kind.value} "
            f"threads={self.thread_count} {state}>"
        )


def _validate(config: DispatcherConfig) -> None:
    def bad(key: str, value: object, expected: str) -> ConfigError:
        return ConfigError(
            f"dispatcher {config.name!r}: {key}={value!r}: expected {expected}",
            key=f"dispatcher.{config.name}.{key}",
        )

    if not config.name:
        raise ConfigError("a dispatcher has an empty name; give every dispatcher a name")
    if config.thread_count < 1:
        raise bad("threadCount", config.thread_count, "an integer >= 1")
    if config.quantum_ns < 1:
        raise bad("quantum", config.quantum_ns, "a positive number of nanoseconds")
    if config.spin_limit < 0:
        raise bad("spinLimit", config.spin_limit, "an integer >= 0")
    if config.park_time_ns < 0:
        raise bad("parkTime", config.park_time_ns, "a number of nanoseconds >= 0")


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
        queue = mailbox._queue
        popleft = queue.popleft
        waiting = self._waiting
        clock = perf_counter_ns
        tls = _tls
        tls.actor = mailbox.actor
        mailbox._running = True
        deadline = clock() + self._quantum_ns
        n = 0
        while True:
            depth = len(queue) >> 1  # two items per task
            if depth > mailbox._max_depth:  # noqa: PLR1730 (no builtin call per drain)
                mailbox._max_depth = depth
            if not depth:
                break
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
                    mailbox._running = False
                    tls.actor = None
                    self._schedule(mailbox)  # the token is still ours: back on the run queue
                    return
            n += depth
        c.tasks += n
        mailbox._running = False
        tls.actor = None
        mailbox._token[0] = True  # idle again ...
        if queue and mailbox._claim(0, False):  # ... unless a task slipped in
            self._schedule(mailbox)


class _HeldWakes(threading.local):
    """Per thread: the wake-ups :func:`hold_wakes` holds (``put, mailbox, ...``), or
    None when this thread holds none."""

    held: list[Any] | None = None


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
        for i in range(0, len(held), 2):
            held[i](held[i + 1])


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
            held += (self._put, mailbox)

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


# ---------------------------------------------------------------------- asyncio


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


@types.coroutine
def _as_actor(actor: Any, coro: Coroutine[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """Drive ``coro`` step by step, with ``current_actor()`` set during each step."""
    tls = _tls
    value: Any = None
    error: BaseException | None = None
    while True:
        tls.actor = actor
        try:
            signal = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as stop:
            return stop.value
        finally:
            tls.actor = None
        error = None
        value = None
        try:
            value = yield signal
        except BaseException as exc:
            error = exc


class AsyncioDispatcher(Dispatcher):
    """One event-loop thread (uvloop when importable) running its actors' tasks.

    ``thread_count`` is ignored (always one loop thread).  ``async def``
    callbacks are awaited in order, one at a time per actor.
    """

    kind = DispatcherKind.ASYNCIO
    is_async = True

    def __init__(self, config: DispatcherConfig) -> None:
        if config.thread_count != 1:
            logger.warning(
                "dispatcher {!r}: an asyncio dispatcher runs one event-loop thread; "
                "threadCount={} is ignored",
                config.name,
                config.thread_count,
            )
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_ident = -1
        self._pending: list[Mailbox] = []
        self._pending_lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._call_soon: Callable[..., object] = self._before_start
        self._call_soon_threadsafe: Callable[..., object] = self._before_start
        #: between defer_runs() and run_deferred(): mailboxes made runnable on the loop
        #: thread, in order (None: not deferring)
        self._deferred: list[Mailbox] | None = None
        #: awaited on the loop when the dispatcher stops, before the loop stops
        self._stop_hooks: list[Callable[[], Coroutine[Any, Any, object]]] = []

    @property
    def thread_count(self) -> int:
        """Always 1: one event-loop thread."""
        return 1

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop, once started (``None`` before :meth:`start`)."""
        return self._loop

    @property
    def loop_thread_ident(self) -> int:
        """``threading.get_ident()`` of the loop thread (-1 before :meth:`start`)."""
        return self._loop_ident

    def _before_start(self, _fn: object, mailbox: Mailbox) -> None:
        with self._pending_lock:
            if self._loop is None:
                self._pending.append(mailbox)
                return
        self._call_soon_threadsafe(self._run_mailbox, mailbox)

    def _start_threads(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []
        t = threading.Thread(
            target=self._run_loop,
            args=(ready, failure),
            name=self.thread_names[0],
            daemon=True,
        )
        self._threads.append(t)
        t.start()
        ready.wait()
        if failure:
            t.join()
            raise failure[0]

    def _run_loop(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            loop = _new_event_loop()
            asyncio.set_event_loop(loop)
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        self._loop_ident = threading.get_ident()
        with self._pending_lock:
            self._loop = loop
            self._call_soon = loop.call_soon
            self._call_soon_threadsafe = loop.call_soon_threadsafe
            for mailbox in self._pending:
                loop.call_soon(self._run_mailbox, mailbox)
            self._pending.clear()
        ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in tasks:
                    t.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def add_stop_hook(self, hook: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """(any thread, before :meth:`stop`) Await ``hook()`` on the loop when the
        dispatcher stops, before the loop stops: for whatever else runs on the loop
        (a network selector sharing it) to close its sockets while the loop still
        runs.  Hooks run in the order added; one that raises is logged and the
        others still run.  They should finish well within the ``stop()`` timeout."""
        self._stop_hooks.append(hook)

    def _signal_stop(self) -> None:
        self._stopping = True
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._stop_loop)
            except RuntimeError:  # already closed
                pass

    def _stop_loop(self) -> None:
        """(loop) Run the stop hooks, then stop the loop."""
        loop = self._loop
        assert loop is not None
        if not self._stop_hooks:
            loop.stop()
            return
        task = loop.create_task(self._run_stop_hooks(list(self._stop_hooks)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_stop_hooks(self, hooks: list[Callable[[], Coroutine[Any, Any, object]]]) -> None:
        try:
            for hook in hooks:
                try:
                    await hook()
                except Exception as exc:
                    logger.opt(exception=exc).error(
                        "dispatcher {!r}: stop hook {} failed: {}",
                        self.name,
                        callback_label(hook),
                        exc,
                    )
        finally:
            assert self._loop is not None
            self._loop.stop()

    def _schedule(self, mailbox: Mailbox) -> None:
        if threading.get_ident() == self._loop_ident:
            deferred = self._deferred
            if deferred is not None:
                deferred.append(mailbox)
            else:
                self._call_soon(self._run_mailbox, mailbox)
            return
        try:
            self._call_soon_threadsafe(self._run_mailbox, mailbox)
        except RuntimeError:
            # The loop is closed: the dispatcher was stopped.  Posts after stop
            # are accepted and dropped, like tasks left queued at stop.
            logger.debug(
                "dispatcher {!r} is stopped; task for actor {!r} dropped", self.name, mailbox.name
            )

    def defer_runs(self) -> bool:
        """(loop thread, outside actor code) Until :meth:`run_deferred`, keep the
        mailboxes made runnable on this thread instead of scheduling them.

        For a loop callback that delivers messages (a network read): the actors
        then run at its end, before the loop polls again.  Returns False, and
        changes nothing, when a deferral is already open (nested callers leave it
        to the outer one).
        """
        if self._deferred is not None:
            return False
        self._deferred = []
        return True

    def run_deferred(self) -> None:
        """(loop thread) Close the deferral :meth:`defer_runs` opened and run the
        mailboxes it kept, in order, as the loop would have (quantum included: a
        mailbox left with work is scheduled again with ``call_soon``)."""
        deferred, self._deferred = self._deferred, None
        if deferred:
            c = self._counters[0]
            c.after_read += len(deferred)
            c.scheduled += len(deferred)
            drain = self._drain  # _run_mailbox's work, without its call
            for i, mailbox in enumerate(deferred):
                try:
                    drain(mailbox)
                except BaseException:
                    for rest in deferred[i + 1 :]:  # not lost: the loop runs them
                        self._call_soon(self._run_mailbox, rest)
                    raise

    def _run_mailbox(self, mailbox: Mailbox) -> None:
        self._counters[0].scheduled += 1
        self._drain(mailbox)

    def _drain(self, mailbox: Mailbox) -> None:
        c = self._counters[0]
        queue = mailbox._queue
        popleft = queue.popleft
        clock = perf_counter_ns
        tls = _tls
        tls.actor = mailbox.actor
        mailbox._running = True
        deadline = clock() + self._quantum_ns
        n = 0
        try:
            while True:
                depth = len(queue) >> 1  # two items per task
                if depth > mailbox._max_depth:  # noqa: PLR1730 (no builtin call per drain)
                    mailbox._max_depth = depth
                if not depth:
                    break
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
                        if r is not None and (isinstance(r, Coroutine) or hasattr(r, "__await__")):
                            n += i + 1
                            self._await(mailbox, fn, arg, r)
                            return  # the token stays ours until the awaitable is done
                    if queue and clock() > deadline:
                        n += i + 1
                        c.overruns += 1
                        mailbox._running = False
                        self._call_soon(self._run_mailbox, mailbox)
                        return
                n += depth
        finally:
            c.tasks += n
            tls.actor = None
        mailbox._running = False
        mailbox._token[0] = True
        if queue and mailbox._claim(0, False):
            self._call_soon(self._run_mailbox, mailbox)

    def _await(self, mailbox: Mailbox, fn: object, arg: Any, awaitable: Any) -> None:
        loop = self._loop
        assert loop is not None  # we are running on it
        coro = awaitable if isinstance(awaitable, Coroutine) else _awaiting(awaitable)
        t = loop.create_task(self._await_then_resume(mailbox, fn, arg, coro))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _await_then_resume(
        self, mailbox: Mailbox, fn: object, arg: Any, coro: Coroutine[Any, Any, Any]
    ) -> None:
        try:
            await _as_actor(mailbox.actor, coro)
        except asyncio.CancelledError as exc:
            if self._stopping:
                raise
            # Cancelled from inside (the callback awaited something that was
            # cancelled): that callback failed; the actor goes on.
            self._task_failed(mailbox, fn, arg, exc, self._counters[0])
        except Exception as exc:
            self._task_failed(mailbox, fn, arg, exc, self._counters[0])
        except BaseException as exc:
            self._task_fatal(mailbox, fn, arg, exc)
        self._drain(mailbox)


async def _awaiting(awaitable: Any) -> Any:
    """A coroutine awaiting ``awaitable`` (a future or any object with ``__await__``)."""
    return await awaitable


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
