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
    "AccessRefused",
    "ConnectionAccepted",
    "LinkLoggedOff",
    "LinkLoggedOn",
    "MulticastLoss",
    "MulticastNagging",
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


class AccessRefused(Notification, type_name="actorbus.AccessRefused"):
    """A peer was refused an action on a key by the link's permissions
    (``actorbus.bus.permissions``).  Published once per peer, action and key
    (or pattern) for each of its links; every refusal is counted in the link's
    ``authz_refusals``."""

    peer_node: str
    #: "publish", "subscribe", "request" or "reply"
    action: str
    #: the key (``TypeName:"subject"``), or a pattern subscription narrowed to the
    #: keys allowed (``TypeName:"/..." (pattern)``)
    key: str
    #: the rule that refused it (``file:line: deny ...``), or why none allowed it
    rule: str


class MulticastLoss(Notification, type_name="actorbus.MulticastLoss"):
    """Datagrams of a multicast publisher are lost for good: they left its
    retransmit cache before this node could recover them (docs/multicast.md).
    Delivery from that publisher resumes with the datagram after ``last``; the
    notifications they carried are not delivered.  Published when the next
    notification from that publisher arrives (which says how many were lost)
    or when it goes away."""

    channel: str
    #: the publishing node's name, as its announcements give it
    publisher: str
    #: the publisher's stream (per run): ``%016x``
    stream: str
    #: the first and last sequence numbers lost (datagrams, inclusive)
    first: int
    last: int
    #: the notifications they carried (-1: the publisher went away before a
    #: later notification told how many)
    messages: int


class MulticastNagging(Notification, type_name="actorbus.MulticastNagging"):
    """A multicast channel asked for more than ``limit`` retransmissions within
    ``window`` seconds (the nagging monitor, docs/multicast.md): it stopped
    asking for retransmissions and delivering data until the application calls
    ``resume()`` on the channel (or closes it)."""

    channel: str
    requested: int
    limit: int
    window: float


SYSTEM_MESSAGES: tuple[type[Notification], ...] = (
    ConnectionAccepted,
    ServiceStarted,
    LinkLoggedOn,
    LinkLoggedOff,
    AccessRefused,
    MulticastLoss,
    MulticastNagging,
)
