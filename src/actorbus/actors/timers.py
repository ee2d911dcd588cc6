"""Timers: one thread for the whole runtime, a heap of deadlines, expiry posted to the actor.

Theory of operation
-------------------
:class:`TimerQueue` is the pure scheduling logic: a binary heap of
``(deadline_ns, seq, entry)`` with time passed in as an argument
(``add``/``cancel``/``pop_due(now)``), so it is tested with a fake clock.
Cancelling is lazy: the entry leaves the index at once and its heap slot is
skipped when it reaches the top (the heap is compacted when more than half of
it is dead).  A repeating timer is re-armed at ``deadline + period`` — computed
from the previous *deadline*, not from the time it was popped, so lateness
never accumulates into drift (fixed rate).  If the thread was so late that
whole periods went by, they are skipped and counted, not replayed in a burst:
deadlines stay on the original grid ``first + k * period``.

:class:`TimerService` is the thin thread shell (one thread, ``actorbus-timer``):
it sleeps on a condition until the earliest deadline (or until a new earlier
timer is added: a later one, like the timeout of each request, wakes nobody),
pops what is due and *posts* each expiry into the owning
actor's mailbox.  Timer callbacks therefore run on the actor's dispatcher,
in order with its other tasks, never on the timer thread.

A :class:`TimerHandle` checks its own state again when its expiry task runs on
the actor's dispatcher, so a timer cancelled from the actor's own callbacks
never fires afterwards, even if its expiry was already queued.  A repeating
timer whose previous expiry has not run yet (the actor is busy) skips the
new one instead of piling tasks into the mailbox.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from actorbus._log import logger, report
from actorbus.actors.errors import RuntimeClosedError, TimerError
from actorbus.actors.failure import callback_label
from actorbus.errors import UsageError

if TYPE_CHECKING:
    from actorbus.actors.mailbox import Mailbox

__all__ = ["TimerHandle", "TimerQueue", "TimerService"]

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("deadline", "id", "item", "missed", "period")

    def __init__(self, timer_id: int, item: T, deadline: int, period: int) -> None:
        self.id = timer_id
        self.item = item
        self.deadline = deadline
        self.period = period
        self.missed = 0


class TimerQueue(Generic[T]):
    """Deadlines in integer nanoseconds on a caller-supplied clock; no threads, no clock.

    Not thread-safe: :class:`TimerService` guards it with its lock.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, _Entry[T]]] = []
        self._entries: dict[int, _Entry[T]] = {}
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self._dead = 0  # heap slots whose entry was cancelled

    def __len__(self) -> int:
        """Timers that are armed (not fired-and-done, not cancelled)."""
        return len(self._entries)

    def __contains__(self, timer_id: object) -> bool:
        return timer_id in self._entries

    def add(self, item: T, deadline_ns: int, period_ns: int = 0) -> int:
        """Arm ``item`` to be due at ``deadline_ns``; every ``period_ns`` after if > 0.

        Returns the timer id for :meth:`cancel`.
        """
        if period_ns < 0:
            raise TimerError(f"period_ns={period_ns}: expected 0 (one-shot) or a positive period")
        timer_id = next(self._ids)
        entry = _Entry(timer_id, item, deadline_ns, period_ns)
        self._entries[timer_id] = entry
        heapq.heappush(self._heap, (deadline_ns, next(self._seq), entry))
        return timer_id

    def cancel(self, timer_id: int) -> bool:
        """Disarm a timer.  True if it was armed; False if unknown, done or cancelled."""
        entry = self._entries.pop(timer_id, None)
        if entry is None:
            return False
        self._dead += 1
        if self._dead > 64 and self._dead * 2 > len(self._heap):
            entries = self._entries
            self._heap = [slot for slot in self._heap if entries.get(slot[2].id) is slot[2]]
            heapq.heapify(self._heap)
            self._dead = 0
        return True

    def pop_due(self, now_ns: int) -> list[T]:
        """Items whose deadline is ``<= now_ns``, earliest first; re-arms repeating ones.

        A repeating timer appears at most once per call; periods that elapsed
        entirely before ``now_ns`` are skipped and counted in :meth:`missed`.
        """
        heap = self._heap
        entries = self._entries
        due: list[T] = []
        while heap and heap[0][0] <= now_ns:
            deadline, _, entry = heapq.heappop(heap)
            if entries.get(entry.id) is not entry:
                self._dead -= 1
                continue
            due.append(entry.item)
            period = entry.period
            if period:
                behind = (now_ns - deadline) // period  # whole periods also over
                entry.missed += behind
                entry.deadline = deadline + (behind + 1) * period
                heapq.heappush(heap, (entry.deadline, next(self._seq), entry))
            else:
                del entries[entry.id]
        return due

    def expire(self, timer_id: int) -> T | None:
        """Expire one armed timer now, whatever its deadline (a replay's timer
        firing): a one-shot is done, a repeating one is re-armed one period
        after its deadline, nothing skipped.  Its item, or None if not armed."""
        entry = self._entries.pop(timer_id, None)
        if entry is None:
            return None
        self._dead += 1  # its heap slot: an entry no longer in the index
        if entry.period:
            again = _Entry(entry.id, entry.item, entry.deadline + entry.period, entry.period)
            again.missed = entry.missed
            self._entries[entry.id] = again
            heapq.heappush(self._heap, (again.deadline, next(self._seq), again))
        return entry.item

    def armed(self) -> list[tuple[int, int, T]]:
        """``(deadline, timer id, item)`` of every armed timer, earliest first."""
        return sorted((e.deadline, e.id, e.item) for e in self._entries.values())

    def next_deadline(self) -> int | None:
        """The earliest armed deadline, or ``None`` when nothing is armed."""
        heap = self._heap
        entries = self._entries
        while heap and entries.get(heap[0][2].id) is not heap[0][2]:
            heapq.heappop(heap)
            self._dead -= 1
        return heap[0][0] if heap else None

    def deadline(self, timer_id: int) -> int | None:
        """When an armed timer is next due, or ``None`` if it is not armed."""
        entry = self._entries.get(timer_id)
        return entry.deadline if entry is not None else None

    def missed(self, timer_id: int) -> int:
        """Periods a repeating timer skipped because they were over before it was popped."""
        entry = self._entries.get(timer_id)
        return entry.missed if entry is not None else 0

    def clear(self) -> list[T]:
        """Disarm everything; returns the items that were armed."""
        items = [e.item for e in self._entries.values()]
        self._entries.clear()
        self._heap.clear()
        self._dead = 0
        return items


