"""A node's network side: I/O threads, services, links, the one-link rule.

Theory of operation
-------------------
:class:`NodeNet` belongs to one :class:`~actorbus.node.Bus` (``bus.net``).  It
owns

* the **I/O threads** (:class:`~actorbus.net._io_thread.IOThread`, what the
  configuration calls *selectors*): each runs one asyncio event loop, on its
  own thread or on an asyncio dispatcher's loop; every service and link is
  pinned to one for its whole life;
* the **services** (:class:`~actorbus.net.service.Service`, listening ports)
  and **links** (:class:`~actorbus.net.link.Link`, dialled or accepted);
* the **one-link rule**: at most one link per remote node.  A link claims its
  peer's node id when the logon names it (``LogonRequested`` on the accepting
  side, ``LogonAccepted`` on the dialling side).  A second link to a node that
  already has one is refused at logon with a reason.  When two nodes dial each
  other at the same time both links may reach logon before either knows of
  the other; then, on both nodes, the link dialled by the node with the
  smaller node id (plain string order) is kept and the other is closed.  The
  accepting side of a link that is already logged on always refuses the
  newcomer, so an established link is never replaced by a later dial.  A
  logon from a new run of a node (another run id) replaces the link held to
  the old run (:meth:`NodeNet.claim`).  Only an authenticated logon claims:
  the protocol reports a logon after the peer proved the link's secret
  (:mod:`actorbus.net._auth`), so a stranger who claims a linked node's id
  neither replaces its link nor holds the id (it is refused and counted in
  ``auth_failures``).

:meth:`NodeNet.close` logs off every link with the reason "node closing",
closes the services, stops the pollers and the loops and joins their threads.

Threads: the public methods may be called from any thread but the node's I/O
threads where they say so; the methods under "Used by links, connections and
services" are called by those, on their I/O threads (``accepted`` on the
service's)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import secrets
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._log import RateLimitedLog, logger
from ..bus.permissions import Permissions
from ..config.schema import (
    ConnectionConfig,
    SelectorConfig,
    ServiceConfig,
)
from ..config.settings import (
    ConnectionSettings,
    MulticastSettings,
    ServiceSettings,
    from_old_keywords,
)
from ..errors import ConfigError, Error, UsageError
from ._address import endpoint
from ._closing import ABORT_WAIT, STOP_HOOK_WAIT, close_links
from ._configured import (
    Label,
    SecretArg,
    connection_tls,
    credentials_of,
    multicast_key,
    permissions_of,
    service_tls,
)
from ._credentials import user_secret
from ._io_thread import IOThread, log_polling
from ._receipts import Receipts
from ._tls import check_client_context, check_server_context
from ._trim import TRIM_DELAY, fix_mmap_threshold, release_free_memory
from .jrep._configured import client_arguments, configured_gateway, make_client, make_gateway
from .jrep._views import NodeViews
from .link import Link
from .multicast.transport import MulticastChannel
from .service import Service

if TYPE_CHECKING:
    from ..actors.asyncio_dispatcher import AsyncioDispatcher
    from ..bus.message import Notification
    from ..bus.router import Router
    from ..node import Bus
    from ._connection import _Connection
    from .jrep.client import JrepClient
    from .jrep.gateway import Gateway

__all__ = ["DEFAULT_SELECTOR", "NodeNet"]

#: Name of the I/O thread (selector) made when the configuration names none.
DEFAULT_SELECTOR = "default"
#: What a peer (or a stranger at a service) can make the network side log goes
#: out at most once per this many seconds per service or link and kind (failed
#: authentications, refused logons, protocol errors, accept failures ...);
#: every one is counted, and the next line says how many were held back.
PEER_LOG_PERIOD = 10.0

T = TypeVar("T")


class NodeNet:
    """The network side of one bus (see the module docstring).

    Made by the bus when its configuration names services or connections, or
    on the first :meth:`Bus.listen` / :meth:`Bus.connect`."""

    def __init__(self, bus: Bus, views: NodeViews | None = None) -> None:
        self.bus = bus
        self.node_id: str = bus.node_id
        self.router: Router = bus.router
        #: This run of the node, sent in LOGON / LOGON_ACCEPT: a peer that sees
        #: it change knows the node restarted (receipts start afresh).
        self.run_id: str = secrets.token_hex(8)
        #: Per peer node: data frames written and read, for RECEIPT frames.
        self.receipts = Receipts()
        #: True once close() began: no reconnects, no new links.
        self.closing = False
        self._lock = threading.Lock()
        #: the I/O threads, by their configured (selector) name
        self._selectors: dict[str, IOThread] = {}
        self._default: str = DEFAULT_SELECTOR
        self._links: list[Link] = []
        self._services: list[Service] = []
        self._gateways: list[Gateway] = []
        self._jrep_clients: list[JrepClient] = []
        self._multicasts: list[MulticastChannel] = []
        self._peers: dict[str, _Connection] = {}
        #: client links that ended without retrying before they ever logged on
        self._failed: list[tuple[str, str]] = []
        #: called with (link name, reason) for each of those (CLI: stop the node)
        self._failure_listeners: list[Callable[[str, str], object]] = []
        self._started = False
        self._closed = False
        self._counter = 0
        #: a release of free memory is scheduled (see forget)
        self._trim_due = False
        #: throttles the warnings of failed authentications (a stranger may repeat them)
        #: rate-limited lines a peer can trigger (see PEER_LOG_PERIOD)
        self.peer_log = RateLimitedLog(PEER_LOG_PERIOD, schedule=self._later)
        #: what a gateway's inspect page and metrics read: the node's views
        #: (handed in by the node), with this side's gateways
        self.views = (
            replace(views, gateways=lambda: {g.name: g.counters for g in self.gateways})
            if views is not None
            else None
        )

    def __repr__(self) -> str:
        return f"<NodeNet {self.node_id} links={len(self._links)} services={len(self._services)}>"

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Start the I/O threads, then the configured services and connections."""
        if self._started:
            return
        self._started = True
        fix_mmap_threshold()  # large frames freed go back to the system (_trim)
        config = self.bus.config
        try:
            self._start_selectors(config.selectors)
            for service in config.services:
                self._listen_config(service)
            for connection in config.connections:
                self._connect_config(connection)
            for gateway in config.gateways:
                with self._config_errors():
                    self._open_gateway(configured_gateway(self, gateway))
            for client in config.jrep_clients:
                with self._config_errors():
                    self.connect_jrep(client.url, **client_arguments(client))
            for channel in config.multicasts:
                with self._config_errors():
                    self.join_multicast(
                        channel.name,
                        channel.settings,
                        config_prefix=f"actorbus.multicast.{channel.name}.",
                    )
        except BaseException:
            self.close()
            raise

    def _start_selectors(self, configs: Iterable[SelectorConfig]) -> None:
        configs = tuple(configs) or (SelectorConfig(name=DEFAULT_SELECTOR, is_default=True),)
        defaults = [c.name for c in configs if c.is_default]
        self._default = defaults[0] if defaults else configs[0].name
        first_on: dict[str, IOThread] = {}  # per shared dispatcher: its first I/O thread
        for c in configs:
            dispatcher = self._shared_dispatcher(c)
            first = first_on.get(c.dispatcher) if c.dispatcher is not None else None
            if first is not None and first.config.polling != c.polling:
                raise ConfigError(
                    f"selectors {first.name!r} and {c.name!r} share the event loop of "
                    f"dispatcher {c.dispatcher!r} but poll it differently ({first.name}: "
                    f"{first.config.polling}; {c.name}: {c.polling}); one loop polls one "
                    "way: give every selector of that dispatcher the same kind, spin_limit "
                    "and park_time_ns",
                    key=f"net.selector.{c.name}.type",
                )
            selector = IOThread(c.name, dispatcher, c)
            self._selectors[c.name] = selector
            selector.start(first.poller if first is not None else None)
            if dispatcher is not None:
                dispatcher.add_stop_hook(functools.partial(self._loop_stopping, selector))
            if c.dispatcher is not None and first is None:
                first_on[c.dispatcher] = selector
            if selector.polls:
                log_polling(selector, self.bus.runtime.dispatchers)

    def _shared_dispatcher(self, c: SelectorConfig) -> AsyncioDispatcher | None:
        """The asyncio dispatcher whose loop selector ``c`` shares, if it names one."""
        if c.dispatcher is None:
            return None
        dispatchers = self.bus.runtime.dispatchers
        dispatcher = dispatchers.get(c.dispatcher)
        if dispatcher is None:
            known = ", ".join(sorted(dispatchers))
            raise ConfigError(
                f"selector {c.name!r}: dispatcher={c.dispatcher!r} names no dispatcher; "
                f"this bus has {known}"
            )
        if not dispatcher.is_async:  # (the transports do not import the dispatchers)
            raise ConfigError(
                f"selector {c.name!r}: dispatcher {c.dispatcher!r} is a {dispatcher.kind.value} "
                "dispatcher, which has no event loop to share; name an asyncio dispatcher"
            )
        return cast("AsyncioDispatcher", dispatcher)

    def _later(self, delay: float, callback: Callable[[], object]) -> None:
        """Run ``callback`` in ``delay`` seconds on the default I/O thread (the
        peer log's summaries); nothing once the node closes."""
        selector = self._selectors.get(self._default)
        if selector is None or self.closing:
            return
        loop = selector.loop
        selector.call(loop.call_later, delay, callback)

    def _selector(self, name: str | None, what: str) -> IOThread:
        selector = self._selectors.get(name or self._default)
        if selector is None:
            known = ", ".join(sorted(self._selectors))
            raise UsageError(
                f"{what}: there is no selector named {name!r}; this node has {known} "
                "(configure it under actorbus.net.selectors)"
            )
        return selector

    def selector_named(self, name: str | None, what: str) -> IOThread:
        """The I/O thread named ``name`` (None: the default one); ``what`` names
        the service or gateway in the error when there is none."""
        return self._selector(name, what)

    def _listen_config(self, c: ServiceConfig) -> None:
        with self._config_errors():
            self.listen(
                c.port,
                c.host,
                name=c.name,
                settings=c.settings,
                config_prefix=f"actorbus.service.{c.name}.",
            )

    def _connect_config(self, c: ConnectionConfig) -> None:
        with self._config_errors():
            self.connect(
                c.host,
                c.port,
                name=c.name,
                settings=c.settings,
                config_prefix=f"actorbus.connection.{c.name}.",
            )

    @contextlib.contextmanager
    def _config_errors(self) -> Iterator[None]:
        """A ConfigError about a configured service or connection names the file."""
        try:
            yield
        except ConfigError as exc:
            source = self.bus.config.source
            if exc.path is not None or source is None:
                raise
            raise ConfigError(exc.detail, path=source, key=exc.key) from None

    # ----------------------------------------------------------- services, links

    def listen(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        name: str | None = None,
        settings: ServiceSettings | None = None,
        secret: SecretArg = None,
        tls: ssl.SSLContext | None = None,
        permissions: Permissions | None = None,
        config_prefix: str | None = None,
    ) -> Service:
        """Open a listening service; see :meth:`Bus.listen`.  ``config_prefix``
        ("actorbus.service.NAME.") makes errors name the properties keys."""
        self._check_open("listen()")
        s = from_old_keywords("listen", ServiceSettings, settings, {})
        label = Label("listen", "ServiceSettings", config_prefix)
        tls = service_tls(tls, s, label)
        if tls is not None:
            tls = check_server_context(tls, "listen(tls=...)")
        if name is None:
            name = f"service-{self._next()}"
        credentials = credentials_of(secret, s.secret_file, s.peer_secrets_file, label)
        selector = self._selector(s.service_selector, f"service {name!r}")
        conn_selector = self._selector(
            s.connection_selector or s.service_selector, f"service {name!r}"
        )
        service = Service(
            self,
            name=name,
            host=host,
            port=port,
            settings=s,
            selector=selector,
            connection_selector=conn_selector,
            credentials=credentials,
            permissions=permissions_of(permissions, s.permissions_file, label),
            config_prefix=config_prefix,
            tls=tls,
        )
        with self._lock:
            self._services.append(service)
        try:
            service.open()
        except BaseException:
            with self._lock:
                self._services.remove(service)
            raise
        return service

    def join_multicast(
        self,
        name: str | None = None,
        settings: MulticastSettings | None = None,
        *,
        secret: bytes | None = None,
        config_prefix: str | None = None,
    ) -> MulticastChannel:
        """Join a reliable multicast channel; see :meth:`Bus.join_multicast`."""
        self._check_open("join_multicast()")
        s = settings if settings is not None else MulticastSettings()
        label = Label("join_multicast", "MulticastSettings", config_prefix)
        key = multicast_key(secret, s.secret_file, label)
        if name is None:
            name = f"multicast-{self._next()}"
        channel = MulticastChannel(
            self.router,
            node_id=self.node_id,
            name=name,
            settings=s,
            secret=key,
            publish_system=self.publish,
        )
        channel.open()
        with self._lock:
            self._multicasts.append(channel)
        return channel

    @property
    def multicasts(self) -> tuple[MulticastChannel, ...]:
        """The multicast channels this node joined."""
        with self._lock:
            return tuple(self._multicasts)

    def serve_jrep(self, **kwargs: Any) -> Gateway:
        """Open a J.REP gateway; see :meth:`Bus.serve_jrep`."""
        self._check_open("serve_jrep()")
        if kwargs.get("name") is None:
            kwargs["name"] = f"jrep-{self._next()}"
        return self._open_gateway(make_gateway(self, **kwargs))

    def _open_gateway(self, gateway: Gateway) -> Gateway:
        with self._lock:
            self._gateways.append(gateway)
        try:
            gateway.open()
        except BaseException:
            with self._lock:
                self._gateways.remove(gateway)
            raise
        return gateway

    def connect_jrep(self, url: str, **kwargs: Any) -> JrepClient:
        """Federate with a node's J.REP gateway; see :meth:`Bus.connect_jrep`."""
        self._check_open("connect_jrep()")
        client = make_client(self, url, name=kwargs.pop("name", None) or url, **kwargs)
        self._jrep_clients.append(client)  # (one append: atomic; close() copies the list)
        client.start()
        return client

    @property
    def gateways(self) -> tuple[Gateway, ...]:
        with self._lock:
            return tuple(self._gateways)

    def connect(
        self,
        host: str,
        port: int,
        *,
        name: str | None = None,
        settings: ConnectionSettings | None = None,
        secret: SecretArg = None,
        tls: ssl.SSLContext | None = None,
        permissions: Permissions | None = None,
        config_prefix: str | None = None,
    ) -> Link:
        """Dial a remote node's service; see :meth:`Bus.connect`."""
        self._check_open("connect()")
        s = from_old_keywords("connect", ConnectionSettings, settings, {})
        label = Label("connect", "ConnectionSettings", config_prefix)
        tls = connection_tls(tls, s, label)
        if tls is not None:
            tls = check_client_context(tls, "connect(tls=...)")
        elif s.tls_server_name is not None:
            raise UsageError(
                f"{label('tls_server_name')}: {s.tls_server_name!r} without tls=: the name is "
                "checked against the service's TLS certificate; pass tls= too "
                "(actorbus.net.tls_client_context(ca_file)) or set tls_ca_file"
            )
        credentials = credentials_of(secret, s.secret_file, None, label)
        own = credentials.secret if credentials is not None else None
        if own is None and s.auth == "auto" and tls is None:
            # nothing configured: prove this user's secret, as its services check it
            own = user_secret(f"connection {name or endpoint(host, port)!r}")
        if type(port) is not int or not 0 < port <= 65535:
            raise UsageError(f"connect({host!r}, {port!r}): expected a port from 1 to 65535")
        if name is None:
            name = endpoint(host, port)  # "[::1]:7001" for an IPv6 host
        sel = self._selector(s.selector, f"connection {name!r}")
        link = Link(
            self,
            sel,
            s,
            name=name,
            initiator=True,
            host=host,
            port=port,
            bind_host=s.bind_host,
            bind_port=s.bind_port,
            reconnect=s.reconnect,
            reconnect_delay=float(s.reconnect_delay),
            connect_timeout=float(s.connect_timeout),
            credentials=own,
            permissions=permissions_of(permissions, s.permissions_file, label),
            tls=tls,
            tls_server_name=s.tls_server_name,
        )
        with self._lock:
            self._links.append(link)
        sel.call(link.start)
        return link

    @property
    def failed_links(self) -> tuple[tuple[str, str], ...]:
        """(name, reason) of every client link without reconnect whose dial
        failed, or whose connection ended before logging on (the peer refused
        its secret, TLS on one end only): it is closed and will not try again."""
        with self._lock:
            return tuple(self._failed)

    def on_link_failed(self, listener: Callable[[str, str], object]) -> None:
        """Call ``listener(name, reason)`` (on the link's I/O thread) for each
        client link without reconnect whose dial (or logon) fails from now on."""
        with self._lock:
            self._failure_listeners.append(listener)

    # ---------------------------------------- used by links, connections and services

    def link_failed(self, link: Link, reason: str) -> None:
        """(the link's loop) A client link without reconnect failed to dial or
        to log on."""
        with self._lock:
            self._failed.append((link.name, reason))
            listeners = list(self._failure_listeners)
        for listener in listeners:
            listener(link.name, reason)

    def accepted(self, service: Service, sock: Any, host: str, port: int, address: str) -> None:
        """(service loop) A service accepted ``sock``: make its link on the
        connection selector."""
        selector = service.connection_selector
        link = Link(
            self,
            selector,
            service.settings,
            name=f"{service.name}<-{address}",
            initiator=False,
            host=host,
            port=port,
            service=service,
            credentials=service.link_credentials,
            permissions=service.permissions,
            tls=service.tls,
        )
        with self._lock:
            closing = self.closing
            if not closing:
                self._links.append(link)
        if closing:
            sock.close()
            service.release(host)
            return
        if selector.on_loop_thread():
            link.adopt(sock)
        elif not selector.call(link.adopt, sock):
            sock.close()
            self.forget(link)  # (its service no longer counts it)

    def claim(self, connection: _Connection, peer: str, peer_run_id: str = "") -> str | None:
        """(the connection's loop) Claim ``peer`` for ``connection`` (the one-link
        rule); the refusal reason, or None.

        A logon whose run id differs from the one of the link already held to
        ``peer`` comes from a new run of that node (a restart, with its node id
        fixed by configuration): the held link is to a run that is gone (its end
        may not have noticed yet, without heartbeats maybe never), so the new
        link replaces it rather than being refused.  So does a logon of the same
        run (or any, once the kernel says the held connection is gone) while the
        held link does not read: a link paused by input back-pressure is not told
        that the peer reset the connection (as it does when its output queue
        goes over the limit), and would refuse the peer until it reads again.
        Only a logon that passed the link's authentication gets here, so this
        gives nobody a node id the secret did not already let them claim."""
        if peer == self.node_id:
            return f"node {peer!r} cannot link to itself (both ends have the same node id)"
        victim: _Connection | None = None
        reason = ""
        with self._lock:
            if self.closing:
                return "the node is closing"
            old = self._peers.get(peer)
            if (
                old is not None
                and not old.ended
                and peer_run_id
                and old.peer_run_id
                and old.peer_run_id != peer_run_id
            ):
                victim = old
                reason = (
                    f"node {peer!r} restarted (new run id {peer_run_id!r}); its new link "
                    "replaces this one"
                )
            elif (
                old is not None
                and not old.ended
                and old.reading_paused
                and (peer_run_id == old.peer_run_id or old.socket_reset())
            ):
                # The held link does not read (input back-pressure), so it has not
                # seen its connection end: the peer reset it (its output queue was
                # over the limit) and logs on again as the same run.
                victim = old
                reason = (
                    f"node {peer!r} logged on again while this link was not reading "
                    "(the peer reset it); its new link replaces this one"
                )
            elif old is not None and not old.ended:
                ours = connection.link.initiator
                if old.link.initiator == ours or (not ours and old.logged_on):
                    return (
                        f"node {peer!r} already has a link to node {self.node_id!r}; only one "
                        "link may exist between two nodes"
                    )
                # The two nodes dialled each other: both keep the link dialled by the
                # node with the smaller id.
                winner = min(self.node_id, peer)
                reason = (
                    f"nodes {self.node_id!r} and {peer!r} dialled each other; the link "
                    f"dialled by {winner!r} is kept"
                )
                if ours != (winner == self.node_id):
                    return reason
                victim = old
            self._peers[peer] = connection
        if victim is not None:
            selector = victim.link.selector
            if selector.on_loop_thread():
                victim.logoff(reason)
            else:
                selector.call(victim.logoff, reason)
        return None

    def release(self, connection: _Connection) -> None:
        """(the connection's loop) The connection ended: its claim goes."""
        peer = connection.peer
        if peer is None:
            return
        with self._lock:
            if self._peers.get(peer) is connection:
                del self._peers[peer]

    def forget(self, link: Link) -> None:
        """(the link's loop) The link is closed for good."""
        with self._lock:
            if link not in self._links:
                return
            self._links.remove(link)
            if link.service is not None:
                # under the same lock, so the service's counters never miss it
                link.service.retire(link)
            trim = not self._trim_due and not self.closing
            if trim:
                self._trim_due = True
        if trim:
            # A connection's buffers (its read buffer, a frame it held) are
            # freed when it ends, but the C allocator keeps freed memory for
            # reuse: give it back to the system, at most once per TRIM_DELAY.
            with contextlib.suppress(RuntimeError):  # the loop is closing
                link.selector.loop.call_later(TRIM_DELAY, self._trim)

    def _trim(self, again: bool = True) -> None:
        """(a loop) Return the memory the C allocator holds free to the system;
        once more TRIM_DELAY later (``again``): what a closed link left to
        work through — requests its peer queued for our actors, replies to
        it that are dropped — is freed after the first trim."""
        with self._lock:
            self._trim_due = False
        release_free_memory()
        if again and not self.closing:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                asyncio.get_running_loop().call_later(TRIM_DELAY, self._trim, False)

    def links_of(self, service: Service, read: Callable[[], T]) -> tuple[list[Link], T]:
        """The open links ``service`` accepted, and ``read()``, in one step: a link
        is either open here or retired to the service (``forget``), never both
        or neither."""
        with self._lock:
            return [link for link in self._links if link.service is service], read()

    def publish(self, message: Notification) -> None:
        """Publish a system notification on the bus (dropped when it is closing)."""
        try:
            self.bus.publish_system(message)
        except Error as exc:  # the bus is closing under us: nobody is listening
            logger.debug("node {}: system notification not published: {}", self.node_id, exc)

    @property
    def links(self) -> tuple[Link, ...]:
        """Every link that is not closed for good (dialled and accepted)."""
        with self._lock:
            return tuple(self._links)

    @property
    def services(self) -> tuple[Service, ...]:
        with self._lock:
            return tuple(self._services)

    def link_to(self, node_id: str) -> Link | None:
        """The link logged on (or logging on) with node ``node_id``, if any."""
        with self._lock:
            connection = self._peers.get(node_id)
        return connection.link if connection is not None else None

    @property
    def selectors(self) -> tuple[IOThread, ...]:
        """The node's I/O threads (the configured selectors: their own threads or
        shared loops), once started."""
        return tuple(self._selectors.values())

    def stats(self) -> dict[str, Any]:
        """Counters of every I/O thread (under "selectors", by configured name),
        service and link, for monitoring (any thread)."""
        return {
            "node": self.node_id,
            "selectors": {s.name: s.stats() for s in self.selectors},
            "services": {s.name: s.counters for s in self.services},
            "links": {link.name: link.counters for link in self.links},
            "gateways": {g.name: g.counters for g in self.gateways},
        }

    # ------------------------------------------------------------------ inside

    def _next(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _check_open(self, what: str) -> None:
        if self.closing:
            raise UsageError(f"{what} on node {self.node_id} whose network is closed")

    # ------------------------------------------------------------------ close

    async def _loop_stopping(self, selector: IOThread) -> None:
        """(loop) The asyncio dispatcher whose loop ``selector`` shares is stopping
        (a stop hook; :meth:`close` has usually run already and this finds nothing):
        close the services and links on the loop while it still runs, so the peers
        are told (a logoff, or at least a closed socket) instead of finding out by
        heartbeat timeout, and no socket is left open on a dead loop."""
        assert selector.dispatcher is not None
        why = f"dispatcher {selector.dispatcher.name!r}, whose event loop it runs on, was stopped"
        with self._lock:
            services = [s for s in self._services if s.selector is selector]
            links = [link for link in self._links if link.selector is selector]
        for service in services:
            await service.close_on_loop(why)
        if links:
            logger.warning(
                "node {}: {} link(s) closed because {}; stop the bus (Bus.close) rather "
                "than the dispatcher to close them in order",
                self.node_id,
                len(links),
                why,
            )
            await close_links(links, why, STOP_HOOK_WAIT)
        if selector.poller is not None:
            selector.poller.stop()

    def close(self, timeout: float = 5.0) -> None:
        """Log off every link ("node closing"), close the services, stop the I/O
        threads.  Waits at most about ``timeout`` seconds.  Idempotent."""
        for selector in self._selectors.values():
            if selector.on_loop_thread():
                raise UsageError(
                    "Bus.close() from a network I/O thread would wait for itself; close "
                    "the bus from another thread"
                )
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.closing = True
            services = list(self._services)
            links = list(self._links)
            gateways: list[Gateway | JrepClient] = [*self._jrep_clients, *self._gateways]
            multicasts = list(self._multicasts)
        for channel in multicasts:
            channel.close(timeout)
        for gateway in gateways:
            gateway.close(timeout)
        for service in services:
            service.close(timeout)
        by_selector: dict[IOThread, list[Link]] = {}
        for link in links:
            by_selector.setdefault(link.selector, []).append(link)
        futures = []
        for selector, group in by_selector.items():
            coro = close_links(group, "node closing", timeout)
            try:
                futures.append(asyncio.run_coroutine_threadsafe(coro, selector.loop))
            except RuntimeError:
                coro.close()
        for future in futures:
            try:
                future.result(timeout + 2 * ABORT_WAIT)
            except concurrent.futures.TimeoutError:
                future.cancel()
        for selector in self._selectors.values():
            selector.stop(timeout)
        self.peer_log.close()  # how many lines were held back
        with self._lock:
            self._links.clear()
            self._peers.clear()
