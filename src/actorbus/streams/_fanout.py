"""Operations with several inputs or outputs: ``split``, ``merge``, ``fork``.

``connect(sink, executor) -> stop`` is how a stream starts its upstream (see
``_core``); the hubs here start theirs from one or several such functions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ._exec import Executor
from ._stage import HeldEndStage, Sink

__all__ = ["Connect", "ForkStage", "MergeHub", "SplitHub"]

#: starts a stream's upstream into ``sink`` on ``executor``; returns its stop function
Connect = Callable[[Sink, Executor], Callable[[], None]]


class SplitHub:
    """One upstream, several branches: an event goes to every branch whose
    predicate matches.  The upstream starts when the first branch starts; it
    stops when every started branch has closed."""

    def __init__(self, up: Connect, predicates: Sequence[Callable[[Any], bool]]) -> None:
        self.up = up
        self.predicates = tuple(predicates)
        self.sinks: list[Sink | None] = [None] * len(self.predicates)
        self.open = [False] * len(self.predicates)
        self.stop: Callable[[], None] | None = None
        self.done = False
        #: the upstream's end, once it came: (None,) closed, (exc,) failed
        self.end: tuple[BaseException | None] | None = None

    def connect(self, index: int, down: Sink, executor: Executor) -> Callable[[], None]:
        if self.end is not None or self.done:  # started too late: the events are gone
            exc = self.end[0] if self.end is not None else None
            if exc is None:
                down.close()
            else:
                down.error(exc)
            return lambda: None
        self.sinks[index] = down
        self.open[index] = True
        if self.stop is None:
            self.stop = self.up(self, executor)

        def stop_branch() -> None:
            # closing any stream of a pipeline closes it all: the source stops
            # and its close reaches every branch
            if self.stop is not None and not self.done:
                self.done = True
                self.stop()

        return stop_branch

    def data(self, value: Any) -> int:
        worst = 0
        for i, pred in enumerate(self.predicates):
            sink = self.sinks[i]
            if sink is None or not self.open[i]:
                continue
            try:
                match = pred(value)
            except Exception as exc:
                self.error(exc)
                return -1
            if match:
                r = sink.data(value)
                if r < 0:
                    self.open[i] = False
                else:
                    worst = max(worst, r)
        if not any(self.open):
            self.done = True
            return -1
        return worst

    def close(self) -> None:
        self.end = (None,)
        for i, sink in enumerate(self.sinks):
            if sink is not None and self.open[i]:
                self.open[i] = False
                sink.close()

    def error(self, exc: BaseException) -> None:
        self.end = (exc,)
        for i, sink in enumerate(self.sinks):
            if sink is not None and self.open[i]:
                self.open[i] = False
                sink.error(exc)


class _MergeInput:
    __slots__ = ("hub",)

    def __init__(self, hub: MergeHub) -> None:
        self.hub = hub

    def data(self, value: Any) -> int:
        hub = self.hub
        if hub.ended:
            return -1
        r = hub.down.data(value)
        if r < 0:
            hub.end()
        return r

    def close(self) -> None:
        hub = self.hub
        hub.left -= 1
        if hub.left == 0 and not hub.ended:
            hub.ended = True
            hub.down.close()

    def error(self, exc: BaseException) -> None:
        hub = self.hub
        if not hub.ended:
            hub.end()
            hub.down.error(exc)


class MergeHub:
    """Several upstreams into one: closes when all closed, errors at the first error."""

    def __init__(self, ups: Sequence[Connect], down: Sink, executor: Executor) -> None:
        self.down = down
        self.left = len(ups)
        self.ended = False
        self.stops: list[Callable[[], None]] = []
        for up in ups:
            self.stops.append(up(_MergeInput(self), executor))

    def end(self) -> None:
        """Stop every upstream: downstream closed, or one of them failed (then
        nothing more goes downstream)."""
        if not self.ended:
            self.ended = True
            for stop in self.stops:
                stop()

    def stop(self) -> None:
        """Close from outside: every upstream stops, and their closes end the
        merged stream once all came."""
        for stop in self.stops:
            stop()


class ForkStage(HeldEndStage):
    """Each event is handed downstream in its own task; at most ``n`` wait, and
    while ``n`` wait the pusher is answered ``delay_ms``."""

    __slots__ = ("delay_ms", "executor", "n", "waiting")

    def __init__(self, down: Sink, executor: Executor, n: int, delay_ms: int) -> None:
        super().__init__(down)
        self.executor = executor
        self.n = n
        self.delay_ms = delay_ms
        self.waiting: deque[Any] = deque()

    def data(self, value: Any) -> int:
        if self.closed or self.ending is not None:
            return -1
        self.waiting.append(value)
        self.executor.post(self._run_one)
        return self.delay_ms if len(self.waiting) >= self.n else 0

    def _run_one(self) -> None:
        if self.waiting and not self.closed:
            self.send(self.waiting.popleft())
        if not self.waiting and self.ending is not None and not self.closed:
            self.pass_end()

    def drain_later(self) -> None:
        self.executor.post(self._run_one)
