"""Services: listening TCP ports that accept links from other nodes.

A :class:`Service` binds its socket on the caller's thread (so a bad address or
a port in use is an error raised by :meth:`Bus.listen` or at bus start), then
accepts on its *service selector* (an I/O thread,
:class:`~actorbus.net._io_thread.IOThread`).  Each accepted socket is checked
against the service's **positive address filter** — a list of hosts
(``"10.1.0.5"``) and endpoints (``"10.1.0.5:7000"``); when the list is not
empty, a peer matching no entry is closed at once and counted in ``refused`` —
and otherwise becomes a :class:`~actorbus.net.link.Link` on the *connection
selector*, which runs the logon.  ``ServiceStarted`` and ``ConnectionAccepted``
system notifications are published on the bus.

**Authentication.**  The logon of every link a service accepts proves the
service's secret (:class:`~actorbus.net._credentials.Credentials`; the protocol's
CHALLENGE/PROOF, :mod:`~actorbus.net._auth`).  A plain TCP service with no
secret configured checks this user's secret
(:func:`~actorbus.net._credentials.user_secret`): the same user's nodes link,
other users' processes do not.  Such a service may listen on a loopback
address only: one bound beyond it refuses to open, naming the setting to add,
unless its ``auth`` is ``"none"`` (unauthenticated links accepted knowingly;
one warning when it opens), which also drops this user's secret.  A service
that requires client certificates (mutual TLS) authenticates its peers' hosts
and may listen beyond loopback without a secret; a TLS service with no secret
checks none, as its clients with no secret prove none.

**TLS.**  A service with a TLS context (:mod:`~actorbus.net._tls`) hands it to
every link it accepts: the socket from ``accept()`` is wrapped by the event
loop (``connect_accepted_socket(ssl=...)``), which runs the handshake before
the link's logon starts.  A failed handshake ends that link only; it is logged
and counted in ``tls_failures``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._log import logger
from ..bus.permissions import Permissions
from ..bus.system import SYSTEM_SUBJECT, ConnectionAccepted, ServiceStarted
from ..config.settings import ServiceSettings
from ..errors import ConfigError, UsageError
from ._address import endpoint
from ._credentials import GENERATE, Credentials, user_secret
from ._link_stats import LinkStats
from .link import Link

if TYPE_CHECKING:
    from ._io_thread import IOThread
    from .node import NodeNet

__all__ = ["AUTH_MODES", "Service", "ServiceStats"]

#: Pause after accept() fails (out of file descriptors, ...) before trying again.
_ACCEPT_RETRY: Final = 0.1
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: A service's ``auth``: "auto" (a secret is required beyond loopback) or
#: "none" (links without a secret accepted on any address, knowingly).
AUTH_MODES: Final = ("auto", "none")


@dataclass(frozen=True, slots=True)
class ServiceStats:
    """Counters of one service."""

    #: Connections accepted (admitted by the address filter).
    accepted: int
    #: Connections closed at once because the address filter does not admit the peer.
    refused: int
    #: Links of this service open now.
    open_links: int
    #: The counters of every link this service accepted, open or closed, summed.
    links: LinkStats
    #: Connections closed at once because the service (``max_connections``) or
    #: their source address (``max_connections_per_host``) had as many open.
    over_limit: int = 0

    @property
    def auth_failures(self) -> int:
        """Logons refused because the peer did not prove the service's secret."""
        return self.links.auth_failures

    @property
    def tls_failures(self) -> int:
        """TLS handshakes that failed on links this service accepted."""
        return self.links.tls_failures


