"""Actors, mailboxes, dispatchers, timers and lifecycle.

Every application object is an :class:`Actor` registered with an
:class:`ActorRuntime`, pinned to one :class:`Dispatcher`, with a
:class:`Mailbox` through which every call into it passes.  See
``docs/actors.md`` for the model, the dispatcher kinds and the failure
contract.
"""

from __future__ import annotations

from actorbus.actors._context import current_actor
from actorbus.actors.actor import Actor, ActorContext
from actorbus.actors.dispatcher import Dispatcher, DispatcherStats, MailboxStats, make_dispatcher
from actorbus.actors.errors import (
    NotRegisteredError,
    RuntimeClosedError,
    TimerError,
    UnknownDispatcherError,
)
from actorbus.actors.failure import FailedTask
from actorbus.actors.mailbox import Mailbox
from actorbus.actors.runtime import ActorRuntime, Completion
from actorbus.actors.timers import TimerHandle, TimerQueue, TimerService

__all__ = [
    "Actor",
    "ActorContext",
    "ActorRuntime",
    "Completion",
    "Dispatcher",
    "DispatcherStats",
    "FailedTask",
    "Mailbox",
    "MailboxStats",
    "NotRegisteredError",
    "RuntimeClosedError",
    "TimerError",
    "TimerHandle",
    "TimerQueue",
    "TimerService",
    "UnknownDispatcherError",
    "current_actor",
    "make_dispatcher",
]
