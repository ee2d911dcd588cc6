"""Events a :class:`~actorbus.net.protocol.LinkProtocol` reports to its shell.

Each event is what the *peer* did (or what happened to the link), in the order
the bytes arrived.  Events are slotted dataclasses; treat them as read-only.
Keys are the ``(type_name, subject)`` tuples of the peer's KEY_DEF frames — the
same tuple object every time for one key, so a shell may cache per key.  Roles,
scopes, feed states and reply statuses are the bus's own enums; a subject
pattern is the bus's own :class:`~actorbus.bus.subjects.Wildcard`, checked by
its constructor before the event is queued.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bus.message import ReplyStatus
from ..bus.party import Role
from ..bus.routed import RoutedFrame
from ..bus.scope import FeedState, Scope
from ..bus.subjects import Wildcard
from ._wire import WireKey, WireValue

__all__ = [
    "Advertised",
    "AuthenticationFailed",
    "CancelReceived",
    "ConnectionClosed",
    "Event",
    "FeedStatusReceived",
    "GroupChanged",
    "GroupNotificationReceived",
    "HeartbeatTimeout",
    "LogoffReceived",
    "LogonAccepted",
    "LogonComplete",
    "LogonRejected",
    "LogonRequested",
    "LogonTimeout",
    "NotificationReceived",
    "PatternSubscribed",
    "PatternUnsubscribed",
    "ReceiptReceived",
    "ReplyReceived",
    "RequestAcknowledged",
    "RequestReceived",
    "Retracted",
    "RouteAnnounced",
    "RoutedReceived",
    "SenderChanged",
    "SequenceGap",
    "Subscribed",
    "Unsubscribed",
]


class Event:
    """Base class of every protocol event."""

    __slots__ = ()


# ------------------------------------------------------------------- handshake


@dataclass(slots=True)
class LogonRequested(Event):
    """(server) A client proved it holds the key for its node id and asks to log
    on.  Call ``accept_logon()`` or ``reject_logon()``.

    ``peer_run_id`` is the client's run id (this run of its node), "" if it sent none."""

    peer_node_id: str
    peer_run_id: str = ""


@dataclass(slots=True)
class LogonAccepted(Event):
    """(client) The server accepted the logon.  Send advertisements, then
    ``complete_logon()``; or refuse this server with ``reject_logon(reason)``.

    ``peer_run_id`` is the server's run id (this run of its node), "" if it sent none."""

    peer_node_id: str
    peer_run_id: str = ""


@dataclass(slots=True)
class AuthenticationFailed(Event):
    """The peer's proof does not match this side's key: it does not hold the same
    secret (or one side has none).  The link is closed (a LOGON_REJECT or LOGOFF
    saying "authentication failed" was queued for the peer); nothing of this
    node's identity was sent to it.

    ``claimed_node_id`` is the node id the peer *claimed* (unproven: for logs
    only, never a reason to act on that node)."""

    claimed_node_id: str


@dataclass(slots=True)
class LogonRejected(Event):
    """(client) The server refused the logon.  The link is closed."""

    reason: str


@dataclass(slots=True)
class ReceiptReceived(Event):
    """The peer's RECEIPT: how many data frames it has received from this run of
    this node (``run_id``, as the peer knows it) over earlier connections.

    Arrives at most once per link, before :class:`LogonComplete`."""

    received: int


@dataclass(slots=True)
class LogonComplete(Event):
    """The peer has sent all its advertisements (its LOGON_COMPLETE arrived)."""


# ---------------------------------------------------------------- link closing


@dataclass(slots=True)
class LogoffReceived(Event):
    """The peer closed the link in order, saying why.  The link is closed."""

    reason: str


@dataclass(slots=True)
class ConnectionClosed(Event):
    """The byte stream ended (EOF) at a frame boundary without a LOGOFF.

    The link is closed; the peer may have crashed or the network dropped."""


@dataclass(slots=True)
class HeartbeatTimeout(Event):
    """Nothing arrived within ``heartbeat_reply_delay`` after a heartbeat.

    The link is closed (a LOGOFF was queued for the peer)."""

    silent_for: float


@dataclass(slots=True)
class LogonTimeout(Event):
    """The logon did not get past acceptance within ``logon_timeout``.

    The link is closed (a LOGON_REJECT or LOGOFF was queued for the peer)."""

    waited: float


# ------------------------------------------------------- feeds crossing the link


@dataclass(slots=True)
class Advertised(Event):
    """The peer advertised a publisher or replier feed, with its declared state."""

    key: WireKey
    role: Role
    scope: Scope
    feed_state: FeedState


