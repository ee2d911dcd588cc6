"""Source routes and bounces across real processes on loopback (docs/routing.md,
"Source routes and bounces").

Five nodes, each a ``nodes/route_node.py`` process::

    A --- B --- C --- D          B's service refuses A publish/request on /secret
                |
                E                C's link to E has forward off

Every link between B and C, and C's link to D, has ``forward`` on.  A sends
along explicit routes; D (or whoever is last) delivers; what cannot go on
comes back to A as an ``Undeliverable`` (and, for a request, an ERROR reply).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodes.messages import Ask, Counter

from actorbus import Actor, Bus, ReplyStatus
from actorbus.bus import SYSTEM_SUBJECT, Undeliverable
from actorbus.config import ConnectionSettings, ServiceSettings
from calculator_nodes import ENV, free_port
from line_process import LineProcess

NODE_SCRIPT = Path(__file__).resolve().parent / "nodes" / "route_node.py"
TIMEOUT = 20.0


class RouteNode(LineProcess):
    """A route_node.py process: one JSON command line in, one JSON line out."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(
            [sys.executable, str(NODE_SCRIPT), json.dumps(spec)],
            env=ENV,
            name=spec["node"],
            stdin=True,
        )

    def next_line(self) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(self.wait_for(lambda _: True, TIMEOUT))
        return answer

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.next_line()

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.reap()


@pytest.fixture(scope="module")
def chain() -> Iterator[dict[str, RouteNode]]:
    p_b, p_c, p_c_off, p_d = (free_port() for _ in range(4))
    specs = [
        {"node": "D", "services": [{"port": p_d}]},
        {
            "node": "C",
            "services": [{"port": p_c, "forward": True}, {"port": p_c_off, "forward": False}],
            "connect": [{"port": p_d, "forward": True}],
        },
        {
            "node": "B",
            "services": [
                {
                    "port": p_b,
                    "forward": True,
                    "permissions": ["deny publish,request A /secret", "allow * * *"],
                }
            ],
            "connect": [{"port": p_c, "forward": True}],
        },
        {"node": "A", "connect": [{"port": p_b}]},
        {"node": "E", "connect": [{"port": p_c_off}]},
    ]
    yield from _started(specs)


def _started(specs: list[dict[str, Any]]) -> Iterator[dict[str, RouteNode]]:
    """A RouteNode per spec, each ready, by node id; all stopped at the end."""
    nodes: dict[str, RouteNode] = {}
    try:
        for spec in specs:
            nodes[spec["node"]] = RouteNode(spec)
        for node in nodes.values():
            assert node.next_line() == {"ready": node.name}
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


def _bounce(node: RouteNode) -> dict[str, Any]:
    bounce = node.ask(cmd="bounce", timeout=TIMEOUT)
    assert "none" not in bounce, "no bounce came back"
    return bounce


def test_a_notification_goes_along_its_route_and_records_route_from(
    chain: dict[str, RouteNode],
) -> None:
    a, d = chain["A"], chain["D"]
    assert a.ask(cmd="publish", n=1, route=["B", "C", "D"]) == {"sent": 1}
    got = d.ask(cmd="received", timeout=TIMEOUT)
    # the origin, its hops and the route-from list (origin first, D last)
    assert got == {"n": 1, "sender": ["A", None, 0, 3, ["A", "B", "C", "D"]]}
    # the forwarders passed it on and delivered nothing themselves
    for forwarder in (chain["B"], chain["C"]):
        assert forwarder.ask(cmd="received", timeout=0.2) == {"none": True}
    # an empty route delivers on the sending node alone
    assert a.ask(cmd="publish", n=7, route=[]) == {"sent": 1}
    local = a.ask(cmd="received", timeout=TIMEOUT)
    node, actor, feed, hops, path = local["sender"]
    assert (local["n"], node, actor, hops, path) == (7, "A", None, 0, ["A"])
    assert feed > 0  # (the publisher's own feed: a local sender names it)


def test_a_request_goes_along_its_route_and_its_reply_comes_back(
    chain: dict[str, RouteNode],
) -> None:
    answer = chain["A"].ask(cmd="request", q=21, route=["B", "C", "D"], timeout=TIMEOUT)
    assert answer == {
        "replies": [
            {"status": "OK_FINAL", "reason": "answered by D for A via A>B>C>D", "value": 42}
        ]
    }
    answer = chain["A"].ask(cmd="request", q=5, route=["B", "C"], timeout=TIMEOUT)
    assert answer["replies"][0]["reason"] == "answered by C for A via A>B>C"


