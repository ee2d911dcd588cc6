"""Multi-hop forwarding between real processes on loopback (docs/routing.md):
a chain, a star whose hub is killed, a ring and a diamond; the test process's
own bus is one of the nodes."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from routing_procs import BEAT, dial, nodes

from actorbus import Actor, Bus, FeedState, ReplyStatus, Wildcard
from actorbus.testing import Recorder, wait_until
from calculator_nodes import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "net"))
from nodes.messages import Ask, Counter  # noqa: E402

UP, DOWN = FeedState.UP, FeedState.DOWN

COUNT, ASK, JOBS = "/net/count", "/net/ask", "/net/jobs"


class Tally(Actor):
    """Counts the notifications on COUNT, and any that arrive twice."""

    def __init__(self) -> None:
        super().__init__(name="tally")
        self.seen: set[int] = set()
        self.order: list[int] = []
        self.duplicates = 0
        self.states: list[FeedState] = []
        self.changed = threading.Condition()
        self.sender: Any = None

    def startup(self) -> None:
        self.subscribe(Counter, COUNT, on_message=self.message, on_status=self.status)

    def message(self, message: Counter, feed: Any) -> None:
        with self.changed:
            if message.n in self.seen:
                self.duplicates += 1
            self.seen.add(message.n)
            self.order.append(message.n)
            self.sender = feed.sender
            self.changed.notify_all()

    def status(self, state: FeedState, feed: Any) -> None:
        with self.changed:
            self.states.append(state)
            self.changed.notify_all()

    def wait(self, predicate: Any, timeout: float = 60.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self), timeout), (
                f"states {self.states}, {len(self.seen)} seen, {self.duplicates} duplicates"
            )


@contextmanager
def own_bus(*actors: Actor) -> Iterator[Bus]:
    bus = Bus(node_id="T")
    try:
        for a in actors:
            bus.register(a)
        bus.startup(list(actors)).wait(10)
        yield bus
    finally:
        bus.close()


def test_chain_of_four_pubsub_requests_wildcards_groups() -> None:
    pa, pb, pc = free_port(), free_port(), free_port()
    tally, wsub, req, jobs = Tally(), Recorder("wild"), Recorder("req"), Recorder("jobs")
    with (
        nodes(
            {"id": "A", "listen": [pa], "roles": ["pub", "replier", "member"]},
            {"id": "B", "listen": [pb], "connect": [pa], "roles": ["replier", "member"]},
            {"id": "C", "listen": [pc], "connect": [pb]},
        ) as n,
        own_bus(tally, wsub, req, jobs) as t,
    ):
        dial(t, pc, forward=False).wait_logged_on(10)
        w = wsub.subscribe(Counter, Wildcard.levels("/net/*"))
        tally.wait(lambda x: x.states == [UP])
        wsub.log.wait_for(lambda ev: ("feed_status", w.key, UP) in ev, 30)
        n["A"].expect(lambda line: line == "PUB UP")  # T's subscription reached A
        n["A"].send("burst 1000")
        tally.wait(lambda x: len(x.seen) == 1000)
        assert tally.order == list(range(1, 1001)) and tally.duplicates == 0
        assert (tally.sender.node, tally.sender.actor, tally.sender.hops) == ("A", "pub", 3)
        wsub.log.wait_count("message", 1000, 30)

        f = req.requestor(Ask, ASK)
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev, 30)
        f.request(Ask(ASK, q=21))
        replies = [e for e in req.log.wait_count("reply", 2, 30) if e[0] == "reply"]
        assert sorted(e[1] for e in replies) == [0, 1]  # A's and B's, counted end to end
        assert {e[2].value for e in replies} == {42}
        held = f.request(Ask(ASK, q=1, hold=True))
        for node in ("A", "B"):
            n[node].expect(lambda line: line == "HELD")
        held.cancel()
        for node in ("A", "B"):
            n[node].expect(lambda line: line == "CANCELLED")

        p = jobs.publisher(Counter, JOBS, up=True)
        assert wait_until(p.is_feed_up, 30)
        for i in range(100):
            p.publish(Counter(JOBS, n=i))
        got = {"A": [], "B": []}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < 100 and time.monotonic() < deadline:
            for node, taken in got.items():
                while not n[node].lines.empty():
                    line = n[node].lines.get()
                    if line.startswith("JOB "):
                        taken.append(int(line.split()[1]))
            threading.Event().wait(0.05)  # (the lines come on reader threads)
        assert sorted(got["A"] + got["B"]) == list(range(100))  # each job to one member
        assert got["A"] and got["B"]  # both nodes' members took turns

        n["A"].stop()  # the publisher's node leaves: DOWN three hops away
        tally.wait(lambda x: x.states == [UP, DOWN])


def test_star_hub_killed_mid_stream_and_restarted() -> None:
    ph = free_port()
    hub = {"id": "H", "listen": [ph]}
    tally, req = Tally(), Recorder("req")
    with (
        nodes(
            hub,
            {"id": "L1", "connect": [ph], "roles": ["pub"]},
            {"id": "L2", "connect": [ph], "roles": ["replier"]},
            {"id": "L3", "connect": [ph], "roles": ["member"]},
        ) as n,
        own_bus(tally, req) as t,
    ):
        dial(t, ph, forward=False).wait_logged_on(10)
        f = req.requestor(Ask, ASK)
        tally.wait(lambda x: x.states == [UP])
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev, 30)
        n["L1"].send("stream")
        tally.wait(lambda x: len(x.seen) >= 100)
        h = f.request(Ask(ASK, q=1, hold=True))
        n["L2"].expect(lambda line: line == "HELD")

        killed = time.monotonic()
        n["H"].kill()
        tally.wait(lambda x: x.states[-1:] == [DOWN], timeout=10)
        noticed = time.monotonic() - killed
        assert noticed < 4 * BEAT + 2.0, noticed  # the heartbeat timeout, with slack
        (last,) = [e for e in req.log.wait_count("reply", 1, 10) if e[0] == "reply"]
        assert last[1] == 0 and last[2].status is ReplyStatus.ERROR
        assert "lost" in (last[2].reason or "")
        assert h.is_done
        n["L1"].expect(lambda line: line == "PUB DOWN")

        n["H"].stop()
        n["H2"] = type(n["H"])(hub)  # the hub again, on its port: the leaves dial back
        tally.wait(lambda x: x.states[-1:] == [UP], timeout=30)
        n["L1"].expect(lambda line: line == "PUB UP")
        before = len(tally.seen)
        tally.wait(lambda x: len(x.seen) >= before + 100)
        assert tally.duplicates == 0
        req.log.wait_for(lambda ev: req.states()[-1:] == [UP], 30)
        f.request(Ask(ASK, q=5))
        replies = [e for e in req.log.wait_count("reply", 2, 30) if e[0] == "reply"]
        assert replies[-1][1] == 0 and replies[-1][2].value == 10
        n["L1"].send("stop")


def settled(t: Bus, parent: str) -> None:
    """Wait until the test's node follows root A through ``parent``, its link
    there carrying feeds and its other link out of the tree."""

    def done() -> bool:
        v = t.router.spanning.view()
        return v.root == "A" and v.parent == parent and v.carrying == (parent,)

    assert wait_until(done, 20), t.router.spanning.view()


def _counters(n: dict[str, Any], t: Bus) -> dict[str, Any]:
    out = {name: node.stats()["links"] for name, node in n.items()}
    out["T"] = {
        (link.peer_node or link.name): (link.counters.messages_in, link.counters.messages_out)
        for link in t.links
    }
    for name, links in out.items():
        if name != "T":
            out[name] = {k: (v["messages_in"], v["messages_out"]) for k, v in links.items()}
    return out


@pytest.mark.parametrize("shape", ["ring", "diamond"])
def test_100000_notifications_exactly_once_and_nothing_circulates(shape: str) -> None:
    pa, pb, pc = free_port(), free_port(), free_port()
    if shape == "ring":  # A-B-C-T-A
        specs = [
            {"id": "A", "listen": [pa], "roles": ["pub"]},
            {"id": "B", "listen": [pb], "connect": [pa]},
            {"id": "C", "listen": [pc], "connect": [pb]},
        ]
        dials = [pc, pa]
    else:  # A-B, A-C, B-T, C-T
        specs = [
            {"id": "A", "listen": [pa], "roles": ["pub"]},
            {"id": "B", "listen": [pb], "connect": [pa]},
            {"id": "C", "listen": [pc], "connect": [pa]},
        ]
        dials = [pb, pc]
    tally = Tally()
    with nodes(*specs) as n, own_bus(tally) as t:
        for port in dials:
            dial(t, port).wait_logged_on(10)
        settled(t, "A" if shape == "ring" else "B")  # one path of two carries
        tally.wait(lambda x: x.states[-1:] == [UP])
        n["A"].send("burst 100000")
        n["A"].expect(lambda line: line == "SENT 100000", timeout=300)
        tally.wait(lambda x: len(x.seen) == 100_000, timeout=300)
        assert tally.duplicates == 0
        assert tally.order == list(range(1, 100_001))
        first = _counters(n, t)
        threading.Event().wait(1.0)  # the publisher stopped a second ago
        assert _counters(n, t) == first  # no frame moved anywhere since
        assert tally.duplicates == 0 and len(tally.seen) == 100_000
        # the ring's tree links A to T directly: B and C pass nothing on; the
        # diamond's goes A-B-T: B passes each notification on once
        forwarded = {
            name: sum(link["forwarded"] for link in n[name].stats()["links"].values())
            for name in ("B", "C")
        }
        assert forwarded == ({"B": 0, "C": 0} if shape == "ring" else {"B": 100_000, "C": 0})
        snapshot = t.inspect()
        assert snapshot.forwarding is not None and snapshot.forwarding.root == "A"


def test_diamond_cut_one_path_traffic_goes_on_over_the_other() -> None:
    pa, pb, pc = free_port(), free_port(), free_port()
    tally = Tally()
    with (
        nodes(
            {"id": "A", "listen": [pa], "roles": ["pub"]},
            {"id": "B", "listen": [pb], "connect": [pa]},
            {"id": "C", "listen": [pc], "connect": [pa]},
        ) as n,
        own_bus(tally) as t,
    ):
        for port in (pb, pc):
            dial(t, port).wait_logged_on(10)
        settled(t, "B")
        tally.wait(lambda x: x.states[-1:] == [UP])
        n["A"].send("stream")
        tally.wait(lambda x: len(x.seen) >= 200)
        n["B"].kill()  # the path the tree uses
        tally.wait(lambda x: DOWN in x.states and x.states[-1] is UP, timeout=30)
        assert t.router.spanning.view().parent == "C"
        cut_at = max(tally.seen)
        tally.wait(lambda x: max(x.seen) >= cut_at + 200, timeout=30)
        n["A"].send("stop")
        sent = int(n["A"].expect(lambda line: line.startswith("STOPPED")).split()[1])
        tally.wait(lambda x: max(x.seen) == sent, timeout=30)
        assert tally.duplicates == 0
        assert tally.order == sorted(tally.order)  # in order, none twice
        lost = sent - len(tally.seen)
        # what was in flight through B when it died, nothing more
        assert 0 <= lost < sent // 2, (lost, sent)
        print(f"diamond cut: {sent} sent, {len(tally.seen)} delivered, {lost} lost, 0 duplicates")


def test_forward_and_max_hops_are_properties_keys(tmp_path: Path) -> None:
    from actorbus.config import load_config

    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.services=s\nactorbus.service.s.port=0\nactorbus.service.s.forward=true\n"
        "actorbus.service.s.maxHops=3\n"
        "actorbus.connections=c\nactorbus.connection.c.host=h\nactorbus.connection.c.port=1\n"
        "actorbus.connection.c.forward=yes\n"
    )
    cfg = load_config(path)
    assert (cfg.services[0].settings.forward, cfg.services[0].settings.max_hops) == (True, 3)
    assert (cfg.connections[0].settings.forward, cfg.connections[0].settings.max_hops) == (
        True,
        8,
    )


def test_a_peer_that_does_not_know_route_is_told_clearly() -> None:
    # a peer whose protocol predates ROUTE: it rejects the frame as unknown and
    # logs off; this node's LinkLoggedOff says what to do
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "net"))
    from nodes.support import RawPeer, SystemLog

    from actorbus.config import ServiceSettings
    from actorbus.errors import ProtocolError
    from actorbus.net.protocol import FrameType

    bus = Bus(node_id="new")
    try:
        log = SystemLog(bus)
        service = bus.listen(0, settings=ServiceSettings(forward=True))
        with RawPeer.connect(service.port, "old") as peer:
            del peer.proto._handlers[int(FrameType.ROUTE)]
            with pytest.raises(ProtocolError, match="type 33, which is not a frame type"):
                peer.logon()  # the ROUTE comes with the node's advertisements
            peer.send()  # its LOGOFF, as an old node sends it
            off = SystemLog.next(log.logged_off)
        assert "unknown frame type" in off.reason and "forward only toward" in off.reason
    finally:
        bus.close()
