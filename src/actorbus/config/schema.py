"""Typed, frozen configuration: what a properties file (or code) says the bus is.

These dataclasses are the contract between the parser (:mod:`.properties`) and
the runtime.  Every value is already validated when one of these exists; the
runtime never re-checks.  Code may build them directly (tests do); the
properties loader builds them from a file and reports errors with file:line:key.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from actorbus._gc import GC_THRESHOLD
from actorbus.config._checks import (
    DEFAULT_DISPATCHER,
    GENERATE,
    MAX_NODE_ID,
    MIN_SECRET,
    TLS_FILE_KINDS,
    DispatcherKind,
    node_id_problem,
    secret_file_problem,
    tls_file_problem,
    tls_pair_problem,
)
from actorbus.config.settings import (
    ConnectionSettings,
    GatewaySettings,
    JrepClientSettings,
    LinkSettings,
    MulticastSettings,
    ServiceSettings,
)
from actorbus.errors import ConfigError

__all__ = [
    "DEFAULT_DISPATCHER",
    "GENERATE",
    "MAX_NODE_ID",
    "MIN_SECRET",
    "TLS_FILE_KINDS",
    "ActorConfig",
    "BusConfig",
    "ConnectionConfig",
    "DispatcherConfig",
    "DispatcherKind",
    "GatewayConfig",
    "JrepClientConfig",
    "MulticastConfig",
    "SelectorConfig",
    "ServiceConfig",
    "node_id_problem",
    "secret_file_problem",
    "tls_file_problem",
    "tls_pair_problem",
]


@dataclass(frozen=True, slots=True)
class DispatcherConfig:
    """One named dispatcher (``dispatcher.NAME.*``)."""

    name: str
    kind: DispatcherKind = DispatcherKind.BLOCKING
    thread_count: int = 1
    #: empty polls in a row before a spin+park thread parks (sleeps ``park_time_ns``
    #: per poll) or a spin+yield thread waits for a post (docs/actors.md).
    spin_limit: int = 2_500_000
    #: how long a spin+park thread sleeps once the spin limit is reached.
    park_time_ns: int = 1_000
    #: accepted for eBus compatibility; Python threads have no OS priority we can
    #: set portably, so it is recorded and reported, not applied (docs/actors.md, Dispatchers).
    priority: int = 5
    #: run quantum: after a task, an actor that has run longer than this goes
    #: back on the run queue if it still has tasks.  Not preemptive.
    quantum_ns: int = 500_000
    is_default: bool = False
    #: dotted paths of actor classes pinned to this dispatcher.
    classes: tuple[str, ...] = ()


#: Selector kinds whose event loop polls instead of blocking in epoll when idle.
POLLING_KINDS = frozenset(
    {DispatcherKind.SPINNING, DispatcherKind.SPIN_PARK, DispatcherKind.SPIN_YIELD}
)


@dataclass(frozen=True, slots=True)
class SelectorConfig:
    """One network I/O thread (``net.selector.NAME.*``).

    ``kind`` says how the selector's event loop waits for I/O: ``ASYNCIO`` (the
    default) and ``BLOCKING`` block in epoll when idle; ``SPINNING`` keeps the
    loop polling; ``SPIN_PARK`` polls until ``spin_limit`` polls in a row found
    nothing received, then polls every ``park_time_ns`` (the loop still wakes at
    once on I/O); ``SPIN_YIELD`` polls and, past ``spin_limit`` idle polls,
    yields the CPU on each one (docs/links.md, "Polling selectors").  Invalid
    values raise :class:`~actorbus.errors.ConfigError` here, when built."""

    name: str
    kind: DispatcherKind = DispatcherKind.ASYNCIO
    is_default: bool = False
    priority: int = 5
    #: idle polls before a spin+park selector parks or a spin+yield one yields.
    spin_limit: int = 2_500_000
    #: how long a parked spin+park selector lets its loop block in epoll between
    #: polls (rounded up to whole milliseconds, at least 1 ms: the loop's poll
    #: timeout counts milliseconds).
    park_time_ns: int = 1_000
    #: run on the event loop of this asyncio dispatcher instead of an I/O thread of
    #: its own: actors pinned to that dispatcher then share the loop with the links,
    #: so nothing they send or receive crosses a thread (docs/links.md).
    dispatcher: str | None = None

    def __post_init__(self) -> None:
        def bad(key: str, value: object, expected: str) -> ConfigError:
            return ConfigError(
                f"selector {self.name!r}: {key}={value!r}: expected {expected}",
                key=f"net.selector.{self.name}.{key}",
            )

        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(
                f"a selector has the name {self.name!r}; give every selector a non-empty name"
            )
        if not isinstance(self.kind, DispatcherKind):
            hint = ""
            if isinstance(self.kind, str):
                hint = f" (DispatcherKind.parse({self.kind!r}) reads the properties spelling)"
            raise bad(
                "type",
                self.kind,
                "a DispatcherKind: ASYNCIO or BLOCKING (block in epoll when idle, the "
                f"default), SPINNING, SPIN_PARK or SPIN_YIELD{hint}",
            )
        for key, value, expected in (
            ("spinLimit", self.spin_limit, "an integer >= 0 (idle polls)"),
            ("parkTime", self.park_time_ns, "an integer >= 0 (nanoseconds)"),
        ):
            if type(value) is not int or value < 0:
                raise bad(key, value, expected)
        if type(self.priority) is not int or not 1 <= self.priority <= 10:
            raise bad("priority", self.priority, "an integer 1..10 (recorded, not applied)")

    @property
    def polling(self) -> str:
        """How this selector's loop waits, with the settings its kind uses:
        ``blocking``, ``spinning``, ``spin+park (spinLimit=N, parkTime=N ns)`` or
        ``spin+yield (spinLimit=N)``.  Selectors sharing one dispatcher's loop must
        say the same (a loop polls one way)."""
        kind = self.kind
        if kind is DispatcherKind.SPIN_PARK:
            return f"spin+park (spinLimit={self.spin_limit}, parkTime={self.park_time_ns} ns)"
        if kind is DispatcherKind.SPIN_YIELD:
            return f"spin+yield (spinLimit={self.spin_limit})"
        if kind is DispatcherKind.SPINNING:
            return "spinning"
        return "blocking"


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """A listening port (``service.NAME.*``): where it listens, and its
    :class:`~actorbus.config.settings.ServiceSettings` (every other key)."""

    name: str
    port: int
    #: every IPv4 interface (``Bus.listen()`` in code defaults to loopback instead)
    host: str = "0.0.0.0"
    settings: ServiceSettings = ServiceSettings()


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """An outgoing link (``connection.NAME.*``): where it dials, and its
    :class:`~actorbus.config.settings.ConnectionSettings` (every other key)."""

    name: str
    host: str
    port: int
    settings: ConnectionSettings = ConnectionSettings()


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A J.REP gateway: WebSocket clients and files on one port (``jrep.gateway.NAME.*``;
    docs/jrep.md), and its :class:`~actorbus.config.settings.GatewaySettings`."""

    name: str
    port: int
    host: str = "127.0.0.1"
    settings: GatewaySettings = GatewaySettings()


