"""Feeds across real TCP links between buses in one process: pub/sub with feed
state, the scope table, request/reply with remote repliers counted, cancel,
system notifications, counters, configuration."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from nodes.messages import Answer, Ask, Blob, Counter, Fetch
from nodes.support import SystemLog, buses, linked, started, wait_for

from actorbus import (
    Bus,
    FeedState,
    Field,
    IncomingRequest,
    MessageKey,
    Notification,
    Reply,
    ReplyFeed,
    ReplyStatus,
    Request,
    Scope,
    UsageError,
)
from actorbus.config import ConnectionSettings, load_config
from actorbus.errors import LinkClosedError
from actorbus.net import LinkStatus, _io_thread
from actorbus.testing import Recorder

UP, DOWN = FeedState.UP, FeedState.DOWN


def feed_state_story(pub_bus: Bus, sub_bus: Bus) -> tuple[list[FeedState], list[FeedState]]:
    """Declare, publish, flap, unsubscribe, close; return what each side was told."""
    pub, sub = Recorder("pub"), Recorder("sub")
    started(pub_bus, pub)
    started(sub_bus, sub)
    p = pub.publisher(Counter, "/c", up=False)
    s = sub.subscribe(Counter, "/c")
    pub.log.wait_for(lambda ev: pub.states("publish_status") == [UP])
    assert s.feed_state is DOWN  # advertised, but the publisher has not declared UP
    p.update_feed_state(UP)
    sub.log.wait_for(lambda ev: sub.states() == [UP])
    for n in range(5):
        p.publish(Counter("/c", n=n))
    got = sub.log.wait_count("message", 5)
    assert [e[1].n for e in got if e[0] == "message"] == [0, 1, 2, 3, 4]
    p.update_feed_state(DOWN)
    sub.log.wait_for(lambda ev: len(sub.states()) == 2)
    p.update_feed_state(UP)
    sub.log.wait_for(lambda ev: len(sub.states()) == 3)
    s.unsubscribe()
    pub.log.wait_for(lambda ev: len(pub.states("publish_status")) == 2)
    s.subscribe()
    pub.log.wait_for(lambda ev: len(pub.states("publish_status")) == 3)
    sub.log.wait_for(lambda ev: len(sub.states()) == 4)
    p.close()
    sub.log.wait_for(lambda ev: len(sub.states()) == 5)
    s.close()
    return sub.states(), pub.states("publish_status")


def test_subscriber_sees_remote_publisher_state_exactly_as_a_local_one() -> None:
    with buses("L") as (local,):
        expected = feed_state_story(local, local)
    assert expected == ([UP, DOWN, UP, UP, DOWN], [UP, DOWN, UP])
    with buses("A", "B") as (a, b):
        linked(a, b)
        assert feed_state_story(a, b) == expected


def test_scope_table_across_a_link() -> None:
    cases = [(ps, ss, ps.remote_capable and ss.remote_capable) for ps in Scope for ss in Scope]
    with buses("A", "B") as (a, b):
        linked(a, b)
        pub, sub = Recorder("pub"), Recorder("sub")
        started(a, pub)
        started(b, sub)
        feeds = []
        for i, (ps, ss, _) in enumerate(cases):
            subject = f"/scope/{i}"
            s = sub.subscribe(Counter, subject, scope=ss)
            p = pub.publisher(Counter, subject, scope=ps, up=True)
            feeds.append((p, s))
        matching = [(p, s) for (p, s), (_, _, m) in zip(feeds, cases, strict=True) if m]
        for p, s in matching:
            sub.log.wait_for(lambda ev, s=s: ("feed_status", s.key, UP) in ev)
            pub.log.wait_for(lambda ev, p=p: ("publish_status", p.key, UP) in ev)
            p.publish(Counter(p.key.subject, n=1))
        got = sub.log.wait_count("message", len(matching))
        assert sorted(e[1].subject for e in got if e[0] == "message") == sorted(
            p.key.subject for p, _ in matching
        )
        for (p, s), (ps, ss, match) in zip(feeds, cases, strict=True):
            assert (s.feed_state is UP) == match, (ps, ss)
            assert (p.feed_state is UP) == match, (ps, ss)


def test_remaining_counts_include_remote_repliers() -> None:
    with buses("A", "B") as (a, b):
        linked(a, b)
        r1, r2, local, req = Recorder("r1"), Recorder("r2"), Recorder("local"), Recorder("req")
        started(a, r1, r2)
        started(b, local, req)
        for i, r in enumerate((r1, r2, local)):
            r.auto_reply = lambda inc, i=i: Answer("/q", value=i)
            r.replier(Ask, "/q")
        f = req.requestor(Ask, "/q")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        # B's own replier and the proxy of A's two
        wait_for(lambda: b.router.feeds(f.key)["repliers"] == 2, "A's repliers are known on B")
        handle = f.request(Ask("/q", q=1))
        replies = req.log.wait_count("reply", 3)
        replies = [e for e in replies if e[0] == "reply"]
        assert sorted(r[2].value for r in replies) == [0, 1, 2]
        assert [r[1] for r in replies][-1] == 0  # complete after the third reply
        assert all(r[1] > 0 for r in replies[:-1])
        assert handle.is_done


def test_a_reply_made_at_once_carries_the_acknowledgement() -> None:
    """A remote request answered at once costs one frame back, not two: the
    acknowledgement waiting to be written leaves inside the REPLY frame."""
    n = 100
    with buses("A", "B") as (a, b):
        linked(a, b)
        rep, req = Recorder("rep"), Recorder("req")
        started(a, rep)
        started(b, req)
        rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q)
        rep.replier(Ask, "/q")
        f = req.requestor(Ask, "/q")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        (link,) = b.links
        before = link.counters
        for i in range(n):
            f.request(Ask("/q", q=i), timeout=10.0)
            req.log.wait_count("reply", i + 1)
        after = link.counters
        replies = req.log.of("reply")
        assert [(r[1], r[2].value) for r in replies] == [(0, i) for i in range(n)]
        assert after.messages_in - before.messages_in <= n * 3 // 2  # 2n when apart
        wait_for(lambda: b.router.outstanding_requests == 0, "B forgets the requests")


def test_an_acknowledgement_waits_its_full_delay_for_its_reply() -> None:
    """Replies that take a fraction of the acknowledgement delay (0.3 ms of work
    against 1 ms) still carry their acknowledgements: the one timer armed for
    many requests does not cut short the wait of whichever acknowledgement is
    pending when it fires (it did for about a third of them)."""
    n = 60

    def slow_answer(inc: IncomingRequest[Ask]) -> Answer:
        time.sleep(0.0003)  # the replier's work, not synchronisation
        return Answer("/q", value=inc.request.q)

    with buses("A", "B") as (a, b):
        linked(a, b)
        rep, req = Recorder("rep"), Recorder("req")
        started(a, rep)
        started(b, req)
        rep.auto_reply = slow_answer
        rep.replier(Ask, "/q")
        f = req.requestor(Ask, "/q")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        (link,) = b.links
        before = link.counters.messages_in
        for i in range(n):
            f.request(Ask("/q", q=i), timeout=10.0)
            req.log.wait_count("reply", i + 1)
        assert [r[2].value for r in req.log.of("reply")] == list(range(n))
        assert link.counters.messages_in - before <= n + n // 10


def test_a_reply_too_large_for_the_link_ends_the_request_with_an_error() -> None:
    """A reply the link cannot send (over max_frame_size) is dropped and counted; the
    requestor gets an ERROR in its place, with the acknowledgement that was
    waiting to travel with it, and the link stays up for the next request."""
    with buses("A", "B") as (a, b):
        linked(a, b)
        rep, req = Recorder("rep"), Recorder("req")
        started(a, rep)
        started(b, req)
        rep.auto_reply = lambda inc: Blob("/blob", data=b"x" * inc.request.size)
        rep.replier(Fetch, "/blob")
        f = req.requestor(Fetch, "/blob")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        f.request(Fetch("/blob", size=2_000_000), timeout=10.0)
        (first,) = [e for e in req.log.wait_count("reply", 1) if e[0] == "reply"]
        assert first[1] == 0 and first[2].status is ReplyStatus.ERROR
        assert first[2].reason == "a Blob reply could not be sent over the link"
        f.request(Fetch("/blob", size=10), timeout=10.0)
        second = req.log.wait_count("reply", 2)
        second = [e for e in second if e[0] == "reply"][1]
        assert second[1] == 0 and second[2].data == b"x" * 10
        (accepted,) = [x for x in a.links if x.is_logged_on]
        assert accepted.counters.dropped == 1
        # (each side forgets a request just after handing its last reply on)
        wait_for(lambda: a.router.outstanding_requests == 0, "A forgets the requests")
        wait_for(lambda: b.router.outstanding_requests == 0, "B forgets the requests")


def test_remote_continuing_replies_then_error_and_no_replier_error() -> None:
    with buses("A", "B") as (a, b):
        linked(a, b)
        rep = Recorder("rep")
        started(a, rep)

        def answer(inc: object) -> None:
            incoming = inc  # IncomingRequest
            incoming.reply(Answer("/q", value=1, status=ReplyStatus.OK_CONTINUING))  # type: ignore[attr-defined]
            incoming.reply(Reply("/q", status=ReplyStatus.ERROR, reason="gave up"))  # type: ignore[attr-defined]

        rep.replier(Ask, "/q", on_request=answer)
        replier_up(b, Ask, "/q")
        replies = b.request_all(Ask("/q", q=3), timeout=5)
        assert [type(r) for r in replies] == [Answer, Reply]
        assert replies[0].status is ReplyStatus.OK_CONTINUING
        assert replies[1].status is ReplyStatus.ERROR and replies[1].reason == "gave up"


def replier_up(bus: Bus, cls: type[Ask], subject: str) -> None:
    """Wait until a requestor on ``bus`` sees a replier UP (remote ones included)."""
    watcher = Recorder("watcher")
    started(bus, watcher)
    feed = watcher.requestor(cls, subject)
    watcher.log.wait_for(lambda ev: ("feed_status", feed.key, UP) in ev)
    feed.close()


def test_cancel_crosses_the_link() -> None:
    with buses("A", "B") as (a, b):
        linked(a, b)
        rep, req = Recorder("rep"), Recorder("req")
        started(a, rep)
        started(b, req)
        rep.replier(Ask, "/q")
        f = req.requestor(Ask, "/q")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        handle = f.request(Ask("/q", q=1, hold=True))
        rep.log.wait_count("request", 1)
        handle.cancel()
        rep.log.wait_count("cancel", 1)
        incoming = rep.log.of("request")[0][1]
        assert incoming.reply(Answer("/q", value=1)) is False
        assert handle.is_done and handle.is_cancelled


def test_link_drop_sends_feeds_down_and_errors_requests_in_flight() -> None:
    with buses("A", "B") as (a, b):
        _, link = linked(a, b)
        pub, rep, sub, req = Recorder("pub"), Recorder("rep"), Recorder("sub"), Recorder("req")
        started(a, pub, rep)
        started(b, sub, req)
        pub.publisher(Counter, "/c", up=True)
        rep.replier(Ask, "/q")
        s = sub.subscribe(Counter, "/c")
        f = req.requestor(Ask, "/q")
        sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        f.request(Ask("/q", q=1, hold=True))
        rep.log.wait_count("request", 1)
        link.close("cable cut")
        assert link.status is LinkStatus.CLOSED
        sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
        req.log.wait_for(lambda ev: req.states() == [UP, DOWN])
        pub.log.wait_for(lambda ev: pub.states("publish_status") == [UP, DOWN])
        req.log.wait_count("reply", 1)
        ((_, remaining, reply),) = req.log.of("reply")
        assert remaining == 0 and reply.status is ReplyStatus.ERROR
        assert "lost" in (reply.reason or "")
        rep.log.wait_count("cancel", 1)  # the replier's request was cancelled on A


def test_system_notifications_both_sides() -> None:
    with buses("A", "B") as (a, b):
        log_a, log_b = SystemLog(a), SystemLog(b)
        service = a.listen(0, name="feeds")
        started_msg = SystemLog.next(log_a.started)
        assert (started_msg.service, started_msg.address) == ("feeds", f"127.0.0.1:{service.port}")
        link = b.connect("127.0.0.1", service.port, name="to-a")
        link.wait_logged_on(5)
        accepted = SystemLog.next(log_a.accepted)
        assert accepted.service == "feeds" and accepted.remote_address.startswith("127.0.0.1:")
        on_a, on_b = SystemLog.next(log_a.logged_on), SystemLog.next(log_b.logged_on)
        assert (on_a.peer_node, on_a.initiator) == ("B", False)
        assert (on_b.peer_node, on_b.initiator, on_b.address) == (
            "A",
            True,
            f"127.0.0.1:{service.port}",
        )
        link.close("maintenance window")
        off_a, off_b = SystemLog.next(log_a.logged_off), SystemLog.next(log_b.logged_off)
        assert (off_a.peer_node, off_a.reason) == (
            "B",
            "logged off by the peer: maintenance window",
        )
        assert (off_b.peer_node, off_b.reason) == ("A", "logged off here: maintenance window")


def test_counters_count_messages_and_bytes() -> None:
    with buses("A", "B") as (a, b):
        service, link = linked(a, b)
        inbox = b.inbox(Counter, "/c")
        p = a.publisher(Counter, "/c")
        assert inbox.wait_up(5)
        wait_for(lambda: p.feed_state is UP, "the publisher sees the remote subscriber")
        for n in range(100):
            p.publish(Counter("/c", n=n, payload=b"x" * 100))
        for _ in range(100):
            assert inbox.receive(5) is not None
        wait_for(lambda: link.counters.messages_in == 100, "100 messages counted in")
        out = a.net.stats()["links"][service.links[0].name]
        assert out.messages_out == 100 and out.bytes_out >= 100 * 100
        got = link.counters
        assert got.bytes_in == out.bytes_out
        assert (got.dropped, got.corrupt_frames, got.gaps, got.duplicates) == (0, 0, 0, 0)
        assert (got.connections, got.logons, got.reconnects) == (1, 1, 0)
        assert service.counters.accepted == 1 and service.counters.open_links == 1


def test_links_and_services_from_properties(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text(
        "actorbus.net.selectors = accept, io\n"
        "actorbus.net.selector.io.isDefault = true\n"
        "actorbus.services = feeds\n"
        "actorbus.service.feeds.port = 0\n"
        "actorbus.service.feeds.host = 127.0.0.1\n"
        "actorbus.service.feeds.serviceSelector = accept\n"
        "actorbus.service.feeds.connectionSelector = io\n"
        "actorbus.service.feeds.heartbeatDelay = 50\n"
    )
    a = Bus(load_config(server), node_id="A")
    try:
        names = {t.name for t in threading.enumerate()}
        assert {"actorbus-net-accept", "actorbus-net-io"} <= names
        (service,) = a.net.services
        assert service.selector.name == "accept" and service.connection_selector.name == "io"
        client = tmp_path / "client.properties"
        client.write_text(
            "actorbus.connections = up\n"
            "actorbus.connection.up.host = 127.0.0.1\n"
            f"actorbus.connection.up.port = {service.port}\n"
            "actorbus.connection.up.reconnect = true\n"
            "actorbus.connection.up.reconnectDelay = 100\n"
            "actorbus.connection.up.connectTimeout = 2500\n"
            "actorbus.connection.up.messageQueueSize = 1000\n"
        )
        b = Bus.from_properties(client, node_id="B")
        try:
            (link,) = b.links
            assert link.name == "up" and link.reconnect and link.reconnect_delay == 0.1
            assert link.connect_timeout == 2.5
            assert link.settings.message_queue_size == 1000
            assert link.wait_logged_on(5) == "A"
            wait_for(lambda: len(service.links) == 1, "A accepted the link")
            (accepted,) = service.links
            assert accepted.selector.name == "io"
            wait_for(lambda: accepted.counters.heartbeats_out >= 2, "A sends heartbeats when idle")
            assert accepted.is_logged_on and link.is_logged_on
        finally:
            b.close()
    finally:
        a.close()


def test_connect_to_nothing_closes_without_reconnect_and_retries_with_it() -> None:
    with buses("B") as (b,):
        service = b.listen(0)
        port = service.port
        service.close()
        once = b.connect("127.0.0.1", port)
        with pytest.raises(Exception, match="closed before logging on: cannot connect"):
            once.wait_logged_on(5)
        retrying = b.connect(
            "127.0.0.1", port, settings=ConnectionSettings(reconnect=True, reconnect_delay=0.01)
        )
        wait_for(lambda: retrying.counters.reconnects >= 3, "three dial attempts")
        assert retrying.status in (LinkStatus.CONNECTING, LinkStatus.RECONNECT_WAIT)
        retrying.close()
        assert retrying.status is LinkStatus.CLOSED
        assert b.links == ()


@pytest.mark.parametrize(
    ("host", "bind_to_held_port", "says"),
    [
        ("no-such-host.invalid", False, "check the host name"),
        ("127.0.0.1", False, "nothing listens there: start the peer node's service"),
        ("127.0.0.1", True, "the local address (bind_host/bind_port) is taken"),
    ],
)
def test_a_failed_dial_says_what_to_do(host: str, bind_to_held_port: bool, says: str) -> None:
    with buses("B") as (b,), socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        service = b.listen(0)
        port = service.port
        service.close()  # nothing listens on port now
        bind = {
            "settings": ConnectionSettings(bind_host="127.0.0.1", bind_port=held.getsockname()[1])
        }
        link = b.connect(host, port, **(bind if bind_to_held_port else {}))
        # (30 s: a resolver that times out before failing takes a while)
        with pytest.raises(LinkClosedError, match="cannot connect to") as info:
            link.wait_logged_on(30)
        assert says in str(info.value)


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A loopback port whose listener's accept queue is full: the kernel drops
    further SYNs, so a dial there hangs as one to a host that is down would."""
    with socket.socket() as listener, socket.socket() as filler:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # (room for one connection nobody accepts)
        port = listener.getsockname()[1]
        filler.connect(("127.0.0.1", port))
        yield port


