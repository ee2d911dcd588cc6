"""The multicast channel's settings: checks in code, the ``multicast.NAME.*``
keys of a properties file, and writing them back."""

from __future__ import annotations

import pytest

from actorbus.config import config_from_properties, dump_config, parse_properties
from actorbus.config.settings import MulticastSettings
from actorbus.errors import ConfigError, UsageError


def load(text: str) -> object:
    return config_from_properties(parse_properties(text))


def test_the_group_must_be_an_ipv4_multicast_address() -> None:
    for bad in ("10.0.0.1", "239.1.2", "ff02::1", 239):
        with pytest.raises(UsageError, match="IPv4 multicast address"):
            MulticastSettings(group=bad)  # type: ignore[arg-type]
    assert MulticastSettings(group="224.0.0.251").group == "224.0.0.251"


def test_channels_come_from_multicast_keys_and_are_written_back() -> None:
    config = load(
        "actorbus.multicasts=a,b\n"
        "actorbus.multicast.a.group=239.1.2.3\n"
        "actorbus.multicast.a.subjects=/x/...,prices.*\n"
        "actorbus.multicast.a.cacheAge=5000\n"
        "actorbus.multicast.a.naggingWindowInterval=2000\n"
        "actorbus.multicast.b.port=45000\n"
    )
    a, b = config.multicasts  # type: ignore[attr-defined]
    assert (a.name, a.settings.group, a.settings.subjects) == (
        "a",
        "239.1.2.3",
        ("/x/...", "prices.*"),
    )
    assert (a.settings.cache_age, a.settings.nagging_window_interval) == (5.0, 2.0)
    assert (b.name, b.settings.port, b.settings.group) == ("b", 45000, MulticastSettings().group)
    again = load(dump_config(config))  # type: ignore[arg-type]
    assert again.multicasts == config.multicasts  # type: ignore[attr-defined]


def test_a_bad_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"multicast\.a\.group"):
        load("actorbus.multicasts=a\nactorbus.multicast.a.group=10.1.1.1\n")
    with pytest.raises(ConfigError, match=r"multicast\.a\.ttl"):
        load("actorbus.multicasts=a\nactorbus.multicast.a.ttl=300\n")
