"""The delivery guarantee under injected faults, through the chaos proxy.

Two buses on loopback, the publisher's link dialled through a
:class:`~actorbus.testing_chaos.ChaosProxy` that slices writes, delays them,
resets connections and blackholes them longer than the heartbeat timeout.
What is checked is the guarantee of docs/reliability.md: each message the
publisher published is delivered exactly once and in order, or it is counted
as dropped — by the publishing link (``dropped``: never written; ``lost``:
written to a connection that broke, learnt from the receiver's RECEIPT at the
next logon), which must agree with the pair of link counters (``messages_out``
at the sender minus ``messages_in`` at the receiver).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from reliability_support import (
    SEED,
    CountingPublisher,
    SeqSubscriber,
    publish_fence,
    record,
    start_actors,
)

from actorbus import Bus, FeedState, UsageError
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.net import Link, Service
from actorbus.testing_chaos import ChaosProxy, ChaosSchedule

HEARTBEAT = 0.2
HEARTBEAT_REPLY = 0.3
#: Silence after which a side gives up: a heartbeat is sent after HEARTBEAT of
#: silence and must be answered within HEARTBEAT_REPLY.
HEARTBEAT_TIMEOUT = HEARTBEAT + HEARTBEAT_REPLY
RECONNECT = 0.1


@pytest.fixture
def seed() -> int:
    print(f"chaos seed: ACTORBUS_SEED={SEED}")
    return SEED


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A TCP server that echoes each connection until EOF (one thread per connection)."""
    listener = socket.create_server(("127.0.0.1", 0))
    threads: list[threading.Thread] = []
    conns: list[socket.socket] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        # (the proxy may reset its side, and teardown shuts the socket down,
        # between any two calls: either ends the echo)
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            t = threading.Thread(target=serve, args=(conn,), daemon=True)
            t.start()
            threads.append(t)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        stop.set()
        listener.close()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        acceptor.join(5)
        for t in threads:
            t.join(5)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise AssertionError("EOF before the echo came back")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_until_eof(sock: socket.socket) -> None:
    while sock.recv(16):
        pass


# ------------------------------------------------------------ the proxy itself


def test_proxy_slices_and_delays_but_keeps_every_byte_in_order(
    echo_server: tuple[str, int], seed: int
) -> None:
    schedule = ChaosSchedule(
        seed=seed, slice_probability=1.0, max_pieces=16, delay_probability=0.3, max_delay=0.005
    )
    payload = bytes(range(256)) * 400
    with ChaosProxy(echo_server, schedule) as proxy:
        with socket.create_connection(proxy.address, timeout=10) as sock:
            sock.sendall(payload)
            assert _recv_exactly(sock, len(payload)) == payload
        counts = proxy.counts
    assert counts.slices > 0
    assert counts.pieces > counts.slices
    assert counts.delays > 0
    assert counts.bytes_forwarded == 2 * len(payload)
    assert counts.resets == counts.blackholes == counts.bytes_swallowed == 0


def test_proxy_reset_reaches_both_ends_as_rst(echo_server: tuple[str, int]) -> None:
    with ChaosProxy(echo_server) as proxy, socket.create_connection(proxy.address, 10) as sock:
        sock.sendall(b"ping")
        assert _recv_exactly(sock, 4) == b"ping"
        assert proxy.reset() == 1
        with pytest.raises(ConnectionResetError):
            _read_until_eof(sock)
        assert proxy.counts.resets == 1


def test_proxy_blackhole_swallows_without_closing_then_resets_a_closed_peer(
    echo_server: tuple[str, int],
) -> None:
    with ChaosProxy(echo_server) as proxy, socket.create_connection(proxy.address, 10) as sock:
        sock.sendall(b"before")
        assert _recv_exactly(sock, 6) == b"before"
        proxy.blackhole(30.0)
        assert proxy.blackholed
        sock.sendall(b"lost in the hole")
        sock.settimeout(0.3)
        # silence, not EOF: the socket stays open and nothing comes back
        with pytest.raises(TimeoutError):
            sock.recv(16)
        proxy.log.wait_for(lambda ev: proxy.counts.bytes_swallowed >= 16)
        # a connection made during the blackhole waits for it to end
        with socket.create_connection(proxy.address, 10) as late:
            proxy.wait_for_connections(2)
            late.sendall(b"late")
            proxy.calm()
            late.settimeout(10)
            assert _recv_exactly(late, 4) == b"late"
        # the first connection lost bytes: it never forwards again
        sock.sendall(b"after")
        with pytest.raises(TimeoutError):
            sock.recv(16)
        counts = proxy.counts
    assert counts.blackholes == 1
    assert counts.blackholed_connections == 1
    assert counts.connections == 2


def test_proxy_refuses_bad_schedules_and_use_before_start() -> None:
    with pytest.raises(UsageError, match="slice_probability"):
        ChaosSchedule(slice_probability=2.0)
    with pytest.raises(UsageError, match="blackhole_duration"):
        ChaosSchedule(blackhole_interval=1.0)
    proxy = ChaosProxy(("127.0.0.1", 9))
    with pytest.raises(UsageError, match="start"):
        proxy.reset()
    proxy.stop()  # never started: nothing to do


