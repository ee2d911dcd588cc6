"""Where a stream's callbacks run: an executor posts tasks and keeps timers.

A stream never runs two of its callbacks at once: every stage runs on its
stream's executor, one task at a time, so stream code needs no locks.

* :class:`ActorExecutor` runs tasks in an actor's mailbox (its dispatcher,
  like every other callback of the actor) and timers on the bus's timer
  service.  A stream made from a subscription, or with ``on=actor``, uses it.
* :class:`InlineExecutor` runs tasks on the thread that starts the stream's
  terminal operation, to the end, on a virtual clock: a wait (back-pressure,
  a window's duration) moves the clock instead of sleeping.  Streams of a
  plain iterable use it unless given an actor; tests and docs rely on it to
  be deterministic.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from loguru import logger

from ..actors import current_actor

if TYPE_CHECKING:
    from ..actors.actor import Actor

__all__ = ["ActorExecutor", "Executor", "InlineExecutor", "executor_of"]


class Executor(Protocol):
    """What a stream runs on: one task at a time, in order, and timers."""

    def post(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` later, after the tasks posted before it."""

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> Callable[[], object]:
        """Run ``fn()`` as a task ``delay_s`` seconds from now; returns a cancel function."""

    def now(self) -> float:
        """This executor's clock, in seconds."""

    def drive(self) -> None:
        """Called by a terminal operation once its stream is connected: an
        executor that runs on the caller's thread runs it here."""

    def would_deadlock(self) -> bool:
        """True when blocking the calling thread would stop this executor."""

    def in_own_task(self) -> bool:
        """True when called from one of this executor's own tasks."""


class ActorExecutor:
    """Tasks in an actor's mailbox; timers on its bus's timer service."""

    __slots__ = ("actor",)

    def __init__(self, actor: Actor) -> None:
        self.actor = actor

    def post(self, fn: Callable[[], object]) -> None:
        self.actor.post(fn)

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> Callable[[], object]:
        return self.actor.schedule(delay_s, fn).cancel

    def now(self) -> float:
        return time.monotonic()

    def drive(self) -> None:
        pass

    def would_deadlock(self) -> bool:
        # the actor's own task waiting for its own mailbox's next tasks
        if self.in_own_task():
            return True
        return self.actor.actor_context.dispatcher.blocking_here_would_deadlock()

    def in_own_task(self) -> bool:
        return current_actor() is self.actor

    def __repr__(self) -> str:
        return f"<ActorExecutor {self.actor.name!r}>"


class InlineExecutor:
    """Runs its tasks on the thread that drives it, on a virtual clock.

    :meth:`drive` runs every posted task, then the earliest timer (moving the
    clock to its time, never sleeping), until nothing is left.  A task posted
    from another thread while it is not driven waits for the next drive.
    """

    def __init__(self) -> None:
        self._tasks: deque[Callable[[], object]] = deque()
        self._timers: list[tuple[float, int, list[Callable[[], object] | None]]] = []
        self._seq = itertools.count()
        self._now = 0.0
        self._lock = threading.Lock()
        self._driver: int | None = None
        #: every wait asked of this executor's clock, in seconds, in order
        self.waits: list[float] = []

    def post(self, fn: Callable[[], object]) -> None:
        with self._lock:
            self._tasks.append(fn)

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> Callable[[], object]:
        cell: list[Callable[[], object] | None] = [fn]
        with self._lock:
            self.waits.append(delay_s)
            heapq.heappush(self._timers, (self._now + max(delay_s, 0.0), next(self._seq), cell))

        def cancel() -> None:
            cell[0] = None

        return cancel

    def now(self) -> float:
        return self._now

    def would_deadlock(self) -> bool:
        return self._driver == threading.get_ident()

    def in_own_task(self) -> bool:
        return self._driver == threading.get_ident()

    def drive(self) -> None:
        """Run tasks and timers until none is left (re-entrant calls return at once)."""
        me = threading.get_ident()
        with self._lock:
            if self._driver is not None:
                return
            self._driver = me
        try:
            while True:
                with self._lock:
                    if self._tasks:
                        fn: Callable[[], object] | None = self._tasks.popleft()
                    elif self._timers:
                        when, _, cell = heapq.heappop(self._timers)
                        fn = cell[0]
                        self._now = max(self._now, when)
                    else:
                        return
                if fn is not None:
                    try:
                        fn()
                    except Exception as exc:  # a stage reports its own; this is a bug
                        logger.opt(exception=exc).error("a stream task raised {}", exc)
        finally:
            with self._lock:
                self._driver = None

    def __repr__(self) -> str:
        return f"<InlineExecutor t={self._now:.3f}s>"


def executor_of(on: Actor | Executor | None) -> Executor | None:
    """``on`` as an executor: an actor's, an executor as it is, or None."""
    if on is None:
        return None
    if hasattr(on, "post") and hasattr(on, "schedule") and hasattr(on, "actor_context"):
        return ActorExecutor(on)  # type: ignore[arg-type]
    return on  # type: ignore[return-value]
