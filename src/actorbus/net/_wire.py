"""Wire constants of the link protocol: frame types, and the codes of the bus's enums.

Every frame is ``uint32 length`` + one msgpack array ``[frame_type, ...]``.  The
numbers here *are* the wire format (docs/protocol.md is the reference; the test
``tests/net/test_wire_codes.py`` pins each one to it): changing one is a protocol
version change.

Frame types fall into three groups, which the protocol treats differently:

* **handshake / link frames** (``LOGON`` .. ``PROOF``) carry no sequence number;
* **sequenced frames** (``ADVERTISE`` and above) carry ``seq`` as their second
  element, numbered 1, 2, 3, ... per direction per link;
* of the sequenced frames, the **data frames** (``NOTIFY`` .. ``NOTIFY_RUN``, and
  ``GROUP_NOTIFY``) are the ones a shell's output-queue limit counts; everything
  else is a system frame.  A ``NOTIFY_RUN`` frame carries *n* notifications on
  one key and counts as *n* data messages: they take the sequence numbers
  ``seq`` .. ``seq+n-1``, as *n* NOTIFY frames would.

Version 5 carries wildcard interest and queue groups: ``SUBSCRIBE_PATTERN`` /
``UNSUBSCRIBE_PATTERN`` name a message type and a
:class:`~actorbus.bus.subjects.Wildcard` (its dialect by the code of
``DIALECT_CODES``, then its text), ``GROUP`` says how many members of a queue
group this node has on a key, and ``GROUP_NOTIFY`` is a notification for one
member of a group (a data frame, counted exactly as a NOTIFY).

The protocol speaks the bus's own enums (:class:`~actorbus.bus.party.Role`,
:class:`~actorbus.bus.scope.Scope`, :class:`~actorbus.bus.scope.FeedState`,
:class:`~actorbus.bus.message.ReplyStatus`) and patterns
(:class:`~actorbus.bus.subjects.Wildcard`): its commands take their members and
its events carry them.  Only here do they meet their wire codes, in the tables
below (member -> code, and code -> member for checking what the peer sent).  The
tables are for the protocol's modules only; ``actorbus.net`` does not export them.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any, Final, TypeAlias

from ..bus.message import ReplyStatus
from ..bus.party import Role
from ..bus.scope import FeedState, Scope
from ..bus.subjects import Wildcard

__all__ = [
    "ALL_ROLES",
    "DATA_FRAME_TYPES",
    "DIALECTS",
    "DIALECT_CODES",
    "FEED_STATES",
    "FEED_STATE_CODES",
    "FIRST_SEQUENCED",
    "INTEREST_ROLES",
    "OFFER_ROLES",
    "PROTOCOL_VERSION",
    "REMOTE_SCOPES",
    "REPLY_STATUSES",
    "REPLY_STATUS_CODES",
    "ROLES",
    "ROLE_CODES",
    "SCOPES",
    "SCOPE_CODES",
    "WILDCARDS",
    "FrameType",
    "WireKey",
    "WireValue",
]

#: Version spoken by this implementation; sent in LOGON and checked by the server.
PROTOCOL_VERSION: Final = 5

#: A message key as it crosses the link: ``(type_name, subject)``.
WireKey: TypeAlias = tuple[str, str]

#: An opaque msgpack-serialisable value (a message body built by the codec).
WireValue: TypeAlias = Any


class FrameType(IntEnum):
    """The first element of every frame body."""

    LOGON = 1  # [1, version, node_id, run_id, nonce, *ignored]  client -> server
    LOGON_ACCEPT = 2  # [2, node_id, run_id, proof]      server -> client, after PROOF
    LOGON_REJECT = 3  # [3, reason]                       server -> client
    LOGON_COMPLETE = 4  # [4]                             both ways
    LOGOFF = 5  # [5, reason]                             both ways, any state
    HEARTBEAT = 6  # [6]
    HEARTBEAT_REPLY = 7  # [7]
    KEY_DEF = 8  # [8, key_id, type_name, subject]
    RECEIPT = 9  # [9, data_frames_received]              both ways, once, before LOGON_COMPLETE
    CHALLENGE = 10  # [10, nonce]                         server -> client, answers LOGON
    PROOF = 11  # [11, proof]                             client -> server, answers CHALLENGE
    ADVERTISE = 16  # [16, seq, key_id, role, scope, up]
    RETRACT = 17  # [17, seq, key_id, role]
    SUBSCRIBE = 18  # [18, seq, key_id, role]
    UNSUBSCRIBE = 19  # [19, seq, key_id, role]
    FEED_STATUS = 20  # [20, seq, key_id, role, up]
    NOTIFY = 21  # [21, seq, key_id, body]
    REQUEST = 22  # [22, seq, key_id, request_id, body]
    REQUEST_ACK = 23  # [23, seq, request_id, repliers]
    REPLY = 24  # [24, seq, key_id, request_id, status, body]
    CANCEL = 25  # [25, seq, request_id]
    NOTIFY_RUN = 26  # [26, seq, key_id, [body, ...]]  n >= 1 notifications, seq .. seq+n-1
    SUBSCRIBE_PATTERN = 27  # [27, seq, type_name, dialect, text]
    UNSUBSCRIBE_PATTERN = 28  # [28, seq, type_name, dialect, text]
    GROUP = 29  # [29, seq, key_id, group, members]  members 0: none left
    GROUP_NOTIFY = 30  # [30, seq, key_id, group, body]  for one member of the group
    SENDER = 31  # [31, seq, actor, feed, (node, hops)]  who sends the notifications that follow
    # [32, seq, kind, route_to, route_from, type_name, subject, request_id, repliers, body]
    ROUTED = 32  # a source-routed message (bus/routed.py); body: the codec's bytes
    ROUTE = 33  # [33, seq, root, [node, ...], flags]  the forwarding tree (docs/routing.md)


#: Frame types at or above this carry a sequence number as element 1.
FIRST_SEQUENCED: Final = int(FrameType.ADVERTISE)

#: The frames an output-queue limit counts (``LinkProtocol.data_queued``).
DATA_FRAME_TYPES: Final = frozenset(
    {
        FrameType.NOTIFY,
        FrameType.REQUEST,
        FrameType.REQUEST_ACK,
        FrameType.REPLY,
        FrameType.CANCEL,
        FrameType.NOTIFY_RUN,
        FrameType.GROUP_NOTIFY,
        FrameType.ROUTED,
    }
)

# ------------------------------------------------------------ the bus's enums

#: ``role`` of ADVERTISE, RETRACT, SUBSCRIBE, UNSUBSCRIBE and FEED_STATUS.
ROLE_CODES: Final[dict[Role, int]] = {
    Role.PUBLISHER: 1,
    Role.SUBSCRIBER: 2,
    Role.REQUESTOR: 3,
    Role.REPLIER: 4,
}
#: code -> role, for any frame with a role.
ROLES: Final[dict[int, Role]] = {code: role for role, code in ROLE_CODES.items()}
#: The roles an ADVERTISE or RETRACT may name (by code).
OFFER_ROLES: Final[dict[int, Role]] = {ROLE_CODES[r]: r for r in (Role.PUBLISHER, Role.REPLIER)}
#: The roles a SUBSCRIBE or UNSUBSCRIBE may name (by code).
INTEREST_ROLES: Final[dict[int, Role]] = {
    ROLE_CODES[r]: r for r in (Role.SUBSCRIBER, Role.REQUESTOR)
}
#: The roles a FEED_STATUS may name (by code): every one.
ALL_ROLES: Final = ROLES

#: ``scope`` of ADVERTISE.  LOCAL_ONLY has a code but never crosses a link.
SCOPE_CODES: Final[dict[Scope, int]] = {
    Scope.LOCAL_ONLY: 0,
    Scope.LOCAL_AND_REMOTE: 1,
    Scope.REMOTE_ONLY: 2,
}
#: code -> scope, of every scope.
SCOPES: Final[dict[int, Scope]] = {code: scope for scope, code in SCOPE_CODES.items()}
#: The scopes an ADVERTISE may carry (by code).
REMOTE_SCOPES: Final[dict[int, Scope]] = {
    SCOPE_CODES[s]: s for s in (Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY)
}

#: ``up`` of ADVERTISE (a msgpack bool): the declared feed state.
FEED_STATE_CODES: Final[dict[FeedState, bool]] = {FeedState.DOWN: False, FeedState.UP: True}
#: ``up`` -> feed state, indexed by the bool (``FEED_STATES[up]``).
FEED_STATES: Final = (FeedState.DOWN, FeedState.UP)

#: ``status`` of REPLY.
REPLY_STATUS_CODES: Final[dict[ReplyStatus, int]] = {
    ReplyStatus.OK_FINAL: 0,
    ReplyStatus.OK_CONTINUING: 1,
    ReplyStatus.ERROR: 2,
}
#: code -> reply status.
REPLY_STATUSES: Final[dict[int, ReplyStatus]] = {
    code: status for status, code in REPLY_STATUS_CODES.items()
}

#: ``dialect`` of SUBSCRIBE_PATTERN and UNSUBSCRIBE_PATTERN: a ``Wildcard.dialect``.
DIALECT_CODES: Final[dict[str, int]] = {"levels": 0, "prefix": 1}
#: code -> dialect.
DIALECTS: Final[dict[int, str]] = {code: dialect for dialect, code in DIALECT_CODES.items()}
#: code -> the Wildcard constructor of that dialect (it checks a pattern's rules).
WILDCARDS: Final[dict[int, Callable[[str], Wildcard]]] = {
    DIALECT_CODES["levels"]: Wildcard.levels,
    DIALECT_CODES["prefix"]: Wildcard.prefix,
}
