"""A client bus: this node dials another node's J.REP gateway and federates with
it, as a TCP link does (docs/jrep.md, "Federation").

:class:`JrepClient` is the handle ``Bus.connect_jrep(url, ...)`` returns.  It
runs on one of the node's I/O threads: it opens a WebSocket (the ``websockets``
library's asyncio client), and each session is a
:class:`~._client_session.FedSession` whose party the router attaches for the
remote node.  With ``reconnect`` a lost or refused session is dialled again
after ``reconnect_delay`` seconds, doubling per failed attempt up to ten times
the delay; a lost session detaches its party first, so the remote feeds go
DOWN here until the next one is up.

**Accounting.**  J.REP has no receipts: the gateway never says what it took
in.  So the client counts, per notification the router hands it, exactly one
of: ``written`` (sent on a session that is still up), ``possibly_lost``
(written on a session that then broke: it may or may not have arrived), or
``dropped`` (never written: queued when the session broke, or handed to a
session already gone).  ``handed == written + possibly_lost + dropped`` once
nothing is in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from websockets.asyncio.client import connect

from ..._log import RateLimitedLog, logger
from ...bus.permissions import Permissions
from ...errors import UsageError
from .._credentials import Secret
from ._client_session import FedSession

if TYPE_CHECKING:
    from ...bus.router import Router
    from .._io_thread import IOThread

__all__ = ["JrepClient", "JrepClientStats"]

#: the websockets library's own log: silent (the client logs what matters)
_QUIET = logging.getLogger("actorbus.jrep.websockets.client")
_QUIET.setLevel(logging.CRITICAL + 1)
_QUIET.propagate = False
#: longest wait for the gateway's state sync after the WebSocket opened
SYNC_TIMEOUT: Final = 10.0


@dataclass(frozen=True, slots=True)
class JrepClientStats:
    """What a client bus did, over all its sessions (see the module docstring)."""

    #: sessions that reached the state sync; dials that failed
    sessions: int
    failed_dials: int
    #: notifications the router handed the client, and what became of them
    handed: int
    written: int
    possibly_lost: int
    dropped: int
    #: J.REP messages received from the gateway; errors it reported
    received: int
    errors: int


class JrepClient:
    """A federation with another node's J.REP gateway (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        node_id: str,
        url: str,
        router: Router,
        selector: IOThread,
        peer_log: RateLimitedLog,
        token: Secret | None = None,
        reconnect: bool,
        reconnect_delay: float,
        connect_timeout: float,
        heartbeat: float,
        max_message_size: int = 1_048_576,
        permissions: Permissions | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise UsageError(
                f"connect_jrep({url!r}): expected a WebSocket URL such as "
                "ws://host:8080/jrep (the gateway's url)"
            )
        for what, value in (("reconnect_delay", reconnect_delay), ("heartbeat", heartbeat)):
            if type(value) not in (int, float) or not 0 <= value < float("inf"):
                raise UsageError(f"connect_jrep({what}={value!r}): expected seconds >= 0")
        self.name = name
        self.node_id = node_id
        self.url = url
        #: the URL without its query (where a token may be)
        self.url_shown = f"{parts.scheme}://{parts.netloc}{parts.path}"
        self.router = router
        self.selector = selector
        self.peer_log = peer_log
        self.permissions = permissions
        self.reconnect = reconnect
        self.reconnect_delay = float(reconnect_delay)
        self.connect_timeout = float(connect_timeout) or None
        self.heartbeat = float(heartbeat) or None
        self.max_message_size = max_message_size
        self._token = token
        self._lock = threading.Lock()
        self._session: FedSession | None = None
        #: the session being made or run (up or not)
        self._current: FedSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._stop: asyncio.Event | None = None
        self._up = threading.Condition(self._lock)
        self._sessions = 0
        self._failed = 0
        #: totals of the sessions that ended
        self._done = dict.fromkeys(
            ("handed", "written", "possibly_lost", "dropped", "received", "errors"), 0
        )
        #: why the last session (or dial) ended
        self.last_error: str | None = None

    def __repr__(self) -> str:
        return f"<JrepClient {self.name!r} {self.url_shown}>"

    # ------------------------------------------------------------ public

    @property
    def connected(self) -> bool:
        """A session is up (its state sync done)."""
        with self._lock:
            return self._session is not None

    def wait_connected(self, timeout: float, sessions: int = 1) -> bool:
        """Wait until a session is up and at least ``sessions`` were made in all."""
        with self._up:
            return self._up.wait_for(
                lambda: self._session is not None and self._sessions >= sessions, timeout
            )

    @property
    def counters(self) -> JrepClientStats:
        with self._lock:
            c = dict(self._done)
            s = self._session
            sessions, failed = self._sessions, self._failed
        if s is not None:
            c["handed"] += s.handed
            c["written"] += s.written + s.in_hand
            c["dropped"] += s.dropped
            c["received"] += s.received
            c["errors"] += s.errors
        return JrepClientStats(sessions=sessions, failed_dials=failed, **c)

    # ------------------------------------------------------------ running

    def start(self) -> None:
        """Start dialling (on the I/O thread)."""
        asyncio.run_coroutine_threadsafe(self._begin(), self.selector.loop).result(10.0)

    async def _begin(self) -> None:
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def session_up(self, session: FedSession) -> None:
        """(loop) ``session`` finished its sync."""
        with self._up:
            self._session = session
            self._sessions += 1
            self._up.notify_all()
        logger.info("jrep client {}: federated with {}", self.name, self.url_shown)

    async def _run(self) -> None:
        stop = self._stop
        assert stop is not None
        delay = self.reconnect_delay
        headers = {}
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token.reveal().decode()
        while not self._closing:
            session: FedSession | None = None
            try:
                async with asyncio.timeout(self.connect_timeout):
                    ws = await connect(
                        self.url,
                        additional_headers=headers,
                        max_size=self.max_message_size,
                        ping_interval=self.heartbeat,
                        ping_timeout=self.heartbeat,
                        close_timeout=1.0,
                        compression=None,
                        open_timeout=None,
                        logger=_QUIET,
                    )
                session = FedSession(self, ws)
                with self._lock:
                    self._current = session
                reason = await session.run(SYNC_TIMEOUT)
            except asyncio.CancelledError:
                if session is not None:
                    self._ended(session, "closed")
                raise
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if session is not None and session.party is not None:
                self._ended(session, reason)
                if not self._closing:
                    self.peer_log.warning(
                        (self.name, "lost"),
                        "jrep client {}: session to {} lost ({})",
                        self.name,
                        self.url_shown,
                        reason,
                    )
                delay = self.reconnect_delay
            else:
                if session is not None:
                    await session.ws.close()
                with self._lock:
                    self._failed += 1
                self.last_error = reason
                self.peer_log.warning(
                    (self.name, "dial"),
                    "jrep client {}: cannot federate with {}: {}",
                    self.name,
                    self.url_shown,
                    reason,
                )
            if not self.reconnect or self._closing:
                return
            try:
                async with asyncio.timeout(delay):
                    await stop.wait()
            except TimeoutError:
                pass
            delay = min(delay * 2, self.reconnect_delay * 10) or 0.0

    def _ended(self, session: FedSession, reason: str) -> None:
        with self._lock:
            if self._session is session:
                self._session = None
            counts = session.fold()
            for what, n in counts.items():
                self._done[what] += n
        self.last_error = reason

    def count_late_drop(self) -> None:
        """(any thread) A notification handed to a session already gone."""
        with self._lock:
            self._done["handed"] += 1
            self._done["dropped"] += 1

    # ------------------------------------------------------------ close

    def close(self, timeout: float = 5.0) -> None:
        """Say Disconnect, close the session, stop dialling.  Idempotent."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        future = asyncio.run_coroutine_threadsafe(self._close(timeout), self.selector.loop)
        try:
            future.result(timeout + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()

    async def _close(self, timeout: float) -> None:
        if self._stop is not None:
            self._stop.set()
        task = self._task
        with self._lock:
            session = self._session
        if session is not None:
            try:
                async with asyncio.timeout(timeout):
                    await session.close("node closing")
            except (TimeoutError, OSError):
                pass
        if task is not None:
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(task)
            except (TimeoutError, Exception):
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        with self._lock:
            current = self._current
        if current is not None:
            await current.ws.close()
