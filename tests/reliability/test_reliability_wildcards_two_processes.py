"""Wildcard subscriptions across a real loopback link between two processes.

A wildcard subscriber in this process and publishers in a subprocess node
(``reliability_node.py pubctl``), then the other way round (``wildsub`` there,
publishers here), in both dialects.  The pattern crosses the link as the
pattern (SUBSCRIBE_PATTERN); the publishing node sends every matching key's
state and notifications, including keys advertised after the subscription.
What is checked: the subscriber is UP exactly while at least one matching
remote publisher is UP (never for a non-matching one), goes DOWN when the
publisher's node is killed, and receives each matching key's messages exactly
once and in order — and nothing of the keys that do not match; a publisher
here is UP exactly while the remote wildcard is subscribed.
"""

from __future__ import annotations

import itertools
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from reliability_support import (
    NodeProcess,
    Seq,
    WildSeqSubscriber,
    record,
    start_actors,
)

from actorbus import Bus, FeedState, PublishFeed, Wildcard
from actorbus.config import ConnectionSettings
from actorbus.testing import EventLog

HEARTBEAT = 0.2
HEARTBEAT_REPLY = 0.3

UP, DOWN = FeedState.UP, FeedState.DOWN


@dataclass(frozen=True)
class Case:
    """A pattern, two subjects it matches and some it does not."""

    pattern: Wildcard
    match1: str
    match2: str
    others: tuple[str, ...]

    @property
    def arg(self) -> str:
        return f"{self.pattern.dialect}:{self.pattern.text}"


CASES = {
    "levels": Case(
        Wildcard.levels("/fx/*/bid"),
        "/fx/eur/bid",
        "/fx/gbp/bid",
        ("/fx/eur/ask", "/fx/eur/bid/x", "/eq/eur/bid"),
    ),
    "prefix": Case(
        Wildcard.prefix("fx/eur*"),
        "fx/eurusd",
        "fx/eurchf",
        ("fx/eur/usd", "fx/gbpusd", "eq/eurusd"),
    ),
}


def _props(tmp_path: Path) -> Path:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.services=main\n"
        "actorbus.service.main.host=127.0.0.1\n"
        "actorbus.service.main.port=0\n"
        f"actorbus.service.main.heartbeatDelay={int(HEARTBEAT * 1000)}\n"
        f"actorbus.service.main.heartbeatReplyDelay={int(HEARTBEAT_REPLY * 1000)}\n"
    )
    return path


class Commands:
    """Commands to a node, each waited for (its ``ok`` carries the id)."""

    def __init__(self, node: NodeProcess) -> None:
        self.node = node
        self.ids = itertools.count(1)

    def __call__(self, cmd: str, subject: str | None = None, count: int = 0) -> dict[str, Any]:
        ident = next(self.ids)
        args: dict[str, Any] = {"id": ident, "count": count}
        if subject is not None:
            args["subject"] = subject
        self.node.send(cmd, **args)
        self.node.wait_event("ok", lambda e: e.get("id") == ident)
        if cmd == "publish":  # its ``published`` came just before its ``ok``
            return [e for e in self.node.of("published") if e["subject"] == subject][-1]
        return {}


# ------------------------------------------- the subscriber here, publishers there


