"""A stream over a real TCP link (two buses, loopback): a wildcard stream of
remote keys, the pace reaching each remote publisher, and the end of a stream
reaching the publisher as feed state (it unsubscribed)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actorbus import Actor, Bus, FeedState, Notification, PublishFeed, Wildcard
from actorbus.streams import EventSource, PushStream, subscribe, watch_pressure
from actorbus.testing import wait_until

WAIT = 10.0


class Quote(Notification, type_name="tests.streams.Quote"):
    n: int


@pytest.fixture
def linked() -> Iterator[tuple[Bus, Bus]]:
    a, b = Bus(node_id="A"), Bus(node_id="B")
    try:
        service = a.listen(0)
        b.connect("127.0.0.1", service.port)
        yield a, b
    finally:
        b.close()
        a.close()


class Quoter(Actor):
    """Publishes on ``subject`` at the pace it is told, while UP."""

    def __init__(self, subject: str) -> None:
        super().__init__(f"quoter{subject.replace('/', '-')}")
        self.subject = subject
        self.told: list[int] = []
        self.states: list[FeedState] = []
        self.sent = 0

    def startup(self) -> None:
        self.feed: PublishFeed[Quote] = self.publisher(
            Quote, self.subject, up=True, on_status=self.status
        )
        self.watch = watch_pressure(self, self.feed, lambda ms, _: self.told.append(ms))

    def status(self, state: FeedState, _: Any) -> None:
        self.states.append(state)
        if state is FeedState.UP:
            self.post(self.tick)

    def tick(self) -> None:
        if not self.feed.is_feed_up():
            return
        wait = self.watch.wait_s()
        if wait > 0:
            self.schedule(wait, self.tick)
            return
        self.sent += 1
        self.feed.publish(Quote(self.subject, 0, n=self.sent))
        self.watch.sent()
        self.schedule(0.001, self.tick)


class Plain(Actor):
    pass


def test_a_wildcard_stream_paces_each_remote_publisher_and_ends_their_feeds(
    linked: tuple[Bus, Bus],
) -> None:
    a, b = linked
    quoters = [Quoter("/w/x"), Quoter("/w/y")]
    for q in quoters:
        a.register(q)
    a.startup(quoters).wait(WAIT)
    streamer = Plain("streamer")
    b.register(streamer)
    b.startup([streamer]).wait(WAIT)
    seen: dict[str, int] = {}

    def consume(q: Quote) -> int:
        seen[q.subject] = seen.get(q.subject, 0) + 1
        return 30  # 30 ms per event, asked of the publisher

    done = subscribe(streamer, Quote, Wildcard.levels("/w/*")).limit(60).for_each(consume)
    assert done.result(WAIT) is None
    assert set(seen) == {"/w/x", "/w/y"}
    # each remote publisher was told the pace, on its own subject
    assert wait_until(lambda: all(q.told for q in quoters), WAIT)
    assert all(set(q.told) == {30} for q in quoters)
    # the stream ended: it unsubscribed, and the publishers' feeds went DOWN
    assert wait_until(lambda: all(q.states[-1:] == [FeedState.DOWN] for q in quoters), WAIT)
    # paced at 30 ms, not the 1 ms they tick at: far fewer than free-running
    assert sum(q.sent for q in quoters) < 400


def test_an_event_source_from_another_thread() -> None:
    with Bus() as bus:
        runner = Plain("runner")
        bus.register(runner)
        bus.startup([runner]).wait(WAIT)
        source = EventSource(capacity=4)
        source.publish(-1)  # waits for the stream to start
        stream = PushStream.from_source(source, on=runner)
        got = stream.map(lambda x: x * 10).collect()
        worker = threading.Thread(target=lambda: [source.publish(i) for i in range(3)])
        worker.start()
        worker.join()
        source.error(KeyError("feed gone"))
        with pytest.raises(KeyError, match="feed gone"):
            got.result(WAIT)
        with pytest.raises(Exception, match="nothing may follow"):
            source.publish(9)
        full = EventSource(capacity=1)
        full.publish(1)
        with pytest.raises(Exception, match="1 events wait for a stream to start"):
            full.publish(2)
