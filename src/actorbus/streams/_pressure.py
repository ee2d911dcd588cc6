"""Back-pressure that reaches the real source: the Pressure notification.

A stream's back-pressure ``n > 0`` means "wait n ms before the next event":
a pace.  A stream made from a subscription tells it to the publishers of the
key it receives as ``Pressure(subject, wait_ms=n, message_type=<the data
class's type name>)`` on the data's subject, when the pace changes (halves or
doubles), when it falls to 0 (``wait_ms=0``: full speed again), and at least
every ``LEASE_S / 2`` while it lasts.  That is an ordinary notification, so
it reaches a publisher on this node and, across a link, on the sending node,
on its own key: the link itself never stops for it, and the other feeds
sharing the link keep flowing.

A publisher takes part with :func:`watch_pressure` (``to_publisher`` does it
itself): its ``on_pressure(wait_ms, feed)`` is called in its own mailbox, and
the watch paces it: :meth:`PressureWatch.wait_s` says how long to hold the
next event (``wait_ms`` after the previous one :meth:`~PressureWatch.sent`,
while the last Pressure is younger than ``LEASE_S``; 10 ms while a link the
feed publishes to is congested).  A publisher that does not take part is held
further down: its events wait in the stream actor's mailbox, whose depth the
link watches (``input_backlog``: reading stops, TCP pushes back, the
publisher's link congests); that stops the whole link while it lasts
(docs/streams.md).
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

__all__ = ["LEASE_S", "Pressure", "PressureWatch", "watch_pressure"]

#: a pace a publisher was told holds this long after the last Pressure (s)
LEASE_S = 1.0


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
        #: the pace the streams asked for: seconds between two events (0: none)
        self.pace_s = 0.0
        #: the time.monotonic() the pace holds until (the lease)
        self.lease_until = 0.0
        #: the time.monotonic() the next event may go at
        self.next_at = 0.0
        #: Pressure notifications received
        self.received = 0

    def wait_s(self) -> float:
        """Seconds to hold the next event (0: send it now, then call
        :meth:`sent`): the pace a stream asked for, and 0.01 s while a link
        the feed publishes to is congested."""
        now = time.monotonic()
        left = self.next_at - now if now < self.lease_until else 0.0
        if self.feed.congested:
            left = max(left, 0.01)
        return max(left, 0.0)

    def sent(self) -> None:
        """One event went: the next one waits the pace (while it holds)."""
        if self.pace_s:
            self.next_at = time.monotonic() + self.pace_s

    def close(self) -> None:
        """Stop watching."""
        self.subscription.close()

    def _told(self, wait_ms: int) -> None:
        self.received += 1
        now = time.monotonic()
        self.pace_s = wait_ms / 1000.0
        self.lease_until = now + LEASE_S if wait_ms > 0 else 0.0
        self.next_at = now + self.pace_s


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
