"""The bus: typed messages and keys, the binary codec, feeds, system notifications.

Users import from here (or, for the names most code needs, from
:mod:`actorbus`), never from the modules inside.
"""

from ..errors import CodecError, DeclarationError, MessageTooLargeError, ValidationError
from .address import SocketAddress
from .codec import DEFAULT_MAX_SIZE, Codec, decode, encode
from .discovery import Topic
from .feeds import (
    IncomingRequest,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    SubscribeFeed,
)
from .inbox import Inbox
from .message import (
    Field,
    Message,
    MessageKey,
    Notification,
    Reply,
    ReplyStatus,
    Request,
    lookup_type,
    registered_types,
)
from .permissions import Permissions
from .queues import QueueGroup
from .scope import FeedState, Scope
from .sender import Sender
from .subjects import Wildcard
from .system import (
    SYSTEM_SUBJECT,
    AccessRefused,
    ConnectionAccepted,
    ForwardingChanged,
    LinkLoggedOff,
    LinkLoggedOn,
    ServiceStarted,
    Undeliverable,
)

__all__ = [
    "DEFAULT_MAX_SIZE",
    "SYSTEM_SUBJECT",
    "AccessRefused",
    "Codec",
    "CodecError",
    "ConnectionAccepted",
    "DeclarationError",
    "FeedState",
    "Field",
    "ForwardingChanged",
    "Inbox",
    "IncomingRequest",
    "LinkLoggedOff",
    "LinkLoggedOn",
    "Message",
    "MessageKey",
    "MessageTooLargeError",
    "Notification",
    "Permissions",
    "PublishFeed",
    "QueueGroup",
    "Reply",
    "ReplyFeed",
    "ReplyStatus",
    "Request",
    "RequestFeed",
    "RequestHandle",
    "Scope",
    "Sender",
    "ServiceStarted",
    "SocketAddress",
    "SubscribeFeed",
    "Topic",
    "Undeliverable",
    "ValidationError",
    "Wildcard",
    "decode",
    "encode",
    "lookup_type",
    "registered_types",
]
