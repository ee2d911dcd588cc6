"""Exceptions raised by the actor runtime (defined in :mod:`actorbus.errors`).

They subclass the package tree in :mod:`actorbus.errors`, so ``except
actorbus.UsageError`` still catches them; the finer classes let callers react
to one situation (``except NotRegisteredError``) without parsing messages.
"""

from __future__ import annotations

from actorbus.errors import (
    NotRegisteredError,
    RuntimeClosedError,
    TimerError,
    UnknownDispatcherError,
)

__all__ = [
    "NotRegisteredError",
    "RuntimeClosedError",
    "TimerError",
    "UnknownDispatcherError",
]
