"""Link rules over real sockets: one link per pair of nodes, the address filter,
malformed input, the output queue limit, heartbeats.  Misbehaving peers are raw
sockets driven through the sans-IO protocol by hand."""

from __future__ import annotations

import socket
import struct
import threading

import msgpack
import pytest
from nodes.messages import Answer, Ask, Counter
from nodes.support import (
    RawPeer,
    SystemLog,
    accept_raw,
    buses,
    linked,
    raw_listener,
    started,
    wait_for,
)

from actorbus import Bus, FeedState, Scope
from actorbus.bus.router import Role
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.errors import LinkClosedError
from actorbus.net import LinkStatus
from actorbus.net.protocol import (
    Advertised,
    LogoffReceived,
    LogonAccepted,
    LogonRejected,
    ReplyReceived,
    Subscribed,
)
from actorbus.testing import Recorder

UP, DOWN = FeedState.UP, FeedState.DOWN
COUNTER = ("linktest.Counter", "/c")
ASK = ("linktest.Ask", "/q")


def still_serving(a: Bus, b: Bus, subject: str) -> None:
    """A fresh feed from ``a`` reaches ``b``: the node kept serving its good link."""
    inbox = b.inbox(Counter, subject)
    p = a.publisher(Counter, subject)
    assert inbox.wait_up(5)
    wait_for(lambda: p.feed_state is UP, "the publisher sees the remote subscriber")
    p.publish(Counter(subject, n=42))
    got = inbox.receive(5)
    assert got is not None and got.n == 42
    p.close()
    inbox.close()


# ------------------------------------------------------------------ one link rule


def test_second_link_is_rejected_whichever_side_dials() -> None:
    with buses("A", "B") as (a, b):
        log_a, log_b = SystemLog(a), SystemLog(b)
        service_a, first = linked(a, b)
        SystemLog.next(log_a.logged_on), SystemLog.next(log_b.logged_on)
        # B dials A again
        again = b.connect("127.0.0.1", service_a.port, name="again")
        with pytest.raises(LinkClosedError, match="only one link may exist between two nodes"):
            again.wait_logged_on(5)
        off_a = SystemLog.next(log_a.logged_off)
        assert off_a.peer_node == "B"
        assert off_a.reason.startswith("logon rejected here: node 'B' already has a link")
        # A dials B's service
        service_b = b.listen(0)
        back = a.connect("127.0.0.1", service_b.port, name="back")
        with pytest.raises(LinkClosedError, match="logon rejected by the peer: node 'A' already"):
            back.wait_logged_on(5)
        off_a2 = SystemLog.next(log_a.logged_off)
        assert off_a2.reason.startswith("logon rejected by the peer: node 'A' already has a link")
        assert first.is_logged_on and a.links[0].is_logged_on
        assert service_a.counters.links.refused_logons == 1
        assert service_b.counters.links.refused_logons == 1
        still_serving(a, b, "/still")


def test_a_restarted_node_with_its_id_replaces_the_link_to_its_previous_run() -> None:
    """A node whose id is fixed (``nodeId``) restarts while the peer still holds
    the link to its previous run (a dead end that has not noticed, as after a
    host crash without heartbeats): the new run's logon carries a new run id
    id, so it replaces the held link instead of being refused as a second one."""
    with buses("B") as (b,):
        log_b = SystemLog(b)
        service = b.listen(0)
        with RawPeer.connect(service.port, "A", run_id="run-1") as previous:
            assert previous.logon() == "B"
            assert SystemLog.next(log_b.logged_on).peer_node == "A"
            sub = Recorder("sub")
            started(b, sub)
            sub.subscribe(Counter, "/restart")
            with buses("A") as (a,):  # the new run, same id, a new run id
                link = a.connect("127.0.0.1", service.port)
                assert link.wait_logged_on(5) == "B"
                expected = "node 'A' restarted (new run id "
                assert previous.expect(LogoffReceived).reason.startswith(expected)
                off = SystemLog.next(log_b.logged_off)
                assert off.peer_node == "A" and expected in off.reason, off.reason
                assert SystemLog.next(log_b.logged_on).peer_node == "A"  # the new link
                assert b.net.link_to("A") is not None and b.net.link_to("A").is_logged_on
                assert service.counters.links.refused_logons == 0
                # feeds flow over the new link
                p = a.publisher(Counter, "/restart")
                wait_for(lambda: p.feed_state is UP, "B's subscriber reaches the new run")
                p.publish(Counter("/restart", n=7))
                sub.log.wait_for(lambda ev: [e[1].n for e in sub.log.of("message")] == [7])
                assert sub.states() == [UP]  # never DOWN across the replacement


