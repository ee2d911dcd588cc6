"""The one-in, any-out intermediate operations: each is a :class:`Stage`.

Their semantics follow OSGi RFC 214's PushStream (docs/streams.md): a stage
passes the back-pressure of downstream back up unchanged unless it says
otherwise, and a user function that raises becomes the stream's error.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from ..errors import UsageError
from ._stage import Sink, Stage

__all__ = [
    "AdjustStage",
    "DistinctStage",
    "FilterStage",
    "FlatMapStage",
    "LimitStage",
    "MapStage",
    "OnCloseStage",
    "OnErrorStage",
    "SkipStage",
    "SortedStage",
    "arity",
    "positive_count",
]


def positive_count(op: str, n: object, minimum: int) -> int:
    """``n`` checked as an int >= ``minimum``, or a UsageError saying so."""
    if not isinstance(n, int) or isinstance(n, bool) or n < minimum:
        raise UsageError(
            f"{op}({n!r}): expected an integer >= {minimum}, found {n!r}"
            + (
                "; a stream that should take nothing is an empty stream: "
                "use PushStream.of(()) or skip the pipeline"
                if op == "limit" and n == 0
                else ""
            )
        )
    return n


def arity(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (1 when it cannot be told)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


class FilterStage(Stage):
    __slots__ = ("pred",)

    def __init__(self, down: Sink, pred: Callable[[Any], bool]) -> None:
        super().__init__(down)
        self.pred = pred

    def data(self, value: Any) -> int:
        try:
            keep = self.pred(value)
        except Exception as exc:
            return self.fail(exc)
        return self.send(value) if keep else (-1 if self.closed else 0)


class MapStage(Stage):
    __slots__ = ("fn",)

    def __init__(self, down: Sink, fn: Callable[[Any], Any]) -> None:
        super().__init__(down)
        self.fn = fn

    def data(self, value: Any) -> int:
        try:
            out = self.fn(value)
        except Exception as exc:
            return self.fail(exc)
        return self.send(out)


class FlatMapStage(Stage):
    """Each event becomes the events of ``fn(event)``: any iterable, or a
    stream made with ``PushStream.of``; the largest back-pressure goes up."""

    __slots__ = ("fn",)

    def __init__(self, down: Sink, fn: Callable[[Any], Iterable[Any]]) -> None:
        super().__init__(down)
        self.fn = fn

    def data(self, value: Any) -> int:
        try:
            items = self.fn(value)
            items = getattr(items, "items_of", lambda: items)()
            worst = 0
            for item in items:
                r = self.send(item)
                if r < 0:
                    return r
                worst = max(worst, r)
        except Exception as exc:
            return self.fail(exc)
        return worst


class DistinctStage(Stage):
    __slots__ = ("key", "seen")

    def __init__(self, down: Sink, key: Callable[[Any], Hashable] | None) -> None:
        super().__init__(down)
        self.key = key
        self.seen: set[Hashable] = set()

    def data(self, value: Any) -> int:
        try:
            k = value if self.key is None else self.key(value)
            if k in self.seen:
                return 0
            self.seen.add(k)
        except Exception as exc:
            return self.fail(exc)
        return self.send(value)


class SortedStage(Stage):
    """Holds every event; at close sends them sorted, then the close."""

    __slots__ = ("held", "key", "reverse")

    def __init__(self, down: Sink, key: Callable[[Any], Any] | None, reverse: bool) -> None:
        super().__init__(down)
        self.key = key
        self.reverse = reverse
        self.held: list[Any] = []

    def data(self, value: Any) -> int:
        if self.closed:
            return -1
        self.held.append(value)
        return 0

    def finish(self) -> None:
        held, self.held = self.held, []
        held.sort(key=self.key, reverse=self.reverse)
        for value in held:
            if self.send(value) < 0:
                return


class LimitStage(Stage):
    """Passes ``n`` events, then closes downstream and answers ``-1``."""

    __slots__ = ("left",)

    def __init__(self, down: Sink, n: int) -> None:
        super().__init__(down)
        self.left = n

    def data(self, value: Any) -> int:
        r = self.send(value)
        self.left -= 1
        if self.left <= 0 and not self.closed:
            self.close()
            return -1
        return r


class SkipStage(Stage):
    __slots__ = ("left",)

    def __init__(self, down: Sink, n: int) -> None:
        super().__init__(down)
        self.left = n

    def data(self, value: Any) -> int:
        if self.left > 0:
            self.left -= 1
            return -1 if self.closed else 0
        return self.send(value)


class AdjustStage(Stage):
    """Back-pressure from downstream, rewritten by ``fn(bp)`` or ``fn(event, bp)``."""

    __slots__ = ("fn", "two")

    def __init__(self, down: Sink, fn: Callable[..., int]) -> None:
        super().__init__(down)
        self.fn = fn
        self.two = arity(fn) >= 2

    def data(self, value: Any) -> int:
        r = self.send(value)
        if r < 0:
            return r
        try:
            return int(self.fn(value, r) if self.two else self.fn(r))
        except Exception as exc:
            return self.fail(exc)


class OnCloseStage(Stage):
    """Runs ``fn()`` once when the stream ends: a close event, an error, or a
    negative back-pressure from downstream (``limit``, a terminal that is done)."""

    __slots__ = ("fn",)

    def __init__(self, down: Sink, fn: Callable[[], object]) -> None:
        super().__init__(down)
        self.fn: Callable[[], object] | None = fn

    def ended(self) -> None:
        fn, self.fn = self.fn, None
        if fn is not None:
            fn()


class OnErrorStage(Stage):
    """Runs ``fn(exc)`` when the error event passes, then passes it on."""

    __slots__ = ("fn",)

    def __init__(self, down: Sink, fn: Callable[[BaseException], object]) -> None:
        super().__init__(down)
        self.fn = fn

    def error(self, exc: BaseException) -> None:
        if self.closed:
            return
        try:
            self.fn(exc)
        finally:
            super().error(exc)
