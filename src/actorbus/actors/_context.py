"""Where an actor finds its context: which actor is running on this thread (a
thread-local set around each batch), and the runtimes of the open buses.

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

:data:`bus_runtimes` is the process's plain registry of the runtimes that
serve a bus (an :class:`~actorbus.actors.runtime.ActorRuntime` made with the
bus's router adds itself, and leaves when it closes).  It is how an actor that
opens a feed before it is registered finds the single open bus, and what
``Bus.current()`` reads.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actorbus.actors.actor import Actor
    from actorbus.actors.runtime import ActorRuntime

__all__ = ["BusRuntimes", "bus_runtimes", "current_actor"]


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


class BusRuntimes:
    """The open runtimes that serve a bus (weakly held): ``add`` / ``discard``
    by the runtime itself, ``single()`` for whoever needs "the" bus."""

    __slots__ = ("_lock", "_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: weakref.WeakSet[ActorRuntime] = weakref.WeakSet()

    def add(self, runtime: ActorRuntime) -> None:
        with self._lock:
            self._open.add(runtime)

    def discard(self, runtime: ActorRuntime) -> None:
        with self._lock:
            self._open.discard(runtime)

    def single(self) -> ActorRuntime | None:
        """The runtime of the single open bus; None if there are none or several."""
        with self._lock:
            live = list(self._open)
        return live[0] if len(live) == 1 else None


#: the process's runtimes that serve a bus
bus_runtimes = BusRuntimes()
