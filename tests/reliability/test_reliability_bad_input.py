"""Bad input everywhere a user or a peer can reach, while a healthy link carries
traffic the whole time.

One node (``node-n``) serves a healthy link from ``node-h``, which publishes
numbered notifications at a steady rate for the whole module.  Meanwhile peers
hit the same service with garbage before logon, a logon under ``node-h``'s id,
an oversized length prefix, a body that does not decode, unknown message
types, a flood, and a peer that stops reading; users hand the process
malformed properties and ``.sm`` files.  Each case checks its logged reason and
its counter; at the end of the module the healthy link must have delivered
every message, in order, without ever going DOWN.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
from reliability_support import (
    SEED,
    CountingPublisher,
    LogCapture,
    RawPeer,
    Seq,
    SeqSubscriber,
    publish_fence,
    record,
    start_actors,
)

from actorbus import Bus, ConfigError, FeedState, Field, Notification, Scope
from actorbus.bus import SYSTEM_SUBJECT, LinkLoggedOff
from actorbus.bus.router import Role
from actorbus.config import ConnectionSettings, ServiceSettings, load_config
from actorbus.errors import SmSyntaxError
from actorbus.fsm import load_sm
from actorbus.net import LinkStats, Service
from actorbus.net.protocol import LogonRejected, RequestAcknowledged
from actorbus.testing import wait_until

QUEUE_LIMIT = 500
HEALTHY_RATE = 500


@dataclass
class Node:
    bus: Bus
    service: Service
    subscriber: SeqSubscriber
    healthy: CountingPublisher
    logs: LogCapture

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.service.port)

    def counters(self) -> LinkStats:
        return self.service.counters.links

    def healthy_progress(self, timeout: float = 10.0) -> None:
        """The healthy link delivered more since now, and its feed is still UP."""
        before = self.subscriber.stats.delivered
        if not wait_until(lambda: self.subscriber.stats.delivered >= before + 20, timeout):
            raise AssertionError(
                f"the healthy link stalled at {before} deliveries; states "
                f"{self.subscriber.states()}"
            )
        assert self.subscriber.states() == [FeedState.UP]


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    print(f"bad input seed: ACTORBUS_SEED={SEED}")
    with LogCapture() as logs, Bus(node_id="node-n") as n, Bus(node_id="node-h") as h:
        service = n.listen(
            0,
            settings=ServiceSettings(
                message_queue_size=QUEUE_LIMIT,
                output_buffer_size=16_384,
                heartbeat_delay=1.0,
                heartbeat_reply_delay=2.0,
            ),
        )
        subscriber = SeqSubscriber("/healthy")
        start_actors(n, subscriber)
        link = h.connect(
            "127.0.0.1",
            service.port,
            settings=ConnectionSettings(heartbeat_delay=1.0, heartbeat_reply_delay=2.0),
        )
        link.wait_logged_on(10)
        with CountingPublisher(h, "/healthy", total=10**9, rate=HEALTHY_RATE) as healthy:
            healthy.wait_up(10)
            healthy.start()
            yield Node(n, service, subscriber, healthy, logs)
            states = subscriber.states()
            healthy.stop()
        publish_fence(h, "/healthy")
        subscriber.log.wait_for(lambda ev: any(e[0] == "fence" for e in ev), 10)
        stats = subscriber.stats
        counters = service.counters
        record(
            "bad_input_counters",
            connections=counters.accepted,
            corrupt_frames=counters.links.corrupt_frames,
            unknown_types=counters.links.unknown_types,
            refused_logons=counters.links.refused_logons,
            unexpected=counters.links.unexpected,
            dropped=counters.links.dropped,
        )
        record(
            "bad_input_healthy_link",
            sent=healthy.sent,
            delivered=stats.delivered,
            dropped_reported=link.counters.dropped,
            duplicates=stats.duplicates,
            reordered=stats.reordered,
            feed_states="/".join(s.name for s in states),
        )
        assert stats.delivered == healthy.sent
        assert stats.missing == stats.duplicates == stats.reordered == 0
        assert states == [FeedState.UP]
        assert link.counters.logons == 1


@pytest.fixture(autouse=True)
def fresh_log_limits(node: Node) -> None:
    """Each test looks for the line its own bad input makes, and the node logs
    what a peer triggers at most once per period per service and kind: closing
    the limiters (which says what they held back) lets the next line out."""
    assert node.bus.net is not None
    node.bus.net.peer_log.close()
    node.bus.router.peer_log.close()


def _delta(before: LinkStats, after: LinkStats) -> dict[str, int]:
    return {
        name: getattr(after, name) - getattr(before, name)
        for name in LinkStats.__dataclass_fields__
        if getattr(after, name) != getattr(before, name)
    }


def _closed_by_node(peer: RawPeer) -> str:
    """Read until the node closes; the reason of its closing frame (LOGOFF or
    LOGON_REJECT), parsed straight from the bytes (the peer's own protocol
    object may be in no state to take it)."""
    data = peer.read_raw_until_closed()
    reasons = []
    while len(data) >= 4:
        size = int.from_bytes(data[:4], "big")
        frame = msgpack.unpackb(data[4 : 4 + size])
        data = data[4 + size :]
        if frame[0] in (3, 5):  # LOGON_REJECT, LOGOFF
            reasons.append(frame[1])
    assert reasons, "the node closed without saying why"
    return str(reasons[-1])


# ------------------------------------------------------------------ peers


def test_garbage_before_logon(node: Node) -> None:
    before = node.counters()
    rng = random.Random(SEED)
    # a small length prefix (so it is not an oversized frame) and a garbage body
    garbage = b"\x00\x00\x00\x10" + bytes(rng.randrange(256) for _ in range(16))
    with RawPeer(node.address, "garbage") as peer:
        peer.send_raw(garbage)
        reason = _closed_by_node(peer)
    assert reason == "protocol error: frame body is not one valid msgpack value"
    node.logs.wait_for("protocol error", "not exactly one valid msgpack value")
    wait_until(lambda: node.counters().corrupt_frames > before.corrupt_frames)
    assert _delta(before, node.counters())["corrupt_frames"] == 1
    node.healthy_progress()


def test_a_valid_frame_before_logon_is_garbage_too(node: Node) -> None:
    before = node.counters()
    notify = msgpack.packb([21, 1, 0, ["/x", 0, 1]])
    with RawPeer(node.address, "early") as peer:
        peer.send_raw(len(notify).to_bytes(4, "big") + notify)
        reason = _closed_by_node(peer)
    assert reason == "protocol error: frame before logon was accepted"
    node.logs.wait_for("garbage before logon")
    wait_until(lambda: node.counters().corrupt_frames > before.corrupt_frames)
    assert _delta(before, node.counters())["corrupt_frames"] == 1
    node.healthy_progress()


def test_logon_claiming_another_nodes_id_is_refused(node: Node) -> None:
    before = node.counters()
    logged_off = node.bus.inbox(LinkLoggedOff, SYSTEM_SUBJECT)
    try:
        with RawPeer(node.address, "node-h") as peer:  # node-h is already linked
            peer.proto.logon()
            peer.flush()
            rejected = peer.expect((LogonRejected,))
        assert isinstance(rejected, LogonRejected)
        assert "already has a link" in rejected.reason
        node.logs.wait_for("refusing node node-h", "already has a link")
        message = logged_off.receive(10)
        assert message is not None
        assert message.peer_node == "node-h"
        assert "already has a link" in message.reason
    finally:
        logged_off.close()
    wait_until(lambda: node.counters().refused_logons > before.refused_logons)
    assert _delta(before, node.counters())["refused_logons"] == 1
    node.healthy_progress()


def test_oversized_length_prefix_is_refused_from_the_prefix_alone(node: Node) -> None:
    before = node.counters()
    with RawPeer(node.address, "oversized") as peer:
        peer.logon()
        peer.send_raw(b"\xff\xff\xff\xff")  # and not one byte of the body
        reason = _closed_by_node(peer)
    assert reason.startswith("protocol error: frame of 4294967295 bytes exceeds the limit")
    node.logs.wait_for("frame of 4294967295 bytes", "max_frame_size")
    wait_until(lambda: node.counters().corrupt_frames > before.corrupt_frames)
    assert _delta(before, node.counters())["corrupt_frames"] == 1
    node.healthy_progress()


def test_a_body_that_does_not_decode_closes_only_that_link(node: Node) -> None:
    before = node.counters()
    key = (Seq.__type_name__, "/rogue")
    with RawPeer(node.address, "bad-body") as peer:
        peer.logon()
        peer.proto.advertise(key, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
        peer.proto.notify(key, ("/rogue", "not a timestamp", "n is not an int"))
        peer.flush()
        reason = _closed_by_node(peer)
    assert reason == "a message body did not decode"
    node.logs.wait_for("does not decode", "closing the link")
    wait_until(lambda: node.counters().corrupt_frames > before.corrupt_frames)
    assert _delta(before, node.counters())["corrupt_frames"] == 1
    node.healthy_progress()


def test_unknown_message_types_are_counted_and_the_link_stays(node: Node) -> None:
    before = node.counters()
    key = ("no.such.Type", "/x")
    with RawPeer(node.address, "stranger") as peer:
        peer.logon()
        peer.proto.advertise(key, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
        peer.proto.notify(key, ("/x", 1))
        peer.proto.request(key, 77, ("/x", 1))
        peer.flush()
        ack = peer.expect((RequestAcknowledged,))
        assert isinstance(ack, RequestAcknowledged)
        assert (ack.request_id, ack.repliers) == (77, 0)  # nobody here: answered at once
        peer.proto.logoff("done")
        peer.flush()
    wait_until(lambda: node.counters().unknown_types >= before.unknown_types + 3)
    delta = _delta(before, node.counters())
    assert delta["unknown_types"] == 3
    assert "corrupt_frames" not in delta
    # logged once for the link and type, not once per frame
    assert (
        len(node.logs.matching("node stranger sends no.such.Type messages", "unknown_types")) == 1
    )
    node.healthy_progress()


def test_a_peer_that_stops_reading_hits_the_queue_limit(node: Node) -> None:
    before = node.counters()
    out = CountingPublisher(node.bus, "/out", total=200_000, rate=100_000, batch=200)
    with out, RawPeer(node.address, "sleepy", rcvbuf=4096) as peer:
        peer.logon()
        peer.proto.subscribe((Seq.__type_name__, "/out"), Role.SUBSCRIBER)
        peer.flush()
        out.wait_up(10)
        out.start()
        node.logs.wait_for("output queue limit", f"message_queue_size={QUEUE_LIMIT}", timeout=30)
        out.stop()
    wait_until(lambda: node.counters().dropped > before.dropped)
    dropped = _delta(before, node.counters())["dropped"]
    assert dropped > QUEUE_LIMIT
    record("bad_input_stopped_reader", published=out.sent, queue_limit_drops=dropped)
    node.healthy_progress()


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_flooding_peer_is_read_in_bounded_memory_and_counted(node: Node) -> None:
    before = node.counters()
    rss_before = _rss_kib()
    frames = 200_000
    key = (Seq.__type_name__, "/never-advertised")
    with RawPeer(node.address, "flood") as peer:
        peer.logon()
        body = ("/never-advertised", 1, 5, b"x" * 200)
        sent_bytes = 0
        for batch in range(frames // 5_000):
            for _ in range(5_000):
                peer.proto.notify(key, body)
            data = peer.proto.data_to_send()
            peer.send_raw(data)
            sent_bytes += len(data)
            if batch % 10 == 0:
                node.healthy_progress()
        peer.proto.logoff("flood over")
        peer.flush()
    wait_until(lambda: node.counters().unexpected >= before.unexpected + frames, 60)
    grown = (_rss_kib() - rss_before) // 1024
    delta = _delta(before, node.counters())
    record("bad_input_flood", frames=frames, mib=sent_bytes >> 20, rss_growth_mib=grown)
    assert delta["unexpected"] == frames  # every one counted (and dropped)...
    # ...and logged once, not 200,000 times
    assert len(node.logs.matching("remote node flood", "/never-advertised", "unexpected")) == 1
    assert grown < sent_bytes >> 21, f"RSS grew {grown} MiB for a {sent_bytes >> 20} MiB flood"
    node.healthy_progress()


# ------------------------------------------------------------------ users

BAD_PROPERTIES = {
    "trailing comment": (
        "actorbus.dispatchers=md\nactorbus.dispatcher.md.threadCount=4 ; four threads\n",
        2,
        "no end-of-line comments",
    ),
    "not an int": ("actorbus.dispatchers=md\nactorbus.dispatcher.md.threadCount=four\n", 2, "int"),
    "unknown key": ("\n\nactorbus.dispatchr.md.threadCount=1\n", 3, "did you mean"),
    "bad escape": ("actorbus.dispatchers=m\\d\n", 1, "escape"),
    "two defaults": (
        "actorbus.dispatchers=a,b\nactorbus.dispatcher.a.isDefault=true\n"
        "actorbus.dispatcher.b.isDefault=true\n",
        3,
        "default",
    ),
    "port out of range": ("actorbus.service.port=70000\n", 1, "65535"),
    "not utf-8": ("actorbus.dispatchers=md\n# caf\xe9\n", 2, "UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROPERTIES))
def test_malformed_properties_name_file_and_line(node: Node, tmp_path: Path, case: str) -> None:
    text, line, words = BAD_PROPERTIES[case]
    path = tmp_path / "bad.properties"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.path == str(path)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert words.lower() in str(caught.value).lower()
    with pytest.raises(ConfigError):
        Bus.from_properties(path)
    node.healthy_progress(timeout=10)


def test_the_cli_refuses_a_malformed_properties_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "app.properties"
    path.write_text("actorbus.dispatchers=md\nactorbus.dispatcher.md.quantum=-1\n")
    done = subprocess.run(
        [sys.executable, "-m", "actorbus.cli", "run", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{path}:2:" in lines[0]
    assert "quantum" in lines[0]


BAD_SM = {
    "no %% after %map": ("%start M::A\n%map M\nA { }\n", 3, 1),
    "unclosed parameter list": ("%start M::A\n%map M\n%%\nA\n{\n  go( A {}\n}\n%%\n", 6, 9),
    "unterminated comment": ("%start M::A\n/* never closed\n%map M\n%%\nA {}\n%%\n", 2, 1),
    "binary junk": ("\x00\x01\x02", 1, 1),
    "unknown next state": ("%start M::A\n%map M\n%%\nA\n{\n go Nowhere {}\n}\n%%\n", 6, 5),
}


@pytest.mark.parametrize("case", sorted(BAD_SM))
def test_malformed_sm_files_name_line_and_column(node: Node, tmp_path: Path, case: str) -> None:
    text, line, column = BAD_SM[case]
    path = tmp_path / "bad.sm"
    path.write_text(text)
    with pytest.raises(SmSyntaxError) as caught:
        load_sm(path)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert str(caught.value).startswith(f"{path}:{line}:{column}: found ")
    assert "expected" in str(caught.value)
    node.healthy_progress(timeout=10)


# ------------------------------------------------------ valid but unusual input


class Shape(Field, type_name="reliability.Shape"):
    sides: int


class Square(Shape, type_name="reliability.Square"):
    size: float


class Drawing(Notification, type_name="reliability.Drawing"):
    main: Shape
    others: list[Shape]


def test_a_subclass_struct_in_a_base_typed_field_crosses_a_link(node: Node) -> None:
    inbox = node.bus.inbox(Drawing, "/draw")
    try:
        with Bus(node_id="node-d") as d:
            d.connect(*node.address).wait_logged_on(10)
            publisher = d.publisher(Drawing, "/draw")
            assert wait_until(publisher.is_feed_up, 10)
            sent = Drawing("/draw", main=Square(4, 2.5), others=[Shape(3), Square(4, 1.0)])
            publisher.publish(sent)
            got = inbox.receive(10)
    finally:
        inbox.close()
    assert got == sent
    assert type(got.main) is Square
