"""Typed, frozen configuration: what a properties file (or code) says the bus is.

These dataclasses are the contract between the parser (:mod:`.properties`) and
the runtime.  Every value is already validated when one of these exists; the
runtime never re-checks.  Code may build them directly (tests do); the
properties loader builds them from a file and reports errors with file:line:key.
"""

from __future__ import annotations

import enum
import os
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from actorbus._gc import GC_THRESHOLD
from actorbus.errors import ConfigError

__all__ = [
    "DEFAULT_DISPATCHER",
    "GENERATE",
    "MAX_NODE_ID",
    "MIN_SECRET",
    "ActorConfig",
    "BusConfig",
    "ConnectionConfig",
    "DispatcherConfig",
    "DispatcherKind",
    "GatewayConfig",
    "JrepClientConfig",
    "LinkConfig",
    "SelectorConfig",
    "ServiceConfig",
    "node_id_problem",
    "secret_file_problem",
    "tls_file_problem",
    "tls_pair_problem",
]

#: The longest node id in UTF-8 bytes: a node id crosses the wire in LOGON.
MAX_NODE_ID = 255


def node_id_problem(node_id: str) -> str | None:
    """Why the str ``node_id`` is not a valid node id (1..255 UTF-8 bytes of text),
    or None.  The link protocol, the properties loader and ``Bus`` all check it."""
    try:
        size = len(node_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode text"
    if not 0 < size <= MAX_NODE_ID:
        return f"it has {size} UTF-8 bytes, expected 1..{MAX_NODE_ID}"
    return None


#: Shortest secret accepted, in bytes.
MIN_SECRET = 16
#: How to make a good secret (in error messages and docs).
GENERATE = 'python -c "import secrets; print(secrets.token_hex(32))"'
_SECRET_WHITESPACE = b" \t\r\n\f\v"


def secret_file_problem(path: str, *, holds_one: bool = True) -> str | None:
    """Why the file at ``path`` cannot hold a secret, or None: it does not exist,
    is not a regular file, every user may read or change it, or (``holds_one``)
    its secret — the file's bytes without the whitespace around them — is empty
    or shorter than :data:`MIN_SECRET`.  Never says what the file holds."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return (
            f"the secret file {path!r} does not exist; create it with the secret "
            f"(generate one with {GENERATE}) and chmod 600 it"
        )
    except OSError as exc:
        return (
            f"the secret file {path!r} cannot be read ({exc.strerror or exc}); check the "
            "path and that this user may read it"
        )
    if not stat.S_ISREG(info.st_mode):
        return f"{path!r} is not a regular file; give the path of the file that holds the secret"
    if os.name == "posix" and info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        who = "read" if info.st_mode & stat.S_IROTH else "changed"
        return (
            f"the secret file {path!r} can be {who} by every user of this machine (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); chmod 600 {path} (or 640 for the node's "
            "group), and replace the secret if others may have read it"
        )
    if not holds_one:
        return None
    try:
        with open(path, "rb") as file:
            key = file.read().strip(_SECRET_WHITESPACE)
    except OSError as exc:
        return (
            f"the secret file {path!r} cannot be read ({exc.strerror or exc}); check that "
            "this user may read it"
        )
    if not key:
        return f"the secret file {path!r} is empty; write the secret into it (generate one with {GENERATE})"
    if len(key) < MIN_SECRET:
        return (
            f"the secret in {path!r} has {len(key)} bytes, expected at least {MIN_SECRET}; a "
            f"short secret can be guessed from one recorded logon: generate one with {GENERATE}"
        )
    return None


#: What each kind of TLS file holds, for :func:`tls_file_problem` and its messages.
TLS_FILE_KINDS = {
    "cert": "the certificate (PEM) this end presents, followed by any intermediate CA certificates",
    "key": "the private key (PEM) of the certificate",
    "ca": "the CA certificates (PEM) that sign the peer's certificate",
}


def tls_file_problem(path: str, kind: str) -> str | None:
    """Why the file at ``path`` cannot serve as a TLS file of ``kind`` ("cert",
    "key" or "ca"; :data:`TLS_FILE_KINDS`), or None: it does not exist, is not
    a regular file or cannot be read; a certificate or CA file holds no PEM
    certificate; a key file holds no PEM private key or every user of the
    machine may read or change it (like a secret file)."""
    holds = TLS_FILE_KINDS[kind]
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return f"the TLS file {path!r} does not exist; give the path of the file holding {holds}"
    except OSError as exc:
        return (
            f"the TLS file {path!r} cannot be read ({exc.strerror or exc}); check the path "
            "and that this user may read it"
        )
    if not stat.S_ISREG(info.st_mode):
        return f"{path!r} is not a regular file; give the path of the file holding {holds}"
    if kind == "key" and os.name == "posix" and info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        who = "read" if info.st_mode & stat.S_IROTH else "changed"
        return (
            f"the private key file {path!r} can be {who} by every user of this machine (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); chmod 600 {path} (or 640 for the node's "
            "group), and replace the key and its certificate if others may have read it"
        )
    try:
        with open(path, "rb") as file:
            text = file.read()
    except OSError as exc:
        return (
            f"the TLS file {path!r} cannot be read ({exc.strerror or exc}); check that this "
            "user may read it"
        )
    if kind == "key":
        if b"PRIVATE KEY-----" not in text:
            return (
                f"the file {path!r} holds no PEM private key (a '-----BEGIN ... PRIVATE "
                f"KEY-----' block); give the path of the file holding {holds}"
            )
        return None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except (ssl.SSLError, ValueError) as exc:
        return (
            f"the file {path!r} holds no PEM certificate that loads ({exc}); give the path "
            f"of the file holding {holds}"
        )
    return None


def tls_pair_problem(cert: str, key: str) -> str | None:
    """Why the certificate file ``cert`` and the private key file ``key`` (each
    fit on its own, :func:`tls_file_problem`) do not load as one certificate
    chain — the key is not the certificate's, or is encrypted — or None."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=_no_password)
    except (ssl.SSLError, ValueError, OSError) as exc:
        return (
            f"the private key in {key!r} does not load with the certificate in {cert!r} ({exc}); "
            "give the key the certificate was made for, unencrypted (chmod 600 protects it)"
        )
    return None


def _no_password() -> str:
    """An encrypted key file fails to load instead of asking on the terminal."""
    raise ValueError("the key is encrypted with a password")


DEFAULT_DISPATCHER = "default"


class DispatcherKind(enum.Enum):
    """How a dispatcher's threads wait for work (``runQueueType``)."""

    BLOCKING = "blocking"
    SPINNING = "spinning"
    SPIN_PARK = "spin+park"
    SPIN_YIELD = "spin+yield"
    ASYNCIO = "asyncio"

    @classmethod
    def parse(cls, text: str) -> DispatcherKind:
        """Case-insensitive lookup; raises ``ValueError`` listing the allowed kinds."""
        wanted = text.strip().lower()
        for kind in cls:
            if kind.value == wanted:
                return kind
        allowed = ", ".join(k.value for k in cls)
        raise ValueError(f"unknown dispatcher kind {text!r}; expected one of {allowed}")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkConfig:
    """What a service's links and a connection's link share (the keys of
    ``service.NAME.*`` and ``connection.NAME.*`` alike)."""

    input_buffer_size: int = 65_536
    output_buffer_size: int = 65_536
    byte_order: str = "big"
    #: max messages queued for output on one link before it is closed; 0 = unlimited.
    message_queue_size: int = 0
    heartbeat_delay_ms: int = 0
    heartbeat_reply_delay_ms: int = 0
    #: input back-pressure: stop reading a link while a mailbox or inbox it feeds holds more
    #: than this many tasks (resume below half); 0 = never pause.
    input_backlog: int = 10_000
    #: the whole logon must finish within this long (ms).
    logon_timeout_ms: int = 10_000
    #: a frame must be whole this long after its first bytes (ms, 0 = never).
    frame_timeout_ms: int = 30_000
    #: largest frame accepted or sent (bytes).
    max_frame_size: int = 1_049_600
    #: what the peer may hold on one link (over any: the link closes).
    max_keys: int = 16_384
    max_subject_length: int = 1_024
    max_feeds: int = 16_384
    max_patterns: int = 1_024
    max_groups: int = 1_024
    #: most bytes waiting for a socket that cannot keep up (0 = unlimited).
    message_queue_bytes: int = 64 * 1_048_576
    #: publishers are told the link is congested past this many bytes waiting
    #: (-1 = half of message_queue_bytes, 0 = never).
    message_queue_high_water: int = -1


@dataclass(frozen=True, slots=True)
class ServiceConfig(LinkConfig):
    """A listening port (``service.NAME.*``); the link settings are
    :class:`LinkConfig`'s."""

    name: str
    port: int
    host: str = "0.0.0.0"
    #: positive filter: only these hosts ("h") or endpoints ("h:port") may connect;
    #: empty means everyone may.
    address_filter: tuple[str, ...] = ()
    service_selector: str | None = None
    connection_selector: str | None = None
    #: most connections open at once, and from one source address; more are closed at once.
    max_connections: int = 512
    max_connections_per_host: int = 128
    #: connections the kernel may hold waiting to be accepted.
    accept_backlog: int = 1_024
    #: a file holding the secret every peer proves at logon (the path, never the secret)
    secret_file: str | None = None
    #: a file of ``node-id = secret`` lines: the nodes that prove a secret of their own
    peer_secrets_file: str | None = None
    #: "auto": without a secret the service may listen on loopback only; "none":
    #: links without a secret are accepted on any address (logged once)
    auth: str = "auto"
    #: a file of allow/deny rules: what each peer may publish, subscribe to,
    #: request and reply on (None: everything)
    permissions_file: str | None = None
    #: TLS: the service's certificate (PEM, its chain after it) and its private
    #: key; both set = every link it accepts speaks TLS
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: TLS: the CA certificates that sign the clients' certificates; set = mutual
    #: TLS (every client must present a certificate they sign)
    tls_ca_file: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectionConfig(LinkConfig):
    """An outgoing link (``connection.NAME.*``); the link settings are
    :class:`LinkConfig`'s."""

    name: str
    host: str
    port: int
    bind_port: int = 0
    selector: str | None = None
    reconnect: bool = False
    reconnect_delay_ms: int = 5_000
    #: give up a dial the peer does not answer after this long (0 = the OS's own limit).
    connect_timeout_ms: int = 10_000
    #: a file holding the secret this link proves at logon (the path, never the secret)
    secret_file: str | None = None
    #: a file of allow/deny rules: what the peer may do on this link (None: everything)
    permissions_file: str | None = None
    #: TLS: the CA certificates that sign the service's certificate; set = the
    #: link speaks TLS and verifies the service's certificate and host name
    tls_ca_file: str | None = None
    #: TLS: this node's client certificate and key, for a service that asks for one
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: TLS: the name the service's certificate must carry (None: ``host``)
    tls_server_name: str | None = None


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A J.REP gateway: WebSocket clients and files on one port (``jrep.gateway.NAME.*``;
    docs/jrep.md)."""

    name: str
    port: int
    host: str = "127.0.0.1"
    #: the URL path of the J.REP WebSocket endpoint
    path: str = "/jrep"
    #: ``Origin`` values a WebSocket handshake may carry ("*": any); empty: same origin only
    allowed_origins: tuple[str, ...] = ()
    #: a file holding the token every client gives (the path, never the token)
    token_file: str | None = None
    #: "auto": without a token the gateway may listen on loopback only; "none":
    #: clients without a token accepted on any address (logged once)
    auth: str = "auto"
    #: a file of allow/deny rules; the gateway's clients are the peer named like the gateway
    permissions_file: str | None = None
    #: a directory whose files are served over plain HTTP on the same port
    static_dir: str | None = None
    #: the I/O thread (selector) the gateway runs on (None: the default one)
    selector: str | None = None
    max_message_size: int = 1 << 20
    max_batch: int = 1_000
    max_subscriptions: int = 1_000
    max_requests: int = 1_000
    #: messages per second a session may send on average (0: no limit)
    message_rate: int = 1_000
    #: messages a session may send at once above the rate (0: one second's worth)
    message_burst: int = 0
    message_queue_size: int = 10_000
    handshake_timeout_ms: int = 10_000
    idle_timeout_ms: int = 60_000
    heartbeat_delay_ms: int = 20_000


@dataclass(frozen=True, slots=True)
class JrepClientConfig:
    """A federation with another node's J.REP gateway (``jrep.client.NAME.*``;
    docs/jrep.md, "Federation")."""

    name: str
    #: the gateway's WebSocket URL (``ws://host:port/jrep``)
    url: str
    #: a file holding the gateway's token (the path, never the token)
    token_file: str | None = None
    reconnect: bool = True
    reconnect_delay_ms: int = 5_000
    connect_timeout_ms: int = 10_000
    #: WebSocket pings (and J.REP Heartbeats when idle) every this many ms; 0: none
    heartbeat_ms: int = 0
    #: a file of allow/deny rules; the remote node is the peer named like the client
    permissions_file: str | None = None
    #: the I/O thread (selector) the client runs on (None: the default one)
    selector: str | None = None


@dataclass(frozen=True, slots=True)
class ActorConfig:
    """An actor the ``actorbus run`` command creates (``actor.NAME.*``)."""

    name: str
    #: dotted path of the Actor subclass (or a factory callable).
    class_path: str
    dispatcher: str | None = None
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
