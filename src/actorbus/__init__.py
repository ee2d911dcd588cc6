"""actorbus: an actor-model runtime with a typed message bus and state machines.

The small public API; everything else lives in the subpackages.
"""

from __future__ import annotations

from . import _log  # noqa: F401  (disables the library logger at import)
from ._log import enable_logging
from ._signals import StopSignals, wait_for_stop
from .actors import Actor, ActorRuntime, Completion, TimerHandle, current_actor
from .bus._types import SocketAddress
from .bus.codec import Codec
from .bus.discovery import Topic
from .bus.feeds import (
    IncomingRequest,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    SubscribeFeed,
)
from .bus.inbox import Inbox
from .bus.message import Field, MessageKey, Notification, Reply, ReplyStatus, Request
from .bus.permissions import Permissions
from .bus.queues import QueueGroup
from .bus.scope import FeedState, Scope
from .bus.sender import Sender
from .bus.subjects import Wildcard
from .bus.system import (
    SYSTEM_SUBJECT,
    AccessRefused,
    ConnectionAccepted,
    LinkLoggedOff,
    LinkLoggedOn,
    ServiceStarted,
)
from .config.schema import BusConfig, DispatcherConfig, DispatcherKind
from .errors import (
    CallbackError,
    CodecError,
    ConfigError,
    DeclarationError,
    Error,
    FeedStateError,
    FsmError,
    MessageTooLargeError,
    PeerError,
    ProtocolError,
    RegistrationError,
    RequestError,
    RequestTimeoutError,
    SubjectPatternError,
    UsageError,
    ValidationError,
)
from .node import Bus

__all__ = [
    "SYSTEM_SUBJECT",
    "AccessRefused",
    "Actor",
    "ActorRuntime",
    "Bus",
    "BusConfig",
    "CallbackError",
    "Codec",
    "CodecError",
    "Completion",
    "ConfigError",
    "ConnectionAccepted",
    "DeclarationError",
    "DispatcherConfig",
    "DispatcherKind",
    "Error",
    "FeedState",
    "FeedStateError",
    "Field",
    "FsmError",
    "Inbox",
    "IncomingRequest",
    "LinkLoggedOff",
    "LinkLoggedOn",
    "MessageKey",
    "MessageTooLargeError",
    "Notification",
    "PeerError",
    "Permissions",
    "ProtocolError",
    "PublishFeed",
    "QueueGroup",
    "RegistrationError",
    "Reply",
    "ReplyFeed",
    "ReplyStatus",
    "Request",
    "RequestError",
    "RequestFeed",
    "RequestHandle",
    "RequestTimeoutError",
    "Scope",
    "Sender",
    "ServiceStarted",
    "SocketAddress",
    "StopSignals",
    "SubjectPatternError",
    "SubscribeFeed",
    "TimerHandle",
    "Topic",
    "UsageError",
    "ValidationError",
    "Wildcard",
    "current_actor",
    "enable_logging",
    "wait_for_stop",
]
