"""The web demo's actors besides the calculator's.

* :class:`PausableSource` is the calculator demo's source that can be stopped
  and started: stopped, its feed is DOWN (so the averages' feed goes DOWN too).
* :class:`StatsService` keeps the recent averages and answers :class:`Stats`
  with one reply per average (OK_CONTINUING) and their mean (the final reply).
* :class:`ControlService` answers :class:`Control` by stopping or starting the
  source.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator

from actorbus.actors import Actor
from actorbus.bus.feeds import PublishFeed
from actorbus.bus.scope import FeedState
from demos.calculator.actors import AVERAGE_SUBJECT, Source
from demos.calculator.messages import DataPoint, MovingAverage

from .messages import Control, ControlReply, Stats, StatsReply

STATS_SUBJECT = "/demo/stats"
CONTROL_SUBJECT = "/demo/control"


class PausableSource(Source):
    """A :class:`Source` whose :meth:`pause` / :meth:`resume` (thread-safe) take
    its feed DOWN and UP again."""

    paused = False
    subscribed = False

    def publish_status(self, state: FeedState, feed: PublishFeed[DataPoint]) -> None:
        self.subscribed = state is FeedState.UP
        super().publish_status(
            FeedState.DOWN if self.paused else state,
            feed,
        )

    def pause(self) -> None:
        self.post(self._set_paused, True)

    def resume(self) -> None:
        self.post(self._set_paused, False)

    def _set_paused(self, paused: bool) -> None:
        self.paused = paused
        if self.feed is not None:
            self.publish_status(FeedState.UP if self.subscribed else FeedState.DOWN, self.feed)


class StatsService(Actor):
    """Answers Stats from the averages it has seen."""

    def __init__(self, name: str | None = None, *, subject: str = AVERAGE_SUBJECT) -> None:
        super().__init__(name=name)
        self.subject = subject
        self.recent: deque[float] = deque(maxlen=100)

    def startup(self) -> None:
        self.subscribe(MovingAverage, self.subject, on_message=self.seen)
        # the handlers' messages are written for the page: send them, not just the class
        self.serve(Stats, STATS_SUBJECT, self.stats, error_detail="message")

    def seen(self, msg: MovingAverage, feed: object) -> None:
        self.recent.append(msg.average)

    def stats(self, request: Stats) -> Generator[StatsReply, None, StatsReply]:
        if not 1 <= request.last <= 100:
            raise ValueError(f"last={request.last}: ask for 1 to 100 averages")
        values = list(self.recent)[-request.last :]
        if not values:
            raise ValueError("no average yet: the source is stopped or just started")
        for i, value in enumerate(values, 1):
            yield StatsReply(request.subject, label=f"average {i}", value=value)
        return StatsReply(request.subject, label="mean", value=sum(values) / len(values))


class ControlService(Actor):
    """Stops and starts the source on request."""

    def __init__(self, name: str | None = None, *, source: PausableSource) -> None:
        super().__init__(name=name)
        self.source = source

    def startup(self) -> None:
        self.serve(Control, CONTROL_SUBJECT, self.control, error_detail="message")

    def control(self, request: Control) -> ControlReply:
        if request.action == "stop":
            self.source.pause()
        elif request.action == "start":
            self.source.resume()
        else:
            raise ValueError(f"action={request.action!r}: use 'stop' or 'start'")
        return ControlReply(
            request.subject, source="stopped" if request.action == "stop" else "running"
        )
