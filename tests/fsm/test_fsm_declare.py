# mypy: disable-error-code="no-untyped-call"
# (python-statemachine's State.to.itself() builder is not annotated)
"""Declaring machines in Python: Default pseudo-state rules, spec details, public API."""

from __future__ import annotations

import pytest
from statemachine import State, StateMachine

import actorbus.fsm
from actorbus.errors import FsmError
from actorbus.fsm import DefaultState, Machine, MachineSpec, StateSpec, machine_spec

from .conftest import MakeEngine


def test_public_api_is_exported() -> None:
    assert sorted(actorbus.fsm.__all__) == [
        "CallbackRef",
        "CompiledMachine",
        "Declaration",
        "DefaultState",
        "DiagramFormat",
        "EventArgumentError",
        "FsmActor",
        "FsmEngine",
        "GraphvizNotFoundError",
        "Machine",
        "MachineSpec",
        "ReferenceMachine",
        "SmMachine",
        "StateSpec",
        "TransitionNotAllowed",
        "TransitionSpec",
        "UnsupportedMachineError",
        "compile_machine",
        "load_sm",
        "machine_spec",
        "parse_sm",
        "reference_machine",
        "render",
        "write_diagram",
    ]
    for name in actorbus.fsm.__all__:
        assert getattr(actorbus.fsm, name) is not None, name


def test_two_default_states_are_refused() -> None:
    with pytest.raises(FsmError, match="more than one DefaultState"):

        class Twice(Machine):
            A = State(initial=True)
            D1 = DefaultState()
            D2 = DefaultState()
            go = D1.to(A)


def test_default_state_without_event_is_refused() -> None:
    with pytest.raises(FsmError, match="has no event"):

        class Nameless(Machine):
            A = State(initial=True)
            B = State()
            Default = DefaultState()
            go = A.to(B)
            Default.to(A)


def test_transition_into_default_is_refused() -> None:
    with pytest.raises(FsmError, match="into the Default pseudo-state"):

        class Into(Machine):
            A = State(initial=True)
            Default = DefaultState()
            go = A.to(Default)


def test_default_with_explicit_event_and_unless(make: MakeEngine) -> None:
    class Explicit(Machine):
        A = State(initial=True)
        B = State()
        Default = DefaultState()
        back = B.to(A)
        Default.to(B, event="jump", unless="blocked")

    class Model:
        blocked = False

    engine = make(Explicit, Model())
    engine.start()
    engine.send("jump")
    assert engine.current_state == "B"


def test_default_re_entering_the_current_state(make: MakeEngine) -> None:
    class Reenter(Machine):
        A = State(initial=True, enter="count")
        Default = DefaultState()
        reset = Default.to.itself()

    class Model:
        entries = 0

        def count(self) -> None:
            self.entries += 1

    model = Model()
    engine = make(Reenter, model)
    engine.start()
    engine.send("reset")
    assert model.entries == 2  # external self-transition: exit and entry run
    spec = machine_spec(Reenter)
    (declared,) = spec.default_transitions
    assert (declared.source, declared.target, declared.loopback) == (None, "Default", False)


def test_plain_state_machine_needs_no_machine_base(make: MakeEngine) -> None:
    class Plain(StateMachine):
        A = State(initial=True)
        B = State()
        go = A.to(B) | B.to(A)

    engine = make(Plain)
    engine.start()
    engine.send("go")
    assert engine.current_state == "B"


def test_spec_is_cached_and_states_compare_to_ids() -> None:
    class Small(Machine):
        A = State(initial=True)
        B = State(final=True)
        go = A.to(B)

    spec = machine_spec(Small)
    assert isinstance(spec, MachineSpec)
    assert machine_spec(Small) is spec
    assert machine_spec(spec) is spec
    state = spec.state("A")
    assert isinstance(state, StateSpec)
    assert state == "A" and state != "B" and str(state) == "A"
    lookup: dict[object, int] = {state: 1}
    assert lookup["A"] == 1
    assert spec.events == ("go",)
    assert [t.events for t in spec.transitions()] == [("go",)]
    with pytest.raises(FsmError, match="no state 'C'; the states are: A, B"):
        spec.state("C")


def test_machine_spec_rejects_other_objects() -> None:
    with pytest.raises(FsmError, match="expected a python-statemachine StateMachine subclass"):
        machine_spec(42)  # type: ignore[arg-type]
