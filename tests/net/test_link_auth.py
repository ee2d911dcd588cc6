"""Authenticated links over real loopback sockets, with healthy traffic running
alongside: strangers who claim a linked node's id — with no secret, a wrong
one, an empty run id, again and again, or a logon they never finish — cannot
replace that node's link, lock its id out or learn anything of the node; each
refusal is counted; the healthy traffic loses, duplicates and reorders nothing.
A restarted node with the right secret does replace its old link."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import msgpack
import pytest
from nodes.messages import Counter
from nodes.support import RawPeer, SystemLog, buses, wait_for

from actorbus import Bus
from actorbus.net import Link, LinkSettings, Service
from actorbus.net.protocol import FrameType, LogonRejected

KEY = b"0123456789abcdef0123456789abcdef"
WRONG = b"fedcba9876543210fedcba9876543210"
#: the service closes a logon not accepted within this (the handshake deadline)
LOGON_TIMEOUT = 1.0


class Stream:
    """``Counter(n)``, n = 1, 2, 3, ..., published from ``src`` on its own
    thread while the feed is up, read on ``dst`` by an inbox on another thread;
    :meth:`finish` checks every number arrived once, in order."""

    def __init__(self, src: Bus, dst: Bus, subject: str) -> None:
        self.subject = subject
        self.inbox = dst.inbox(Counter, subject)
        self.feed = src.publisher(Counter, subject)
        self.sent = 0
        self.unrouted = 0
        self.received: list[int] = []
        self._stop = threading.Event()
        self._quit = threading.Event()
        self._threads = [
            threading.Thread(target=self._publish, name=f"publish{subject}"),
            threading.Thread(target=self._read, name=f"read{subject}"),
        ]

    def start(self) -> Stream:
        wait_for(self.feed.is_feed_up, f"{self.subject} sees its remote subscriber")
        for thread in self._threads:
            thread.start()
        return self

    def _publish(self) -> None:
        while not self._stop.is_set():
            for _ in range(5):
                if not self.feed.publish(Counter(self.subject, n=self.sent + 1)):
                    self.unrouted += 1
                self.sent += 1
            self._stop.wait(0.002)  # about 2 500 a second

    def _read(self) -> None:
        while not self._quit.is_set():
            message = self.inbox.receive(0.05)
            if message is not None:
                self.received.append(message.n)

    def progress(self, more: int = 50) -> None:
        before = len(self.received)
        wait_for(lambda: len(self.received) >= before + more, f"{self.subject} keeps flowing")

    def finish(self) -> None:
        self._stop.set()
        self._threads[0].join(5)
        try:
            wait_for(lambda: len(self.received) >= self.sent, f"all of {self.subject} arrives", 10)
        finally:
            self._quit.set()
            self._threads[1].join(5)
        assert self.unrouted == 0
        assert self.received == list(range(1, self.sent + 1))  # none lost, twice, reordered
        self.feed.close()


@pytest.fixture
def healthy() -> Iterator[tuple[Bus, Bus, Service, Link]]:
    """Node N serves an authenticated link from node H (both hold KEY)."""
    with buses("node-n", "node-h") as (n, h):
        service = n._start_net().listen(
            0, settings=LinkSettings(logon_timeout=LOGON_TIMEOUT), secret=KEY
        )
        link = h.connect("127.0.0.1", service.port, secret=KEY)
        assert link.wait_logged_on(5) == "node-n"
        wait_for(lambda: any(x.is_logged_on for x in service.links), "N's side logs on")
        yield n, h, service, link


def stranger(service: Service, node_id: str, run_id: str, secret: bytes) -> RawPeer:
    """A peer that logs on as ``node_id`` with ``secret`` and is refused."""
    started = time.monotonic()
    with RawPeer.connect(service.port, node_id, run_id=run_id, secret=secret) as peer:
        peer.proto.logon()
        peer.send()
        assert peer.expect(LogonRejected).reason == "authentication failed"
        peer.read_until_closed()
    assert time.monotonic() - started < LOGON_TIMEOUT  # refused at once, not timed out
    return peer


def frame_types(data: bytes) -> list[int]:
    types = []
    while data:
        size = int.from_bytes(data[:4], "big")
        types.append(msgpack.unpackb(data[4 : 4 + size])[0])
        data = data[4 + size :]
    return types


def test_strangers_cannot_replace_lock_out_or_learn_a_linked_node(
    healthy: tuple[Bus, Bus, Service, Link],
) -> None:
    n, h, service, link = healthy
    held = n.net.link_to("node-h")
    assert held is not None
    to_n = Stream(h, n, "/h-to-n").start()
    to_h = Stream(n, h, "/n-to-h").start()
    attempts = [
        ("no secret, a new run id", "evil-1", b""),
        ("a wrong secret, a new run id", "evil-2", WRONG),
        ("a wrong secret, no run id", "", WRONG),
        ("the secret's first half", "evil-3", KEY[:16] + WRONG[16:]),
    ]
    attempts += [(f"kick {i}", f"kick-{i}", WRONG) for i in range(12)]
    for _, run_id, secret in attempts:
        peer = stranger(service, "node-h", run_id, secret)
        # all it ever got: a random challenge and the refusal
        assert frame_types(bytes(peer.received)) == [
            int(FrameType.CHALLENGE),
            int(FrameType.LOGON_REJECT),
        ]
        for secret_or_identity in (b"node-n", n.net.run_id.encode(), b"linktest", KEY):
            assert secret_or_identity not in peer.received
        assert n.net.link_to("node-h") is held  # untouched
        to_n.progress(10)
    wait_for(lambda: service.counters.auth_failures == len(attempts), "every refusal is counted")
    to_n.progress()
    to_h.progress()
    to_n.finish()
    to_h.finish()
    assert n.net.link_to("node-h") is held and held.is_logged_on
    for counters in (link.counters, held.counters):
        assert (counters.logons, counters.lost, counters.dropped) == (1, 0, 0)
    assert service.counters.links.refused_logons == 0  # refused as strangers, before any claim
    assert service.counters.accepted == 1 + len(attempts)


def test_a_logon_that_never_proves_its_key_holds_no_node_id() -> None:
    with buses("node-n", "node-x") as (n, x):
        service = n._start_net().listen(
            0, settings=LinkSettings(logon_timeout=LOGON_TIMEOUT), secret=KEY
        )
        with RawPeer.connect(service.port, "node-x", run_id="") as squatter:
            squatter.proto.logon()  # LOGON claiming node-x, then nothing
            squatter.send()
            started = time.monotonic()
            # the real node-x links while the squatter still waits
            link = x.connect("127.0.0.1", service.port, secret=KEY)
            assert link.wait_logged_on(5) == "node-n"
            assert n.net.link_to("node-x") is not None
            # the squatter is closed at the handshake deadline, having learnt nothing
            squatter.read_until_closed(timeout=LOGON_TIMEOUT + 4)
            assert time.monotonic() - started < LOGON_TIMEOUT + 2
        assert frame_types(bytes(squatter.received)) == [
            int(FrameType.CHALLENGE),
            int(FrameType.LOGON_REJECT),
        ]
        assert b"node-n" not in squatter.received
        assert link.is_logged_on and link.counters.logons == 1


def test_a_restarted_node_with_the_secret_replaces_its_old_link() -> None:
    with buses("node-n", "node-p") as (n, p):
        log_n = SystemLog(n)
        service = n.listen(0, secret=KEY)
        old = p.connect("127.0.0.1", service.port, secret=KEY)
        old.wait_logged_on(5)
        assert SystemLog.next(log_n.logged_on).peer_node == "node-p"
        stream = Stream(p, n, "/p-to-n").start()
        stream.progress()
        # a stranger claiming node-p's new run, with a wrong secret: nothing moves
        stranger(service, "node-p", "p-run-2", WRONG)
        stream.progress()
        stream.finish()  # every message of the old run arrived
        held = n.net.link_to("node-p")
        # the new run of node-p (same id, a new run id) with the right secret
        with RawPeer.connect(service.port, "node-p", run_id="p-run-2", secret=KEY) as new:
            assert new.logon() == "node-n"
            expected = "node 'node-p' restarted (new run id 'p-run-2'); its new link"
            # its end of the replaced link is closed for good, saying why
            assert expected in (old.wait_closed(5) or "")
            offs = [SystemLog.next(log_n.logged_off) for _ in range(2)]  # the stranger's too
            assert [o.peer_node for o in offs] == ["", "node-p"]
            assert offs[0].reason.startswith("authentication failed: a peer at 127.0.0.1:")
            assert expected in offs[1].reason, offs[1].reason
            replacement = n.net.link_to("node-p")
            assert replacement is not None and replacement is not held
        # the counts are exact: all sent arrived, nothing dropped or lost either side
        assert (old.counters.lost, old.counters.dropped, old.counters.logons) == (0, 0, 1)
        links = service.counters.links
        assert (links.lost, links.dropped, links.auth_failures) == (0, 0, 1)
        assert links.messages_in == stream.sent