def test_an_unknown_next_node_bounces_back_to_the_sender(chain: dict[str, RouteNode]) -> None:
    a = chain["A"]
    before = chain["B"].ask(cmd="stats")
    assert a.ask(cmd="publish", n=2, route=["B", "X", "D"]) == {"sent": 1}
    bounce = _bounce(a)
    assert bounce["node"] == "B" and bounce["code"] == "unknown-node"
    assert "node B has no link to node 'X'" in bounce["reason"]
    assert bounce["route_to"] == ["X", "D"]
    assert bounce["route_from"] == ["A", "B"]
    assert (bounce["type_name"], bounce["original_subject"]) == ("linktest.Counter", "/routed")
    assert bounce["original_n"] == 2 and bounce["request"] is False
    after = chain["B"].ask(cmd="stats")
    assert after["routes"]["bounced"] == before["routes"]["bounced"] + 1
    # counted on B's link to A, the link the bounced message came in on
    assert after["links"]["A"]["routed_bounced"] == before["links"]["A"]["routed_bounced"] + 1


def test_the_hop_limit_bounces_a_route_of_more_links(chain: dict[str, RouteNode]) -> None:
    a = chain["A"]
    # 9 links, B and C back and forth: one over the default maxHops of 8
    route = ["B", "C", "B", "C", "B", "C", "B", "C", "D"]
    assert a.ask(cmd="publish", n=3, route=route) == {"sent": 1}
    bounce = _bounce(a)
    assert bounce["node"] == "C" and bounce["code"] == "hop-limit"
    assert "over the hop limit of 8" in bounce["reason"]
    assert bounce["route_to"] == ["D"]
    assert bounce["route_from"] == ["A", "B", "C", "B", "C", "B", "C", "B", "C"]
    assert bounce["original_n"] == 3
    assert chain["D"].ask(cmd="received", timeout=0.2) == {"none": True}
    # a route with more links than the first link's limit never leaves
    answer = a.ask(cmd="request", q=1, route=route, timeout=TIMEOUT)
    assert "RequestError" in answer["raised"] and "over the hop limit of 8" in answer["raised"]


def test_a_forwarder_refusing_the_key_bounces_and_says_so(chain: dict[str, RouteNode]) -> None:
    a = chain["A"]
    assert a.ask(cmd="publish", subject="/secret", n=4, route=["B", "C", "D"]) == {"sent": 1}
    bounce = _bounce(a)
    assert bounce["node"] == "B" and bounce["code"] == "refused"
    assert 'node B refuses node A to publish linktest.Counter:"/secret"' in bounce["reason"]
    assert "deny publish,request A /secret" in bounce["reason"]
    assert bounce["route_from"] == ["A", "B"] and bounce["route_to"] == ["C", "D"]
    assert bounce["original_n"] == 4
    assert chain["D"].ask(cmd="received", subject="/secret", timeout=0.2) == {"none": True}


def test_a_link_that_does_not_forward_bounces(chain: dict[str, RouteNode]) -> None:
    a = chain["A"]
    assert a.ask(cmd="publish", n=5, route=["B", "C", "E"]) == {"sent": 1}
    bounce = _bounce(a)
    assert bounce["node"] == "C" and bounce["code"] == "not-forwarding"
    assert "its link to E has forward off" in bounce["reason"]
    assert bounce["route_from"] == ["A", "B", "C"] and bounce["route_to"] == ["E"]
    assert chain["E"].ask(cmd="received", timeout=0.2) == {"none": True}


