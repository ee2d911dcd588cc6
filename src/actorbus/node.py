"""The :class:`Bus`: one node of the message bus — actors, router, links.

A ``Bus`` is an object, not a global: a process usually has one (the CLI and the
demos build it from a properties file) but tests make several and link them
over loopback TCP.  It owns

* an :class:`~actorbus.actors.ActorRuntime` — dispatchers, timers, lifecycle;
* a :class:`~actorbus.bus.router.Router` — feeds, feed state, routing;
* the node's links (services and connections), when any are configured.

For convenience, :meth:`Bus.current` returns the one open bus when there is
exactly one; an actor that opens a feed without being registered is
registered with it.  Nothing requires it.

Code that is not an actor uses :meth:`inbox` (synchronous receive),
:meth:`publisher` (publish from a script), :meth:`request_all` (blocking
request that collects every reply), and :meth:`arequest` / :meth:`areplies`
(the asyncio forms).

:meth:`topics` lists the topics and queue groups in use on this node and every
node linked to it (:mod:`actorbus.bus.discovery`): each bus advertises a
replier for :class:`~actorbus.bus.discovery.DiscoverTopics` on the reserved
system subject, next to its system publishers and its inspection replier
(:mod:`actorbus._system_feeds`), and answers its peers with its own feeds.
"""

from __future__ import annotations

import asyncio
import enum
import os
import queue
import socket
import ssl
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from . import _gc, inspection
from ._system_feeds import SystemFeeds
from .actors import ActorRuntime
from .actors._context import bus_runtimes
from .actors.dispatcher import hold_wakes, release_wakes
from .actors.recording import ActorRecorder, RecordingFile
from .bus import discovery
from .bus.discovery import DiscoverTopics, Topic
from .bus.feeds import PublishFeed, RequestFeed, SubscribeFeed, _direct
from .bus.history import FeedHistory, RequestLatencies
from .bus.inbox import Inbox
from .bus.message import Message, MessageKey, Notification, Reply, Request
from .bus.owner import checked_key, refuse_blocking_deadlock, subscription_key
from .bus.permissions import Permissions
from .bus.queues import QueueGroup
from .bus.router import Router
from .bus.scope import FeedState, Scope
from .bus.subjects import Wildcard, new_private_subject
from .bus.system import SYSTEM_SUBJECT
from .config.schema import BusConfig, node_id_problem
from .config.settings import (
    ConnectionSettings,
    GatewaySettings,
    JrepClientSettings,
    LinkSettings,
    MulticastSettings,
    ServiceSettings,
    from_old_keywords,
)
from .errors import RequestError, UsageError
from .inspection import NodeSnapshot

if TYPE_CHECKING:
    from .net.jrep import Gateway, JrepClient
    from .net.jrep._views import NodeViews
    from .net.link import Link
    from .net.multicast.transport import MulticastChannel
    from .net.service import Service

__all__ = ["Bus"]

N = TypeVar("N", bound=Notification)
Q = TypeVar("Q", bound=Request)


class _FromConfig(enum.Enum):
    """The default of ``Bus(gc_threshold=...)``: use ``config.gc_threshold``."""

    FROM_CONFIG = "config.gc_threshold"

    def __repr__(self) -> str:
        return self.value


_FROM_CONFIG: Final = _FromConfig.FROM_CONFIG


def _make_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _check_node_id(node_id: str | None, where: str) -> str | None:
    """``node_id`` if it is a valid node id; None and "" mean "not given"."""
    if node_id is None or node_id == "":
        return None
    problem = node_id_problem(node_id) if type(node_id) is str else "expected a str"
    if problem is not None:
        raise UsageError(
            f"{where} = {node_id!r:.80}: {problem}; use a short id unique to this node, "
            "or leave it out for a generated one (host-pid-random)"
        )
    return node_id


