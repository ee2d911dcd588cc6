"""Attacks on the link port, each made by a hostile client on real loopback
sockets, against a node in its own process (``nodes/limits_node.py``, so its
VmRSS and descriptors are its own) while a healthy authenticated link from this
process carries numbered notifications the whole time.

Each attack is scaled down with limits set low enough that the memory bounds
mean something; each checks that the node survives, closes the attacker
within its deadline, counts the refusal, stays within a stated memory bound
during the attack and returns near its baseline after it.  At the end of the
module the healthy link must have delivered every number once, in order,
without ever going DOWN.  The figures are printed (``-s``) and kept in
docs/reliability.md, "Attacks on the link port".
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodes.messages import Counter, Fetch
from nodes.support import RawPeer

from actorbus import Bus, FeedState
from actorbus.bus import codec
from actorbus.bus.party import Role
from actorbus.bus.scope import Scope
from actorbus.config import ConnectionSettings
from actorbus.net._receipts import Receipts
from actorbus.net.protocol import FrameType
from actorbus.testing import encode_frame, wait_until

NODE_SCRIPT = Path(__file__).parent / "nodes" / "limits_node.py"
KEY = b"limits-test-secret-0123456789abcdef"
MIB = 1_048_576

LOGON_TIMEOUT = 2.0
FRAME_TIMEOUT = 1.0
MAX_CONNECTIONS_PER_HOST = 50
MAX_KEYS = 1_000
MAX_FEEDS = 500
MAX_PATTERNS = 100
QUEUE_BYTES = 4 * MIB
SETTINGS = {
    "logon_timeout": LOGON_TIMEOUT,
    "frame_timeout": FRAME_TIMEOUT,
    "max_connections": 200,
    "max_connections_per_host": MAX_CONNECTIONS_PER_HOST,
    "max_keys": MAX_KEYS,
    "max_feeds": MAX_FEEDS,
    "max_patterns": MAX_PATTERNS,
    "message_queue_bytes": QUEUE_BYTES,
    "output_buffer_size": 16_384,
}
FIGURES: list[str] = []


def figure(name: str, **values: Any) -> None:
    line = f"{name}: " + " ".join(f"{k}={v}" for k, v in values.items())
    FIGURES.append(line)
    print(line)


class Victim:
    """The attacked node's process: ``stats()`` asks it for its figures."""

    def __init__(self, log: Path) -> None:
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(NODE_SCRIPT), KEY.hex(), json.dumps(SETTINGS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.port = int(self._line(20)["ready"])

    def _line(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"the attacked node said nothing in {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the attacked node exited (code {self.proc.wait(5)})")
        return dict(json.loads(line))

    def stats(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"stats\n")
        self.proc.stdin.flush()
        return self._line(20)

    def rss_mib(self) -> float:
        return round(self.stats()["rss_kib"] / 1024, 1)

    def close(self) -> None:
        proc = self.proc
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
            self.log.close()


class Healthy:
    """This process's node: an authenticated link to the victim publishing
    ``Counter(n)`` on ``/healthy``, n = 1, 2, 3, ..., every millisecond or so."""

    def __init__(self, port: int) -> None:
        self.bus = Bus(node_id="healthy")
        self.link = self.bus.connect(
            "127.0.0.1", port, secret=KEY, settings=ConnectionSettings(heartbeat_delay=1.0)
        )
        self.link.wait_logged_on(10)
        self.up = threading.Event()
        self.feed = self.bus.publisher(Counter, "/healthy", on_status=self._status)
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="healthy-publisher")

    def _status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.up.set()

    def start(self) -> None:
        assert self.up.wait(10), "the healthy feed never went UP"
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.001):
            self.sent += 1
            self.feed.publish(Counter("/healthy", n=self.sent))

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.feed.publish(Counter("/healthy", n=0))  # the fence: all before it is in

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.bus.close()


