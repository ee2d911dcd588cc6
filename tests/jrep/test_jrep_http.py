"""The gateway's port over plain HTTP and at the handshake: the JavaScript client
file, a static directory (never anything outside it), the origin allow-list, the
token, and the rule that a gateway without a token stays on loopback.  Plus the
properties keys that configure a gateway."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest
from jrep_support import WAIT, Client, serving
from websockets.exceptions import InvalidStatus

from actorbus import Bus, ConfigError
from actorbus.config import GatewaySettings, load_config


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Content-Type", "")
    finally:
        conn.close()


def test_the_client_file_and_a_static_directory(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<h1>hi</h1>")
    (tmp_path / "app.js").write_text("go()")
    (tmp_path.parent / "secret.txt").write_text("no")
    with serving(GatewaySettings(static_dir=tmp_path)) as (_bus, gateway):
        status, body, kind = get(gateway.port, "/actorbus.js")
        assert status == 200 and b"actorbus" in body and kind.startswith("text/javascript")
        assert get(gateway.port, "/")[:2] == (200, b"<h1>hi</h1>")
        assert get(gateway.port, "/app.js")[1] == b"go()"
        assert get(gateway.port, "/../secret.txt")[0] == 404
        assert get(gateway.port, "/%2e%2e/secret.txt")[0] == 404
        assert get(gateway.port, "/nothing")[0] == 404
        assert get(gateway.port, "/jrep")[0] == 426  # the J.REP path wants a WebSocket
        assert gateway.counters.http_requests == 7


def test_origins_outside_the_allow_list_are_refused() -> None:
    with serving(GatewaySettings(allowed_origins=["https://app.example"])) as (_bus, gateway):
        with Client(gateway, origin="https://app.example") as c:
            c.join()
        with pytest.raises(InvalidStatus) as refused:
            Client(gateway, origin="https://evil.example")
        assert refused.value.response.status_code == 403
        assert gateway.counters.refused == 1


def test_by_default_only_the_same_origin_is_allowed() -> None:
    with serving() as (_bus, gateway):
        with Client(gateway, origin=f"http://127.0.0.1:{gateway.port}") as c:
            c.join()
        with Client(gateway) as c:  # no Origin: not a browser
            c.join()
        with pytest.raises(InvalidStatus):
            Client(gateway, origin="http://elsewhere.example")


def test_a_token_is_required_when_the_gateway_has_one() -> None:
    token = b"t" * 24
    with serving(token=token) as (_bus, gateway):
        with pytest.raises(InvalidStatus) as refused:
            Client(gateway)
        assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus):
            Client(gateway, query="?token=wrong")
        with Client(gateway, query="?token=" + token.decode()) as c:
            c.join()
        with Client(gateway, additional_headers={"Authorization": "Bearer " + token.decode()}) as c:
            c.join()
        assert gateway.counters.refused == 2


def test_no_token_beyond_loopback_is_a_config_error() -> None:
    bus = Bus(node_id="gw")
    try:
        with pytest.raises(ConfigError, match="without a token") as error:
            bus.serve_jrep(0, "0.0.0.0")
        assert "token_file=" in str(error.value)
    finally:
        bus.close()


def test_a_gateway_from_a_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.jrep.gateways=web\n"
        "actorbus.jrep.gateway.web.port=0\n"
        "actorbus.jrep.gateway.web.path=/bus\n"
        "actorbus.jrep.gateway.web.allowedOrigins=http://localhost:8080, *\n"
        "actorbus.jrep.gateway.web.maxSubscriptions=7\n"
        "actorbus.jrep.gateway.web.idleTimeout=30000\n"
    )
    config = load_config(path)
    (gw,) = config.gateways
    s = gw.settings
    assert (s.path, s.max_subscriptions, s.idle_timeout) == ("/bus", 7, 30.0)
    assert s.allowed_origins == ("http://localhost:8080", "*")
    bus = Bus(config, node_id="gw")
    try:
        (gateway,) = bus.net.gateways
        assert gateway.url.endswith("/bus")
        assert gateway.settings.max_subscriptions == 7
        with Client(gateway) as c:
            c.join()
    finally:
        bus.close()


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("actorbus.jrep.gateway.web.path=jrep", "absolute URL path"),
        ("actorbus.jrep.gateway.web.allowedOrigins=example.com", "not an origin"),
        ("actorbus.jrep.gateway.web.idleTimeout=0", "idleTimeout"),
        ("actorbus.jrep.gateway.web.staticDir=/no/such/dir", "does not exist"),
        ("actorbus.jrep.gateway.web.maxSubscribtions=3", "did you mean"),
    ],
)
def test_gateway_key_errors_name_file_line_and_key(
    tmp_path: Path, line: str, fragment: str
) -> None:
    path = tmp_path / "node.properties"
    path.write_text(f"actorbus.jrep.gateways=web\nactorbus.jrep.gateway.web.port=0\n{line}\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert f"{path}:3:" in str(error.value)
    assert error.value.key == line.split("=", maxsplit=1)[0]
    assert fragment in str(error.value)
