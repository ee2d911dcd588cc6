# mypy: disable-error-code="no-untyped-call"
# (python-statemachine's State.to.itself() builder is not annotated)
"""FsmActor on a real bus: no event or state name reaches the actor's own methods.

The machine's model is the actor's :class:`~actorbus.fsm.actor.FsmModel`, which shows
python-statemachine only what the actor's own class declares.  Events named after
the bus callbacks (``message``, ``request``, ``cancel``, ``reply``, ...) run their
transitions once; a machine that names a bus callback or an FsmActor method as a
callback is refused when the actor is made; a bus callback called from inside the
machine raises instead of feeding the machine for ever.  Every behaviour runs on
both engines and, where the style matters, for a Python class and a ``.sm`` file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from statemachine import State

from actorbus import Actor, Bus, IncomingRequest, Notification, Reply, ReplyStatus, Request
from actorbus.errors import FsmError
from actorbus.fsm import FsmActor, Machine, TransitionNotAllowed, parse_sm
from actorbus.testing import EventLog, Recorder

from .conftest import on_actor as _on_actor

ENGINES = ["compiled", "reference"]
WAIT = 5.0


class Tick(Notification, type_name="test.fsm_actor_events.Tick"):
    n: int


class Answer(Reply, type_name="test.fsm_actor_events.Answer"):
    text: str


class Ask(Request, replies=(Answer,), type_name="test.fsm_actor_events.Ask"):
    question: str


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus()
    yield b
    b.close()


@pytest.fixture(autouse=True)
def no_failure_reports(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No actor callback of these tests may fail (the bus reports it, then goes on)."""
    yield
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []


