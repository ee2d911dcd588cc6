"""The receipt accounts behind ``LinkStats.lost`` (net/_receipts.py), and the
counter over real links: a broken connection's loss is learnt at the next logon,
a restarted peer's unacknowledged messages are counted."""

from __future__ import annotations

from nodes.messages import Counter
from nodes.support import RawPeer, buses, wait_for

from actorbus import PublishFeed
from actorbus.bus.router import Role
from actorbus.net import Service
from actorbus.net._receipts import Receipts
from actorbus.net.protocol import NotificationReceived, ReceiptReceived


def test_a_receipt_counts_what_earlier_connections_lost_once() -> None:
    r = Receipts()
    assert r.logon("B", "b1") == (0, 0)  # first contact: nothing to acknowledge
    r.ended("B", "b1", written=100, received=7)
    assert r.logon("B", "b1") == (7, 0)  # our receipt: 7 read from b1 so far
    assert r.receipt("B", "b1", 90) == 10
    r.ended("B", "b1", written=50, received=3)
    assert r.logon("B", "b1") == (10, 0)
    assert r.receipt("B", "b1", 140) == 0  # the 10 are not counted twice
    r.ended("B", "b1", written=5, received=0)
    assert r.logon("B", "b1") == (10, 0)
    assert r.receipt("B", "b1", 142) == 3


def test_a_receipt_above_what_was_written_adds_nothing() -> None:
    r = Receipts()
    r.logon("B", "b1")
    r.ended("B", "b1", written=10, received=0)
    r.logon("B", "b1")
    assert r.receipt("B", "b1", 12) == 0
    assert r.receipt("B", "other", 0) == 0  # not the run of this account
    assert r.receipt("C", "c1", 0) == 0  # no account


def test_a_restarted_peer_loses_what_its_last_receipt_did_not_cover() -> None:
    r = Receipts()
    r.logon("B", "b1")
    r.ended("B", "b1", written=100, received=40)
    r.logon("B", "b1")
    assert r.receipt("B", "b1", 95) == 5
    r.ended("B", "b1", written=20, received=0)  # then B restarted as b2
    # 120 written, 95 acknowledged, 5 already lost: 20 can no longer be confirmed
    assert r.logon("B", "b2") == (0, 20)  # and our count of what b2 sent starts at 0
    r.ended("B", "b2", written=3, received=2)
    assert r.logon("B", "b2") == (2, 0)
    assert r.receipt("B", "b2", 3) == 0
    # a connection of the old run ending late changes nothing
    r.ended("B", "b1", written=1000, received=1000)
    assert r.logon("B", "b2") == (2, 0)


def test_a_run_that_takes_its_node_id_back_gets_a_true_receipt() -> None:
    # a stranger logs on as B with a run id of its own, twice; B (run b1) comes back
    r = Receipts()
    assert r.logon("B", "b1") == (0, 0)
    r.ended("B", "b1", written=10, received=3_645)  # replaced by the stranger's logon
    # a logon of another run cannot be told from a restart: 10 presumed lost here
    assert r.logon("B", "stranger") == (0, 10)
    r.ended("B", "stranger", written=0, received=0)
    # B is back: its receipt says all 3,645 it wrote were read (it was 0 before:
    # B counted every one of them lost)
    assert r.logon("B", "b1") == (3_645, 0)
    assert r.receipt("B", "b1", 10) == 0  # presumed lost already: not counted twice
    r.ended("B", "b1", written=5, received=100)
    assert r.logon("B", "stranger-2") == (0, 0)  # (the 10 presumed cover these 5)
    r.ended("B", "stranger-2", written=0, received=0)
    assert r.logon("B", "b1") == (3_745, 0)


def _serve_one(
    service: Service, feed: PublishFeed[Counter], run_id: str, receipt: int, n: int
) -> ReceiptReceived:
    """Peer "P" (run ``run_id``) logs on with ``receipt``, subscribes, reads
    ``n`` notifications and drops the connection without logging off."""
    key = (Counter.__type_name__, "/r")
    with RawPeer.connect(service.port, "P", run_id=run_id) as peer:
        peer.logon(receipt)
        peer.proto.subscribe(key, Role.SUBSCRIBER)
        peer.send()
        wait_for(feed.is_feed_up, "the publisher sees the peer's subscription")
        for i in range(n):
            feed.publish(Counter("/r", n=i))
        for _ in range(n):
            peer.expect(NotificationReceived)
        receipts = [e for e in peer.seen if isinstance(e, ReceiptReceived)]
    wait_for(lambda: service.counters.open_links == 0, "the node sees the connection end")
    assert len(receipts) == 1
    return receipts[0]


def test_the_node_counts_what_the_peer_did_not_read_and_what_a_restart_cannot_confirm() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        feed = a.publisher(Counter, "/r")
        try:
            assert _serve_one(service, feed, "p1", 0, 10) == ReceiptReceived(0)
            assert service.counters.links.lost == 0
            # P says it read 7 of the 10 (as if the connection broke after 7)
            assert _serve_one(service, feed, "p1", 7, 4) == ReceiptReceived(0)
            assert service.counters.links.lost == 3
            # P restarted (new run id): of the 14 written to p1, 7 were acknowledged
            # and 3 counted already; the 4 others can no longer be confirmed
            assert _serve_one(service, feed, "p2", 0, 0) == ReceiptReceived(0)
            assert service.counters.links.lost == 7
            assert service.counters.links.messages_out == 14
        finally:
            feed.close()
