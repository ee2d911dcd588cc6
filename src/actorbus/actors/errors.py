"""Exceptions raised by the actor runtime.

They subclass the package tree in :mod:`actorbus.errors`, so ``except
actorbus.UsageError`` still catches them; the finer classes let callers react
to one situation (``except NotRegisteredError``) without parsing messages.
"""

from __future__ import annotations

from actorbus.errors import RegistrationError, UsageError

__all__ = [
    "NotRegisteredError",
    "RuntimeClosedError",
    "TimerError",
    "UnknownDispatcherError",
]


class NotRegisteredError(RegistrationError):
    """The operation needs an actor registered with a runtime, and it is not."""


class UnknownDispatcherError(RegistrationError, LookupError):
    """A dispatcher name that the runtime's configuration does not define."""


class RuntimeClosedError(UsageError):
    """The runtime was closed; it accepts no more registrations or lifecycle calls."""


class TimerError(UsageError, ValueError):
    """A timer was asked for with an impossible delay or period."""