def on_actor(actor: Actor, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the actor's dispatcher after everything posted before it; its result."""
    return _on_actor(actor, fn, WAIT)


def start(bus: Bus, actor: FsmActor) -> None:
    bus.register(actor)
    bus.startup(actor).wait(WAIT)


# ------------------------------------------------------------------ machines

# Every event is named after an FsmActor bus callback (on_<event>); each transition
# logs one call.


class BusNames(Machine):
    Idle = State(initial=True)
    Busy = State()
    Done = State(final=True)

    message = Idle.to.itself(internal=True, on="got_message")
    request = Idle.to(Busy, on="got_request")
    cancel = Busy.to(Idle, on="got_cancel")
    reply = Idle.to.itself(internal=True, on="got_reply")
    feed_status = Idle.to.itself(internal=True, on="got_feed_status")
    publish_status = Idle.to.itself(internal=True, on="got_publish_status")
    finish = Idle.to(Done)


BUS_NAMES_SM = """\
%start BusNames::Idle
%map BusNames
%%
Idle
{
    message(msg)        nil     { got_message(msg=msg); }
    request             Busy    { got_request(); }
    reply               nil     { got_reply(); }
    feed_status         nil     { got_feed_status(); }
    publish_status      nil     { got_publish_status(); }
    finish              Done    {}
}
Busy
{
    cancel              Idle    { got_cancel(); }
}
Done
{
}
%%
"""


def declaration(style: str) -> Any:
    return BusNames if style == "python" else parse_sm(BUS_NAMES_SM, "bus_names.sm")


class Logging(FsmActor):
    """Logs the machine's actions, and what the bus delivered."""

    def __init__(self, machine: Any, engine: str) -> None:
        super().__init__("logging", machine=machine, engine=engine)
        self.log = EventLog()

    def got_message(self, **kwargs: Any) -> None:
        self.log.append(("message", kwargs.get("msg")))

    def got_request(self, **kwargs: Any) -> None:
        self.log.append(("request", kwargs.get("request")))

    def got_cancel(self, **kwargs: Any) -> None:
        self.log.append(("cancel", kwargs.get("request")))

    def got_reply(self) -> None:
        self.log.append(("reply",))

    def got_feed_status(self) -> None:
        self.log.append(("feed_status",))

    def got_publish_status(self) -> None:
        self.log.append(("publish_status",))


STYLES = ["python", "sm"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("style", STYLES)
def test_event_message_runs_its_transition_once_and_the_bus_closes(
    bus: Bus, style: str, engine: str
) -> None:
    actor = Logging(declaration(style), engine)
    start(bus, actor)
    on_actor(actor, lambda: actor.subscribe(Tick, "/t"))
    feed = bus.publisher(Tick, "/t")
    try:
        feed.publish(Tick("/t", n=1))
        feed.publish(Tick("/t", n=2))
        actor.log.wait_count("message", 2)
        # the dispatcher is free again: a task posted now runs
        assert on_actor(actor, lambda: actor.current_state) == "Idle"
        assert [e[1].n for e in actor.log.snapshot()] == [1, 2]
    finally:
        feed.close()
    bus.close(timeout=WAIT)  # raises TimeoutError if a dispatcher thread is stuck


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("style", STYLES)
def test_events_named_after_bus_callbacks_each_run_once(style: str, engine: str) -> None:
    with Bus() as bus:
        actor = Logging(declaration(style), engine)
        start(bus, actor)
        on_actor(actor, lambda: actor.fsm_send("message", msg=Tick("/t", n=1)))
        for event in ("reply", "feed_status", "publish_status", "request", "cancel"):
            on_actor(actor, lambda event=event: actor.fsm_send(event))
        assert on_actor(actor, lambda: actor.current_state) == "Idle"
        kinds = [e[0] for e in actor.log.snapshot()]
        assert kinds == ["message", "reply", "feed_status", "publish_status", "request", "cancel"]
        on_actor(actor, lambda: actor.fsm_send("finish"))
        assert on_actor(actor, lambda: actor.current_state) == "Done"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("style", STYLES)
def test_request_and_cancel_from_the_bus_run_their_transitions(
    bus: Bus, style: str, engine: str
) -> None:
    actor = Logging(declaration(style), engine)
    start(bus, actor)
    on_actor(actor, lambda: actor.replier(Ask, "/ask"))
    asker = Recorder("asker")
    bus.register(asker)
    bus.startup(asker).wait(WAIT)
    feed = asker.requestor(Ask, "/ask")
    handle = feed.request(Ask("/ask", question="?"))
    actor.log.wait_count("request", 1)
    assert on_actor(actor, lambda: actor.current_state) == "Busy"
    handle.cancel()
    actor.log.wait_count("cancel", 1)
    assert on_actor(actor, lambda: actor.current_state) == "Idle"
    # a request callback that raises is answered with an ERROR reply: there was none
    assert on_actor(asker, lambda: asker.log.of("reply")) == []
    (request,) = [e[1] for e in actor.log.of("request")]
    (cancelled,) = [e[1] for e in actor.log.of("cancel")]
    if style == "python":  # .sm actions take only the transition's parameters
        assert isinstance(request, IncomingRequest) and cancelled is request
    assert [e[0] for e in actor.log.snapshot()] == ["request", "cancel"]


class Replying(Machine):
    """Answers a request (``request``) and takes the reply back (``reply``)."""

    Idle = State(initial=True)
    Asked = State()

    request = Idle.to.itself(internal=True, on="answer") | Asked.to.itself(
        internal=True, on="answer"
    )
    ask = Idle.to(Asked, on="send_question")
    reply = Asked.to(Idle, on="took_reply")


class Asker(FsmActor):
    machine = Replying

    def __init__(self, engine: str) -> None:
        super().__init__("asker", engine=engine)
        self.replies = EventLog()

    def startup(self) -> None:
        super().startup()
        self.replier(Ask, "/self")
        self.questions = self.requestor(Ask, "/self")

    def answer(self, request: IncomingRequest[Ask]) -> None:
        request.reply(Answer("/self", status=ReplyStatus.OK_FINAL, text="yes"))

    def send_question(self) -> None:
        self.questions.request(Ask("/self", question="?"))

    def took_reply(self, reply: Answer, remaining: int) -> None:
        self.replies.append(("reply", reply.text, remaining))


@pytest.mark.parametrize("engine", ENGINES)
def test_request_and_reply_events_round_trip_through_one_actor(bus: Bus, engine: str) -> None:
    actor = Asker(engine)
    start(bus, actor)
    on_actor(actor, lambda: actor.fsm_send("ask"))
    actor.replies.wait_count("reply", 1)
    assert actor.replies.snapshot() == [("reply", "yes", 0)]
    assert on_actor(actor, lambda: actor.current_state) == "Idle"


# --------------------------------------------------- what the machine sees


class Counting(Machine):
    Idle = State(initial=True)
    Busy = State()

    message = Idle.to(Busy) | Busy.to(Idle)


class OverridesOnMessage(FsmActor):
    """Overrides a bus callback and declares python-statemachine hooks of its own."""

    machine = Counting

    def __init__(self, engine: str) -> None:
        super().__init__("overrides", engine=engine)
        self.log = EventLog()

    def on_message(self, message: Any, feed: Any) -> None:
        self.log.append(("bus", message.n))
        super().on_message(message, feed)

    def on_enter_Busy(self) -> None:
        self.log.append(("enter Busy",))

    def after_message(self, msg: Tick) -> None:
        self.log.append(("after", msg.n))


@pytest.mark.parametrize("engine", ENGINES)
def test_an_overridden_bus_callback_is_no_hook_but_declared_hooks_run(
    bus: Bus, engine: str
) -> None:
    actor = OverridesOnMessage(engine)
    start(bus, actor)
    on_actor(actor, lambda: actor.subscribe(Tick, "/c"))
    feed = bus.publisher(Tick, "/c")
    try:
        feed.publish(Tick("/c", n=1))
        feed.publish(Tick("/c", n=2))
        actor.log.wait_count("after", 2)
        assert on_actor(actor, lambda: actor.current_state) == "Idle"
    finally:
        feed.close()
    assert actor.log.snapshot() == [
        ("bus", 1),
        ("enter Busy",),
        ("after", 1),
        ("bus", 2),
        ("after", 2),
    ]


COUNTER_SM = """\
%start Counter::Counting
%map Counter
%%
Counting
{
    message(msg)  nil  { count = ctxt.count + msg.n; seen.append(msg.n); }
}
%%
"""


class SmCounter(FsmActor):
    def __init__(self, engine: str) -> None:
        super().__init__("counter", machine=parse_sm(COUNTER_SM, "counter.sm"), engine=engine)
        self.count = 0
        self.seen: list[int] = []


@pytest.mark.parametrize("engine", ENGINES)
def test_sm_code_reads_and_writes_the_actor_through_ctxt(bus: Bus, engine: str) -> None:
    actor = SmCounter(engine)
    start(bus, actor)
    for n in (1, 2, 3):
        on_actor(actor, lambda n=n: actor.fsm_send("message", msg=Tick("/x", n=n)))
    assert on_actor(actor, lambda: (actor.count, actor.seen)) == (6, [1, 2, 3])
    # the reference engine keeps its state on the model view, not on the actor
    assert "_actorbus_fsm_state" not in vars(actor)


def test_the_model_lists_only_what_the_user_declared() -> None:
    actor = SmCounter("compiled")
    model = actor.fsm_model
    listed = set(dir(model))
    assert {"count", "seen"} <= listed
    assert not listed & {"on_message", "on_cancel", "fsm_send", "post", "fsm", "startup"}
    assert model.fsm_send == actor.fsm_send  # code still reaches everything
    model.count = 5
    assert actor.count == 5


# ------------------------------------------------------------- refusals


def test_a_machine_naming_a_bus_callback_is_refused_with_the_fix() -> None:
    class CallsOnMessage(Machine):
        Idle = State(initial=True)
        poke = Idle.to.itself(internal=True, on="on_message")

    class Refused(FsmActor):
        machine = CallsOnMessage

    with pytest.raises(FsmError) as caught:
        Refused()
    text = str(caught.value)
    assert "'on_message'" in text and "action of transition 'poke'" in text
    assert "handle_message" in text


def test_a_machine_naming_an_fsm_actor_method_is_refused() -> None:
    class AsksIsStarted(Machine):
        Idle = State(initial=True)
        Done = State(final=True)
        go = Idle.to(Done, cond="is_started and ready")

    class Refused(FsmActor):
        machine = AsksIsStarted

        def ready(self) -> bool:
            return True

    with pytest.raises(FsmError, match=r"names 'is_started' \(guard of transition 'go'"):
        Refused()


def test_a_sm_action_calling_a_bus_callback_is_refused() -> None:
    text = BUS_NAMES_SM.replace("got_reply();", "on_reply(1, None, None);")
    with pytest.raises(FsmError, match=r"calls 'on_reply' \(action of transition 'reply'"):
        Logging(parse_sm(text, "calls_on_reply.sm"), "compiled")


def test_a_subclass_may_name_its_own_methods_even_if_actorbus_has_them() -> None:
    class Stops(Machine):
        Idle = State(initial=True)
        Done = State(final=True, enter="shutdown_hook")
        finish = Idle.to(Done)

    class Allowed(FsmActor):
        machine = Stops

        def shutdown_hook(self) -> None:
            pass

    Allowed()  # no error: the name is the subclass's own


# ------------------------------------------------- no loop from inside


class Echo(Machine):
    Idle = State(initial=True)
    message = Idle.to.itself(internal=True, on="echo")


class Echoing(FsmActor):
    """An action that calls the bus callback itself: refused at run time, no loop."""

    machine = Echo

    def __init__(self, engine: str) -> None:
        super().__init__("echo", engine=engine)
        self.log = EventLog()

    def echo(self, msg: Tick, feed: Any) -> None:
        try:
            self.on_message(msg, feed)
        except FsmError as exc:
            self.log.append(("refused", str(exc)))
        self.log.append(("echo", msg.n))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bus_callback_called_from_an_action_raises_instead_of_looping(
    bus: Bus, engine: str
) -> None:
    actor = Echoing(engine)
    start(bus, actor)
    on_actor(actor, lambda: actor.subscribe(Tick, "/e"))
    feed = bus.publisher(Tick, "/e")
    try:
        feed.publish(Tick("/e", n=7))
        actor.log.wait_count("echo", 1)
        assert on_actor(actor, lambda: actor.current_state) == "Idle"
    finally:
        feed.close()
    refused, echo = actor.log.snapshot()
    assert echo == ("echo", 7)
    assert "on_message() was called while the machine handles an event" in refused[1]
    assert "self.fsm_send(" in refused[1]


# ------------------------------------------------ no transition in the state


@pytest.mark.parametrize("engine", ENGINES)
def test_an_event_without_transition_in_the_state_is_rejected(engine: str) -> None:
    with Bus() as bus:
        actor = Logging(BusNames, engine)
        start(bus, actor)

        def cancel_in_idle() -> str:
            with pytest.raises(TransitionNotAllowed) as caught:
                actor.fsm_send("cancel")
            return str(caught.value)

        assert "event 'cancel' is not allowed in state 'Idle'" in on_actor(actor, cancel_in_idle)
        assert on_actor(actor, lambda: actor.current_state) == "Idle"
        on_actor(actor, lambda: actor.fsm_send("undeclared"))  # ignored
        assert actor.log.snapshot() == []