class Node:
    def __init__(self, victim: Victim, healthy: Healthy) -> None:
        self.victim = victim
        self.healthy = healthy
        self.port = victim.port
        #: the victim's descriptors with the healthy link up
        self.fds = victim.stats()["fds"]

    def counters(self) -> dict[str, int]:
        return dict(self.victim.stats()["service"])

    def quiet(self) -> dict[str, Any]:
        """The victim's stats once the sockets of earlier attacks are closed
        (only the healthy link open, descriptors back where they started)."""
        stats = [self.victim.stats()]
        wait_until(
            lambda: (
                stats.append(self.victim.stats())
                or (stats[-1]["fds"] <= self.fds and stats[-1]["service"]["open_links"] == 1)
            ),
            10,
            0.05,
        )
        return stats[-1]

    def progress(self) -> None:
        """The healthy link delivered more since now, and its feed is UP only."""
        before = self.victim.stats()["delivered"]
        assert wait_until(lambda: self.victim.stats()["delivered"] >= before + 20, 10), (
            f"the healthy link stalled at {before}"
        )
        assert self.victim.stats()["states"] == ["UP"]

    def settled_rss(self, than: float, timeout: float = 10.0) -> float:
        """The victim's RSS (MiB) once it is within ``than`` (or the last one seen)."""
        seen = [self.victim.rss_mib()]
        wait_until(lambda: seen.append(self.victim.rss_mib()) or seen[-1] <= than, timeout, 0.05)
        return seen[-1]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    victim = Victim(tmp_path_factory.mktemp("limits") / "victim.log")
    healthy: Healthy | None = None
    try:
        healthy = Healthy(victim.port)
        healthy.start()
        yield Node(victim, healthy)
        healthy.finish()
        assert wait_until(lambda: victim.stats()["fences"] >= 1, 20), "the fence never arrived"
        seen = victim.stats()
        figure(
            "healthy_link",
            sent=healthy.sent,
            delivered=seen["delivered"],
            missing=seen["missing"],
            duplicates=seen["duplicates"],
            reordered=seen["reordered"],
            states="/".join(seen["states"]),
        )
        assert seen["delivered"] == healthy.sent
        assert seen["missing"] == seen["duplicates"] == seen["reordered"] == 0
        assert seen["states"] == ["UP"]
        assert healthy.link.counters.logons == 1
        assert healthy.link.counters.dropped == 0
    finally:
        if healthy is not None:
            healthy.close()
        victim.close()


def closed_within(sock: socket.socket, timeout: float) -> float:
    """Read (and drop) until the node closes ``sock``; how long it took (s)."""
    start = time.monotonic()
    sock.settimeout(timeout)
    with contextlib.suppress(ConnectionResetError):
        while sock.recv(65536):
            pass
    return time.monotonic() - start


def delta(before: dict[str, int], after: dict[str, int], name: str) -> int:
    return after[name] - before[name]


def logged_on(port: int, node_id: str, **kwargs: Any) -> RawPeer:
    peer = RawPeer.connect(port, node_id, secret=KEY, **kwargs)
    peer.logon()
    return peer


# ------------------------------------------------------------------ before logon


def test_connections_that_never_log_on_are_capped_and_time_out(node: Node) -> None:
    """From one address: 50 connections send a LOGON and never prove the
    secret (one descriptor each, a 4 KiB read buffer each; closed at the
    logon timeout), 50 more are closed at once by the cap per
    address, 20 announce a 1 MiB frame before logon and are refused from the
    prefix; a node from another address links meanwhile.  Run twice: the first
    round warms the node up (first uses of code paths and pools), the second
    is measured."""
    _before_logon(node, "warm-up")
    _before_logon(node, "measured")
    node.progress()