class Service:
    """A listening port (see the module docstring).  Made by :meth:`Bus.listen`
    or by the bus for each configured service."""

    def __init__(
        self,
        net: NodeNet,
        *,
        name: str,
        host: str,
        port: int,
        settings: ServiceSettings,
        selector: IOThread,
        connection_selector: IOThread,
        credentials: Credentials | None = None,
        permissions: Permissions | None = None,
        config_prefix: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if type(port) is not int or not 0 <= port <= 65535:
            raise UsageError(
                f"service {name!r}: port={port!r}; expected 1..65535, or 0 for any free port"
            )
        #: most connections open at once, and from one source address
        self.max_connections = settings.max_connections
        self.max_connections_per_host = settings.max_connections_per_host
        #: connections the kernel may hold waiting to be accepted (listen()'s backlog)
        self.accept_backlog = settings.accept_backlog
        auth = settings.auth
        if auth == "none" and credentials is not None:
            raise ConfigError(
                f"service {name!r}: auth='none' with a secret configured; a service with a "
                "secret authenticates every link: drop auth=none, or the secret",
                key=f"{config_prefix}auth" if config_prefix else None,
            )
        #: the secret configured for it (None: none)
        self.credentials = credentials
        #: what every logon must prove: ``credentials``, else (``auth`` "auto",
        #: plain TCP) this user's secret once open; None: no secret, only peers
        #: without one link
        self.link_credentials = credentials
        #: the TLS context of every link it accepts (None: plain TCP)
        self.tls = tls
        self.auth = auth
        #: what each peer may publish, subscribe, request and reply on (None: everything)
        self.permissions = permissions
        #: "actorbus.service.NAME." for a service from a properties file (errors name its keys)
        self.config_prefix = config_prefix
        self.name = name
        self.host = host
        self.settings = settings
        self.selector = selector
        self.connection_selector = connection_selector
        #: the bound port (the one the OS chose when 0 was asked for).
        self.port = port
        self.address_filter = settings.address_filter
        self._filter = _parse_filter(name, settings.address_filter)
        self._net = net
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._accepted = 0
        self._refused = 0
        self._retired = LinkStats()
        self._closed = False
        #: connections admitted and not closed for good: in all, and by source
        #: address those not logged on
        self._open = 0
        self._per_host: dict[str, int] = {}
        #: the links that logged on (no longer counted by source address)
        self._settled: set[Link] = set()
        self._over_limit = 0

    def __repr__(self) -> str:
        return f"<Service {self.name!r} {self.address}>"

    @property
    def mutual_tls(self) -> bool:
        """Every client must present a certificate the service's CA signed."""
        return self.tls is not None and self.tls.verify_mode is ssl.CERT_REQUIRED

    @property
    def address(self) -> str:
        """``host:port`` the service listens on."""
        return endpoint(self.host, self.port)

    @property
    def counters(self) -> ServiceStats:
        """Accepted and refused connections, and the summed counters of its links."""
        links, (total, accepted, refused, over) = self._net.links_of(self, self._totals)
        for link in links:
            total = total + link.counters
        return ServiceStats(accepted, refused, len(links), total, over)

    @property
    def links(self) -> tuple[Link, ...]:
        """The links this service accepted that are still open."""
        return tuple(link for link in self._net.links if link.service is self)

    def close(self, timeout: float = 5.0) -> None:
        """Stop listening.  Links already accepted stay up (close them, or the bus)."""
        if not self._begin_close():
            return
        assert self._sock is not None
        try:
            self.selector.run_coroutine(self._stop(), timeout)
        except RuntimeError:  # the loop is gone: nothing accepts any more
            pass
        if self._sock.fileno() >= 0:
            self._sock.close()
        logger.info("service {}: closed", self.name)

    # ------------------------------------------------------------- for the node

    def open(self) -> None:
        """Bind and listen (on the caller's thread), then accept on the service
        selector; :meth:`NodeNet.listen` calls it."""
        try:
            infos = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except socket.gaierror as exc:
            raise ConfigError(
                f"service {self.name!r}: cannot resolve host {self.host!r} ({exc.strerror}); "
                "give an address this machine has, e.g. 127.0.0.1 or 0.0.0.0"
            ) from exc
        family, _, _, _, address = infos[0]
        self._check_auth(str(address[0]))
        if self.credentials is None and self.auth == "auto" and self.tls is None:
            # nothing configured: not open to every process of this machine
            self.link_credentials = Credentials(user_secret(f"service {self.name!r}"))
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(self.accept_backlog)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"service {self.name!r}: cannot listen on {endpoint(self.host, self.port)}: "
                f"{exc.strerror or exc}; choose another port (0 picks a free one) or stop "
                "what holds it"
            ) from exc
        self._sock = sock
        self.port = sock.getsockname()[1]
        self.selector.run(self._start_accepting)
        logger.info("service {}: listening on {}", self.name, self.address)
        self._net.publish(ServiceStarted(SYSTEM_SUBJECT, service=self.name, address=self.address))

    def _check_auth(self, bound: str) -> None:
        """A service without a secret listens on loopback only, unless auth is "none"."""
        if self.credentials is not None or self.mutual_tls:
            return
        ip = _normalise(bound)
        if ip is not None and ip.is_loopback:
            return
        where = endpoint(self.host, self.port)
        prefix = self.config_prefix
        if self.auth == "none":
            set_by = f"{prefix}auth=none" if prefix else "auth='none'"
            logger.warning(
                "service {}: listens on {} beyond this machine without a secret ({}): any "
                "host that reaches the port may link as any node id, publish into any "
                "subscription and call any replier; set a secret (docs/security.md)",
                self.name,
                where,
                set_by,
            )
            return
        if prefix:
            fix = (
                f"set {prefix}secretFile to a file holding the secret every peer proves "
                f"(mode 600; generate one with {GENERATE}), or {prefix}auth=none to accept "
                "unauthenticated links knowingly"
            )
        else:
            fix = (
                "pass secret= (bytes) or secret_file= (a file holding it, mode 600; generate "
                f"one with {GENERATE}), or auth='none' to accept unauthenticated links knowingly"
            )
        raise ConfigError(
            f"service {self.name!r} would listen on {where}, reachable from other machines, "
            f"without a secret: any host that reaches the port could link as any node id; "
            f"{fix} (docs/security.md)",
            key=f"{prefix}secretFile" if prefix else None,
        )

    def logged_on(self, link: Link) -> None:
        """(the link's loop) ``link`` logged on: its peer proved who it is, so
        its connection no longer counts against ``max_connections_per_host``
        (which bounds the connections a source address holds *before* logging
        on: a stranger on the same address as a peer can never lock it out).
        It still counts against ``max_connections``."""
        key = _host_key(link.host)
        with self._lock:
            if link in self._settled:
                return
            self._settled.add(link)
            self._leave_host(key)

    def retire(self, link: Link) -> None:
        """(under the node's lock) ``link`` closed for good: keep its counters;
        its connection no longer counts against the connection limits."""
        counters = link.counters
        with self._lock:
            self._retired = self._retired + counters
            settled = link in self._settled
            self._settled.discard(link)
        self.release(link.host, per_host=not settled)

    def release(self, host: str, *, per_host: bool = True) -> None:
        """A connection from ``host`` admitted by :meth:`_admit` is gone
        (``per_host``: it had not logged on, so it still counted for ``host``)."""
        key = _host_key(host)
        with self._lock:
            self._open -= 1
            if per_host:
                self._leave_host(key)

    def _leave_host(self, key: str) -> None:
        """(under the lock) One connection from ``key`` no longer counts for it."""
        left = self._per_host.get(key, 0) - 1
        if left > 0:
            self._per_host[key] = left
        else:
            self._per_host.pop(key, None)

    async def close_on_loop(self, why: str) -> None:
        """(the service selector's loop) Stop listening, from the loop itself."""
        if self._begin_close():
            await self._stop()
            logger.info("service {}: closed ({})", self.name, why)

    # ------------------------------------------------------------------ inside

    def _totals(self) -> tuple[LinkStats, int, int, int]:
        """The retired links' counters, accepted, refused, over the connection
        limits (read under the node's lock)."""
        with self._lock:
            return self._retired, self._accepted, self._refused, self._over_limit

    def _start_accepting(self) -> None:
        self._task = self.selector.loop.create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        listener = self._sock
        assert listener is not None
        while True:
            try:
                sock, peer = await self._accept_one(loop, listener)
            except OSError as exc:
                # out of file descriptors (EMFILE) repeats every retry: said once a period
                self._net.peer_log.warning(
                    (self.name, "accept"),
                    "service {}: accept failed ({}); trying again every {:g} s (too many "
                    "open files: raise the limit, ulimit -n, or close idle links)",
                    self.name,
                    exc.strerror or exc,
                    _ACCEPT_RETRY,
                )
                await asyncio.sleep(_ACCEPT_RETRY)
                continue
            self._admit(sock, peer)

    @staticmethod
    async def _accept_one(
        loop: asyncio.AbstractEventLoop, listener: socket.socket
    ) -> tuple[socket.socket, Any]:
        """One accepted connection (a seam for tests: accept failing at will)."""
        return await loop.sock_accept(listener)

    def _admit(self, sock: socket.socket, peer: Any) -> None:
        host, port = str(peer[0]), int(peer[1])
        address = endpoint(host, port)
        if self._filter and not self._allowed(host, port):
            with self._lock:
                self._refused += 1  # counted before the peer can see the close
            sock.close()
            self._net.peer_log.warning(
                (self.name, "filtered"),
                "service {}: refused a connection from {}: not in the address filter {}",
                self.name,
                address,
                ", ".join(self.address_filter),
            )
            return
        key = _host_key(host)
        with self._lock:
            over = self._over(key)
            if over is None:
                self._accepted += 1
                self._open += 1
                self._per_host[key] = self._per_host.get(key, 0) + 1
            else:
                self._over_limit += 1  # counted before the peer can see the close
        if over is not None:
            sock.close()
            self._net.peer_log.warning(
                (self.name, "over"),
                "service {}: closed a connection from {} at once: {}; raise the limit if "
                "the peers are legitimate, else they may be an attack (over_limit counts "
                "them; docs/security.md)",
                self.name,
                address,
                over,
            )
            return
        # (DEBUG: the link's logon or close line says it at INFO, with its address)
        self._net.peer_log.debug(
            (self.name, "accepted"), "service {}: accepted a connection from {}", self.name, address
        )
        self._net.publish(
            ConnectionAccepted(SYSTEM_SUBJECT, service=self.name, remote_address=address)
        )
        self._net.accepted(self, sock, host, port, address)

    def _over(self, key: str) -> str | None:
        """(under the lock) Why one more connection from ``key`` is over a limit, or None."""
        if self._open >= self.max_connections:
            return f"{self._open} connections are open, max_connections={self.max_connections}"
        from_host = self._per_host.get(key, 0)
        if from_host >= self.max_connections_per_host:
            return (
                f"{from_host} connections from {key} are open and not logged on, "
                f"max_connections_per_host={self.max_connections_per_host}"
            )
        return None

    def _allowed(self, host: str, port: int) -> bool:
        ip = _normalise(host)
        if ip is None:
            return False
        for allowed_ip, allowed_port in self._filter:
            if ip == allowed_ip and (allowed_port is None or allowed_port == port):
                return True
        return False

    def _begin_close(self) -> bool:
        """Mark the service closed; True when this call did and a socket is open."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
        return self._sock is not None

    async def _stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()


def _host_key(host: str) -> str:
    """The source address ``host`` counts against (IPv4-mapped IPv6 as IPv4)."""
    ip = _normalise(host)
    return str(ip) if ip is not None else host


def _normalise(host: str) -> IPAddress | None:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _parse_filter(name: str, entries: Iterable[str]) -> list[tuple[IPAddress, int | None]]:
    """``["h", "h:port", "[v6]:port", "v6"]`` -> (address, port or None) pairs;
    host names are resolved once, here."""
    parsed: list[tuple[IPAddress, int | None]] = []
    for raw in entries:
        entry = raw.strip()
        host, port_text = entry, ""
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else rest
        elif entry.count(":") == 1:
            host, _, port_text = entry.partition(":")
        port: int | None = None
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
                raise ConfigError(
                    f"service {name!r}: address filter entry {raw!r} has port {port_text!r}; "
                    "expected a host or host:port with a port from 1 to 65535"
                )
            port = int(port_text)
        ip = _normalise(host)
        if ip is not None:
            parsed.append((ip, port))
            continue
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ConfigError(
                f"service {name!r}: address filter entry {raw!r} names host {host!r}, which "
                f"does not resolve ({exc.strerror}); give an IP address or a known host name"
            ) from exc
        for info in infos:
            resolved = _normalise(str(info[4][0]))
            if resolved is not None and (resolved, port) not in parsed:
                parsed.append((resolved, port))
    return parsed
