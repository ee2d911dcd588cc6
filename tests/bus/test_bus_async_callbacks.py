"""``async def`` feed callbacks: awaited on an asyncio dispatcher, one at a time per
actor and in order, for every callback kind; refused on a thread dispatcher when
the feed is placed, with an error naming the callback, the dispatcher and the fix."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    FeedState,
    IncomingRequest,
    Notification,
    Reply,
    Request,
    RequestHandle,
)
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.errors import CallbackError

WAIT = 10.0


class Tick(Notification):
    n: int


class Answer(Reply):
    n: int


class Ask(Request, replies=(Answer,)):
    n: int


@pytest.fixture
def bus() -> Iterator[Bus]:
    config = BusConfig(
        dispatchers=(
            DispatcherConfig(name="default", is_default=True),
            DispatcherConfig(name="loop", kind=DispatcherKind.ASYNCIO),
        )
    )
    with Bus(config) as b:
        yield b


class Recorder(Actor):
    """Records begin/end of each awaited callback; ``want`` ends set ``done``."""

    def __init__(self, name: str, want: int) -> None:
        super().__init__(name)
        self.log: list[tuple[str, Any]] = []
        self.inside = 0
        self.overlaps = 0
        self.want = want
        self.done = threading.Event()

    async def work(self, tag: Any) -> None:
        self.inside += 1
        self.overlaps += self.inside > 1
        self.log.append(("begin", tag))
        await asyncio.sleep(0.002)  # the awaited work; other tasks must wait for it
        await asyncio.sleep(0)
        self.log.append(("end", tag))
        self.inside -= 1
        if sum(1 for e, _ in self.log if e == "end") >= self.want:
            self.done.set()


def _in_order(log: list[tuple[str, Any]]) -> bool:
    """begin a, end a, begin b, end b, ...: never two callbacks interleaved."""
    return all(
        log[i][0] == "begin" and log[i + 1] == ("end", log[i][1]) for i in range(0, len(log), 2)
    )


def _check(actor: Recorder, tags: list[Any]) -> None:
    assert actor.done.wait(WAIT), f"awaited callbacks did not all finish: {actor.log}"
    assert actor.overlaps == 0
    assert _in_order(actor.log), actor.log
    assert [t for e, t in actor.log if e == "begin"][: len(tags)] == tags


def test_async_message_callbacks_are_awaited_in_order(bus: Bus) -> None:
    class Sub(Recorder):
        def startup(self) -> None:
            self.subscribe(Tick, "/t", on_message=self.got)

        async def got(self, msg: Tick, feed: Any) -> None:
            await self.work(msg.n)

    sub = Sub("sub", want=5)
    bus.register(sub, dispatcher="loop")
    bus.startup(sub).wait(WAIT)
    pub = bus.publisher(Tick, "/t")
    for n in range(5):
        pub.publish(Tick("/t", n=n))
    _check(sub, [0, 1, 2, 3, 4])
    pub.close()


def test_async_feed_status_callbacks_are_awaited(bus: Bus) -> None:
    class Sub(Recorder):
        def startup(self) -> None:
            self.subscribe(Tick, "/s", on_message=lambda m, f: None, on_status=self.status)

        async def status(self, state: FeedState, feed: Any) -> None:
            await self.work(state)

    sub = Sub("sub", want=2)
    bus.register(sub, dispatcher="loop")
    bus.startup(sub).wait(WAIT)
    pub = bus.publisher(Tick, "/s")  # declared UP: the subscriber is told UP
    pub.update_feed_state(FeedState.DOWN)  # and then DOWN
    _check(sub, [FeedState.UP, FeedState.DOWN])
    pub.close()


def test_async_publish_status_callbacks_are_awaited(bus: Bus) -> None:
    class Pub(Recorder):
        def startup(self) -> None:
            self.publisher(Tick, "/p", on_status=self.status, up=False)

        async def status(self, state: FeedState, feed: Any) -> None:
            await self.work(state)

    pub = Pub("pub", want=2)
    bus.register(pub, dispatcher="loop")
    bus.startup(pub).wait(WAIT)
    inbox = bus.inbox(Tick, "/p")
    inbox.close()
    _check(pub, [FeedState.UP, FeedState.DOWN])


def test_async_request_and_reply_callbacks_are_awaited(bus: Bus) -> None:
    class Replier(Recorder):
        def startup(self) -> None:
            self.replier(Ask, "/q", on_request=self.answer)

        async def answer(self, incoming: IncomingRequest[Ask]) -> None:
            await self.work(incoming.request.n)
            incoming.reply(Answer("/q", n=incoming.request.n * 10))

    class Requestor(Recorder):
        def startup(self) -> None:
            self.feed = self.requestor(Ask, "/q", on_reply=self.got)

        def go(self) -> None:
            for n in range(3):
                self.feed.request(Ask("/q", n=n), timeout=WAIT)

        async def got(self, remaining: int, reply: Reply, handle: RequestHandle[Ask]) -> None:
            assert isinstance(reply, Answer)
            await self.work(reply.n)

    replier, requestor = Replier("replier", want=3), Requestor("requestor", want=3)
    bus.register(replier, dispatcher="loop")
    bus.register(requestor, dispatcher="loop")
    bus.startup([replier, requestor]).wait(WAIT)
    requestor.post(requestor.go)
    _check(replier, [0, 1, 2])
    _check(requestor, [0, 10, 20])


def test_async_cancel_callbacks_are_awaited(bus: Bus) -> None:
    class Replier(Recorder):
        def startup(self) -> None:
            self.replier(Ask, "/c", on_request=lambda r: None, on_cancel=self.cancelled)

        async def cancelled(self, incoming: IncomingRequest[Ask]) -> None:
            await self.work(incoming.request.n)

    replier = Replier("replier", want=2)
    bus.register(replier, dispatcher="loop")
    bus.startup(replier).wait(WAIT)

    class Requestor(Actor):
        def startup(self) -> None:
            self.feed = self.requestor(Ask, "/c", on_reply=lambda r, rep, h: None)

        def go(self) -> None:
            for n in (1, 2):
                self.feed.request(Ask("/c", n=n)).cancel()

    requestor = Requestor("requestor")
    bus.register(requestor)
    bus.startup(requestor).wait(WAIT)
    requestor.post(requestor.go)
    _check(replier, [1, 2])


def test_async_callback_that_raises_is_a_task_failure(bus: Bus) -> None:
    failures: list[tuple[BaseException, Any]] = []
    seen = threading.Event()

    class Sub(Actor):
        def startup(self) -> None:
            self.subscribe(Tick, "/f", on_message=self.got)

        async def got(self, msg: Tick, feed: Any) -> None:
            await asyncio.sleep(0)
            raise ValueError(f"bad tick {msg.n}")

        def on_failure(self, exc: Exception, task: Any) -> None:
            failures.append((exc, task))
            seen.set()

    sub = Sub("sub")
    bus.register(sub, dispatcher="loop")
    bus.startup(sub).wait(WAIT)
    with bus.publisher(Tick, "/f") as pub:
        pub.publish(Tick("/f", n=7))
        assert seen.wait(WAIT)
    exc, task = failures[0]
    assert isinstance(exc, ValueError) and str(exc) == "bad tick 7"
    assert task.callback.endswith("Sub.got")
    assert str(task.key) == str(pub.key)
    assert task.message == Tick("/f", n=7, timestamp=task.message.timestamp)
    assert bus.runtime.dispatcher("loop").stats().task_failures == 1


# ------------------------------------------------------------- thread dispatchers


class Mixed(Actor):
    async def amessage(self, msg: Tick, feed: Any) -> None: ...

    async def astatus(self, state: FeedState, feed: Any) -> None: ...

    async def arequest(self, incoming: IncomingRequest[Ask]) -> None: ...

    async def areply(self, remaining: int, reply: Reply, handle: Any) -> None: ...


@pytest.mark.parametrize(
    ("kind", "place"),
    [
        ("message", lambda a: a.subscribe(Tick, "/x", on_message=a.amessage)),
        (
            "status",
            lambda a: a.subscribe(Tick, "/x", on_message=lambda m, f: None, on_status=a.astatus),
        ),
        ("status", lambda a: a.publisher(Tick, "/x", on_status=a.astatus, up=False)),
        ("request", lambda a: a.replier(Ask, "/x", on_request=a.arequest)),
        (
            "cancel",
            lambda a: a.replier(Ask, "/x", on_request=lambda r: None, on_cancel=a.arequest),
        ),
        ("reply", lambda a: a.requestor(Ask, "/x", on_reply=a.areply)),
    ],
)
def test_thread_dispatcher_refuses_async_callback_when_placed(
    bus: Bus, kind: str, place: Any
) -> None:
    actor = Mixed("mixed")
    bus.register(actor)  # the default dispatcher: blocking threads
    with pytest.raises(CallbackError) as info:
        place(actor)
    text = str(info.value)
    assert f"the {kind} callback Mixed.a" in text
    assert "dispatcher 'default'" in text and "'blocking'" in text
    assert "asyncio dispatcher" in text and "plain def" in text  # the fix


def test_thread_dispatcher_refuses_async_reply_callback_per_class(bus: Bus) -> None:
    actor = Mixed("mixed")
    bus.register(actor)
    feed = actor.actor_context.open_request_feed(Ask, "/x")
    feed.reply_callback(actor.areply, Answer)
    with pytest.raises(CallbackError, match=r"reply callback Mixed\.areply is async def"):
        feed.subscribe()
    assert not feed.is_placed


def test_non_actor_feed_refuses_async_callback(bus: Bus) -> None:
    async def status(state: FeedState, feed: Any) -> None: ...

    with pytest.raises(CallbackError, match="no actor"):
        bus.publisher(Tick, "/x", on_status=status)
