"""Request/reply, through a real Bus and real actors."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    FeedState,
    IncomingRequest,
    Reply,
    ReplyStatus,
    Request,
    RequestError,
)
from actorbus.config import DispatcherConfig
from actorbus.testing import Recorder, wait_until

UP, DOWN = FeedState.UP, FeedState.DOWN


class Quote(Reply):
    price: float


class Other(Reply):
    note: str


class GetQuote(Request, replies=(Quote,)):
    symbol: str


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(
        BusConfig(dispatchers=(DispatcherConfig(name="default", thread_count=2, is_default=True),))
    )
    yield b
    b.close()


def started(bus: Bus, *actors: Recorder) -> None:
    for a in actors:
        bus.register(a)
    bus.startup(list(actors)).wait(5)


def quote(
    incoming: IncomingRequest[GetQuote],
    status: ReplyStatus = ReplyStatus.OK_FINAL,
    price: float = 1.0,
) -> Quote:
    return Quote(incoming.request.subject, status=status, price=price)


def test_request_with_no_replier_fails_at_once(bus: Bus) -> None:
    req = Recorder("req")
    started(bus, req)
    f = req.requestor(GetQuote, "/q")
    with pytest.raises(RequestError, match="no replier is up"):
        f.request(GetQuote("/q", symbol="X"))


def test_requestor_up_only_when_replier_advertised_and_up(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    f = req.requestor(GetQuote, "/q")
    r = rep.replier(GetQuote, "/q", up=False)
    r.update_feed_state(UP)
    req.log.wait_count("feed_status", 1)
    r.update_feed_state(DOWN)
    req.log.wait_count("feed_status", 2)
    assert req.states() == [UP, DOWN]
    with pytest.raises(RequestError):
        f.request(GetQuote("/q", symbol="X"))


def test_continuing_then_final_and_remaining_counts(bus: Bus) -> None:
    req, r1, r2 = Recorder("req"), Recorder("r1"), Recorder("r2")
    started(bus, req, r1, r2)
    r1.auto_reply = lambda inc: quote(inc)
    r2.auto_reply = None
    r1.replier(GetQuote, "/q")
    r2.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    req.log.wait_count("feed_status", 1)
    h = f.request(GetQuote("/q", symbol="X"))
    r2.log.wait_count("request", 1)
    incoming = r2.log.of("request")[0][1]
    assert incoming.reply(quote(incoming, ReplyStatus.OK_CONTINUING))
    assert incoming.reply(Reply("/q", status=ReplyStatus.ERROR, reason="no more"))
    replies = req.log.wait_count("reply", 3)
    remaining = sorted((e[1] for e in replies if e[0] == "reply"), reverse=True)
    assert remaining[-1] == 0
    assert h.is_done and h.remaining == 0
    with pytest.raises(RequestError, match="already sent its final reply"):
        incoming.reply(quote(incoming))


def test_reply_class_not_allowed_raises_at_replier(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    f.request(GetQuote("/q", symbol="X"))
    rep.log.wait_count("request", 1)
    incoming = rep.log.of("request")[0][1]
    with pytest.raises(
        RequestError, match=r"Other may not answer GetQuote; allowed: \['Quote', 'Reply'\]"
    ):
        incoming.reply(Other("/q", note="x"))


def test_cancel_tells_repliers_and_refuses_later_replies(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    h = f.request(GetQuote("/q", symbol="X"))
    rep.log.wait_count("request", 1)
    incoming = rep.log.of("request")[0][1]
    h.cancel()
    rep.log.wait_count("cancel", 1)
    assert incoming.reply(quote(incoming)) is False
    h.cancel()  # harmless
    assert h.is_done and h.is_cancelled


def test_replier_close_with_outstanding_sends_error(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    r = rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    f.request(GetQuote("/q", symbol="X"))
    rep.log.wait_count("request", 1)
    r.close()
    events = req.log.wait_count("reply", 1)
    reply = [e for e in events if e[0] == "reply"][0]
    assert reply[1] == 0 and reply[2].status is ReplyStatus.ERROR
    assert "retracted" in (reply[2].reason or "")


def test_reply_condition_counts_exactly(bus: Bus) -> None:
    req, r1, r2 = Recorder("req"), Recorder("r1"), Recorder("r2")
    started(bus, req, r1, r2)
    r1.auto_reply = r2.auto_reply = lambda inc: quote(inc)
    r1.replier(GetQuote, "/q", condition=lambda m: m.symbol == "A")
    r2.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    h = f.request(GetQuote("/q", symbol="B"))
    assert h.remaining in (0, 1)
    req.log.wait_count("reply", 1)
    assert r1.log.of("request") == []


def test_request_timeout_ends_with_error_reply(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    h = f.request(GetQuote("/q", symbol="X"), timeout=0.05)
    events = req.log.wait_count("reply", 1)
    reply = [e for e in events if e[0] == "reply"][0]
    assert reply[1] == 0 and reply[2].status is ReplyStatus.ERROR
    assert reply[2].reason.startswith("timed out after 0.05")
    rep.log.wait_count("cancel", 1)
    assert h.is_done


def test_request_all_and_async_helpers(bus: Bus) -> None:
    r1, r2 = Recorder("r1"), Recorder("r2")
    started(bus, r1, r2)
    r1.auto_reply = lambda inc: quote(inc, price=1.0)
    r2.auto_reply = lambda inc: quote(inc, price=2.0)
    r1.replier(GetQuote, "/q")
    r2.replier(GetQuote, "/q")
    replies = bus.request_all(GetQuote("/q", symbol="X"), timeout=5)
    assert sorted(r.price for r in replies) == [1.0, 2.0]  # type: ignore[attr-defined]

    async def go() -> tuple[list[Reply], list[Reply]]:
        a = await bus.arequest(GetQuote("/q", symbol="Y"), timeout=5)
        b = [r async for r in bus.areplies(GetQuote("/q", symbol="Z"), timeout=5)]
        return a, b

    a, b = asyncio.run(go())
    assert len(a) == 2 and len(b) == 2


def test_request_off_dispatcher_answered_before_request_returns(bus: Bus) -> None:
    """The reply callback gets the handle object request() returns, even when the
    reply is delivered before request() returned on the calling thread."""
    rep = Recorder("rep")
    started(bus, rep)
    rep.auto_reply = lambda inc: quote(inc)
    rep.replier(GetQuote, "/q")
    got: list[object] = []
    done = threading.Event()
    from actorbus import MessageKey, RequestFeed, Scope
    from actorbus.bus.feeds import _direct

    feed: RequestFeed[GetQuote] = RequestFeed(
        bus.router, None, MessageKey(GetQuote, "/q"), Scope.LOCAL_ONLY, post=_direct
    )
    feed.reply_callback(lambda remaining, reply, handle: (got.append(handle), done.set()))
    feed.subscribe()
    h = feed.request(GetQuote("/q", symbol="X"))
    assert done.wait(5)
    assert got == [h]
    feed.close()


def test_finished_requests_leave_no_bookkeeping_and_no_timer_each(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.auto_reply = lambda inc: quote(inc, price=3.0)
    replier = rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    handles = [f.request(GetQuote("/q", symbol=str(i)), timeout=30.0) for i in range(20)]
    events = req.log.wait_count("reply", 20)
    replies = [e for e in events if e[0] == "reply"]
    assert [r[1] for r in replies] == [0] * 20
    assert all(r[2].price == 3.0 for r in replies)
    assert all(h.is_done and not h.is_cancelled and h.remaining == 0 for h in handles)
    assert bus.router.outstanding_requests == 0
    assert replier.outstanding == 0
    # one timer for all the requests' timeouts, not one each
    assert len(bus.runtime.timers) == 1


def test_timeouts_of_finished_requests_are_dropped_as_requests_go_on(bus: Bus) -> None:
    """Sequential requests with a long timeout: the deadlines kept follow the
    requests outstanding (finished ones are dropped on the next request), and no
    finished request ever times out."""
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.auto_reply = lambda inc: quote(inc)
    rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    timeouts = bus.router._timeouts
    assert timeouts is not None
    sizes = []
    for i in range(500):
        f.request(GetQuote("/q", symbol=str(i)), timeout=60.0)
        req.log.wait_count("reply", i + 1)
        sizes.append(len(timeouts))
    assert max(sizes) <= 3, sizes
    assert len(bus.runtime.timers) == 1
    assert timeouts.fired == 0


def test_mixed_timeouts_keep_their_deadlines_and_the_heap_bounded(bus: Bus) -> None:
    """Requests with different timeouts: an unanswered short one times out on time
    while long-timeout ones finish around it, an earlier deadline re-arms the one
    timer, and entries of finished requests under a live one are rebuilt away."""
    from actorbus.bus import _timeouts

    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.auto_reply = lambda inc: None if inc.request.symbol.startswith("silent") else quote(inc)
    rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    timeouts = bus.router._timeouts
    assert timeouts is not None
    # the earliest deadline: the finished ones pile up under it until a rebuild
    late = f.request(GetQuote("/q", symbol="silent-late"), timeout=20.0)
    n = 4 * _timeouts._SLACK
    for i in range(n):
        f.request(GetQuote("/q", symbol=str(i)), timeout=30.0 + (i % 7))
    req.log.wait_count("reply", n)
    # (a reply is delivered just before its request is forgotten)
    wait_until(lambda: bus.router.outstanding_requests == 1, 5)
    early = f.request(GetQuote("/q", symbol="silent-early"), timeout=0.05)
    # finished ones under the live top are rebuilt away (at the latest on this
    # request) down to the bound: without it all n + 2 would still be there
    assert len(timeouts) <= 4 * bus.router.outstanding_requests + _timeouts._SLACK
    events = req.log.wait_count("reply", n + 1)
    errors = [e for e in events if e[0] == "reply" and e[2].status is ReplyStatus.ERROR]
    assert [e[2].reason for e in errors] == ["timed out after 0.05 s"]
    assert early.is_done and not late.is_done
    assert bus.router.outstanding_requests == 1
    late.cancel()


def test_a_finished_request_is_freed_by_reference_counting(bus: Bus) -> None:
    """A request with a timeout leaves no reference cycle once finished: the
    requestor's handle, its timer and the bound ``_time_out`` are freed at once, not
    left to the cyclic GC (which ran a gen-0 collection every ~150 requests)."""
    done = threading.Semaphore(0)
    up = threading.Event()

    class Quoter(Actor):  # keeps nothing (a Recorder logs every request)
        def startup(self) -> None:
            self.replier(GetQuote, "/q", on_request=lambda inc: inc.reply(quote(inc)))

    class Asker(Actor):
        def startup(self) -> None:
            self.feed = self.requestor(
                GetQuote,
                "/q",
                on_reply=lambda remaining, reply, handle: done.release(),
                on_status=lambda state, feed: up.set() if state is FeedState.UP else None,
            )

    rep, req = Quoter(name="quoter"), Asker(name="asker")
    bus.register(rep)
    bus.register(req)
    bus.startup([rep, req]).wait(5)
    assert up.wait(5)
    feed = req.feed
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        # enough for the timer queue to compact its cancelled entries (which hold
        # the timers) several times
        for i in range(300):
            feed.request(GetQuote("/q", symbol=str(i)), timeout=30.0)  # handle dropped
            assert done.acquire(timeout=5)
        assert wait_until(lambda: bus.router.outstanding_requests == 0, 5)
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not kinds & {"RequestHandle", "IncomingRequest", "TimerHandle"}, kinds


def test_request_timeout_reason_names_the_timeout(bus: Bus) -> None:
    req, rep = Recorder("req"), Recorder("rep")
    started(bus, req, rep)
    rep.replier(GetQuote, "/q")
    f = req.requestor(GetQuote, "/q")
    f.request(GetQuote("/q", symbol="X"), timeout=0.02)
    reply = [e for e in req.log.wait_count("reply", 1) if e[0] == "reply"][0]
    assert reply[2].reason == "timed out after 0.02 s"
    assert bus.router.outstanding_requests == 0
