"""Input back-pressure (LinkSettings.input_backlog): a link stops reading while a
mailbox it feeds is over the limit, keeps the peer from taking the pause for a
dead link, and reads again below half of it."""

from __future__ import annotations

import threading

import pytest
from nodes.messages import Counter
from nodes.support import buses, wait_for

from actorbus import Actor, UsageError
from actorbus.config import LinkSettings, ServiceSettings
from actorbus.errors import LinkClosedError
from actorbus.net import ProtocolState
from actorbus.testing import MemoryPipe, wait_until


class _Held(Actor):
    """Takes nothing until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__(name="held")
        self.gate = threading.Event()
        self.taken = 0

    def startup(self) -> None:
        self.subscribe(Counter, "/bp", on_message=self._take)

    def _take(self, message: Counter, feed: object) -> None:
        self.gate.wait(30)
        self.taken += 1


def test_input_backlog_is_checked() -> None:
    assert LinkSettings().input_backlog == 10_000
    for bad in (-1, 1.5, "10"):
        with pytest.raises(UsageError, match="input_backlog="):
            LinkSettings(input_backlog=bad)  # type: ignore[arg-type]


def test_a_paused_link_stays_up_through_heartbeats_and_reads_again() -> None:
    total = 3_000
    with buses("P", "S") as (p, s):
        service = p.listen(
            0, settings=ServiceSettings(heartbeat_delay=0.1, heartbeat_reply_delay=0.1)
        )
        held = _Held()
        s.register(held)
        s.startup([held]).wait(5)
        link = s._start_net().connect(
            "127.0.0.1",
            service.port,
            settings=LinkSettings(
                heartbeat_delay=0.1, heartbeat_reply_delay=0.1, input_backlog=100
            ),
        )
        link.wait_logged_on(5)
        feed = p.publisher(Counter, "/bp")
        try:
            wait_for(feed.is_feed_up, "the publisher sees the remote subscriber")
            for n in range(total):
                feed.publish(Counter("/bp", n=n, payload=b"x" * 100))
            wait_for(lambda: link.counters.input_pauses >= 1, "the link pauses")
            # paused well past both heartbeat timeouts (0.2 s): keepalives go out
            # every 0.05 s, and neither side closes the link
            before = link.counters.heartbeats_out
            wait_for(lambda: link.counters.heartbeats_out >= before + 8, "keepalives while paused")
            assert link.counters.messages_in < total
            held.gate.set()
            assert wait_until(lambda: held.taken == total, 30), held.taken
        finally:
            held.gate.set()
            feed.close()
        counters = link.counters
        assert (counters.connections, counters.logons) == (1, 1)
        assert service.counters.links.logons == 1
        assert counters.messages_in == total


def test_keepalive_and_reading_resumed_in_the_protocol() -> None:
    pipe = MemoryPipe(settings=LinkSettings(heartbeat_delay=1.0, heartbeat_reply_delay=1.0))
    pipe.logon()
    proto = pipe.client
    proto.keepalive()  # any time, no answer awaited
    assert proto.counters.heartbeats_out == 1
    assert proto.next_deadline() == 1.0
    pipe.transfer()
    assert pipe.server.counters.heartbeats_in == 1  # and it answers by itself
    # the timer's heartbeat goes out, then the shell pauses reading past its reply delay
    proto.tick(1.0)
    assert proto.next_deadline() == 2.0
    proto.reading_resumed(5.0)  # the silence was ours
    assert proto.next_deadline() == 6.0
    proto.tick(5.5)
    assert proto.next_event() is None
    assert proto.state is ProtocolState.CONNECTED
    proto.logoff("done")
    proto.reading_resumed(6.0)  # a no-op once closed
    assert proto.next_deadline() is None
    with pytest.raises(LinkClosedError, match="keepalive\\(\\) on a closed link"):
        proto.keepalive()


def test_an_inbox_pushes_back_like_a_mailbox() -> None:
    """A link feeding a bus.inbox() stops reading while the inbox holds more than
    input_backlog notifications, and reads again as the reader takes them: the
    queue stays bounded, nothing is lost or reordered."""
    total, limit = 5_000, 100
    with buses("P", "S") as (p, s):
        service = p.listen(0)
        inbox = s.inbox(Counter, "/bp")
        link = s._start_net().connect(
            "127.0.0.1", service.port, settings=LinkSettings(input_backlog=limit)
        )
        link.wait_logged_on(5)
        feed = p.publisher(Counter, "/bp")
        try:
            wait_for(feed.is_feed_up, "the publisher sees the remote inbox")
            for n in range(total):
                feed.publish(Counter("/bp", n=n, payload=b"x" * 100))
            wait_for(lambda: link.counters.input_pauses >= 1, "the link pauses")
            # paused: what the inbox holds is bounded by one read (64 KiB of frames
            # over 100 bytes each) past the limit
            assert wait_until(lambda: link.counters.messages_in == len(inbox), 5)
            assert len(inbox) <= limit + 65_536 // 100
            got = [inbox.receive(10) for _ in range(total)]
            assert [m.n for m in got if m is not None] == list(range(total))
            assert link.counters.input_pauses >= 1
        finally:
            feed.close()
            inbox.close()
