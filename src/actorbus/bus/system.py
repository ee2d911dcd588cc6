"""System notifications: link and server events, published on a reserved subject.

The bus publishes these LOCAL_ONLY on :data:`SYSTEM_SUBJECT`; applications
subscribe to them like any other feed::

    self.subscribe(LinkLoggedOff, SYSTEM_SUBJECT, on_message=self.link_lost)

Applications may not advertise publishers or repliers on the reserved subject.
The node's discovery replier (:mod:`actorbus.bus.discovery`) is advertised
there too, by the node itself.
"""

from __future__ import annotations

from ..errors import CodecError
from .codec import decode
from .message import Message, Notification, lookup_type

__all__ = [
    "SYSTEM_MESSAGES",
    "SYSTEM_SUBJECT",
    "AccessRefused",
    "ConnectionAccepted",
    "ForwardingChanged",
    "LinkLoggedOff",
    "LinkLoggedOn",
    "MulticastLoss",
    "MulticastNagging",
    "ServiceStarted",
    "Undeliverable",
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


class Undeliverable(Notification, type_name="actorbus.Undeliverable"):
    """A source-routed message could not be delivered: the bounce, delivered to
    its sender's node (docs/routing.md, "Source routes and bounces").  The
    original message travels in it undecoded (``body``, the codec's bytes of the
    ``type_name`` class); :meth:`original` decodes it."""

    #: the node that could not pass the message on (where it bounced)
    node: str
    #: why, for a human: the unknown next hop, the hop limit, the refusing rule ...
    reason: str
    #: one word for programs: "unknown-node", "hop-limit", "refused",
    #: "not-forwarding" or "unknown-type"
    code: str
    #: the nodes still ahead when it bounced, the unreachable next hop first
    route_to: list[str]
    #: the nodes it crossed, its origin first and ``node`` last
    route_from: list[str]
    #: the original message's type name and subject
    type_name: str
    original_subject: str
    #: the original message as the codec encodes it
    body: bytes
    #: True when the original was a request (its requestor got an ERROR reply)
    request: bool

    def original(self) -> Message:
        """The original message, decoded (raises ``CodecError`` when its class
        is not defined in this process)."""
        cls = lookup_type(self.type_name)
        if cls is None or not issubclass(cls, Message):
            raise CodecError(
                f"Undeliverable.original(): no message class named {self.type_name!r} "
                f"is defined in this process; import the module that declares it"
            )
        return decode(cls, self.body)


class ForwardingChanged(Notification, type_name="actorbus.ForwardingChanged"):
    """A forwarding link started or stopped carrying feeds: the forwarding tree
    changed (docs/routing.md).  When it stops, everything it carried went DOWN
    here, as for a lost link; when it starts, both ends advertise anew."""

    peer_node: str
    #: True: the link carries feeds now; False: it left the tree
    carrying: bool
    #: the root this node follows and its peer toward it ("" at the root)
    root: str
    parent: str
    #: the link's counters so far (``LinkStats.forwarded``, ``hop_limited``)
    forwarded: int
    hop_limited: int


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
    Undeliverable,
    ForwardingChanged,
    MulticastLoss,
    MulticastNagging,
)
