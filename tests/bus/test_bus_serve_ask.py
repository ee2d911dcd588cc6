"""Request/reply in one line: ``serve`` (the handler's return value is the reply,
a generator streams, an exception answers ERROR) and, in async actors,
``await self.ask(...)`` and ``async for reply in self.ask_all(...)``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    Reply,
    ReplyStatus,
    Request,
    RequestError,
    RequestTimeoutError,
    UsageError,
)
from actorbus.actors import FailedTask
from actorbus.bus.message import MessageKey
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.errors import CallbackError

WAIT = 10.0


class Quote(Reply):
    price: float


class GetQuote(Request, replies=(Quote,)):
    symbol: str


class Count(Request, replies=(Quote,)):
    upto: int


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


class Quotes(Actor):
    """Every handler style, on whatever dispatcher it is registered to."""

    def __init__(self, name: str = "quotes") -> None:
        super().__init__(name)
        self.failures: list[Exception] = []

    def startup(self) -> None:
        self.serve(GetQuote, "/quotes", self.quote)
        self.serve(Count, "/count", self.count)

    def quote(self, request: GetQuote) -> Quote:
        if request.symbol == "NONE":
            return None  # type: ignore[return-value]  (the mistake under test)
        if request.symbol not in {"ACME", "INIT"}:
            raise KeyError(f"unknown symbol {request.symbol}")
        return Quote(request.subject, price=12.5)

    def count(self, request: Count) -> Iterator[Quote]:
        for i in range(request.upto):
            yield Quote(request.subject, price=float(i))

    def on_failure(self, exc: Exception, task: FailedTask) -> None:
        self.failures.append(exc)


def _start(bus: Bus, *actors: Actor, dispatcher: str | None = None) -> None:
    for a in actors:
        bus.register(a, dispatcher=dispatcher)
    bus.startup(list(actors)).wait(WAIT)


def test_serve_returns_the_final_reply(bus: Bus) -> None:
    _start(bus, Quotes())
    replies = bus.request_all(GetQuote("/quotes", symbol="ACME"), timeout=WAIT)
    assert len(replies) == 1
    assert isinstance(replies[0], Quote)
    assert replies[0].price == 12.5 and replies[0].status is ReplyStatus.OK_FINAL


def _drained(actor: Actor) -> None:
    done = threading.Event()
    actor.post(done.set)
    assert done.wait(WAIT)


def test_serve_reports_a_handler_exception_and_sends_only_its_class(bus: Bus) -> None:
    q = Quotes()
    _start(bus, q)
    replies = bus.request_all(GetQuote("/quotes", symbol="XYZ"), timeout=WAIT)
    assert [r.status for r in replies] == [ReplyStatus.ERROR]
    reason = replies[0].reason
    assert reason is not None and "KeyError" in reason
    assert "unknown symbol" not in reason  # the text stays on the replier's node
    # reported by the failure contract, as any request callback's failure
    _drained(q)
    assert [type(e) for e in q.failures] == [KeyError]


def test_serve_logs_a_handler_failure_with_the_actor_and_key(
    bus: Bus, log_lines: list[str]
) -> None:
    class Plain(Actor):  # the default on_failure: the report
        def startup(self) -> None:
            self.serve(GetQuote, "/plain", self.quote)

        def quote(self, request: GetQuote) -> Quote:
            raise ValueError(f"no price for {request.symbol}")

    p = Plain("plain")
    _start(bus, p)
    (reply,) = bus.request_all(GetQuote("/plain", symbol="XYZ"), timeout=WAIT)
    assert reply.status is ReplyStatus.ERROR and "no price" not in (reply.reason or "")
    _drained(p)
    (line,) = [m for m in log_lines if "raised ValueError" in m]
    assert "Plain.quote" in line and "'plain'" in line and '"/plain"' in line
    assert "no price for XYZ" in line


def test_serve_error_detail_message_sends_the_exceptions_text(bus: Bus) -> None:
    class Open(Quotes):
        def startup(self) -> None:
            self.serve(GetQuote, "/quotes", self.quote, error_detail="message")
            self.serve(Count, "/count", self.broken_count, error_detail="message")

        def broken_count(self, request: Count) -> Iterator[Quote]:
            yield Quote(request.subject, price=0.0)
            raise RuntimeError("stream broke")

    q = Open("open")
    _start(bus, q)
    (reply,) = bus.request_all(GetQuote("/quotes", symbol="XYZ"), timeout=WAIT)
    assert reply.reason == "KeyError: 'unknown symbol XYZ'"
    first, last = bus.request_all(Count("/count", upto=1), timeout=WAIT)
    assert first.status is ReplyStatus.OK_CONTINUING
    assert last.status is ReplyStatus.ERROR and last.reason == "RuntimeError: stream broke"
    _drained(q)
    assert [type(e) for e in q.failures] == [KeyError, RuntimeError]  # reported all the same


def test_serve_refuses_an_unknown_error_detail(bus: Bus) -> None:
    q = Quotes("q")
    bus.register(q)
    with pytest.raises(UsageError, match=r"error_detail='text'.*'class'.*'message'"):
        q.serve(GetQuote, "/quotes", q.quote, error_detail="text")  # type: ignore[arg-type]


def test_serve_reports_a_handler_that_returns_none(bus: Bus) -> None:
    q = Quotes()
    _start(bus, q)
    replies = bus.request_all(GetQuote("/quotes", symbol="NONE"), timeout=WAIT)
    assert [r.status for r in replies] == [ReplyStatus.ERROR]
    # the failure is reported on the replier's side, naming the handler
    done = threading.Event()
    q.post(done.set)
    assert done.wait(WAIT)
    assert len(q.failures) == 1
    assert "Quotes.quote returned None" in str(q.failures[0])


def test_serve_streams_a_generator(bus: Bus) -> None:
    _start(bus, Quotes())
    replies = bus.request_all(Count("/count", upto=3), timeout=WAIT)
    assert [(type(r), r.status) for r in replies] == [
        (Quote, ReplyStatus.OK_CONTINUING),
        (Quote, ReplyStatus.OK_CONTINUING),
        (Quote, ReplyStatus.OK_CONTINUING),
        (Reply, ReplyStatus.OK_FINAL),  # the end of the stream
    ]
    assert [r.price for r in replies[:3]] == [0.0, 1.0, 2.0]


def test_serve_refuses_an_async_handler_on_a_thread_dispatcher(bus: Bus) -> None:
    class Async(Actor):
        async def handle(self, request: GetQuote) -> Quote:
            return Quote(request.subject, price=1.0)

    a = Async("async")
    bus.register(a)
    with pytest.raises(CallbackError, match=r"Async\.handle is async def.*dispatcher 'default'"):
        a.serve(GetQuote, "/quotes", a.handle)


class Asker(Actor):
    """Asks from async def code on the asyncio dispatcher; results go to ``out``."""

    def __init__(self, name: str, job: Any) -> None:
        super().__init__(name)
        self.job = job
        self.out: list[Any] = []
        self.done = threading.Event()

    async def startup(self) -> None:
        self.post(self.run)

    async def run(self) -> None:
        try:
            self.out.append(await self.job(self))
        except Exception as exc:
            self.out.append(exc)
        self.done.set()


def _ask(bus: Bus, job: Any) -> Any:
    asker = Asker("asker", job)
    _start(bus, asker, dispatcher="loop")
    assert asker.done.wait(WAIT)
    return asker.out[0]


def test_ask_returns_the_answer(bus: Bus) -> None:
    _start(bus, Quotes())

    async def job(self: Actor) -> Reply:
        return await self.ask(GetQuote("/quotes", symbol="ACME"), timeout=WAIT)

    reply = _ask(bus, job)
    assert isinstance(reply, Quote) and reply.price == 12.5


def test_ask_raises_the_repliers_error(bus: Bus) -> None:
    _start(bus, Quotes())

    async def job(self: Actor) -> Reply:
        return await self.ask(GetQuote("/quotes", symbol="XYZ"), timeout=WAIT)

    err = _ask(bus, job)
    assert isinstance(err, RequestError)
    assert "KeyError" in str(err) and "unknown symbol" not in str(err)


class LateQuotes(Actor):
    """Serves GetQuote on ``/late`` once ``gate`` is set: its startup blocks its
    dispatcher's thread until then, as a slow startup on another dispatcher would."""

    def __init__(self, bus: Bus, gate: threading.Event) -> None:
        super().__init__("late")
        self.bus, self.gate = bus, gate
        self.requestors_before_up = -1

    def startup(self) -> None:
        assert self.gate.wait(WAIT)
        self.requestors_before_up = self.bus.router.feeds(MessageKey(GetQuote, "/late"))[
            "requestors"
        ]
        self.serve(GetQuote, "/late", lambda request: Quote(request.subject, price=7.0))


