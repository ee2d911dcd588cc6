"""Two nodes federated over J.REP (``bus.connect_jrep`` to the other's gateway),
real loopback sockets: feed state both ways, notifications both ways, streamed
request/reply both ways, cancels, and a lost session taking the remote feeds
DOWN until the client bus is back."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from jrep_support import WAIT, Add, Price, Sum

from actorbus import Actor, Bus, ConfigError, FeedState, MessageKey, ReplyStatus
from actorbus.config import JrepClientSettings, load_config
from actorbus.net.jrep import Gateway, JrepClient
from actorbus.testing import wait_until


class Adder(Actor):
    """Answers Add on ``subject`` with a partial sum, then the total."""

    def __init__(self, subject: str, name: str = "adder") -> None:
        super().__init__(name=name)
        self.subject = subject

    def startup(self) -> None:
        self.serve(Add, self.subject, self.add)

    def add(self, request: Add) -> Any:
        yield Sum(request.subject, total=request.a, status=ReplyStatus.OK_CONTINUING)
        return Sum(request.subject, total=request.a + request.b)


@contextlib.contextmanager
def federated(**kwargs: Any) -> Iterator[tuple[Bus, Bus, Gateway, JrepClient]]:
    """Node B serving J.REP, node A federated with it (the client bus)."""
    b = Bus(node_id="B")
    a = Bus(node_id="A")
    try:
        gateway = b.serve_jrep(0, name="fed", token=b"t" * 24)
        client = a.connect_jrep(
            gateway.url,
            name="to-b",
            token=b"t" * 24,
            **kwargs,
            settings=JrepClientSettings(reconnect=True, reconnect_delay=0.05),
        )
        assert client.wait_connected(WAIT)
        yield a, b, gateway, client
    finally:
        a.close()
        b.close()


def test_feed_state_and_notifications_cross_both_ways() -> None:
    with federated() as (a, b, _gateway, _client):
        # B publishes, A subscribes: A's subscriber sees B's publisher UP
        on_a = a.inbox(Price, "/b")
        assert not on_a.is_up
        b_states: list[FeedState] = []
        seen = threading.Event()

        def b_status(state: FeedState, feed: Any) -> None:
            b_states.append(state)
            seen.set()

        pub_b = b.publisher(Price, "/b", on_status=b_status)
        assert on_a.wait_up(WAIT)
        # ... and B's publisher sees A's subscriber
        assert wait_until(lambda: pub_b.is_feed_up(), WAIT)
        for i in range(5):
            pub_b.publish(Price("/b", value=Decimal(i), volume=i))
        got = [on_a.receive(WAIT) for _ in range(5)]
        assert [m.volume for m in got if m is not None] == list(range(5))
        pub_b.close()
        assert wait_until(lambda: not on_a.is_up, WAIT)
        # A publishes, B subscribes: B's subscriber sees A's publisher UP and DOWN
        on_b = b.inbox(Price, "/a")
        pub_a = a.publisher(Price, "/a")
        assert on_b.wait_up(WAIT)
        assert wait_until(lambda: pub_a.is_feed_up(), WAIT)
        pub_a.publish(Price("/a", value=Decimal("9.90"), volume=7))
        message = on_b.receive(WAIT)
        assert message is not None and message.value == Decimal("9.90") and message.volume == 7
        pub_a.update_feed_state(FeedState.DOWN)
        assert wait_until(lambda: not on_b.is_up, WAIT)
        pub_a.update_feed_state(FeedState.UP)
        assert wait_until(lambda: on_b.is_up, WAIT)
        on_b.close()
        assert wait_until(lambda: not pub_a.is_feed_up(), WAIT)
        pub_a.close()
        on_a.close()


def test_streamed_request_reply_both_ways() -> None:
    with federated() as (a, b, _gateway, _client):
        on_b = Adder("/add-b", name="adder-b")
        b.register(on_b)
        b.startup([on_b]).wait(WAIT)
        assert wait_until(lambda: a.router.feeds(MessageKey(Add, "/add-b"))["repliers"] == 1, WAIT)
        replies = a.request_all(Add("/add-b", a=2, b=3), WAIT)
        assert [(r.total, r.status) for r in replies] == [
            (2, ReplyStatus.OK_CONTINUING),
            (5, ReplyStatus.OK_FINAL),
        ]
        on_a = Adder("/add-a", name="adder-a")
        a.register(on_a)
        a.startup([on_a]).wait(WAIT)
        assert wait_until(lambda: b.router.feeds(MessageKey(Add, "/add-a"))["repliers"] == 1, WAIT)
        replies = b.request_all(Add("/add-a", a=4, b=5), WAIT)
        assert [r.total for r in replies] == [4, 9]
        assert replies[-1].status is ReplyStatus.OK_FINAL


def test_a_lost_session_takes_the_remote_feeds_down_then_comes_back() -> None:
    with federated() as (a, b, gateway, client):
        on_a = a.inbox(Price, "/b")
        pub_b = b.publisher(Price, "/b")
        assert on_a.wait_up(WAIT)
        (session,) = gateway.sessions
        # the gateway ends the session: A's client bus detaches, then dials again
        gateway.selector.call(session.close_session, 1000, "test")
        assert wait_until(lambda: not on_a.is_up or client.counters.sessions >= 2, WAIT)
        assert client.wait_connected(WAIT, sessions=2)
        assert on_a.wait_up(WAIT)
        assert wait_until(lambda: b.router.feeds(MessageKey(Price, "/b"))["subscribers"] == 1, WAIT)
        assert wait_until(pub_b.is_feed_up, WAIT)
        pub_b.publish(Price("/b", value=Decimal(1)))
        assert on_a.receive(WAIT) is not None
        pub_b.close()
        on_a.close()


def test_a_wrong_token_is_refused_and_counted() -> None:
    b = Bus(node_id="B")
    a = Bus(node_id="A")
    try:
        gateway = b.serve_jrep(0, name="fed", token=b"t" * 24)
        client = a.connect_jrep(gateway.url, token=b"x" * 24)
        assert wait_until(lambda: client.counters.failed_dials == 1, WAIT)
        assert not client.connected
        assert client.last_error is not None and "401" in client.last_error
    finally:
        a.close()
        b.close()


def test_a_client_bus_from_a_properties_file(tmp_path: Path) -> None:
    b = Bus(node_id="B")
    a: Bus | None = None
    try:
        gateway = b.serve_jrep(0, name="fed", token=b"t" * 24)
        token = tmp_path / "hub.token"
        token.write_bytes(b"t" * 24)
        token.chmod(0o600)
        props = tmp_path / "a.properties"
        props.write_text(
            "actorbus.nodeId=A\n"
            "actorbus.jrep.clients=hub\n"
            f"actorbus.jrep.client.hub.url={gateway.url}\n"
            f"actorbus.jrep.client.hub.tokenFile={token}\n"
            "actorbus.jrep.client.hub.reconnectDelay=50\n"
            "actorbus.jrep.client.hub.heartbeat=1000\n"
        )
        config = load_config(props)
        (hub,) = config.jrep_clients
        assert (hub.name, hub.url, hub.settings.reconnect, hub.settings.heartbeat) == (
            "hub",
            gateway.url,
            True,
            1.0,
        )
        a = Bus(config)
        on_a = a.inbox(Price, "/b")
        pub_b = b.publisher(Price, "/b")
        assert on_a.wait_up(WAIT)
        assert wait_until(pub_b.is_feed_up, WAIT)
        pub_b.publish(Price("/b", value=Decimal(3)))
        assert on_a.receive(WAIT) is not None
    finally:
        if a is not None:
            a.close()
        b.close()


def test_a_bad_client_url_in_a_properties_file_is_refused(tmp_path: Path) -> None:
    props = tmp_path / "a.properties"
    props.write_text("actorbus.jrep.clients=hub\nactorbus.jrep.client.hub.url=http://x/jrep\n")
    with pytest.raises(ConfigError, match="WebSocket URL"):
        load_config(props)
