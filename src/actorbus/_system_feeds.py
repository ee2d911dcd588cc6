"""A node's own feeds on the reserved system subject (:class:`SystemFeeds`).

Every :class:`~actorbus.node.Bus` holds one.  It makes, advertises and
declares UP at once:

* a publisher per system notification (:mod:`actorbus.bus.system`: link and
  service events), which the node's transports publish through
  :meth:`SystemFeeds.publish`; ``LOCAL_ONLY``;
* the **discovery replier**: this node's answer to its peers'
  :class:`~actorbus.bus.discovery.DiscoverTopics` (``Bus.topics()`` reads this
  node's own rows directly);
* the **inspection replier**: this node's answer to a peer's
  :class:`~actorbus.inspection.InspectNode` (``Bus.inspect()`` reads this node
  directly).

The two repliers are ``REMOTE_ONLY`` (a request reaches the peers' repliers
only), and none of these feeds is discoverable, so discovery never lists
itself.  The router lets only :data:`SYSTEM_OWNER` advertise on the reserved
subject, so no actor can pose as the node's transports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import inspection
from .bus import discovery
from .bus.discovery import DiscoverTopics
from .bus.feeds import IncomingRequest, PublishFeed, ReplyFeed
from .bus.message import MessageKey, Notification
from .bus.router import Router
from .bus.scope import FeedState, Scope
from .bus.system import SYSTEM_MESSAGES, SYSTEM_SUBJECT
from .inspection import InspectNode, NodeSnapshot

__all__ = ["SYSTEM_OWNER", "SystemFeeds"]

#: The owner of every node's system feeds: the only one the router lets
#: advertise on the reserved subject.
SYSTEM_OWNER = object()


class SystemFeeds:
    """The system publishers and the discovery and inspection repliers of the
    node whose ``router`` and ``node_id`` they are given (module docstring).
    ``take(diagram, diagram_format)`` is the node's snapshot the inspection
    replier answers with."""

    __slots__ = ("_lock", "_router", "discovery", "inspection", "publishers")

    def __init__(
        self, router: Router, node_id: str, take: Callable[[str | None, str], NodeSnapshot]
    ) -> None:
        router.reserved_subject = SYSTEM_SUBJECT
        router.reserved_owner = SYSTEM_OWNER
        self._router = router
        self._lock = threading.Lock()
        self.publishers: dict[type, PublishFeed[Any]] = {}
        for cls in SYSTEM_MESSAGES:
            self.publishers[cls] = self._publisher(cls)
        router.system_publish = self.publish

        def answer_discovery(incoming: IncomingRequest[DiscoverTopics]) -> None:
            discovery.answer(incoming, router, node_id)

        def answer_inspection(incoming: IncomingRequest[InspectNode]) -> None:
            inspection.answer(incoming, take)

        self.discovery: ReplyFeed[DiscoverTopics] = _replier(
            router, DiscoverTopics, answer_discovery
        )
        self.inspection: ReplyFeed[InspectNode] = _replier(router, InspectNode, answer_inspection)

    def _publisher(self, cls: type[Notification]) -> PublishFeed[Any]:
        feed: PublishFeed[Any] = PublishFeed(
            self._router,
            SYSTEM_OWNER,
            MessageKey(cls, SYSTEM_SUBJECT),
            Scope.LOCAL_ONLY,
            discoverable=False,
        )
        feed.status_callback(_ignore)
        feed.advertise()
        feed.update_feed_state(FeedState.UP)
        return feed

    def publish(self, message: Notification) -> None:
        """Publish one of the system subject's notifications (for the node's
        transports, which own them, and the higher layers' own kinds, such as
        ``actorbus.qos.DeadLetter``: its publisher is opened at its first one)."""
        feed = self.publishers.get(type(message))
        if feed is None:
            with self._lock:
                feed = self.publishers.get(type(message))
                if feed is None:
                    feed = self.publishers[type(message)] = self._publisher(type(message))
        feed.publish(message)


def _replier(router: Router, cls: type[Any], answer: Callable[[Any], None]) -> ReplyFeed[Any]:
    """A hidden ``REMOTE_ONLY`` replier of ``cls`` on the reserved subject, UP."""
    feed: ReplyFeed[Any] = ReplyFeed(
        router,
        SYSTEM_OWNER,
        MessageKey(cls, SYSTEM_SUBJECT),
        Scope.REMOTE_ONLY,
        discoverable=False,
    )
    feed.request_callback(answer)
    feed.advertise()
    feed.update_feed_state(FeedState.UP)
    return feed


def _ignore(*args: object) -> None:
    """A status callback that does nothing."""
