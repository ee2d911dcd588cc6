"""A J.REP gateway: a port serving WebSocket clients (and a few files) for one node.

A :class:`Gateway` binds its socket on the caller's thread (a port in use, a
missing token beyond loopback: errors raised by ``Bus.serve_jrep`` or at bus
start), then serves on one of the node's I/O threads with the ``websockets``
library (``websockets.asyncio.server.serve`` on the given socket).  Each
WebSocket that passes the handshake checks (:mod:`._http`) becomes a
:class:`~._session.Session`: one :class:`~actorbus.bus.party.RemoteParty`
(``router.attach``) whose transport speaks J.REP to the client.

**Authentication.**  A gateway with a token admits a WebSocket only with that
token.  One without a token may listen on a loopback address only, unless its
``auth`` is ``"none"`` (clients accepted without a token knowingly; a warning
when it opens) — the rule a TCP service applies to its secret.

The same token guards the node's inspect page and its Prometheus metrics,
when the settings turn them on (``inspect_page``, ``metrics``; read through the
:class:`~._views.NodeViews` the node hands over): the rule above is what keeps
them on loopback unless a token, or ``auth="none"``, says otherwise.

**Permissions.**  Every client of a gateway is the peer named by the gateway's
name in the permissions (``allow subscribe web /prices/...`` for a gateway
named ``web``, or a role holding that name, or ``*``): the gateway hands each
session's party those rules, so the party refuses exactly what it would refuse
a TCP peer of that name; a session asks its party first
(``RemoteParty.refusal``) to tell the client why (``Refused`` on ClientBusErrors).

**Private subjects.**  Each session gets a private prefix (``ReplyPrefix``, a
new private topic of the bus); the gateway knows which session owns which
prefix, so no client can subscribe to, publish on or take replies on another
session's subjects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import logging
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from websockets.asyncio.server import Server, ServerConnection, serve

from ..._log import RateLimitedLog, logger
from ...bus.message import Message, lookup_type
from ...bus.permissions import Permissions
from ...bus.subjects import new_private_subject
from ...errors import ConfigError, UsageError
from .._address import endpoint
from .._credentials import GENERATE, Secret
from ._http import HttpFront
from ._metrics import check_available
from ._session import Session
from ._session_base import SessionBase
from ._settings import GatewaySettings, GatewayStats
from ._views import NodeViews

if TYPE_CHECKING:
    from ...bus.router import Router
    from .._io_thread import IOThread

__all__ = ["AUTH_MODES", "Gateway"]

#: "auto": a token is required beyond loopback; "none": clients without a token
#: accepted on any address, knowingly
AUTH_MODES: Final = ("auto", "none")
_BACKLOG: Final = 128

#: the websockets library's own log: silent (what a stranger can make it say is
#: not for the node's log; the gateway logs its refusals itself, rate-limited)
_QUIET = logging.getLogger("actorbus.jrep.websockets")
_QUIET.setLevel(logging.CRITICAL + 1)
_QUIET.propagate = False


class Gateway:
    """A port serving J.REP over WebSocket (see the module docstring).  Made by
    ``Bus.serve_jrep`` or by the node for each configured gateway."""

    def __init__(
        self,
        *,
        name: str,
        node_id: str,
        router: Router,
        selector: IOThread,
        peer_log: RateLimitedLog,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/jrep",
        settings: GatewaySettings | None = None,
        allowed_origins: tuple[str, ...] = (),
        token: Secret | None = None,
        auth: str = "auto",
        permissions: Permissions | None = None,
        static_dir: str | None = None,
        types: Mapping[str, type[Message] | str] | None = None,
        config_prefix: str | None = None,
        views: NodeViews | None = None,
    ) -> None:
        def key(name: str) -> str | None:
            return f"{config_prefix}{name}" if config_prefix else None

        if type(port) is not int or not 0 <= port <= 65535:
            raise ConfigError(
                f"jrep gateway {name!r}: port={port!r}; expected 1..65535, or 0 for any free port",
                key=key("port"),
            )
        if auth not in AUTH_MODES:
            raise ConfigError(
                f"jrep gateway {name!r}: auth={auth!r}; expected 'auto' (a token is required "
                "beyond loopback) or 'none' (accept clients without a token on any address)",
                key=key("auth"),
            )
        if not (isinstance(path, str) and path.startswith("/") and path != "/actorbus.js"):
            raise ConfigError(
                f"jrep gateway {name!r}: path={path!r}; expected an absolute URL path such as "
                "'/jrep' (not '/actorbus.js', where the client is served)",
                key=key("path"),
            )
        self.name = name
        self.node_id = node_id
        self.router = router
        self.selector = selector
        self.peer_log = peer_log
        self.host = host
        self.port = port
        self.path = path
        self.settings = settings or GatewaySettings()
        taken = {
            "/metrics": self.settings.metrics,
            "/inspect": self.settings.inspect_page,
            "/inspect.json": self.settings.inspect_page,
        }
        if taken.get(path):
            raise ConfigError(
                f"jrep gateway {name!r}: path={path!r} is where the gateway serves "
                f"{'its metrics' if path == '/metrics' else 'its inspect page'}; give the "
                "J.REP endpoint another path, such as '/jrep'",
                key=key("path"),
            )
        self.auth = auth
        self.config_prefix = config_prefix
        #: the rules of the peer named like the gateway, made to apply to every
        #: session (each session's party checks them)
        self.session_permissions: Permissions | None = None
        if permissions is not None:
            mine = permissions.for_peer(name).rules
            self.session_permissions = Permissions(
                [replace(rule, peers=("*",)) for rule in mine], source=permissions.source
            )
        #: subject -> message class for messages without a Type part
        self.types = _types(name, types or {}, key("types"))
        self.close_timeout = 2.0
        if self.settings.metrics:
            check_available(name, key("metrics"))
        self._http = HttpFront(
            name=name,
            path=path,
            allowed_origins=tuple(allowed_origins),
            token=token,
            static_dir=static_dir,
            log=peer_log,
            count=self._count,
            views=views,
            inspect_page=self.settings.inspect_page,
            metrics=self.settings.metrics,
        )
        self._lock = threading.Lock()
        self._sessions: dict[Session, asyncio.Event] = {}
        self._prefixes: dict[str, SessionBase] = {}
        self._number = 0
        self._counts: dict[str, int] = dict.fromkeys(
            ("sessions", "refused", "http", "received", "sent", "errors", "overflow", "expired"), 0
        )
        self._sock: socket.socket | None = None
        self._server: Server | None = None
        self._closed = False
        if static_dir is not None and not os.path.isdir(static_dir):
            raise ConfigError(
                f"jrep gateway {name!r}: static_dir={static_dir!r} is not a directory; give "
                "the directory whose files the gateway serves, or none",
                key=key("staticDir"),
            )

    def __repr__(self) -> str:
        return f"<Gateway {self.name!r} ws://{self.address}{self.path}>"

    @property
    def address(self) -> str:
        """``host:port`` the gateway listens on."""
        return endpoint(self.host, self.port)

    @property
    def url(self) -> str:
        """The WebSocket URL of the J.REP endpoint (``ws://host:port/path``)."""
        return f"ws://{self.address}{self.path}"

    @property
    def counters(self) -> GatewayStats:
        """The gateway's counters, sessions gone included."""
        with self._lock:
            c = dict(self._counts)
            sessions = list(self._sessions)
        received = c["received"] + sum(s.messages_in for s in sessions)
        sent = c["sent"] + sum(s.messages_out for s in sessions)
        errors = c["errors"] + sum(s.errors for s in sessions)
        return GatewayStats(
            sessions=c["sessions"],
            open_sessions=len(sessions),
            refused=c["refused"],
            http_requests=c["http"],
            received=received,
            sent=sent,
            errors=errors,
            overflows=c["overflow"],
            expired=c["expired"],
        )

    @property
    def sessions(self) -> tuple[Session, ...]:
        """The sessions open now."""
        with self._lock:
            return tuple(self._sessions)

    # ------------------------------------------------------------------ open

    def open(self) -> None:
        """Bind and listen (the caller's thread), then serve on the I/O thread."""
        try:
            infos = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except socket.gaierror as exc:
            raise ConfigError(
                f"jrep gateway {self.name!r}: cannot resolve host {self.host!r} "
                f"({exc.strerror}); give an address this machine has, e.g. 127.0.0.1",
                key=f"{self.config_prefix}host" if self.config_prefix else None,
            ) from exc
        family, _, _, _, address = infos[0]
        self._check_auth(str(address[0]))
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"jrep gateway {self.name!r}: cannot listen on "
                f"{endpoint(self.host, self.port)}: {exc.strerror or exc}; choose another "
                "port (0 picks a free one) or stop what holds it",
                key=f"{self.config_prefix}port" if self.config_prefix else None,
            ) from exc
        self._sock = sock
        self.port = sock.getsockname()[1]
        future = asyncio.run_coroutine_threadsafe(self._start(sock), self.selector.loop)
        try:
            future.result(10.0)
        except BaseException:
            sock.close()
            raise
        logger.info("jrep gateway {}: serving {}", self.name, self.url)

    async def _start(self, sock: socket.socket) -> None:
        s = self.settings
        self._server = await serve(
            self._handler,
            sock=sock,
            process_request=self._http.process_request,
            max_size=s.max_message_size,
            max_queue=16,
            open_timeout=s.handshake_timeout,
            ping_interval=None,
            close_timeout=self.close_timeout,
            compression=None,
            server_header=None,
            logger=_QUIET,
        )

    def _check_auth(self, bound: str) -> None:
        if self._http.token is not None:
            return
        try:
            loopback = ipaddress.ip_address(bound.split("%", 1)[0]).is_loopback
        except ValueError:
            loopback = False
        if loopback:
            return
        prefix = self.config_prefix
        if self.auth == "none":
            logger.warning(
                "jrep gateway {}: serves {} beyond this machine without a token ({}): any "
                "browser page or program that reaches the port may publish, subscribe and "
                "request as its clients may (docs/jrep.md, Security)",
                self.name,
                self.address,
                f"{prefix}auth=none" if prefix else "auth='none'",
            )
            return
        fix = (
            f"set {prefix}tokenFile to a file holding the token clients give (mode 600; "
            f"generate one with {GENERATE}), or {prefix}auth=none to accept clients without "
            "one knowingly"
            if prefix
            else "pass token= (bytes) or token_file= (a file holding it, mode 600; generate "
            f"one with {GENERATE}), or auth='none' to accept clients without one knowingly"
        )
        raise ConfigError(
            f"jrep gateway {self.name!r} would serve {self.address}, reachable from other "
            f"machines, without a token: anyone who reaches the port could use the bus; {fix} "
            "(docs/jrep.md, Security)",
            key=f"{prefix}tokenFile" if prefix else None,
        )

    # ------------------------------------------------------------ sessions

    async def _handler(self, websocket: ServerConnection) -> None:
        with self._lock:
            if self._closed:
                return
            self._number += 1
            number = self._number
            self._counts["sessions"] += 1
        session = Session(self, websocket, number)
        done = asyncio.Event()
        with self._lock:
            self._sessions[session] = done
        try:
            await session.run()
        finally:
            done.set()

    def new_prefix(self, session: SessionBase) -> str:
        """A new private prefix owned by ``session``."""
        prefix = new_private_subject()
        with self._lock:
            self._prefixes[prefix] = session
        return prefix

    def owner_of(self, subject: str) -> SessionBase | None:
        """The session whose private prefix ``subject`` is under, if any."""
        with self._lock:
            return self._prefixes.get(subject.split("/", 1)[0])

    def forget(self, session: Session) -> None:
        """(loop) ``session`` ended: keep its counters, free its prefix."""
        with self._lock:
            self._sessions.pop(session, None)
            self._prefixes.pop(session.reply_prefix, None)
            self._counts["received"] += session.messages_in
            self._counts["sent"] += session.messages_out
            self._counts["errors"] += session.errors

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def count_expired(self) -> None:
        self._count("expired")

    def count_overflow(self) -> None:
        self._count("overflow")

    # ------------------------------------------------------------------ close

    def close(self, timeout: float = 5.0) -> None:
        """Tell every client the node is closing (Disconnect), close the sessions
        and stop listening.  Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._sock is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._stop(timeout), self.selector.loop)
        try:
            future.result(timeout + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
        if self._sock.fileno() >= 0:
            self._sock.close()
        logger.info("jrep gateway {}: closed", self.name)

    async def _stop(self, timeout: float) -> None:
        with self._lock:
            sessions = dict(self._sessions)
        for session in sessions:
            session.shutdown("node closing")
        waits = [asyncio.ensure_future(done.wait()) for done in sessions.values()]
        if waits:
            await asyncio.wait(waits, timeout=timeout)
            for wait in waits:
                wait.cancel()
        server = self._server
        if server is not None:
            server.close()
            try:
                async with asyncio.timeout(timeout):
                    await server.wait_closed()
            except TimeoutError:
                logger.warning(
                    "jrep gateway {}: sessions still closing after {:g} s", self.name, timeout
                )


def _types(
    name: str, types: Mapping[str, type[Message] | str], key: str | None
) -> dict[str, type[Message]]:
    """The subject -> message class table, type names resolved."""
    table: dict[str, type[Message]] = {}
    for subject, cls in types.items():
        found: Any = lookup_type(cls) if isinstance(cls, str) else cls
        if not (isinstance(found, type) and issubclass(found, Message)):
            raise UsageError(
                f"jrep gateway {name!r}: types[{subject!r}] = {cls!r} is not a message class "
                "(or the type name of a registered one); import the module that defines it"
                + (f" ({key})" if key else "")
            )
        table[subject] = found
    return table
