"""Back-pressure that reaches the real source: the Pressure notification.

A stream made from a subscription answers its consumers' back-pressure to
the publishers of the key it receives: when its pipeline answers ``n > 0``
milliseconds, it publishes ``Pressure(subject, wait_ms=n,
message_type=<the data class's type name>)`` on the data's subject, at most
once per ``n`` ms per subject.  That is an ordinary notification, so it
reaches a publisher on this node and, across a link, on the sending node, on
its own key: the link itself never stops for it, and the other feeds sharing
the link keep flowing.

A publisher takes part with :func:`watch_pressure` (``to_publisher`` does it
itself): its ``on_pressure(wait_ms, feed)`` is called in its own mailbox, and
:meth:`PressureWatch.wait_s` says how long it should still hold its next
event, the link's own congestion (``PublishFeed.congested``) included.  A
publisher that does not take part is held further down: its events wait in
the stream actor's mailbox, whose depth the link watches (``input_backlog``:
reading stops, TCP pushes back, the publisher's link congests); that stops
the whole link while it lasts (docs/streams.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..bus.message import Notification
from ..bus.scope import Scope

if TYPE_CHECKING:
    from ..actors.actor import Actor
    from ..bus.feeds import PublishFeed, SubscribeFeed

__all__ = ["Pressure", "PressureWatch", "watch_pressure"]


class Pressure(Notification, type_name="actorbus.streams.Pressure"):
    """A stream asks the publishers of ``message_type`` on this subject to wait
    ``wait_ms`` milliseconds before their next event."""

    message_type: str
    wait_ms: int


class PressureWatch:
    """What a publisher knows of the pressure on its feed (see :func:`watch_pressure`)."""

    def __init__(self, feed: PublishFeed[Any], subscription: SubscribeFeed[Any]) -> None:
        self.feed = feed
        self.subscription = subscription
        #: the time.monotonic() until which the streams asked to wait
        self.until = 0.0
        #: Pressure notifications received
        self.received = 0

    def wait_s(self) -> float:
        """Seconds the publisher should still hold its next event: what a
        stream asked, and 0.01 s while a link it publishes to is congested."""
        left = self.until - time.monotonic()
        if self.feed.congested:
            left = max(left, 0.01)
        return max(left, 0.0)

    def close(self) -> None:
        """Stop watching."""
        self.subscription.close()

    def _told(self, wait_ms: int) -> None:
        self.received += 1
        self.until = max(self.until, time.monotonic() + wait_ms / 1000.0)


def watch_pressure(
    owner: Actor,
    feed: PublishFeed[Any],
    on_pressure: Callable[[int, PublishFeed[Any]], object] | None = None,
    *,
    scope: Scope = Scope.LOCAL_AND_REMOTE,
) -> PressureWatch:
    """Make ``feed`` (of ``owner``) take part in stream back-pressure: every
    :class:`Pressure` a stream sends for its key calls ``on_pressure(wait_ms,
    feed)`` as a task of ``owner``, and the returned watch's :meth:`wait_s`
    says how long to hold the next event.  Close the watch with the feed."""
    key = feed.key
    type_name = key.message_class.__type_name__
    subscription: SubscribeFeed[Any]

    def told(msg: Pressure, _: SubscribeFeed[Pressure]) -> None:
        if msg.message_type == type_name:
            watch._told(msg.wait_ms)
            if on_pressure is not None:
                on_pressure(msg.wait_ms, feed)

    subscription = owner.subscribe(Pressure, key.subject, on_message=told, scope=scope)
    watch = PressureWatch(feed, subscription)
    return watch