def test_a_dial_nobody_answers_fails_after_connect_timeout() -> None:
    with buses("B") as (b,), unanswered_port() as port:
        started_at = time.monotonic()
        once = b.connect("127.0.0.1", port, settings=ConnectionSettings(connect_timeout=0.3))
        with pytest.raises(LinkClosedError, match=r"no answer within 0\.3 s; check that"):
            once.wait_logged_on(30)
        assert 0.25 <= time.monotonic() - started_at < 10
        retrying = b.connect(
            "127.0.0.1",
            port,
            settings=ConnectionSettings(reconnect=True, reconnect_delay=0.01, connect_timeout=0.1),
        )
        wait_for(lambda: retrying.counters.reconnects >= 2, "the link dials again", 10)
        assert not retrying.is_logged_on
        retrying.close()
        with pytest.raises(UsageError, match="connect_timeout=-1"):
            b.connect("127.0.0.1", port, settings=ConnectionSettings(connect_timeout=-1))


def test_bus_listen_errors_say_what_to_do() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        from actorbus import ConfigError, UsageError

        with pytest.raises(ConfigError, match="cannot listen on 127.0.0.1:.*choose another port"):
            a.listen(service.port)
        with pytest.raises(UsageError, match="no selector named 'nope'"):
            a.connect("127.0.0.1", service.port, settings=ConnectionSettings(selector="nope"))
        with pytest.raises(UsageError, match="heartbeat_delay=-1"):
            a.connect("127.0.0.1", service.port, settings=ConnectionSettings(heartbeat_delay=-1))
    with pytest.raises(UsageError, match="is closed"):
        a.listen(0)


