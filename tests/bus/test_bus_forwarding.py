"""Forwarding between links (bus/routing.py) in the bus core: nodes joined by
the in-process transport, each link forwarding at the nodes that say so."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from actorbus import Bus, FeedState, Notification, Reply, ReplyStatus, Request, Scope, Wildcard
from actorbus.bus import SYSTEM_SUBJECT, ForwardingChanged, Permissions
from actorbus.testing import InProcessLink, Recorder, wait_until

UP, DOWN = FeedState.UP, FeedState.DOWN


class Tick(Notification):
    value: int


class Ask(Request):
    q: str


def start(bus: Bus, *actors: Recorder) -> None:
    for x in actors:
        bus.register(x)
    bus.startup(list(actors)).wait(5)


class Chain:
    """Buses joined in a line, every inner node forwarding on both links."""

    def __init__(self, names: str, *, forward: bool = True, **links: object) -> None:
        self.buses = [Bus(node_id=n) for n in names]
        self.links = [
            InProcessLink(
                x,
                y,
                n,
                m,
                forward_a=forward and i > 0,
                forward_b=forward and i + 1 < len(names) - 1,
                **links,  # type: ignore[arg-type]
            )
            for i, (x, y, n, m) in enumerate(
                zip(self.buses, self.buses[1:], names, names[1:], strict=False)
            )
        ]

    def flush(self) -> None:
        for _ in range(len(self.links)):
            for link in self.links:
                link.flush()

    def close(self) -> None:
        for link in self.links:
            link.close()
        for bus in self.buses:
            bus.close()


@pytest.fixture
def chain() -> Iterator[Chain]:
    c = Chain("ABCD")
    yield c
    c.close()


def test_pubsub_and_feed_state_cross_two_forwarders(chain: Chain) -> None:
    a, _, _, d = chain.buses
    pub, sub = Recorder("pub"), Recorder("sub")
    start(a, pub)
    start(d, sub)
    s = sub.subscribe(Tick, "/t")
    p = pub.publisher(Tick, "/t", up=True)
    sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
    pub.log.wait_for(lambda ev: ("publish_status", p.key, UP) in ev)
    for i in range(100):
        p.publish(Tick("/t", value=i))
    msgs = sub.log.wait_count("message", 100)
    assert [m[1].value for m in msgs if m[0] == "message"] == list(range(100))
    sender = s.sender
    assert (sender.node, sender.actor, sender.hops) == ("A", "pub", 3)
    # B and C each passed the 100 on once
    assert chain.links[0].party_a_on_b.forwarded == 100
    assert chain.links[1].party_b_on_a.forwarded == 0  # nothing came back from C
    assert chain.links[1].party_a_on_b.forwarded == 100
    p.update_feed_state(DOWN)
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
    p.update_feed_state(UP)
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN, UP])
    s.close()
    pub.log.wait_for(lambda ev: pub.states("publish_status") == [UP, DOWN])


def test_no_echo_back_to_the_advertising_peer(chain: Chain) -> None:
    """Split horizon: A's own subscriber does not make A's publisher UP through
    B and C, and what A publishes is not sent back to A."""
    a, b, c, _ = chain.buses
    pub, sub = Recorder("pub"), Recorder("sub")
    start(a, pub, sub)
    p = pub.publisher(Tick, "/t", scope=Scope.REMOTE_ONLY, up=True)
    s = sub.subscribe(Tick, "/t", scope=Scope.REMOTE_ONLY)
    chain.flush()
    assert p.feed_state is DOWN and s.feed_state is DOWN
    # B and C hold A's publisher as a proxy; nothing was advertised back to A,
    # so A's subscriber never subscribed anywhere
    assert b.router.feeds(p.key) == {**b.router.feeds(p.key), "publishers": 1, "subscribers": 0}
    assert c.router.feeds(p.key)["publishers"] == 1
    assert a.router.feeds(p.key) == {
        "publishers": 1,
        "subscribers": 1,
        "repliers": 0,
        "requestors": 0,
    }


def test_request_remaining_and_cancel_end_to_end(chain: Chain) -> None:
    a, b, _, d = chain.buses
    r1, r2, r3, req = Recorder("r1"), Recorder("r2"), Recorder("r3"), Recorder("req")
    start(a, r1, r2)
    start(b, r3)
    start(d, req)
    for r in (r1, r2, r3):
        r.replier(Ask, "/q")
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    h = f.request(Ask("/q", q="?"))
    for r in (r1, r2, r3):
        r.log.wait_count("request", 1)
    chain.flush()
    assert h.remaining == 3  # B added A's two repliers to its own one
    r2.log.of("request")[0][1].reply(Reply("/q", status=ReplyStatus.OK_CONTINUING))
    r1.log.of("request")[0][1].reply(Reply("/q", reason="one"))
    replies = req.log.wait_count("reply", 2)
    assert [e[1] for e in replies if e[0] == "reply"] == [3, 2]
    h.cancel()
    r2.log.wait_count("cancel", 1)
    r3.log.wait_count("cancel", 1)
    chain.flush()
    for bus in chain.buses:
        assert bus.router.outstanding_requests == 0


def test_replier_taking_nothing_across_hops_ends_with_error(chain: Chain) -> None:
    a, _, _, d = chain.buses
    rep, req = Recorder("rep"), Recorder("req")
    start(a, rep)
    start(d, req)
    rep.replier(Ask, "/q", condition=lambda m: m.q == "yes")
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    h = f.request(Ask("/q", q="no"))
    (e,) = [x for x in req.log.wait_count("reply", 1) if x[0] == "reply"]
    assert e[1] == 0 and e[2].status is ReplyStatus.ERROR
    assert h.is_done


def test_middle_link_drop_goes_down_and_errors_in_flight(chain: Chain) -> None:
    a, _, _, d = chain.buses
    pub, rep, sub, req = Recorder("pub"), Recorder("rep"), Recorder("sub"), Recorder("req")
    start(a, pub, rep)
    start(d, sub, req)
    p = pub.publisher(Tick, "/t", up=True)
    s = sub.subscribe(Tick, "/t")
    rep.replier(Ask, "/q")
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
    h = f.request(Ask("/q", q="?"))
    rep.log.wait_count("request", 1)
    chain.links[1].close("cable cut")  # B-C
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
    pub.log.wait_for(lambda ev: pub.states("publish_status") == [UP, DOWN])
    req.log.wait_for(lambda ev: ("feed_status", f.key, DOWN) in ev)
    (e,) = [x for x in req.log.wait_count("reply", 1) if x[0] == "reply"]
    assert e[2].status is ReplyStatus.ERROR and "cable cut" in (e[2].reason or "")
    assert h.is_done
    assert p.feed_state is DOWN


def test_wildcards_cross_hops(chain: Chain) -> None:
    a, _, _, d = chain.buses
    pub, sub = Recorder("pub"), Recorder("sub")
    start(a, pub)
    start(d, sub)
    s = sub.subscribe(Tick, Wildcard.levels("/prices/*"))
    p = pub.publisher(Tick, "/prices/eur", up=True)
    sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
    assert wait_until(p.is_feed_up, 5)
    p.publish(Tick("/prices/eur", value=5))
    assert sub.log.wait_count("message", 1)[-1][1].value == 5


def test_a_node_without_forward_keeps_its_links_apart() -> None:
    c = Chain("ABC", forward=False)
    try:
        a, _, cc = c.buses
        p = a.publisher(Tick, "/t")
        inbox = cc.inbox(Tick, "/t")
        c.flush()
        assert not inbox.is_up
        assert not p.is_feed_up()
    finally:
        c.close()


def test_a_forwarder_refuses_what_its_permissions_refuse() -> None:
    # B's rules for C refuse subscriptions on /secret: C never hears from A there
    c = Chain("ABC")
    c.links[1].close()
    b, cc = c.buses[1], c.buses[2]
    c.links[1] = InProcessLink(
        b,
        cc,
        "B",
        "C",
        forward_a=True,
        permissions_a=Permissions(["allow subscribe,request,publish,reply C /open"]),
    )
    try:
        a = c.buses[0]
        secret, open_ = a.publisher(Tick, "/secret"), a.publisher(Tick, "/open")
        s_in, o_in = cc.inbox(Tick, "/secret"), cc.inbox(Tick, "/open")
        assert o_in.wait_up(5)
        assert wait_until(open_.is_feed_up, 5)
        c.flush()
        assert s_in.is_up  # the advertisement crossed (publish is about C's own)
        assert not secret.is_feed_up()  # the subscription was refused at B
        assert c.links[1].party_b_on_a.refused >= 1
    finally:
        c.close()


class Mesh:
    """Buses joined by in-process links, every link forwarding at both ends."""

    def __init__(self, names: str, edges: list[str]) -> None:
        self.buses = {n: Bus(node_id=n) for n in names}
        self.links = {
            e: InProcessLink(
                self.buses[e[0]], self.buses[e[1]], e[0], e[1], forward_a=True, forward_b=True
            )
            for e in edges
        }

    def settled(self, root: str) -> None:
        """Wait until every node follows ``root`` and no link is still deciding."""

        def done() -> bool:
            views = [b.router.spanning.view() for b in self.buses.values()]
            carried = sum(len(v.carrying) for v in views)
            return all(v.root == root for v in views) and carried == 2 * (len(views) - 1)

        assert wait_until(done, 5), [b.router.spanning.view() for b in self.buses.values()]

    def close(self) -> None:
        for link in self.links.values():
            link.close()
        for bus in self.buses.values():
            bus.close()


def _arrived(sub: Recorder, wanted: Callable[[int], bool], timeout: float) -> bool:
    """Whether a notification whose value ``wanted`` accepts arrives within ``timeout``."""
    try:
        sub.log.wait_for(
            lambda ev: any(e[0] == "message" and wanted(e[1].value) for e in ev), timeout
        )
    except AssertionError:
        return False
    return True


def _once(sub: Recorder, n: int) -> list[int]:
    events = sub.log.wait_count("message", n)
    values = [e[1].value for e in events if e[0] == "message"]
    assert len(values) == len(set(values)), "a notification arrived twice"
    return values


@pytest.mark.parametrize(
    "edges", [["AB", "BC", "CD", "DA"], ["AB", "AC", "BD", "CD"]], ids=["ring", "diamond"]
)
def test_a_cycle_forwards_each_notification_once(edges: list[str]) -> None:
    m = Mesh("ABCD", edges)
    try:
        m.settled("A")
        blocked = {v.blocked for v in (b.router.spanning.view() for b in m.buses.values())}
        assert sum(len(x) for x in blocked) >= 1  # one link of the cycle is out
        pub, sub = Recorder("pub"), Recorder("sub")
        start(m.buses["C"], pub)
        start(m.buses["D"], sub)
        s = sub.subscribe(Tick, "/t")
        p = pub.publisher(Tick, "/t", up=True)
        sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
        assert wait_until(p.is_feed_up, 5)
        for i in range(1000):
            p.publish(Tick("/t", value=i))
        assert _once(sub, 1000) == list(range(1000))
        p.close()  # no advertisement keeps itself alive around the cycle
        sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
        for link in m.links.values():
            link.flush()
        for bus in m.buses.values():
            assert bus.router.feeds(s.key)["publishers"] == 0 or bus is m.buses["D"]
    finally:
        m.close()


def test_diamond_cut_one_path_traffic_goes_on_over_the_other() -> None:
    m = Mesh("ABCD", ["AB", "AC", "BD", "CD"])
    try:
        m.settled("A")
        pub, sub, rep, req = Recorder("pub"), Recorder("sub"), Recorder("rep"), Recorder("req")
        start(m.buses["A"], pub, rep)
        start(m.buses["D"], sub, req)
        s = sub.subscribe(Tick, "/t")
        p = pub.publisher(Tick, "/t", up=True)
        rep.auto_reply = lambda inc: Reply("/q", reason="ok")
        rep.replier(Ask, "/q")
        f = req.requestor(Ask, "/q")
        sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        assert wait_until(p.is_feed_up, 5)
        d_parent = m.buses["D"].router.spanning.view().parent
        for i in range(100):
            p.publish(Tick("/t", value=i))
        _once(sub, 100)
        changed = m.buses["D"].inbox(ForwardingChanged, SYSTEM_SUBJECT)
        m.links["A" + d_parent].close("cut")
        m.settled("A")
        # D's feed goes DOWN and comes back UP over the other path, or, when that
        # path's link joins the tree before the cut path's retraction reaches D,
        # stays UP throughout (it never lacked a route)
        sub.log.wait_for(lambda ev: sub.states()[-1:] == [UP])
        assert m.buses["D"].router.spanning.view().parent != d_parent
        # the other path joined the tree (the cut one's node may stay, as D's child)
        wanted = {(m.buses["D"].router.spanning.view().parent, True)}
        told: set[tuple[str, bool]] = set()
        while not wanted <= told:
            x = changed.receive(5)
            assert x is not None, told
            told.add((x.peer_node, x.carrying))
        assert wait_until(p.is_feed_up, 5)
        # D's subscription reaches A over the new path a moment later: probe
        # (values from 1,000) until one arrives, then the 100 counted ones
        probe = 1_000
        while not _arrived(sub, lambda v: v >= 1_000, 0.05):
            assert probe < 1_200, "nothing reached D over the other path"
            p.publish(Tick("/t", value=probe))
            probe += 1
        for i in range(100, 200):
            p.publish(Tick("/t", value=i))
        assert _arrived(sub, lambda v: v == 199, 10)
        values = [e[1].value for e in sub.log.wait_count("message", 1) if e[0] == "message"]
        assert len(values) == len(set(values)), "a notification arrived twice"
        assert [v for v in values if 100 <= v < 200] == list(range(100, 200))
        req.log.wait_for(lambda ev: req.states()[-1:] == [UP])
        f.request(Ask("/q", q="?"))
        assert [e for e in req.log.wait_count("reply", 1) if e[0] == "reply"][-1][1] == 0
    finally:
        m.close()


def test_hop_limit_drops_notifications_that_crossed_too_many_links() -> None:
    # every link passes on notifications that crossed at most one link: A's
    # reach B and C (one forwarder), never D
    buses = [Bus(node_id=n) for n in "ABCD"]
    links = []
    try:
        for x, y in zip(buses, buses[1:], strict=False):
            link = InProcessLink(
                x, y, x.node_id, y.node_id, forward_a=True, forward_b=True, max_hops=2
            )
            links.append(link)
        inboxes = [bus.inbox(Tick, "/t") for bus in buses[1:]]
        p = buses[0].publisher(Tick, "/t")
        assert all(i.wait_up(5) for i in inboxes)
        assert wait_until(p.is_feed_up, 5)
        # C's subscription reaches B, and D's reaches C, a moment after each sees
        # the feed UP: publish until one is dropped at D for its hop count
        dropped_at_d = links[2].party_a_on_b  # D's party for C
        sent = 0
        while dropped_at_d.hop_limited == 0:
            assert sent < 500, "no notification reached D's hop limit"
            sent += 1
            p.publish(Tick("/t", value=sent))
            for link in links:
                link.flush()
            wait_until(lambda: dropped_at_d.hop_limited > 0, 0.02)
        at_b = [inboxes[0].receive(5) for _ in range(sent)]
        assert None not in at_b  # B: one link, every one
        at_c = 0
        while inboxes[1].receive(0.2) is not None:  # C: two links
            at_c += 1
        assert inboxes[2].receive(0.2) is None  # D: three, past the limit
        assert 1 <= dropped_at_d.hop_limited <= at_c  # only what C passed on
    finally:
        for link in links:
            link.close()
        for bus in buses:
            bus.close()


def test_queue_groups_cross_hops_each_message_to_one_member(chain: Chain) -> None:
    a, b, c, d = chain.buses
    pub = Recorder("pub")
    members = [Recorder(f"m{i}") for i in range(4)]
    start(a, pub)
    start(b, members[0])
    start(c, members[1], members[2])
    start(d, members[3])
    for m in members:
        m.subscribe(Tick, "/jobs", queue="workers")
    p = pub.publisher(Tick, "/jobs", up=True)
    assert wait_until(p.is_feed_up, 5)
    chain.flush()
    for i in range(400):
        p.publish(Tick("/jobs", value=i))
    chain.flush()

    def got() -> list[int]:
        return [e[1].value for m in members for e in m.log.of("message")]

    assert wait_until(lambda: len(got()) == 400, 5), len(got())
    assert sorted(got()) == list(range(400))  # each to exactly one member
    assert all(m.log.of("message") for m in members)  # every node took turns