@dataclass(slots=True)
class Retracted(Event):
    """The peer retracted a publisher or replier advertisement."""

    key: WireKey
    role: Role


@dataclass(slots=True)
class Subscribed(Event):
    """The peer has a subscriber or requestor on ``key``."""

    key: WireKey
    role: Role


@dataclass(slots=True)
class Unsubscribed(Event):
    """The peer's last subscriber or requestor on ``key`` went away."""

    key: WireKey
    role: Role


@dataclass(slots=True)
class FeedStatusReceived(Event):
    """Feed state crossing the link: a publisher/replier's declared state, or the
    presence of subscribers/requestors, on the peer's side."""

    key: WireKey
    role: Role
    up: bool


@dataclass(slots=True)
class PatternSubscribed(Event):
    """The peer has a subscriber of ``type_name`` notifications on every subject
    ``wildcard`` matches.

    ``type_name`` is a type known here (``is_known_type``): a pattern on an
    unknown type is counted in ``counters.unknown_type`` and dropped."""

    type_name: str
    wildcard: Wildcard


@dataclass(slots=True)
class PatternUnsubscribed(Event):
    """The peer's last subscriber of ``type_name`` on ``wildcard`` went away."""

    type_name: str
    wildcard: Wildcard


@dataclass(slots=True)
class GroupChanged(Event):
    """The peer has ``members`` subscribers in queue group ``group`` on ``key``
    (0: none left)."""

    key: WireKey
    group: str
    members: int


# ----------------------------------------------------------------------- data


@dataclass(slots=True)
class NotificationReceived(Event):
    """A notification; ``body`` is the codec's wire value (arrays arrive as tuples)."""

    key: WireKey
    body: WireValue


@dataclass(slots=True)
class GroupNotificationReceived(Event):
    """A notification for exactly one member of queue group ``group`` here; a
    data message counted as a NOTIFY is (``body`` as in NotificationReceived)."""

    key: WireKey
    group: str
    body: WireValue


@dataclass(slots=True)
class RequestReceived(Event):
    """A request; answer with ``request_ack()`` then ``reply()`` using ``request_id``."""

    key: WireKey
    request_id: int
    body: WireValue


@dataclass(slots=True)
class RequestAcknowledged(Event):
    """The peer says how many of its repliers took request ``request_id``."""

    request_id: int
    repliers: int


@dataclass(slots=True)
class ReplyReceived(Event):
    """A reply to our request ``request_id``; ``key`` names the reply class.

    With ``repliers`` set, the peer's acknowledgement of the request came in the
    same frame: handle it first, exactly as a :class:`RequestAcknowledged`.

    Replies are delivered even when the reply type is unknown here (and counted in
    ``counters.unknown_type``): the requestor is counting final replies, so the
    shell must turn an undecodable reply into an ERROR rather than lose it."""

    request_id: int
    key: WireKey
    status: ReplyStatus
    body: WireValue
    #: the acknowledgement that travelled with the reply: how many repliers took
    #: the request, as a RequestAcknowledged just before it would say; None when
    #: the reply came alone
    repliers: int | None = None


@dataclass(slots=True)
class CancelReceived(Event):
    """The peer cancelled its request ``request_id``."""

    request_id: int


@dataclass(slots=True)
class SequenceGap(Event):
    """Sequenced frames ``expected`` .. ``got - 1`` never arrived.

    Reported just before the event of frame ``got``, which is still delivered."""

    expected: int
    got: int


@dataclass(slots=True)
class SenderChanged(Event):
    """The notifications that follow on this connection (NOTIFY, NOTIFY_RUN,
    GROUP_NOTIFY) were published on the peer by the feed ``feed`` of actor
    ``actor`` (None: a feed without an actor), until the next SenderChanged."""

    actor: str | None
    feed: int
    #: (forwarded) the node it was sent on and the links it crossed before
    #: the peer (None, 0: the peer's own)
    node: str | None = None
    hops: int = 0


@dataclass(slots=True)
class RouteAnnounced(Event):
    """A link-state announcement of the forwarding tree (ROUTE;
    bus/spanning.py): ``origin``'s ``seq``-th list of its forwarding ``peers``,
    ``hops`` links crossed before this one; ``flags`` bit 0: the peer holds
    this link in its tree, bit 1: it forwards on it at all."""

    origin: str
    seq: int
    peers: tuple[str, ...]
    hops: int
    flags: int


@dataclass(slots=True)
class RoutedReceived(Event):
    """A source-routed message (ROUTED): the frame as the bus's source routes take
    it (:class:`~actorbus.bus.routed.RoutedFrame`), its body never decoded here."""

    frame: RoutedFrame