class Leg(Field, type_name="linktest.Leg"):
    price: Decimal


class OptionLeg(Leg, type_name="linktest.OptionLeg"):
    strike: Decimal


class Quote(Notification, type_name="linktest.Quote"):
    legs: tuple[Leg, ...]
    note: str | None = None


def test_rich_messages_cross_intact() -> None:
    """Nested structs of a subclass (ext values), decimals, optional fields."""
    with buses("A", "B") as (a, b):
        linked(a, b)
        inbox = b.inbox(Quote, "/q")
        p = a.publisher(Quote, "/q")
        wait_for(lambda: p.feed_state is UP, "B subscribed")
        sent = [
            Quote(
                "/q",
                legs=(
                    Leg(price=Decimal("1.5")),
                    OptionLeg(price=Decimal("2"), strike=Decimal("3.25")),
                ),
            ),
            Quote("/q", legs=(), note="empty"),
        ]
        for quote in sent:
            p.publish(quote)
        got = [inbox.receive(5), inbox.receive(5)]
        assert got == sent
        assert type(got[0].legs[1]) is OptionLeg


class Big(Notification, type_name="linktest.Big"):
    value: int
    values: tuple[int, ...] = ()


class BigAnswer(Reply, type_name="linktest.BigAnswer"):
    value: int


