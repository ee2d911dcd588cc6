# mypy: disable-error-code="no-untyped-call"
# (python-statemachine's State.to.itself() builder is not annotated)
"""A machine whose actions keep re-sending their event cannot hold a dispatcher for ever.

An action that sends the event it handles, in a state whose transition answers that
event with the same action, queues a new event inside every run-to-completion step it
runs.  Both engines stop such a step after :data:`MAX_STEP_EVENTS` events with an
:class:`~actorbus.errors.FsmError` naming the machine, the state, the event and the
fix; the rest of the step's queue is dropped and the machine stays usable.  On a real
bus the error goes through the actor's failure contract (``on_failure``), the actor
keeps running and the bus closes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from statemachine import State

from actorbus import Actor, Bus, Notification
from actorbus.actors.failure import FailedTask
from actorbus.errors import FsmError
from actorbus.fsm import FsmActor, Machine, TransitionNotAllowed, parse_sm
from actorbus.fsm.engine import MAX_STEP_EVENTS
from actorbus.testing import EventLog

from .conftest import MakeEngine
from .conftest import on_actor as _on_actor

ENGINES = ["compiled", "reference"]
WAIT = 5.0
#: How long a runaway step may take to reach the bound: the reference engine spends
#: MAX_STEP_EVENTS transitions of python-statemachine on it, on a possibly busy machine.
RUNAWAY_WAIT = 60.0


class Tick(Notification, type_name="test.fsm_runaway.Tick"):
    n: int


@pytest.fixture(autouse=True)
def no_failure_reports(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Failures reach the test actors' on_failure; nothing else may report one."""
    yield
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []


def on_actor(actor: Actor, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the actor's dispatcher after everything posted before it; its result."""
    return _on_actor(actor, fn, RUNAWAY_WAIT)


def within(fn: Callable[[], Any]) -> Any:
    """``fn()`` run on a thread of its own: its result, or what it raised.

    Fails (instead of hanging the test) when it does not return in time, as when an
    engine loops for ever; the looping thread is a daemon and does not keep the
    process alive.
    """
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # handed to the test thread
            box.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="runaway-engine", daemon=True).start()
    assert done.wait(RUNAWAY_WAIT), f"the engine did not return within {RUNAWAY_WAIT}s"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def check_runaway_message(text: str, machine: str, event: str) -> None:
    assert text.startswith(f"{machine}: {event!r}, sent in state 'Idle', ")
    assert f"would be event {MAX_STEP_EVENTS + 1} of one run-to-completion step" in text
    assert "the step stops and its queued events are dropped" in text
    assert "an action must not send the event it handles" in text
    assert f"self.schedule(delay, self.fsm_send, {event!r})" in text
    assert f"self.post(self.fsm_send, {event!r})" in text


# ------------------------------------------------------------------ machines

# ``message`` answers with an action that sends ``message`` again (fsm_send); ``ping``
# with an action string naming ``ping``; ``tick`` is a harmless event.


class Echo(Machine):
    Idle = State(initial=True)

    message = Idle.to.itself(internal=True, on="resend")
    ping = Idle.to.itself(internal=True, on=["counted", "ping"])
    tick = Idle.to.itself(internal=True, on="ticked")


ECHO_SM = """\
%start Echo::Idle
%map Echo
%%
Idle
{
    message(msg)    nil     { counted(); ctxt.fsm_send("message", msg=msg); }
    tick            nil     { ticked(); }
}
%%
"""


def declaration(style: str) -> Any:
    return Echo if style == "python" else parse_sm(ECHO_SM, "echo.sm")


class Echoing(FsmActor):
    """Counts the actions of the looping transitions; logs failures and ticks."""

    def __init__(self, machine: Any, engine: str) -> None:
        super().__init__("echoing", machine=machine, engine=engine)
        self.log = EventLog()
        self.handled = 0

    def counted(self) -> None:
        self.handled += 1

    def resend(self, msg: Tick) -> None:
        self.handled += 1
        self.fsm_send("message", msg=msg)

    def ticked(self) -> None:
        self.log.append(("tick", self.handled))

    def on_failure(self, exc: Exception, task: FailedTask) -> None:
        self.log.append(("failure", exc, task))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("style", "how"), [("python", "fsm_send"), ("sm", "fsm_send"), ("python", "named")]
)
def test_an_action_resending_its_event_fails_and_the_actor_goes_on(
    style: str, how: str, engine: str
) -> None:
    bus = Bus()
    try:
        actor = Echoing(declaration(style), engine)
        bus.register(actor)
        bus.startup(actor).wait(WAIT)
        if how == "fsm_send":  # a notification from a feed: the event "message"
            on_actor(actor, lambda: actor.subscribe(Tick, "/loop"))
            feed = bus.publisher(Tick, "/loop")
            feed.publish(Tick("/loop", n=1))
            event, callback = "message", "on_message"
        else:  # an event of our own, sent by a task
            actor.post(actor.fsm_send, "ping")
            event, callback = "ping", "fsm_send"
        items = actor.log.wait_count("failure", 1, timeout=RUNAWAY_WAIT)
        ((_, exc, task),) = [e for e in items if e[0] == "failure"]
        assert type(exc) is FsmError, exc
        check_runaway_message(str(exc), "Echo" if style == "python" else "EchoContext", event)
        assert task.callback.endswith(callback)
        # the sent event and the MAX_STEP_EVENTS - 1 it queued ran; no more
        assert on_actor(actor, lambda: actor.handled) == MAX_STEP_EVENTS
        # the actor keeps running and its machine takes the next event
        on_actor(actor, lambda: actor.fsm_send("tick"))
        assert actor.log.of("tick") == [("tick", MAX_STEP_EVENTS)]
        assert on_actor(actor, lambda: actor.current_state) == "Idle"
        assert len(actor.log.of("failure")) == 1
    finally:
        bus.close(timeout=WAIT)  # raises TimeoutError if a dispatcher thread is stuck