def _before_logon(node: Node, round_: str) -> None:
    before = node.counters()
    base = node.quiet()
    logon = encode_frame(int(FrameType.LOGON), 5, "stranger", "", b"n" * 32)
    socks: list[socket.socket] = []
    big: list[socket.socket] = []
    try:
        start = time.monotonic()
        for _ in range(100):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind(("127.0.0.2", 0))
            sock.connect(("127.0.0.1", node.port))
            sock.sendall(logon)  # and never the PROOF
        # the 50 admitted ones are open, the 50 over the cap are closed at once
        assert wait_until(
            lambda: (
                delta(before, node.counters(), "connections_over_limit") == 50
                and delta(before, node.counters(), "accepted") == 50
            ),
            5,
        ), node.counters()
        held = node.victim.stats()
        # another address is not held back by this one's cap
        with Bus(node_id=f"newcomer-{round_}") as other:
            link = other.connect("127.0.0.1", node.port, secret=KEY)
            assert link.wait_logged_on(5) == "victim"
        for _ in range(20):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            big.append(sock)
            sock.connect(("127.0.0.1", node.port))
            sock.sendall((MIB - 1).to_bytes(4, "big") + b"\0" * 4_000)
        refused = max(closed_within(s, 5) for s in big)
        for sock in socks:
            closed_within(sock, LOGON_TIMEOUT + 3)
        waited = time.monotonic() - start
    finally:
        for sock in socks + big:
            sock.close()
    after = node.counters()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 3)
    fds_per_connection = (held["fds"] - base["fds"]) / MAX_CONNECTIONS_PER_HOST
    if round_ != "measured":
        return
    figure(
        "before_logon",
        connections=100,
        over_cap_closed=delta(before, after, "connections_over_limit"),
        refused_1mib_prefix=delta(before, after, "corrupt_frames"),
        held=MAX_CONNECTIONS_PER_HOST,
        fds_per_connection=fds_per_connection,
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_held_mib=round(held["rss_kib"] / 1024, 1),
        rss_after_mib=rss_after,
        all_closed_after_s=round(waited, 2),
        refused_after_s=round(refused, 2),
    )
    assert delta(before, after, "connections_over_limit") == 50
    assert delta(before, after, "corrupt_frames") == 20  # the 1 MiB prefixes
    assert delta(before, after, "over_limit") == 0  # (no link went over a limit)
    assert fds_per_connection <= 1.05  # one descriptor per connection
    assert held["rss_kib"] - base["rss_kib"] < 6 * 1024  # 50 held: a few MiB at most
    assert waited < LOGON_TIMEOUT + 1.5 and refused < 1.0
    assert rss_after <= base["rss_kib"] / 1024 + 3


def test_a_logon_that_never_completes_is_closed_at_the_logon_timeout(node: Node) -> None:
    """An authenticated peer that never sends LOGON_COMPLETE is held no longer
    than the logon timeout: it covers the whole logon, not the proof only."""
    with RawPeer.connect(node.port, "half-logged-on", secret=KEY) as peer:
        peer.proto.logon()
        peer.send()
        peer.answer_challenge()
        waited = closed_within(peer.sock, LOGON_TIMEOUT + 3)
    figure("logon_never_completed", closed_after_s=round(waited, 2))
    assert waited < LOGON_TIMEOUT + 1.0
    node.progress()


# ------------------------------------------------------------------- after logon


def test_frames_stalled_after_logon_are_closed_at_the_frame_timeout(node: Node) -> None:
    """20 authenticated peers each start a 1 MiB frame, send half of it and
    stall: each holds at most its frame until the frame timeout."""
    before = node.counters()
    base = node.quiet()
    peers = [logged_on(node.port, f"stall-{i}") for i in range(20)]
    try:
        for peer in peers:
            peer.send_raw((MIB - 1).to_bytes(4, "big") + b"\x91" + b"\0" * (MIB // 2))
        during = node.victim.stats()
        waited = max(closed_within(peer.sock, FRAME_TIMEOUT + 5) for peer in peers)
    finally:
        for peer in peers:
            peer.close()
    after = node.counters()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 4)
    figure(
        "stalled_frames",
        peers=20,
        half_frame_mib=0.5,
        over_limit=delta(before, after, "over_limit"),
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_during_mib=round(during["rss_kib"] / 1024, 1),
        rss_after_mib=rss_after,
        closed_after_s=round(waited, 2),
    )
    assert delta(before, after, "over_limit") == 20
    assert during["rss_kib"] - base["rss_kib"] < 20 * 1.1 * 1024 + 8 * 1024
    assert waited < FRAME_TIMEOUT + 1.5
    assert rss_after <= base["rss_kib"] / 1024 + 4
    node.progress()


def _send_until_closed(peer: RawPeer, frames: Iterator[bytes]) -> None:
    """Send ``frames`` (batched) until the node closes the connection."""
    with contextlib.suppress(ConnectionResetError, BrokenPipeError):
        for data in frames:
            peer.send_raw(data)


def test_keys_over_the_limits_close_the_link(node: Node) -> None:
    """1,500 keys with 1,000-character subjects (the table holds 1,000), and one
    key with a 100,000-character subject."""
    before = node.counters()
    base = node.quiet()
    with logged_on(node.port, "many-keys") as peer:
        frames = (
            b"".join(
                encode_frame(
                    int(FrameType.KEY_DEF), kid, "linktest.Counter", f"/{kid:06}" + "k" * 993
                )
                for kid in range(start, start + 100)
            )
            for start in range(0, 1_500, 100)
        )
        _send_until_closed(peer, frames)
        waited = closed_within(peer.sock, 5)
    during = node.victim.stats()
    with logged_on(node.port, "long-subject") as peer:
        _send_until_closed(
            peer, iter([encode_frame(int(FrameType.KEY_DEF), 1, "linktest.Counter", "s" * 100_000)])
        )
        closed_within(peer.sock, 5)
    after = node.counters()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 4)
    figure(
        "keys",
        keys_sent=1_500,
        max_keys=MAX_KEYS,
        subject_chars=1_000,
        over_limit=delta(before, after, "over_limit"),
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_at_close_mib=round(during["rss_kib"] / 1024, 1),
        rss_after_mib=rss_after,
    )
    assert delta(before, after, "over_limit") == 2
    assert waited < 5
    assert during["rss_kib"] - base["rss_kib"] < 8 * 1024
    assert rss_after <= base["rss_kib"] / 1024 + 4
    node.progress()