class Bus:
    """One node of the bus.  Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        config: BusConfig | None = None,
        *,
        node_id: str | None = None,
        gc_threshold: int | Literal[_FromConfig.FROM_CONFIG] | None = _FROM_CONFIG,
        timer_clock: Callable[[], int] | None = None,
    ) -> None:
        """A bus from ``config`` (the default bus if None), named ``node_id`` (else
        ``config.node_id``, the ``nodeId`` key of a properties file, else a
        generated ``host-pid-random``; an id that is not 1..255 UTF-8 bytes of
        text raises :class:`~actorbus.errors.UsageError`).  While it is open the
        interpreter's young-generation GC threshold is at least ``gc_threshold``
        (None: leave the garbage collector's settings alone).  Left out, it is
        ``config.gc_threshold`` (the ``gc.threshold`` key of a properties file,
        10,000 by default); given, an int or None, it overrides the config.  A
        value that is neither an int >= 1 nor None raises
        :class:`~actorbus.errors.UsageError` before anything starts.  See
        :mod:`actorbus._gc` and docs/bus.md.  ``timer_clock`` (monotonic
        nanoseconds; a replay's fake clock) replaces the timer thread: actors'
        timers run on that clock and fire when ``runtime.timers.fire_due()`` is
        called (docs/replay.md)."""
        self.config = config if config is not None else BusConfig()
        if gc_threshold is _FROM_CONFIG:
            threshold = _gc.check_threshold(self.config.gc_threshold, "config.gc_threshold")
        else:
            threshold = _gc.check_threshold(gc_threshold)
        self._gc_held = False
        self.node_id = (
            _check_node_id(node_id, "Bus(node_id=...)")
            or _check_node_id(self.config.node_id, "config.node_id")
            or _make_node_id()
        )
        #: each key's last UP/DOWN changes (the inspect page shows them)
        self.feed_history = FeedHistory()
        self.router = Router(
            schedule=self._schedule,
            hold_deliveries=hold_wakes,
            release_deliveries=release_wakes,
            feed_changed=self.feed_history.record,
        )
        self.router.node_id = self.node_id
        self.runtime = ActorRuntime(
            self.config, owner=self, router=self.router, timer_clock=timer_clock
        )
        self._recordings: list[RecordingFile] = []
        self._closed = False
        #: the system publishers, the discovery and the inspection repliers
        self._system = SystemFeeds(
            self.router,
            self.node_id,
            lambda diagram, fmt: self.inspect(diagram=diagram, diagram_format=fmt),
        )
        self.net: Any = None
        c = self.config
        if c.services or c.connections or c.gateways or c.jrep_clients or c.multicasts:
            self._start_net()
        if threshold is not None:
            _gc.hold(threshold)
            self._gc_held = True

    # ------------------------------------------------------------------ factory
    @classmethod
    def from_properties(cls, path: str | os.PathLike[str], *, node_id: str | None = None) -> Bus:
        """A bus configured by a ``.properties`` file (docs/configuration.md), its ``gc.threshold``
        key included."""
        from .config import load_config

        return cls(load_config(path), node_id=node_id)

    @classmethod
    def from_env(cls, var: str = "ACTORBUS_CONFIG") -> Bus:
        """A bus configured by the file the environment variable names (default bus if unset)."""
        from .config import config_from_env

        return cls(config_from_env(var))

    @classmethod
    def current(cls) -> Bus | None:
        """The single open bus of this process, or None if there are none or several."""
        runtime = bus_runtimes.single()
        bus = runtime.owner if runtime is not None else None
        return bus if isinstance(bus, Bus) and not bus._closed else None

    # ------------------------------------------------------------- lifecycle
    def register(
        self,
        actor: Any,
        dispatcher: str | None = None,
        startup: Callable[[], None] | None = None,
        shutdown: Callable[[], None] | None = None,
    ) -> None:
        """Register ``actor`` (pinned to ``dispatcher``, else by class, else the default)."""
        self.runtime.register(actor, dispatcher=dispatcher, startup=startup, shutdown=shutdown)

    def record(
        self, actor: Any, path: str | os.PathLike[str], *, kwargs: Mapping[str, Any] | None = None
    ) -> RecordingFile:
        """Record ``actor`` to the file ``path``: every task delivered to it (messages,
        feed states, requests, replies, cancels, timer firings, startup, shutdown)
        and what it published, requested and replied, until the returned recording is closed (``close()``) or the
        bus closes.  Call it before the actor's startup (it is registered first if
        it is not); ``kwargs``, the actor's constructor keywords, let
        ``actorbus replay`` make a fresh one (docs/replay.md)."""
        self.runtime.ensure_registered(actor)
        recording = RecordingFile(path, actor, kwargs)
        try:
            self.runtime.watch(actor, ActorRecorder(actor, recording.write))
        except BaseException:
            recording.close()
            raise
        self._recordings.append(recording)
        return recording

    def startup(self, actors: Any) -> Any:
        """Run ``startup()`` of one actor or several (registering them if needed);
        returns a completion to ``wait(timeout)`` on."""
        return self.runtime.startup(actors)

    def startup_all(self) -> Any:
        """Start every registered actor not yet started."""
        return self.runtime.startup_all()

    def shutdown(self, actors: Any) -> Any:
        """Run ``shutdown()`` of one actor or several."""
        return self.runtime.shutdown(actors)

    def shutdown_all(self) -> Any:
        """Stop every started actor."""
        return self.runtime.shutdown_all()

    def _schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> Any:
        return self.runtime.timers.call_later(delay, fn, *args)

    def close(self, timeout: float = 5.0) -> None:
        """Stop actors, links, dispatchers and timers.  Idempotent.

        Raises the ``KeyboardInterrupt`` or ``SystemExit`` that actor code raised
        if no :func:`~actorbus.wait_for_stop` raised it yet (the failure
        contract), once everything is closed."""
        if self._closed:
            return
        self._closed = True
        bus_runtimes.discard(self.runtime)  # no longer the single open bus
        try:
            if self.net is not None:
                self.net.close(timeout)
            self.runtime.close(timeout)
            self.router.peer_log.close()  # how many peer lines were held back
        finally:
            for recording in self._recordings:
                recording.close()
            if self._gc_held:
                self._gc_held = False
                _gc.release()

    @property
    def is_closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Bus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Bus {self.node_id}{' closed' if self._closed else ''}>"

    # --------------------------------------------------------- system events
    def publish_system(self, message: Notification) -> None:
        """Publish one of the system subject's notifications (``actorbus.bus.system``:
        link and service events); for the node's transports, which own them."""
        self._system.publish(message)

    # ---------------------------------------------------- non-actor helpers
    def inbox(
        self,
        message_class: type[N],
        subject: str | Wildcard,
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[N], bool] | None = None,
        queue: str | QueueGroup | None = None,
        discoverable: bool = True,
    ) -> Inbox[N]:
        """Subscribe synchronously: ``inbox.receive(timeout)`` returns messages.
        ``subject`` may be a :class:`Wildcard`; ``queue`` joins a queue group;
        ``discoverable=False`` keeps it out of discovery (:meth:`topics`)."""
        key, wildcard = subscription_key(message_class, subject)
        feed: SubscribeFeed[N] = SubscribeFeed(
            self.router,
            None,
            key,
            scope,
            condition=condition,
            wildcard=wildcard,
            queue=queue,
            discoverable=discoverable,
        )
        return Inbox(feed)

    def private_topic(self) -> str:
        """A new private subject: a generated name starting with ``.``, which no
        wildcard matches and discovery never lists.  Hand it to the receivers
        you mean (in a request, say) and publish on it."""
        return new_private_subject()

    def publisher(
        self,
        message_class: type[N],
        subject: str,
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        on_status: Callable[[FeedState, PublishFeed[N]], object] | None = None,
        up: bool = True,
        discoverable: bool = True,
        on_congestion: Callable[[bool, PublishFeed[N]], object] | None = None,
    ) -> PublishFeed[N]:
        """An advertised publish feed for code that is not an actor (declared UP
        unless ``up=False``; ``discoverable=False`` keeps it out of discovery,
        :meth:`topics`).  ``on_status`` and ``on_congestion`` run on whichever
        thread changed the state (a link's I/O thread for congestion), so they
        must be thread-safe and quick; ``feed.wait_ready()`` waits for a
        congested link to drain."""
        key = checked_key(message_class, subject, Notification)
        feed: PublishFeed[N] = PublishFeed(self.router, None, key, scope, discoverable=discoverable)
        feed.status_callback(on_status if on_status is not None else _ignore)
        if on_congestion is not None:
            feed.congestion_callback(on_congestion)
        feed.advertise()
        if up:
            feed.update_feed_state(FeedState.UP)
        return feed

    def request_all(
        self,
        message: Request,
        timeout: float,
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        route_to: Iterable[str] | None = None,
    ) -> list[Reply]:
        """Send ``message`` and block until every replier finished or ``timeout``
        seconds passed; returns the replies in arrival order.  On timeout the last
        reply is an ERROR reply "timed out after …".  Raises RequestError at once
        when no replier is up, and UsageError instead of blocking when called on
        the only thread of a dispatcher a replier of the key is pinned to (that
        replier could not answer until this call returned).  ``route_to`` (node
        ids) sends it along that source route to the repliers of the route's last
        node (:meth:`RequestFeed.request`; docs/routing.md): an undeliverable
        route ends with an ERROR reply naming the node and the reason."""
        if isinstance(message, Request):
            refuse_blocking_deadlock(self.router, MessageKey.of(message), None, "request_all")
        replies: queue.SimpleQueue[tuple[int, Reply]] = queue.SimpleQueue()
        feed = self._temporary_requestor(message, scope, lambda r, rep: replies.put((r, rep)))
        try:
            feed.request(message, timeout=timeout, route_to=route_to)
            out: list[Reply] = []
            while True:
                try:
                    remaining, reply = replies.get(timeout=timeout + 30.0)
                except queue.Empty:  # pragma: no cover - the request timeout ends it first
                    raise TimeoutError(f"request_all({message!r}) got no end of replies") from None
                out.append(reply)
                if remaining == 0:
                    return out
        finally:
            feed.close()

    async def arequest(
        self, message: Request, timeout: float, *, scope: Scope = Scope.LOCAL_AND_REMOTE
    ) -> list[Reply]:
        """``await`` every reply (asyncio form of :meth:`request_all`)."""
        return [reply async for reply in self.areplies(message, timeout, scope=scope)]

    async def areplies(
        self, message: Request, timeout: float, *, scope: Scope = Scope.LOCAL_AND_REMOTE
    ) -> AsyncIterator[Reply]:
        """Iterate over replies as they stream in; ends when the request completes
        (or times out with an ERROR reply)."""
        loop = asyncio.get_running_loop()
        replies: asyncio.Queue[tuple[int, Reply]] = asyncio.Queue()

        def deliver(remaining: int, reply: Reply) -> None:
            loop.call_soon_threadsafe(replies.put_nowait, (remaining, reply))

        feed = self._temporary_requestor(message, scope, deliver)
        try:
            feed.request(message, timeout=timeout)
            while True:
                remaining, reply = await replies.get()
                yield reply
                if remaining == 0:
                    return
        finally:
            feed.close()

    def _temporary_requestor(
        self, message: Request, scope: Scope, deliver: Callable[[int, Reply], None]
    ) -> RequestFeed[Any]:
        if not isinstance(message, Request):
            raise UsageError(f"expected a Request message, found {message!r}")
        # short-lived: discovery does not list it
        feed: RequestFeed[Any] = RequestFeed(
            self.router, None, MessageKey.of(message), scope, post=_direct, discoverable=False
        )
        feed.reply_callback(lambda remaining, reply, handle: deliver(remaining, reply))
        feed.status_callback(_ignore)
        feed.subscribe()
        return feed

    # ------------------------------------------------------------- discovery
    def topics(self, timeout: float = 2.0, *, scope: Scope | None = None) -> list[Topic]:
        """The topics and queue groups in use on this node and on every node
        linked to it: one :class:`~actorbus.bus.discovery.Topic` row per node,
        message type, subject (or wildcard pattern), role, scope and queue group,
        with how many feeds it stands for and how many are UP; sorted.  With
        ``scope``, only the feeds of that scope.

        This node's rows are read at once; the linked nodes' come from one
        request to every linked node's discovery replier (each answers for its
        own feeds only), so it blocks until every linked node answered or
        ``timeout`` seconds passed: a node that does not answer in time is
        simply missing from the list, as is a node running a version without
        discovery.  Nodes linked to a linked node but not to this one are not
        asked (links do not forward).  Never listed: feeds opened with
        ``discoverable=False``, private subjects (``.``-prefixed), system feeds,
        and the short-lived requestors of :meth:`request_all` and its kin.

        Raises :class:`~actorbus.errors.UsageError` for a timeout that is not a
        number of seconds > 0, a scope that is not a Scope, or a closed bus."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise UsageError(
                f"topics(timeout={timeout!r}): expected seconds > 0 (how long to wait for "
                f"the linked nodes' answers)"
            )
        if scope is not None and not isinstance(scope, Scope):
            raise UsageError(
                f"topics(scope={scope!r}): expected a Scope (Scope.LOCAL_ONLY, ...) or None "
                f"for every scope"
            )
        if self._closed:
            raise UsageError(f"topics() on {self!r}: the bus is closed; make a new Bus")
        local = discovery.local_topics(self.router, self.node_id, scope=scope)
        request = DiscoverTopics(SYSTEM_SUBJECT, scope=scope.name if scope is not None else None)
        try:
            replies = self.request_all(request, timeout, scope=Scope.REMOTE_ONLY)
        except RequestError:  # no linked node has a discovery replier up
            replies = []
        return discovery.merge(replies, local)

    # ------------------------------------------------------------ inspection
    def inspect(
        self, *, diagram: str | None = None, diagram_format: str = "mermaid"
    ) -> NodeSnapshot:
        """A snapshot of this node's inside (:class:`~actorbus.inspection.NodeSnapshot`):
        its actors with their mailboxes and state machines, dispatchers, feeds,
        links and outstanding requests, read at once without stopping anything
        (docs/inspect.md says what each figure means).  ``diagram``: the name of
        an FSM actor whose machine diagram the snapshot carries in its
        ``machine.diagram``, with the current state highlighted
        (``diagram_format``: ``"mermaid"`` or ``"dot"``).

        A linked node asks for the same snapshot with an
        :class:`~actorbus.inspection.InspectNode` request (``actorbus inspect
        HOST:PORT``); this node answers it on its links, as their permissions
        allow.  Raises :class:`~actorbus.errors.UsageError` for an unknown
        diagram format or a closed bus."""
        if self._closed:
            raise UsageError(f"inspect() on {self!r}: the bus is closed; make a new Bus")
        return inspection.snapshot(
            self.node_id,
            self.router,
            self.runtime,
            self.links,
            diagram=diagram,
            diagram_format=diagram_format,
        )

    # ------------------------------------------------------------------ net
    # (owned by the net/ links work: Bus.listen, Bus.connect, Bus.links, _start_net)
    def _start_net(self) -> Any:
        """Start the node's network side (selectors, configured services and
        connections) once; a failure closes the bus and propagates."""
        if self.net is None:
            if self._closed:
                raise UsageError(f"{self!r} is closed; make a new Bus to listen or connect")
            from .net.node import NodeNet

            self.net = NodeNet(self, self._views())
            try:
                self.net.start()
            except BaseException:
                self.close()
                raise
        return self.net

    def _views(self) -> NodeViews:
        """What a gateway's inspect page and metrics read of this node (docs/inspect.md)."""
        from .net.jrep._views import NodeViews

        return NodeViews(
            node_id=self.node_id,
            snapshot=self.inspect,
            diagram=self._dot_diagram,
            feed_history=self.feed_history.changes,
            time_requests=self._time_requests,
        )

    def _time_requests(self) -> RequestLatencies:
        """Time every request from now on (a gateway serving metrics asks); the
        durations so far.  Only while this is on do requests read the clock."""
        with self.router.lock:
            if self.router.request_latencies is None:
                self.router.request_latencies = RequestLatencies()
            return self.router.request_latencies

    def _dot_diagram(self, actor: str) -> str | None:
        """The DOT text of actor ``actor``'s machine, its current state highlighted
        (None: no such actor, or no machine)."""
        for found in self.runtime.actors:
            if found.name == actor:
                view = found.inspect_machine("dot")
                return view.diagram if view is not None else None
        return None

    def listen(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        name: str | None = None,
        settings: ServiceSettings | LinkSettings | None = None,
        secret: bytes | Mapping[str, bytes] | None = None,
        tls: ssl.SSLContext | None = None,
        permissions: Permissions | None = None,
        **deprecated: Any,
    ) -> Service:
        """Listen for links from other nodes on ``host:port`` (``port=0``: any free
        port; read the bound one from ``service.port``).

        ``host`` defaults to ``"127.0.0.1"``: only processes on this machine can
        link.  Pass ``"0.0.0.0"`` (every IPv4 interface), ``"::"`` or one
        interface's address for other machines.  A service from a properties file
        defaults to ``0.0.0.0`` instead (``actorbus.service.NAME.host``).

        ``settings``: a :class:`~actorbus.config.ServiceSettings` — the limits
        and timers of every link it accepts (its
        :class:`~actorbus.config.LinkSettings` part; a plain ``LinkSettings``
        is accepted too), the address filter, the connection limits, the secret
        and permissions files, the TLS files; every field with its properties
        key, default and unit in docs/configuration.md.  Change one with
        ``dataclasses.replace(settings, max_patterns=64)``.

        Every link's logon proves a secret (docs/security.md): ``secret`` (bytes,
        at least 16) is the one every peer proves, or a mapping node id -> bytes
        gives nodes secrets of their own (``settings.secret_file`` and
        ``settings.peer_secrets_file`` read them from files, which keeps them out
        of the code).  Without any, a plain TCP service checks this user's
        secret (a file made on first use, mode 600: the nodes of the same user
        link, other users' processes do not) and may listen on a loopback host
        only, unless ``settings.auth`` is ``"none"`` (unauthenticated links
        accepted knowingly, one warning).
        ``permissions`` says which peers may publish, subscribe, request and
        reply on which keys (``Permissions([...])``; or
        ``settings.permissions_file``; docs/security.md, "Authorization"); None
        lets every peer do everything.  ``tls``: every link the service accepts
        speaks TLS with this server context
        (``actorbus.net.tls_server_context(cert_file, key_file, ca_file=None)``,
        or the settings' TLS files); TLS and the secret are independent.

        The keyword arguments of earlier releases (``max_patterns=``,
        ``secret_file=``, ``peer_secrets=`` ...) still work, with a
        :class:`DeprecationWarning` naming the new spelling.
        Raises ConfigError when the port cannot be bound or a secret is missing
        or unfit.  Returns the service handle; ``close()`` stops listening."""
        if "peer_secrets" in deprecated:
            secret = _merge_peer_secrets("listen", secret, deprecated.pop("peer_secrets"))
        s = from_old_keywords("listen", ServiceSettings, settings, deprecated)
        service: Service = self._start_net().listen(
            port, host, name=name, settings=s, secret=secret, tls=tls, permissions=permissions
        )
        return service

    def connect(
        self,
        host: str,
        port: int,
        *,
        name: str | None = None,
        settings: ConnectionSettings | LinkSettings | None = None,
        secret: bytes | None = None,
        tls: ssl.SSLContext | None = None,
        permissions: Permissions | None = None,
        **deprecated: Any,
    ) -> Link:
        """Dial the service of another node at ``host:port`` and keep a link to it.

        Returns at once with the link handle; ``link.wait_logged_on(timeout)``
        blocks until feeds flow.  ``settings``: a
        :class:`~actorbus.config.ConnectionSettings` — the link's limits and
        timers (its :class:`~actorbus.config.LinkSettings` part, as for
        :meth:`listen`; a plain ``LinkSettings`` is accepted too), and how it
        dials: with ``reconnect`` a lost (or refused) connection is dialled
        again after ``reconnect_delay`` seconds, doubling per failed attempt up
        to 10x the delay (30 s at most, unless the delay is longer); a dial the
        peer does not answer is given up after ``connect_timeout`` seconds (0:
        when the operating system gives up); ``bind_host``/``bind_port`` choose
        the local address; ``secret_file``, ``permissions_file`` and the TLS
        files as for a service.  ``secret``: the secret this link proves at
        logon (the service's, or this node's own one if the service has one per
        node); without one it proves this user's secret (as a service without
        one checks it), or none when ``settings.auth`` is ``"none"``.
        ``permissions``: what the peer may do on this link (as for
        :meth:`listen`).  ``tls``: the link speaks TLS with this client context
        (``actorbus.net.tls_client_context(ca_file, cert_file=None,
        key_file=None)``), which always verifies the service's certificate and
        that it names ``settings.tls_server_name`` (default: ``host``).  Old
        keyword arguments work with a :class:`DeprecationWarning`, as for
        :meth:`listen`."""
        s = from_old_keywords("connect", ConnectionSettings, settings, deprecated)
        link: Link = self._start_net().connect(
            host, port, name=name, settings=s, secret=secret, tls=tls, permissions=permissions
        )
        return link

    def join_multicast(
        self,
        name: str | None = None,
        settings: MulticastSettings | None = None,
        *,
        secret: bytes | None = None,
    ) -> MulticastChannel:
        """Join the reliable multicast channel ``settings`` names (group, port,
        interface, TTL; docs/multicast.md): this node's notifications on the
        subjects ``settings.subjects`` names are sent once on it, and every
        publisher heard on it is a peer whose feeds subscribers here receive,
        UP and DOWN as any other.  ``secret`` (or ``settings.secret_file``):
        every datagram carries a MAC keyed from it (docs/security.md).
        ``close()`` on the returned channel leaves it."""
        channel: MulticastChannel = self._start_net().join_multicast(name, settings, secret=secret)
        return channel

    def serve_jrep(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        name: str | None = None,
        settings: GatewaySettings | None = None,
        token: bytes | None = None,
        permissions: Permissions | None = None,
        types: Mapping[str, type[Message] | str] | None = None,
        **deprecated: Any,
    ) -> Gateway:
        """Serve J.REP (JSON messages over WebSocket, docs/jrep.md) on ``host:port``
        (``port=0``: any free port; read the bound one from ``gateway.port``): each
        WebSocket client at ``ws://host:port{settings.path}`` joins the bus as a
        remote party, and the same port serves ``/actorbus.js`` (the JavaScript
        client) and the files of ``settings.static_dir`` over plain HTTP.

        ``settings``: a :class:`~actorbus.config.GatewaySettings` — the path,
        the allowed origins (empty: the gateway's own origin only), the token
        file, ``auth``, the permissions file, the static directory, the selector
        and the per-session limits and timers.  ``token`` (bytes, at least 16;
        or ``settings.token_file``): every client must give it (``?token=`` or
        ``Authorization: Bearer``); without one the gateway may listen on a
        loopback host only, unless ``settings.auth`` is ``"none"``.
        ``permissions``: what the clients may do — they are the peer named
        ``name``.  ``types``: subject -> message class (or type name) for
        messages that name no ``Type``.  Old keyword arguments (``path=``,
        ``allowed_origins=``, ``token_file=`` ...) work with a
        :class:`DeprecationWarning`.  Raises ConfigError when the port cannot be
        bound or a token is missing or unfit."""
        s = from_old_keywords("serve_jrep", GatewaySettings, settings, deprecated)
        gateway: Gateway = self._start_net().serve_jrep(
            port=port,
            host=host,
            name=name,
            settings=s,
            token=token,
            permissions=permissions,
            types=types,
        )
        return gateway

    def connect_jrep(
        self,
        url: str,
        *,
        name: str | None = None,
        settings: JrepClientSettings | None = None,
        token: bytes | None = None,
        permissions: Permissions | None = None,
        **deprecated: Any,
    ) -> JrepClient:
        """Federate with another node's J.REP gateway at ``url`` (its
        ``gateway.url``, ``ws://host:port/jrep``): this node becomes a client bus
        of it, and feeds, notifications, requests and replies cross as over a TCP
        link (docs/jrep.md, "Federation").  Returns at once with the handle;
        ``client.wait_connected(timeout)`` blocks until feeds flow.  ``token``
        (or ``settings.token_file``): the gateway's token.  ``settings``: a
        :class:`~actorbus.config.JrepClientSettings` — with ``reconnect`` (the
        default) a lost or refused session is dialled again after
        ``reconnect_delay`` seconds, doubling per failed attempt up to 10x;
        ``heartbeat`` (seconds, 0: none): WebSocket pings, a session whose ping
        is not answered within as long is dropped.  ``permissions``: what the
        remote node may do here (it is the peer ``name``, by default the URL).
        Old keyword arguments work with a :class:`DeprecationWarning`."""
        s = from_old_keywords("connect_jrep", JrepClientSettings, settings, deprecated)
        client: JrepClient = self._start_net().connect_jrep(
            url, name=name, settings=s, token=token, permissions=permissions
        )
        return client

    @property
    def links(self) -> tuple[Link, ...]:
        """This node's links that are not closed for good (a snapshot)."""
        if self.net is None:
            return ()
        links: tuple[Link, ...] = self.net.links
        return links


def _ignore(*args: object) -> None:
    """A callback that does nothing."""


def _merge_peer_secrets(
    call: str, secret: bytes | Mapping[str, bytes] | None, peers: Mapping[str, bytes]
) -> Mapping[str, bytes]:
    """The deprecated ``peer_secrets=`` folded into ``secret=`` (a mapping)."""
    warnings.warn(
        f"{call}(peer_secrets=...) is deprecated; pass secret={{node_id: secret, ...}} "
        "(or settings=ServiceSettings(peer_secrets_file=...)); the keyword goes in the next "
        "release",
        DeprecationWarning,
        stacklevel=3,
    )
    if isinstance(secret, bytes | bytearray):
        raise UsageError(
            f"{call}(): secret=<bytes> and peer_secrets= both given; put the shared secret "
            "in a file (settings=ServiceSettings(secret_file=...)) and the node secrets in "
            "secret={node_id: secret, ...}"
        )
    return {**(secret or {}), **peers}