@pytest.mark.parametrize("dialect", ["levels", "prefix"])
def test_a_wildcard_subscriber_follows_matching_publishers_of_another_process(
    tmp_path: Path, dialect: str
) -> None:
    case = CASES[dialect]
    m1, m2 = case.match1, case.match2
    node = NodeProcess([str(_props(tmp_path)), "pubs-node", "pubctl", "-"], name="pubs")
    with node, Bus(node_id="wild-here") as bus:
        port = node.wait_event("ready")["ports"][0]
        sub = WildSeqSubscriber(case.pattern)
        start_actors(bus, sub)
        link = bus.connect(
            "127.0.0.1",
            port,
            settings=ConnectionSettings(
                heartbeat_delay=HEARTBEAT, heartbeat_reply_delay=HEARTBEAT_REPLY
            ),
        )
        link.wait_logged_on(10)
        do = Commands(node)
        nobody = 0

        def publish(subject: str, count: int) -> dict[str, Any]:
            nonlocal nobody
            done = do("publish", subject, count)
            if subject not in (m1, m2):
                nobody += done["nobody"]
            return done

        # Publishers that do not match: no subscriber over there, the feed stays DOWN.
        for other in case.others:
            do("advertise", other)
            do("up", other)
            assert publish(other, 20)["nobody"] == 20
        # A matching one: its node sees our subscriber as soon as it advertises
        # (its own publish status UP) ...
        do("advertise", m1)
        node.wait_event("pubstate", lambda e: e["subject"] == m1 and e["up"])
        assert sub.states() == []  # ... and we are UP only once it declares UP
        do("up", m1)
        sub.wait_states([UP])
        assert publish(m1, 100)["nobody"] == 0
        sub.wait_message(m1, 100)
        do("down", m1)
        sub.wait_states([UP, DOWN])
        do("up", m1)
        sub.wait_states([UP, DOWN, UP])
        publish(m1, 100)
        sub.wait_message(m1, 200)
        do("unadvertise", m1)
        sub.wait_states([UP, DOWN, UP, DOWN])
        # A key that did not exist when we subscribed: the pattern finds it.
        do("advertise", m2)
        node.wait_event("pubstate", lambda e: e["subject"] == m2 and e["up"])
        do("up", m2)
        sub.wait_states([UP, DOWN, UP, DOWN, UP])
        publish(m2, 100)
        sub.wait_message(m2, 100)
        do("close", m2)
        sub.wait_states([UP, DOWN, UP, DOWN, UP, DOWN])
        # Two matching publishers: UP while either is.
        do("advertise", m1)
        do("up", m1)
        sub.wait_states([UP, DOWN, UP, DOWN, UP, DOWN, UP])
        do("advertise", m2)
        do("up", m2)
        do("down", m2)
        publish(m1, 50)  # after the others on the link: a state change would be here first
        sub.wait_message(m1, 250)
        assert sub.states() == [UP, DOWN, UP, DOWN, UP, DOWN, UP]
        for other in case.others:  # still nobody for them while we are UP
            assert publish(other, 20)["nobody"] == 20
        do("up", m2)
        publish(m2, 10)
        sub.wait_message(m2, 110)
        # The publishers' node dies: the link goes, and with it every matching feed.
        node.kill(signal.SIGKILL)
        sub.wait_states([UP, DOWN, UP, DOWN, UP, DOWN, UP, DOWN])
        reason = link.wait_closed(10)
        counters = link.counters
    record(
        f"wildcard_remote_publishers_{dialect}",
        pattern=case.pattern.text,
        delivered=sum(v.delivered for v in sub.stats.values()),
        by_subject={k: v.delivered for k, v in sub.stats.items()},
        non_matching_published=nobody,
        states="".join("U" if s is UP else "D" for s in sub.states()),
        link_reason=reason,
    )
    assert set(sub.stats) == {m1, m2}  # nothing of the keys that do not match
    for subject, last in ((m1, 250), (m2, 110)):
        stats = sub.stats[subject]
        assert (stats.delivered, stats.last) == (last, last), (subject, stats)
        assert stats.duplicates == stats.reordered == stats.missing == 0, (subject, stats)
    assert nobody == 2 * 20 * len(case.others)
    assert counters.messages_in == 250 + 110
    assert counters.unexpected == counters.gaps == counters.duplicates == 0
    assert node.proc is not None and node.proc.returncode == -signal.SIGKILL


# ------------------------------------------- the subscriber there, publishers here


class Statuses:
    """The publish statuses of feeds opened here, by subject."""

    def __init__(self) -> None:
        self.log = EventLog()

    def __call__(self, state: FeedState, feed: PublishFeed[Seq]) -> None:
        self.log.append((feed.key.subject, state))

    def of(self, subject: str) -> list[FeedState]:
        return [state for s, state in self.log.snapshot() if s == subject]

    def wait(self, subject: str, states: list[FeedState], timeout: float = 10.0) -> None:
        self.log.wait_for(
            lambda items: [state for s, state in items if s == subject] == states, timeout
        )


