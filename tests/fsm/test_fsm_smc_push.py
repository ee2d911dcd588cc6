"""SMC push/pop transitions and several maps, on both engines.

The machines are modelled on the SMC manual's examples (a traffic light that pushes to
an emergency map, a telephone whose maps share a state name).  Each test asserts the
exact sequence of Entry, Exit and transition actions that SMC's rules give: a push runs
no Exit of the pushing state and the pushed state's Entry; a pop runs the popped
state's Exit and the transition's actions, returns to the pushing state without its
Entry, then issues the named transition with its arguments.
"""

from __future__ import annotations

import pytest

from actorbus import Bus
from actorbus.errors import FsmError
from actorbus.fsm import FsmActor, TransitionNotAllowed, parse_sm, render

from .conftest import MakeEngine, on_actor

WAIT = 5.0

TRAFFIC = """\
%class Traffic
%start Light::Red
%map Light
%%
Red
    Entry { log("Red.entry"); }
    Exit { log("Red.exit"); }
{
    timer           Green                       { log("Red.timer"); }
    emergency(why)  push(Emergency::Flashing)   { log("Red.emergency " + why); }
    service         Light::Green/push(Emergency::Flashing)  { log("Red.service"); }
    resume(after)   nil                         { log("Red.resume " + str(after)); }
}
Green
    Entry { log("Green.entry"); }
    Exit { log("Green.exit"); }
{
    timer           Red                         { log("Green.timer"); }
    emergency(why)  push(Emergency::Flashing)   { log("Green.emergency " + why); }
    resume(after)   Red                         { log("Green.resume " + str(after)); }
}
%%
%map Emergency
%%
Flashing
    Entry { log("Flashing.entry"); }
    Exit { log("Flashing.exit"); }
{
    clear(minutes) [ctxt.allowed()]  pop(resume, minutes * 60)  { log("Flashing.clear"); }
}
Default
{
    timer           nil     { log("Emergency.Default.timer"); }
    emergency(why)  nil     { log("Emergency.Default.emergency " + why); }
    abandon         pop     { log("Emergency.Default.abandon"); }
}
%%
"""


class Log:
    """The model: records every action; ``allowed()`` is the pop's guard."""

    def __init__(self) -> None:
        self.trace: list[str] = []
        self.guard_calls = 0
        self.allow = True
        self.fail_on: str | None = None
        self.digits = ""

    def log(self, text: str) -> None:
        if text == self.fail_on:
            raise RuntimeError(f"{text} failed")
        self.trace.append(text)

    def allowed(self) -> bool:
        self.guard_calls += 1
        return self.allow


def traffic(make: MakeEngine, text: str = TRAFFIC) -> tuple[object, Log]:
    model = Log()
    engine = make(parse_sm(text, "traffic.sm"), model)
    engine.start()
    return engine, model


def test_push_skips_the_exit_and_pop_returns_without_entry_then_fires(make: MakeEngine) -> None:
    engine, model = traffic(make)
    engine.send("emergency", why="fire")
    assert (engine.current_state, engine.state_stack) == ("Flashing", ("Red",))
    engine.send("clear", minutes=2)
    assert (engine.current_state, engine.state_stack) == ("Red", ())
    assert model.trace == [
        "Red.entry",
        "Red.emergency fire",  # no Red.exit: a push keeps Red on the stack
        "Flashing.entry",
        "Flashing.exit",
        "Flashing.clear",  # no Red.entry: a pop returns to Red
        "Red.resume 120",  # then resume(after=minutes * 60), in Red
    ]


def test_the_popped_transition_runs_in_the_state_returned_to(make: MakeEngine) -> None:
    engine, model = traffic(make)
    engine.send("timer")
    engine.send("emergency", why="flood")
    engine.send("clear", minutes=1)
    assert engine.current_state == "Red"
    assert model.trace == [
        "Red.entry",
        "Red.exit",
        "Red.timer",
        "Green.entry",
        "Green.emergency flood",
        "Flashing.entry",
        "Flashing.exit",
        "Flashing.clear",
        "Green.exit",  # Green's resume is an ordinary transition to Red
        "Green.resume 60",
        "Red.entry",
    ]