def test_a_node_cannot_link_to_itself() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        link = a.connect("127.0.0.1", service.port)
        with pytest.raises(LinkClosedError, match="cannot link to itself"):
            link.wait_logged_on(5)


@pytest.mark.parametrize(("node_id", "kept"), [("A", "dialled"), ("Z", "accepted")])
def test_simultaneous_dial_keeps_the_link_dialled_by_the_smaller_id_client_side(
    node_id: str, kept: str
) -> None:
    """The node's dial is answered while the peer ("M") is logging on to the node
    over the other direction: the node decides when its dial is accepted."""
    with buses(node_id) as (node,), raw_listener() as listener:
        service = node.listen(0)
        inbound = RawPeer.connect(service.port, "M")
        with inbound:
            inbound.proto.logon()
            inbound.send()
            inbound.expect(LogonAccepted)  # accepted; its logon is not complete yet
            dialled = node.connect("127.0.0.1", listener.getsockname()[1])
            with accept_raw(listener, "M") as outbound:
                outbound.serve_logon()  # the node's dial is accepted: now it decides
                if kept == "dialled":
                    reason = inbound.expect(LogoffReceived).reason
                    assert dialled.wait_logged_on(5) == "M"
                else:
                    reason = outbound.expect(LogoffReceived).reason
                    with pytest.raises(LinkClosedError):
                        dialled.wait_logged_on(5)
                winner = min(node_id, "M")
                assert reason == (
                    f"nodes {node_id!r} and 'M' dialled each other; the link dialled by "
                    f"{winner!r} is kept"
                )


@pytest.mark.parametrize(("node_id", "kept"), [("A", "dialled"), ("Z", "accepted")])
def test_simultaneous_dial_keeps_the_link_dialled_by_the_smaller_id_server_side(
    node_id: str, kept: str
) -> None:
    """The peer ("M") logs on to the node while the node's own dial to it is
    accepted but not complete: the node decides when the peer's logon arrives."""
    with buses(node_id) as (node,), raw_listener() as listener:
        service = node.listen(0)
        dialled = node.connect("127.0.0.1", listener.getsockname()[1])
        with accept_raw(listener, "M") as outbound:
            outbound.serve_logon(complete=False)  # the dial is claimed, not logged on
            wait_for(lambda: node.net.link_to("M") is dialled, "the dial claims M")
            with RawPeer.connect(service.port, "M") as inbound:
                inbound.proto.logon()
                inbound.send()
                inbound.answer_challenge()  # the node decides once M proved its key
                winner = min(node_id, "M")
                expected = (
                    f"nodes {node_id!r} and 'M' dialled each other; the link dialled by "
                    f"{winner!r} is kept"
                )
                if kept == "dialled":
                    assert inbound.expect(LogonRejected).reason == expected
                    assert node.net.link_to("M") is dialled
                else:
                    assert outbound.expect(LogoffReceived).reason == expected
                    with pytest.raises(LinkClosedError):
                        dialled.wait_logged_on(5)
                    wait_for(lambda: node.net.link_to("M") is not dialled, "M re-claimed")


def test_two_buses_dialling_each_other_end_with_one_link() -> None:
    with buses("A", "B") as (a, b):
        service_a, service_b = a.listen(0), b.listen(0)
        ab = a.connect("127.0.0.1", service_b.port)
        ba = b.connect("127.0.0.1", service_a.port)
        wait_for(
            lambda: ab.status is LinkStatus.CLOSED or ba.status is LinkStatus.CLOSED,
            "one of the two dials is refused",
        )
        wait_for(lambda: len(a.links) == 1 and len(b.links) == 1, "one link on each node")
        (on_a,), (on_b,) = a.links, b.links
        wait_for(lambda: on_a.is_logged_on and on_b.is_logged_on, "the kept link is up")
        assert on_a.initiator != on_b.initiator  # the same connection, seen from both ends
        still_serving(a, b, "/one")


# ------------------------------------------------------------------ address filter


def test_address_filter_admits_listed_hosts_and_closes_others() -> None:
    with buses("A", "B", "C") as (a, b, c):
        service = a.listen(0, settings=ServiceSettings(address_filter=["127.0.0.2"]))
        good = b.connect(
            "127.0.0.1", service.port, settings=ConnectionSettings(bind_host="127.0.0.2")
        )
        assert good.wait_logged_on(5) == "A"
        bad = c.connect(
            "127.0.0.1", service.port, settings=ConnectionSettings(bind_host="127.0.0.1")
        )
        with pytest.raises(LinkClosedError):
            bad.wait_logged_on(5)
        counters = service.counters
        assert (counters.accepted, counters.refused, counters.open_links) == (1, 1, 1)
        assert bad.counters.logons == 0
        still_serving(a, b, "/filtered")


