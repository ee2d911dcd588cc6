"""The delivery guarantee through the chaos proxy for a wildcard subscriber and
for a queue group, as ``test_reliability_chaos.py`` checks it for an exact
subscriber.

Two buses on loopback, the publisher's link dialled through a
:class:`~actorbus.testing_chaos.ChaosProxy` that resets, blackholes, slices and
delays.  On the receiving bus either a wildcard subscriber whose pattern
matches the publisher's subject (the interest crosses as SUBSCRIBE_PATTERN), or
a queue group of two members (the publishing node has none: every message
crosses as GROUP_NOTIFY and one of the two takes it).  For each: 0 duplicates,
0 reordered, and every message published is delivered once or counted as
dropped — the same equation as the exact subscriber's, plus the queue groups'
``dropped`` (a notification that found its group with no member: the link had
just gone; ``bus.router.queue_totals``, groups gone included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from reliability_support import (
    SEED,
    CountingPublisher,
    SeqMember,
    SeqSubscriber,
    Tally,
    publish_fence,
    record,
    start_actors,
)
from test_reliability_chaos import HEARTBEAT_TIMEOUT, _linked_through

from actorbus import Bus, FeedState, Wildcard
from actorbus.testing import wait_until
from actorbus.testing_chaos import ChaosSchedule

TOTAL = 30_000
RATE = 5_000
GROUP = "workers"


@pytest.fixture
def seed() -> int:
    print(f"chaos seed: ACTORBUS_SEED={SEED}")
    return SEED


def _schedule(seed: int) -> ChaosSchedule:
    return ChaosSchedule(
        seed=seed,
        reset_interval=0.5,
        blackhole_interval=2.5,
        blackhole_duration=HEARTBEAT_TIMEOUT * 2,
        slice_probability=0.3,
        max_pieces=8,
        delay_probability=0.02,
        max_delay=0.01,
    )


class Receivers:
    """What the receiving bus runs: a wildcard subscriber or a queue group."""

    def __init__(self, kind: str, subject: str) -> None:
        self.kind = kind
        self.subject = subject
        self.tally = Tally()
        self.actors: list[Any] = []
        if kind == "wildcard":
            self.subscriber = SeqSubscriber(Wildcard.levels("/chaos/*"), name="wild-subscriber")
            self.actors = [self.subscriber]
        else:
            self.members = [
                SeqMember(subject, GROUP, self.tally, name=f"member-{i}") for i in (1, 2)
            ]
            self.actors = self.members

    def fence(self, bus: Bus) -> None:
        """Fence every receiver: each has taken in everything written before it."""
        if self.kind == "wildcard":
            publish_fence(bus, self.subject, timeout=30)
            self.subscriber.log.wait_for(lambda ev: any(e[0] == "fence" for e in ev), 30)
            return
        # a fence goes to one member: publish until each has had one
        for _ in range(10):
            fences = self.tally.fenced()
            publish_fence(bus, self.subject, timeout=30)
            self.tally.wait(lambda t: t.fenced() > fences, "a fence", 30)
            if all(self.tally.fenced(m.name) for m in self.members):
                return
        raise AssertionError(f"fences did not reach every member: {self.tally.fences}")

    def delivered(self, sent: int) -> tuple[int, int, int, int]:
        """(delivered, duplicates, reordered, numbers of 1..sent never received)."""
        if self.kind == "wildcard":
            stats = self.subscriber.stats
            unseen = stats.missing + (sent - stats.last)
            return stats.delivered, stats.duplicates, stats.reordered, unseen
        reordered = sum(m.reordered for m in self.members)
        unseen = len(set(range(1, sent + 1)) - self.tally.seen)
        return self.tally.total, self.tally.dupes, reordered, unseen


def _run(seed: int, kind: str, name: str, check: Callable[..., None]) -> None:
    subject = "/chaos/w" if kind == "wildcard" else "/chaos/q"
    started = time.monotonic()
    receivers = Receivers(kind, subject)
    with Bus(node_id="chaos-sub") as b, Bus(node_id="chaos-pub") as a:
        start_actors(b, *receivers.actors)
        proxy, (service, link) = _linked_through(_schedule(seed), a, b)
        try:
            with CountingPublisher(a, subject, total=TOTAL, rate=RATE) as publisher:
                publisher.wait_up(10)
                publisher.start()
                # Halfway, one blackhole by hand on a live connection (the
                # schedule's may all fall while the link is dialling again).
                if not wait_until(
                    lambda: publisher.sent >= TOTAL // 2 and link.is_logged_on, TOTAL / RATE * 4
                ):
                    raise AssertionError(f"halfway not reached: {publisher.sent} sent")
                proxy.blackhole(HEARTBEAT_TIMEOUT * 2)
                publisher.wait_done(TOTAL / RATE * 4 + 60)
            proxy.calm()
            receivers.fence(a)
            sender = link.counters
            receiver = service.counters.links
            faults = proxy.counts
            # every queue group's drops on either node (groups gone included)
            group_dropped = a.router.queue_totals.dropped + b.router.queue_totals.dropped
            fences = 1 if kind == "wildcard" else receivers.tally.fenced()
        finally:
            proxy.stop()
    sent = publisher.sent
    delivered, duplicates, reordered, unseen = receivers.delivered(sent)
    written = sender.messages_out - fences
    taken_in = receiver.messages_in - fences
    unrouted = publisher.unrouted
    dropped = (
        unrouted
        + sender.dropped
        + sender.lost
        + receiver.dropped
        + receiver.unexpected
        + receiver.unknown_types
        + group_dropped
    )
    pub_states = [s for _, s in publisher.states.snapshot()]
    record(
        name,
        seed=seed,
        faults=faults.faults,
        resets=faults.resets,
        blackholes=faults.blackholes,
        slices=faults.slices,
        delays=faults.delays,
        reconnects=sender.reconnects,
        sent=sent,
        delivered=delivered,
        dropped_reported=dropped,
        unrouted=unrouted,
        dropped_unwritten=sender.dropped,
        lost_in_flight=sender.lost,
        group_dropped=group_dropped,
        unexpected=receiver.unexpected,
        duplicates=duplicates,
        reordered=reordered,
        **({"by_member": receivers.tally.counts()} if kind == "queue" else {}),
        pub_down_up=f"{pub_states.count(FeedState.DOWN)}/{pub_states.count(FeedState.UP)}",
        seconds=round(time.monotonic() - started, 1),
    )
    assert sent == TOTAL
    assert duplicates == 0
    assert reordered == 0
    assert receiver.duplicates == receiver.gaps == 0
    assert receiver.corrupt_frames == 0
    # the sender's count agrees with the pair of nodes' counters
    assert sender.lost == written - taken_in >= 0
    # The equation: every message delivered once, or reported dropped.
    assert delivered + dropped == sent, (delivered, dropped, sender, receiver)
    # ...and the receivers' own view of the numbers agrees with the counters
    assert unseen == dropped
    assert faults.resets >= 3
    assert faults.blackholed_connections >= 1
    assert sender.reconnects >= faults.resets
    # the publisher went DOWN with each lost connection and came back
    assert pub_states.count(FeedState.DOWN) >= 2
    check(receivers)


@pytest.mark.slow
def test_wildcard_subscriber_through_resets_blackholes_and_slicing(seed: int) -> None:
    def check(receivers: Receivers) -> None:
        states = receivers.subscriber.states()
        assert states.count(FeedState.DOWN) >= 2
        # status callbacks fire on change only: UP, DOWN, UP, ... (the last DOWN
        # is the publishers closing at the end)
        assert states == [FeedState.UP, FeedState.DOWN] * (len(states) // 2)

    _run(seed, "wildcard", "chaos_wildcard_30k", check)


@pytest.mark.slow
def test_queue_group_through_resets_blackholes_and_slicing(seed: int) -> None:
    def check(receivers: Receivers) -> None:
        counts = receivers.tally.counts()
        assert set(counts) == {"member-1", "member-2"}
        assert all(counts.values()), counts  # both took a share
        assert receivers.tally.seen <= set(range(1, TOTAL + 1))

    _run(seed, "queue", "chaos_queue_30k", check)