@dataclass(frozen=True, slots=True)
class JrepClientConfig:
    """A federation with another node's J.REP gateway (``jrep.client.NAME.*``;
    docs/jrep.md, "Federation"), and its
    :class:`~actorbus.config.settings.JrepClientSettings`."""

    name: str
    #: the gateway's WebSocket URL (``ws://host:port/jrep``)
    url: str
    settings: JrepClientSettings = JrepClientSettings()


@dataclass(frozen=True, slots=True)
class MulticastConfig:
    """A reliable multicast channel the node joins at start (``multicast.NAME.*``;
    docs/multicast.md), and its :class:`~actorbus.config.settings.MulticastSettings`."""

    name: str
    settings: MulticastSettings = MulticastSettings()


@dataclass(frozen=True, slots=True)
class ActorConfig:
    """An actor the ``actorbus run`` command creates (``actor.NAME.*``)."""

    name: str
    #: dotted path of the Actor subclass (or a factory callable).
    class_path: str
    dispatcher: str | None = None
    #: an SMC ``.sm`` file for an FsmActor (``machine``): ``actorbus run`` passes
    #: it as the ``machine`` keyword; relative to the properties file's directory.
    machine: str | None = None
    #: a file ``actorbus run`` records the actor to (``recordTo``; docs/replay.md),
    #: relative to the properties file's directory; None: not recorded.
    record_to: str | None = None
    #: every other ``actor.NAME.KEY=value`` pair, as strings; ``actorbus run`` passes
    #: each as a keyword argument, KEY in Python spelling (docs/configuration.md).
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class BusConfig:
    """Everything a properties file configures.  ``BusConfig()`` is the default bus:
    one blocking dispatcher named ``default`` with one thread serving every actor."""

    dispatchers: tuple[DispatcherConfig, ...] = (
        DispatcherConfig(name=DEFAULT_DISPATCHER, is_default=True),
    )
    selectors: tuple[SelectorConfig, ...] = ()
    services: tuple[ServiceConfig, ...] = ()
    connections: tuple[ConnectionConfig, ...] = ()
    #: J.REP gateways (``jrep.gateways``)
    gateways: tuple[GatewayConfig, ...] = ()
    #: federations with other nodes' J.REP gateways (``jrep.clients``)
    jrep_clients: tuple[JrepClientConfig, ...] = ()
    #: reliable multicast channels (``multicasts``)
    multicasts: tuple[MulticastConfig, ...] = ()
    actors: tuple[ActorConfig, ...] = ()
    #: ``spark.*`` keys, raw (the Spark pipeline validates them).
    spark: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: while a bus built from this is open, the interpreter's young-generation GC
    #: threshold is at least this (``gc.threshold``); None leaves the garbage
    #: collector alone (docs/bus.md).  ``Bus(gc_threshold=...)`` overrides it.
    gc_threshold: int | None = GC_THRESHOLD
    #: this node's id (``nodeId``): what peers see in their logs and in
    #: ``LinkLoggedOn.peer_node``, and what the one-link rule compares; None: a
    #: generated ``host-pid-random``.  ``Bus(node_id=...)`` overrides it.
    node_id: str | None = None
    #: where this configuration came from (a path), for error messages.
    source: str | None = None

    @property
    def default_dispatcher(self) -> DispatcherConfig:
        """The dispatcher marked default, else the first one."""
        for d in self.dispatchers:
            if d.is_default:
                return d
        return self.dispatchers[0]


def __getattr__(name: str) -> object:
    """``LinkConfig``, the old name of the link settings, for one release."""
    if name == "LinkConfig":
        warnings.warn(
            "actorbus.config.schema.LinkConfig is deprecated; use "
            "actorbus.config.settings.LinkSettings (times in seconds, no _ms suffix)",
            DeprecationWarning,
            stacklevel=2,
        )
        return LinkSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