def test_address_filter_endpoint_entries_match_host_and_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with buses("A", "B", "C") as (a, b, c):
        service = a.listen(
            0, settings=ServiceSettings(address_filter=[f"127.0.0.1:{port}", "localhost:1"])
        )
        good = b.connect(
            "127.0.0.1",
            service.port,
            settings=ConnectionSettings(bind_host="127.0.0.1", bind_port=port),
        )
        assert good.wait_logged_on(5) == "A"
        bad = c.connect(
            "127.0.0.1", service.port, settings=ConnectionSettings(bind_host="127.0.0.1")
        )
        with pytest.raises(LinkClosedError):
            bad.wait_logged_on(5)
        assert service.counters.refused == 1


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("garbage", "what"),
    [
        (struct.pack(">I", 0xFFFF_FFF0), "oversized length prefix"),
        (
            struct.pack(">I", 5) + msgpack.packb((21, 1, 0, 0)),
            "frame before logon",
        ),
        (b"\x00\x00\x00\x03\xc1\xc1\xc1", "not msgpack"),
    ],
)
def test_malformed_input_closes_that_link_and_the_node_keeps_serving(
    garbage: bytes, what: str
) -> None:
    with buses("A", "B") as (a, b):
        service, _ = linked(a, b)
        with RawPeer.connect(service.port, "X") as raw:
            raw.send_raw(garbage)
            answer = raw.read_until_closed()  # the node says why (LOGON_REJECT), then closes
            assert b"protocol error" in answer, what
        wait_for(lambda: service.counters.open_links == 1, "the node closed the garbage connection")
        assert service.counters.links.corrupt_frames == 1
        still_serving(a, b, "/after-garbage")


def test_a_body_that_does_not_decode_closes_the_link() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        inbox = a.inbox(Counter, "/c")
        with RawPeer.connect(service.port, "X") as raw:
            raw.logon()
            raw.proto.advertise(COUNTER, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
            raw.send()
            raw.expect(Subscribed)  # the inbox on A subscribes
            assert inbox.wait_up(5)
            raw.proto.notify(COUNTER, ("/c", "not a timestamp", "not an int"))
            for n in range(5):  # read with the bad one, never delivered: dropped
                raw.proto.notify(COUNTER, ("/c", 1, n, b""))
            raw.send()
            assert raw.expect(LogoffReceived).reason == "a message body did not decode"
        wait_for(lambda: service.counters.open_links == 0, "the link is closed")
        counters = service.counters.links
        assert (counters.messages_in, counters.corrupt_frames, counters.dropped) == (6, 1, 5)
        wait_for(lambda: not inbox.is_up, "the feed went down with the link")
        assert inbox.receive_nowait() is None


def test_a_request_that_does_not_decode_on_a_known_key_closes_the_link() -> None:
    """Requests on a key seen before go straight from the parser to the router
    (the protocol's data sinks, with the key's cached decoder); one whose body
    does not decode is refused there and takes the event path, which closes
    the link exactly as for the first request on a key."""
    with buses("A") as (a,):
        service = a.listen(0)
        rep = Recorder("rep")
        started(a, rep)
        rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q * 2)
        rep.replier(Ask, "/q")
        with RawPeer.connect(service.port, "X") as raw:
            raw.logon()  # the replier's advertisement comes before LOGON_COMPLETE
            assert any(type(e) is Advertised and e.key == ASK for e in raw.seen)
            for q in (1, 2):  # the first resolves the key, the second takes the sink
                raw.proto.request(ASK, q, ("/q", 1, q, False))
                raw.send()
                reply = raw.expect(ReplyReceived)
                assert (reply.request_id, reply.body[-1]) == (q, q * 2)
            raw.proto.request(ASK, 3, ("/q", "not a timestamp", 3, False))
            raw.proto.request(ASK, 4, ("/q", 1, 4, False))  # read with it: dropped
            raw.send()
            assert raw.expect(LogoffReceived).reason == "a message body did not decode"
        wait_for(lambda: service.counters.open_links == 0, "the link is closed")
        counters = service.counters.links
        assert (counters.corrupt_frames, counters.dropped) == (1, 1)
        assert [e[1].request.q for e in rep.log.of("request")] == [1, 2]


