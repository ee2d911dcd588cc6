"""The remote half of the bus core, with two buses joined by an in-process
transport built on the same PartyTransport interface the TCP link uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actorbus import Bus, FeedState, Notification, Reply, ReplyStatus, Request, Scope
from actorbus.bus import SYSTEM_SUBJECT, AccessRefused, Permissions
from actorbus.testing import InProcessLink, Recorder, wait_until

UP, DOWN = FeedState.UP, FeedState.DOWN


class Tick(Notification):
    value: int


class Ask(Request):
    q: str


@pytest.fixture
def pair() -> Iterator[tuple[Bus, Bus, InProcessLink]]:
    a, b = Bus(node_id="A"), Bus(node_id="B")
    link = InProcessLink(a, b)
    yield a, b, link
    link.close()
    a.close()
    b.close()


def start(bus: Bus, *actors: Recorder) -> None:
    for x in actors:
        bus.register(x)
    bus.startup(list(actors)).wait(5)


@pytest.mark.parametrize(
    ("pub_scope", "sub_scope", "match"),
    [
        (Scope.LOCAL_ONLY, Scope.LOCAL_ONLY, False),
        (Scope.LOCAL_ONLY, Scope.LOCAL_AND_REMOTE, False),
        (Scope.LOCAL_ONLY, Scope.REMOTE_ONLY, False),
        (Scope.LOCAL_AND_REMOTE, Scope.LOCAL_ONLY, False),
        (Scope.LOCAL_AND_REMOTE, Scope.LOCAL_AND_REMOTE, True),
        (Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY, True),
        (Scope.REMOTE_ONLY, Scope.LOCAL_ONLY, False),
        (Scope.REMOTE_ONLY, Scope.LOCAL_AND_REMOTE, True),
        (Scope.REMOTE_ONLY, Scope.REMOTE_ONLY, True),
    ],
)
def test_scope_across_a_link(
    pair: tuple[Bus, Bus, InProcessLink], pub_scope: Scope, sub_scope: Scope, match: bool
) -> None:
    a, b, link = pair
    pub, sub = Recorder("pub"), Recorder("sub")
    start(a, pub)
    start(b, sub)
    s = sub.subscribe(Tick, "/t", scope=sub_scope)
    p = pub.publisher(Tick, "/t", scope=pub_scope, up=True)
    link.flush()
    if match:
        sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
        pub.log.wait_for(lambda ev: ("publish_status", p.key, UP) in ev)
        p.publish(Tick("/t", value=7))
        link.flush()
        assert sub.log.wait_count("message", 1)[-1][1].value == 7
    else:
        assert s.feed_state is DOWN
        assert p.feed_state is DOWN


def test_feed_state_crosses_both_ways_and_drop_goes_down(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    pub, sub = Recorder("pub"), Recorder("sub")
    start(a, pub)
    start(b, sub)
    p = pub.publisher(Tick, "/t", up=False)
    s = sub.subscribe(Tick, "/t")
    pub.log.wait_for(lambda ev: ("publish_status", p.key, UP) in ev)
    assert s.feed_state is DOWN
    p.update_feed_state(UP)
    sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
    p.update_feed_state(DOWN)
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
    p.update_feed_state(UP)
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN, UP])
    link.close("cable cut")
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN, UP, DOWN])
    pub.log.wait_for(lambda ev: pub.states("publish_status") == [UP, DOWN])


def test_remote_request_counts_and_link_loss_errors(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, b, link = pair
    r1, r2, req = Recorder("r1"), Recorder("r2"), Recorder("req")
    start(a, r1, r2)
    start(b, req)
    r1.auto_reply = lambda inc: Reply("/q", status=ReplyStatus.OK_FINAL, reason="r1")
    r1.replier(Ask, "/q")
    r2.replier(Ask, "/q")
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    h = f.request(Ask("/q", q="?"))
    assert h.remaining == 1  # the peer counts as one until it acknowledges
    req.log.wait_count("reply", 1)
    r2.log.wait_count("request", 1)
    assert h.remaining == 1  # two remote repliers took it; one answered
    link.close("peer gone")
    events = req.log.wait_count("reply", 2)
    last = [e for e in events if e[0] == "reply"][-1]
    assert last[1] == 0 and last[2].status is ReplyStatus.ERROR
    assert "lost" in (last[2].reason or "")
    assert h.is_done


def test_remote_cancel_reaches_replier(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, b, link = pair
    rep, req = Recorder("rep"), Recorder("req")
    start(a, rep)
    start(b, req)
    rep.replier(Ask, "/q")
    f = req.requestor(Ask, "/q")
    req.log.wait_count("feed_status", 1)
    h = f.request(Ask("/q", q="?"))
    rep.log.wait_count("request", 1)
    h.cancel()
    rep.log.wait_count("cancel", 1)
    incoming = rep.log.of("request")[0][1]
    link.flush()
    assert incoming.reply(Reply("/q")) is False


def test_remote_requests_leave_no_bookkeeping(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, b, link = pair
    rep, req = Recorder("rep"), Recorder("req")
    start(a, rep)
    start(b, req)
    rep.auto_reply = lambda inc: Reply("/q", status=ReplyStatus.OK_FINAL, reason="ok")
    replier = rep.replier(Ask, "/q")
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    handles = [f.request(Ask("/q", q=str(i)), timeout=30.0) for i in range(10)]
    for _ in range(3):
        link.flush()
    events = req.log.wait_count("reply", 10)
    assert [e[1] for e in events if e[0] == "reply"] == [0] * 10
    assert all(h.is_done and not h.is_cancelled for h in handles)
    for bus in (a, b):
        assert bus.router.outstanding_requests == 0
    # the requestor's node keeps one timer for every timeout; the replier's none
    assert len(b.runtime.timers) == 1
    assert len(a.runtime.timers) == 0
    assert replier.outstanding == 0
    (party_a,) = a.router._parties
    (party_b,) = b.router._parties
    assert party_a._in == {}  # the peer's requests, answered
    assert party_b._out == {}  # ours, answered
    assert len(party_a._reqs) == 1  # one proxy requestor per key, kept for the next


def test_permissions_are_the_seams_every_transport_gets_them() -> None:
    """The party checks the permissions ``router.attach`` was handed, whatever
    the transport: the in-memory one refuses as the TCP link does."""
    a, b = Bus(node_id="A"), Bus(node_id="B")
    refused = a.inbox(AccessRefused, SYSTEM_SUBJECT)
    link = InProcessLink(a, b, permissions_a=Permissions(["allow publish B /fx/..."]))
    try:
        fx, orders = a.inbox(Tick, "/fx/eur"), a.inbox(Tick, "/orders")
        b.publisher(Tick, "/orders")
        fx_pub = b.publisher(Tick, "/fx/eur")
        told = refused.receive(5)
        assert told is not None
        assert (told.peer_node, told.action, told.key) == ("B", "publish", str(orders.key))
        assert fx.wait_up(5)
        assert wait_until(fx_pub.is_feed_up, 5)
        fx_pub.publish(Tick("/fx/eur", value=1))
        assert fx.receive(5) is not None
        assert not orders.is_up
        assert link.party_b_on_a.refused == 1
    finally:
        link.close()
        a.close()
        b.close()
