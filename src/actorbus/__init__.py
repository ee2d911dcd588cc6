"""actorbus: an actor-model runtime with a typed message bus and state machines.

The names most code needs, in five groups; everything else lives in a public
subpackage (:mod:`actorbus.bus`, :mod:`actorbus.config`, :mod:`actorbus.errors`,
:mod:`actorbus.net`, :mod:`actorbus.fsm`, :mod:`actorbus.testing`, ...), each
with its own ``__all__``.

* **Actors** — :class:`Actor`, :class:`ActorRuntime`, :class:`Completion`,
  :class:`TimerHandle`, :func:`current_actor`.
* **Messages** — :class:`Notification`, :class:`Request`, :class:`Reply`,
  :class:`ReplyStatus`, :class:`Field`, :class:`MessageKey`, :class:`Wildcard`.
* **Feeds** — :class:`Scope`, :class:`FeedState`, :class:`PublishFeed`,
  :class:`SubscribeFeed`, :class:`RequestFeed`, :class:`ReplyFeed`,
  :class:`RequestHandle`, :class:`IncomingRequest`.
* **Bus** (running a node) — :class:`Bus`, :class:`BusConfig`,
  :class:`StopSignals`, :func:`wait_for_stop`, :func:`enable_logging`.
* **Errors** — :class:`Error` (the root), :class:`UsageError`,
  :class:`PeerError`, :class:`ConfigError`, :class:`CodecError`,
  :class:`FeedStateError`, :class:`RequestError`,
  :class:`RequestTimeoutError`, :class:`LinkClosedError`; every other error
  is in :mod:`actorbus.errors`.

Names that were importable from here before and moved to a subpackage still
are, for one release, with a :class:`DeprecationWarning` that names the new
import (docs/CHANGELOG.md, "Migrating").
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from . import _log  # noqa: F401  (disables the library logger at import)
from ._log import enable_logging
from ._signals import StopSignals, wait_for_stop
from .actors import Actor, ActorRuntime, Completion, TimerHandle, current_actor
from .bus import (
    FeedState,
    Field,
    IncomingRequest,
    MessageKey,
    Notification,
    PublishFeed,
    Reply,
    ReplyFeed,
    ReplyStatus,
    Request,
    RequestFeed,
    RequestHandle,
    Scope,
    SubscribeFeed,
    Wildcard,
)
from .config import BusConfig
from .errors import (
    CodecError,
    ConfigError,
    Error,
    FeedStateError,
    LinkClosedError,
    PeerError,
    RequestError,
    RequestTimeoutError,
    UsageError,
)
from .node import Bus

__all__ = [  # sorted; the groups are in the docstring above
    "Actor",
    "ActorRuntime",
    "Bus",
    "BusConfig",
    "CodecError",
    "Completion",
    "ConfigError",
    "Error",
    "FeedState",
    "FeedStateError",
    "Field",
    "IncomingRequest",
    "LinkClosedError",
    "MessageKey",
    "Notification",
    "PeerError",
    "PublishFeed",
    "Reply",
    "ReplyFeed",
    "ReplyStatus",
    "Request",
    "RequestError",
    "RequestFeed",
    "RequestHandle",
    "RequestTimeoutError",
    "Scope",
    "StopSignals",
    "SubscribeFeed",
    "TimerHandle",
    "UsageError",
    "Wildcard",
    "current_actor",
    "enable_logging",
    "wait_for_stop",
]

#: Names that moved to a subpackage: importable from here until the next
#: release, with a DeprecationWarning naming the new import.
_MOVED: dict[str, str] = {
    "SYSTEM_SUBJECT": "actorbus.bus",
    "AccessRefused": "actorbus.bus",
    "Codec": "actorbus.bus",
    "ConnectionAccepted": "actorbus.bus",
    "Inbox": "actorbus.bus",
    "LinkLoggedOff": "actorbus.bus",
    "LinkLoggedOn": "actorbus.bus",
    "Permissions": "actorbus.bus",
    "QueueGroup": "actorbus.bus",
    "Sender": "actorbus.bus",
    "ServiceStarted": "actorbus.bus",
    "SocketAddress": "actorbus.bus",
    "Topic": "actorbus.bus",
    "DispatcherConfig": "actorbus.config",
    "DispatcherKind": "actorbus.config",
    "CallbackError": "actorbus.errors",
    "DeclarationError": "actorbus.errors",
    "FsmError": "actorbus.errors",
    "MessageTooLargeError": "actorbus.errors",
    "ProtocolError": "actorbus.errors",
    "RegistrationError": "actorbus.errors",
    "SubjectPatternError": "actorbus.errors",
    "ValidationError": "actorbus.errors",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'actorbus' has no attribute {name!r}")
    warnings.warn(
        f"actorbus.{name} moved to {module}; write 'from {module} import {name}' "
        f"(the old name goes away in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), name)
