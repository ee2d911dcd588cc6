"""How a node's links are closed on their loop: each logs off, the sockets are
given the time to close, and the stragglers are aborted
(:meth:`~actorbus.net.node.NodeNet.close` and the stop hook of an asyncio
dispatcher whose loop the links share)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .link import Link

__all__ = ["ABORT_WAIT", "STOP_HOOK_WAIT", "close_links"]

#: How long close waits for aborted sockets to report they are gone.
ABORT_WAIT = 1.0
#: How long a stopping dispatcher's hook waits for the links on its loop to log off
#: before aborting them (the dispatcher's stop() timeout defaults to 5 s).
STOP_HOOK_WAIT = 1.0


async def close_links(links: list[Link], reason: str, timeout: float) -> None:
    """(loop) Log off ``links``, wait for their sockets to close, abort stragglers."""
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[None]] = []
    for link in links:
        future: asyncio.Future[None] = loop.create_future()
        waits.append(future)
        link.close_on_loop(reason, _setter(future))
    if waits:
        await asyncio.wait(waits, timeout=timeout)
    stragglers: list[asyncio.Future[None]] = []
    for link in links:
        future = loop.create_future()
        if link.abort_connection(_setter(future)):
            stragglers.append(future)
    if stragglers:
        await asyncio.wait(stragglers, timeout=ABORT_WAIT)
    # Give cancelled dials one turn of the loop to let go of their sockets.
    await asyncio.sleep(0)


def _setter(future: asyncio.Future[None]) -> Callable[[], None]:
    def done() -> None:
        if not future.done():
            future.set_result(None)

    return done
