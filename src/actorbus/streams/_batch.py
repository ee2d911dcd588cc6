"""Operations that gather events into batches: ``coalesce`` and ``window``."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ._exec import Executor
from ._ops import MapStage
from ._stage import Sink, Stage

__all__ = ["AccumulateStage", "CountStage", "WindowStage", "seconds"]


def seconds(duration: float | datetime.timedelta) -> float:
    """A duration given in seconds or as a timedelta, in seconds (> 0)."""
    s = duration.total_seconds() if isinstance(duration, datetime.timedelta) else float(duration)
    if not s > 0:
        raise UsageError(f"window duration {duration!r}: expected > 0 seconds")
    return s


class CountStage(Stage):
    """``coalesce(count, fn)``: ``fn(batch)`` for each ``count`` events; the
    partial batch is flushed at close.  ``count`` may be a callable, read again
    for each batch."""

    __slots__ = ("batch", "count", "fn", "target")

    def __init__(self, down: Sink, count: int | Callable[[], int], fn: Callable[[list[Any]], Any]):
        super().__init__(down)
        self.count = count
        self.fn = fn
        self.batch: list[Any] = []
        self.target = self._next_count()

    def _next_count(self) -> int:
        n = self.count() if callable(self.count) else self.count
        if not isinstance(n, int) or n < 1:
            raise UsageError(f"coalesce count {n!r}: expected an integer >= 1")
        return n

    def data(self, value: Any) -> int:
        if self.closed:
            return -1
        self.batch.append(value)
        if len(self.batch) < self.target:
            return 0
        batch, self.batch = self.batch, []
        try:
            out = self.fn(batch)
            self.target = self._next_count()
        except Exception as exc:
            return self.fail(exc)
        return self.send(out)

    def finish(self) -> None:
        if self.batch:
            batch, self.batch = self.batch, []
            self.send(self.fn(batch))


class AccumulateStage(MapStage):
    """``coalesce(fn)``: ``fn(event)`` returns the event to send, or None for
    none yet; nothing is flushed at close."""

    __slots__ = ()

    def send(self, value: Any) -> int:
        if value is None:  # nothing to send yet
            return -1 if self.closed else 0
        return super().send(value)


class WindowStage(Stage):
    """``window(duration, fn, max_count=)``: a window opens at the first event
    after the last one closed and closes ``duration`` later (on the stream's
    executor's clock), or at once when it holds ``max_count`` events; then
    ``fn(events)`` goes on.  The open window is flushed at close; a quiet
    stream sends no empty windows."""

    __slots__ = ("batch", "cancel", "duration", "executor", "fn", "max_count", "pending")

    def __init__(
        self,
        down: Sink,
        executor: Executor,
        duration: float | datetime.timedelta | Callable[[], float | datetime.timedelta],
        fn: Callable[[list[Any]], Any],
        max_count: int | None,
    ) -> None:
        super().__init__(down)
        self.executor = executor
        self.duration = duration
        self.fn = fn
        self.max_count = max_count
        self.batch: list[Any] = []
        self.cancel: Callable[[], object] | None = None
        #: back-pressure a timer's flush got, answered at the next event
        self.pending = 0

    def data(self, value: Any) -> int:
        if self.closed:
            return -1
        if not self.batch:
            d = self.duration() if callable(self.duration) else self.duration
            self.cancel = self.executor.call_later(seconds(d), self._expired)
        self.batch.append(value)
        pending, self.pending = self.pending, 0
        if self.max_count is not None and len(self.batch) >= self.max_count:
            r = self._flush()
            return r if r < 0 else max(r, pending)
        return pending

    def _expired(self) -> None:
        self.cancel = None
        if not self.closed and self.batch:
            r = self._flush()
            self.pending = r if r < 0 else max(r, self.pending)

    def _flush(self) -> int:
        if self.cancel is not None:
            self.cancel()
            self.cancel = None
        batch, self.batch = self.batch, []
        try:
            out = self.fn(batch)
        except Exception as exc:
            return self.fail(exc)
        return self.send(out)

    def finish(self) -> None:
        if self.batch:
            self._flush()

    def ended(self) -> None:
        if self.cancel is not None:
            self.cancel()
            self.cancel = None
