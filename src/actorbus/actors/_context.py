"""Which actor is running on this thread: a thread-local set around each batch.

Dispatcher workers set :data:`_tls.actor` when they start draining a mailbox
and clear it when they stop, so the value is never stale on a thread that runs
non-actor code.  On the asyncio dispatcher the loop callback that drains a
mailbox does the same, and every step of an awaited ``async def`` callback is
wrapped so the value is right again each time the coroutine resumes (other
actors run on the same thread while it is suspended).

A :class:`contextvars.ContextVar` would follow coroutines by itself, but it is
also copied into every ``call_soon_threadsafe`` handle made from an actor
thread, so code on some other event loop would wrongly see the posting actor as
"current".  A thread-local cannot leak that way.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actorbus.actors.actor import Actor

__all__ = ["current_actor"]


class _Current(threading.local):
    # class attribute: a thread that never set it reads None without any setup.
    actor: Actor | None = None


_tls = _Current()


def current_actor() -> Actor | None:
    """The actor whose task is running on the calling thread, or ``None``.

    ``None`` on threads that are not running an actor task right now (the main
    thread, a network thread, a dispatcher thread between batches, a thread an
    actor started itself).
    """
    return _tls.actor