def test_default_transitions_of_the_pushed_map_apply_there(make: MakeEngine) -> None:
    engine, model = traffic(make)
    engine.send("emergency", why="fire")
    engine.send("timer")  # the Emergency map's Default: ignored while flashing
    engine.send("emergency", why="again")
    engine.send("abandon")  # a bare pop from the Default state: no transition follows
    assert (engine.current_state, engine.state_stack) == ("Red", ())
    assert model.trace == [
        "Red.entry",
        "Red.emergency fire",
        "Flashing.entry",
        "Emergency.Default.timer",
        "Emergency.Default.emergency again",
        "Flashing.exit",
        "Emergency.Default.abandon",
    ]


def test_next_state_slash_push_leaves_the_state_and_returns_to_the_next(
    make: MakeEngine,
) -> None:
    engine, model = traffic(make)
    engine.send("service")
    assert (engine.current_state, engine.state_stack) == ("Flashing", ("Green",))
    engine.send("abandon")
    assert (engine.current_state, engine.state_stack) == ("Green", ())
    assert model.trace == [
        "Red.entry",
        "Red.exit",  # Red is left for Green, so its Exit runs
        "Red.service",
        "Flashing.entry",  # Green's Entry does not run: Green goes on the stack
        "Flashing.exit",
        "Emergency.Default.abandon",
    ]


def test_the_pop_guard_is_evaluated_once_whatever_is_on_the_stack(make: MakeEngine) -> None:
    engine, model = traffic(make)
    engine.send("timer")
    engine.send("emergency", why="fire")  # Green on the stack, the second return state
    model.allow = False
    with pytest.raises(TransitionNotAllowed):
        engine.send("clear", minutes=1)
    assert model.guard_calls == 1
    assert (engine.current_state, engine.state_stack) == ("Flashing", ("Green",))
    model.allow = True
    engine.send("clear", minutes=1)
    assert model.guard_calls == 2
    assert (engine.current_state, engine.state_stack) == ("Red", ())


def test_pop_from_an_empty_stack_raises_and_the_machine_stays(make: MakeEngine) -> None:
    text = TRAFFIC.replace("%start Light::Red", "%start Emergency::Flashing")
    engine, model = traffic(make, text)
    with pytest.raises(FsmError, match="state stack is empty") as caught:
        engine.send("clear", minutes=1)
    assert not isinstance(caught.value, TransitionNotAllowed)
    assert "'clear' in state 'Flashing' would pop(resume, minutes * 60)" in str(caught.value)
    assert (engine.current_state, engine.state_stack) == ("Flashing", ())
    assert model.trace == ["Flashing.entry"]  # neither Exit nor the actions ran
    with pytest.raises(FsmError, match="'abandon' in state 'Flashing' would pop, but"):
        engine.send("abandon")  # a pop of the Default state
    assert model.trace == ["Flashing.entry"]
    model.allow = False  # a pop whose guard fails falls through as usual
    with pytest.raises(TransitionNotAllowed):
        engine.send("clear", minutes=1)


def test_a_failing_entry_of_the_pushed_state_leaves_the_stack_unchanged(
    make: MakeEngine,
) -> None:
    engine, model = traffic(make)
    model.fail_on = "Flashing.entry"
    with pytest.raises(RuntimeError, match="Flashing.entry failed"):
        engine.send("emergency", why="fire")
    assert (engine.current_state, engine.state_stack) == ("Red", ())
    model.fail_on = None
    engine.send("emergency", why="fire")
    engine.send("clear", minutes=1)
    assert (engine.current_state, engine.state_stack) == ("Red", ())
    assert model.trace == [
        "Red.entry",
        "Red.emergency fire",
        "Red.emergency fire",
        "Flashing.entry",
        "Flashing.exit",
        "Flashing.clear",
        "Red.resume 60",
    ]


NESTED = """\
%start Outer::Idle
%map Outer
%%
Idle
    Entry { log("Idle.entry"); }
    Exit { log("Idle.exit"); }
{
    dial        push(Middle::Dialing)   { log("Idle.dial"); }
    done(n)     nil                     { log("Idle.done " + str(n)); }
}
%%
%map Middle
%%
Dialing
    Entry { log("Dialing.entry"); }
    Exit { log("Dialing.exit"); }
{
    digit       push(Inner::Digit)      { log("Dialing.digit"); }
    done(n)     pop(done, n + 1)        { log("Dialing.done " + str(n)); }
}
%%
%map Inner
%%
Digit
    Entry { log("Digit.entry"); }
    Exit { log("Digit.exit"); }
{
    enough      pop(done, 1)            { log("Digit.enough"); }
}
%%
"""