@pytest.mark.parametrize("form", ["ask", "ask_all"])
def test_ask_waits_within_its_timeout_for_a_replier_to_come_up(bus: Bus, form: str) -> None:
    gate, asking = threading.Event(), threading.Event()
    late = LateQuotes(bus, gate)
    bus.register(late)
    started = bus.startup([late])  # blocked on the gate: its replier is not up yet

    async def job(self: Actor) -> list[Reply]:
        asking.set()
        if form == "ask":
            return [await self.ask(GetQuote("/late", symbol="ACME"), timeout=WAIT)]
        return [r async for r in self.ask_all(GetQuote("/late", symbol="ACME"), timeout=WAIT)]

    asker = Asker("asker", job)
    _start(bus, asker, dispatcher="loop")
    assert asking.wait(WAIT)
    gate.set()  # the replier comes UP after the ask started
    started.wait(WAIT)
    assert asker.done.wait(WAIT)
    assert late.requestors_before_up == 1  # the ask was waiting when the replier came up
    (reply,) = asker.out[0]
    assert isinstance(reply, Quote) and reply.price == 7.0


@pytest.mark.parametrize("form", ["ask", "ask_all"])
def test_ask_with_no_replier_fails_when_its_timeout_ends(bus: Bus, form: str) -> None:
    async def job(self: Actor) -> Any:
        if form == "ask":
            return await self.ask(GetQuote("/nobody", symbol="ACME"), timeout=0.2)
        return [r async for r in self.ask_all(GetQuote("/nobody", symbol="ACME"), timeout=0.2)]

    err = _ask(bus, job)
    assert isinstance(err, RequestTimeoutError) and isinstance(err, RequestError)
    assert "GetQuote on '/nobody': no replier came up within 0.2 s" in str(err)