def test_unknown_types_are_counted_and_ignored() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        with RawPeer.connect(service.port, "X") as raw:
            raw.logon()
            raw.proto.advertise(
                ("no.such.Type", "/x"), Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP
            )
            raw.proto.advertise(
                COUNTER, Role.REPLIER, Scope.REMOTE_ONLY, FeedState.UP
            )  # a notification type
            raw.send()
            (link,) = service.links
            wait_for(lambda: link.counters.unknown_types == 2, "two unknown advertisements")
            assert link.is_logged_on


# -------------------------------------------------------------- queue limit, heartbeat


def test_queue_limit_closes_a_link_whose_peer_stops_reading() -> None:
    limit = 200
    with buses("A", "B") as (a, b):
        log_a = SystemLog(a)
        service = a.listen(
            0, settings=ServiceSettings(message_queue_size=limit, output_buffer_size=8192)
        )
        _, good = linked(a, b)  # another link on the same node keeps working
        stop = threading.Event()
        with RawPeer.connect(service.port, "X", rcvbuf=4096) as raw:
            raw.logon()
            raw.proto.subscribe(COUNTER, Role.SUBSCRIBER)
            raw.send()
            p = a.publisher(Counter, "/c")
            wait_for(lambda: p.feed_state is UP, "X subscribed")
            payload = b"x" * 1000
            n = 0
            while not stop.is_set() and n < 200_000:
                p.publish(Counter("/c", n=n, payload=payload))
                n += 1
                if n % 100 == 0 and not any(x.peer_node == "X" for x in service.links):
                    stop.set()
            off = SystemLog.next(log_a.logged_off)
        assert off.peer_node == "X"
        assert off.reason.startswith("output queue limit: ")
        assert f"message_queue_size={limit}" in off.reason
        counters = service.counters.links
        assert counters.dropped > limit
        assert counters.messages_out + counters.dropped <= n
        assert good.is_logged_on
        still_serving(a, b, "/after-limit")


def test_queue_limit_close_reconnects_a_client_link() -> None:
    with buses("B") as (b,), raw_listener() as listener:
        log_b = SystemLog(b)
        link = b.connect(
            "127.0.0.1",
            listener.getsockname()[1],
            settings=ConnectionSettings(
                message_queue_size=50, output_buffer_size=4096, reconnect=True, reconnect_delay=0.01
            ),
        )
        with accept_raw(listener, "S", rcvbuf=4096) as raw:
            raw.serve_logon()
            raw.proto.subscribe(COUNTER, Role.SUBSCRIBER)
            raw.send()
            link.wait_logged_on(5)
            p = b.publisher(Counter, "/c")
            wait_for(lambda: p.feed_state is UP, "S subscribed")
            n = 0
            while link.counters.logons == 1 and link.status is LinkStatus.LOGGED_ON and n < 200_000:
                p.publish(Counter("/c", n=n, payload=b"y" * 1000))
                n += 1
            off = SystemLog.next(log_b.logged_off)
            assert off.reason.startswith("output queue limit")
        with accept_raw(listener, "S") as again:
            again.serve_logon()
            link.wait_logons(2, 5)
        assert link.counters.reconnects >= 1 and link.counters.dropped > 50


def test_heartbeat_timeout_closes_a_link_whose_peer_stops_answering() -> None:
    with buses("A") as (a,):
        log_a = SystemLog(a)
        service = a.listen(
            0, settings=ServiceSettings(heartbeat_delay=0.05, heartbeat_reply_delay=0.1)
        )
        with RawPeer.connect(service.port, "X") as raw:
            raw.logon()  # ... and then it never reads or writes again
            off = SystemLog.next(log_a.logged_off)
            assert off.peer_node == "X"
            assert off.reason.startswith("heartbeat timeout: nothing received for")
            assert b"heartbeat timeout" in raw.read_until_closed()
        counters = service.counters.links
        assert counters.heartbeats_out == 1 and counters.logons == 1


def test_heartbeats_keep_an_idle_link_up() -> None:
    with buses("A", "B") as (a, b):
        sub = Recorder("sub")
        started(b, sub)
        service, link = linked(
            a, b, settings=ConnectionSettings(heartbeat_delay=0.02, heartbeat_reply_delay=0.2)
        )
        (accepted,) = service.links
        wait_for(lambda: accepted.counters.heartbeats_in >= 5, "five heartbeats from B answered")
        assert link.is_logged_on and link.counters.heartbeats_out >= 5
