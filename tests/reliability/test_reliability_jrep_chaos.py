"""Two nodes federated over J.REP through the chaos proxy.

Node A (the client bus, ``bus.connect_jrep``) dials node B's J.REP gateway
through a :class:`~actorbus.testing_chaos.ChaosProxy` that slices and delays
what crosses, resets the connection and (in the second test) blackholes it.
A publishes numbered notifications, a subscriber on B checks them.

J.REP has no receipts, so the accounting is the client bus's own
(docs/jrep.md, "Federation"): each notification the router handed the client
is ``written`` (on the session still up), ``possibly_lost`` (written on a
session that broke) or ``dropped`` (never written).  What is checked: no
duplicate, no reordering, every handed message accounted for once, the
missing ones between ``dropped`` (certainly lost) and ``dropped +
possibly_lost``, and the federation back after every fault.
"""

from __future__ import annotations

import time

import pytest
from reliability_support import SEED, CountingPublisher, Seq, SeqSubscriber, record, start_actors

from actorbus import Bus, FeedState
from actorbus.config import JrepClientSettings
from actorbus.net.jrep import GatewaySettings
from actorbus.testing import wait_until
from actorbus.testing_chaos import ChaosProxy, ChaosSchedule

HEARTBEAT = 0.2
TOKEN = b"chaos-token-0123456789ab"


@pytest.fixture
def seed() -> int:
    print(f"chaos seed: ACTORBUS_SEED={SEED}")
    return SEED


def _run(seed: int, *, total: int, rate: float, schedule: ChaosSchedule, name: str) -> None:
    a = Bus(node_id="A")
    b = Bus(node_id="B")
    proxy: ChaosProxy | None = None
    started = time.monotonic()
    try:
        # B gives up on a silent client after a few of its heartbeats
        settings = GatewaySettings(idle_timeout=HEARTBEAT * 4, heartbeat_delay=HEARTBEAT)
        gateway = b.serve_jrep(0, name="fed", token=TOKEN, settings=settings)
        subscriber = SeqSubscriber("/seq")
        start_actors(b, subscriber)
        proxy = ChaosProxy(("127.0.0.1", gateway.port), schedule, name="jrep").start()
        client = a.connect_jrep(
            f"ws://127.0.0.1:{proxy.port}/jrep",
            name="to-b",
            token=TOKEN,
            settings=JrepClientSettings(
                reconnect=True, reconnect_delay=0.05, connect_timeout=2.0, heartbeat=HEARTBEAT
            ),
        )
        with CountingPublisher(a, "/seq", total=total, rate=rate) as publisher:
            publisher.wait_up(10)
            publisher.start()
            publisher.wait_done(total / rate * 4 + 30)
            faults = proxy.counts
            proxy.calm()
            # the federation is back: a fence (n = 0) crosses; one written on a
            # connection the blackhole killed is lost, so fences go until one arrives
            assert client.wait_connected(10)
            feed = publisher.feed
            fences = 0
            deadline = time.monotonic() + 20
            while subscriber.stats.fences == 0:
                assert time.monotonic() < deadline, (subscriber.stats, client.counters)
                if feed.is_feed_up() and feed.publish(Seq("/seq", n=0)) == 1:
                    fences += 1
                wait_until(lambda: subscriber.stats.fences > 0, HEARTBEAT * 5)
        counters = client.counters
        stats = subscriber.stats
        routed = publisher.sent - publisher.unrouted + fences
        delivered = stats.delivered + stats.fences
        missing = routed - delivered
        states = subscriber.states()
        record(
            name,
            seed=seed,
            resets=faults.resets,
            blackholes=faults.blackholes,
            blackholed=faults.blackholed_connections,
            slices=faults.slices,
            delays=faults.delays,
            sessions=counters.sessions,
            published=publisher.sent,
            fences=f"{stats.fences}/{fences}",
            unrouted=publisher.unrouted,
            delivered=delivered,
            missing=missing,
            dropped=counters.dropped,
            possibly_lost=counters.possibly_lost,
            duplicates=stats.duplicates,
            reordered=stats.reordered,
            down_up=f"{states.count(FeedState.DOWN)}/{states.count(FeedState.UP)}",
            seconds=round(time.monotonic() - started, 1),
        )
        assert publisher.sent == total
        assert stats.duplicates == 0
        assert stats.reordered == 0
        # every message the router handed the client bus is accounted for once
        assert counters.handed == routed
        assert counters.handed == counters.written + counters.possibly_lost + counters.dropped
        # what is missing was dropped (certainly) or written on a broken session (maybe)
        assert counters.dropped <= missing <= counters.dropped + counters.possibly_lost
        assert stats.missing + (total - stats.last) + (fences - stats.fences) == missing
        # the faults happened and the federation came back after each
        assert faults.resets + faults.blackholed_connections >= 2
        assert counters.sessions > faults.resets + faults.blackholed_connections
        assert states.count(FeedState.DOWN) >= 1
    finally:
        if proxy is not None:
            proxy.stop()
        a.close()
        b.close()


def test_jrep_federation_through_resets_slicing_and_delays(seed: int) -> None:
    schedule = ChaosSchedule(
        seed=seed,
        reset_interval=0.6,
        slice_probability=0.3,
        max_pieces=8,
        delay_probability=0.05,
        max_delay=0.005,
    )
    _run(seed, total=6_000, rate=2_000, schedule=schedule, name="jrep_chaos")


def test_jrep_federation_through_blackholes(seed: int) -> None:
    schedule = ChaosSchedule(
        seed=seed,
        blackhole_interval=0.8,
        blackhole_duration=HEARTBEAT * 5,
        slice_probability=0.2,
    )
    _run(seed, total=8_000, rate=2_000, schedule=schedule, name="jrep_chaos_blackholes")
