"""A gateway's ``/inspect.json`` and ``/metrics`` over real HTTP: off by default,
behind the gateway's token, and their numbers are the node's own counters after
known traffic over a real TCP link (the metrics parsed by Prometheus' own
parser)."""

from __future__ import annotations

import dataclasses
import http.client
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demos.calculator.actors import Calculator
from jrep_support import WAIT
from prometheus_client.parser import text_string_to_metric_families

from actorbus import Actor, Bus, ConfigError, FeedState, Notification, Reply, Request
from actorbus.config import GatewaySettings, load_config
from actorbus.testing import wait_until

ON = GatewaySettings(inspect_page=True, metrics=True)


class Tick(Notification, type_name="inspectwebtest.Tick"):
    n: int


class Sum(Reply, type_name="inspectwebtest.Sum"):
    total: int


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Content-Type", "")
    finally:
        conn.close()


def scrape(
    port: int, headers: dict[str, str] | None = None
) -> dict[tuple[str, frozenset[Any]], float]:
    """Every sample of ``/metrics``, by (name, labels), as Prometheus' parser reads them."""
    status, body, kind = get(port, "/metrics", headers)
    assert status == 200, body
    assert kind.startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[Any]], float], name: str, **labels: str) -> float:
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) == 1, (name, labels, found)
    return found[0]