# ------------------------------------------------------- the engines alone


class Chain(Machine):
    Idle = State(initial=True)

    countdown = Idle.to.itself(internal=True, on="step")


class ChainModel:
    """``countdown(n)`` sends ``countdown(n - 1)`` until n is 1: a chain of n events."""

    def __init__(self) -> None:
        self.steps = 0

    def step(self, n: int, machine: Any) -> None:
        self.steps += 1
        if n > 1:
            machine.send("countdown", n=n - 1)


def test_a_step_of_the_bound_runs_and_one_event_more_fails(make: MakeEngine) -> None:
    model = ChainModel()
    engine = make(Chain, model)
    engine.start()
    within(lambda: engine.send("countdown", n=MAX_STEP_EVENTS))
    assert model.steps == MAX_STEP_EVENTS

    model.steps = 0
    with pytest.raises(FsmError) as caught:
        within(lambda: engine.send("countdown", n=MAX_STEP_EVENTS + 1))
    assert not isinstance(caught.value, TransitionNotAllowed)
    check_runaway_message(str(caught.value), "Chain", "countdown")
    assert model.steps == MAX_STEP_EVENTS
    assert engine.current_state == "Idle"

    # the dropped queue is gone and the next step counts from zero
    model.steps = 0
    engine.send("countdown", n=3)
    assert model.steps == 3


class Spins(Machine):
    Idle = State(initial=True, enter="kick")

    spin = Idle.to.itself(internal=True, on="spin")


class SpinsModel:
    def kick(self, machine: Any) -> None:
        machine.send("spin")


def test_an_entry_action_of_the_start_state_cannot_loop_for_ever(make: MakeEngine) -> None:
    engine = make(Spins, SpinsModel())
    with pytest.raises(FsmError) as caught:
        within(engine.start)
    check_runaway_message(str(caught.value), "Spins", "spin")


class Swallows(Machine):
    Idle = State(initial=True)

    spin = Idle.to.itself(internal=True, on="spin_again")


class SwallowsModel:
    """Sends ``spin`` again from its action, and catches what that send raises."""

    def __init__(self) -> None:
        self.steps = 0
        self.caught: list[Exception] = []

    def spin_again(self, machine: Any) -> None:
        self.steps += 1
        try:
            machine.send("spin")
        except FsmError as exc:
            self.caught.append(exc)


def test_a_caught_bound_error_still_ends_the_step_with_it(make: MakeEngine) -> None:
    model = SwallowsModel()
    engine = make(Swallows, model)
    engine.start()
    with pytest.raises(FsmError) as caught:
        within(lambda: engine.send("spin"))
    (swallowed,) = model.caught
    assert str(caught.value) == str(swallowed)
    check_runaway_message(str(caught.value), "Swallows", "spin")
    assert model.steps == MAX_STEP_EVENTS
    # the next step starts from zero: it fails the same way, after as many events
    model.steps = 0
    with pytest.raises(FsmError):
        within(lambda: engine.send("spin"))
    assert model.steps == MAX_STEP_EVENTS


class Kicks(Machine):
    Idle = State(initial=True, enter="kick")

    spin = Idle.to.itself(internal=True, on="kick")


class Restless(FsmActor):
    """The start state's entry action sends ``spin``, whose action sends it again."""

    machine = Kicks

    def __init__(self, engine: str) -> None:
        super().__init__("restless", engine=engine)
        self.kicks = 0

    def kick(self) -> None:
        self.kicks += 1
        self.fsm_send("spin")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_start_that_keeps_sending_fails_the_startup(
    engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    bus = Bus()
    try:
        actor = Restless(engine)
        bus.register(actor)
        with pytest.raises(FsmError) as caught:
            bus.startup(actor).wait(RUNAWAY_WAIT)
        assert not isinstance(caught.value, TransitionNotAllowed)
        check_runaway_message(str(caught.value), "Kicks", "spin")
        # the start (its entry action) and the MAX_STEP_EVENTS - 1 events it queued ran
        assert on_actor(actor, lambda: actor.kicks) == MAX_STEP_EVENTS
        # the failure contract of startup(): reported once, the actor is not started
        (report,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert "actor 'restless': startup() raised FsmError" in report
        caplog.clear()
        assert not actor.is_started
    finally:
        bus.close(timeout=WAIT)
