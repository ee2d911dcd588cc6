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
system subject, next to its system publishers, and answers its peers with its
own feeds.
"""

from __future__ import annotations

import asyncio
import enum
import os
import queue
import socket
import ssl
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar

from . import _gc
from .actors import ActorRuntime
from .bus import discovery
from .bus.discovery import DiscoverTopics, Topic
from .bus.feeds import IncomingRequest, PublishFeed, ReplyFeed, RequestFeed, SubscribeFeed, _direct
from .bus.inbox import Inbox
from .bus.message import Message, MessageKey, Notification, Reply, Request
from .bus.owner import (
    checked_key,
    find_runtime_with,
    refuse_blocking_deadlock,
    subscription_key,
)
from .bus.permissions import Permissions
from .bus.queues import QueueGroup
from .bus.router import Router
from .bus.scope import FeedState, Scope
from .bus.subjects import Wildcard, new_private_subject
from .bus.system import SYSTEM_MESSAGES, SYSTEM_SUBJECT
from .config.schema import BusConfig, node_id_problem
from .errors import RequestError, UsageError

if TYPE_CHECKING:
    from .net.jrep import Gateway, GatewaySettings, JrepClient
    from .net.link import Link
    from .net.service import Service

__all__ = ["Bus"]

N = TypeVar("N", bound=Notification)
Q = TypeVar("Q", bound=Request)
_SYSTEM_OWNER = object()


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

    _open: ClassVar[weakref.WeakSet[Bus]] = weakref.WeakSet()
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        config: BusConfig | None = None,
        *,
        node_id: str | None = None,
        gc_threshold: int | Literal[_FromConfig.FROM_CONFIG] | None = _FROM_CONFIG,
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
        :mod:`actorbus._gc` and docs/bus.md."""
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
        self.router = Router(schedule=self._schedule)
        self.router.node_id = self.node_id
        self.router.reserved_subject = SYSTEM_SUBJECT
        self.router.reserved_owner = _SYSTEM_OWNER
        self.runtime = ActorRuntime(self.config, owner=self)
        self._closed = False
        self._system: dict[type, PublishFeed[Any]] = {}
        for cls in SYSTEM_MESSAGES:
            feed: PublishFeed[Any] = PublishFeed(
                self.router,
                _SYSTEM_OWNER,
                MessageKey(cls, SYSTEM_SUBJECT),
                Scope.LOCAL_ONLY,
                discoverable=False,
            )
            feed.status_callback(_ignore)
            feed.advertise()
            feed.update_feed_state(FeedState.UP)
            self._system[cls] = feed
        self.router.system_publish = self.publish_system
        # discovery: this node's answer to its peers' DiscoverTopics (topics()
        # reads this node's own rows directly); hidden, so discovery never lists
        # itself.  REMOTE_ONLY: a request reaches the peers' repliers only.
        self._discovery: ReplyFeed[DiscoverTopics] = ReplyFeed(
            self.router,
            _SYSTEM_OWNER,
            MessageKey(DiscoverTopics, SYSTEM_SUBJECT),
            Scope.REMOTE_ONLY,
            discoverable=False,
        )
        self._discovery.request_callback(self._answer_discovery)
        self._discovery.advertise()
        self._discovery.update_feed_state(FeedState.UP)
        self.net: Any = None
        with Bus._open_lock:
            Bus._open.add(self)
        c = self.config
        if c.services or c.connections or c.gateways or c.jrep_clients:
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
        with cls._open_lock:
            live = [b for b in cls._open if not b._closed]
        return live[0] if len(live) == 1 else None

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
        try:
            if self.net is not None:
                self.net.close(timeout)
            self.runtime.close(timeout)
            self.router.peer_log.close()  # how many peer lines were held back
        finally:
            with Bus._open_lock:
                Bus._open.discard(self)
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
        self._system[type(message)].publish(message)

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
        self, message: Request, timeout: float, *, scope: Scope = Scope.LOCAL_AND_REMOTE
    ) -> list[Reply]:
        """Send ``message`` and block until every replier finished or ``timeout``
        seconds passed; returns the replies in arrival order.  On timeout the last
        reply is an ERROR reply "timed out after …".  Raises RequestError at once
        when no replier is up, and UsageError instead of blocking when called on
        the only thread of a dispatcher a replier of the key is pinned to (that
        replier could not answer until this call returned)."""
        if isinstance(message, Request):
            refuse_blocking_deadlock(self.router, MessageKey.of(message), None, "request_all")
        replies: queue.SimpleQueue[tuple[int, Reply]] = queue.SimpleQueue()
        feed = self._temporary_requestor(message, scope, lambda r, rep: replies.put((r, rep)))
        try:
            feed.request(message, timeout=timeout)
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

    def _answer_discovery(self, incoming: IncomingRequest[DiscoverTopics]) -> None:
        discovery.answer(incoming, self.router, self.node_id)

    # ------------------------------------------------------------------ net
    # (owned by the net/ links work: Bus.listen, Bus.connect, Bus.links, _start_net)
    def _start_net(self) -> Any:
        """Start the node's network side (selectors, configured services and
        connections) once; a failure closes the bus and propagates."""
        if self.net is None:
            if self._closed:
                raise UsageError(f"{self!r} is closed; make a new Bus to listen or connect")
            from .net.node import NodeNet

            self.net = NodeNet(self)
            try:
                self.net.start()
            except BaseException:
                self.close()
                raise
        return self.net

    def listen(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        name: str | None = None,
        address_filter: Iterable[str] = (),
        heartbeat_delay: float = 0.0,
        heartbeat_reply_delay: float = 0.0,
        message_queue_size: int = 0,
        input_buffer_size: int = 65_536,
        output_buffer_size: int = 65_536,
        byte_order: Literal["big", "little"] = "big",
        input_backlog: int = 10_000,
        logon_timeout: float = 10.0,
        frame_timeout: float = 30.0,
        max_frame_size: int = 1_049_600,
        max_keys: int = 16_384,
        max_subject_length: int = 1_024,
        max_feeds: int = 16_384,
        max_patterns: int = 1_024,
        max_groups: int = 1_024,
        message_queue_bytes: int = 64 * 1_048_576,
        message_queue_high_water: int = -1,
        service_selector: str | None = None,
        connection_selector: str | None = None,
        secret: bytes | None = None,
        secret_file: str | os.PathLike[str] | None = None,
        peer_secrets: Mapping[str, bytes] | None = None,
        peer_secrets_file: str | os.PathLike[str] | None = None,
        auth: Literal["auto", "none"] = "auto",
        permissions: Permissions | None = None,
        tls: ssl.SSLContext | None = None,
        max_connections: int = 512,
        max_connections_per_host: int = 128,
        accept_backlog: int = 1_024,
    ) -> Service:
        """Listen for links from other nodes on ``host:port`` (``port=0``: any free
        port; read the bound one from ``service.port``).

        ``host`` defaults to ``"127.0.0.1"``: only processes on this machine can
        link.  Pass ``"0.0.0.0"`` (every IPv4 interface), ``"::"`` or one
        interface's address for other machines.  A service from a properties file
        defaults to ``0.0.0.0`` instead (``actorbus.service.NAME.host``).

        ``address_filter`` admits only the hosts (``"h"``) and endpoints
        (``"h:port"``) listed; others are closed at once and counted.  The other
        settings apply to every link the service accepts (times in seconds, 0 =
        off; see :class:`~actorbus.net.link.LinkSettings`); ``input_backlog`` pauses
        reading a link while a mailbox or inbox it feeds holds more tasks than that (0 =
        never).

        Limits against peers that misbehave (docs/security.md, "What is
        protected"): at most ``max_connections`` connections at once, and
        ``max_connections_per_host`` from one source address (more are closed at
        once and counted in ``over_limit``); ``accept_backlog`` connections may
        wait to be accepted.  Each link: its whole logon within
        ``logon_timeout`` s, each frame whole within ``frame_timeout`` s of its
        first bytes, frames of at most ``max_frame_size`` bytes (4 KiB before the
        logon), at most ``max_keys`` keys with type names, subjects and patterns
        of at most ``max_subject_length`` characters, ``max_feeds``
        advertisements and subscriptions, ``max_patterns`` wildcards and
        ``max_groups`` queue groups held by the peer (over any: the link closes,
        counted in ``over_limit``), and at most ``message_queue_bytes`` bytes
        waiting for a socket that cannot keep up (then the link closes as for
        ``message_queue_size``; 0 = unlimited); past ``message_queue_high_water``
        bytes (-1: half of it) the publishers sending there are told
        (``PublishFeed.congested``, docs/bus.md).

        Every link's logon proves a secret (docs/security.md): ``secret`` (bytes,
        at least 16) or ``secret_file`` (a file holding it, not readable by
        every user) is the one every peer proves; ``peer_secrets`` (node id ->
        bytes) or ``peer_secrets_file`` (``node-id = secret`` lines) give nodes
        secrets of their own.  Without any, only peers without a secret link,
        and the service may listen on a loopback host only, unless
        ``auth="none"`` (unauthenticated links accepted knowingly, one warning).
        ``permissions`` says which peers may publish, subscribe, request and
        reply on which keys (``Permissions([...])`` or
        ``Permissions.from_file(path)``; docs/security.md, "Authorization");
        None lets every peer do everything.

        ``tls``: every link the service accepts speaks TLS with this server
        context (``actorbus.net.tls_server_context(cert_file, key_file,
        ca_file=None)``; with a CA file clients must present a certificate it
        signed, and then no secret is needed beyond loopback).  TLS and the
        secret are independent (docs/security.md).
        Raises ConfigError when the port cannot be bound or a secret is missing
        or unfit.  Returns the service handle; ``close()`` stops listening."""
        from .net.link import LinkSettings

        settings = LinkSettings(
            heartbeat_delay=heartbeat_delay,
            heartbeat_reply_delay=heartbeat_reply_delay,
            message_queue_size=message_queue_size,
            input_buffer_size=input_buffer_size,
            output_buffer_size=output_buffer_size,
            byte_order=byte_order,
            input_backlog=input_backlog,
            logon_timeout=logon_timeout,
            frame_timeout=frame_timeout,
            max_frame_size=max_frame_size,
            max_keys=max_keys,
            max_subject_length=max_subject_length,
            max_feeds=max_feeds,
            max_patterns=max_patterns,
            max_groups=max_groups,
            message_queue_bytes=message_queue_bytes,
            message_queue_high_water=message_queue_high_water,
        )
        service: Service = self._start_net().listen(
            port,
            host,
            name=name,
            address_filter=address_filter,
            settings=settings,
            service_selector=service_selector,
            connection_selector=connection_selector,
            secret=secret,
            secret_file=secret_file,
            peer_secrets=peer_secrets,
            peer_secrets_file=peer_secrets_file,
            auth=auth,
            permissions=permissions,
            tls=tls,
            max_connections=max_connections,
            max_connections_per_host=max_connections_per_host,
            accept_backlog=accept_backlog,
        )
        return service

    def connect(
        self,
        host: str,
        port: int,
        *,
        name: str | None = None,
        reconnect: bool = False,
        reconnect_delay: float = 5.0,
        connect_timeout: float = 10.0,
        bind_host: str | None = None,
        bind_port: int = 0,
        heartbeat_delay: float = 0.0,
        heartbeat_reply_delay: float = 0.0,
        message_queue_size: int = 0,
        input_buffer_size: int = 65_536,
        output_buffer_size: int = 65_536,
        byte_order: Literal["big", "little"] = "big",
        input_backlog: int = 10_000,
        logon_timeout: float = 10.0,
        frame_timeout: float = 30.0,
        max_frame_size: int = 1_049_600,
        max_keys: int = 16_384,
        max_subject_length: int = 1_024,
        max_feeds: int = 16_384,
        max_patterns: int = 1_024,
        max_groups: int = 1_024,
        message_queue_bytes: int = 64 * 1_048_576,
        message_queue_high_water: int = -1,
        selector: str | None = None,
        secret: bytes | None = None,
        secret_file: str | os.PathLike[str] | None = None,
        permissions: Permissions | None = None,
        tls: ssl.SSLContext | None = None,
        tls_server_name: str | None = None,
    ) -> Link:
        """Dial the service of another node at ``host:port`` and keep a link to it.

        Returns at once with the link handle; ``link.wait_logged_on(timeout)``
        blocks until feeds flow.  With ``reconnect`` a lost (or refused)
        connection is dialled again after ``reconnect_delay`` seconds, doubling
        per failed attempt up to 10x the delay (30 s at most, unless the delay is
        longer).  A dial the peer does not answer (a host that is down, a
        firewall that drops it) is given up after ``connect_timeout`` seconds
        (0: when the operating system gives up, minutes on Linux) and counts as
        a failed dial.  ``bind_host``/``bind_port`` choose the local address.
        ``secret`` / ``secret_file``: the secret this link proves at logon (the
        service's, or this node's own one if the service has one per node);
        without one it links only to services without a secret.
        ``permissions``: what the peer may do on this link (as for
        :meth:`listen`).  ``tls``: the
        link speaks TLS with this client context
        (``actorbus.net.tls_client_context(ca_file, cert_file=None,
        key_file=None)``), which always verifies the service's certificate and
        that it names ``tls_server_name`` (default: ``host``).  Other settings
        as for :meth:`listen`."""
        from .net.link import LinkSettings

        settings = LinkSettings(
            heartbeat_delay=heartbeat_delay,
            heartbeat_reply_delay=heartbeat_reply_delay,
            message_queue_size=message_queue_size,
            input_buffer_size=input_buffer_size,
            output_buffer_size=output_buffer_size,
            byte_order=byte_order,
            input_backlog=input_backlog,
            logon_timeout=logon_timeout,
            frame_timeout=frame_timeout,
            max_frame_size=max_frame_size,
            max_keys=max_keys,
            max_subject_length=max_subject_length,
            max_feeds=max_feeds,
            max_patterns=max_patterns,
            max_groups=max_groups,
            message_queue_bytes=message_queue_bytes,
            message_queue_high_water=message_queue_high_water,
        )
        link: Link = self._start_net().connect(
            host,
            port,
            name=name,
            settings=settings,
            bind_host=bind_host,
            bind_port=bind_port,
            reconnect=reconnect,
            reconnect_delay=reconnect_delay,
            connect_timeout=connect_timeout,
            selector=selector,
            secret=secret,
            secret_file=secret_file,
            permissions=permissions,
            tls=tls,
            tls_server_name=tls_server_name,
        )
        return link

    def serve_jrep(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        name: str | None = None,
        path: str = "/jrep",
        allowed_origins: Iterable[str] = (),
        token: bytes | None = None,
        token_file: str | os.PathLike[str] | None = None,
        auth: Literal["auto", "none"] = "auto",
        permissions: Permissions | None = None,
        static_dir: str | os.PathLike[str] | None = None,
        types: Mapping[str, type[Message] | str] | None = None,
        settings: GatewaySettings | None = None,
        selector: str | None = None,
    ) -> Gateway:
        """Serve J.REP (JSON messages over WebSocket, docs/jrep.md) on ``host:port``
        (``port=0``: any free port; read the bound one from ``gateway.port``): each
        WebSocket client at ``ws://host:port{path}`` joins the bus as a remote party,
        and the same port serves ``/actorbus.js`` (the JavaScript client) and the
        files of ``static_dir`` over plain HTTP.

        ``allowed_origins``: the ``Origin`` values a browser's handshake may carry
        (``"*"``: any; empty: the gateway's own origin only).  ``token`` (bytes, at
        least 16) or ``token_file``: every client must give it (``?token=`` or
        ``Authorization: Bearer``); without one the gateway may listen on a
        loopback host only, unless ``auth="none"``.  ``permissions``: what the
        clients may do — they are the peer named ``name``.  ``types``: subject ->
        message class (or type name) for messages that name no ``Type``.
        ``settings``: the per-session limits and timers
        (:class:`~actorbus.net.jrep.GatewaySettings`).  Raises ConfigError when
        the port cannot be bound or a token is missing or unfit."""
        gateway: Gateway = self._start_net().serve_jrep(
            port=port,
            host=host,
            name=name,
            path=path,
            allowed_origins=allowed_origins,
            token=token,
            token_file=token_file,
            auth=auth,
            permissions=permissions,
            static_dir=static_dir,
            types=types,
            settings=settings,
            selector=selector,
        )
        return gateway

    def connect_jrep(
        self,
        url: str,
        *,
        name: str | None = None,
        token: bytes | None = None,
        token_file: str | os.PathLike[str] | None = None,
        reconnect: bool = False,
        reconnect_delay: float = 5.0,
        connect_timeout: float = 10.0,
        heartbeat: float = 0.0,
        permissions: Permissions | None = None,
        selector: str | None = None,
    ) -> JrepClient:
        """Federate with another node's J.REP gateway at ``url`` (its
        ``gateway.url``, ``ws://host:port/jrep``): this node becomes a client bus
        of it, and feeds, notifications, requests and replies cross as over a TCP
        link (docs/jrep.md, "Federation").  Returns at once with the handle;
        ``client.wait_connected(timeout)`` blocks until feeds flow.  ``token`` /
        ``token_file``: the gateway's token.  With ``reconnect`` a lost or refused
        session is dialled again after ``reconnect_delay`` seconds, doubling per
        failed attempt up to 10x.  ``heartbeat`` (seconds, 0: none): WebSocket
        pings; a session whose ping is not answered within as long is dropped.
        ``permissions``: what the remote node may do here (it is the peer
        ``name``, by default the URL)."""
        client: JrepClient = self._start_net().connect_jrep(
            url,
            name=name,
            token=token,
            token_file=token_file,
            reconnect=reconnect,
            reconnect_delay=reconnect_delay,
            connect_timeout=connect_timeout,
            heartbeat=heartbeat,
            permissions=permissions,
            selector=selector,
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


def _current_runtime() -> ActorRuntime | None:
    bus = Bus.current()
    return bus.runtime if bus is not None else None


find_runtime_with(_current_runtime)