class Holder(Actor):
    """Takes Ticks; the first one waits until ``release`` is set (its mailbox fills)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.release = threading.Event()
        self.holding = threading.Event()
        self.seen = 0

    def startup(self) -> None:
        self.subscribe(Tick, "/held", on_message=self.take)

    def take(self, msg: Tick, feed: Any) -> None:
        self.seen += 1
        self.holding.set()
        assert self.release.wait(WAIT)


@pytest.fixture
def two_nodes() -> Iterator[tuple[Bus, Bus]]:
    a, b = Bus(node_id="A"), Bus(node_id="B")
    try:
        yield a, b
    finally:
        b.close()
        a.close()


def test_off_by_default_and_each_switch_turns_on_its_routes() -> None:
    with Bus(node_id="gw") as bus:
        plain = bus.serve_jrep(0, name="plain")
        for path in ("/inspect", "/inspect.js", "/inspect.json", "/metrics"):
            assert get(plain.port, path)[0] == 404, path
        page = bus.serve_jrep(0, name="page", settings=GatewaySettings(inspect_page=True))
        assert get(page.port, "/metrics")[0] == 404
        status, body, kind = get(page.port, "/inspect")
        assert status == 200 and kind.startswith("text/html") and b"/inspect.js" in body
        assert get(page.port, "/inspect.js")[2].startswith("text/javascript")
        status, body, kind = get(page.port, "/inspect.json")
        assert status == 200 and kind.startswith("application/json")
        assert json.loads(body)["node"] == "gw"
        metrics = bus.serve_jrep(0, name="metrics", settings=GatewaySettings(metrics=True))
        assert get(metrics.port, "/inspect.json")[0] == 404
        assert get(metrics.port, "/metrics")[0] == 200


def test_the_page_its_json_and_the_metrics_need_the_gateways_token() -> None:
    token = "k" * 24
    with Bus(node_id="gw") as bus:
        gateway = bus.serve_jrep(0, name="web", settings=ON, token=token.encode())
        for path in ("/inspect", "/inspect.json", "/metrics"):
            status, body, _ = get(gateway.port, path)
            assert status == 401 and b"?token=" in body, path
            assert get(gateway.port, path + "?token=wrong")[0] == 401
            assert get(gateway.port, f"{path}?token={token}")[0] == 200
            assert get(gateway.port, path, {"Authorization": f"Bearer {token}"})[0] == 200
        # the script holds no data: a page loads it before it can say its token
        assert get(gateway.port, "/inspect.js")[0] == 200
        assert gateway.counters.refused == 6


def test_beyond_loopback_without_a_token_is_refused_as_for_websockets() -> None:
    with Bus(node_id="gw") as bus, pytest.raises(ConfigError, match="without a token"):
        bus.serve_jrep(0, "0.0.0.0", name="web", settings=ON)


def test_metrics_without_prometheus_client_say_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with Bus(node_id="gw") as bus, pytest.raises(ConfigError, match=r"actorbus\[metrics\]"):
        bus.serve_jrep(0, name="web", settings=GatewaySettings(metrics=True))


def test_metrics_and_json_show_known_traffic(two_nodes: tuple[Bus, Bus]) -> None:
    a, b = two_nodes
    gateway = a.serve_jrep(0, name="web", settings=ON)
    service = a.listen(0, name="feeds")
    link = b.connect("127.0.0.1", service.port, name="to-a")
    link.wait_logged_on(WAIT)
    inbox = b.inbox(Tick, "/t")
    publisher = a.publisher(Tick, "/t")
    assert inbox.wait_up(WAIT)
    assert wait_until(lambda: publisher.feed_state is FeedState.UP, WAIT)
    for n in range(100):
        publisher.publish(Tick("/t", n=n))
    for _ in range(100):
        assert inbox.receive(WAIT) is not None
    assert wait_until(lambda: link.counters.messages_in == 100, WAIT)

    (accepted,) = service.links
    out = accepted.counters
    samples = scrape(gateway.port)
    on_link = {"node": "A", "link": accepted.name, "peer": "B"}
    assert value(samples, "actorbus_link_messages_total", direction="out", **on_link) == 100
    assert value(samples, "actorbus_link_messages_total", direction="in", **on_link) == 0
    assert value(samples, "actorbus_link_bytes_total", direction="out", **on_link) == out.bytes_out
    assert out.bytes_out > 100 * 4
    assert value(samples, "actorbus_link_dropped_total", **on_link) == 0
    assert value(samples, "actorbus_link_lost_total", **on_link) == 0
    assert value(samples, "actorbus_link_logged_on", **on_link) == 1
    row = {"type": "inspectwebtest.Tick", "subject": "/t"}
    assert value(samples, "actorbus_feed_up", role="publisher", **row) == 1
    assert value(samples, "actorbus_requests_outstanding", node="A") == 0
    assert value(samples, "actorbus_gateway_sessions", gateway="web") == 0

    # the publisher goes DOWN: so does its row, at the next scrape
    publisher.update_feed_state(FeedState.DOWN)
    assert value(scrape(gateway.port), "actorbus_feed_up", role="publisher", **row) == 0

    status, body, _ = get(gateway.port, "/inspect.json")
    seen = json.loads(body)
    assert status == 200 and seen["node"] == "A"
    (listed,) = [x for x in seen["links"] if x["name"] == accepted.name]
    assert (listed["peer_node"], listed["messages_out"], listed["status"]) == (
        "B",
        100,
        "logged on",
    )
    (feed,) = [f for f in seen["feeds"] if f["subject"] == "/t" and f["role"] == "publisher"]
    assert (feed["message_type"], feed["count"], feed["up"]) == ("inspectwebtest.Tick", 1, 0)
    # the key's history: UP when the publisher came, DOWN now
    (history,) = [h for h in seen["feed_history"] if h["subject"] == "/t"]
    assert [c["up"] for c in history["changes"]] == [True, False]


def test_dispatcher_tasks_and_mailbox_depths_are_the_runtimes_own() -> None:
    with Bus(node_id="A") as bus:
        gateway = bus.serve_jrep(0, name="web", settings=GatewaySettings(metrics=True))
        holder = Holder("holder")
        bus.register(holder)
        bus.startup([holder]).wait(WAIT)
        publisher = bus.publisher(Tick, "/held")
        assert wait_until(lambda: publisher.feed_state is FeedState.UP, WAIT)
        for n in range(6):
            publisher.publish(Tick("/held", n=n))
        assert holder.holding.wait(WAIT)
        try:
            samples = scrape(gateway.port)
            depth = value(samples, "actorbus_mailbox_depth", actor="holder")
            assert depth == 5  # one running, five queued behind it
            assert value(samples, "actorbus_dispatcher_queued_tasks", dispatcher="default") == 5
            assert value(samples, "actorbus_series_unlisted", metric="actorbus_mailbox_depth") == 0
        finally:
            holder.release.set()
        assert wait_until(lambda: holder.seen == 6, WAIT)

        def scraped_tasks_are_the_runtimes() -> bool:
            scraped = value(scrape(gateway.port), "actorbus_dispatcher_tasks_total")
            return scraped == bus.runtime.stats()["default"].tasks_run >= 7  # startup, 6 ticks

        assert wait_until(scraped_tasks_are_the_runtimes, WAIT)
        assert value(scrape(gateway.port), "actorbus_mailbox_depth", actor="holder") == 0


class Add(Request, type_name="inspectwebtest.Add", replies=(Sum,)):
    a: int
    b: int


class Adder(Actor):
    def startup(self) -> None:
        self.serve(Add, "/add", lambda q: Sum(q.subject, total=q.a + q.b))
        self.replier(Add, "/never", on_request=lambda incoming: None)  # never answers


def test_request_durations_are_a_histogram_only_while_metrics_are_served() -> None:
    with Bus(node_id="A") as bus:
        adder = Adder("adder")
        bus.register(adder)
        bus.startup([adder]).wait(WAIT)
        bus.request_all(Add("/add", a=1, b=2), WAIT)
        assert bus.router.request_latencies is None  # no gateway serves metrics: no clock read
        bus.serve_jrep(0, name="page", settings=GatewaySettings(inspect_page=True))
        assert bus.router.request_latencies is None
        gateway = bus.serve_jrep(0, name="web", settings=GatewaySettings(metrics=True))
        assert bus.router.request_latencies is not None
        for n in range(3):
            (reply,) = bus.request_all(Add("/add", a=n, b=1), WAIT)
            assert isinstance(reply, Sum) and reply.total == n + 1
        samples = scrape(gateway.port)
        assert value(samples, "actorbus_request_duration_seconds_count", node="A") == 3
        assert value(samples, "actorbus_request_duration_seconds_bucket", le="+Inf") == 3
        assert 0 < value(samples, "actorbus_request_duration_seconds_sum") < 3 * WAIT
        assert value(samples, "actorbus_request_duration_seconds_bucket", le="0.0001") <= 3
        assert value(samples, "actorbus_requests_outstanding", node="A") == 0
        # a request that times out ends too: counted once, after its timeout
        (timed_out,) = bus.request_all(Add("/never", a=0, b=0), 0.2)
        assert "timed out" in (timed_out.reason or "")
        samples = scrape(gateway.port)
        assert value(samples, "actorbus_request_duration_seconds_count", node="A") == 4
        assert value(samples, "actorbus_request_duration_seconds_bucket", le="0.1") == 3
        assert value(samples, "actorbus_request_duration_seconds_bucket", le="+Inf") == 4
        assert value(samples, "actorbus_request_duration_seconds_sum") >= 0.2


def test_a_machine_diagram_is_svg_or_its_dot_text_without_graphviz(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with Bus(node_id="A") as bus:
        calculator = Calculator("calculator", window=3)
        plain = Holder("plain")
        for actor in (calculator, plain):
            bus.register(actor)
        bus.startup([calculator, plain]).wait(WAIT)
        gateway = bus.serve_jrep(0, name="web", settings=GatewaySettings(inspect_page=True))
        status, body, kind = get(gateway.port, "/inspect/diagram?actor=calculator")
        assert (status, kind) == (200, "image/svg+xml")
        assert body.lstrip().startswith(b"<?xml") and b"<svg" in body and b"Initializing" in body
        assert json.loads(get(gateway.port, "/inspect.json")[1])["svg"] is True

        monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
        # (a gateway keeps what it drew: a second one, whose cache is empty)
        bare = bus.serve_jrep(0, name="bare", settings=GatewaySettings(inspect_page=True))
        status, body, kind = get(bare.port, "/inspect/diagram?actor=calculator")
        assert (status, kind) == (200, "text/vnd.graphviz; charset=utf-8")
        assert body.startswith(b"digraph") and b"Initializing" in body
        assert json.loads(get(bare.port, "/inspect.json")[1])["svg"] is False
        assert get(gateway.port, "/inspect/diagram?actor=calculator")[2] == "image/svg+xml"

        for actor in ("plain", "nobody"):
            status, body, _ = get(gateway.port, f"/inspect/diagram?actor={actor}")
            assert status == 404 and b"with a state machine" in body


def test_a_properties_file_turns_them_on(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.jrep.gateways=web\n"
        "actorbus.jrep.gateway.web.port=0\n"
        "actorbus.jrep.gateway.web.inspectPage=true\n"
        "actorbus.jrep.gateway.web.metrics=true\n"
    )
    config = load_config(path)
    (gw,) = config.gateways
    assert (gw.settings.inspect_page, gw.settings.metrics) == (True, True)
    bus = Bus(config, node_id="P")
    try:
        (gateway,) = bus.net.gateways
        assert value(scrape(gateway.port), "actorbus_requests_outstanding", node="P") == 0
        assert json.loads(get(gateway.port, "/inspect.json")[1])["node"] == "P"
    finally:
        bus.close()
    path.write_text(
        "actorbus.jrep.gateways=web\nactorbus.jrep.gateway.web.port=0\n"
        "actorbus.jrep.gateway.web.metrics=maybe\n"
    )
    with pytest.raises(ConfigError, match="metrics"):
        load_config(path)


@pytest.mark.parametrize(
    ("path", "settings"),
    [("/metrics", GatewaySettings(metrics=True)), ("/inspect", GatewaySettings(inspect_page=True))],
)
def test_the_jrep_path_cannot_hide_them(path: str, settings: GatewaySettings) -> None:

    with Bus(node_id="gw") as bus, pytest.raises(ConfigError, match="another path"):
        bus.serve_jrep(0, name="web", settings=dataclasses.replace(settings, path=path))