@pytest.mark.parametrize("dialect", ["levels", "prefix"])
def test_a_remote_wildcard_subscriber_brings_publishers_here_up_and_down(
    tmp_path: Path, dialect: str
) -> None:
    case = CASES[dialect]
    m1, m2 = case.match1, case.match2
    node = NodeProcess([str(_props(tmp_path)), "wild-node", "wildsub", case.arg], name="wild")
    statuses = Statuses()
    with node, Bus(node_id="pubs-here") as bus:
        port = node.wait_event("ready")["ports"][0]
        p1 = bus.publisher(Seq, m1, on_status=statuses, up=False)
        others = [bus.publisher(Seq, s, on_status=statuses, up=False) for s in case.others]
        link = bus.connect(
            "127.0.0.1",
            port,
            settings=ConnectionSettings(
                heartbeat_delay=HEARTBEAT, heartbeat_reply_delay=HEARTBEAT_REPLY
            ),
        )
        link.wait_logged_on(10)
        # The remote pattern makes the matching publisher UP, and only it.
        statuses.wait(m1, [UP])
        assert node.of("state") == []  # the remote subscriber waits for our declared UP
        p1.update_feed_state(UP)
        node.wait_event("state", lambda e: e["up"])
        routed = [p1.publish(Seq(m1, n=n)) for n in range(1, 201)]
        assert routed == [1] * 200
        for feed in others:
            feed.update_feed_state(UP)
            assert [feed.publish(Seq(feed.key.subject, n=n)) for n in range(1, 21)] == [0] * 20
        node.wait_event("msg", lambda e: e["subject"] == m1 and e["n"] == 200)
        # A publisher opened here after the remote subscription: matched too.
        p2 = bus.publisher(Seq, m2, on_status=statuses, up=False)
        statuses.wait(m2, [UP])
        p2.update_feed_state(UP)
        assert [p2.publish(Seq(m2, n=n)) for n in range(1, 101)] == [1] * 100
        node.wait_event("msg", lambda e: e["subject"] == m2 and e["n"] == 100)
        # The remote subscriber leaves: every matching publisher here goes DOWN.
        node.send("unsubscribe", id=1)
        node.wait_event("ok", lambda e: e["id"] == 1)
        statuses.wait(m1, [UP, DOWN])
        statuses.wait(m2, [UP, DOWN])
        assert p1.publish(Seq(m1, n=201)) == 0  # nobody there: not sent
        # ... and comes back.
        node.send("subscribe", id=2)
        statuses.wait(m1, [UP, DOWN, UP])
        statuses.wait(m2, [UP, DOWN, UP])
        node.wait_event("ok", lambda e: e["id"] == 2)
        assert [p1.publish(Seq(m1, n=n)) for n in range(202, 211)] == [1] * 9
        node.wait_event("msg", lambda e: e["subject"] == m1 and e["n"] == 210)
        node.send("report")
        report = node.wait_event("report")
        remote_states = [e["up"] for e in node.of("state")]
        for feed in (p1, p2, *others):
            feed.close()
        out = link.counters
    stats = report["stats"]
    record(
        f"wildcard_remote_subscriber_{dialect}",
        pattern=case.pattern.text,
        delivered=sum(v["delivered"] for v in stats.values()),
        by_subject={k: v["delivered"] for k, v in stats.items()},
        remote_states="".join("U" if up else "D" for up in remote_states),
        messages_out=out.messages_out,
    )
    assert set(stats) == {m1, m2}
    # n=201 was published to nobody: the first stream has one gap, counted by us
    assert stats[m1]["delivered"] == 209 and stats[m1]["last"] == 210
    assert stats[m1]["missing"] == 1 and stats[m1]["gaps"] == 1
    assert stats[m2]["delivered"] == stats[m2]["last"] == 100 and stats[m2]["missing"] == 0
    for s in stats.values():
        assert s["duplicates"] == s["reordered"] == 0
    for feed in others:
        assert statuses.of(feed.key.subject) == []
    # one UP per subscription (a feed closed by its owner reports nothing more)
    assert remote_states == [True, True]
    assert out.messages_out == 209 + 100
    assert out.dropped == out.lost == 0
