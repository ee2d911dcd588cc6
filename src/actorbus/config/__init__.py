"""Configuration: a ``.properties`` file (or code) -> frozen, validated :class:`BusConfig`.

Theory of operation: :mod:`.properties` turns text into ``key=value`` entries
that remember their line; :mod:`.loader` reads the ``actorbus.`` (or ``eBus.``)
keys among them into the dataclasses of :mod:`.schema`, rejecting anything
invalid with a :class:`~actorbus.errors.ConfigError` that names file, line and
key.  The services, connections and J.REP gateways and clients carry one
immutable settings object each (:mod:`.settings`).  The runtime only ever
sees validated dataclasses.  Every key is described
in docs/configuration.md.
"""

from actorbus.config.loader import (
    ENV_VAR,
    PREFIXES,
    ConfigWarning,
    config_from_env,
    config_from_properties,
    dump_config,
    load_config,
)
from actorbus.config.properties import (
    Property,
    format_property,
    parse_properties,
    read_properties,
)
from actorbus.config.schema import (
    DEFAULT_DISPATCHER,
    ActorConfig,
    BusConfig,
    ConnectionConfig,
    DispatcherConfig,
    DispatcherKind,
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
    LinkSettings,
    MulticastSettings,
    ServiceSettings,
)

__all__ = [
    "DEFAULT_DISPATCHER",
    "ENV_VAR",
    "PREFIXES",
    "ActorConfig",
    "BusConfig",
    "ConfigWarning",
    "ConnectionConfig",
    "ConnectionSettings",
    "DispatcherConfig",
    "DispatcherKind",
    "GatewayConfig",
    "GatewaySettings",
    "JrepClientConfig",
    "JrepClientSettings",
    "LinkSettings",
    "MulticastConfig",
    "MulticastSettings",
    "Property",
    "SelectorConfig",
    "ServiceConfig",
    "ServiceSettings",
    "config_from_env",
    "config_from_properties",
    "dump_config",
    "format_property",
    "load_config",
    "parse_properties",
    "read_properties",
]