def test_advertisements_subscriptions_and_patterns_over_the_limits_close_the_link(
    node: Node,
) -> None:
    """300 advertisements and 300 subscriptions (500 allowed); 150 wildcard
    subscriptions (100 allowed)."""
    before = node.counters()
    base = node.quiet()
    with logged_on(node.port, "many-feeds") as peer:
        for i in range(300):
            peer.proto.advertise(
                ("linktest.Counter", f"/ad/{i}"),
                Role.PUBLISHER,
                Scope.LOCAL_AND_REMOTE,
                FeedState.UP,
            )
            peer.proto.subscribe(("linktest.Counter", f"/sub/{i}"), Role.SUBSCRIBER)
        _send_until_closed(peer, iter([peer.proto.data_to_send()]))
        closed_within(peer.sock, 5)
    with logged_on(node.port, "many-patterns") as peer:
        for i in range(150):
            peer.proto.subscribe_pattern("linktest.Counter", 1, f"/p{i}/*")
        _send_until_closed(peer, iter([peer.proto.data_to_send()]))
        closed_within(peer.sock, 5)
    after = node.counters()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 4)
    figure(
        "feeds_and_patterns",
        feeds_sent=600,
        max_feeds=MAX_FEEDS,
        patterns_sent=150,
        max_patterns=MAX_PATTERNS,
        over_limit=delta(before, after, "over_limit"),
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_after_mib=rss_after,
    )
    assert delta(before, after, "over_limit") == 2
    assert rss_after <= base["rss_kib"] / 1024 + 4
    node.progress()


# ---------------------------------------------------------- peers that never read


def test_a_heartbeat_flood_from_a_peer_that_never_reads_hits_the_byte_limit(node: Node) -> None:
    """The peer sends heartbeats and never reads the replies: the replies count
    against message_queue_bytes (4 MiB here) like any frame."""
    before = node.counters()
    base = node.quiet()
    heartbeat = encode_frame(int(FrameType.HEARTBEAT))
    sent = 0
    with logged_on(node.port, "heartbeats", rcvbuf=4_096) as peer:
        start = time.monotonic()
        with contextlib.suppress(ConnectionResetError, BrokenPipeError, TimeoutError):
            while sent < 40 * MIB:  # (ten times the limit: the node closes long before)
                peer.send_raw(heartbeat * 20_000)
                sent += len(heartbeat) * 20_000
        took = time.monotonic() - start
    after = node.counters()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 4)
    figure(
        "heartbeat_flood",
        sent_mib=round(sent / MIB, 1),
        queue_bytes_mib=QUEUE_BYTES // MIB,
        over_limit=delta(before, after, "over_limit"),
        closed_after_s=round(took, 2),
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_after_mib=rss_after,
    )
    assert delta(before, after, "over_limit") == 1
    assert sent < 40 * MIB  # closed: the node stopped taking them
    assert rss_after <= base["rss_kib"] / 1024 + 4
    node.progress()


