"""The bus: typed messages and keys, the binary codec (feeds and routing follow).

Users import from here (or from :mod:`actorbus`), never from the modules inside.
"""

from ..errors import CodecError, DeclarationError, MessageTooLargeError, ValidationError
from ._types import SocketAddress
from .codec import DEFAULT_MAX_SIZE, Codec, decode, encode
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

__all__ = [
    "DEFAULT_MAX_SIZE",
    "Codec",
    "CodecError",
    "DeclarationError",
    "Field",
    "Message",
    "MessageKey",
    "MessageTooLargeError",
    "Notification",
    "Reply",
    "ReplyStatus",
    "Request",
    "SocketAddress",
    "ValidationError",
    "decode",
    "encode",
    "lookup_type",
    "registered_types",
]