def test_ask_times_out_with_a_timeout_error(bus: Bus) -> None:
    class Silent(Actor):
        def startup(self) -> None:
            self.replier(GetQuote, "/silent", on_request=lambda incoming: None)

    _start(bus, Silent("silent"))

    async def job(self: Actor) -> Reply:
        return await self.ask(GetQuote("/silent", symbol="ACME"), timeout=0.05)

    err = _ask(bus, job)
    assert isinstance(err, RequestTimeoutError) and isinstance(err, TimeoutError)
    assert "0.05 s" in str(err)


def test_ask_of_a_stream_returns_its_last_reply(bus: Bus) -> None:
    _start(bus, Quotes())

    async def job(self: Actor) -> Reply:
        return await self.ask(Count("/count", upto=4), timeout=WAIT)

    reply = _ask(bus, job)
    assert isinstance(reply, Quote) and reply.price == 3.0


def test_ask_all_iterates_over_every_repliers_replies(bus: Bus) -> None:
    _start(bus, Quotes("q1"), Quotes("q2"))

    async def job(self: Actor) -> list[float]:
        prices = []
        async for reply in self.ask_all(Count("/count", upto=2), timeout=WAIT):
            assert isinstance(reply, Quote)
            prices.append(reply.price)
        return sorted(prices)

    assert _ask(bus, job) == [0.0, 0.0, 1.0, 1.0]  # the end-of-stream markers left out


def test_async_handlers_and_async_generators_on_an_asyncio_dispatcher(bus: Bus) -> None:
    class AsyncQuotes(Actor):
        def startup(self) -> None:
            self.serve(GetQuote, "/aq", self.quote)
            self.serve(Count, "/ac", self.count)

        async def quote(self, request: GetQuote) -> Quote:
            await asyncio.sleep(0)
            if request.symbol == "BAD":
                raise ValueError("bad symbol")
            return Quote(request.subject, price=99.0)

        async def count(self, request: Count) -> AsyncIterator[Quote]:
            for i in range(request.upto):
                await asyncio.sleep(0)
                yield Quote(request.subject, price=float(i))

    _start(bus, AsyncQuotes("aq"), dispatcher="loop")

    async def job(self: Actor) -> list[Any]:
        one = await self.ask(GetQuote("/aq", symbol="ACME"), timeout=WAIT)
        many = [r async for r in self.ask_all(Count("/ac", upto=3), timeout=WAIT)]
        try:
            await self.ask(GetQuote("/aq", symbol="BAD"), timeout=WAIT)
        except RequestError as exc:
            bad = str(exc)
        return [one, many, bad]

    one, many, bad = _ask(bus, job)
    assert one.price == 99.0
    assert [(r.price, r.status) for r in many] == [
        (0.0, ReplyStatus.OK_CONTINUING),
        (1.0, ReplyStatus.OK_CONTINUING),
        (2.0, ReplyStatus.OK_CONTINUING),
    ]
    assert "ValueError" in bad and "bad symbol" not in bad  # the class only


def test_ask_outside_an_event_loop_says_what_to_do(bus: Bus) -> None:
    a = Quotes("plain")
    bus.register(a)
    with pytest.raises(UsageError, match="needs a running event loop"):
        a.ask(GetQuote("/quotes", symbol="ACME"))  # at the call: no coroutine nobody awaits


