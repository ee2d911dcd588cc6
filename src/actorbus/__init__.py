"""actorbus: an actor-model runtime with a typed message bus and state machines.

The small public API; everything else lives in the subpackages.
"""

from __future__ import annotations

from . import _log  # noqa: F401  (disables the library logger at import)
from ._log import enable_logging
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
    UsageError,
    ValidationError,
)

__all__ = [
    "CallbackError",
    "CodecError",
    "ConfigError",
    "DeclarationError",
    "Error",
    "FeedStateError",
    "FsmError",
    "MessageTooLargeError",
    "PeerError",
    "ProtocolError",
    "RegistrationError",
    "RequestError",
    "UsageError",
    "ValidationError",
    "enable_logging",
]
