"""publish_with_notification: every consumer attached at publish time, one
whose actor closes mid-flight (the future names it), none attached."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from qos_support import WAIT, Pub, Sub, start

from actorbus import Bus, FeedState
from actorbus.qos import DeliveryFailed, DeliveryReport
from actorbus.testing import wait_until


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(node_id="qos-notify")
    yield b
    b.close()


def test_resolves_when_every_consumer_acknowledged(bus: Bus) -> None:
    pub, a, b = Pub("/n"), Sub("/n", name="a"), Sub("/n", name="b")
    start(bus, pub, a, b)
    for s in (a, b):
        assert s.wait(lambda s: s.qs.status.state is FeedState.UP)
    future = pub.notify()
    report = future.result(WAIT)
    assert isinstance(report, DeliveryReport)
    assert report.seq == 1
    assert sorted(report.consumers) == ["a", "b"]
    assert a.taken() == [1] and b.taken() == [1]


def test_resolves_at_once_when_none_is_attached(bus: Bus) -> None:
    pub = Pub("/n")
    start(bus, pub)
    future = pub.notify()
    assert future.done()
    assert future.result(0) == DeliveryReport(1, ())


def test_fails_naming_the_consumer_whose_actor_closed(bus: Bus) -> None:
    """b never acknowledges (manual mode); its actor stops (closing its
    subscriber) while the message is in flight: the future fails naming b,
    with a delivered."""
    pub = Pub("/n", ack_wait=30.0)
    a, b = Sub("/n", name="a"), Sub("/n", name="b", ack="manual")
    start(bus, pub, a, b)
    for s in (a, b):
        assert s.wait(lambda s: s.qs.status.state is FeedState.UP)
    future = pub.notify()
    assert b.wait(lambda s: len(s.infos) == 1)
    assert wait_until(lambda: pub.read(lambda p: p.consumers)["a"] == 1, WAIT)
    assert not future.done()
    done: list[object] = []
    future.add_done_callback(done.append)
    bus.shutdown([b]).wait(WAIT)
    with pytest.raises(DeliveryFailed) as caught:
        future.result(WAIT)
    failed = caught.value
    assert failed.seq == 1
    assert failed.delivered == ("a",)
    assert failed.missing == (("b", "consumer closed"),)
    assert "b: consumer closed" in str(failed)
    assert done == [future]
    assert pub.read(lambda p: p.sessions) == ("a",)
    assert pub.read(lambda p: p.counters).sessions_ended == 1