class BigAsk(Request, type_name="linktest.BigAsk", replies=(BigAnswer,)):
    value: int


HUGE = (2**64, -(2**63) - 1, 2**200 + 7, -(10**40), 2**63 - 1, -(2**63), 2**64 - 1, 0)


def test_ints_beyond_64_bits_cross_a_link_exactly() -> None:
    """Ints outside msgpack's 64-bit range travel in the codec's wire form (as in
    the journal) in notifications, requests and replies; nothing is dropped."""
    with buses("A", "B") as (a, b):
        service, link = linked(a, b)
        inbox = b.inbox(Big, "/big")
        p = a.publisher(Big, "/big")
        wait_for(lambda: p.feed_state is UP, "B subscribed")
        sent = [Big("/big", value=v, values=(v, -v, 1)) for v in HUGE]
        for message in sent:
            p.publish(message)
        assert [inbox.receive(5) for _ in sent] == sent
        rep = Recorder("rep")
        started(a, rep)
        rep.auto_reply = lambda inc: BigAnswer("/big", value=inc.request.value * 3)
        rep.replier(BigAsk, "/big")
        req = Recorder("req")
        started(b, req)
        f = req.requestor(BigAsk, "/big")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        for v in HUGE:
            f.request(BigAsk("/big", value=v))
        replies = [e for e in req.log.wait_count("reply", len(HUGE)) if e[0] == "reply"]
        assert sorted(r[2].value for r in replies) == sorted(v * 3 for v in HUGE)
        assert all(r[2].status is ReplyStatus.OK_FINAL for r in replies)
        assert link.counters.dropped == 0
        assert service.links[0].counters.dropped == 0
        assert link.counters.corrupt_frames == service.links[0].counters.corrupt_frames == 0


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_links_run_on_either_event_loop_with_nodelay_sockets(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvloop when installed, the standard loop otherwise: both ends of a link
    send small frames at once (TCP_NODELAY), so a request/reply is never held
    back by Nagle's algorithm waiting for a delayed ACK."""
    if loop == "asyncio":
        monkeypatch.setattr(_io_thread, "_new_loop", asyncio.new_event_loop)
    with buses("A", "B") as (a, b):
        service, link = linked(a, b)
        for end in (link, service.links[0]):
            sock = end._connection.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert ("uvloop" in type(end.selector.loop).__module__) == (loop == "uvloop")
        rep = Recorder("rep")
        started(a, rep)
        rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q)
        rep.replier(Ask, "/q")
        replier_up(b, Ask, "/q")
        for q in range(20):
            assert [r.value for r in b.request_all(Ask("/q", q=q), timeout=5)] == [q]


def test_a_reply_made_before_dispatch_returns_reaches_the_remote_requestor() -> None:
    with buses("A", "B") as (a, b):
        linked(a, b)
        replier: ReplyFeed[Ask] = ReplyFeed(
            a.router, None, MessageKey(Ask, "/inline"), Scope.LOCAL_AND_REMOTE
        )
        replier.request_callback(lambda inc: inc.reply(Answer("/inline", value=inc.request.q)))
        replier.advertise()
        replier.update_feed_state(UP)
        replier_up(b, Ask, "/inline")
        replies = b.request_all(Ask("/inline", q=7), timeout=2)
        assert [(type(r), r.status) for r in replies] == [(Answer, ReplyStatus.OK_FINAL)]
