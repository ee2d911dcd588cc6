# mypy: disable-error-code="no-untyped-call"
# (python-statemachine's State.to.itself() builder is not annotated)
"""Semantics of both engines on machines declared in Python (see conftest: ``make``).

Each test runs on the compiled engine and on python-statemachine's own engine; the
assertions are the same, so passing both proves the compiled engine matches.
"""

from __future__ import annotations

from typing import Any

import pytest
from statemachine import State, StateChart, StateMachine

from actorbus.errors import FsmError
from actorbus.fsm import (
    CompiledMachine,
    DefaultState,
    FsmEngine,
    Machine,
    TransitionNotAllowed,
    UnsupportedMachineError,
    compile_machine,
    machine_spec,
    reference_machine,
)

from .conftest import MakeEngine


class Recorder:
    """A model that records every callback and the engine state it saw."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.engine: FsmEngine | None = None

    def seen(self) -> str | None:
        return self.engine.current_state if self.engine is not None else None

    def note(self, name: str) -> None:
        self.calls.append((name, self.seen()))


def started(make: MakeEngine, declaration: Any, model: Any, **kwargs: Any) -> FsmEngine:
    engine = make(declaration, model)
    if isinstance(model, Recorder):
        model.engine = engine
    engine.start(**kwargs)
    return engine


# ------------------------------------------------------------------ start


class Lamp(StateMachine):
    Off = State(initial=True, enter="enter_off", exit="exit_off")
    On = State(enter="enter_on", exit="exit_on")
    switch = Off.to(On, before="before_switch", on="on_switch", after="after_switch") | On.to(
        Off, on="on_switch"
    )


class LampModel(Recorder):
    def enter_off(self, event: str) -> None:
        self.calls.append(("enter_off", str(event), self.seen()))

    def exit_off(self) -> None:
        self.note("exit_off")

    def enter_on(self) -> None:
        self.note("enter_on")

    def exit_on(self) -> None:
        self.note("exit_on")

    def before_switch(self) -> None:
        self.note("before")

    def on_switch(self) -> None:
        self.note("on")

    def after_switch(self) -> None:
        self.note("after")


def test_start_enters_the_start_state_and_runs_its_entry_actions(make: MakeEngine) -> None:
    model = LampModel()
    engine = make(Lamp, model)
    model.engine = engine
    assert not engine.started
    engine.start()
    assert engine.started
    assert engine.current_state == "Off"
    assert model.calls == [("enter_off", "__initial__", "Off")]


def test_send_before_start_and_second_start_are_errors(make: MakeEngine) -> None:
    engine = make(Lamp, LampModel())
    with pytest.raises(FsmError, match=r"start\(\)"):
        engine.send("switch")
    with pytest.raises(FsmError, match="not started"):
        _ = engine.current_state
    engine.start()
    with pytest.raises(FsmError, match="already started"):
        engine.start()


def test_external_transition_order_exit_actions_switch_entry(make: MakeEngine) -> None:
    model = LampModel()
    engine = started(make, Lamp, model)
    model.calls.clear()
    engine.send("switch")
    # before and exit see the source, on still the source, entry and after the target
    assert model.calls == [
        ("before", "Off"),
        ("exit_off", "Off"),
        ("on", "Off"),
        ("enter_on", "On"),
        ("after", "On"),
    ]
    assert engine.current_state == "On"


# --------------------------------------------------------------- loopbacks


class Counter(StateMachine):
    Idle = State(initial=True, enter="enter_idle", exit="exit_idle")
    tick = Idle.to.itself(internal=True, on="count")
    again = Idle.to.itself(on="count")
    poke = Idle.to(None, on="count")


class CounterModel(Recorder):
    def enter_idle(self) -> None:
        self.note("enter")

    def exit_idle(self) -> None:
        self.note("exit")

    def count(self) -> None:
        self.note("count")


def test_internal_loopback_runs_no_exit_or_entry(make: MakeEngine) -> None:
    model = CounterModel()
    engine = started(make, Counter, model)
    model.calls.clear()
    engine.send("tick")
    engine.send("poke")
    assert model.calls == [("count", "Idle"), ("count", "Idle")]
    assert engine.current_state == "Idle"


def test_external_self_transition_runs_exit_and_entry(make: MakeEngine) -> None:
    model = CounterModel()
    engine = started(make, Counter, model)
    model.calls.clear()
    engine.send("again")
    assert model.calls == [("exit", "Idle"), ("count", "Idle"), ("enter", "Idle")]


def test_loopback_spec_flags() -> None:
    spec = machine_spec(Counter)
    tick, again, poke = spec.state("Idle").transitions
    assert tick.loopback and tick.internal and tick.target == "Idle"
    assert not again.loopback and again.target == "Idle"
    assert poke.loopback and poke.target is None


# ------------------------------------------------------------------ guards


class Gate(StateMachine):
    Closed = State(initial=True)
    Small = State()
    Large = State()
    Other = State()
    reset = Small.to(Closed) | Large.to(Closed) | Other.to(Closed)
    push = (
        Closed.to(Small, cond="is_small")
        | Closed.to(Large, cond=["is_big", "is_heavy"])
        | Closed.to(Other, unless="is_blocked")
    )
    strict = Closed.to(Small, cond="is_small") | Closed.to(Large, cond="is_big")
    mixed = Closed.to(Small, cond="is_small and not is_big") | Closed.to(
        Large, cond="is_big or is_heavy"
    )
    compare = Closed.to(Small, cond="size == 1") | Closed.to(Large, cond="size >= 2")
    flag = Closed.to(Small, cond="ready_flag")


class GateModel(Recorder):
    def __init__(self, **answers: Any) -> None:
        super().__init__()
        self.answers = answers
        self.ready_flag = answers.get("ready_flag", False)

    def _ask(self, name: str) -> Any:
        self.calls.append(name)
        return self.answers.get(name, False)

    def is_small(self) -> Any:
        return self._ask("is_small")

    def is_big(self) -> Any:
        return self._ask("is_big")

    def is_heavy(self) -> Any:
        return self._ask("is_heavy")

    def is_blocked(self) -> Any:
        return self._ask("is_blocked")

    def size(self) -> Any:
        return self._ask("size")


@pytest.mark.parametrize(
    ("answers", "target", "asked"),
    [
        ({"is_small": True, "is_big": True, "is_heavy": True}, "Small", ["is_small"]),
        ({"is_big": True, "is_heavy": True}, "Large", ["is_small", "is_big", "is_heavy"]),
        ({"is_big": True}, "Other", ["is_small", "is_big", "is_heavy", "is_blocked"]),
        ({}, "Other", ["is_small", "is_big", "is_blocked"]),
    ],
)
def test_first_guard_that_holds_wins_in_declaration_order(
    make: MakeEngine, answers: dict[str, Any], target: str, asked: list[str]
) -> None:
    model = GateModel(**answers)
    engine = started(make, Gate, model)
    engine.send("push")
    assert engine.current_state == target
    assert model.calls == asked  # guards are evaluated lazily, in order


def test_engines_of_one_class_stay_bound_to_their_own_model(make: MakeEngine) -> None:
    first = GateModel(is_small=True)
    second = GateModel(is_small=True)
    second.is_small = lambda: False  # type: ignore[method-assign]  # instance override
    engines = [started(make, Gate, model) for model in (first, second, GateModel(is_big=True))]
    for engine in engines:
        engine.send("push")
    assert [e.current_state for e in engines] == ["Small", "Other", "Other"]
    assert first.calls == ["is_small"]
    assert second.calls == ["is_big", "is_blocked"]


def test_all_guards_false_raises_and_stays(make: MakeEngine) -> None:
    model = GateModel(is_blocked=True)
    engine = started(make, Gate, model)
    with pytest.raises(TransitionNotAllowed) as caught:
        engine.send("strict")
    assert (caught.value.machine, caught.value.state, caught.value.event) == (
        "Gate",
        "Closed",
        "strict",
    )
    assert engine.current_state == "Closed"


@pytest.mark.parametrize(
    ("answers", "target"),
    [
        ({"is_small": True}, "Small"),
        ({"is_small": True, "is_big": True}, "Large"),
        ({"is_heavy": True}, "Large"),
    ],
)
def test_boolean_guard_expressions(make: MakeEngine, answers: dict[str, Any], target: str) -> None:
    engine = started(make, Gate, GateModel(**answers))
    engine.send("mixed")
    assert engine.current_state == target


@pytest.mark.parametrize(("size", "target"), [(1, "Small"), (3, "Large")])
def test_comparison_guards(make: MakeEngine, size: int, target: str) -> None:
    engine = started(make, Gate, GateModel(size=size))
    engine.send("compare")
    assert engine.current_state == target


@pytest.mark.parametrize(("ready", "target"), [(True, "Small"), (False, None)])
def test_attribute_guard_is_read_at_each_event(
    make: MakeEngine, ready: bool, target: str | None
) -> None:
    model = GateModel()
    engine = started(make, Gate, model)
    model.ready_flag = ready
    if target is None:
        with pytest.raises(TransitionNotAllowed):
            engine.send("flag")
    else:
        engine.send("flag")
        assert engine.current_state == target


class Vetted(StateMachine):
    Draft = State(initial=True)
    Published = State()
    publish = Draft.to(Published, validators="check", cond="approved")
    back = Published.to(Draft)


class VettedModel:
    def __init__(self, valid: bool) -> None:
        self.valid = valid
        self.approved = True

    def check(self, reviewer: str) -> None:
        if not self.valid:
            raise ValueError(f"{reviewer} rejected it")


def test_validators_run_before_guards_and_their_error_propagates(make: MakeEngine) -> None:
    engine = started(make, Vetted, VettedModel(valid=False))
    with pytest.raises(ValueError, match="ann rejected it"):
        engine.send("publish", reviewer="ann")
    assert engine.current_state == "Draft"
    ok = started(make, Vetted, VettedModel(valid=True))
    ok.send("publish", reviewer="bob")
    assert ok.current_state == "Published"


# ----------------------------------------------------------------- Default


class Phone(Machine):
    Idle = State(initial=True, enter="enter", exit="leave")
    Ringing = State(enter="enter", exit="leave")
    Talking = State(enter="enter", exit="leave")
    Broken = State(final=True, enter="enter")
    Default = DefaultState()

    call = Idle.to(Ringing)
    answer = Ringing.to(Talking, cond="wants_to_talk")
    hang_up = Talking.to(Idle) | Default.to(Idle, on="log")
    noise = Default.to.itself(internal=True, on="log")
    smash = Default.to(Broken, on="log")


class PhoneModel(Recorder):
    def __init__(self, talk: bool = True) -> None:
        super().__init__()
        self.talk = talk

    def enter(self, state: Any) -> None:
        self.calls.append(("enter", state.id))

    def leave(self, state: Any) -> None:
        self.calls.append(("leave", state.id))

    def log(self, event: str, source: Any) -> None:
        self.calls.append(("log", str(event), source.id))

    def wants_to_talk(self) -> bool:
        return self.talk


def test_default_transition_applies_where_the_state_does_not_define_the_event(
    make: MakeEngine,
) -> None:
    model = PhoneModel()
    engine = started(make, Phone, model)
    engine.send("call")
    model.calls.clear()
    engine.send("hang_up")  # Ringing has no hang_up: Default's applies
    assert engine.current_state == "Idle"
    assert model.calls == [("leave", "Ringing"), ("log", "hang_up", "Ringing"), ("enter", "Idle")]


def test_state_transition_overrides_default(make: MakeEngine) -> None:
    model = PhoneModel()
    engine = started(make, Phone, model)
    engine.send("call")
    engine.send("answer")
    model.calls.clear()
    engine.send("hang_up")  # Talking's own hang_up, not Default's (no log)
    assert model.calls == [("leave", "Talking"), ("enter", "Idle")]


def test_default_loopback_runs_in_the_current_state_without_exit_or_entry(make: MakeEngine) -> None:
    model = PhoneModel()
    engine = started(make, Phone, model)
    engine.send("call")
    model.calls.clear()
    engine.send("noise")
    assert engine.current_state == "Ringing"
    assert model.calls == [("log", "noise", "Ringing")]


def test_default_applies_when_all_guards_of_the_state_fail(make: MakeEngine) -> None:
    class Strict(Machine):
        Waiting = State(initial=True)
        Done = State()
        Default = DefaultState()
        go = Waiting.to(Done, cond="ready") | Default.to.itself(internal=True, on="ignored")
        back = Done.to(Waiting)

    class Model:
        def __init__(self) -> None:
            self.ignored_count = 0
            self.ready = False

        def ignored(self) -> None:
            self.ignored_count += 1

    model = Model()
    engine = started(make, Strict, model)
    engine.send("go")  # the guard fails: SMC falls through to Default's go
    assert (engine.current_state, model.ignored_count) == ("Waiting", 1)
    model.ready = True
    engine.send("go")
    assert (engine.current_state, model.ignored_count) == ("Done", 1)


@pytest.mark.parametrize("path", [[], ["call"], ["call", "answer"]])
def test_global_shutdown_works_from_every_state(make: MakeEngine, path: list[str]) -> None:
    model = PhoneModel()
    engine = started(make, Phone, model)
    for event in path:
        engine.send(event)
    before = engine.current_state
    model.calls.clear()
    engine.send("smash")
    assert engine.current_state == "Broken"
    assert engine.is_final
    assert model.calls == [("leave", before), ("log", "smash", before), ("enter", "Broken")]


def test_final_state_rejects_every_event(make: MakeEngine) -> None:
    engine = started(make, Phone, PhoneModel())
    engine.send("smash")
    with pytest.raises(TransitionNotAllowed, match="final state"):
        engine.send("noise")  # Default transitions do not apply to a final state


def test_default_state_is_removed_and_expanded() -> None:
    spec = machine_spec(Phone)
    assert [s.id for s in spec.states] == ["Idle", "Ringing", "Talking", "Broken"]
    assert not hasattr(Phone, "Default")
    ringing = spec.state("Ringing")
    own = [t for t in ringing.transitions if not t.from_default]
    copied = [t for t in ringing.transitions if t.from_default]
    assert [t.events for t in own] == [("answer",)]
    assert [t.events for t in copied] == [("hang_up",), ("noise",), ("smash",)]
    assert spec.state("Broken").transitions == ()
    assert [t.events for t in spec.default_transitions] == [("hang_up",), ("noise",), ("smash",)]


# ---------------------------------------------------------------- wildcards


class Catcher(Machine):
    Open = State(initial=True)
    Closed = State()
    Default = DefaultState()
    close = Open.to(Closed, on="closing")
    reopen = Closed.to(Open)
    any_open = Open.to.itself(internal=True, event="*", on="caught")
    any_default = Default.to.itself(internal=True, event="*", on="fallback")


class CatcherModel:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def closing(self) -> None:
        self.seen.append(("closing", ""))

    def caught(self, event: str) -> None:
        self.seen.append(("caught", str(event)))

    def fallback(self, event: str) -> None:
        self.seen.append(("fallback", str(event)))


def test_wildcard_transitions_catch_unhandled_events_after_named_ones(make: MakeEngine) -> None:
    model = CatcherModel()
    engine = started(make, Catcher, model)
    engine.send("whatever")  # Open's own wildcard
    engine.send("close")  # named transition wins over wildcards
    engine.send("again")  # Closed: only Default's wildcard
    assert model.seen == [("caught", "whatever"), ("closing", ""), ("fallback", "again")]
    assert engine.current_state == "Closed"


# ---------------------------------------------------------- no transition


def test_event_without_transition_raises_naming_machine_state_and_event(make: MakeEngine) -> None:
    engine = started(make, Lamp, LampModel())
    with pytest.raises(TransitionNotAllowed) as caught:
        engine.send("explode")
    error = caught.value
    assert isinstance(error, FsmError)
    assert (error.machine, error.state, error.event) == ("Lamp", "Off", "explode")
    assert "'explode'" in str(error) and "'Off'" in str(error) and "Lamp" in str(error)
    assert engine.current_state == "Off"


# ------------------------------------------------------------ action errors


class Boom(Exception):
    pass


class Fragile(StateMachine):
    A = State(initial=True)
    B = State(enter="enter_b")
    go = A.to(B, on="act", after="later")
    back = B.to(A)


class FragileModel:
    def __init__(self, fail_in: str) -> None:
        self.fail_in = fail_in
        self.error = Boom(fail_in)

    def _maybe(self, where: str) -> None:
        if self.fail_in == where:
            raise self.error

    def act(self) -> None:
        self._maybe("act")

    def enter_b(self) -> None:
        self._maybe("enter")

    def later(self) -> None:
        self._maybe("after")


@pytest.mark.parametrize(("where", "state"), [("act", "A"), ("enter", "A"), ("after", "B")])
def test_action_exception_propagates_unchanged(make: MakeEngine, where: str, state: str) -> None:
    model = FragileModel(where)
    engine = started(make, Fragile, model)
    with pytest.raises(Boom) as caught:
        engine.send("go")
    assert caught.value is model.error
    # python-statemachine restores the source on a failure before/in entry, not in after
    assert engine.current_state == state


# ------------------------------------------------------ argument injection


class Injected(StateMachine):
    Start = State(initial=True, enter="on_start")
    End = State(enter="arrived")
    go = Start.to(End, cond="guard", on=["named", "defaults", "catch_all", "context"])
    back = End.to(Start)


class InjectedModel:
    def __init__(self) -> None:
        self.got: dict[str, Any] = {}

    def on_start(self, event: str, target: Any, state: Any, greeting: str = "none") -> None:
        self.got["start"] = (str(event), target.id, state.id, greeting)

    def guard(self, amount: int, event: str, source: Any, target: Any) -> bool:
        self.got["guard"] = (amount, str(event), source.id, target.id)
        return True

    def named(self, amount: int, note: str, state: Any, model: Any, ctxt: Any) -> None:
        self.got["named"] = (amount, note, state.id, model is self, ctxt is self)

    def defaults(self, missing: str = "default", *, amount: int = 0) -> None:
        self.got["defaults"] = (missing, amount)

    def catch_all(self, *args: Any, **kwargs: Any) -> None:
        self.got["catch_all"] = (args, kwargs)

    def context(self, machine: Any) -> None:
        self.got["machine"] = (callable(machine.send), machine.model is self)

    def arrived(self, source: Any, target: Any, state: Any) -> None:
        self.got["arrived"] = (source.id, target.id, state.id)


def test_arguments_are_injected_by_parameter_name(make: MakeEngine) -> None:
    model = InjectedModel()
    engine = started(make, Injected, model, greeting="hi")
    engine.send("go", amount=3, note="n")
    got = model.got
    assert got["start"] == ("__initial__", "Start", "Start", "hi")
    assert got["guard"] == (3, "go", "Start", "End")
    assert got["named"] == (3, "n", "Start", True, True)
    assert got["defaults"] == ("default", 3)
    args, kwargs = got["catch_all"]
    assert args == ()
    assert kwargs["amount"] == 3 and kwargs["note"] == "n" and kwargs["event"] == "go"
    assert kwargs["source"] == "Start" and kwargs["target"] == "End"
    assert kwargs["model"] is model and kwargs["ctxt"] is model
    assert got["machine"] == (True, True)
    assert got["arrived"] == ("Start", "End", "End")


def test_missing_event_argument_is_a_type_error(make: MakeEngine) -> None:
    engine = started(make, Injected, InjectedModel())
    with pytest.raises(TypeError, match="amount"):
        engine.send("go", note="n")
    assert engine.current_state == "Start"


# --------------------------------------------------------- run to completion


class Chain(StateMachine):
    A = State(initial=True)
    B = State(enter="enter_b")
    C = State(enter="enter_c")
    go = A.to(B, on="kick")
    step = B.to(C)
    reset = C.to(A)


class ChainModel(Recorder):
    def kick(self, machine: Any) -> None:
        machine.send("step")  # queued until this transition completes
        self.note("kick")

    def enter_b(self) -> None:
        self.note("enter_b")

    def enter_c(self) -> None:
        self.note("enter_c")


def test_event_sent_from_an_action_runs_after_the_current_transition(make: MakeEngine) -> None:
    model = ChainModel()
    engine = started(make, Chain, model)
    engine.send("go")
    assert model.calls == [("kick", "A"), ("enter_b", "B"), ("enter_c", "C")]
    assert engine.current_state == "C"


# ------------------------------------------------------------ name lookup


class WithMethods(StateMachine):
    Start = State(initial=True)
    End = State()
    go = Start.to(End, cond="allowed", on="shared")
    back = End.to(Start, on="notify")

    def allowed(self) -> bool:
        return bool(self.model.open)

    def shared(self) -> None:
        self.model.trace.append("machine.shared")

    def notify(self, amount: int = 0) -> None:
        self.model.trace.append(f"notify {amount}")


class SharedModel:
    def __init__(self) -> None:
        self.open = True
        self.trace: list[str] = []

    def shared(self) -> None:
        self.trace.append("model.shared")


def test_names_resolve_on_machine_class_then_model_both_called(make: MakeEngine) -> None:
    model = SharedModel()
    engine = started(make, WithMethods, model)
    engine.send("go")
    engine.send("back", amount=2)
    assert model.trace == ["machine.shared", "model.shared", "notify 2"]


class Conventional(StateMachine):
    Start = State(initial=True)
    End = State()
    go = Start.to(End)
    back = End.to(Start)


class ConventionModel:
    def __init__(self) -> None:
        self.trace: list[str] = []

    def before_go(self) -> None:
        self.trace.append("before_go")

    def on_exit_Start(self) -> None:
        self.trace.append("on_exit_Start")

    def on_go(self) -> None:
        self.trace.append("on_go")

    def on_enter_state(self, state: Any) -> None:
        self.trace.append(f"on_enter_state {state.id}")

    def on_enter_End(self) -> None:
        self.trace.append("on_enter_End")

    def after_transition(self, event: str) -> None:
        self.trace.append(f"after_transition {event}")


def test_python_statemachine_naming_conventions(make: MakeEngine) -> None:
    model = ConventionModel()
    engine = started(make, Conventional, model)
    model.trace.clear()
    engine.send("go")
    assert model.trace == [
        "before_go",
        "on_exit_Start",
        "on_go",
        "on_enter_state End",
        "on_enter_End",
        "after_transition go",
    ]


def test_undefined_callback_name_is_an_fsm_error(make: MakeEngine) -> None:
    class Broken(StateMachine):
        A = State(initial=True)
        B = State()
        go = A.to(B, on="nowhere_to_be_found")
        back = B.to(A)

    with pytest.raises(FsmError, match="nowhere_to_be_found"):
        started(make, Broken, object())


# ----------------------------------------------------------- unsupported


class Nested(StateMachine):
    class Outer(State.Compound):
        inner = State(initial=True)
        other = State()
        hop = inner.to(other)

    done = State(final=True)
    finish = Outer.to(done)


def test_compound_states_are_refused_by_the_compiled_engine_only() -> None:
    with pytest.raises(UnsupportedMachineError, match="Outer"):
        compile_machine(Nested)
    engine = reference_machine(Nested)
    engine.start()
    engine.send("finish")
    assert engine.is_final
    with pytest.raises(UnsupportedMachineError):
        _ = engine.spec


def test_statechart_is_refused(make: MakeEngine) -> None:
    class Chart(StateChart[Any]):
        A = State(initial=True)
        B = State(final=True)
        go = A.to(B)

    with pytest.raises(FsmError, match="StateChart"):
        make(Chart)


def test_both_engines_offer_the_engine_interface() -> None:
    engines: list[FsmEngine] = [compile_machine(Lamp, LampModel()), reference_machine(Lamp)]
    assert isinstance(engines[0], CompiledMachine)
    for engine in engines:
        for member in ("spec", "model", "start", "send", "current_state", "started", "is_final"):
            assert hasattr(type(engine), member) or hasattr(engine, member), member
        assert "Lamp" in repr(engine)


class Relay(StateMachine):
    A = State(initial=True)
    B = State()
    C = State()
    go = A.to(B, on="hop")
    hop = B.to(C, cond="In('B')")
    back = C.to(A, cond="In('B')") | C.to(A, cond="not In('B')", on="noted")


class RelayModel:
    def __init__(self) -> None:
        self.notes: list[int] = []

    def noted(self, n: int = 0) -> None:
        self.notes.append(n)


def test_action_naming_an_event_sends_it_and_in_guards(make: MakeEngine) -> None:
    model = RelayModel()
    engine = started(make, Relay, model)
    engine.send("go")  # the action 'hop' is an event: queued, then taken from B
    assert engine.current_state == "C"
    engine.send("back", n=5)
    assert engine.current_state == "A"
    assert model.notes == [5]