def test_an_undeliverable_request_ends_with_an_error_reply_naming_node_and_reason(
    chain: dict[str, RouteNode],
) -> None:
    a = chain["A"]
    answer = a.ask(cmd="request", q=9, route=["B", "C", "X"], timeout=TIMEOUT)
    assert answer == {
        "replies": [
            {
                "status": "ERROR",
                "reason": "undeliverable at node C: node C has no link to node 'X', the next "
                "one on the route",
                "value": None,
            }
        ]
    }
    bounce = _bounce(a)  # the bounce is on the system subject too, with the request
    assert bounce["request"] is True and bounce["original_q"] == 9
    assert bounce["route_from"] == ["A", "B", "C"] and bounce["route_to"] == ["X"]
    # refused by a forwarder's permissions: the ERROR names the node and the rule
    answer = a.ask(cmd="request", subject="/secret", q=1, route=["B", "C", "D"], timeout=TIMEOUT)
    (reply,) = answer["replies"]
    assert reply["status"] == "ERROR"
    assert reply["reason"].startswith(
        'undeliverable at node B: node B refuses node A to request linktest.Ask:"/secret": '
    )
    assert "deny publish,request A /secret" in reply["reason"]
    assert _bounce(a)["code"] == "refused"
    # a first hop this node has no link to: raised at once, never sent
    answer = a.ask(cmd="request", q=1, route=["Q", "D"], timeout=TIMEOUT)
    assert "RequestError" in answer["raised"] and "no link to node 'Q'" in answer["raised"]


def test_forwarders_count_what_they_passed_on(chain: dict[str, RouteNode]) -> None:
    b_before = chain["B"].ask(cmd="stats")
    c_before = chain["C"].ask(cmd="stats")
    for n in range(10):
        assert chain["A"].ask(cmd="publish", n=100 + n, route=["B", "C", "D"]) == {"sent": 1}
    for n in range(10):
        assert chain["D"].ask(cmd="received", timeout=TIMEOUT)["n"] == 100 + n
    b_after = chain["B"].ask(cmd="stats")
    c_after = chain["C"].ask(cmd="stats")
    assert b_after["routes"]["forwarded"] - b_before["routes"]["forwarded"] == 10
    assert c_after["routes"]["forwarded"] - c_before["routes"]["forwarded"] == 10
    # counted on the link it left by: B's link to C, C's link to D
    forwarded = "routed_forwarded"
    assert b_after["links"]["C"][forwarded] - b_before["links"]["C"][forwarded] == 10
    assert c_after["links"]["D"][forwarded] - c_before["links"]["D"][forwarded] == 10
    assert c_after["routes"]["lost"] == c_before["routes"]["lost"] == 0


def test_a_burst_goes_on_in_runs_in_order_and_every_message_counted(
    chain: dict[str, RouteNode],
) -> None:
    """Routed notifications waiting together for a link go as runs (one frame,
    passed on whole): all arrive, in order, each one counted."""
    a_before = chain["A"].ask(cmd="stats")
    b_before, c_before = chain["B"].ask(cmd="stats"), chain["C"].ask(cmd="stats")
    count = 5_000
    assert chain["A"].ask(cmd="publish", n=1_000, count=count, route=["B", "C", "D"]) == {
        "sent": count
    }
    for n in range(1_000, 1_000 + count):
        got = chain["D"].ask(cmd="received", timeout=TIMEOUT)
        assert got["n"] == n and got["sender"][4] == ["A", "B", "C", "D"]
    b_after, c_after = chain["B"].ask(cmd="stats"), chain["C"].ask(cmd="stats")
    for before, after in ((b_before, b_after), (c_before, c_after)):
        assert after["routes"]["forwarded"] - before["routes"]["forwarded"] == count
        assert after["routes"]["bounced"] == before["routes"]["bounced"]
    # A wrote the burst as runs (fewer frames than messages), and B passed each
    # run on whole: no more frames to C than it got from A
    a_after = chain["A"].ask(cmd="stats")
    sent = [x - y for x, y in zip(a_after["frames"]["B"], a_before["frames"]["B"], strict=True)]
    passed = [x - y for x, y in zip(b_after["frames"]["C"], b_before["frames"]["C"], strict=True)]
    assert sent[0] == passed[0] == count
    assert passed[1] <= sent[1] < count, (sent, passed)


def test_each_message_of_a_run_bounces_on_its_own(chain: dict[str, RouteNode]) -> None:
    a = chain["A"]
    assert a.ask(cmd="publish", n=500, count=50, route=["B", "X"]) == {"sent": 50}
    bounced = sorted(_bounce(a)["original_n"] for _ in range(50))
    assert bounced == list(range(500, 550))


