"""The demo's actors: a source of data points on many subjects and a printer of the
windowed averages that come back from Spark.  (The recorder is
:class:`actorbus.spark.Recorder`.)"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from actorbus.actors import Actor, TimerHandle
from actorbus.bus.feeds import PublishFeed, SubscribeFeed
from actorbus.bus.scope import FeedState

from .messages import DataPoint, WindowAverage


def subjects(count: int, prefix: str = "/sensor") -> list[str]:
    """``count`` subjects ``/sensor/000``, ``/sensor/001``, ..."""
    width = max(3, len(str(count - 1)))
    return [f"{prefix}/{i:0{width}d}" for i in range(count)]


class PointSource(Actor):
    """Every ``period_ms``, publishes one :class:`DataPoint` on each subject.

    Each subject's values follow a bounded random walk around its own level, so
    the averages differ from subject to subject."""

    def __init__(
        self,
        subjects: Sequence[str],
        *,
        period_ms: float = 100,
        seed: int | None = None,
        name: str = "source",
    ) -> None:
        super().__init__(name)
        self.subjects = list(subjects)
        self.period_ms = period_ms
        self._rng = random.Random(seed)
        self._level = {s: 10.0 + 5.0 * i % 90 for i, s in enumerate(self.subjects)}
        self._value = dict(self._level)
        self._feeds: list[tuple[str, PublishFeed[DataPoint]]] = []
        self._timer: TimerHandle | None = None
        #: data points published so far.
        self.sent = 0

    def startup(self) -> None:
        self._feeds = [(s, self.publisher(DataPoint, s, up=True)) for s in self.subjects]
        self._timer = self.schedule_every(self.period_ms / 1000.0, self.tick)

    def on_publish_status(self, state: FeedState, feed: PublishFeed[Any]) -> None:
        """Points are journaled whether or not anyone else listens."""

    def tick(self) -> None:
        rng, level, value = self._rng, self._level, self._value
        for subject, feed in self._feeds:
            v = value[subject] + rng.uniform(-1.0, 1.0)
            v += (level[subject] - v) * 0.1
            value[subject] = v
            feed.publish(DataPoint(subject, value=round(v, 3)))
        self.sent += len(self._feeds)

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for _, feed in self._feeds:
            feed.close()
        self._feeds = []


class Printer(Actor):
    """Subscribes to the :class:`WindowAverage` of every subject and prints them.

    Drops duplicates by the sink's rule: a message whose ``(batch_id, subject,
    window_start)`` was already seen is a re-sent copy (a Spark batch re-run after
    a restart).  Only the latest batch ids are remembered."""

    def __init__(
        self,
        subjects: Sequence[str],
        *,
        out: Callable[[str], object] = print,
        name: str = "printer",
    ) -> None:
        super().__init__(name)
        self.subjects = list(subjects)
        self.out = out
        self._feeds: list[SubscribeFeed[WindowAverage]] = []
        self._seen: dict[int, set[tuple[str, Any]]] = {}
        #: the averages received (duplicates excluded).
        self.received: list[WindowAverage] = []
        #: duplicates dropped.
        self.duplicates = 0

    def startup(self) -> None:
        self._feeds = [
            self.subscribe(WindowAverage, s, on_message=self.show, on_status=self.status)
            for s in self.subjects
        ]

    def status(self, state: FeedState, feed: SubscribeFeed[WindowAverage]) -> None:
        """Each Spark task publishes as a short-lived node, so feeds go UP and DOWN
        with the micro-batches; nothing to do."""

    def show(self, msg: WindowAverage, feed: SubscribeFeed[WindowAverage]) -> None:
        seen = self._seen.setdefault(msg.batch_id, set())
        key = (msg.subject, msg.window_start)
        if key in seen:
            self.duplicates += 1
            return
        seen.add(key)
        for old in [b for b in self._seen if b < msg.batch_id - 1]:
            del self._seen[old]
        self.received.append(msg)
        self.out(
            f"{msg.subject}  [{msg.window_start:%H:%M:%S} - {msg.window_end:%H:%M:%S})  "
            f"average {msg.average:8.3f} over {msg.points:3d} points  (batch {msg.batch_id})"
        )

    def shutdown(self) -> None:
        for feed in self._feeds:
            feed.close()
        self._feeds = []
