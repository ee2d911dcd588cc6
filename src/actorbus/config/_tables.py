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

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from actorbus.config._values import (
    _boolean,
    _classes,
    _factory,
    _gc_threshold,
    _host,
    _integer,
    _kind,
    _node_id,
    _record_file,
    _reference,
    _Setting,
    _sm_file,
    _ws_url,
)
from actorbus.config.schema import (
    DEFAULT_DISPATCHER,
    ActorConfig,
    ConnectionConfig,
    DispatcherConfig,
    GatewayConfig,
    JrepClientConfig,
    MulticastConfig,
    SelectorConfig,
    ServiceConfig,
)
from actorbus.config.settings import (
    ConnectionSettings,
    GatewaySettings,
    JrepClientSettings,
    MulticastSettings,
    ServiceSettings,
    settings_fields,
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


def _rows_of(settings_type: type) -> dict[str, _Setting]:
    """The rows of a settings type's fields, from their metadata: key -> row whose
    field is ``settings.ATTRIBUTE`` (the factory puts it in the settings object)."""
    rows: dict[str, _Setting] = {}
    for f, info in settings_fields(settings_type):
        assert info.row is not None  # every settings field can be written in a file
        row = info.row(f.name)
        rows[info.key] = dataclasses.replace(row, field=f"settings.{f.name}")
    return rows


def _aliases_of(settings_type: type) -> dict[str, str]:
    return {alias: info.key for _, info in settings_fields(settings_type) for alias in info.aliases}


def _with_settings(config_type: Callable[..., _T], settings_type: type) -> Callable[..., _T]:
    """A factory of ``config_type`` taking its own fields and ``settings.X`` ones."""

    def make(**fields: Any) -> _T:
        given = {k[len("settings.") :]: v for k, v in fields.items() if k.startswith("settings.")}
        own = {k: v for k, v in fields.items() if not k.startswith("settings.")}
        return config_type(**own, settings=settings_type(**given))

    return make


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
    factory=_with_settings(ServiceConfig, ServiceSettings),
    settings={
        "port": _integer("port", 0, 65535),
        "host": _host("host"),
        **_rows_of(ServiceSettings),
    },
    aliases=_aliases_of(ServiceSettings),
    required=("port",),
    unnamed="default",
)

_CONNECTIONS: _Section[ConnectionConfig] = _Section(
    noun="connection",
    list_key="connections",
    item_prefix="connection.",
    factory=_with_settings(ConnectionConfig, ConnectionSettings),
    settings={
        "host": _host("host"),
        "port": _integer("port", 1, 65535),
        **_rows_of(ConnectionSettings),
    },
    aliases=_aliases_of(ConnectionSettings),
    required=("host", "port"),
)

_GATEWAYS: _Section[GatewayConfig] = _Section(
    noun="gateway",
    list_key="jrep.gateways",
    item_prefix="jrep.gateway.",
    factory=_with_settings(GatewayConfig, GatewaySettings),
    settings={
        "port": _integer("port", 0, 65535),
        "host": _host("host"),
        **_rows_of(GatewaySettings),
    },
    required=("port",),
)

_JREP_CLIENTS: _Section[JrepClientConfig] = _Section(
    noun="client",
    list_key="jrep.clients",
    item_prefix="jrep.client.",
    factory=_with_settings(JrepClientConfig, JrepClientSettings),
    settings={"url": _ws_url("url"), **_rows_of(JrepClientSettings)},
    required=("url",),
)

_MULTICASTS: _Section[MulticastConfig] = _Section(
    noun="multicast channel",
    list_key="multicasts",
    item_prefix="multicast.",
    factory=_with_settings(MulticastConfig, MulticastSettings),
    settings=_rows_of(MulticastSettings),
)

_ACTORS: _Section[ActorConfig] = _Section(
    noun="actor",
    list_key="actors",
    item_prefix="actor.",
    factory=ActorConfig,
    settings={
        "class": _factory("class_path"),
        "dispatcher": _reference("dispatcher", "dispatcher"),
        "machine": _sm_file("machine"),
        "recordTo": _record_file("record_to"),
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
    _MULTICASTS,
    _ACTORS,
)
_SPARK = "spark."
#: Settings of the whole bus, written right after the prefix (no section, no name).
_TOP_LEVEL: Mapping[str, _Setting] = MappingProxyType(
    {"gc.threshold": _gc_threshold("gc_threshold"), "nodeId": _node_id("node_id")}
)
