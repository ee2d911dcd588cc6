"""Places where the runtime once lost, or failed to explain, something silently.

Each test states the behaviour docs/reliability.md asks for.  They were written
as pinned failures before the fixes (receipts and the sender's ``lost``
counter, input back-pressure, publish() counts, logging unexpected and unknown
input once, counting refused logons and data after a corrupt body) and now stay
as regression tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from reliability_support import (
    CountingPublisher,
    LogCapture,
    RawPeer,
    Seq,
    SeqSubscriber,
    start_actors,
)

from actorbus import Actor, Bus, FeedState, Scope
from actorbus.bus.router import Role
from actorbus.config import ConnectionSettings
from actorbus.net import Service
from actorbus.net.protocol import LogonRejected
from actorbus.testing import wait_until
from actorbus.testing_chaos import ChaosProxy


@pytest.fixture
def served() -> Iterator[tuple[Bus, Service, SeqSubscriber, LogCapture]]:
    with LogCapture() as logs, Bus(node_id="gap-n") as bus:
        service = bus.listen(0)
        subscriber = SeqSubscriber("/gap")
        start_actors(bus, subscriber)
        yield bus, service, subscriber, logs


def _advertised(peer: RawPeer, subscriber: SeqSubscriber) -> tuple[str, str]:
    key = (Seq.__type_name__, "/gap")
    peer.logon()
    peer.proto.advertise(key, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
    peer.flush()
    assert wait_until(lambda: subscriber.states() == [FeedState.UP], 10)
    return key


def test_messages_after_a_corrupt_body_in_the_same_read_are_counted(
    served: tuple[Bus, Service, SeqSubscriber, LogCapture],
) -> None:
    bus, service, subscriber, _ = served
    with RawPeer(("127.0.0.1", service.port), "gap-p") as peer:
        key = _advertised(peer, subscriber)
        peer.proto.notify(key, ("/gap", 1, 1, b""))
        peer.proto.notify(key, ("/gap", "not a timestamp"))
        for n in range(2, 12):
            peer.proto.notify(key, ("/gap", 1, n, b""))
        peer.flush()  # one write: one read at the node
        peer.read_raw_until_closed()
    assert wait_until(lambda: service.counters.open_links == 0, 10)
    counters = service.counters.links
    assert counters.messages_in == 12
    assert counters.corrupt_frames == 1
    # every message read is delivered, or counted as corrupt or dropped; the one
    # before the corrupt body was posted before the link closed, and its callback
    # runs on the subscriber's dispatcher, maybe after the close: waited for
    assert wait_until(
        lambda: (
            subscriber.stats.delivered + counters.corrupt_frames + counters.dropped
            == counters.messages_in
        ),
        10,
    ), (subscriber.stats.delivered, counters)


def test_unknown_types_are_logged_once_with_the_type_name(
    served: tuple[Bus, Service, SeqSubscriber, LogCapture],
) -> None:
    _, service, _, logs = served
    key = ("no.such.Type", "/x")
    with RawPeer(("127.0.0.1", service.port), "gap-u") as peer:
        peer.logon()
        peer.proto.advertise(key, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
        peer.proto.notify(key, ("/x", 1))
        peer.flush()
        assert wait_until(lambda: service.counters.links.unknown_types >= 2, 10)
        logs.wait_for("no.such.Type", "gap-u", timeout=2)


def test_unexpected_notifications_are_logged_once_with_the_key(
    served: tuple[Bus, Service, SeqSubscriber, LogCapture],
) -> None:
    _, service, _, logs = served
    key = (Seq.__type_name__, "/never-advertised")
    with RawPeer(("127.0.0.1", service.port), "gap-x") as peer:
        peer.logon()
        peer.proto.notify(key, ("/never-advertised", 1, 1, b""))
        peer.flush()
        assert wait_until(lambda: service.counters.links.unexpected >= 1, 10)
        logs.wait_for("/never-advertised", "gap-x", timeout=2)


def test_refused_logons_are_counted(served: tuple[Bus, Service, SeqSubscriber, LogCapture]) -> None:
    bus, service, _, _ = served
    with RawPeer(("127.0.0.1", service.port), "gap-n") as peer:  # this node's own id
        peer.proto.logon()
        peer.flush()
        assert isinstance(peer.expect((LogonRejected,)), LogonRejected)
    assert wait_until(lambda: service.counters.open_links == 0, 10)
    assert service.counters.links.refused_logons == 1


class _Stuck(Actor):
    """A subscriber that cannot keep up: it takes nothing until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__(name="stuck")
        self.gate = threading.Event()
        self.taken = 0

    def startup(self) -> None:
        self.subscribe(Seq, "/gap", on_message=self._take)

    def _take(self, message: Seq, feed: object) -> None:
        self.gate.wait(30)
        self.taken += 1