def test_a_routed_request_that_times_out_is_cancelled_on_the_last_node(
    chain: dict[str, RouteNode],
) -> None:
    answer = chain["A"].ask(cmd="request", q=3, hold=True, route=["B", "C", "D"], timeout=0.5)
    assert answer == {
        "replies": [{"status": "ERROR", "reason": "timed out after 0.5 s", "value": None}]
    }
    # the cancel travels the route: D's replier is told (polled: it crosses 3 links)
    deadline = time.monotonic() + TIMEOUT
    held = chain["D"].ask(cmd="held")
    while held["cancelled"] < 1 and time.monotonic() < deadline:
        held = chain["D"].ask(cmd="held")
    assert held == {"held": 1, "cancelled": 1}


def test_source_routes_cross_a_link_the_forwarding_tree_left_out() -> None:
    """A triangle of forwarding nodes: the tree leaves one link out of feed
    forwarding, and source routes still cross it (it is a direct link)."""
    forward = {"forward": True}
    buses = {name: Bus(node_id=name) for name in "ABC"}
    try:
        services = {
            name: buses[name].listen(0, settings=ServiceSettings(**forward)) for name in "AB"
        }
        links = [
            buses[a].connect("127.0.0.1", services[b].port, settings=ConnectionSettings(**forward))
            for a, b in (("B", "A"), ("C", "A"), ("C", "B"))
        ]
        for link in links:
            assert link.wait_logged_on(TIMEOUT)
        # the tree's root is A (the least id); B's link to C is out of it
        deadline = time.monotonic() + TIMEOUT
        waiter = threading.Event()
        while "C" not in buses["B"].router.spanning.view().blocked:
            assert time.monotonic() < deadline, buses["B"].router.spanning.view()
            waiter.wait(0.02)
        inbox = buses["C"].inbox(Counter, "/routed")
        feed = buses["A"].publisher(Counter, "/routed")
        assert feed.publish(Counter("/routed", n=1), route_to=["B", "C"]) == 1
        got = inbox.receive(TIMEOUT)
        assert got is not None and got.n == 1
        sender = inbox.feed.sender
        assert sender is not None and sender.path == ("A", "B", "C") and sender.hops == 2
    finally:
        for bus in buses.values():
            bus.close()


class _Holder(Actor):
    """Takes every Ask on /routed and never answers (a request in flight)."""

    def __init__(self) -> None:
        super().__init__(name="holder")
        self.took = threading.Event()

    def startup(self) -> None:
        self.replier(Ask, "/routed", on_request=lambda request: self.took.set())


def test_a_routed_request_ends_with_an_error_when_its_first_link_drops() -> None:
    buses = {name: Bus(node_id=name) for name in "ABC"}
    try:
        forward = ServiceSettings(forward=True)
        b_service = buses["B"].listen(0, settings=forward)
        c_service = buses["C"].listen(0)
        a_to_b = buses["A"].connect("127.0.0.1", b_service.port)
        b_to_c = buses["B"].connect(
            "127.0.0.1", c_service.port, settings=ConnectionSettings(forward=True)
        )
        assert a_to_b.wait_logged_on(TIMEOUT) and b_to_c.wait_logged_on(TIMEOUT)
        holder = _Holder()
        buses["C"].register(holder)
        buses["C"].startup(holder).wait(TIMEOUT)
        replies: queue.SimpleQueue[list[Any]] = queue.SimpleQueue()
        asking = threading.Thread(
            target=lambda: replies.put(
                buses["A"].request_all(Ask("/routed", q=1), 60.0, route_to=["B", "C"])
            )
        )
        asking.start()
        assert holder.took.wait(TIMEOUT)  # the request is at C, held
        a_to_b.close("cut for the test")
        (reply,) = replies.get(timeout=TIMEOUT)  # at once, not after 60 s
        asking.join(TIMEOUT)
        assert reply.status is ReplyStatus.ERROR
        assert "link to remote node B lost" in reply.reason
    finally:
        for bus in buses.values():
            bus.close()


# ---------------------------------------------------------------- a link further on drops
#: how long a link waits before declaring a silent peer down (the defaults):
#: a request in flight must end within it when a link on its route drops
HEARTBEAT_TIMEOUT = (
    ConnectionSettings().heartbeat_delay + ConnectionSettings().heartbeat_reply_delay
)


