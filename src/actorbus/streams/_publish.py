"""``to_publisher``: a stream's events published back onto the bus as a feed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..bus.scope import FeedState
from ._future import StreamFuture
from ._pressure import PressureWatch, watch_pressure

if TYPE_CHECKING:
    from ..actors.actor import Actor
    from ..bus.feeds import PublishFeed

__all__ = ["PublishSink"]


class PublishSink:
    """Publishes each event (or ``make(event)``) on ``feed``; answers upstream
    the wait its subscribers' streams ask for (:class:`Pressure`) and the
    link's congestion; at the end declares the feed DOWN, so its subscribers
    see the feed state change, and resolves with the count published."""

    def __init__(
        self,
        future: StreamFuture[Any],
        feed: PublishFeed[Any],
        owner: Actor | None,
        make: Callable[[Any], Any] | None,
    ) -> None:
        self.future = future
        self.feed = feed
        self.owner = owner
        self.make = make
        self.count = 0
        self.watch: PressureWatch | None = None

    def data(self, value: Any) -> int:
        if self.future.done():
            return -1
        try:
            if self.watch is None and self.owner is not None:
                self.watch = watch_pressure(self.owner, self.feed)
            self.feed.publish(self.make(value) if self.make is not None else value)
        except Exception as exc:
            self._end(exc)
            return -1
        self.count += 1
        watch = self.watch
        if watch is not None:
            watch.sent()
        wait = watch.wait_s() if watch is not None else (0.01 if self.feed.congested else 0.0)
        return math.ceil(wait * 1000) if wait > 0 else 0

    def close(self) -> None:
        self._end(None)

    def error(self, exc: BaseException) -> None:
        self._end(exc)

    def _end(self, exc: BaseException | None) -> None:
        if self.future.done():
            return
        if self.watch is not None:
            self.watch.close()
        try:
            if self.feed.declared:
                self.feed.update_feed_state(FeedState.DOWN)
        except Exception as down_exc:  # the feed was closed under us: say so
            exc = exc or down_exc
        self.future.resolve(self.count, exc)
