"""The demo's three actors.

* :class:`Source` publishes integer points in ``[minimum, maximum)`` every
  ``period_ms`` from a repeating timer, while at least one subscriber is there.
* :class:`Calculator` is an :class:`~actorbus.fsm.FsmActor`: its machine (the
  ``.sm`` file or the Python twin) opens the feeds, collects a window of points
  and publishes the moving average on every point once the window is full.
* :class:`Sink` prints the averages.

Constructors accept numbers as strings too, because ``actorbus run`` passes the
``actor.NAME.KEY=value`` options of a properties file as strings.
"""

from __future__ import annotations

import random
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

from actorbus.actors import Actor
from actorbus.bus.feeds import PublishFeed, SubscribeFeed
from actorbus.bus.scope import FeedState
from actorbus.fsm import FsmActor, load_sm

from . import CALCULATOR_SM
from .machine import CalculatorMachine
from .messages import DataPoint, MovingAverage

DATA_SUBJECT = "/demo/data"
AVERAGE_SUBJECT = "/demo/average"


class Source(Actor):
    """Publishes DataPoint(value) on a timer while the feed has subscribers
    (``count`` of them at most, when given)."""

    def __init__(
        self,
        name: str | None = None,
        *,
        subject: str = DATA_SUBJECT,
        period_ms: float | str = 100,
        minimum: int | str = 0,
        maximum: int | str = 100,
        seed: int | str | None = None,
        count: int | str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.subject = subject
        #: publish at most this many points (None: no limit)
        self.count = None if count is None else int(count)
        self.period = float(period_ms) / 1000.0
        self.minimum, self.maximum = int(minimum), int(maximum)
        if self.maximum <= self.minimum:
            raise ValueError(f"Source: maximum={self.maximum} must be > minimum={self.minimum}")
        self.random = random.Random(None if seed is None else int(seed))
        self.feed: PublishFeed[DataPoint] | None = None
        self.timer: Any = None
        self.sent = 0

    def startup(self) -> None:
        self.feed = self.publisher(DataPoint, self.subject, on_status=self.publish_status, up=False)

    def publish_status(self, state: FeedState, feed: PublishFeed[DataPoint]) -> None:
        if state is FeedState.UP:
            feed.update_feed_state(FeedState.UP)
            if self.timer is None:
                self.timer = self.schedule_every(self.period, self.tick)
        else:
            self.stop_timer()
            feed.update_feed_state(FeedState.DOWN)

    def tick(self) -> None:
        feed = self.feed
        if self.count is not None and self.sent >= self.count:
            self.stop_timer()
            return
        if feed is not None and feed.is_feed_up():
            value = self.random.randrange(self.minimum, self.maximum)
            feed.publish(DataPoint(self.subject, self.now_ms(), value=value))
            self.sent += 1

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def shutdown(self) -> None:
        self.stop_timer()
        if self.feed is not None:
            self.feed.close()


class Calculator(FsmActor):
    """Moving average over a window, driven by the calculator machine."""

    def __init__(
        self,
        name: str | None = None,
        *,
        window: int | str = 5,
        data_subject: str = DATA_SUBJECT,
        average_subject: str = AVERAGE_SUBJECT,
        machine: str = "sm",
        engine: str | None = None,
    ) -> None:
        if machine not in ("sm", "python"):
            raise ValueError(f"Calculator: machine={machine!r}; use 'sm' or 'python'")
        declaration = load_sm(CALCULATOR_SM) if machine == "sm" else CalculatorMachine
        super().__init__(name, machine=declaration, engine=engine)
        self.window_size = int(window)
        if self.window_size < 1:
            raise ValueError(f"Calculator: window={self.window_size} must be >= 1")
        self.data_subject = data_subject
        self.average_subject = average_subject
        self.window: deque[int] = deque(maxlen=self.window_size)
        self.total = 0
        #: the timestamp of the last point added (the averages carry it)
        self.as_of: int | None = None
        self.data_feed: SubscribeFeed[DataPoint] | None = None
        self.average_feed: PublishFeed[MovingAverage] | None = None
        self.published = 0

    # ------------------------------------------------------- machine actions
    def open_feeds(self) -> None:
        self.data_feed = self.actor_context.open_subscribe_feed(DataPoint, self.data_subject)
        self.map_events(self.data_feed, message="data")
        self.data_feed.subscribe()
        self.average_feed = self.actor_context.open_publish_feed(
            MovingAverage, self.average_subject
        )
        self.average_feed.advertise()

    def close_feeds(self) -> None:
        for feed in (self.data_feed, self.average_feed):
            if feed is not None:
                feed.close()

    def mark_average_up(self) -> None:
        if self.average_feed is not None:
            self.average_feed.update_feed_state(FeedState.UP)

    def mark_average_down(self) -> None:
        if self.average_feed is not None and self.average_feed.is_placed:
            self.average_feed.update_feed_state(FeedState.DOWN)

    def clear_window(self) -> None:
        self.window.clear()
        self.total = 0

    def add(self, msg: DataPoint) -> None:
        self.as_of = msg.timestamp
        window = self.window
        if len(window) == self.window_size:
            self.total -= window[0]
        window.append(msg.value)
        self.total += msg.value

    def window_full_after(self, msg: DataPoint) -> bool:
        return len(self.window) + 1 >= self.window_size

    def publish_average(self) -> None:
        feed = self.average_feed
        if feed is not None and self.window:
            count = len(self.window)
            # stamped with the last point's time, not the clock's: the average
            # is a function of the points alone, so a replay reproduces it
            feed.publish(
                MovingAverage(
                    self.average_subject,
                    self.as_of,
                    average=self.total / count,
                    count=count,
                )
            )
            self.published += 1


class Sink(Actor):
    """Prints every moving average (and the feed's state changes)."""

    def __init__(
        self,
        name: str | None = None,
        *,
        subject: str = AVERAGE_SUBJECT,
        out: Callable[[str], object] | None = None,
    ) -> None:
        super().__init__(name=name)
        self.subject = subject
        self.out = out if out is not None else self._print
        self.received: list[MovingAverage] = []
        self.feed: SubscribeFeed[MovingAverage] | None = None

    @staticmethod
    def _print(line: str) -> None:
        print(line, file=sys.stdout, flush=True)

    def startup(self) -> None:
        self.feed = self.subscribe(
            MovingAverage, self.subject, on_message=self.show, on_status=self.status
        )

    def status(self, state: FeedState, feed: SubscribeFeed[MovingAverage]) -> None:
        self.out(f"{feed.key.subject}: feed {state.name}")

    def show(self, msg: MovingAverage, feed: SubscribeFeed[MovingAverage]) -> None:
        self.received.append(msg)
        self.out(f"{msg.subject}: {msg.average:.2f} over {msg.count}")

    def shutdown(self) -> None:
        if self.feed is not None:
            self.feed.close()
