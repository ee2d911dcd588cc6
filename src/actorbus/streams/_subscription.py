"""A stream made from a subscription: any key or wildcard, local or remote.

The stream runs on the subscribing actor's dispatcher: each notification is
a task in its mailbox, like any feed callback, and is pushed through the
pipeline there.  The pipeline's back-pressure goes to the publishers
(``_pressure``): the pace ``n`` ms is sent as a :class:`Pressure` on the
message's subject when it halves or doubles, falls to 0, or every half lease
while it lasts; a negative answer unsubscribes and ends the stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..bus.feeds import PublishFeed, SubscribeFeed
from ..bus.scope import FeedState, Scope
from ..bus.subjects import Wildcard
from ._core import PushStream
from ._exec import Executor
from ._pressure import LEASE_S, Pressure
from ._stage import Sink

if TYPE_CHECKING:
    from ..actors.actor import Actor

__all__ = ["SubscriptionSource", "subscribe"]

N = TypeVar("N")

#: subjects a wildcard stream keeps a Pressure publisher for (the oldest go)
_MAX_PRESSURE_FEEDS = 1024


class SubscriptionSource:
    """Opens the subscription when the stream starts; closes it when the
    stream stops.  Counts what it pushed and the Pressure it sent: make one and
    ``PushStream.from_source(source, on=actor)`` to read them
    (:func:`subscribe` does the same with a source of its own)."""

    def __init__(
        self,
        actor: Actor,
        message_class: type[Any],
        subject: str | Wildcard,
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[Any], bool] | None = None,
        pressure: bool = True,
    ) -> None:
        self.actor = actor
        self.message_class = message_class
        self.subject = subject
        self.scope = scope
        self.condition = condition
        self.pressure = pressure
        self.type_name: str = message_class.__type_name__
        self.feed: SubscribeFeed[Any] | None = None
        self.sink: Sink | None = None
        self.stopped = False
        self._pressure_feeds: dict[str, PublishFeed[Pressure]] = {}
        #: per subject: (the pace last told, when)
        self._told: dict[str, tuple[int, float]] = {}
        #: notifications pushed into the stream
        self.received = 0
        #: Pressure notifications sent to the publishers
        self.pressure_sent = 0

    def open(self, sink: Sink, executor: Executor) -> Callable[[], None]:
        self.sink = sink
        self.feed = self.actor.subscribe(
            self.message_class,
            self.subject,
            on_message=self._on_message,
            scope=self.scope,
            condition=self.condition,
        )

        if self.pressure and isinstance(self.subject, str):
            # opened now, so the publishers (remote ones too) subscribe to it
            # before the first Pressure is sent
            self._pressure_feed(self.subject)

        def stop() -> None:
            executor.post(self._stop_and_close)

        return stop

    def _on_message(self, message: Any, _: SubscribeFeed[Any]) -> None:
        sink = self.sink
        if self.stopped or sink is None:
            return
        self.received += 1
        r = sink.data(message)
        if r < 0:
            self._stop()
        elif self.pressure:
            told = self._told.get(message.subject)
            if r > 0 or (told is not None and told[0] > 0):
                self._press(message.subject, r, told)

    def _press(self, subject: str, wait_ms: int, told: tuple[int, float] | None) -> None:
        now = time.monotonic()
        if told is not None:
            last, at = told
            steady = last // 2 <= wait_ms <= last * 2 and wait_ms > 0
            if steady and now - at < LEASE_S / 2:
                return
        self._told[subject] = (wait_ms, now)
        feed = self._pressure_feeds.get(subject)
        if feed is None:
            if len(self._pressure_feeds) >= _MAX_PRESSURE_FEEDS:
                oldest = next(iter(self._pressure_feeds))
                self._pressure_feeds.pop(oldest).close()
                self._told.pop(oldest, None)
            feed = self._pressure_feed(subject)
        feed.publish(Pressure(subject, 0, message_type=self.type_name, wait_ms=wait_ms))
        self.pressure_sent += 1

    def _pressure_feed(self, subject: str) -> PublishFeed[Pressure]:
        feed = self.actor.publisher(
            Pressure, subject, scope=self.scope, up=True, on_status=self._pressure_status
        )
        self._pressure_feeds[subject] = feed
        return feed

    def _pressure_status(self, state: FeedState, feed: PublishFeed[Pressure]) -> None:
        """A publisher (a new one, or one across a link that just subscribed)
        watches this subject now: tell it the pace that holds, if any."""
        subject = feed.key.subject
        told = self._told.get(subject)
        if state is FeedState.UP and told is not None and told[0] > 0 and not self.stopped:
            self._told[subject] = (told[0], time.monotonic())
            feed.publish(Pressure(subject, 0, message_type=self.type_name, wait_ms=told[0]))
            self.pressure_sent += 1

    def _stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.feed is not None:
            self.feed.close()
        for feed in self._pressure_feeds.values():
            feed.close()
        self._pressure_feeds.clear()

    def _stop_and_close(self) -> None:
        if not self.stopped:
            self._stop()
            if self.sink is not None:
                self.sink.close()


def subscribe(
    actor: Actor,
    message_class: type[N],
    subject: str | Wildcard,
    *,
    scope: Scope = Scope.LOCAL_AND_REMOTE,
    condition: Callable[[N], bool] | None = None,
    pressure: bool = True,
) -> PushStream[N]:
    """A stream of the notifications ``actor`` receives on ``message_class``
    and ``subject`` (a key, or a :class:`~actorbus.Wildcard`), run on the
    actor's dispatcher.  It subscribes when a terminal operation starts it and
    unsubscribes when it ends.  ``pressure=False``: never send :class:`Pressure`
    to the publishers (the actor's mailbox still holds them back, see
    docs/streams.md)."""
    source = SubscriptionSource(
        actor, message_class, subject, scope=scope, condition=condition, pressure=pressure
    )
    return PushStream.from_source(source, on=actor)
