"""``buffer``: a bounded queue between a pushing side and a slower consumer.

The pushing side queues an event and returns at once with the push-back its
policy computes from the fill (the events waiting, the new one included); the
consumer side takes them one task at a time on the stream's executor, waiting
between two events as long as downstream asks.  When the queue is full the
queue policy decides:

* ``DISCARD_OLDEST``: the oldest waiting event is dropped (counted in
  :attr:`BufferStats.discarded`); the newest are kept.
* ``BLOCK``: the pusher waits for room: the oldest waiting event is handed
  downstream on the pusher's own task before the new one is queued, so
  nothing is lost and the pusher is held as long as the consumer takes (on
  an actor, its mailbox holds what arrives meanwhile: a link watches that
  depth, docs/streams.md).
* ``FAIL``: the stream ends with :class:`BufferFullError` (a circuit breaker).
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Any

from ..errors import Error
from ._exec import Executor
from ._stage import HeldEndStage, Sink

__all__ = ["BufferFullError", "BufferStage", "BufferStats", "PushbackPolicy", "QueuePolicy"]


class BufferFullError(Error):
    """A ``buffer(queue_policy=QueuePolicy.FAIL)`` was full when an event came."""


class QueuePolicy(enum.Enum):
    """What a full buffer does with one more event."""

    DISCARD_OLDEST = "discard_oldest"
    BLOCK = "block"
    FAIL = "fail"


class PushbackPolicy(enum.Enum):
    """The back-pressure a buffer answers its pusher, from its fill.

    On a 4-slot buffer with ``base_ms=100``, at fill 0..4: ``FIXED`` 100 each;
    ``ON_FULL_FIXED`` 0, 0, 0, 0, 100; ``LINEAR`` 0, 25, 50, 75, 100;
    ``ON_FULL_EXPONENTIAL`` 0 until full, then 100, 200, 400... while it stays
    full, and from 100 again after it was not."""

    FIXED = "fixed"
    ON_FULL_FIXED = "on_full_fixed"
    ON_FULL_EXPONENTIAL = "on_full_exponential"
    LINEAR = "linear"

    def pushback(self, fill: int, capacity: int, base_ms: int, full_streak: int = 0) -> int:
        """Milliseconds to answer at ``fill`` of ``capacity``; ``full_streak``:
        how many answers in a row before this one were made full."""
        if self is PushbackPolicy.FIXED:
            return base_ms
        full = fill >= capacity
        if self is PushbackPolicy.ON_FULL_FIXED:
            return base_ms if full else 0
        if self is PushbackPolicy.LINEAR:
            return base_ms * min(fill, capacity) // capacity
        return base_ms << min(full_streak, 30) if full else 0


class BufferStats:
    """What a buffer counted; pass one as ``buffer(stats=...)`` to read it."""

    __slots__ = ("delivered", "discarded", "max_fill", "pushed")

    def __init__(self) -> None:
        #: events pushed into the buffer
        self.pushed = 0
        #: events passed downstream
        self.delivered = 0
        #: events dropped by DISCARD_OLDEST
        self.discarded = 0
        #: the most events that waited at once
        self.max_fill = 0

    def __repr__(self) -> str:
        return (
            f"<BufferStats pushed={self.pushed} delivered={self.delivered} "
            f"discarded={self.discarded} max_fill={self.max_fill}>"
        )


class BufferStage(HeldEndStage):
    __slots__ = (
        "base_ms",
        "capacity",
        "executor",
        "policy",
        "pushback_policy",
        "queue",
        "running",
        "stats",
        "streak",
    )

    def __init__(
        self,
        down: Sink,
        executor: Executor,
        *,
        capacity: int,
        policy: QueuePolicy,
        pushback_policy: PushbackPolicy,
        base_ms: int,
        stats: BufferStats | None,
    ) -> None:
        super().__init__(down)
        self.executor = executor
        self.capacity = capacity
        self.policy = policy
        self.pushback_policy = pushback_policy
        self.base_ms = base_ms
        self.stats = stats if stats is not None else BufferStats()
        self.queue: deque[Any] = deque()
        #: a consumer task is posted or timed
        self.running = False
        self.streak = 0

    def data(self, value: Any) -> int:
        if self.closed or self.ending is not None:
            return -1
        queue = self.queue
        stats = self.stats
        stats.pushed += 1
        if len(queue) >= self.capacity:
            if self.policy is QueuePolicy.DISCARD_OLDEST:
                queue.popleft()
                stats.discarded += 1
            elif self.policy is QueuePolicy.BLOCK:
                while len(queue) >= self.capacity and not self.closed:
                    self._deliver(queue.popleft())
                if self.closed:
                    return -1
            else:
                self.queue.clear()
                return self.fail(
                    BufferFullError(
                        f"buffer full: {self.capacity} events waiting when one more came "
                        f"(queue_policy=FAIL ends the stream); give the buffer more room, "
                        f"a DISCARD_OLDEST or BLOCK policy, or a faster consumer"
                    )
                )
        queue.append(value)
        fill = len(queue)
        stats.max_fill = max(stats.max_fill, fill)
        if not self.running:
            self.running = True
            self.executor.post(self._take)
        full = fill >= self.capacity
        r = self.pushback_policy.pushback(fill, self.capacity, self.base_ms, self.streak)
        self.streak = self.streak + 1 if full else 0
        return r

    def _deliver(self, value: Any) -> int:
        self.stats.delivered += 1
        r = self.send(value)
        if r < 0:
            self.queue.clear()
        return r

    def _take(self) -> None:
        """(consumer task) Pass one event on; come back when downstream allows."""
        if self.closed:
            self.running = False
            return
        if self.queue:
            r = self._deliver(self.queue.popleft())
            if r < 0:
                self.running = False
                return
            if self.queue or self.ending is not None:
                if r > 0:
                    self.executor.call_later(r / 1000.0, self._take)
                else:
                    self.executor.post(self._take)
                return
        self.running = False
        if self.ending is not None and not self.queue:
            self.pass_end()

    def drain_later(self) -> None:
        if not self.running:
            self.running = True
            self.executor.post(self._take)


def check_buffer(capacity: int, base_ms: int, policy: object, pushback: object) -> None:
    """The buffer's arguments, or a UsageError naming the wrong one."""
    from ..errors import UsageError

    if not isinstance(capacity, int) or capacity < 1:
        raise UsageError(f"buffer(capacity={capacity!r}): expected an integer >= 1")
    if not isinstance(base_ms, int) or base_ms < 0:
        raise UsageError(f"buffer(base_ms={base_ms!r}): expected an integer >= 0 (milliseconds)")
    if not isinstance(policy, QueuePolicy):
        raise UsageError(f"buffer(queue_policy={policy!r}): expected a QueuePolicy")
    if not isinstance(pushback, PushbackPolicy):
        raise UsageError(f"buffer(pushback_policy={pushback!r}): expected a PushbackPolicy")