def test_nested_pushes_pop_back_one_level_at_a_time(make: MakeEngine) -> None:
    model = Log()
    engine = make(parse_sm(NESTED, "nested.sm"), model)
    engine.start()
    engine.send("dial")
    engine.send("digit")
    assert (engine.current_state, engine.state_stack) == ("Digit", ("Idle", "Dialing"))
    engine.send("enough")  # pops to Dialing, whose done pops to Idle
    assert (engine.current_state, engine.state_stack) == ("Idle", ())
    assert model.trace == [
        "Idle.entry",
        "Idle.dial",
        "Dialing.entry",
        "Dialing.digit",
        "Digit.entry",
        "Digit.exit",
        "Digit.enough",
        "Dialing.exit",
        "Dialing.done 1",
        "Idle.done 2",
    ]


TELEPHONE = """\
%start Telephone::Idle
%map Telephone
%%
Idle
    Entry { log("Telephone::Idle.entry"); }
    Exit { log("Telephone::Idle.exit"); }
{
    offhook         push(PhoneNumber::Idle)     { log("offhook"); }
    number(digits)  Connected                   { log("dial " + digits); }
}
Connected
{
    onhook          Idle                        { log("onhook"); }
}
%%
%map PhoneNumber
%%
Idle
    Entry { log("PhoneNumber::Idle.entry"); }
{
    digit(d)        Collecting                  { digits = d; }
}
Collecting
{
    digit(d)        nil                         { digits = ctxt.digits + d; }
    complete        pop(number, ctxt.digits)    { log("complete"); }
}
%%
"""


def test_a_state_name_in_two_maps_is_qualified_by_its_map(make: MakeEngine) -> None:
    model = Log()
    machine = parse_sm(TELEPHONE, "telephone.sm")
    assert [s.id for s in machine.spec.states] == [
        "Telephone::Idle",
        "Connected",
        "PhoneNumber::Idle",
        "Collecting",
    ]
    engine = make(machine, model)
    engine.start()
    assert engine.current_state == "Telephone::Idle"
    engine.send("offhook")
    assert (engine.current_state, engine.state_stack) == ("PhoneNumber::Idle", ("Telephone::Idle",))
    for digit in "555":
        engine.send("digit", d=digit)
    engine.send("complete")
    assert (engine.current_state, engine.state_stack) == ("Connected", ())
    engine.send("onhook")
    assert engine.current_state == "Telephone::Idle"
    assert model.trace == [
        "Telephone::Idle.entry",
        "offhook",
        "PhoneNumber::Idle.entry",
        "complete",
        "Telephone::Idle.exit",
        "dial 555",
        "onhook",
        "Telephone::Idle.entry",
    ]


def test_the_spec_marks_push_and_pop_and_diagrams_draw_them() -> None:
    machine = parse_sm(TRAFFIC, "traffic.sm")
    red = machine.spec.state("Red")
    pushes = [t for t in red.transitions if t.push is not None]
    assert [(t.events, t.target, t.push) for t in pushes] == [
        (("emergency",), "Flashing", "Red"),
        (("service",), "Flashing", "Green"),
    ]
    flashing = machine.spec.state("Flashing")
    pops = [t for t in flashing.transitions if t.events == ("clear",)]
    assert [(t.target, t.pop) for t in pops] == [
        ("Red", "pop(resume, minutes * 60)"),
        ("Green", "pop(resume, minutes * 60)"),
        ("Flashing", "pop(resume, minutes * 60)"),  # the copy that raises on an empty stack
    ]
    mermaid = render(machine, "mermaid")
    assert (
        "Red --> Flashing : emergency / log(#34;Red.emergency #34; + why)#59; push(Flashing)"
        in (mermaid)
    )
    assert (
        "Red --> Flashing : service / log(#34;Red.service#34;)#59; Green/push(Flashing)" in mermaid
    )
    assert mermaid.count("Flashing --> pop : clear") == 1
    assert (
        "Flashing --> pop : clear [ctxt.allowed()] / log(#34;Flashing.clear#34;)#59; pop(resume, minutes * 60)"
        in mermaid
    )
    assert "Default --> pop : abandon / log(#34;Emergency.Default.abandon#34;)#59; pop" in mermaid
    assert "top_is" not in mermaid and "push_state" not in mermaid and "gate" not in mermaid
    dot = render(machine, "dot")
    assert '"pop" [shape=circle, style=dashed, label="pop"];' in dot
    assert '"Flashing" -> "pop" [label="clear [ctxt.allowed()] / ' in dot
    assert '"Red" [label="Red\\nentry / log(\\"Red.entry\\")\\nexit / log(\\"Red.exit\\")"];' in dot


