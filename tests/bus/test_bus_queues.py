"""Queue groups through a real Bus: each notification goes to exactly one member
of each group, round-robin or least loaded, re-offered when a member leaves
before taking it, kept or dropped when the group is empty, across an in-process
link, and the publisher's feed state.

Inbox members take their messages on the publishing thread, so a local check
right after a publish is exact; actor members are blocked and released with
events, and waited on with their logs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    FeedState,
    MessageKey,
    Notification,
    PublishFeed,
    Scope,
    SubscribeFeed,
    UsageError,
    Wildcard,
)
from actorbus.bus import Inbox, QueueGroup
from actorbus.config import DispatcherConfig
from actorbus.testing import EventLog, InProcessLink

UP, DOWN = FeedState.UP, FeedState.DOWN


class Job(Notification, type_name="test.queues.Job"):
    v: int = 0


def config() -> BusConfig:
    return BusConfig(
        dispatchers=(
            DispatcherConfig(name="default", is_default=True, thread_count=2),
            DispatcherConfig(name="slow", thread_count=1),
        )
    )


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(config(), node_id="a")
    yield b
    b.close()


@pytest.fixture
def pair() -> Iterator[tuple[Bus, Bus, InProcessLink]]:
    a, b = Bus(config(), node_id="A"), Bus(config(), node_id="B")
    link = InProcessLink(a, b)
    yield a, b, link
    link.close()
    a.close()
    b.close()


class Member(Actor):
    """A queue member that logs the values it takes.  With a ``gate``, its first
    message blocks its callback (``entered`` set) until the gate opens; with
    ``leave_on_first``, that first callback then unsubscribes its own feed."""

    def __init__(
        self, name: str, gate: threading.Event | None = None, *, leave_on_first: bool = False
    ) -> None:
        super().__init__(name=name)
        self.got = EventLog()
        self.gate = gate
        self.entered = threading.Event()
        self.leave_on_first = leave_on_first
        self.feed: SubscribeFeed[Job] | None = None

    def join(self, subject: str, queue: str | QueueGroup, **kw: Any) -> SubscribeFeed[Job]:
        self.feed = self.subscribe(Job, subject, on_message=self.take, queue=queue, **kw)
        return self.feed

    def take(self, message: Job, feed: SubscribeFeed[Job]) -> None:
        first = not self.entered.is_set()
        self.entered.set()
        if first and self.gate is not None:
            assert self.gate.wait(10), "the test never opened the gate"
        self.got.append(message.v)
        if first and self.leave_on_first:
            feed.unsubscribe()

    def values(self) -> list[int]:
        return self.got.snapshot()


def started(bus: Bus, *actors: Actor, dispatcher: str | None = None) -> None:
    for x in actors:
        bus.register(x, dispatcher=dispatcher)
    bus.startup(list(actors)).wait(5)


def barrier(actor: Actor) -> None:
    """Wait until every task posted to ``actor`` so far has run."""
    done = threading.Event()
    actor.post(done.set)
    assert done.wait(5), "the actor's mailbox did not drain"


def values(inbox: Inbox[Job]) -> list[int]:
    return [m.v for m in inbox.drain()]


def status_log(log: EventLog) -> Any:
    def on_status(state: FeedState, feed: PublishFeed[Any]) -> None:
        log.append(("publish_status", state))

    return on_status


def states(log: EventLog) -> list[FeedState]:
    return [e[1] for e in log.snapshot()]


def group_of(bus: Bus, subject: str, name: str) -> Any:
    return bus.router.entries[MessageKey(Job, subject)].groups[name]


def assert_once_each(parts: list[list[int]], total: int) -> None:
    """The parts are disjoint and together hold exactly ``range(total)``."""
    flat = [v for part in parts for v in part]
    assert len(flat) == total, [len(p) for p in parts]
    assert sorted(flat) == list(range(total))


# ---------------------------------------------------------------- sharing


def test_round_robin_shares_and_a_plain_subscriber_gets_all(bus: Bus) -> None:
    members = [bus.inbox(Job, "/jobs", queue="workers") for _ in range(3)]
    plain = bus.inbox(Job, "/jobs")
    p = bus.publisher(Job, "/jobs")
    for v in range(3000):
        p.publish(Job("/jobs", v=v))
    parts = [values(m) for m in members]
    assert [len(part) for part in parts] == [1000, 1000, 1000]
    assert parts == [list(range(i, 3000, 3)) for i in range(3)]  # turns in joining order
    assert_once_each(parts, 3000)
    assert values(plain) == list(range(3000))


def test_two_groups_on_one_key_each_get_every_message_once(bus: Bus) -> None:
    g1 = [bus.inbox(Job, "/jobs", queue="g1") for _ in range(2)]
    g2 = [bus.inbox(Job, "/jobs", queue=QueueGroup("g2", keep=3)) for _ in range(3)]
    w = bus.inbox(Job, Wildcard.levels("/*"))
    p = bus.publisher(Job, "/jobs")
    for v in range(600):
        p.publish(Job("/jobs", v=v))
    assert_once_each([values(m) for m in g1], 600)
    assert_once_each([values(m) for m in g2], 600)
    assert values(w) == list(range(600))


def test_actor_members_share_on_their_dispatchers(bus: Bus) -> None:
    members = [Member(f"m{i}") for i in range(3)]
    started(bus, *members)
    for m in members:
        m.join("/jobs", "workers")
    p = bus.publisher(Job, "/jobs")
    for v in range(300):
        p.publish(Job("/jobs", v=v))
    for m in members:
        m.got.wait_for(lambda ev: len(ev) >= 100)
    assert [len(m.values()) for m in members] == [100, 100, 100]
    assert_once_each([m.values() for m in members], 300)


def test_least_loaded_gives_the_blocked_member_fewer(bus: Bus) -> None:
    gate = threading.Event()
    slow = Member("slow", gate)
    fast = [Member("f1"), Member("f2")]
    started(bus, slow, dispatcher="slow")
    started(bus, *fast)
    group = QueueGroup("workers", balance="least_loaded")
    slow.join("/jobs", group)  # joined first: it would win every tie
    for m in fast:
        m.join("/jobs", group)
    p = bus.publisher(Job, "/jobs")
    try:
        p.publish(Job("/jobs", v=0))
        assert slow.entered.wait(5)  # the slow member holds its first message
        for v in range(1, 300):
            p.publish(Job("/jobs", v=v))
            for m in fast:
                barrier(m)  # the fast members have nothing waiting
        taken = 300 - sum(len(m.values()) for m in fast)
        assert taken <= 2  # its running message, and one while it had none waiting
        assert sum(len(m.values()) for m in fast) >= 298
    finally:
        gate.set()
    slow.got.wait_for(lambda ev: len(ev) == taken)
    assert_once_each([slow.values(), *(m.values() for m in fast)], 300)


def test_least_loaded_round_robin_with_inbox_members_still_delivers_once(bus: Bus) -> None:
    group = QueueGroup("workers", balance="least_loaded")
    members = [bus.inbox(Job, "/jobs", queue=group) for _ in range(3)]
    p = bus.publisher(Job, "/jobs")
    for v in range(300):
        p.publish(Job("/jobs", v=v))
    assert_once_each([values(m) for m in members], 300)


# ---------------------------------------------------------------- re-offer


def blocked_pair(
    bus: Bus, *, leave_on_first: bool = False
) -> tuple[threading.Event, Member, Member]:
    """``leaving`` (first to join, on its own thread) and ``staying``; ten
    messages published: the leaving member is blocked in its first with four
    more queued for it (round-robin: 0 running, 2 4 6 8 queued)."""
    gate = threading.Event()
    leaving = Member("leaving", gate, leave_on_first=leave_on_first)
    staying = Member("staying")
    started(bus, leaving, dispatcher="slow")
    started(bus, staying)
    leaving.join("/jobs", "workers")
    staying.join("/jobs", "workers")
    p = bus.publisher(Job, "/jobs")
    p.publish(Job("/jobs", v=0))
    assert leaving.entered.wait(5)
    for v in range(1, 10):
        p.publish(Job("/jobs", v=v))
    staying.got.wait_for(lambda ev: sorted(ev) == [1, 3, 5, 7, 9])
    return gate, leaving, staying


def test_messages_queued_for_a_member_that_leaves_are_reoffered(bus: Bus) -> None:
    gate, leaving, staying = blocked_pair(bus)
    assert leaving.feed is not None
    leaving.feed.unsubscribe()  # from another thread than the member's
    gate.set()
    staying.got.wait_for(lambda ev: len(ev) == 9)
    barrier(leaving)
    assert leaving.values() == [0]
    assert staying.values() == [1, 3, 5, 7, 9, 2, 4, 6, 8]
    assert group_of(bus, "/jobs", "workers").reoffered == 4


def test_a_member_leaving_from_its_own_callback_has_its_queue_reoffered(bus: Bus) -> None:
    gate, leaving, staying = blocked_pair(bus, leave_on_first=True)
    gate.set()
    staying.got.wait_for(lambda ev: len(ev) == 9)
    barrier(leaving)
    assert leaving.values() == [0]
    assert_once_each([leaving.values(), staying.values()], 10)
    assert group_of(bus, "/jobs", "workers").reoffered == 4


def test_the_last_member_leaving_keeps_its_queue_for_the_next_with_keep(bus: Bus) -> None:
    gate = threading.Event()
    leaving = Member("leaving", gate, leave_on_first=True)
    started(bus, leaving, dispatcher="slow")
    leaving.join("/jobs", QueueGroup("workers", keep=10))
    p = bus.publisher(Job, "/jobs")
    for v in range(5):
        p.publish(Job("/jobs", v=v))
    assert leaving.entered.wait(5)
    gate.set()
    barrier(leaving)
    assert leaving.values() == [0]
    group = group_of(bus, "/jobs", "workers")
    assert [m.v for *_, m in group.kept] == [1, 2, 3, 4]
    nxt = bus.inbox(Job, "/jobs", queue="workers")
    assert values(nxt) == [1, 2, 3, 4]
    assert group.reoffered == 4 and group.dropped == 0


# ---------------------------------------------------------------- empty group


def test_empty_group_without_keep_takes_nothing(bus: Bus) -> None:
    m = bus.inbox(Job, "/jobs", queue="workers")
    p = bus.publisher(Job, "/jobs")
    p.publish(Job("/jobs", v=0))
    assert values(m) == [0]
    m.close()
    p.publish(Job("/jobs", v=1))
    m2 = bus.inbox(Job, "/jobs", queue="workers")
    p.publish(Job("/jobs", v=2))
    assert values(m2) == [2]  # nothing of the empty time was kept


def test_empty_group_with_keep_holds_n_and_drops_the_rest(bus: Bus) -> None:
    m = bus.inbox(Job, "/jobs", queue=QueueGroup("workers", keep=5))
    p = bus.publisher(Job, "/jobs")
    m.close()
    group = group_of(bus, "/jobs", "workers")
    for v in range(8):
        p.publish(Job("/jobs", v=v))
    assert [msg.v for *_, msg in group.kept] == [0, 1, 2, 3, 4]
    assert group.dropped == 3
    nxt = bus.inbox(Job, "/jobs", queue="workers")  # a plain name joins with the options
    assert values(nxt) == [0, 1, 2, 3, 4]
    assert not group.kept
    p.publish(Job("/jobs", v=8))
    assert values(nxt) == [8]
    assert group.dropped == 3


def test_kept_messages_go_to_an_actor_member_in_order(bus: Bus) -> None:
    p = bus.publisher(Job, "/jobs")
    m = bus.inbox(Job, "/jobs", queue=QueueGroup("workers", keep=5))
    m.close()
    for v in range(5):
        p.publish(Job("/jobs", v=v))
    member = Member("late")
    started(bus, member)
    member.join("/jobs", QueueGroup("workers", keep=5))
    member.got.wait_for(lambda ev: len(ev) == 5)
    assert member.values() == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- refusals


def test_conflicting_group_options_are_refused_naming_both(bus: Bus) -> None:
    bus.inbox(Job, "/jobs", queue=QueueGroup("w", keep=1))
    with pytest.raises(UsageError) as err:
        bus.inbox(Job, "/jobs", queue=QueueGroup("w", keep=2))
    text = str(err.value)
    assert "'w'" in text and "keep=1" in text and "keep=2" in text
    with pytest.raises(UsageError, match="least_loaded"):
        bus.inbox(Job, "/jobs", queue=QueueGroup("w", keep=1, balance="least_loaded"))
    # a plain name, or the same options, joins
    bus.inbox(Job, "/jobs", queue="w")
    bus.inbox(Job, "/jobs", queue=QueueGroup("w", keep=1))
    assert bus.router.feeds(MessageKey(Job, "/jobs"))["subscribers"] == 3
    # groups are per key: another key may use the name with other options
    bus.inbox(Job, "/other", queue=QueueGroup("w", keep=2))


def test_queue_member_with_a_condition_is_refused(bus: Bus) -> None:
    with pytest.raises(UsageError, match="cannot have a condition"):
        bus.inbox(Job, "/jobs", queue="w", condition=lambda m: True)


def test_queue_on_a_wildcard_is_refused(bus: Bus) -> None:
    with pytest.raises(UsageError, match="not a wildcard"):
        bus.inbox(Job, Wildcard.levels("/jobs/*"), queue="w")
    member = Member("m")
    started(bus, member)
    with pytest.raises(UsageError, match="not a wildcard"):
        member.subscribe(Job, Wildcard.prefix("jobs*"), queue=QueueGroup("w"))


@pytest.mark.parametrize("name", ["", "x" * 300, 7])
def test_bad_group_names_are_refused(bus: Bus, name: Any) -> None:
    with pytest.raises(UsageError, match="queue group name"):
        bus.inbox(Job, "/jobs", queue=name)
    if isinstance(name, str):
        with pytest.raises(UsageError, match="queue group name"):
            QueueGroup(name)


def test_bad_group_options_are_refused() -> None:
    with pytest.raises(UsageError, match="keep"):
        QueueGroup("w", keep=-1)
    with pytest.raises(UsageError, match="balance"):
        QueueGroup("w", balance="random")


def test_longest_name_is_accepted(bus: Bus) -> None:
    m = bus.inbox(Job, "/jobs", queue="x" * 256)
    p = bus.publisher(Job, "/jobs")
    p.publish(Job("/jobs", v=1))
    assert values(m) == [1]


# ---------------------------------------------------------------- feed state


def test_a_publisher_with_only_queue_members_is_up(bus: Bus) -> None:
    log = EventLog()
    p = bus.publisher(Job, "/jobs", on_status=status_log(log))
    assert p.feed_state is DOWN
    m1 = bus.inbox(Job, "/jobs", queue="workers")
    assert m1.is_up and states(log) == [UP]
    m2 = bus.inbox(Job, "/jobs", queue="workers")
    m1.close()
    assert states(log) == [UP]
    m2.close()
    assert states(log) == [UP, DOWN]
    # a kept-messages group without members is no subscriber either
    m3 = bus.inbox(Job, "/jobs", queue=QueueGroup("k", keep=3))
    m3.close()
    assert states(log) == [UP, DOWN, UP, DOWN]


@pytest.mark.parametrize(
    ("pub_scope", "sub_scope", "match"),
    [
        (Scope.LOCAL_ONLY, Scope.LOCAL_ONLY, True),
        (Scope.LOCAL_ONLY, Scope.REMOTE_ONLY, False),
        (Scope.REMOTE_ONLY, Scope.LOCAL_ONLY, False),
        (Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY, True),
    ],
)
def test_queue_members_follow_the_scope_table(
    bus: Bus, pub_scope: Scope, sub_scope: Scope, match: bool
) -> None:
    m = bus.inbox(Job, "/jobs", queue="workers", scope=sub_scope)
    p = bus.publisher(Job, "/jobs", scope=pub_scope)
    assert (p.feed_state is UP, m.is_up) == (match, match)
    p.publish(Job("/jobs", v=1))
    assert values(m) == ([1] if match else [])


# ---------------------------------------------------------------- across a link


def test_members_on_two_nodes_share_each_message_once(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    on_a = [a.inbox(Job, "/jobs", queue="workers") for _ in range(2)]
    on_b = b.inbox(Job, "/jobs", queue="workers")
    pa = a.publisher(Job, "/jobs")
    link.flush()
    for v in range(3000):
        pa.publish(Job("/jobs", v=v))
    link.flush()
    parts = [values(m) for m in on_a] + [values(on_b)]
    assert [len(part) for part in parts] == [1000, 1000, 1000]
    assert_once_each(parts, 3000)
    # B's member leaves: the rest go to A's members
    on_b.close()
    link.flush()
    for v in range(3000, 3300):
        pa.publish(Job("/jobs", v=v))
    link.flush()
    rest = [values(m) for m in on_a]
    assert [len(part) for part in rest] == [150, 150]
    assert sorted(v for part in rest for v in part) == list(range(3000, 3300))


def test_a_publisher_on_the_other_node_shares_once_too(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    on_a = [a.inbox(Job, "/jobs", queue="workers") for _ in range(2)]
    link.flush()
    on_b = b.inbox(Job, "/jobs", queue="workers")
    pb = b.publisher(Job, "/jobs")
    link.flush()
    for v in range(3000):
        pb.publish(Job("/jobs", v=v))
    link.flush()
    parts = [values(m) for m in on_a] + [values(on_b)]
    assert [len(part) for part in parts] == [1000, 1000, 1000]  # A's node takes two turns
    assert_once_each(parts, 3000)
    assert group_of(a, "/jobs", "workers").delivered_remote == 2000


def test_publishers_on_both_nodes_members_on_both(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    on_a = [a.inbox(Job, "/jobs", queue="workers") for _ in range(2)]
    on_b = b.inbox(Job, "/jobs", queue="workers")
    pa, pb = a.publisher(Job, "/jobs"), b.publisher(Job, "/jobs")
    link.flush()
    for v in range(0, 2000, 2):
        pa.publish(Job("/jobs", v=v))
        pb.publish(Job("/jobs", v=v + 1))
    link.flush()
    assert_once_each([values(m) for m in on_a] + [values(on_b)], 2000)


def test_after_the_link_closes_local_members_get_everything(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    on_a = [a.inbox(Job, "/jobs", queue="workers") for _ in range(2)]
    on_b = b.inbox(Job, "/jobs", queue="workers")
    pa = a.publisher(Job, "/jobs")
    link.flush()
    for v in range(30):
        pa.publish(Job("/jobs", v=v))
    link.flush()
    assert len(values(on_b)) == 10
    for m in on_a:
        m.drain()
    link.close("cable cut")
    for v in range(30, 330):
        pa.publish(Job("/jobs", v=v))
    rest = [values(m) for m in on_a]
    assert [len(part) for part in rest] == [150, 150]
    assert sorted(v for part in rest for v in part) == list(range(30, 330))
    assert values(on_b) == []


def test_remote_members_bring_a_publisher_up_and_leaving_takes_it_down(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    log = EventLog()
    pb = b.publisher(Job, "/jobs", on_status=status_log(log))
    m1 = a.inbox(Job, "/jobs", queue="workers")
    m2 = a.inbox(Job, "/jobs", queue="workers")
    log.wait_for(lambda ev: states(log) == [UP])
    assert m1.wait_up(5) and m2.wait_up(5)
    m1.close()
    link.flush()
    assert states(log) == [UP]
    m2.close()
    log.wait_for(lambda ev: states(log) == [UP, DOWN])
    # a local-only member on A is not seen from B
    a.inbox(Job, "/jobs", queue="workers", scope=Scope.LOCAL_ONLY)
    link.flush()
    assert pb.feed_state is DOWN


def test_remote_group_count_follows_members_and_local_only_ones_are_not_told(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    a.inbox(Job, "/jobs", queue="workers", scope=Scope.LOCAL_ONLY)
    m = a.inbox(Job, "/jobs", queue="workers")
    pb = b.publisher(Job, "/jobs")
    link.flush()
    assert pb.feed_state is UP
    for v in range(10):
        pb.publish(Job("/jobs", v=v))
    link.flush()
    # the remote-origin messages reach only A's members that match a remote publisher
    assert values(m) == list(range(10))


# ------------------------------------------------- found failing (not committed)


def test_empty_group_without_keep_counts_what_it_drops(bus: Bus) -> None:
    m = bus.inbox(Job, "/jobs", queue="workers")
    p = bus.publisher(Job, "/jobs")
    m.close()
    p.publish(Job("/jobs", v=1))
    assert group_of(bus, "/jobs", "workers").dropped == 1


def test_keys_stay_flat_when_keep_groups_come_and_go(bus: Bus) -> None:
    baseline = bus.router.key_count
    for i in range(1000):
        m = bus.inbox(Job, f"/k{i}", queue=QueueGroup("w", keep=2))
        m.close()
    assert bus.router.key_count == baseline


def test_least_loaded_slow_member_gets_fewer_than_each_other_member(bus: Bus) -> None:
    gate = threading.Event()
    slow = Member("slow", gate)
    fast = [Member("f1"), Member("f2")]
    started(bus, slow, dispatcher="slow")
    started(bus, *fast)
    group = QueueGroup("workers", balance="least_loaded")
    slow.join("/jobs", group)
    for m in fast:
        m.join("/jobs", group)
    p = bus.publisher(Job, "/jobs")
    try:
        p.publish(Job("/jobs", v=0))
        assert slow.entered.wait(5)
        for v in range(1, 300):
            p.publish(Job("/jobs", v=v))
            for m in fast:
                barrier(m)
        taken = 300 - sum(len(m.values()) for m in fast)
        assert all(taken < len(m.values()) for m in fast), [len(m.values()) for m in fast]
    finally:
        gate.set()


def test_reoffer_of_a_remote_origin_message_loses_nothing(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    gate = threading.Event()
    leaving, staying = Member("leaving", gate), Member("staying")
    started(a, leaving, dispatcher="slow")
    started(a, staying)
    leaving.join("/jobs", "workers")
    staying.join("/jobs", "workers")
    link.flush()
    on_b = b.inbox(Job, "/jobs", queue="workers")
    pb = b.publisher(Job, "/jobs")
    link.flush()
    try:
        for v in range(30):
            pb.publish(Job("/jobs", v=v))
        assert leaving.entered.wait(5)
        link.flush()
        staying.got.wait_for(lambda ev: len(ev) == 10)
        assert leaving.feed is not None
        leaving.feed.unsubscribe()
    finally:
        gate.set()
    barrier(leaving)
    link.flush()
    barrier(staying)
    parts = [leaving.values(), staying.values(), values(on_b)]
    assert link.party_a_on_b.unexpected == 0
    assert_once_each(parts, 30)


def test_reoffer_of_a_local_only_message_does_not_cross_the_link(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    a, b, link = pair
    gate = threading.Event()
    leaving = Member("leaving", gate)
    started(a, leaving, dispatcher="slow")
    leaving.join("/jobs", "workers")
    on_b = b.inbox(Job, "/jobs", queue="workers")
    local = a.publisher(Job, "/jobs", scope=Scope.LOCAL_ONLY)
    a.publisher(Job, "/jobs")  # A also publishes the key to B
    link.flush()
    try:
        for v in range(5):
            local.publish(Job("/jobs", v=v))  # a local-only publisher: A's member only
        assert leaving.entered.wait(5)
        assert leaving.feed is not None
        leaving.feed.unsubscribe()
    finally:
        gate.set()
    barrier(leaving)
    link.flush()
    assert values(on_b) == []


def test_a_remote_member_leaving_with_queued_messages_counts_them_dropped(
    pair: tuple[Bus, Bus, InProcessLink],
) -> None:
    """A message that came from another node never crosses a link again: when
    the member it was handed to leaves and its node has no other member, it is
    dropped there and counted (docs/subjects.md), not lost silently."""
    a, b, link = pair
    on_a = [a.inbox(Job, "/jobs", queue="workers") for _ in range(2)]
    link.flush()
    gate = threading.Event()
    leaving = Member("leaving", gate)
    started(b, leaving, dispatcher="slow")
    leaving.join("/jobs", "workers")
    pa = a.publisher(Job, "/jobs")
    link.flush()
    try:
        for v in range(30):
            pa.publish(Job("/jobs", v=v))  # A's two, then B's one: B's gets 2, 5, 8, ...
        assert leaving.entered.wait(5)
        link.flush()
        assert leaving.feed is not None
        leaving.feed.unsubscribe()
    finally:
        gate.set()
    barrier(leaving)
    link.flush()
    assert link.party_b_on_a.unexpected == 0
    got = [values(m) for m in on_a] + [leaving.values()]
    dropped = b.router.queue_totals.dropped
    assert dropped == b.router.queue_totals.reoffered > 0
    flat = [v for part in got for v in part]
    assert len(flat) == len(set(flat)) == 30 - dropped
