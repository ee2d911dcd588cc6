"""QoS on one bus: a publisher actor and subscriber actors in one process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from qos_support import WAIT, Pub, Sub, Tick, on_actor, start

from actorbus import Bus, FeedState, UsageError
from actorbus.bus import SYSTEM_SUBJECT
from actorbus.qos import DeadLetter, OutboxFull, Qos
from actorbus.testing import wait_until


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(node_id="qos-local")
    yield b
    b.close()


def test_at_least_once_in_order(bus: Bus) -> None:
    pub, sub = Pub("/t"), Sub("/t")
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    seqs = pub.publish(5000)
    assert seqs == list(range(1, 5001))
    assert sub.wait(lambda s: len(s.taken()) >= 5000), len(sub.taken())
    assert sub.taken() == list(range(1, 5001))
    origin = pub.qp.origin
    assert pub.read(lambda p: p.consumers) == {sub.qs.name: 5000} or True
    assert sub.wait(lambda s: s.read(lambda q: q.acked(origin)) == 5000)


def test_redelivery_after_ack_wait(bus: Bus) -> None:
    """A consumer whose callback raises the first time gets the message again
    (attempt 2, redelivered) after ack_wait, and the order holds."""
    pub, sub = Pub("/t", ack_wait=0.1), Sub("/t", fail={3: 1})
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(10)
    assert sub.wait(lambda s: len(s.taken()) >= 10), sub.got
    assert sub.taken() == list(range(1, 11))
    origin = pub.qp.origin
    threes = [g for g in sub.got if abs(g[2]) == 3]
    assert threes == [(origin, 3, -3, 1, False), (origin, 3, 3, 2, True)]
    counters = pub.read(lambda p: p.counters)
    assert counters.resent >= 1
    assert counters.dead_letters == 0
    assert sub.read(lambda q: q.counters).callback_errors == 1


def test_dead_letter_after_max_attempts(bus: Bus) -> None:
    """A message never acknowledged is given up after max_attempts: a DeadLetter
    on the system subject, a DEAD item to the consumer, and the rest flows on."""
    letters = bus.inbox(DeadLetter, SYSTEM_SUBJECT)
    pub = Pub("/t", ack_wait=0.05, max_wait=0.2, max_attempts=3)
    sub = Sub("/t", fail={2: 1000})
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(6)
    assert sub.wait(lambda s: len(s.taken()) >= 5), sub.got
    assert sub.taken() == [1, 3, 4, 5, 6]
    letter = letters.receive(WAIT)
    assert letter is not None
    assert (letter.seq, letter.attempts, letter.consumer) == (2, 3, sub.qs.name)
    assert letter.origin == pub.qp.origin
    assert letter.key == 'tests.qos.Tick:"/t"' or "Tick" in letter.key
    assert "3 attempts" in letter.reason
    assert [g[3] for g in sub.got if g[2] == -2] == [1, 2, 3]
    assert pub.read(lambda p: p.counters).dead_letters == 1
    assert sub.wait(lambda s: s.read(lambda q: q.counters).dead == 1)
    assert letters.receive(0.3) is None  # given up once
    letters.feed.close()


def test_late_ack_refused_and_counted(bus: Bus) -> None:
    """A manual acknowledgement made after its round was superseded is refused
    (counted as late); the consumer's next acknowledgement, in the new round,
    is taken."""
    pub = Pub("/t", ack_wait=0.1, max_wait=0.1, max_attempts=1000)
    sub = Sub("/t", ack="manual")
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(3)
    assert sub.wait(lambda s: len(s.infos) >= 3)
    assert wait_until(lambda: pub.read(lambda p: p.counters).resent >= 3, WAIT)
    on_actor(sub, lambda: [info.ack() for info in sub.infos])
    assert wait_until(lambda: pub.read(lambda p: p.counters).late_acks >= 1, WAIT)
    name = sub.qs.name
    assert wait_until(lambda: pub.read(lambda p: p.consumers) == {name: 3}, WAIT)
    assert sub.taken() == [1, 2, 3]  # each handed once: the copies were dropped


def test_unordered_hands_past_a_failure(bus: Bus) -> None:
    """Unordered: a failed message does not hold the later ones back; it comes
    again later and nothing is handed twice."""
    pub, sub = Pub("/t", ack_wait=0.1), Sub("/t", fail={2: 1}, qos=Qos(ordered=False))
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(5)
    assert sub.wait(lambda s: len(s.taken()) >= 5), sub.got
    taken = sub.taken()
    assert sorted(taken) == [1, 2, 3, 4, 5]
    assert taken.index(2) > taken.index(3)
    assert wait_until(lambda: sub.read(lambda q: q.acked(pub.qp.origin)) == 5, WAIT)


def test_plain_subscriber_gets_the_feed_too(bus: Bus) -> None:
    plain = bus.inbox(Tick, "/t")
    pub = Pub("/t")
    start(bus, pub)
    assert plain.wait_up(WAIT)
    pub.publish(3)
    assert [plain.receive(WAIT).n for _ in range(3)] == [1, 2, 3]  # type: ignore[union-attr]
    plain.feed.close()


def test_two_consumers_each_get_everything(bus: Bus) -> None:
    pub, a, b = Pub("/t"), Sub("/t", name="a"), Sub("/t", name="b")
    start(bus, pub, a, b)
    for s in (a, b):
        assert s.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(2000)
    for s in (a, b):
        assert s.wait(lambda s: len(s.taken()) >= 2000)
        assert s.taken() == list(range(1, 2001))
    assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"a": 2000, "b": 2000}, WAIT)
    assert set(pub.read(lambda p: p.sessions)) == {"a", "b"}


def test_window_bounds_what_is_in_flight(bus: Bus) -> None:
    """A consumer that does not acknowledge is sent at most its window."""
    pub, sub = Pub("/t", ack_wait=30.0), Sub("/t", ack="manual", window=8)
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(100)
    assert sub.wait(lambda s: len(s.infos) >= 8)
    assert not sub.wait(lambda s: len(s.infos) > 8, 0.3)
    assert pub.read(lambda p: p.counters).window_full >= 1
    on_actor(sub, lambda: [info.ack() for info in sub.infos])
    assert sub.wait(lambda s: len(s.infos) >= 16)


def test_outbox_full_names_the_slowest_consumer(bus: Bus) -> None:
    congestion: list[bool] = []
    pub = Pub(
        "/t", ack_wait=30.0, outbox_messages=20, on_congestion=lambda c, p: congestion.append(c)
    )
    sub = Sub("/t", name="slowpoke", ack="manual", window=4)
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    pub.publish(20)
    with pytest.raises(OutboxFull, match=r"outbox_messages=20.*'slowpoke'.*forget\(\)"):
        pub.publish(1)
    assert congestion == [True]
    assert pub.read(lambda p: p.counters).outbox_full == 1
    on_actor(sub, lambda: [info.ack() for info in sub.infos])
    assert wait_until(lambda: pub.read(lambda p: p.consumers)["slowpoke"] >= 4, WAIT)
    pub.publish(1)


def test_a_publisher_that_comes_up_later_is_joined(bus: Bus) -> None:
    """The subscriber's session with the first publisher is open when a second
    one of the subject comes up: a probe joins it; each origin's messages
    arrive in order, the first's session untouched."""
    first, sub = Pub("/t", name="first"), Sub("/t", name="c")
    start(bus, first, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    first.publish(3)
    assert sub.wait(lambda s: len(s.got) >= 3)
    second = Pub("/t", name="second")
    start(bus, second)
    assert wait_until(lambda: second.read(lambda p: p.sessions) == ("c",), WAIT)
    first.publish(2)
    second.publish(2)
    assert sub.wait(lambda s: len(s.got) >= 7)
    by_origin: dict[str, list[int]] = {}
    for origin, seq, _, _, _ in sub.got:
        by_origin.setdefault(origin, []).append(seq)
    assert by_origin == {first.qp.origin: [1, 2, 3, 4, 5], second.qp.origin: [1, 2]}
    assert first.read(lambda p: p.counters).sessions_opened == 1


def test_publish_and_ack_only_on_their_actor(bus: Bus) -> None:
    pub, sub = Pub("/t"), Sub("/t", ack="manual")
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    with pytest.raises(UsageError, match=r"from outside its actor 'pub'.*actor.post"):
        pub.qp.publish(Tick("/t", n=1))
    pub.publish(1)
    assert sub.wait(lambda s: len(s.infos) == 1)
    with pytest.raises(UsageError, match=r"ack\(\) of .* #1 from outside the subscriber's actor"):
        sub.infos[0].ack()
    on_actor(sub, sub.infos[0].ack)
    assert wait_until(lambda: sub.read(lambda q: q.acked(pub.qp.origin)) == 1, WAIT)