# ------------------------------------------------ ask_blocking: thread dispatchers


def _on(actor: Actor, job: Any) -> Any:
    """Run ``job()`` as a task of ``actor``; its result or exception."""
    out: list[Any] = []
    done = threading.Event()

    def task() -> None:
        try:
            out.append(job())
        except Exception as exc:
            out.append(exc)
        done.set()

    actor.post(task)
    assert done.wait(WAIT)
    return out[0]


@pytest.fixture
def three() -> Iterator[Bus]:
    """Two single-thread dispatchers ('default', 'other') and an asyncio one."""
    config = BusConfig(
        dispatchers=(
            DispatcherConfig(name="default", is_default=True),
            DispatcherConfig(name="other"),
            DispatcherConfig(name="loop", kind=DispatcherKind.ASYNCIO),
        )
    )
    with Bus(config) as b:
        yield b


def test_ask_blocking_returns_the_answer_on_a_thread_dispatcher(three: Bus) -> None:
    _start(three, Quotes(), dispatcher="other")
    asker = Actor("asker")
    _start(three, asker)
    reply = _on(asker, lambda: asker.ask_blocking(GetQuote("/quotes", symbol="ACME"), timeout=WAIT))
    assert isinstance(reply, Quote) and reply.price == 12.5
    stream = _on(asker, lambda: asker.ask_blocking(Count("/count", upto=3), timeout=WAIT))
    assert isinstance(stream, Quote) and stream.price == 2.0
    err = _on(asker, lambda: asker.ask_blocking(GetQuote("/quotes", symbol="XYZ"), timeout=WAIT))
    assert isinstance(err, RequestError) and "KeyError" in str(err)
    none = _on(asker, lambda: asker.ask_blocking(GetQuote("/nobody", symbol="A"), timeout=0.2))
    assert isinstance(none, RequestTimeoutError)
    assert "no replier came up within 0.2 s" in str(none)


def test_ask_blocking_refuses_to_deadlock_its_own_dispatcher(three: Bus) -> None:
    _start(three, Quotes())  # pinned to 'default', which has one thread
    asker = Actor("asker")
    _start(three, asker)  # on 'default' too
    err = _on(asker, lambda: asker.ask_blocking(GetQuote("/quotes", symbol="ACME"), timeout=WAIT))
    assert isinstance(err, UsageError)
    text = str(err)
    assert 'GetQuote:"/quotes"' in text  # the key
    assert "dispatcher 'default'" in text and "would deadlock" in text
    assert "replier 'quotes'" in text
    assert "Pin the replier to another dispatcher" in text


def test_ask_blocking_refuses_an_asker_that_is_its_own_replier(three: Bus) -> None:
    q = Quotes()
    _start(three, q)
    err = _on(q, lambda: q.ask_blocking(GetQuote("/quotes", symbol="ACME"), timeout=WAIT))
    assert isinstance(err, UsageError) and "would deadlock" in str(err)


def test_ask_blocking_on_an_event_loop_names_await_ask(three: Bus) -> None:
    _start(three, Quotes())

    async def job(self: Actor) -> Reply:
        return self.ask_blocking(GetQuote("/quotes", symbol="ACME"), timeout=WAIT)

    asker = Asker("asker", job)
    _start(three, asker, dispatcher="loop")
    assert asker.done.wait(WAIT)
    (err,) = asker.out
    assert isinstance(err, UsageError) and "await self.ask(" in str(err)


def test_ask_on_a_thread_dispatcher_raises_at_the_call_naming_ask_blocking(three: Bus) -> None:
    _start(three, Quotes(), dispatcher="other")
    asker = Actor("asker")
    _start(three, asker)
    for form in (asker.ask, asker.ask_all):
        err = _on(asker, lambda form=form: form(GetQuote("/quotes", symbol="ACME")))
        assert isinstance(err, UsageError), err  # not a coroutine nobody awaits
        assert "ask_blocking(" in str(err) and "dispatcher 'default'" in str(err)


def test_request_all_on_its_repliers_only_thread_refuses_instead_of_timing_out(
    three: Bus,
) -> None:
    _start(three, Quotes())  # on 'default', one thread
    asker = Actor("asker")
    _start(three, asker)
    err = _on(asker, lambda: three.request_all(GetQuote("/quotes", symbol="ACME"), WAIT))
    assert isinstance(err, UsageError)
    assert "request_all() of" in str(err) and "would deadlock" in str(err)
    # from another dispatcher it answers
    other = Actor("other-asker")
    _start(three, other, dispatcher="other")
    replies = _on(other, lambda: three.request_all(GetQuote("/quotes", symbol="ACME"), WAIT))
    assert [r.price for r in replies] == [12.5]
