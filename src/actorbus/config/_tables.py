"""The tables of the config loader: every section, its keys and how each is parsed.

A :class:`_Section` says how one kind of named item (dispatcher, selector, service,
connection, actor) is spelled in a file — its list key, its per-name prefix, its
settings with their parsers (:mod:`actorbus.config._values`), aliases, required
settings — and which :mod:`actorbus.config.schema` dataclass it builds;
:data:`_TOP_LEVEL` does the same for the settings of the whole bus.  They are kept
apart from the loader (:mod:`actorbus.config.loader`) because they are data: the
loader reads files through them and :func:`~actorbus.config.dump_config` writes
files from them, and a new key is one new row here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from actorbus.config._values import (
    _address_filter,
    _auth,
    _boolean,
    _byte_order,
    _classes,
    _directory,
    _factory,
    _gc_threshold,
    _host,
    _integer,
    _kind,
    _node_id,
    _origins,
    _permissions_file,
    _reference,
    _secret_file,
    _Setting,
    _tls_file,
    _url_path,
    _ws_url,
)
from actorbus.config.schema import (
    DEFAULT_DISPATCHER,
    ActorConfig,
    ConnectionConfig,
    DispatcherConfig,
    GatewayConfig,
    JrepClientConfig,
    SelectorConfig,
    ServiceConfig,
)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class _Section(Generic[_T]):
    """How one kind of named item is spelled and built."""

    noun: str  #: used in messages and slots: "dispatcher"
    list_key: str  #: "dispatchers"
    item_prefix: str  #: "dispatcher."
    factory: Callable[..., _T]
    settings: Mapping[str, _Setting]  #: setting as written in files -> row
    aliases: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    #: name given to ``item_prefix + SETTING`` keys (the unnamed service).
    unnamed: str | None = None
    #: dataclass field receiving every unknown setting as a string (actors).
    options_field: str | None = None
    #: names known when the list key is absent (for references only).
    implicit: tuple[str, ...] = ()


def _link_settings() -> dict[str, _Setting]:
    return {
        "inputBufferSize": _integer("input_buffer_size", 0, unit="bytes"),
        "outputBufferSize": _integer("output_buffer_size", 0, unit="bytes"),
        "byteOrder": _byte_order("byte_order"),
        "messageQueueSize": _integer("message_queue_size", 0, unit="messages, 0 = unlimited"),
        "heartbeatDelay": _integer("heartbeat_delay_ms", 0, unit="milliseconds, 0 = off"),
        "heartbeatReplyDelay": _integer("heartbeat_reply_delay_ms", 0, unit="milliseconds"),
        "inputBacklog": _integer("input_backlog", 0, unit="messages, 0 = never pause"),
        "logonTimeout": _integer("logon_timeout_ms", 0, unit="milliseconds, 0 = never"),
        "frameTimeout": _integer("frame_timeout_ms", 0, unit="milliseconds, 0 = never"),
        "maxFrameSize": _integer("max_frame_size", 1_024, 0xFFFF_FFFB, unit="bytes"),
        "maxKeys": _integer("max_keys", 1, unit="keys"),
        "maxSubjectLength": _integer("max_subject_length", 1, unit="characters"),
        "maxFeeds": _integer("max_feeds", 1, unit="advertisements and subscriptions"),
        "maxPatterns": _integer("max_patterns", 1, unit="wildcard subscriptions"),
        "maxGroups": _integer("max_groups", 1, unit="queue groups"),
        "messageQueueBytes": _integer("message_queue_bytes", 0, unit="bytes, 0 = unlimited"),
        "messageQueueHighWater": _integer(
            "message_queue_high_water", -1, unit="bytes, -1 = half of messageQueueBytes, 0 = never"
        ),
    }


_DISPATCHERS: _Section[DispatcherConfig] = _Section(
    noun="dispatcher",
    list_key="dispatchers",
    item_prefix="dispatcher.",
    factory=DispatcherConfig,
    settings={
        "runQueueType": _kind("kind"),
        "threadCount": _integer("thread_count", 1),
        "spinLimit": _integer("spin_limit", 0, unit="spins"),
        "parkTime": _integer("park_time_ns", 0, unit="nanoseconds"),
        "priority": _integer("priority", 1, 10),
        "quantum": _integer("quantum_ns", 1, unit="nanoseconds"),
        "isDefault": _boolean("is_default"),
        "classes": _classes("classes"),
    },
    aliases={"numberThreads": "threadCount"},
    implicit=(DEFAULT_DISPATCHER,),
)

_SELECTORS: _Section[SelectorConfig] = _Section(
    noun="selector",
    list_key="net.selectors",
    item_prefix="net.selector.",
    factory=SelectorConfig,
    settings={
        "type": _kind("kind"),
        "isDefault": _boolean("is_default"),
        "priority": _integer("priority", 1, 10),
        "spinLimit": _integer("spin_limit", 0, unit="spins"),
        "parkTime": _integer("park_time_ns", 0, unit="nanoseconds"),
        "dispatcher": _reference("dispatcher", "dispatcher"),
    },
)

_SERVICES: _Section[ServiceConfig] = _Section(
    noun="service",
    list_key="services",
    item_prefix="service.",
    factory=ServiceConfig,
    settings={
        "port": _integer("port", 0, 65535),
        "host": _host("host"),
        "addressFilter": _address_filter("address_filter"),
        "serviceSelector": _reference("service_selector", "selector"),
        "connectionSelector": _reference("connection_selector", "selector"),
        **_link_settings(),
        "maxConnections": _integer("max_connections", 1, unit="connections"),
        "maxConnectionsPerHost": _integer("max_connections_per_host", 1, unit="connections"),
        "acceptBacklog": _integer("accept_backlog", 1, unit="connections"),
        "secretFile": _secret_file("secret_file"),
        "peerSecretsFile": _secret_file("peer_secrets_file", holds_one=False),
        "auth": _auth("auth"),
        "permissionsFile": _permissions_file("permissions_file"),
        "tlsCertFile": _tls_file("tls_cert_file", "cert"),
        "tlsKeyFile": _tls_file("tls_key_file", "key"),
        "tlsCaFile": _tls_file("tls_ca_file", "ca"),
    },
    required=("port",),
    unnamed="default",
)

_CONNECTIONS: _Section[ConnectionConfig] = _Section(
    noun="connection",
    list_key="connections",
    item_prefix="connection.",
    factory=ConnectionConfig,
    settings={
        "host": _host("host"),
        "port": _integer("port", 1, 65535),
        "bindPort": _integer("bind_port", 0, 65535),
        "selector": _reference("selector", "selector"),
        "reconnect": _boolean("reconnect"),
        "reconnectDelay": _integer("reconnect_delay_ms", 0, unit="milliseconds"),
        "connectTimeout": _integer("connect_timeout_ms", 0, unit="milliseconds"),
        **_link_settings(),
        "secretFile": _secret_file("secret_file"),
        "permissionsFile": _permissions_file("permissions_file"),
        "tlsCaFile": _tls_file("tls_ca_file", "ca"),
        "tlsCertFile": _tls_file("tls_cert_file", "cert"),
        "tlsKeyFile": _tls_file("tls_key_file", "key"),
        "tlsServerName": _host("tls_server_name"),
    },
    aliases={"reconnectTime": "reconnectDelay"},
    required=("host", "port"),
)

_GATEWAYS: _Section[GatewayConfig] = _Section(
    noun="gateway",
    list_key="jrep.gateways",
    item_prefix="jrep.gateway.",
    factory=GatewayConfig,
    settings={
        "port": _integer("port", 0, 65535),
        "host": _host("host"),
        "path": _url_path("path"),
        "allowedOrigins": _origins("allowed_origins"),
        "tokenFile": _secret_file("token_file"),
        "auth": _auth("auth"),
        "permissionsFile": _permissions_file("permissions_file"),
        "staticDir": _directory("static_dir"),
        "selector": _reference("selector", "selector"),
        "maxMessageSize": _integer("max_message_size", 1, unit="bytes"),
        "maxBatch": _integer("max_batch", 1, unit="messages per wire message"),
        "maxSubscriptions": _integer("max_subscriptions", 0, unit="keys per session"),
        "maxRequests": _integer("max_requests", 0, unit="requests per session"),
        "messageRate": _integer("message_rate", 0, unit="messages per second, 0 = no limit"),
        "messageBurst": _integer("message_burst", 0, unit="messages, 0 = one second's worth"),
        "messageQueueSize": _integer("message_queue_size", 1, unit="messages"),
        "handshakeTimeout": _integer("handshake_timeout_ms", 1, unit="milliseconds"),
        "idleTimeout": _integer("idle_timeout_ms", 1, unit="milliseconds"),
        "heartbeatDelay": _integer("heartbeat_delay_ms", 0, unit="milliseconds, 0 = off"),
    },
    required=("port",),
)

_JREP_CLIENTS: _Section[JrepClientConfig] = _Section(
    noun="client",
    list_key="jrep.clients",
    item_prefix="jrep.client.",
    factory=JrepClientConfig,
    settings={
        "url": _ws_url("url"),
        "tokenFile": _secret_file("token_file"),
        "reconnect": _boolean("reconnect"),
        "reconnectDelay": _integer("reconnect_delay_ms", 0, unit="milliseconds"),
        "connectTimeout": _integer("connect_timeout_ms", 0, unit="milliseconds"),
        "heartbeat": _integer("heartbeat_ms", 0, unit="milliseconds, 0 = off"),
        "permissionsFile": _permissions_file("permissions_file"),
        "selector": _reference("selector", "selector"),
    },
    required=("url",),
)

_ACTORS: _Section[ActorConfig] = _Section(
    noun="actor",
    list_key="actors",
    item_prefix="actor.",
    factory=ActorConfig,
    settings={
        "class": _factory("class_path"),
        "dispatcher": _reference("dispatcher", "dispatcher"),
    },
    required=("class",),
    options_field="options",
)

#: In dependency order: references point to earlier sections only.
_SECTIONS: tuple[_Section[Any], ...] = (
    _DISPATCHERS,
    _SELECTORS,
    _SERVICES,
    _CONNECTIONS,
    _GATEWAYS,
    _JREP_CLIENTS,
    _ACTORS,
)
_SPARK = "spark."
#: Settings of the whole bus, written right after the prefix (no section, no name).
_TOP_LEVEL: Mapping[str, _Setting] = MappingProxyType(
    {"gc.threshold": _gc_threshold("gc_threshold"), "nodeId": _node_id("node_id")}
)
