"""The settings types: one field per setting, its key, default, unit and doc
beside it; validation; the loader's table and the docs table made from them."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import math
import re
from pathlib import Path

import pytest

from actorbus import Bus, ConfigError, UsageError
from actorbus.config import (
    ConnectionSettings,
    GatewaySettings,
    JrepClientSettings,
    LinkSettings,
    ServiceSettings,
    dump_config,
    load_config,
)
from actorbus.config.settings import MulticastSettings, key_of, markdown_table, settings_fields

ROOT = Path(__file__).resolve().parents[2]
TYPES = (
    LinkSettings,
    ServiceSettings,
    ConnectionSettings,
    GatewaySettings,
    JrepClientSettings,
    MulticastSettings,
)


def test_every_key_is_the_camel_case_of_its_attribute() -> None:
    assert key_of("max_patterns") == "maxPatterns"
    assert key_of("max_connections_per_host") == "maxConnectionsPerHost"
    for cls in TYPES:
        for f, info in settings_fields(cls):
            assert info.key == key_of(f.name), (cls, f.name)
            assert not f.name.endswith("_ms"), (cls, f.name)
            assert info.doc, (cls, f.name)


def test_the_types_are_frozen_and_changed_with_replace() -> None:
    s = LinkSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.max_patterns = 7  # type: ignore[misc]
    t = dataclasses.replace(s, max_patterns=7)
    assert (t.max_patterns, s.max_patterns) == (7, 1024)
    service = ServiceSettings(max_patterns=7, address_filter=["a", "b:1"])  # type: ignore[arg-type]
    assert isinstance(service, LinkSettings)
    assert service.address_filter == ("a", "b:1")  # any iterable of str, kept as a tuple


@pytest.mark.parametrize(
    ("cls", "field", "value", "says"),
    [
        (LinkSettings, "max_patterns", 0, r"LinkSettings\(max_patterns=0\): expected an int >= 1"),
        (LinkSettings, "max_patterns", 1.5, r"max_patterns=1.5\): expected an int >= 1"),
        (LinkSettings, "max_frame_size", 100, r"expected an int 1024..4294967291 \(bytes\)"),
        (LinkSettings, "heartbeat_delay", -1.0, r"expected a finite number of seconds >= 0"),
        (LinkSettings, "frame_timeout", math.inf, r"a properties file gives it in milliseconds"),
        (LinkSettings, "byte_order", "middle", r"expected 'big' or 'little'"),
        (ServiceSettings, "auth", "maybe", r"ServiceSettings\(auth='maybe'\): expected 'auto'"),
        (ServiceSettings, "max_connections", 0, r"the properties key maxConnections\)"),
        (ConnectionSettings, "reconnect", "yes", r"expected True or False"),
        (ConnectionSettings, "bind_port", 70000, r"expected an int 0..65535"),
        (GatewaySettings, "idle_timeout", 0.0, r"seconds > 0"),
        (GatewaySettings, "path", "jrep", r"expected an absolute URL path"),
        (JrepClientSettings, "heartbeat", "1", r"the properties key heartbeat in milliseconds"),
    ],
)
def test_invalid_values_say_the_field_the_key_and_what_is_allowed(
    cls: type, field: str, value: object, says: str
) -> None:
    with pytest.raises(UsageError, match=says) as info:
        cls(**{field: value})
    assert f"{key_of(field)}" in str(info.value)


def test_the_high_water_mark_is_checked_against_the_queue_bytes() -> None:
    with pytest.raises(UsageError, match="lower it or leave it at -1"):
        LinkSettings(message_queue_bytes=100, message_queue_high_water=200)


def test_a_rule_between_two_keys_is_a_config_error_on_the_line_of_the_last(
    tmp_path: Path,
) -> None:
    path = tmp_path / "app.properties"
    path.write_text(
        "actorbus.services=s\nactorbus.service.s.port=0\n"
        "actorbus.service.s.messageQueueBytes=100\nactorbus.service.s.messageQueueHighWater=200\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert (info.value.line, info.value.key) == (4, "actorbus.service.s.messageQueueHighWater")
    assert "lower it or leave it at -1" in str(info.value)


def test_times_are_milliseconds_in_a_file_and_seconds_in_python(tmp_path: Path) -> None:
    path = tmp_path / "app.properties"
    path.write_text(
        "actorbus.connections=c\nactorbus.connection.c.host=h\nactorbus.connection.c.port=1\n"
        "actorbus.connection.c.heartbeatDelay=1500\nactorbus.connection.c.reconnectDelay=250\n"
        "actorbus.connection.c.maxPatterns=7\n",
        encoding="utf-8",
    )
    c = load_config(path).connections[0].settings
    assert (c.heartbeat_delay, c.reconnect_delay, c.max_patterns) == (1.5, 0.25, 7)
    text = dump_config(load_config(path))
    assert "actorbus.connection.c.heartbeatDelay=1500\n" in text
    assert "actorbus.connection.c.reconnectDelay=250\n" in text
    assert "actorbus.connection.c.maxPatterns=7\n" in text


def test_the_old_class_names_warn() -> None:
    import actorbus.config.schema as schema
    from actorbus.net import ProtocolSettings

    with pytest.warns(DeprecationWarning, match=r"LinkConfig is deprecated; use .*LinkSettings"):
        assert schema.LinkConfig is LinkSettings  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"use LinkSettings\(max_patterns=3\)"):
        old = ProtocolSettings(max_peer_patterns=3)
    assert old == LinkSettings(max_patterns=3)


@pytest.mark.parametrize("method", ["listen", "connect", "serve_jrep", "connect_jrep"])
def test_the_front_door_takes_at_most_eight_parameters(method: str) -> None:
    parameters = inspect.signature(getattr(Bus, method)).parameters
    assert len(parameters) - 1 <= 8, list(parameters)  # (self excluded)
    assert "settings" in parameters


# --------------------------------------------------------------------- the docs tables


def _tool() -> object:
    spec = importlib.util.spec_from_file_location(
        "settings_table", ROOT / "tools" / "settings_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_tables_are_the_generated_ones() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    blocks = dict(
        re.findall(r"<!-- settings-table:(\w+) -->\n(.*?)<!-- /settings-table -->", text, re.S)
    )
    assert set(blocks) == {cls.__name__ for cls in TYPES}
    for cls in TYPES:
        assert blocks[cls.__name__] == markdown_table(cls), (
            f"docs/configuration.md's {cls.__name__} table is out of date: run make settings-tables"
        )
    assert _tool().rewrite(text) == text  # type: ignore[attr-defined]


def test_a_table_names_key_attribute_default_and_unit() -> None:
    table = markdown_table(LinkSettings)
    assert "| `maxPatterns` | `max_patterns` | `1024` | wildcard subscriptions |" in table
    assert (
        "| `logonTimeout` | `logon_timeout` | `10000` (10 s) | seconds (file: milliseconds) |"
        in table
    )
    assert "maxPatterns" not in markdown_table(ServiceSettings)  # the link rows are LinkSettings'
    assert "(alias `reconnectTime`)" in markdown_table(ConnectionSettings)


def test_the_settings_module_exports() -> None:
    import actorbus.config.settings as module

    assert sorted(module.__all__) == [
        "ConnectionSettings",
        "GatewaySettings",
        "JrepClientSettings",
        "LinkSettings",
        "MulticastSettings",
        "ServiceSettings",
        "SettingInfo",
        "default_of",
        "file_value",
        "from_old_keywords",
        "key_of",
        "markdown_table",
        "setting",
        "settings_fields",
    ]