@pytest.fixture
def line() -> Iterator[dict[str, RouteNode]]:
    """A --- B --- C --- D, every link between B, C and D forwarding."""
    p_b, p_c, p_d = (free_port() for _ in range(3))
    specs = [
        {"node": "D", "services": [{"port": p_d}]},
        {
            "node": "C",
            "services": [{"port": p_c, "forward": True}],
            "connect": [{"port": p_d, "forward": True}],
        },
        {
            "node": "B",
            "services": [{"port": p_b, "forward": True}],
            "connect": [{"port": p_c, "forward": True}],
        },
        {"node": "A", "connect": [{"port": p_b}]},
    ]
    yield from _started(specs)


def _held_at_d(line: dict[str, RouteNode]) -> float:
    """A sends a request along B, C, D that D's replier holds; returns once D
    holds it (the clock then), A waiting for its reply (60 s timeout)."""
    a, d = line["A"], line["D"]
    assert a.proc.stdin is not None
    command = {"cmd": "request", "q": 5, "hold": True, "route": ["B", "C", "D"], "timeout": 60.0}
    a.proc.stdin.write(json.dumps(command) + "\n")
    a.proc.stdin.flush()
    deadline = time.monotonic() + TIMEOUT
    held = d.ask(cmd="held")
    while held["held"] < 1:  # polled: the request crosses 3 links
        assert time.monotonic() < deadline, held
        held = d.ask(cmd="held")
    assert line["C"].ask(cmd="stats")["routes"]["in_flight"] == 1  # C keeps it
    return time.monotonic()


def _error_naming_c(answer: dict[str, Any], since: float) -> None:
    took = time.monotonic() - since
    (reply,) = answer["replies"]
    assert reply["status"] == "ERROR", answer
    assert reply["reason"].startswith(
        "undeliverable at node C: node C lost its link to node D, the next one on the route"
    ), reply
    assert took < HEARTBEAT_TIMEOUT, f"the ERROR took {took:.1f} s"


def test_a_routed_request_ends_with_an_error_when_its_last_node_is_killed(
    line: dict[str, RouteNode],
) -> None:
    since = _held_at_d(line)
    line["D"].proc.kill()  # SIGKILL: D never says goodbye
    line["D"].proc.wait(TIMEOUT)
    _error_naming_c(line["A"].next_line(), since)
    # the ERROR came as a bounce, published on A's system subject too
    bounce = _bounce(line["A"])
    assert (bounce["node"], bounce["code"], bounce["request"]) == ("C", "link-lost", True)
    assert (bounce["route_to"], bounce["route_from"]) == (["D"], ["A", "B", "C"])
    c_routes = line["C"].ask(cmd="stats")["routes"]
    assert (c_routes["in_flight"], c_routes["bounced"], c_routes["untracked"]) == (0, 1, 0)
    assert line["B"].ask(cmd="stats")["routes"]["in_flight"] == 0  # the bounce ended it at B


def test_a_routed_request_ends_with_an_error_when_a_link_further_on_drops(
    line: dict[str, RouteNode],
) -> None:
    since = _held_at_d(line)
    assert line["D"].ask(cmd="drop", peer="C")["dropped"] == 1  # C and D both stay up
    _error_naming_c(line["A"].next_line(), since)
    assert "dropped for the test" in _bounce(line["A"])["reason"]
    # D's replier is told its request is cancelled: nobody is left to answer
    deadline = time.monotonic() + TIMEOUT
    held = line["D"].ask(cmd="held")
    while held["cancelled"] < 1:
        assert time.monotonic() < deadline, held
        held = line["D"].ask(cmd="held")
    assert held == {"held": 1, "cancelled": 1}


def test_forwarders_forget_a_routed_request_once_its_last_reply_passes(
    line: dict[str, RouteNode],
) -> None:
    answer = line["A"].ask(cmd="request", q=4, route=["B", "C", "D"], timeout=TIMEOUT)
    assert [r["value"] for r in answer["replies"]] == [8]
    for name in "BC":  # the last reply went back through them: nothing kept
        assert line[name].ask(cmd="stats")["routes"]["in_flight"] == 0
    # and a later drop of C's link to D bounces nothing
    before = line["C"].ask(cmd="stats")["routes"]["bounced"]
    assert line["D"].ask(cmd="drop", peer="C")["dropped"] == 1
    assert _quiet_bounces(line["A"]) and line["C"].ask(cmd="stats")["routes"]["bounced"] == before


