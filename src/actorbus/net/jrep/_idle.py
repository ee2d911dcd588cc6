"""A session's idle timers: the reader's handshake and idle timeouts, the
writer's heartbeat.

A timeout around each read or wait (``asyncio.timeout``) would create and
cancel an event-loop timer per WebSocket message, a cost of the same order as
the message itself.  An :class:`IdleTimer` instead keeps one timer for the
session: the hot path only records when there was activity (``at =
loop.time()``), and when the timer comes due it checks that time and either
fires (nothing happened for ``delay`` seconds) or sets itself again for the new
due time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["IdleTimer"]


class IdleTimer:
    """(loop) Calls ``fire()`` once ``delay`` seconds passed since ``at`` (the
    loop's time of the last activity, which the owner sets), then waits for the
    next activity: ``fire`` may set ``at`` (e.g. to now) to be called again
    ``delay`` later.  ``delay`` of None or 0: never fires."""

    __slots__ = ("_fire", "_handle", "_loop", "at", "delay")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, delay: float | None, fire: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._fire = fire
        self.delay = delay
        #: loop time of the last activity
        self.at = loop.time()
        self._handle: asyncio.TimerHandle | None = None
        self.arm()

    def arm(self) -> None:
        """(Re)set the timer for ``at + delay`` (after changing either by more
        than activity does: a new, shorter delay)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.delay:
            self._handle = self._loop.call_at(self.at + self.delay, self._due)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _due(self) -> None:
        self._handle = None
        delay = self.delay
        if not delay:
            return
        due = self.at + delay
        if self._loop.time() < due:  # there was activity since: not yet
            self._handle = self._loop.call_at(due, self._due)
            return
        last = self.at
        self._fire()
        if self._handle is None and self.at != last:  # fire() asked to go on
            self._handle = self._loop.call_at(self.at + delay, self._due)