def test_big_replies_to_a_peer_that_never_reads_hit_the_byte_limit(node: Node) -> None:
    """50 requests for 900 KB replies, never read: 45 MB of replies stop at
    the 4 MiB limit (replies still waiting then are dropped and counted; those
    already handed to the transport count as sent).  Twice: after each round
    the node's memory is back near its baseline."""
    first = _big_replies(node, None)
    _big_replies(node, first)


def _big_replies(node: Node, first: float | None) -> float:
    before = node.counters()
    base = node.quiet()
    peak = [base["rss_kib"]]
    with logged_on(node.port, "no-reader", rcvbuf=4_096) as peer:
        body = codec.to_wire(Fetch("/fetch", size=900_000))
        for request_id in range(1, 51):
            peer.proto.request((Fetch.__type_name__, "/fetch"), request_id, body)
        peer.send()

        def closed() -> bool:
            stats = node.victim.stats()
            peak.append(stats["rss_kib"])
            return bool(stats["service"]["over_limit"] > before["over_limit"])

        assert wait_until(closed, 20, 0.05), node.counters()
    after = node.counters()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 4, 8)
    if first is None:
        return rss_after
    figure(
        "big_replies_no_reader",
        requests=50,
        reply_kb=900,
        queue_bytes_mib=QUEUE_BYTES // MIB,
        dropped=delta(before, after, "dropped"),
        over_limit=delta(before, after, "over_limit"),
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_peak_mib=round(max(peak) / 1024, 1),
        rss_after_first_round_mib=first,
        rss_after_mib=rss_after,
    )
    assert delta(before, after, "over_limit") == 1
    # what waits for the socket stops at the queue limit; the replies the
    # replier made (50 x 900 KB, the application's own objects until the link
    # takes them) come on top, once; the margin is the frames being encoded and
    # written (a packer's buffer, a partial write's tail: about one frame each)
    assert max(peak) - base["rss_kib"] < (QUEUE_BYTES + 50 * 900_000 + 16 * MIB) // 1024
    # and all of it is given back, the second round too (large frames get
    # their own mappings: net/_trim.py)
    assert rss_after <= base["rss_kib"] / 1024 + 4
    node.progress()
    return rss_after


# ------------------------------------------------------------------ churn


def test_connect_disconnect_cycles_return_their_memory(node: Node) -> None:
    """1,000 logons and logoffs of as many node ids: per-connection state is
    freed, receipt records stay bounded."""

    def cycles(first: int, count: int) -> None:
        for i in range(first, first + count):
            with logged_on(node.port, f"churn-{i}") as peer:
                peer.proto.logoff("bye")
                peer.send()
                peer.read_until_closed()

    cycles(0, 100)  # warm-up: the allocator's pools, code paths
    base = node.quiet()
    cycles(100, 900)
    after = node.victim.stats()
    rss_after = node.settled_rss(base["rss_kib"] / 1024 + 4)
    figure(
        "connect_disconnect",
        cycles=1_000,
        receipts=after["receipts"],
        fds_growth=after["fds"] - base["fds"],
        rss_base_mib=round(base["rss_kib"] / 1024, 1),
        rss_after_mib=rss_after,
    )
    assert after["fds"] - base["fds"] <= 2
    assert rss_after <= base["rss_kib"] / 1024 + 4
    node.progress()


def test_receipt_records_are_bounded_and_keep_linked_peers() -> None:
    receipts = Receipts(most=3)
    receipts.logon("linked", "r")  # open: never forgotten while open
    for i in range(10):
        receipts.logon(f"p{i}", "r")
        receipts.ended(f"p{i}", "r", 5, 5)
    assert len(receipts) == 3
    assert receipts.logon("linked", "r") == (0, 0)  # still known (same run)
    assert receipts.logon("p0", "r") == (0, 0)  # forgotten: a stranger again
    assert receipts.logon("p9", "r") == (5, 0)  # recent: remembered
