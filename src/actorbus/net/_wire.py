"""Wire constants of the link protocol: frame types and the small enums carried in frames.

Every frame is ``uint32 length`` + one msgpack array ``[frame_type, ...]``.  The
numbers here *are* the wire format (docs/protocol.md is the reference); changing
one is a protocol version change.

Frame types fall into three groups, which the protocol treats differently:

* **handshake / link frames** (``LOGON`` .. ``RECEIPT``) carry no sequence number;
* **sequenced frames** (``ADVERTISE`` and above) carry ``seq`` as their second
  element, numbered 1, 2, 3, ... per direction per link;
* of the sequenced frames, the **data frames** (``NOTIFY`` .. ``NOTIFY_RUN``) are
  the ones a shell's output-queue limit counts; everything else is a system
  frame.  A ``NOTIFY_RUN`` frame carries *n* notifications on one key and counts
  as *n* data messages: they take the sequence numbers ``seq`` .. ``seq+n-1``, as
  *n* NOTIFY frames would.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Final, TypeAlias

__all__ = [
    "DATA_FRAME_TYPES",
    "FIRST_SEQUENCED",
    "PROTOCOL_VERSION",
    "FeedState",
    "FrameType",
    "ReplyStatus",
    "Role",
    "Scope",
    "WireKey",
    "WireValue",
]

#: Version spoken by this implementation; sent in LOGON and checked by the server.
PROTOCOL_VERSION: Final = 4

#: A message key as it crosses the link: ``(type_name, subject)``.
WireKey: TypeAlias = tuple[str, str]

#: An opaque msgpack-serialisable value (a message body built by the codec).
WireValue: TypeAlias = Any


class FrameType(IntEnum):
    """The first element of every frame body."""

    LOGON = 1  # [1, version, node_id, session_id?, *ignored]  client -> server
    LOGON_ACCEPT = 2  # [2, node_id, session_id?]             server -> client
    LOGON_REJECT = 3  # [3, reason]                           server -> client
    LOGON_COMPLETE = 4  # [4]                                 both ways
    LOGOFF = 5  # [5, reason]                                 both ways, any state
    HEARTBEAT = 6  # [6]
    HEARTBEAT_REPLY = 7  # [7]
    KEY_DEF = 8  # [8, key_id, type_name, subject]
    RECEIPT = 9  # [9, data_frames_received]                  both ways, once, before LOGON_COMPLETE
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
    }
)


class Role(IntEnum):
    """Which feed of a key an advertisement, subscription or status is about.

    Member names match ``actorbus.bus.router.Role``: ``Role[bus_role.name]``."""

    PUBLISHER = 1
    SUBSCRIBER = 2
    REQUESTOR = 3
    REPLIER = 4


class Scope(IntEnum):
    """Feed scope (same values as ``actorbus.bus.scope.Scope``).

    Only the remote-capable scopes cross a link."""

    LOCAL_ONLY = 0
    LOCAL_AND_REMOTE = 1
    REMOTE_ONLY = 2


class FeedState(IntEnum):
    """Declared state of a publisher or replier feed (``bool`` on the wire).

    Same values as ``actorbus.bus.scope.FeedState``."""

    DOWN = 0
    UP = 1


class ReplyStatus(IntEnum):
    """Status carried by every reply (same values as ``actorbus.bus.message.ReplyStatus``)."""

    OK_FINAL = 0
    OK_CONTINUING = 1
    ERROR = 2