def _quiet_bounces(node: RouteNode) -> bool:
    """True when no bounce reaches ``node`` within a second."""
    return "none" in node.ask(cmd="bounce", timeout=1.0)


def test_the_record_of_requests_passed_on_is_bounded_and_says_when_full() -> None:
    """B keeps at most ``limit`` requests passed on (lowered to 2 here) and
    ``limit_bytes`` of their bodies (0 here); past the count a request is
    untracked and counted; when B's link to C drops, the two kept bounce (with
    no body), the third ends at its timeout."""
    buses = {name: Bus(node_id=name) for name in "ABC"}
    askers: list[threading.Thread] = []
    try:
        b_service = buses["B"].listen(0, settings=ServiceSettings(forward=True))
        c_service = buses["C"].listen(0)
        a_to_b = buses["A"].connect("127.0.0.1", b_service.port)
        b_to_c = buses["B"].connect(
            "127.0.0.1", c_service.port, settings=ConnectionSettings(forward=True)
        )
        assert a_to_b.wait_logged_on(TIMEOUT) and b_to_c.wait_logged_on(TIMEOUT)
        in_flight = buses["B"].router.source_routes.in_flight
        in_flight.limit, in_flight.limit_bytes = 2, 0
        holder = _Holder()
        buses["C"].register(holder)
        buses["C"].startup(holder).wait(TIMEOUT)
        replies: queue.SimpleQueue[tuple[int, list[Any]]] = queue.SimpleQueue()
        waiter = threading.Event()
        for q, timeout in ((1, 60.0), (2, 60.0), (3, 3.0)):
            askers.append(
                threading.Thread(
                    target=lambda q=q, t=timeout: replies.put(
                        (q, buses["A"].request_all(Ask("/routed", q=q), t, route_to=["B", "C"]))
                    )
                )
            )
            askers[-1].start()
            snap = buses["B"].inspect()  # polled: the request crosses 2 links
            deadline = time.monotonic() + TIMEOUT
            while snap.routed_in_flight + snap.routed_untracked < q:
                assert time.monotonic() < deadline, snap
                waiter.wait(0.01)
                snap = buses["B"].inspect()
        assert (snap.routed_in_flight, snap.routed_untracked) == (2, 1)
        bounces = buses["A"].inbox(Undeliverable, SYSTEM_SUBJECT)
        b_to_c.close("cut for the test")
        ended = dict(replies.get(timeout=TIMEOUT) for _ in range(2))
        assert sorted(ended) == [1, 2]  # the kept ones, long before their 60 s
        for (reply,) in ended.values():
            assert reply.status is ReplyStatus.ERROR
            assert reply.reason.startswith(
                "undeliverable at node B: node B lost its link to node C"
            )
        q, (reply,) = replies.get(timeout=TIMEOUT)  # the untracked one: its timeout
        assert (q, reply.reason) == (3, "timed out after 3 s")
        for _ in range(2):
            bounce = bounces.receive(TIMEOUT)
            assert bounce is not None and bounce.code == "link-lost" and bounce.body == b""
        assert buses["B"].inspect().routed_in_flight == 0
    finally:
        for bus in buses.values():
            bus.close()
        for asker in askers:
            asker.join(TIMEOUT)


def test_a_forwarder_whose_link_back_drops_cancels_the_request_on(
    line: dict[str, RouteNode],
) -> None:
    """B drops its link to C: B bounces the request to A (C is past the lost
    link), and C, with nobody left to answer, sends its cancel on to D."""
    since = _held_at_d(line)
    assert line["B"].ask(cmd="drop", peer="C")["dropped"] == 1
    (reply,) = line["A"].next_line()["replies"]
    took = time.monotonic() - since
    assert reply["status"] == "ERROR" and took < HEARTBEAT_TIMEOUT
    assert reply["reason"].startswith("undeliverable at node B: node B lost its link to node C")
    deadline = time.monotonic() + TIMEOUT
    held = line["D"].ask(cmd="held")
    while held["cancelled"] < 1:  # told by C's cancel (A's request ended by the bounce)
        assert time.monotonic() < deadline, held
        held = line["D"].ask(cmd="held")
    assert held == {"held": 1, "cancelled": 1}
    assert line["C"].ask(cmd="stats")["routes"]["in_flight"] == 0
