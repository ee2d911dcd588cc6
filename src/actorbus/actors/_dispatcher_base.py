"""What every dispatcher kind shares: the :class:`Dispatcher` base (start, stop,
attach, stats, failure reports), its counters and stats records.

The kinds are in :mod:`actorbus.actors.dispatcher` (threads) and
:mod:`actorbus.actors.asyncio_dispatcher`; the theory of operation of all of
them is in :mod:`actorbus.actors.dispatcher`.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar

from actorbus._log import report
from actorbus.actors.failure import FailedTask, callback_label, describe_task, report_failure
from actorbus.actors.mailbox import Mailbox, MailboxState
from actorbus.config.schema import DispatcherConfig, DispatcherKind
from actorbus.errors import ConfigError, UsageError

#: the most tasks a worker runs between two samples of a mailbox's depth.
_CHUNK = 1024

__all__ = ["Dispatcher", "DispatcherStats", "MailboxStats"]


@dataclass(frozen=True, slots=True)
class MailboxStats:
    """One actor's mailbox as seen by :meth:`Dispatcher.stats`."""

    actor: str
    state: MailboxState
    #: tasks queued now.
    depth: int
    #: highest depth seen so far.
    max_depth: int
    #: tasks run, tasks that raised, batches cut short by the quantum (totals).
    tasks_run: int = 0
    task_failures: int = 0
    quantum_overruns: int = 0


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

    def blocking_here_would_deadlock(self) -> bool:
        """True when the calling thread is this dispatcher's only thread.

        The rule: a task that blocks its thread until this dispatcher has run
        another task (an actor's startup, a replier's request callback) never
        returns when that thread is the only one that could run it.  Waits that
        can deadlock so (``Completion.wait``, ``Actor.ask_blocking``) check it
        and raise :class:`~actorbus.UsageError` instead of blocking."""
        return self.thread_count == 1 and self.owns_current_thread()

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
            MailboxStats(
                actor=m.name,
                state=m.state,
                depth=m.depth,
                max_depth=m.max_depth,
                tasks_run=m.tasks_run,
                task_failures=m.task_failures,
                quantum_overruns=m.quantum_overruns,
            )
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
        mailbox.task_failures += 1
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