def test_a_flood_into_a_subscriber_that_cannot_keep_up_is_pushed_back() -> None:
    frames = 200_000
    with Bus(node_id="gap-slow") as bus:
        service = bus.listen(0)
        stuck = _Stuck()
        start_actors(bus, stuck)
        key = (Seq.__type_name__, "/gap")
        with RawPeer(("127.0.0.1", service.port), "gap-flood") as peer:
            peer.logon()
            peer.proto.advertise(key, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
            for n in range(1, frames + 1):
                peer.proto.notify(key, ("/gap", 1, n, b"x" * 200))
            flood = peer.proto.data_to_send()
            sender = threading.Thread(target=peer.send_raw, args=(flood,), daemon=True)
            sender.start()
            try:
                # the node may read ahead of its subscriber, but not without bound
                read_all = wait_until(
                    lambda: service.counters.links.messages_in >= frames, timeout=3
                )
                backlog = service.counters.links.messages_in - stuck.taken
                pauses = service.counters.links.input_pauses
            finally:
                stuck.gate.set()
                sender.join(30)
            # once the subscriber catches up the link reads again, to the end
            assert wait_until(lambda: stuck.taken >= frames, timeout=30), stuck.taken
        assert not read_all, f"read all {frames} with {backlog} waiting for a stuck subscriber"
        assert backlog <= 20_000
        assert pauses >= 1


def test_publish_says_how_many_subscribers_took_the_message() -> None:
    with Bus(node_id="gap-pub") as bus:
        feed = bus.publisher(Seq, "/nobody")
        assert feed.publish(Seq("/nobody", n=1)) == 0
        inbox = bus.inbox(Seq, "/nobody")
        try:
            assert feed.publish(Seq("/nobody", n=2)) == 1
        finally:
            inbox.close()


def test_the_sender_learns_how_many_messages_a_broken_connection_lost() -> None:
    with Bus(node_id="gap-b") as b, Bus(node_id="gap-a") as a:
        subscriber = SeqSubscriber("/lost")
        start_actors(b, subscriber)
        service = b.listen(0)
        with ChaosProxy(("127.0.0.1", service.port)) as proxy:
            link = a.connect(
                *proxy.address, settings=ConnectionSettings(reconnect=True, reconnect_delay=0.05)
            )
            with CountingPublisher(a, "/lost", total=20_000, rate=20_000) as publisher:
                publisher.wait_up(10)
                publisher.start()
                proxy.log.wait_for(lambda ev: publisher.sent > 5_000, 10)
                proxy.reset()
                publisher.wait_done(30)
                link.wait_logons(2, 10)
    # both nodes closed: the last connection was logged off in order, nothing in flight
    received = service.counters.links.messages_in
    stats = subscriber.stats
    counters = link.counters
    lost = counters.lost
    assert stats.delivered + counters.dropped + lost == publisher.sent
    # the sender's own count agrees with the pair of nodes' counters
    assert lost == counters.messages_out - received