# --------------------------------------------------------- the delivery guarantee


def _linked_through(
    proxy_schedule: ChaosSchedule, a: Bus, b: Bus
) -> tuple[ChaosProxy, tuple[Service, Link]]:
    service = b.listen(
        0,
        settings=ServiceSettings(heartbeat_delay=HEARTBEAT, heartbeat_reply_delay=HEARTBEAT_REPLY),
    )
    proxy = ChaosProxy(("127.0.0.1", service.port), proxy_schedule).start()
    link = a.connect(
        *proxy.address,
        settings=ConnectionSettings(
            reconnect=True,
            reconnect_delay=RECONNECT,
            heartbeat_delay=HEARTBEAT,
            heartbeat_reply_delay=HEARTBEAT_REPLY,
        ),
    )
    return proxy, (service, link)


def _run_chaos(seed: int, total: int, rate: float, schedule: ChaosSchedule, name: str) -> None:
    started = time.monotonic()
    with Bus(node_id="chaos-sub") as b, Bus(node_id="chaos-pub") as a:
        subscriber = SeqSubscriber("/chaos")
        start_actors(b, subscriber)
        proxy, (service, link) = _linked_through(schedule, a, b)
        try:
            with CountingPublisher(a, "/chaos", total=total, rate=rate) as publisher:
                publisher.wait_up(10)
                publisher.start()
                publisher.wait_done(total / rate * 4 + 60)
            proxy.calm()
            # Everything written before the fence on the live connection has been
            # taken in once the fence arrives; older connections are gone on both
            # sides (one link per pair), so every counter is final.
            publish_fence(a, "/chaos", timeout=30)
            subscriber.log.wait_for(lambda ev: any(e[0] == "fence" for e in ev), 30)
            sender = link.counters
            receiver = service.counters.links
            faults = proxy.counts
        finally:
            proxy.stop()
    stats = subscriber.stats
    sent = publisher.sent
    written = sender.messages_out - 1  # the fence
    taken_in = receiver.messages_in - 1
    in_flight_lost = written - taken_in
    unrouted = publisher.unrouted
    # (the receiver's own `dropped`: data read after a corrupt body; it sends no data)
    # `lost` is the sender's own count, from the receiver's RECEIPT at each logon
    dropped = (
        unrouted
        + sender.dropped
        + sender.lost
        + receiver.dropped
        + receiver.unexpected
        + receiver.unknown_types
    )
    states = subscriber.states()
    record(
        name,
        seed=seed,
        faults=faults.faults,
        resets=faults.resets,
        blackholes=faults.blackholes,
        slices=faults.slices,
        delays=faults.delays,
        reconnects=sender.reconnects,
        sent=sent,
        delivered=stats.delivered,
        dropped_reported=dropped,
        unrouted=unrouted,
        dropped_unwritten=sender.dropped,
        lost_in_flight=sender.lost,
        duplicates=stats.duplicates,
        reordered=stats.reordered,
        down_up=f"{states.count(FeedState.DOWN)}/{states.count(FeedState.UP)}",
        refused_batches=publisher.refused,
        seconds=round(time.monotonic() - started, 1),
    )
    assert sent == total
    assert stats.duplicates == 0
    assert stats.reordered == 0
    assert receiver.duplicates == receiver.gaps == 0  # per-connection sequence numbers
    assert receiver.corrupt_frames == 0  # slicing never breaks a frame
    # the sender's count agrees with the pair of nodes' counters
    assert sender.lost == in_flight_lost >= 0
    # The equation: every message delivered once, or reported dropped.
    assert stats.delivered + dropped == sent, (stats, sender, receiver)
    # ...and the subscriber's own view of the numbers agrees with the counters
    # (skipped numbers, plus any lost after the last one that arrived).
    assert stats.missing + (sent - stats.last) == dropped
    # The faults really happened and the link came back after each.
    assert faults.resets >= 3
    assert faults.blackholed_connections >= 1
    assert sender.reconnects >= faults.resets
    assert states.count(FeedState.DOWN) >= 2
    # status callbacks fire on change only: UP, DOWN, UP, ... (the last DOWN is
    # the publishers closing at the end)
    assert states == [FeedState.UP, FeedState.DOWN] * (len(states) // 2)


@pytest.mark.slow
def test_100k_notifications_through_resets_blackholes_and_slicing(seed: int) -> None:
    schedule = ChaosSchedule(
        seed=seed,
        reset_interval=1.0,
        blackhole_interval=4.0,
        blackhole_duration=HEARTBEAT_TIMEOUT * 2,
        slice_probability=0.3,
        max_pieces=8,
        delay_probability=0.02,
        max_delay=0.01,
    )
    _run_chaos(seed, total=100_000, rate=8_000, schedule=schedule, name="chaos_100k")
