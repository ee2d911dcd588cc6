"""actorbus.js, the JavaScript client of the J.REP gateway, in a real browser.

A node serves J.REP and a tiny page that imports ``/actorbus.js``; headless
Chromium loads it (over the DevTools Protocol, ``cdp``) and the test drives the
client with ``Runtime.evaluate``: ``publish`` with typed values reaching a
Python inbox, ``serve`` answering the bus's requests (streamed, an ERROR reply,
the cancel signal), ``onError`` for refused messages, reconnecting with backoff
after the gateway drops the session or restarts (DOWN then UP, subscriptions
and repliers stated again, a request in flight failing with ``Disconnected``),
and ``close()`` ending the session.  Every wait has a deadline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cdp import Page, chromium, open_page, sockets

from actorbus import Bus, FeedState, MessageKey, Notification, Reply, ReplyStatus, Request
from actorbus.config import GatewaySettings
from actorbus.net.jrep import Gateway
from actorbus.testing import Recorder, wait_until

WAIT = 10.0
BIG = 2**53 + 1  # beyond JavaScript's exact integers: a string on the wire


class Trade(Notification, type_name="jstest.Trade"):
    price: Decimal
    at: datetime
    volume: int = 0


class Total(Reply, type_name="jstest.Total"):
    total: int


class Count(Request, type_name="jstest.Count", replies=(Total,)):
    n: int


TRADE, COUNT = Trade.__type_name__, Count.__type_name__

INDEX = """<!doctype html>
<meta charset="utf-8">
<title>actorbus.js</title>
<script type="module">
  import { ActorBus, BusError } from "/actorbus.js";
  window.t = { ActorBus, BusError, errors: [], states: [], ticks: [] };