_ACTIVE = "active"
_CANCELLED = "cancelled"
_DONE = "done"


class TimerHandle:
    """A scheduled timer.  Keep it to :meth:`cancel` the timer.

    Made by :meth:`TimerService.schedule` (through ``Actor.schedule`` /
    ``Actor.schedule_every``).
    """

    __slots__ = (
        "__weakref__",
        "_args",
        "_fn",
        "_id",
        "_mailbox",
        "_owner",
        "_period_ns",
        "_queued",
        "_service",
        "_skipped",
        "_state",
    )

    def __init__(
        self,
        service: TimerService,
        mailbox: Mailbox | None,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        *,
        period_ns: int,
        owner: set[TimerHandle] | None,
    ) -> None:
        self._service = service
        self._mailbox = mailbox
        self._fn = fn
        self._args = args
        self._period_ns = period_ns
        self._owner = owner
        self._id = 0
        self._state = _ACTIVE
        self._queued = False
        self._skipped = 0

    @property
    def active(self) -> bool:
        """True until a one-shot timer has fired, or the timer is cancelled."""
        return self._state is _ACTIVE

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` stopped the timer (or its runtime closed)."""
        return self._state is _CANCELLED

    @property
    def repeating(self) -> bool:
        """True for ``schedule_every`` timers."""
        return self._period_ns > 0

    @property
    def period_s(self) -> float | None:
        """The period of a repeating timer in seconds, ``None`` for a one-shot timer."""
        return self._period_ns / 1e9 if self._period_ns else None

    @property
    def skipped(self) -> int:
        """Expiries of a repeating timer dropped because the previous one had not run yet."""
        return self._skipped

    @property
    def _ab_label(self) -> str:
        return f"timer {callback_label(self._fn)}"

    @property
    def label(self) -> str:
        """The callback this timer runs, as failure reports and recordings name it."""
        return callback_label(self._fn)

    def cancel(self) -> bool:
        """Stop the timer.  True if it was active; cancelling twice is harmless.

        Called on the owning actor's dispatcher (from one of its callbacks), the
        timer's callback never runs after ``cancel()`` returns, even if its
        expiry was already queued.  Called from another thread, a callback that
        had already started may still be finishing.
        """
        if self._state is not _ACTIVE:
            return False
        self._state = _CANCELLED
        service = self._service
        with service._lock:  # TimerService._cancel, inline (every request's timeout)
            service._queue.cancel(self._id)
        if self._owner is not None:
            self._owner.discard(self)
        return True

    def _expire(self) -> None:
        """On the timer thread: post the expiry into the actor's mailbox."""
        if self._state is not _ACTIVE:
            return
        mailbox = self._mailbox
        if mailbox is None:  # call_later(): runs right here, on the timer thread
            try:
                self._fire()
            except Exception as exc:
                report(
                    "ERROR",
                    f"{self._ab_label} on the timer thread raised {type(exc).__name__}: {exc}",
                    exception=exc,
                )
            return
        if self._queued:  # the previous expiry has not run yet: coalesce
            self._skipped += 1
            return
        self._queued = True
        mailbox.post(self._fire)

    def _fire(self) -> object:
        """On the actor's dispatcher: run the callback unless cancelled meanwhile."""
        self._queued = False
        if self._state is not _ACTIVE:
            return None
        if not self._period_ns:
            self._state = _DONE
            if self._owner is not None:
                self._owner.discard(self)
        return self._fn(*self._args)

    def __repr__(self) -> str:
        kind = f"every {self._period_ns / 1e9:g} s" if self._period_ns else "once"
        where = f"actor {self._mailbox.name!r}" if self._mailbox else "the timer thread"
        return f"<TimerHandle {callback_label(self._fn)} {kind} on {where} {self._state}>"


def _seconds_to_ns(value: float, what: str, who: str, *, positive: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TimerError(f"{what}={value!r} for {who}: expected a number of seconds")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        expected = (
            "a finite number of seconds > 0" if positive else "a finite number of seconds >= 0"
        )
        raise TimerError(f"{what}={value!r} for {who}: expected {expected}")
    ns = round(value * 1e9)
    return max(ns, 1) if positive else ns


class TimerService:
    """The runtime's single timer thread (``actorbus-timer``).

    :meth:`start` it, :meth:`schedule` timers into mailboxes, :meth:`stop` it
    to join the thread; timers still armed at stop are cancelled.

    Given a ``clock`` (monotonic nanoseconds, e.g. a replay's fake clock), the
    service starts no thread: deadlines are read on that clock, and timers
    expire only when :meth:`fire_due` or :meth:`expire_next` is called.
    """

    def __init__(
        self, *, thread_name: str = "actorbus-timer", clock: Callable[[], int] | None = None
    ) -> None:
        self.thread_name = thread_name
        #: a clock was handed in: no thread, :meth:`fire_due` posts what is due
        self.manual = clock is not None
        self._queue: TimerQueue[TimerHandle] = TimerQueue()
        #: guards the queue; the hot paths take it directly (a Condition's own
        #: ``with`` costs a Python call), the thread waits on ``_cond`` over it
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._clock = clock if clock is not None else time.monotonic_ns
        self._thread: threading.Thread | None = None
        self._stopping = False
        #: the deadline the thread sleeps until (inf: no deadline; -inf: it is not
        #: sleeping, and looks at the queue again before it does): only a timer due
        #: earlier than this wakes it
        self._sleeps_until: float = -math.inf
        #: times the thread woke from its sleep (for tests and stats)
        self.wakeups = 0

    def __len__(self) -> int:
        """Timers armed now."""
        with self._cond:
            return len(self._queue)

    def start(self) -> None:
        """Start the timer thread.  Calling it again does nothing."""
        with self._cond:
            if self._thread is not None or self.manual:
                return
            if self._stopping:
                raise RuntimeClosedError("the timer service was stopped; it cannot start again")
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Cancel every armed timer, stop the thread and join it.  True when joined."""
        with self._cond:
            self._stopping = True
            handles = self._queue.clear()
            self._cond.notify_all()
        for handle in handles:
            handle._state = _CANCELLED
            if handle._owner is not None:
                handle._owner.discard(handle)
        thread = self._thread
        if thread is None:
            return True
        if thread is threading.current_thread():
            raise RuntimeClosedError("the timer service cannot be stopped from its own thread")
        thread.join(timeout)
        return not thread.is_alive()

    def fire_due(self) -> int:
        """(a service given a clock) Expire every timer due at the clock's time now:
        each expiry is posted into its actor's mailbox, as the thread would.
        Returns how many expired."""
        self._require_manual("fire_due()")
        with self._lock:
            due = self._queue.pop_due(self._clock())
        for handle in due:
            handle._expire()
        return len(due)

    def expire_next(self, label: str) -> TimerHandle | None:
        """(a service given a clock) Expire the armed timer that runs ``label``
        (:attr:`TimerHandle.label`) and is due first, whatever its deadline: its
        expiry is posted into its actor's mailbox.  A replay fires a recorded
        timer firing this way.  Returns its handle, or None when no armed timer
        runs ``label``."""
        self._require_manual("expire_next()")
        with self._lock:
            for _, timer_id, handle in self._queue.armed():
                if handle.label == label:
                    self._queue.expire(timer_id)
                    break
            else:
                return None
        handle._expire()
        return handle

    def _require_manual(self, what: str) -> None:
        if not self.manual:
            raise UsageError(
                f"{what} on a timer service with its own thread; only a service made "
                f"with a clock (TimerService(clock=...)) fires its timers on call"
            )

    def owns_current_thread(self) -> bool:
        """True when called on the timer thread."""
        return self._thread is threading.current_thread()

    def schedule(
        self,
        mailbox: Mailbox,
        delay_s: float,
        fn: Callable[..., object],
        args: tuple[Any, ...] = (),
        *,
        period_s: float | None = None,
        owner: set[TimerHandle] | None = None,
    ) -> TimerHandle:
        """Post ``fn(*args)`` into ``mailbox`` after ``delay_s``; then every ``period_s``.

        ``owner``, when given, is a set the handle adds itself to while active
        (the actor's own timers, cancelled together at shutdown).  Raises
        :class:`TimerError` for a negative or non-finite delay or a period <= 0,
        :class:`RuntimeClosedError` after :meth:`stop`.
        """
        return self._add(mailbox, delay_s, fn, args, period_s=period_s, owner=owner)

    def call_later(self, delay_s: float, fn: Callable[..., object], *args: object) -> TimerHandle:
        """Call ``fn(*args)`` on the timer thread itself after ``delay_s`` seconds.

        For runtime internals (request timeouts), not for actors: ``fn`` must
        be thread-safe, short and non-blocking, since it delays every other
        timer.  Exceptions are logged.  Actors use ``Actor.schedule``, whose
        callbacks run on the actor's own dispatcher.
        """
        # _add(None, delay_s, fn, args, period_s=None, owner=None) with the common
        # delay (a finite float or int >= 0) checked inline: one per request timeout
        cls = delay_s.__class__
        if (cls is float or cls is int) and 0 <= delay_s < math.inf:
            delay_ns = round(delay_s * 1e9)
        else:
            delay_ns = _seconds_to_ns(delay_s, "delay_s", "call_later()", positive=False)
        handle = TimerHandle(self, None, fn, args, period_ns=0, owner=None)
        with self._lock:
            if self._stopping:
                raise RuntimeClosedError(
                    "cannot schedule a timer for call_later(): the runtime is closed"
                )
            deadline = self._clock() + delay_ns
            handle._id = self._queue.add(handle, deadline)
            if deadline < self._sleeps_until:
                self._cond.notify()  # see _add
        return handle

    def _add(
        self,
        mailbox: Mailbox | None,
        delay_s: float,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        *,
        period_s: float | None,
        owner: set[TimerHandle] | None,
    ) -> TimerHandle:
        who = f"actor {mailbox.name!r}" if mailbox is not None else "call_later()"
        period_ns = (
            0 if period_s is None else _seconds_to_ns(period_s, "period_s", who, positive=True)
        )
        delay_ns = _seconds_to_ns(delay_s, "delay_s", who, positive=False)
        handle = TimerHandle(self, mailbox, fn, args, period_ns=period_ns, owner=owner)
        with self._lock:
            if self._stopping:
                raise RuntimeClosedError(
                    f"cannot schedule a timer for {who}: the runtime is closed"
                )
            deadline = self._clock() + delay_ns
            handle._id = self._queue.add(handle, deadline, period_ns)
            if owner is not None:
                owner.add(handle)
            if deadline < self._sleeps_until:
                # earlier than the thread's alarm; a later timer needs no wake-up
                # (request timeouts are added and cancelled per request)
                self._cond.notify()
        return handle

    def _cancel(self, timer_id: int) -> None:
        with self._lock:
            self._queue.cancel(timer_id)

    def _run(self) -> None:
        cond = self._cond
        queue = self._queue
        clock = self._clock
        while True:
            with cond:
                while True:
                    if self._stopping:
                        return
                    now = clock()
                    due = queue.pop_due(now)
                    if due:
                        break
                    nxt = queue.next_deadline()
                    self._sleeps_until = math.inf if nxt is None else nxt
                    cond.wait(None if nxt is None else (nxt - now) / 1e9)
                    self._sleeps_until = -math.inf
                    self.wakeups += 1
            for handle in due:
                try:
                    handle._expire()
                except Exception as exc:  # a post never raises; keep the thread alive anyway
                    logger.opt(exception=exc).error(
                        "timer {!r} could not be posted: {}", handle, exc
                    )
