"""Streams on actors: a subscription as a source, futures an actor awaits or
is called back on, ``async for``, back-pressure reaching a local publisher,
and ``to_publisher`` with feed state on both ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    FeedState,
    Notification,
    PublishFeed,
    UsageError,
    Wildcard,
    current_actor,
)
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.streams import PushStream, StreamFuture, subscribe, watch_pressure
from actorbus.testing import wait_until

WAIT = 10.0


class Point(Notification, type_name="tests.streams.Point"):
    value: int


class Mean(Notification, type_name="tests.streams.Mean"):
    mean: float


@pytest.fixture
def bus() -> Iterator[Bus]:
    config = BusConfig(
        dispatchers=(
            DispatcherConfig(name="default", kind=DispatcherKind.BLOCKING),
            DispatcherConfig(name="loop", kind=DispatcherKind.ASYNCIO),
        )
    )
    b = Bus(config, node_id="streams")
    yield b
    b.close()


class Plain(Actor):
    pass


def _started(bus: Bus, actor: Actor, dispatcher: str | None = None) -> Actor:
    bus.register(actor, dispatcher=dispatcher)
    bus.startup([actor]).wait(WAIT)
    return actor


def _publish(bus: Bus, subject: str, values: list[int]) -> PublishFeed[Point]:
    feed = bus.publisher(Point, subject)
    assert wait_until(feed.is_feed_up, WAIT)
    for v in values:
        feed.publish(Point(subject, 0, value=v))
    return feed


def test_a_subscription_stream_runs_on_its_actor_and_calls_back_another(bus: Bus) -> None:
    streamer = _started(bus, Plain("streamer"))
    other = _started(bus, Plain("other"))
    threads: set[str] = set()

    def seen(p: Point) -> int:
        threads.add(threading.current_thread().name)
        assert current_actor() is streamer
        return p.value

    future = subscribe(streamer, Point, "/p").map(seen).limit(5).collect()
    called: list[Any] = []
    done = threading.Event()

    def back(f: StreamFuture[list[int]]) -> None:
        called.append((current_actor(), f.result()))
        done.set()

    future.add_done_callback(back, actor=other)
    _publish(bus, "/p", list(range(10)))
    assert future.result(WAIT) == [0, 1, 2, 3, 4]
    assert done.wait(WAIT) and called == [(other, [0, 1, 2, 3, 4])]
    assert len(threads) == 1


def test_a_wildcard_subscription_stream(bus: Bus) -> None:
    streamer = _started(bus, Plain("streamer"))
    future = (
        subscribe(streamer, Point, Wildcard.levels("/w/*"))
        .map(lambda p: (p.subject, p.value))
        .limit(2)
        .collect()
    )
    f1 = bus.publisher(Point, "/w/a")
    f2 = bus.publisher(Point, "/w/b")
    assert wait_until(lambda: f1.is_feed_up() and f2.is_feed_up(), WAIT)
    f1.publish(Point("/w/a", 0, value=1))
    f2.publish(Point("/w/b", 0, value=2))
    assert sorted(future.result(WAIT)) == [("/w/a", 1), ("/w/b", 2)]


def test_result_on_the_streams_own_thread_is_refused(bus: Bus) -> None:
    streamer = _started(bus, Plain("streamer"))
    future = PushStream.of(range(3), on=streamer).collect()
    errors: list[BaseException] = []
    done = threading.Event()

    def inside() -> None:
        try:
            future.result(1)
        except UsageError as exc:
            errors.append(exc)
        done.set()

    streamer.post(inside)
    assert done.wait(WAIT)
    assert errors and "wait for itself forever" in str(errors[0])
    assert future.result(WAIT) == [0, 1, 2]


class AsyncReader(Actor):
    """Iterates a stream run by ``feeder``, an actor on the same asyncio
    dispatcher (one thread): its own mailbox waits while it awaits."""

    def __init__(self, feeder: Actor) -> None:
        super().__init__("async-reader")
        self.feeder = feeder
        self.got: list[int] = []
        self.total: int | None = None
        self.done = threading.Event()

    async def read(self) -> None:
        try:
            async for _ in subscribe(self, Point, "/a"):
                pass
        except UsageError as exc:
            self.refused = str(exc)
        async for p in subscribe(self.feeder, Point, "/a").limit(4):
            self.got.append(p.value)
        self.total = await PushStream.of(self.got).reduce(lambda a, b: a + b)
        self.done.set()


def test_async_for_and_await_in_an_asyncio_actor(bus: Bus) -> None:
    feeder = _started(bus, Plain("feeder"), dispatcher="loop")
    reader = AsyncReader(feeder)
    _started(bus, reader, dispatcher="loop")
    reader.post(reader.read)
    feed = bus.publisher(Point, "/a")
    assert wait_until(feed.is_feed_up, WAIT)
    for v in range(10):
        feed.publish(Point("/a", 0, value=v))
    assert reader.done.wait(WAIT)
    assert reader.got == [0, 1, 2, 3] and reader.total == 6
    assert "runs on the iterating actor itself" in reader.refused


class PacedPublisher(Actor):
    """Publishes 1..n as fast as the pressure it is told allows."""

    def __init__(self, n: int) -> None:
        super().__init__("paced")
        self.n = n
        self.sent = 0
        self.told: list[int] = []
        self.feed: PublishFeed[Point] | None = None

    def startup(self) -> None:
        self.feed = self.publisher(Point, "/paced", up=True)
        self.watch = watch_pressure(self, self.feed, lambda ms, _: self.told.append(ms))

    def on_publish_status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.post(self.tick)

    def tick(self) -> None:
        assert self.feed is not None
        while self.sent < self.n:
            wait = self.watch.wait_s()
            if wait > 0:
                self.schedule(wait, self.tick)
                return
            self.sent += 1
            self.feed.publish(Point("/paced", 0, value=self.sent))
            self.watch.sent()
            if self.sent % 10 == 0:  # let the Pressure task in
                self.post(self.tick)
                return


def test_back_pressure_reaches_a_local_publisher_actor(bus: Bus) -> None:
    streamer = _started(bus, Plain("streamer"))
    got: list[int] = []
    future = subscribe(streamer, Point, "/paced").for_each(
        lambda p: got.append(p.value) or (-1 if p.value == 60 else 20)
    )
    pub = PacedPublisher(60)
    _started(bus, pub)
    assert future.result(WAIT) is None
    assert got == list(range(1, 61))
    assert pub.told and set(pub.told) == {20}
    assert pub.watch.received == len(pub.told)


class Averager(Actor):
    """subscribe -> window -> coalesce -> to_publisher, five lines."""

    def startup(self) -> None:
        out = self.publisher(Mean, "/mean", up=True, on_status=lambda s, f: None)
        self.done = (
            subscribe(self, Point, "/in")
            .window(60.0, lambda ps: [p.value for p in ps], max_count=2)
            .coalesce(2, lambda pairs: sum(map(sum, pairs)) / 4)
            .limit(2)
            .to_publisher(out, make=lambda m: Mean("/mean", 0, mean=m))
        )


def test_to_publisher_is_subscribe_ops_publish_with_feed_state_on_both_ends(bus: Bus) -> None:
    means: list[float] = []
    states: list[FeedState] = []
    listener = _started(bus, Plain("listener"))
    listener.subscribe(
        Mean,
        "/mean",
        on_message=lambda m, _: means.append(m.mean),
        on_status=lambda s, _: states.append(s),
    )
    averager = Averager("averager")
    _started(bus, averager)
    _publish(bus, "/in", list(range(8)))
    assert averager.done.result(WAIT) == 2
    assert wait_until(lambda: len(means) == 2 and states[-1:] == [FeedState.DOWN], WAIT)
    assert means == [1.5, 5.5]
    assert FeedState.UP in states
