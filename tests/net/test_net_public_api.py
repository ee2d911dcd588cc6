"""actorbus.net's public API: exactly these names, all importable; and no second
copy of the bus's enums."""

from __future__ import annotations

import importlib

import actorbus
import actorbus.net
import actorbus.net.protocol
from actorbus.bus import router

EXPECTED = {
    "DEFAULT_MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "IOThreadStats",
    "Link",
    "LinkProtocol",
    "LinkSettings",
    "LinkStats",
    "LinkStatus",
    "ProtocolSettings",
    "ProtocolState",
    "Service",
    "ServiceStats",
    "Side",
    "WireCounters",
    "tls_client_context",
    "tls_server_context",
}


def test_exports_are_exactly_the_public_names() -> None:
    assert set(actorbus.net.__all__) == EXPECTED
    assert len(actorbus.net.__all__) == len(EXPECTED)


def test_every_exported_name_imports() -> None:
    module = importlib.import_module("actorbus.net")
    for name in EXPECTED:
        assert getattr(module, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from actorbus.net import *", namespace)
    assert set(namespace) >= EXPECTED


def test_the_bus_enums_have_no_second_copy_in_net() -> None:
    bus_enums = {
        "FeedState": actorbus.FeedState,
        "Scope": actorbus.Scope,
        "ReplyStatus": actorbus.ReplyStatus,
        "Role": router.Role,
    }
    for module in (actorbus.net, actorbus.net.protocol):
        for name, bus_enum in bus_enums.items():
            exported = getattr(module, name, None)
            assert exported is None or exported is bus_enum, f"{module.__name__}.{name}"
            assert name not in module.__all__
