"""Accounting stays true when a stranger takes over a node id.

With no secret of their own, a process that holds the nodes' secret (here:
the same user's) may log on as an existing node with a new run id; the victim
then takes it for a restart of that node and replaces the real node's link.
The real node dials again and takes its id back.  Through any number of such
kicks, the real node's ``lost`` counter must count exactly the messages it
wrote and the victim never read — counted at both ends: the real node's
``messages_out`` against the victim's ``messages_in``."""

from __future__ import annotations

from reliability_support import (
    CountingPublisher,
    RawPeer,
    SeqSubscriber,
    publish_fence,
    record,
    start_actors,
)

from actorbus import Bus
from actorbus.config import ConnectionSettings
from actorbus.net.protocol import LogoffReceived
from actorbus.testing import wait_until

KICKS = 6


def _wait(predicate: object, what: str, timeout: float = 10.0) -> None:
    assert callable(predicate)
    if not wait_until(predicate, timeout):
        raise AssertionError(f"timed out after {timeout} s waiting until {what}")


def test_lost_counts_only_what_was_lost_when_a_stranger_takes_over_the_node_id() -> None:
    victim = Bus(node_id="victim")
    real = Bus(node_id="real")
    try:
        subscriber = SeqSubscriber("/takeover")
        start_actors(victim, subscriber)
        service = victim.listen(0)
        link = real.connect(
            "127.0.0.1",
            service.port,
            settings=ConnectionSettings(reconnect=True, reconnect_delay=0.05),
        )
        link.wait_logged_on(10)
        # fast enough that each kick catches messages in flight (really lost)
        with CountingPublisher(real, "/takeover", total=10**9, rate=50_000) as publisher:
            publisher.wait_up(10)
            publisher.start()
            for kick in range(KICKS):
                logons = link.counters.logons
                _wait(lambda: subscriber.stats.delivered > (kick + 1) * 5_000, "messages flow")
                # the stranger: the real node's id, a new run id (a "restart")
                with RawPeer(("127.0.0.1", service.port), "real", run_id=f"s{kick}") as stranger:
                    assert stranger.logon() == "victim"
                    # the real node redials and takes its id back: the stranger is logged off
                    _wait(lambda: link.counters.logons > logons, "the real node is back")
                    stranger.expect((LogoffReceived,))
            publisher.stop()
            publish_fence(real, "/takeover")  # everything on the last connection arrived
            _wait(lambda: subscriber.stats.fences == 1, "the subscriber took everything")
        written = link.counters.messages_out
        read = service.counters.links.messages_in
        lost = link.counters.lost
        stats = subscriber.stats
        record(
            "takeover",
            sent=publisher.sent,
            delivered=stats.delivered,
            kicks=KICKS,
            written=written,
            read=read,
            lost=lost,
            dropped_reported=link.counters.dropped,
        )
        assert stats.duplicates == 0 and stats.reordered == 0
        # both ends agree: what the victim read is what its subscriber got
        assert read == stats.delivered + stats.fences
        # lost is exactly what was written and never read; before the fix it
        # counted everything written to the connections the stranger kicked
        assert lost == written - read, (lost, written, read)
        assert lost <= stats.missing
        # and every publish is accounted for: delivered, lost in flight, or
        # dropped before the socket (queued when a kicked connection ended)
        dropped = link.counters.dropped
        assert publisher.sent - publisher.unrouted == stats.delivered + lost + dropped
    finally:
        real.close()
        victim.close()