class Phone(FsmActor):
    """An actor driven by the telephone machine; ``log`` is its action."""

    def __init__(self, engine: str) -> None:
        super().__init__("phone", machine=parse_sm(TELEPHONE, "telephone.sm"), engine=engine)
        self.trace: list[str] = []
        self.digits = ""

    def log(self, text: str) -> None:
        self.trace.append(text)


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_an_actor_reports_the_pushed_state_and_the_stack(engine: str) -> None:
    with Bus() as bus:
        phone = Phone(engine)
        bus.register(phone)
        bus.startup(phone).wait(WAIT)

        def state() -> tuple[str | None, tuple[str, ...]]:
            assert phone.fsm is not None
            return phone.current_state, phone.fsm.state_stack

        on_actor(phone, lambda: phone.fsm_send("offhook"), WAIT)
        assert on_actor(phone, state, WAIT) == ("PhoneNumber::Idle", ("Telephone::Idle",))
        for digit in "12":
            on_actor(phone, lambda digit=digit: phone.fsm_send("digit", d=digit), WAIT)
        on_actor(phone, lambda: phone.fsm_send("complete"), WAIT)
        assert on_actor(phone, state, WAIT) == ("Connected", ())
        assert on_actor(phone, lambda: list(phone.trace), WAIT) == [
            "Telephone::Idle.entry",
            "offhook",
            "PhoneNumber::Idle.entry",
            "complete",
            "Telephone::Idle.exit",
            "dial 12",
        ]
        bus.shutdown(phone).wait(WAIT)


PARENS = """\
%start Text::Plain
%map Text
%%
Plain
{
    open        push(Paren::Inside)     { log("open 0"); }
    closed(d)   nil                     { log("closed " + str(d)); }
}
%%
%map Paren
%%
Inside
    Entry { log("Inside.entry"); }
    Exit { log("Inside.exit"); }
{
    open        push(Paren::Inside)     { log("open"); }
    close       pop(closed, len(ctxt.trace))    {}
    closed(d)   nil                     { log("closed " + str(d)); }
}
%%
"""


def test_a_map_that_pushes_itself_nests_as_deep_as_the_input(make: MakeEngine) -> None:
    model = Log()
    engine = make(parse_sm(PARENS, "parens.sm"), model)
    engine.start()
    for _ in range(3):
        engine.send("open")
    assert (engine.current_state, engine.state_stack) == ("Inside", ("Plain", "Inside", "Inside"))
    for _ in range(3):
        engine.send("close")
    assert (engine.current_state, engine.state_stack) == ("Plain", ())
    assert model.trace == [
        "open 0",
        "Inside.entry",
        "open",  # Inside pushes itself: no Exit, then Entry of the new Inside
        "Inside.entry",
        "open",
        "Inside.entry",
        "Inside.exit",
        "closed 7",  # back in Inside (no Entry), closed(d=len(trace)) runs there
        "Inside.exit",
        "closed 9",
        "Inside.exit",
        "closed 11",  # back in Plain
    ]


LIGHT_DEFAULT = """\
%start Light::Red
%map Light
%%
Red
    Entry { log("Red.entry"); }
    Exit { log("Red.exit"); }
{
    timer           Green   { log("Red.timer"); }
}
Green
    Entry { log("Green.entry"); }
    Exit { log("Green.exit"); }
{
    timer           Red     { log("Green.timer"); }
}
Default
{
    emergency(why)  push(Emergency::Flashing)   { log("Light.emergency " + why); }
}
%%
%map Emergency
%%
Flashing
    Entry { log("Flashing.entry"); }
    Exit { log("Flashing.exit"); }
{
    abandon         pop     { log("Flashing.abandon"); }
}
%%
"""


def test_a_push_declared_on_the_default_state_returns_to_the_state_it_left(
    make: MakeEngine,
) -> None:
    engine, model = traffic(make, LIGHT_DEFAULT)
    engine.send("timer")
    engine.send("emergency", why="fire")
    assert (engine.current_state, engine.state_stack) == ("Flashing", ("Green",))
    engine.send("abandon")
    assert (engine.current_state, engine.state_stack) == ("Green", ())
    assert model.trace == [
        "Red.entry",
        "Red.exit",
        "Red.timer",
        "Green.entry",
        "Light.emergency fire",  # no Green.exit
        "Flashing.entry",
        "Flashing.exit",
        "Flashing.abandon",  # no Green.entry
    ]
