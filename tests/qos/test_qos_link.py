"""QoS across a real loopback link (two buses in one process), and through a
ChaosProxy that resets the link every few hundred ms: every message is
acknowledged by the application, none lost, none reordered, none handed twice."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from qos_support import WAIT, Pub, Sub, start

from actorbus import Bus, FeedState
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.qos import DeliveryFailed
from actorbus.testing import wait_until
from actorbus.testing_chaos import ChaosProxy, ChaosSchedule

HEARTBEAT = 0.2
HEARTBEAT_REPLY = 0.3
RECONNECT = 0.1


@pytest.fixture
def buses() -> Iterator[tuple[Bus, Bus]]:
    """(publisher's bus, subscriber's bus), not yet linked."""
    with Bus(node_id="qos-sub") as b, Bus(node_id="qos-pub") as a:
        yield a, b


def _link(a: Bus, b: Bus, schedule: ChaosSchedule | None = None) -> ChaosProxy | None:
    service = b.listen(
        0,
        settings=ServiceSettings(heartbeat_delay=HEARTBEAT, heartbeat_reply_delay=HEARTBEAT_REPLY),
    )
    settings = ConnectionSettings(
        reconnect=True,
        reconnect_delay=RECONNECT,
        heartbeat_delay=HEARTBEAT,
        heartbeat_reply_delay=HEARTBEAT_REPLY,
    )
    if schedule is None:
        a.connect("127.0.0.1", service.port, settings=settings)
        return None
    proxy = ChaosProxy(("127.0.0.1", service.port), schedule).start()
    a.connect(*proxy.address, settings=settings)
    return proxy


def _up(sub: Sub) -> None:
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP), sub.statuses


def test_at_least_once_over_a_link(buses: tuple[Bus, Bus]) -> None:
    a, b = buses
    pub, sub = Pub("/l"), Sub("/l", name="c")
    start(a, pub)
    start(b, sub)
    _link(a, b)
    _up(sub)
    for _ in range(10):
        pub.publish(2000)
    assert sub.wait(lambda s: len(s.taken()) >= 20_000, 60), len(sub.taken())
    assert sub.taken() == list(range(1, 20_001))
    assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"c": 20_000}, WAIT)
    counters = pub.read(lambda p: p.counters)
    assert counters.sent == 20_000 and counters.resent == 0 and counters.late_acks == 0


def test_every_message_through_a_resetting_link(buses: tuple[Bus, Bus]) -> None:
    """20,000 messages while the proxy resets the link every ~300 ms: each is
    handed to the application once, in order, and acknowledged."""
    a, b = buses
    total = 20_000
    pub, sub = Pub("/l", ack_wait=0.5), Sub("/l", name="c")
    start(a, pub)
    start(b, sub)
    proxy = _link(
        a, b, ChaosSchedule(seed=38, reset_interval=0.3, delay_probability=0.3, max_delay=0.05)
    )
    assert proxy is not None
    try:
        _up(sub)
        # 50 every 10 ms: about 4 s of traffic, with messages in flight at each reset
        pub.stream(total, 50, 0.01)
        assert sub.wait(lambda s: len(s.taken()) >= total, 180), len(sub.taken())
        assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"c": total}, 60)
        resets = proxy.counts.resets
    finally:
        proxy.stop()
    taken = sub.taken()
    assert taken == list(range(1, total + 1))  # 0 lost, none twice, in order
    counters = pub.read(lambda p: p.counters)
    print(f"resets={resets} publisher={counters} subscriber={sub.read(lambda q: q.counters)}")
    assert resets >= 10
    assert counters.sessions_ended >= 1
    assert counters.dead_letters == 0 and counters.lost == 0
    assert counters.resent > 0  # the resets did cut messages in flight


def test_a_consumer_that_comes_back_is_resent_at_once(buses: tuple[Bus, Bus]) -> None:
    """ack_wait is 30 s; the link drops while a message is unacknowledged: it is
    sent again as soon as the consumer's new session arrives."""
    a, b = buses
    pub, sub = Pub("/l", ack_wait=30.0, max_wait=30.0), Sub("/l", name="c", fail={3: 1})
    start(a, pub)
    start(b, sub)
    proxy = _link(a, b, ChaosSchedule())
    assert proxy is not None
    try:
        _up(sub)
        pub.publish(5)
        assert sub.wait(lambda s: len(s.taken()) >= 2 and len(s.got) >= 3)
        assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"c": 2}, WAIT)
        began = time.monotonic()
        assert proxy.reset() >= 1
        assert sub.wait(lambda s: len(s.taken()) >= 5, 20)
        assert time.monotonic() - began < 20  # well before ack_wait * 2 would resend
        origin = pub.qp.origin
        assert (origin, 3, 3, 2, True) in sub.got
        assert sub.taken() == [1, 2, 3, 4, 5]
        assert pub.read(lambda p: p.counters).sessions_ended >= 1
    finally:
        proxy.stop()


def test_a_notified_publish_fails_for_a_consumer_across_a_lost_link(
    buses: tuple[Bus, Bus],
) -> None:
    a, b = buses
    pub, sub = Pub("/l", ack_wait=30.0), Sub("/l", name="c", ack="manual")
    start(a, pub)
    start(b, sub)
    proxy = _link(a, b, ChaosSchedule())
    assert proxy is not None
    try:
        _up(sub)
        future = pub.notify()
        assert sub.wait(lambda s: len(s.infos) == 1)
        proxy.reset()
        with pytest.raises(DeliveryFailed) as caught:
            future.result(WAIT)
        assert caught.value.delivered == ()
        assert caught.value.missing == (
            ("c", "session ended across the link (link lost or consumer closed)"),
        )
    finally:
        proxy.stop()
