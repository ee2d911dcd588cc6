"""Links that drop and come back: a service node restarted in process, and a
subprocess node killed with SIGKILL mid-stream and started again."""

from __future__ import annotations

from pathlib import Path

from nodes.messages import Answer, Ask, Counter
from nodes.support import NodeProcess, SystemLog, buses, client_props, started, wait_for

from actorbus import Bus, FeedState, ReplyStatus
from actorbus.config import ConnectionSettings
from actorbus.net import LinkStatus
from actorbus.testing import Recorder

UP, DOWN = FeedState.UP, FeedState.DOWN


def serve(bus: Bus, port: int) -> tuple[Recorder, int]:
    """Listen on ``port`` with a Counter publisher (UP) and an Ask replier."""
    node = Recorder("server")
    started(bus, node)
    node.auto_reply = lambda inc: Answer("/q", value=inc.request.q * 2)
    node.publisher(Counter, "/c", up=True)
    node.replier(Ask, "/q")
    return node, bus.listen(port).port


def test_reconnect_restores_feeds_after_the_service_node_restarts() -> None:
    with buses("B") as (b,):
        log_b = SystemLog(b)
        sub, req = Recorder("sub"), Recorder("req")
        started(b, sub, req)
        s = sub.subscribe(Counter, "/c")
        f = req.requestor(Ask, "/q")
        a = Bus(node_id="A")
        try:
            _, port = serve(a, 0)
            link = b.connect(
                "127.0.0.1", port, settings=ConnectionSettings(reconnect=True, reconnect_delay=0.02)
            )
            link.wait_logged_on(5)
            sub.log.wait_for(lambda ev: sub.states() == [UP])
            req.log.wait_for(lambda ev: req.states() == [UP])
        finally:
            a.close()
        assert SystemLog.next(log_b.logged_off).reason == "logged off by the peer: node closing"
        sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
        req.log.wait_for(lambda ev: req.states() == [UP, DOWN])
        assert link.status in (LinkStatus.RECONNECT_WAIT, LinkStatus.CONNECTING)
        # The service node comes back on the same port: nothing to do on B.
        a2 = Bus(node_id="A")
        try:
            server, _ = serve(a2, port)
            link.wait_logons(2, 5)
            sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN, UP])
            req.log.wait_for(lambda ev: req.states() == [UP, DOWN, UP])
            server.log.wait_for(lambda ev: server.states("publish_status") == [UP])
            assert a2.router.feeds(s.key)["subscribers"] == 1  # B's subscription, restored
            assert f.feed_state is UP
            f.request(Ask("/q", q=21))
            req.log.wait_count("reply", 1)
            assert [(e[1], e[2].value) for e in req.log.of("reply")] == [(0, 42)]
            counters = link.counters
            assert counters.logons == 2 and counters.reconnects >= 1
            assert counters.connections == 2
        finally:
            a2.close()


def test_subprocess_node_killed_mid_stream_then_restarted(tmp_path: Path) -> None:
    with buses("T") as (t,):
        log_t = SystemLog(t)
        service = t.listen(0)
        sub, req = Recorder("sub"), Recorder("req")
        started(t, sub, req)
        s = sub.subscribe(Counter, "/n")
        f = req.requestor(Ask, "/n")
        props = client_props(service.port)
        with NodeProcess(tmp_path, "N1", "counter,replier", "/n", props) as node:
            node.start()
            sub.log.wait_for(lambda ev: sub.states() == [UP])
            req.log.wait_for(lambda ev: req.states() == [UP])
            sub.log.wait_count("message", 20)
            counts = [e[1].n for e in sub.log.of("message")]
            assert counts == sorted(counts) and len(set(counts)) == len(counts)
            assert t.request_all(Ask("/n", q=4), timeout=5)[0].value == 8
            in_flight = f.request(Ask("/n", q=1, hold=True))
            wait_for(lambda: in_flight.remaining == 1, "N1 acknowledged the request")
            assert SystemLog.next(log_t.logged_on).peer_node == "N1"
            node.kill()  # SIGKILL: no logoff, the kernel closes the socket
            off = SystemLog.next(log_t.logged_off)
            assert off.peer_node == "N1"
            assert off.reason in (
                "the peer closed the connection without logging off",
                "connection lost: [Errno 104] Connection reset by peer",
            )
            sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])
            req.log.wait_for(lambda ev: req.states() == [UP, DOWN])
            req.log.wait_count("reply", 1)
            ((_, remaining, error),) = req.log.of("reply")
            assert remaining == 0 and error.status is ReplyStatus.ERROR
            assert error.reason.startswith("link to remote node N1 lost: ")
            assert in_flight.is_done
            before = len(sub.log.of("message"))
            # the restarted process dials again; T does nothing
            node.start()
            sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN, UP])
            sub.log.wait_count("message", before + 10)
            assert sub.log.of("message")[before][1].n == 1  # a new process counts from 1
            assert s.feed_state is UP and f.feed_state is UP
            assert node.stop() == 0
            off = SystemLog.next(log_t.logged_off)
            assert off.reason == "logged off by the peer: node closing"
            sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN, UP, DOWN])
        wait_for(lambda: service.counters.open_links == 0, "both accepted links are gone")
        counters = service.counters
        assert counters.accepted == 2
        assert counters.links.corrupt_frames == 0 and counters.links.messages_in >= 30
