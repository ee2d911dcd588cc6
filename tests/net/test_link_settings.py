"""The settings a properties file gives a service reach its running links, and
the keyword arguments of earlier releases still work, with a warning."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from nodes.support import RawPeer, buses, wait_for

from actorbus import Bus, UsageError
from actorbus.config import (
    ConnectionSettings,
    GatewaySettings,
    JrepClientSettings,
    LinkSettings,
    ServiceSettings,
)
from actorbus.net.protocol import LogoffReceived


def _patterns_until_closed(port: int, count: int) -> bool:
    """A peer subscribes ``count`` patterns; whether the node closed the link."""
    with RawPeer.connect(port, f"peer-{count}") as peer:
        peer.logon()
        for i in range(count):
            peer.proto.subscribe_pattern("linktest.Counter", 1, f"/p{i}/*")
        peer.send()
        try:
            peer.expect(LogoffReceived, timeout=1.0)
        except (AssertionError, TimeoutError):
            return False
        return True


def test_max_patterns_from_a_properties_file_is_what_the_link_enforces(tmp_path: Path) -> None:
    props = tmp_path / "app.properties"
    props.write_text(
        "actorbus.services=feeds\nactorbus.service.feeds.port=0\n"
        "actorbus.service.feeds.host=127.0.0.1\nactorbus.service.feeds.maxPatterns=7\n",
        encoding="utf-8",
    )
    with Bus.from_properties(props, node_id="node") as bus:
        (service,) = bus.net.services if bus.net is not None else ()
        assert service.settings.max_patterns == 7
        assert bus.config.services[0].settings is service.settings  # handed over as it is
        assert not _patterns_until_closed(service.port, 7)
        assert _patterns_until_closed(service.port, 8)
        wait_for(lambda: service.counters.links.over_limit == 1, "the link over the limit counted")


def test_a_plain_link_settings_serves_listen_and_connect() -> None:
    with buses("a", "b") as (a, b):
        service = a.listen(0, settings=LinkSettings(max_patterns=3))
        assert isinstance(service.settings, ServiceSettings)
        assert service.settings.max_patterns == 3
        link = b.connect("127.0.0.1", service.port, settings=LinkSettings(max_feeds=9))
        assert link.settings.max_feeds == 9
        assert link.wait_logged_on(5) == "a"


@pytest.mark.parametrize(
    ("method", "old", "new"),
    [
        ("listen", {"max_patterns": 5}, r"settings=LinkSettings\(max_patterns=5\)"),
        ("listen", {"heartbeat_delay": 2.0}, r"settings=LinkSettings\(heartbeat_delay=2.0\)"),
        ("listen", {"max_connections": 4}, r"settings=ServiceSettings\(max_connections=4\)"),
        ("connect", {"reconnect": True}, r"settings=ConnectionSettings\(reconnect=True\)"),
    ],
)
def test_the_old_keywords_of_listen_and_connect_warn_and_still_work(
    method: str, old: dict[str, object], new: str
) -> None:
    with buses("a", "b") as (a, b):
        service = a.listen(0)
        args = (0,) if method == "listen" else ("127.0.0.1", service.port)
        with pytest.warns(
            DeprecationWarning,
            match=rf"{method}\({next(iter(old))}=...\) is deprecated; pass {new}",
        ):
            made = getattr(b, method)(*args, **old)
        ((name, value),) = old.items()
        assert getattr(made.settings, name) == value


def test_an_old_keyword_warns_before_its_value_is_checked() -> None:
    with (
        buses("a") as (a,),
        pytest.raises(UsageError, match="without tls="),
        pytest.warns(DeprecationWarning, match=r"ConnectionSettings\(tls_server_name='x'\)"),
    ):
        a.connect("127.0.0.1", 1, tls_server_name="x")


def test_the_old_secret_file_and_peer_secrets_keywords_warn(tmp_path: Path) -> None:
    key = b"k" * 32
    path = tmp_path / "link.secret"
    path.write_bytes(key)
    path.chmod(0o600)
    with buses("a", "b", "c") as (a, b, c):
        with pytest.warns(DeprecationWarning, match=r"ServiceSettings\(secret_file="):
            service = a.listen(0, secret_file=path)
        with pytest.warns(DeprecationWarning, match=r"pass secret=\{node_id: secret"):
            other = a.listen(0, peer_secrets={"c": key})
        with pytest.warns(DeprecationWarning, match=r"ConnectionSettings\(secret_file="):
            link = b.connect("127.0.0.1", service.port, secret_file=path)
        assert link.wait_logged_on(5) == "a"
        assert c.connect("127.0.0.1", other.port, secret=key).wait_logged_on(5) == "a"


def test_the_old_keywords_of_serve_jrep_and_connect_jrep_warn() -> None:
    with buses("a", "b") as (a, b):
        with pytest.warns(DeprecationWarning, match=r"GatewaySettings\(path='/bus'\)"):
            gateway = a.serve_jrep(0, path="/bus")
        assert gateway.url.endswith("/bus")
        with pytest.warns(DeprecationWarning, match=r"JrepClientSettings\(reconnect_delay=0.05\)"):
            client = b.connect_jrep(gateway.url, reconnect_delay=0.05)
        assert client.wait_connected(5)


def test_an_unknown_keyword_is_a_type_error_and_a_wrong_settings_type_says_which() -> None:
    with buses("a") as (a,):
        with pytest.raises(TypeError, match="unexpected keyword argument 'max_pattern'"):
            a.listen(0, max_pattern=3)
        with pytest.raises(Exception, match=r"expected a ConnectionSettings"):
            a.connect("127.0.0.1", 1, settings=ServiceSettings())  # type: ignore[arg-type]
        with pytest.raises(Exception, match=r"expected a GatewaySettings"):
            a.serve_jrep(0, settings=JrepClientSettings())  # type: ignore[arg-type]


def test_replace_changes_one_field() -> None:
    base = ConnectionSettings(reconnect=True)
    tweaked = dataclasses.replace(base, max_patterns=7)
    assert (tweaked.reconnect, tweaked.max_patterns) == (True, 7)
    assert GatewaySettings().burst == 1000.0
