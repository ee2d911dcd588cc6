"""SMC push/pop transitions together with the SMC compatibility rules, on both engines.

Where the two meet: a pop issuing a transition named like a state or a
python-statemachine attribute (an ``sm:`` id under python-statemachine), with
parameters named like injected arguments; ``Default`` pushes and pops, which answer
only the events the file declares; ``%{ %}`` helpers in a pushed map; push and pop
under ``commit_on_error=True`` (SMC's ``finally``); a failing start; diagrams.
"""

from __future__ import annotations

import pytest

from actorbus.errors import FsmError
from actorbus.fsm import TransitionNotAllowed, parse_sm, render

from .conftest import MakeEngine


class Log:
    """The model: ``log`` records, ``fail(where)`` raises for the places in ``failing``."""

    def __init__(self, *failing: str) -> None:
        self.lines: list[str] = []
        self.failing = set(failing)

    def log(self, text: str) -> None:
        self.lines.append(text)

    def fail(self, where: str) -> None:
        if where in self.failing:
            raise RuntimeError(where)


LIFT_SM = """\
%{
def long_enough(n):
    return n >= 5


def minutes(n):
    return n * 60
%}
%class Lift
%start Car::Idle
%map Car
%%
Idle
    Entry { log("enter Idle"); }
    Exit { log("exit Idle"); }
{
    call(state)     push(Service::Busy)     { log("call " + state); }
    Busy(event)     nil                     { log("Busy " + event); }
    send(state)     Moving                  { log("send " + state); }
}
Moving { stop Idle {} }
%%
%map Service
%%
Busy
    Entry { log("enter Busy"); }
    Exit { log("exit Busy"); }
{
    done(n) [long_enough(n)]    pop(Busy, "after " + str(minutes(n)))   { log("done"); }
    done(n)                     pop(send, "early")                      { log("early"); }
}
%%
"""


def test_a_pop_issues_transitions_named_like_a_state_or_a_statemachine_attribute(
    make: MakeEngine,
) -> None:
    """``Busy`` is also a state and ``send`` a python-statemachine method: the pop sends
    them under their python-statemachine ids, with ``event`` and ``state`` as the
    transitions' own arguments; the guard and the arguments call ``%{ %}`` helpers."""
    model = Log()
    engine = make(parse_sm(LIFT_SM, "lift.sm"), model)
    engine.start()
    engine.send("call", state="floor 3")
    assert (engine.current_state, engine.state_stack) == ("Busy", ("Idle",))
    engine.send("done", n=5)  # long_enough(5): pop(Busy, "after 300")
    assert (engine.current_state, engine.state_stack) == ("Idle", ())
    assert model.lines == [
        "enter Idle",
        "call floor 3",
        "enter Busy",
        "exit Busy",
        "done",
        "Busy after 300",  # the loopback in Idle, which the pop returned to without Entry
    ]
    model.lines.clear()
    engine.send("call", state="floor 1")
    engine.send("done", n=1)  # pop(send, "early"): Idle -> Moving
    assert (engine.current_state, engine.state_stack) == ("Moving", ())
    assert model.lines == [
        "call floor 1",
        "enter Busy",
        "exit Busy",
        "early",
        "exit Idle",
        "send early",
    ]


def test_the_empty_stack_error_names_an_event_named_like_a_state(make: MakeEngine) -> None:
    text = """\
%start M::A
%map M
%%
A { B pop(A) {}  A nil {} }
B { A A {} }
%%
"""
    engine = make(parse_sm(text), Log())
    engine.start()
    with pytest.raises(
        FsmError, match=r"^SmContext: 'B' in state 'A' would pop\(A\), but the state"
    ):
        engine.send("B")
    assert (engine.current_state, engine.state_stack) == ("A", ())


DEFAULT_SM = """\
%start Car::Idle
%map Car
%%
Idle { call push(Service::Busy) { log("call"); } }
Default { Default push(Service::Busy) { log("any"); } }
%%
%map Service
%%
Busy { work nil { log("work"); } }
Default { Default pop { log("popped"); } }
%%
"""


def test_default_pushes_and_pops_answer_only_the_declared_events(make: MakeEngine) -> None:
    model = Log()
    engine = make(parse_sm(DEFAULT_SM), model)
    engine.start()
    with pytest.raises(TransitionNotAllowed, match="declares no transition of that name"):
        engine.send("dial")
    engine.send("work")  # declared in Busy: Idle's Default push
    assert (engine.current_state, engine.state_stack) == ("Busy", ("Idle",))
    with pytest.raises(TransitionNotAllowed, match="declares no transition of that name"):
        engine.send("dial")  # not the Default pop
    assert (engine.current_state, engine.state_stack) == ("Busy", ("Idle",))
    engine.send("call")  # declared in Idle: Busy's Default pop
    assert (engine.current_state, engine.state_stack) == ("Idle", ())
    assert model.lines == ["any", "popped"]


def test_an_undeclared_event_never_reaches_a_default_pop_on_an_empty_stack(
    make: MakeEngine,
) -> None:
    """The declared-events validator comes before the empty-stack error."""
    engine = make(parse_sm(DEFAULT_SM.replace("%start Car::Idle", "%start Service::Busy")), Log())
    engine.start()
    with pytest.raises(TransitionNotAllowed, match="declares no transition of that name"):
        engine.send("dial")
    with pytest.raises(FsmError, match="the state stack is empty"):
        engine.send("call")
    assert (engine.current_state, engine.state_stack) == ("Busy", ())