</script>
"""

CONNECT = """(async () => {
  const bus = await t.ActorBus.connect(`ws://${location.host}/jrep`,
                                       { reconnect: { initialDelay: 50, maxDelay: 400 } });
  t.bus = bus;
  bus.onError((e) => t.errors.push(e));
  return bus.status;
})()"""

REPORT = (
    "JSON.stringify(window.t ? { status: t.bus?.status, attempt: t.bus?.attempt, "
    "errors: t.errors, states: t.states, ticks: t.ticks, outcome: t.outcome } : null)"
)


@dataclass
class Web:
    bus: Bus
    gateway: Gateway
    page: Page
    static: Path

    def js(self, body: str) -> Any:
        """Run ``body`` (statements, ``await`` allowed) in the page; its return value."""
        return self.page.evaluate(f"(async () => {{ {body} }})()")

    def serving(self, key: MessageKey, count: int = 1) -> None:
        assert wait_until(lambda: self.bus.router.feeds(key)["repliers"] == count, WAIT), (
            f"{key}: never {count} replier(s) on the bus"
        )


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Web]:
    before = sockets()
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text(INDEX)
    bus = Bus(node_id="jstest")
    try:
        gateway = bus.serve_jrep(0, name="web", settings=GatewaySettings(static_dir=str(static)))
        with chromium(tmp_path / "profile") as browser:
            page = open_page(browser, f"http://127.0.0.1:{gateway.port}/")
            page.report = REPORT
            page.until("window.t", "the module loaded")
            assert page.evaluate(CONNECT) == "active"
            assert wait_until(lambda: gateway.counters.open_sessions == 1, WAIT)
            yield Web(bus, gateway, page, static)
            assert page.problems == []
    finally:
        bus.close()
    assert wait_until(lambda: sockets() <= before, 5.0), "sockets left open"


class Holder(Recorder):
    """Takes Count requests on /hold and never answers (logs them and their cancels)."""

    def startup(self) -> None:
        feed = self.actor_context.open_reply_feed(Count, "/hold")
        feed.request_callback(self.on_request)
        feed.cancel_callback(self.on_cancel)
        feed.advertise()
        feed.update_feed_state(FeedState.UP)


# ---------------------------------------------------------------- publish


def test_publish_reaches_a_python_inbox_with_typed_values(web: Web) -> None:
    inbox = web.bus.inbox(Trade, "/trades")
    web.js(
        f"""t.bus.publish("{TRADE}", "/trades",
                          {{ price: "9.90", at: "2024-05-01T12:00:00+00:00", volume: "{BIG}" }});
            t.bus.publish("{TRADE}", "/trades",
                          {{ price: 12, at: "2024-05-01T12:30:00", volume: 7 }});"""
    )
    first, second = inbox.receive(WAIT), inbox.receive(WAIT)
    assert first is not None and second is not None
    assert first.price == Decimal("9.90") and str(first.price) == "9.90"  # exact, not a float
    assert first.at == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert first.volume == BIG and type(first.volume) is int
    assert second.price == Decimal(12) and second.volume == 7
    assert second.at == datetime(2024, 5, 1, 12, 30) and second.at.tzinfo is None  # naive stays
    # and back: what Python publishes reaches the page typed the same way
    web.js(
        f"""t.bus.subscribe("{TRADE}", "/back", (value) => t.ticks.push(value),
                            (state) => t.states.push(state));"""
    )
    feed = web.bus.publisher(Trade, "/back")
    web.page.until("t.states.includes('UP')", "the feed UP")
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    feed.publish(Trade("/back", price=Decimal("1.25"), at=when, volume=BIG))
    web.page.until("t.ticks.length === 1", "the notification")
    value = web.page.evaluate("t.ticks[0]")
    assert (value["price"], value["volume"]) == ("1.25", str(BIG))
    assert datetime.fromisoformat(value["at"]) == when
    feed.close()


# ---------------------------------------------------------------- serve


def test_serve_streams_replies_errors_and_sees_the_cancel(web: Web) -> None:
    web.js(
        f"""t.bus.serve("{COUNT}", "/count", async function* ({{ n }}) {{
              let sum = 0;
              for (let i = 1; i <= n; i++) {{ sum += i; yield {{ total: i }}; }}
              return {{ total: sum }};
            }});
            t.bus.serve("{COUNT}", "/sync", function* ({{ n }}) {{ yield {{ total: n }}; }});
            t.bus.serve("{COUNT}", "/fail", ({{ n }}) => {{ throw new Error(`cannot count to ${{n}}`); }});
            t.bus.serve("{COUNT}", "/slow", (value, {{ signal }}) => new Promise((resolve) => {{
              signal.addEventListener("abort", () => {{ t.aborted = true; resolve({{ total: -1 }}); }});
            }}));"""
    )
    for subject in ("/count", "/sync", "/fail", "/slow"):
        web.serving(MessageKey(Count, subject))

    replies = web.bus.request_all(Count("/count", n=3), WAIT)
    assert [(type(r), r.total, r.status) for r in replies] == [
        (Total, 1, ReplyStatus.OK_CONTINUING),
        (Total, 2, ReplyStatus.OK_CONTINUING),
        (Total, 3, ReplyStatus.OK_CONTINUING),
        (Total, 6, ReplyStatus.OK_FINAL),
    ]

    # a sync generator returning nothing: its yield, then a bare final reply
    replies = web.bus.request_all(Count("/sync", n=5), WAIT)
    assert [(type(r), r.status) for r in replies] == [
        (Total, ReplyStatus.OK_CONTINUING),
        (Reply, ReplyStatus.OK_FINAL),
    ], replies
    assert web.page.evaluate("t.errors") == []

    (failed,) = web.bus.request_all(Count("/fail", n=4), WAIT)
    assert failed.status is ReplyStatus.ERROR and failed.reason == "cannot count to 4"

    # the bus's request times out: the gateway cancels it, the handler's signal aborts
    (late,) = web.bus.request_all(Count("/slow", n=1), 0.3)
    assert late.status is ReplyStatus.ERROR
    web.page.until("t.aborted === true", "the handler's signal aborted")
    assert web.page.evaluate("t.errors") == []  # nothing sent after the cancel


# ---------------------------------------------------------------- onError


def test_on_error_gets_the_code_and_the_connection_stays_usable(web: Web) -> None:
    inbox = web.bus.inbox(Trade, "/trades")
    web.js(f"""t.bus.subscribe("{TRADE}", "ClientBus", () => {{}});""")
    web.page.until("t.errors.length === 1", "the ReservedSubject error")
    (reserved,) = web.page.evaluate("t.errors")
    assert reserved["code"] == "ReservedSubject"
    # Subject is the refused message's ToSubject: the verb went to ServerBus
    assert reserved["subject"] == "ServerBus" and reserved["commandType"] == "RemoteSubscribe"
    assert "ClientBus" in reserved["message"], reserved

    web.js(f"""t.bus.publish("{TRADE}", "/trades", {{ price: 1.5, at: "2024-05-01" }});""")
    web.page.until("t.errors.length === 2", "the BadValue error")
    bad = web.page.evaluate("t.errors[1]")
    assert bad["code"] == "BadValue" and bad["subject"] == "/trades"
    assert "jstest.Trade.price" in bad["message"] and "Decimal" in bad["message"], bad

    # a refused request rejects with the code (and onError hears of it too)
    code = web.js(
        f"""try {{ await t.bus.request("{COUNT}", "/count", {{ n: "many" }}); return "resolved"; }}
            catch (e) {{ return `${{e.name}} ${{e.code}}`; }}"""
    )
    assert code == "BusError BadValue"
    assert web.page.evaluate("t.errors[2].code") == "BadValue"
    # nobody serves /nobody: NoReplier (on the request's ReplyTo, not onError)
    code = web.js(
        f"""try {{ await t.bus.request("{COUNT}", "/nobody", {{ n: 1 }}); return "resolved"; }}
            catch (e) {{ return e.code; }}"""
    )
    assert code == "NoReplier"
    assert web.page.evaluate("t.errors.length") == 3

    # still usable
    web.js(
        f"""t.bus.publish("{TRADE}", "/trades", {{ price: "1.5", at: "2024-05-01T00:00:00Z" }});"""
    )
    received = inbox.receive(WAIT)
    assert received is not None and received.price == Decimal("1.5")
    assert web.page.evaluate("t.bus.status") == "active"
    assert web.gateway.counters.open_sessions == 1


# ---------------------------------------------------------------- reconnect


def _drop_sessions(gateway: Gateway) -> None:
    """Close the server side of every session of ``gateway`` (on its loop)."""
    for session in gateway.sessions:
        gateway.selector.loop.call_soon_threadsafe(session.close_session, 1011, "dropped")


def test_reconnect_after_a_dropped_session_and_a_restarted_gateway(web: Web) -> None:
    bus, page = web.bus, web.page
    holder = Holder("holder")
    bus.register(holder)
    bus.startup([holder]).wait(WAIT)
    feed = bus.publisher(Trade, "/ticks")
    web.js(
        f"""t.bus.subscribe("{TRADE}", "/ticks", (value) => t.ticks.push(value.volume),
                            (state) => t.states.push(state));
            t.bus.serve("{COUNT}", "/double", ({{ n }}) => ({{ total: 2 * n }}));"""
    )
    page.until("t.states.join() === 'UP'", "the feed UP")
    web.serving(MessageKey(Count, "/double"))
    feed.publish(Trade("/ticks", price=Decimal(1), at=datetime.now(UTC), volume=1))
    page.until("t.ticks.join() === '1'", "the first tick")

    # a request in flight (the holder never answers) when the gateway drops the session
    web.js(
        f"""t.outcome = "pending";
            t.bus.request("{COUNT}", "/hold", {{ n: 1 }})
              .then(() => {{ t.outcome = "resolved"; }}, (e) => {{ t.outcome = `${{e.name}} ${{e.code}}`; }});"""
    )
    holder.log.wait_count("request", 1)
    prefix = page.evaluate("t.bus.replyPrefix")
    _drop_sessions(web.gateway)
    page.until("t.outcome !== 'pending'", "the request in flight settled")
    assert page.evaluate("t.outcome") == "BusError Disconnected"
    page.until("t.states.join() === 'UP,DOWN,UP'", "DOWN then UP again")
    assert page.evaluate("t.bus.status") == "active"
    assert page.evaluate("t.bus.replyPrefix") != prefix  # a new session
    holder.log.wait_count("cancel", 1)  # the lost session's request was cancelled on the bus
    assert wait_until(lambda: web.gateway.counters.open_sessions == 1, WAIT)
    # subscribed again: ticks flow; serving again: the bus's requests reach the page
    feed.publish(Trade("/ticks", price=Decimal(1), at=datetime.now(UTC), volume=2))
    page.until("t.ticks.join() === '1,2'", "a tick after the reconnect")
    web.serving(MessageKey(Count, "/double"))
    (doubled,) = bus.request_all(Count("/double", n=21), WAIT)
    assert doubled.total == 42

    # the gateway restarts on the same port: the client retries (backing off) until it is back
    port = web.gateway.port
    web.gateway.close()
    page.until("t.states.join() === 'UP,DOWN,UP,DOWN'", "DOWN while the gateway is gone")
    page.until("t.bus.attempt >= 2", "failed attempts to reconnect")
    assert page.evaluate("t.bus.status") == "connecting"
    web.gateway = bus.serve_jrep(
        port, name="web", settings=GatewaySettings(static_dir=str(web.static))
    )
    page.until("t.states.join() === 'UP,DOWN,UP,DOWN,UP'", "UP after the restart")
    assert page.evaluate("t.bus.attempt") == 0  # the backoff starts over
    feed.publish(Trade("/ticks", price=Decimal(1), at=datetime.now(UTC), volume=3))
    page.until("t.ticks.join() === '1,2,3'", "a tick after the restart")
    web.serving(MessageKey(Count, "/double"))
    (doubled,) = bus.request_all(Count("/double", n=5), WAIT)
    assert doubled.total == 10
    assert page.evaluate("t.errors") == []
    feed.close()


# ---------------------------------------------------------------- close


def test_close_ends_the_session(web: Web) -> None:
    web.js(f"""t.bus.subscribe("{TRADE}", "/ticks", () => {{}}, (s) => t.states.push(s));""")
    web.js("t.bus.close();")
    assert wait_until(lambda: web.gateway.counters.open_sessions == 0, WAIT), web.gateway.counters
    assert web.page.evaluate("t.bus.status") == "closed"
    thrown = web.js(
        f"""try {{ t.bus.publish("{TRADE}", "/x", {{}}); return "sent"; }}
            catch (e) {{ return e.code; }}"""
    )
    assert thrown == "Disconnected"
    # no reconnect: still one session ever, none open
    web.page.until("t.bus.ws === null", "the socket let go")
    counters = web.gateway.counters
    assert counters.sessions == 1 and counters.open_sessions == 0
    assert json.loads(web.page.evaluate(REPORT))["status"] == "closed"
