"""Publisher back-pressure over TCP: past the output queue's high-water mark
the publishers sending to the peer are told (``PublishFeed.congested``,
``on_congestion``), can wait for it to drain (``wait_ready``), and a publisher
that waits never meets the hard limit: nothing dropped, nothing reset."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from nodes.messages import Counter
from nodes.support import buses, wait_for

from actorbus import Actor, Bus, UsageError
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.net import Link, LinkSettings
from actorbus.testing import wait_until


class _Held(Actor):
    """A subscriber that takes nothing until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__(name="held")
        self.gate = threading.Event()
        self.taken = 0
        self.last = -1
        self.in_order = True

    def startup(self) -> None:
        self.subscribe(Counter, "/congest", on_message=self._take)

    def _take(self, message: Counter, feed: object) -> None:
        self.gate.wait(30)
        self.in_order &= message.n == self.last + 1
        self.last = message.n
        self.taken += 1


@contextlib.contextmanager
def _to_held(settings: ConnectionSettings) -> Iterator[tuple[_Held, Link, Bus]]:
    """Bus S with a held subscriber of ``Counter:/congest`` (its link's input
    paused past 100 messages), bus P linked to it with ``settings``: yields the
    subscriber, P's link and P; the gate is opened at the end."""
    with buses("S", "P") as (s, p):
        held = _Held()
        s.register(held)
        s.startup([held]).wait(5)
        service = s.listen(0, settings=ServiceSettings(input_backlog=100))
        link = p.connect("127.0.0.1", service.port, settings=settings)
        link.wait_logged_on(5)
        try:
            yield held, link, p
        finally:
            held.gate.set()


def test_the_high_water_mark_is_checked() -> None:
    assert LinkSettings().high_water == 32 * 1_048_576
    assert LinkSettings(message_queue_bytes=0).high_water == 32 * 1_048_576
    assert LinkSettings(message_queue_bytes=1_000, message_queue_high_water=0).high_water == 0
    with pytest.raises(UsageError, match=r"message_queue_high_water=-2\): expected an int >= -1"):
        LinkSettings(message_queue_high_water=-2)
    with pytest.raises(UsageError, match="over message_queue_bytes=1000: publishers would never"):
        LinkSettings(message_queue_bytes=1_000, message_queue_high_water=2_000)


def test_a_publisher_that_waits_is_never_reset() -> None:
    # (the margin between the high-water mark and the limit, 8 MB, holds what
    # the publisher makes before the I/O thread next measures the queue)
    total = 150_000
    payload = b"x" * 200
    with _to_held(ConnectionSettings(message_queue_bytes=16_000_000)) as (held, link, p):
        told: list[bool] = []
        congested = threading.Event()

        def on_congestion(state: bool, feed: object) -> None:
            told.append(state)
            if state:
                congested.set()

        feed = p.publisher(Counter, "/congest", on_congestion=on_congestion)
        waits = 0
        try:
            wait_for(feed.is_feed_up, "the publisher sees the held subscriber")
            for n in range(total):
                if feed.congested:
                    waits += 1
                    if n == 0 or not held.gate.is_set():
                        assert congested.wait(5)
                        held.gate.set()  # the subscriber wakes up while we wait
                    assert feed.wait_ready(30), "the link drained"
                assert feed.publish(Counter("/congest", n=n, payload=payload)) == 1
            assert wait_until(lambda: held.taken == total, 30), held.taken
        finally:
            held.gate.set()
            feed.close()
        counters = link.counters
        assert waits >= 1 and counters.congestions >= 1
        assert told[:2] == [True, False]
        assert (counters.dropped, counters.over_limit, counters.connections) == (0, 0, 1)
        assert held.in_order


def test_a_publisher_that_waits_is_never_reset_by_the_count_limit() -> None:
    # With message_queue_size set the count limit is reached long before the
    # byte mark (100,000 messages of 200 bytes, 22 MB): the publisher is told
    # at half of it, so one that waits while congested is never reset.  (The
    # margin, 50,000 messages, holds what the publisher makes before the I/O
    # thread next measures the queue, on a loaded host too.)
    assert LinkSettings(message_queue_size=2_000).high_water_messages == 1_000
    assert LinkSettings().high_water_messages == 0
    assert LinkSettings(message_queue_size=10, message_queue_high_water=0).high_water_messages == 0
    total = 300_000  # (more than the count limit and the sockets' buffers take)
    payload = b"x" * 200
    with _to_held(ConnectionSettings(message_queue_size=100_000)) as (held, link, p):
        told: list[bool] = []
        feed = p.publisher(Counter, "/congest", on_congestion=lambda state, f: told.append(state))
        waits = 0
        try:
            wait_for(feed.is_feed_up, "the publisher sees the held subscriber")
            for n in range(total):
                if feed.congested:
                    waits += 1
                    held.gate.set()  # the subscriber wakes up while we wait
                    assert feed.wait_ready(30), "the link drained"
                assert feed.publish(Counter("/congest", n=n, payload=payload)) == 1
            assert wait_until(lambda: held.taken == total, 30), held.taken
        finally:
            held.gate.set()
            feed.close()
        counters = link.counters
        assert waits >= 1 and counters.congestions >= 1, (waits, counters)
        assert told[:2] == [True, False]
        assert (counters.dropped, counters.over_limit, counters.connections) == (0, 0, 1)
        assert held.in_order


def test_the_message_count_limit_tells_the_publisher_first() -> None:
    # A publisher that ignores congestion outruns a held subscriber until the
    # count limit (2,000 messages of 200 bytes, far below the byte mark) resets
    # the link, again after each reconnect: every reset was preceded by the
    # congestion signal on the same connection (on main: none, 0 of N).
    payload = b"x" * 200
    settings = ConnectionSettings(message_queue_size=2_000, reconnect=True, reconnect_delay=0.05)
    with _to_held(settings) as (held, link, p):
        told: list[bool] = []
        feed = p.publisher(Counter, "/congest", on_congestion=lambda state, f: told.append(state))
        try:
            wait_for(feed.is_feed_up, "the publisher sees the held subscriber")
            n = 0
            deadline = time.monotonic() + 30
            while link.counters.over_limit < 3 and time.monotonic() < deadline:
                n += 1
                feed.publish(Counter("/congest", n=n, payload=payload))
            counters = link.counters
            assert counters.over_limit >= 3, counters
            assert counters.congestions >= counters.over_limit, counters
            assert wait_until(lambda: True in told, 10), told
            assert told[0] is True
        finally:
            held.gate.set()
            feed.close()
