"""The calculator's moving average as a stream pipeline, beside the FSM one.

:class:`StreamCalculator` publishes the same :class:`MovingAverage` messages
as :class:`~demos.calculator.actors.Calculator` for the same points: from the
``window``-th point on, one per point, the mean of the last ``window`` points,
stamped with the last point's time.  It is five operations over a
subscription::

    subscribe(DataPoint) -> window(period, max_count=N) -> coalesce(slide)
                         -> flat_map -> to_publisher(MovingAverage)

``window`` gathers the points that arrive within one ``period`` (at most
``window`` of them) into one batch, so the pipeline runs once per batch at a
high rate; ``coalesce`` slides the last ``window`` points over each batch and
sends the batch's averages (nothing until the first window is full);
``flat_map`` hands them on one by one to the publisher.  Unlike the FSM, it
keeps its window when the data feed goes DOWN (the machine's ``FeedDown``
clears it).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from actorbus.actors import Actor
from actorbus.bus.feeds import PublishFeed
from actorbus.bus.scope import FeedState
from actorbus.streams import StreamFuture, subscribe

from .actors import AVERAGE_SUBJECT, DATA_SUBJECT
from .messages import DataPoint, MovingAverage


class Slide:
    """The last ``size`` points and their sum; ``__call__`` takes a batch of
    points and returns the averages it completes (None: none yet)."""

    def __init__(self, size: int, subject: str) -> None:
        self.size = size
        self.subject = subject
        self.points: deque[int] = deque(maxlen=size)
        self.total = 0

    def __call__(self, batch: list[DataPoint]) -> list[MovingAverage] | None:
        out: list[MovingAverage] = []
        points = self.points
        for p in batch:
            if len(points) == self.size:
                self.total -= points[0]
            points.append(p.value)
            self.total += p.value
            if len(points) == self.size:
                out.append(
                    MovingAverage(
                        self.subject, p.timestamp, average=self.total / self.size, count=self.size
                    )
                )
        return out or None


class StreamCalculator(Actor):
    """The moving average over ``window`` points as a stream pipeline."""

    def __init__(
        self,
        name: str | None = None,
        *,
        window: int | str = 5,
        period_s: float | str = 0.05,
        data_subject: str = DATA_SUBJECT,
        average_subject: str = AVERAGE_SUBJECT,
    ) -> None:
        super().__init__(name=name)
        self.window_size = int(window)
        if self.window_size < 1:
            raise ValueError(f"StreamCalculator: window={self.window_size} must be >= 1")
        self.period_s = float(period_s)
        self.data_subject = data_subject
        self.average_subject = average_subject
        self.average_feed: PublishFeed[MovingAverage] | None = None
        #: resolves with the number of averages published once the stream ends
        self.done: StreamFuture[int] | None = None

    def startup(self) -> None:
        self.average_feed = feed = self.publisher(
            MovingAverage, self.average_subject, up=True, on_status=_ignore
        )
        self.done = (
            subscribe(self, DataPoint, self.data_subject)
            .window(self.period_s, list, max_count=self.window_size)
            .coalesce(Slide(self.window_size, self.average_subject))
            .flat_map(lambda averages: averages)
            .to_publisher(feed)
        )

    def shutdown(self) -> None:
        if self.average_feed is not None and self.average_feed.declared:
            self.average_feed.update_feed_state(FeedState.DOWN)


def _ignore(*_: Any) -> None:
    pass
