"""Terminal operations: sinks that end a stream and resolve its future.

Each resolves its :class:`StreamFuture` once: with its result at the close
event (or earlier when it knows the answer: ``find_first``, ``any_match``...,
then it answers ``-1`` so the source stops), or with the error event's
exception.  A consumer function's own exception ends the stream the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._future import StreamFuture
from ._stage import EventKind, PushEvent

__all__ = ["Terminal", "make_terminal"]

_NONE: Any = object()


class Terminal:
    """Base: resolves ``future`` at close with :meth:`value`, or with the error."""

    __slots__ = ("future",)

    def __init__(self, future: StreamFuture[Any]) -> None:
        self.future = future

    def data(self, value: Any) -> int:
        if self.future.done():
            return -1
        try:
            return self.take(value)
        except Exception as exc:
            self.future.resolve(None, exc)
            return -1

    def take(self, value: Any) -> int:
        return 0

    def value(self) -> Any:
        return None

    def close(self) -> None:
        try:
            result = self.value()
        except Exception as exc:
            self.future.resolve(None, exc)
            return
        self.future.resolve(result)

    def error(self, exc: BaseException) -> None:
        self.future.resolve(None, exc)

    def answer(self, result: Any) -> int:
        """The result is known before the close: resolve, stop the source."""
        self.future.resolve(result)
        return -1


class ForEach(Terminal):
    __slots__ = ("fn",)

    def __init__(self, future: StreamFuture[Any], fn: Callable[[Any], int | None]) -> None:
        super().__init__(future)
        self.fn = fn

    def take(self, value: Any) -> int:
        r = self.fn(value)
        if r is None:
            return 0
        r = int(r)
        if r < 0:
            return self.answer(None)
        return r


class ForEachEvent(Terminal):
    """Every event to ``fn(PushEvent)``; resolves with the count of data events."""

    __slots__ = ("count", "fn")

    def __init__(self, future: StreamFuture[Any], fn: Callable[[PushEvent[Any]], int | None]):
        super().__init__(future)
        self.fn = fn
        self.count = 0

    def take(self, value: Any) -> int:
        self.count += 1
        r = self.fn(PushEvent(EventKind.DATA, value))
        if r is None:
            return 0
        r = int(r)
        return self.answer(self.count) if r < 0 else r

    def close(self) -> None:
        if self.future.done():
            return
        try:
            self.fn(PushEvent(EventKind.CLOSE))
        except Exception as exc:
            self.future.resolve(None, exc)
            return
        self.future.resolve(self.count)

    def error(self, exc: BaseException) -> None:
        if self.future.done():
            return
        try:
            self.fn(PushEvent(EventKind.ERROR, error=exc))
        finally:
            self.future.resolve(None, exc)


class Collect(Terminal):
    __slots__ = ("items",)

    def __init__(self, future: StreamFuture[Any]) -> None:
        super().__init__(future)
        self.items: list[Any] = []

    def take(self, value: Any) -> int:
        self.items.append(value)
        return 0

    def value(self) -> Any:
        return self.items


class Reduce(Terminal):
    __slots__ = ("acc", "default", "fn")

    def __init__(
        self, future: StreamFuture[Any], identity: Any, fn: Callable[[Any, Any], Any], default: Any
    ):
        super().__init__(future)
        self.acc = identity
        self.fn = fn
        self.default = default

    def take(self, value: Any) -> int:
        self.acc = value if self.acc is _NONE else self.fn(self.acc, value)
        return 0

    def value(self) -> Any:
        return self.default if self.acc is _NONE else self.acc


class Count(Terminal):
    __slots__ = ("n",)

    def __init__(self, future: StreamFuture[Any]) -> None:
        super().__init__(future)
        self.n = 0

    def take(self, value: Any) -> int:
        self.n += 1
        return 0

    def value(self) -> Any:
        return self.n


class Extreme(Terminal):
    """min or max by ``key``; the first of equal ones wins."""

    __slots__ = ("best", "best_key", "default", "key", "larger")

    def __init__(
        self,
        future: StreamFuture[Any],
        key: Callable[[Any], Any] | None,
        larger: bool,
        default: Any,
    ):
        super().__init__(future)
        self.key = key
        self.larger = larger
        self.default = default
        self.best: Any = _NONE
        self.best_key: Any = None

    def take(self, value: Any) -> int:
        k = value if self.key is None else self.key(value)
        if self.best is _NONE or (k > self.best_key if self.larger else k < self.best_key):
            self.best, self.best_key = value, k
        return 0

    def value(self) -> Any:
        return self.default if self.best is _NONE else self.best


class Match(Terminal):
    """any_match / all_match / none_match: stops at the first event that decides."""

    __slots__ = ("empty", "pred", "when")

    def __init__(
        self, future: StreamFuture[Any], pred: Callable[[Any], bool], when: bool, empty: bool
    ):
        super().__init__(future)
        self.pred = pred
        #: the predicate's answer that decides: any -> True, all/none -> False/True
        self.when = when
        #: the answer when no event decides
        self.empty = empty

    def take(self, value: Any) -> int:
        if bool(self.pred(value)) is self.when:
            return self.answer(not self.empty)
        return 0

    def value(self) -> Any:
        return self.empty


class FindFirst(Terminal):
    __slots__ = ("default",)

    def __init__(self, future: StreamFuture[Any], default: Any) -> None:
        super().__init__(future)
        self.default = default

    def take(self, value: Any) -> int:
        return self.answer(value)

    def value(self) -> Any:
        return self.default


def make_terminal(kind: str, future: StreamFuture[Any], *args: Any) -> Terminal:
    """The terminal sink named ``kind`` (see PushStream's methods)."""
    if kind == "for_each":
        return ForEach(future, *args)
    if kind == "for_each_event":
        return ForEachEvent(future, *args)
    if kind == "collect":
        return Collect(future)
    if kind == "reduce":
        return Reduce(future, *args)
    if kind == "count":
        return Count(future)
    if kind == "min":
        return Extreme(future, args[0], False, args[1])
    if kind == "max":
        return Extreme(future, args[0], True, args[1])
    if kind == "any_match":
        return Match(future, args[0], True, False)
    if kind == "all_match":
        return Match(future, args[0], False, True)
    if kind == "none_match":
        return Match(future, args[0], True, True)
    if kind == "find_first":
        return FindFirst(future, *args)
    raise ValueError(kind)


NONE = _NONE