def test_diagrams_label_default_pushes_and_pops_with_the_declared_events() -> None:
    mermaid = render(parse_sm(DEFAULT_SM), "mermaid")
    assert "Default --> Busy : * [declared] / log(#34;any#34;)#59; push(Busy)" in mermaid
    assert "Default --> pop : * [declared] / log(#34;popped#34;)#59; pop" in mermaid
    assert "Idle --> Busy : call / log(#34;call#34;)#59; push(Busy)" in mermaid
    assert "send_popped" not in mermaid and "_ab_" not in mermaid


VALVE_SM = """\
%start Valve::Shut
%map Valve
%%
Shut
    Entry { log("enter Shut"); }
    Exit { log("exit Shut"); }
{
    test            push(Check::Testing)    { log("test"); fail("test"); }
    tested(ok)      nil                     { log("tested " + str(ok)); }
}
%%
%map Check
%%
Testing
    Entry { log("enter Testing"); fail("enter"); }
    Exit { log("exit Testing"); fail("exit"); }
{
    pass            pop(tested, True)       { log("pass"); fail("pass"); }
}
%%
"""


@pytest.mark.parametrize("failing", [("test",), ("enter",), ("test", "enter")])
def test_commit_on_error_a_failing_push_still_pushes(
    make: MakeEngine, failing: tuple[str, ...]
) -> None:
    """SMC's push: its 'finally' pushes and enters the pushed state, whose Entry runs
    even after the actions raised; the last exception propagates."""
    model = Log(*failing)
    engine = make(parse_sm(VALVE_SM, commit_on_error=True), model)
    engine.start()
    with pytest.raises(RuntimeError) as caught:
        engine.send("test")
    assert str(caught.value) == failing[-1]
    if len(failing) == 2:
        assert str(caught.value.__context__) == "test"
    assert (engine.current_state, engine.state_stack) == ("Testing", ("Shut",))
    assert model.lines == ["enter Shut", "test", "enter Testing"]
    engine.send("pass")  # the machine goes on from there
    assert (engine.current_state, engine.state_stack) == ("Shut", ())


def test_commit_on_error_a_failing_pop_still_pops_and_issues_nothing(make: MakeEngine) -> None:
    """SMC's pop: its 'finally' pops; the transition it names is issued after the
    'finally', so not when the actions raised."""
    model = Log("pass")
    engine = make(parse_sm(VALVE_SM, commit_on_error=True), model)
    engine.start()
    engine.send("test")
    model.lines.clear()
    with pytest.raises(RuntimeError, match="pass"):
        engine.send("pass")
    assert (engine.current_state, engine.state_stack) == ("Shut", ())
    assert model.lines == ["exit Testing", "pass"]  # no Entry of Shut, no 'tested'


@pytest.mark.parametrize("commit_on_error", [False, True])
def test_a_failing_exit_leaves_a_pop_undone_under_either_rule(
    make: MakeEngine, commit_on_error: bool
) -> None:
    model = Log("exit")
    engine = make(parse_sm(VALVE_SM, commit_on_error=commit_on_error), model)
    engine.start()
    engine.send("test")
    with pytest.raises(RuntimeError, match="exit"):
        engine.send("pass")
    assert (engine.current_state, engine.state_stack) == ("Testing", ("Shut",))


@pytest.mark.parametrize("failing", ["test", "enter", "pass"])
def test_without_commit_on_error_a_failing_push_or_pop_rolls_back(
    make: MakeEngine, failing: str
) -> None:
    model = Log(failing)
    engine = make(parse_sm(VALVE_SM), model)
    engine.start()
    if failing == "pass":
        engine.send("test")
        before = ("Testing", ("Shut",))
        event = "pass"
    else:
        before = ("Shut", ())
        event = "test"
    with pytest.raises(RuntimeError, match=failing):
        engine.send(event)
    assert (engine.current_state, engine.state_stack) == before


BOOT_SM = """\
%start Boot::Booting
%map Boot
%%
Booting
    Entry { ctxt.engine.send("probe"); ctxt.engine.send("check"); }
{
    probe   push(Probe::Probing)    {}
}
%%
%map Probe
%%
Probing { check nil { fail("check"); }  done pop {} }
%%
"""


def test_a_start_that_fails_after_a_push_leaves_the_stack_empty(make: MakeEngine) -> None:
    model = Log("check")
    engine = make(parse_sm(BOOT_SM), model)
    model.engine = engine  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="check"):
        engine.start()  # 'probe' pushed, then 'check' failed: the start step failed
    assert not engine.started
    assert engine.state_stack == ()
    model.failing.clear()
    engine.start()
    assert (engine.current_state, engine.state_stack) == ("Probing", ("Booting",))


def test_commit_on_error_draws_the_same_diagram() -> None:
    """Its machinery ('_ab_begin', '_ab_end') is no action of the file's."""
    for fmt in ("mermaid", "dot"):
        assert render(parse_sm(VALVE_SM, commit_on_error=True), fmt) == render(
            parse_sm(VALVE_SM), fmt
        )
