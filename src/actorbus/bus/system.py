"""System notifications: link and server events, published on a reserved subject.

The bus publishes these LOCAL_ONLY on :data:`SYSTEM_SUBJECT`; applications
subscribe to them like any other feed::

    self.subscribe(LinkLoggedOff, SYSTEM_SUBJECT, on_message=self.link_lost)

Applications may not advertise publishers or repliers on the reserved subject.
The node's discovery replier (:mod:`actorbus.bus.discovery`) is advertised
there too, by the node itself.
"""

from __future__ import annotations

from .message import Notification

__all__ = [
    "SYSTEM_MESSAGES",
    "SYSTEM_SUBJECT",
    "ConnectionAccepted",
    "LinkLoggedOff",
    "LinkLoggedOn",
    "ServiceStarted",
]

#: the reserved subject of every system notification.
SYSTEM_SUBJECT = "actorbus.system"


class ConnectionAccepted(Notification, type_name="actorbus.ConnectionAccepted"):
    """A service accepted a TCP connection (before logon)."""

    service: str
    remote_address: str


class ServiceStarted(Notification, type_name="actorbus.ServiceStarted"):
    """A service is listening."""

    service: str
    address: str


class LinkLoggedOn(Notification, type_name="actorbus.LinkLoggedOn"):
    """A link to a remote node completed its logon."""

    peer_node: str
    address: str
    #: True when this node dialled the connection.
    initiator: bool


class LinkLoggedOff(Notification, type_name="actorbus.LinkLoggedOff"):
    """A link to a remote node closed (or a logon was rejected), with the reason."""

    peer_node: str
    address: str
    reason: str


SYSTEM_MESSAGES: tuple[type[Notification], ...] = (
    ConnectionAccepted,
    ServiceStarted,
    LinkLoggedOn,
    LinkLoggedOff,
)
