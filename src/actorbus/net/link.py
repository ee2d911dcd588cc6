"""TCP links: the asyncio shell around :class:`~actorbus.net.protocol.LinkProtocol`.

Theory of operation
-------------------
A :class:`Link` is the application's handle on the link to one remote node.  A
client link (made by :meth:`Bus.connect`) lives until it is closed and may
reconnect many times; a link accepted by a service lives for one connection.
Each TCP connection is a :class:`~actorbus.net._connection._Connection`: one
socket, one protocol object, one :class:`~actorbus.bus.party.RemoteParty` in
the router.  All of a connection's work runs on the event loop of the link's
I/O thread (:class:`~actorbus.net._io_thread.IOThread`, a "selector" in the
configuration); nothing here runs actor code, except that on a loop shared
with an asyncio dispatcher that dispatcher drains the mailboxes a read made
runnable at the end of the read (:mod:`actorbus.net._inbound`).

The parts, one module each:

* this module: the :class:`Link` handle — its status and counters, dialling,
  reconnecting with back-off, closing — and its settings;
* :mod:`~actorbus.net._connection`: one TCP connection (asyncio callbacks, the
  logon, timers, ending), assembled from
* :mod:`~actorbus.net._outbound`: what the router sends (the pending queue, the
  flush, direct writes from other threads, the output queue limit), and
* :mod:`~actorbus.net._inbound`: what the peer sends (protocol events into the
  router's ``RemoteParty``, input back-pressure).

**Ending.**  Whatever ends a connection (logoff either way, EOF, reset,
timeout, protocol error, queue limit, application or node close) goes through
``_Connection._end``: messages still pending are counted as dropped (or, for an
orderly close by this node, sent before the LOGOFF), the party is detached
(remote feeds go DOWN, forwarded requests end with ERROR replies), the
one-link claim is released, ``LinkLoggedOff`` is published, and the link
(:meth:`Link.connection_over`) decides whether to reconnect.

Threads: a :class:`Link`'s public methods and properties may be used from any
thread but its own I/O thread (the blocking ones would wait for themselves);
the methods under "For the node and the link's connections" run on the I/O
thread.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Final

from .._log import Throttle, logger, report
from ..bus.permissions import Permissions
from ..config.settings import LinkSettings
from ..errors import LinkClosedError, UsageError
from ._address import endpoint
from ._auth import KeyLookup
from ._connection import _Connection
from ._credentials import Credentials, Secret
from ._link_stats import LinkStats
from ._tls import handshake_failure

if TYPE_CHECKING:
    from ._io_thread import IOThread
    from .node import NodeNet
    from .service import Service

__all__ = ["Link", "LinkSettings", "LinkStats", "LinkStatus"]

#: A reconnecting link waits ``reconnect_delay`` after a loss, doubling after each
#: failed attempt up to this many times the delay (and never more than
#: :data:`MAX_RECONNECT_BACKOFF` seconds, unless the delay itself is longer).
RECONNECT_BACKOFF_FACTOR: Final = 10
#: A link reports its failed dials at most once per this many seconds.
DIAL_REPORT_INTERVAL = 30.0

#: Upper bound of the reconnect back-off, in seconds.
MAX_RECONNECT_BACKOFF: Final = 30.0


# ============================================================== status, stats


class LinkStatus(Enum):
    """Where a :class:`Link` is in its life."""

    #: dialling (client), or waiting for the connection to start (accepted).
    CONNECTING = "connecting"
    #: connected; the logon handshake is running.
    LOGGING_ON = "logging on"
    #: logged on: feeds and messages flow.
    LOGGED_ON = "logged on"
    #: the connection was lost; waiting ``reconnect_delay`` (with back-off) to dial again.
    RECONNECT_WAIT = "waiting to reconnect"
    #: closed for good.
    CLOSED = "closed"


@dataclass(slots=True)
class _Totals:
    """Link-level counts not kept by the protocol (loop thread, plus the lock)."""

    dropped: int = 0
    lost: int = 0
    connections: int = 0
    logons: int = 0
    reconnects: int = 0
    tls_failures: int = 0
    closed: LinkStats = field(default_factory=LinkStats)


# ===================================================================== the link


class Link:
    """The handle on a link to one remote node (see the module docstring).

    Made by :meth:`Bus.connect` (``initiator`` True) or by a service accepting a
    connection.  Thread-safe: read :attr:`status`, :attr:`peer_node` and
    :attr:`counters`, call :meth:`wait_logged_on` and :meth:`close` from any
    thread except the link's own I/O thread."""

    def __init__(
        self,
        net: NodeNet,
        selector: IOThread,
        settings: LinkSettings,
        *,
        name: str,
        initiator: bool,
        host: str,
        port: int,
        bind_host: str | None = None,
        bind_port: int = 0,
        # (a dialled link's come from its ConnectionSettings; an accepted one dials never)
        reconnect: bool = False,
        reconnect_delay: float = 0.0,
        connect_timeout: float = 0.0,
        service: Service | None = None,
        credentials: Secret | Credentials | None = None,
        permissions: Permissions | None = None,
        tls: ssl.SSLContext | None = None,
        tls_server_name: str | None = None,
    ) -> None:
        self.name = name
        self.initiator = initiator
        self.settings = settings
        #: what the logon proves (a dialled link: its secret) or checks (an
        #: accepted link: its service's credentials); None: no secret
        self.credentials = credentials
        #: what the peer may publish, subscribe, request and reply on (None:
        #: everything); handed to the router with each logon
        self.permissions = permissions
        #: the TLS context the connection speaks (a dialled link: a client context,
        #: an accepted one: its service's); None: plain TCP
        self.tls = tls
        #: (a dialled TLS link) the name the service's certificate must carry
        self.tls_server_name = tls_server_name if tls_server_name is not None else host
        #: the I/O thread the link runs on (configured as its "selector")
        self.selector = selector
        self.reconnect = reconnect
        self.reconnect_delay = reconnect_delay
        #: seconds a dial may go unanswered before it counts as failed (0: the OS's limit).
        self.connect_timeout = connect_timeout
        #: the service that accepted this link (None for a client link).
        self.service = service
        self._net = net
        self._loop = selector.loop
        self._host = host
        self._port = port
        self._local = (bind_host or "", bind_port) if (bind_host or bind_port) else None
        #: guards the status and the totals; ``_changed`` (its condition) is
        #: made by the first thread that waits for a status: an accepted
        #: link nobody waits on never holds one (a burst of connections
        #: allocates less that a survivor of it can keep)
        self._lock = threading.RLock()
        self._changed: threading.Condition | None = None
        self._status = LinkStatus.CONNECTING
        self._peer: str | None = None
        self._address = endpoint(host, port)
        self._totals = _Totals()
        self._connection: _Connection | None = None
        self._closing = False
        self._retry: asyncio.TimerHandle | None = None
        self._dialing: asyncio.Task[None] | None = None
        self._failures = 0
        self._last_reason: str | None = None
        #: failed dials are reported at most once per DIAL_REPORT_INTERVAL
        self._dial_reports = Throttle(DIAL_REPORT_INTERVAL)

    def __repr__(self) -> str:
        peer = f" peer={self._peer!r}" if self._peer else ""
        return f"<Link {self.name!r} {self._address}{peer} {self._status.value}>"

    # ------------------------------------------------------------- public view
    @property
    def status(self) -> LinkStatus:
        """Where the link is now."""
        return self._status

    @property
    def is_logged_on(self) -> bool:
        """True while the link is logged on (messages flow)."""
        return self._status is LinkStatus.LOGGED_ON

    @property
    def peer_node(self) -> str | None:
        """The remote node's id, once a logon told it (kept after the link drops)."""
        return self._peer

    @property
    def host(self) -> str:
        """The host dialled (a client link), or the peer's address (an accepted one)."""
        return self._host

    @property
    def address(self) -> str:
        """``host:port`` of the remote end."""
        return self._address

    @property
    def last_reason(self) -> str | None:
        """Why the last connection of this link ended (None while it never has)."""
        return self._last_reason

    @property
    def counters(self) -> LinkStats:
        """The link's counters, summed over all its connections."""
        with self._lock:
            totals = self._totals
            connection = self._connection
            live = connection.stats() if connection is not None else LinkStats()
            return (
                totals.closed
                + live
                + LinkStats(
                    dropped=totals.dropped,
                    lost=totals.lost,
                    connections=totals.connections,
                    logons=totals.logons,
                    reconnects=totals.reconnects,
                    tls_failures=totals.tls_failures,
                )
            )

    def wait_logged_on(self, timeout: float = 5.0) -> str:
        """Block until the link is logged on; return the peer's node id.

        Raises :class:`~actorbus.LinkClosedError` when the link closed for good
        first (with the reason), ``TimeoutError`` after ``timeout`` seconds."""
        with self._lock:
            ok = self._waiter().wait_for(
                lambda: self._status in (LinkStatus.LOGGED_ON, LinkStatus.CLOSED), timeout
            )
            if self._status is LinkStatus.LOGGED_ON:
                assert self._peer is not None
                return self._peer
            if ok:
                raise LinkClosedError(
                    f"link {self.name!r} to {self._address} closed before logging on: "
                    f"{self._last_reason}"
                )
            raise TimeoutError(
                f"link {self.name!r} to {self._address} not logged on after {timeout:g} s "
                f"(status {self._status.value}; last reason: {self._last_reason}); is the "
                "remote node listening, and does its address filter admit this host?"
            )

    def wait_logons(self, count: int, timeout: float = 5.0) -> None:
        """Block until the link has completed ``count`` logons in total and is
        logged on (reconnect tests use it); TimeoutError otherwise."""
        with self._lock:
            if not self._waiter().wait_for(
                lambda: self._totals.logons >= count and self._status is LinkStatus.LOGGED_ON,
                timeout,
            ):
                raise TimeoutError(
                    f"link {self.name!r}: {self._totals.logons} logons after {timeout:g} s, "
                    f"expected {count} (status {self._status.value}; last reason: "
                    f"{self._last_reason})"
                )

    def wait_closed(self, timeout: float = 5.0) -> str | None:
        """Block until the link is closed for good; return the last reason."""
        with self._lock:
            if not self._waiter().wait_for(lambda: self._status is LinkStatus.CLOSED, timeout):
                raise TimeoutError(
                    f"link {self.name!r} still {self._status.value} after {timeout:g} s"
                )
            return self._last_reason

    @property
    def closing(self) -> bool:
        """:meth:`close` was called (or the node is closing it): no more reconnects."""
        return self._closing

    def close(self, reason: str = "closed by the application", timeout: float = 5.0) -> None:
        """Log off (telling the peer ``reason``), stop reconnecting, and wait up to
        ``timeout`` seconds for the connection to close.  Idempotent."""
        if self.selector.on_loop_thread():
            raise UsageError(
                f"Link.close() on link {self.name!r} from its own I/O thread would wait "
                "for itself; call it from another thread"
            )
        done = threading.Event()
        if not self.selector.call(self.close_on_loop, reason, done.set):
            return  # the I/O thread already stopped: nothing is running
        if not done.wait(timeout):
            logger.warning(
                "link {}: not closed within {:g} s; it is aborted when the node closes",
                self.name,
                timeout,
            )

    # ------------------------------------------------- for the node (loop thread)

    def start(self) -> None:
        """(loop) Dial (client links); :class:`~actorbus.net.node.NodeNet` calls it
        once the link is listed."""
        if self.initiator:
            self._dial()

    def key(self) -> bytes | KeyLookup:
        """(loop) The protocol's ``secret``: this link's key, or the service's
        lookup by client node id; ``b""`` without a secret."""
        credentials = self.credentials
        if credentials is None:
            return b""
        if isinstance(credentials, Secret):
            return credentials.reveal()
        return credentials.key_for

    def adopt(self, sock: socket.socket) -> None:
        """(loop) Start a connection on a socket a service accepted."""
        self._dialing = self._loop.create_task(self._adopt_socket(sock))

    def close_on_loop(self, reason: str, done: Callable[[], object]) -> None:
        """(loop) :meth:`close`: log off (or stop dialling), then call ``done``
        once the socket is closed."""
        self._closing = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        connection = self._connection
        if connection is not None and not connection.ended:
            connection.on_closed.append(done)
            connection.logoff(reason)
            return
        if self._dialing is not None:
            self._dialing.cancel()
        if self._status is not LinkStatus.CLOSED:
            self._last_reason = self._last_reason or reason
            self._set_status(LinkStatus.CLOSED)
            self._net.forget(self)
        done()

    def abort_connection(self, done: Callable[[], object]) -> bool:
        """(loop) Reset the connection's socket if it is still open, and call
        ``done`` once it is closed; False (``done`` is not called) when no socket
        is open."""
        connection = self._connection
        if connection is None or connection.lost or connection.transport is None:
            return False
        connection.on_closed.append(done)
        connection.abort()
        return True

    # ------------------------------------- for the link's connections (loop thread)

    def connection_started(self, connection: _Connection, address: str) -> None:
        """A connection's socket is open (its logon starts)."""
        with self._lock:
            self._connection = connection
            self._address = address
            self._totals.connections += 1
        self._set_status(LinkStatus.LOGGING_ON)

    def connection_logged_on(self, peer: str) -> None:
        """The connection logged on with node ``peer``."""
        self._failures = 0
        with self._lock:
            self._peer = peer
            self._totals.logons += 1
            self._status = LinkStatus.LOGGED_ON
            if self._changed is not None:
                self._changed.notify_all()
        if self.service is not None:
            self.service.logged_on(self)

    def connection_over(self, connection: _Connection | None, reason: str) -> None:
        """A connection ended (or a dial failed: ``connection`` None): count, then
        reconnect or close.

        A connection this link dialled that ended before logging on (the peer
        refused the secret, a TLS service met a plain client, the logon timed
        out) failed as a refused dial does, and is reported the same way: at
        WARNING, at most once per DIAL_REPORT_INTERVAL, and, without reconnect,
        as a failed link (``actorbus run`` exits 1 naming it)."""
        with self._lock:
            if connection is not None:
                totals = self._totals
                totals.closed = totals.closed + connection.stats()
                if self._connection is connection:
                    self._connection = None
            self._last_reason = reason
        refused = (
            connection is not None
            and self.initiator
            and not connection.logged_on
            and not self._closing
            and not self._net.closing
        )
        if refused:
            self._report_dial_failure(reason)
        if self.reconnect and self.initiator and not self._closing and not self._net.closing:
            delay = self._backoff()
            self._failures += 1
            with self._lock:
                self._totals.reconnects += 1
            logger.bind(link=self.name).info(
                "link {}: reconnecting to {}:{} in {:.3f} s",
                self.name,
                self._host,
                self._port,
                delay,
            )
            self._set_status(LinkStatus.RECONNECT_WAIT)
            self._retry = self._loop.call_later(delay, self._dial)
            return
        self._set_status(LinkStatus.CLOSED)
        self._net.forget(self)
        if refused:
            self._net.link_failed(self, reason)

    def count_lost(self, n: int) -> None:
        """``n`` data messages written to an earlier connection never arrived."""
        if n:
            with self._lock:
                self._totals.lost += n

    def tls_failed(self, reason: str, report: bool = True) -> None:
        """(loop) A TLS handshake of this link failed (or the peer refused it by an
        alert right after): count it, and say why — a service's links at most
        once per the authentication report interval, as a stranger may repeat it."""
        with self._lock:
            self._totals.tls_failures += 1
        if not report:
            return
        where = f"service {self.service.name}" if self.service is not None else f"link {self.name}"
        self._net.peer_log.warning(
            (where, "tls"),
            "link {} ({}): {}; counted in tls_failures (docs/security.md)",
            self.name,
            self._address,
            reason,
        )

    def count_dropped(self, n: int) -> None:
        """``n`` data messages never reached the socket (any thread)."""
        if n:
            with self._lock:
                self._totals.dropped += n

    # ------------------------------------------------------------------ inside

    def _dial(self) -> None:
        self._retry = None
        if self._closing:
            return
        self._set_status(LinkStatus.CONNECTING)
        self._dialing = self._loop.create_task(self._connect())

    async def _connect(self) -> None:
        connection = _Connection(self, self._net)
        timeout = self.connect_timeout or None
        # with TLS the handshake is part of the dial (connect_timeout covers both)
        server_name = self.tls_server_name if self.tls is not None else None
        try:
            await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: connection,
                    self._host,
                    self._port,
                    local_addr=self._local,
                    ssl=self.tls,
                    server_hostname=server_name,
                ),
                timeout,
            )
        except OSError as exc:  # (TimeoutError included: ours or the OS's)
            if self.tls is not None and _in_handshake(exc):
                reason = f"cannot connect to {self._address}: {handshake_failure(exc, True)}"
                self.tls_failed(reason, report=False)
            else:
                reason = f"cannot connect to {self._address}: {_dial_failure(exc, timeout)}"
            self._report_dial_failure(reason)
            self.connection_over(None, reason)
            if not self.reconnect and not self._closing:
                self._net.link_failed(self, reason)
        except asyncio.CancelledError:
            self.connection_over(None, "closed while connecting")
            raise
        finally:
            self._dialing = None

    def _report_dial_failure(self, reason: str) -> None:
        """(loop) Say why a dial failed, at WARNING (visible by default), at most
        once per DIAL_REPORT_INTERVAL per link, with how many were held back."""
        held = self._dial_reports.allow("dial")
        if held is None:
            return
        more = f" ({held} more failed attempts since the last report)" if held else ""
        then = (
            f"retrying every {self.reconnect_delay:g} s or more (back-off)"
            if self.reconnect
            else "not retrying: the link is closed (set reconnect to retry)"
        )
        report("WARNING", f"link {self.name}: {reason}; {then}{more}", link=self.name)

    async def _adopt_socket(self, sock: socket.socket) -> None:
        connection = _Connection(self, self._net)
        # a peer that never finishes the TLS handshake is closed at the logon timeout
        timeout = (self.settings.logon_timeout or None) if self.tls is not None else None
        try:
            await self._loop.connect_accepted_socket(
                lambda: connection, sock, ssl=self.tls, ssl_handshake_timeout=timeout
            )
        except OSError as exc:
            sock.close()
            if self.tls is not None and _in_handshake(exc):
                reason = handshake_failure(exc, False)
                self.tls_failed(reason)
            else:
                reason = f"accepted connection failed: {exc.strerror or exc}"
            self.connection_over(None, reason)
        except asyncio.CancelledError:
            sock.close()
            self.connection_over(None, "closed while connecting")
            raise
        finally:
            self._dialing = None

    def _waiter(self) -> threading.Condition:
        """(under ``_lock``) The condition a status change notifies."""
        changed = self._changed
        if changed is None:
            changed = self._changed = threading.Condition(self._lock)
        return changed

    def _set_status(self, status: LinkStatus) -> None:
        with self._lock:
            self._status = status
            if self._changed is not None:
                self._changed.notify_all()

    def _backoff(self) -> float:
        base = self.reconnect_delay
        cap = max(base, min(base * RECONNECT_BACKOFF_FACTOR, MAX_RECONNECT_BACKOFF))
        return float(min(base * (2 ** min(self._failures, 32)), cap))


def _in_handshake(exc: OSError) -> bool:
    """A dial or accept with TLS failed in the handshake (not in the TCP connect):
    an SSL error, or the peer closing the connection while it ran."""
    return isinstance(exc, ssl.SSLError | ConnectionResetError | ConnectionAbortedError)


def _dial_failure(exc: OSError, timeout: float | None) -> str:
    """Why a dial failed and what to do about it, for its reason (logs,
    LinkClosedError).  A TimeoutError without errno is ours (``connect_timeout``);
    one with errno (ETIMEDOUT) is the operating system's."""
    if isinstance(exc, TimeoutError):
        waited = f"{timeout:g} s" if exc.errno is None and timeout else "the OS's limit"
        return (
            f"no answer within {waited}; check that the peer's host is up and that no "
            "firewall drops the connection (or raise connect_timeout)"
        )
    what = exc.strerror or exc
    if isinstance(exc, socket.gaierror):
        return f"{what}; check the host name (it does not resolve here)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{what}; nothing listens there: start the peer node's service or check the port"
    if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
        return f"{what}; the local address (bind_host/bind_port) is taken or not on this host"
    return f"{what}; check the address and the network path to it"
