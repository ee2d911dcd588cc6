# mypy: disable-error-code="no-untyped-call"
# (python-statemachine's State.to.itself() builder is not annotated)
"""The calculator demo's machine: ``calculator.sm`` and a Python twin behave identically.

A scripted event sequence runs on the ``.sm`` machine and on an equivalent
``Machine`` class, each on both engines; the four runs must give the same state
sequence and the same calls on a recording ``ctxt`` — and that sequence is the one
the calculator demo's ``.sm`` file describes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from demos.calculator.machine import CalculatorMachine
from statemachine import StateMachine

from actorbus.fsm import (
    TransitionNotAllowed,
    compile_machine,
    load_sm,
    machine_spec,
    reference_machine,
)

from .conftest import MakeEngine

ROOT = Path(__file__).resolve().parents[2]
CALCULATOR_SM = ROOT / "demos" / "calculator" / "calculator.sm"
WINDOW = 3


# The Python twin of calculator.sm is the demo's own declaration.


class RecordingCalculator:
    """A ctxt that records every call the machine makes, with a real moving window."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.window: list[int] = []

    def open_feeds(self) -> None:
        self.calls.append("open_feeds")

    def close_feeds(self) -> None:
        self.calls.append("close_feeds")

    def mark_average_up(self) -> None:
        self.calls.append("mark_average_up")

    def mark_average_down(self) -> None:
        self.calls.append("mark_average_down")

    def clear_window(self) -> None:
        self.window.clear()
        self.calls.append("clear_window")

    def add(self, msg: int) -> None:
        self.window = [*self.window, msg][-WINDOW:]
        self.calls.append(("add", msg))

    def window_full_after(self, msg: int) -> bool:
        self.calls.append(("window_full_after", msg))
        return len(self.window) + 1 >= WINDOW

    def publish_average(self) -> None:
        self.calls.append(("publish_average", sum(self.window) / len(self.window)))


SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("data", {"msg": 99}),  # before the feed is up: ignored
    ("feed_up", {}),
    ("data", {"msg": 1}),
    ("feed_up", {}),  # repeated UP: ignored
    ("data", {"msg": 2}),
    ("data", {"msg": 3}),  # window full: Publishing
    ("data", {"msg": 4}),
    ("feed_down", {}),
    ("data", {"msg": 5}),  # feed down: ignored
    ("feed_down", {}),  # down again: FeedDown re-entered
    ("feed_up", {}),
    ("data", {"msg": 6}),
    ("shutdown", {}),
]

EXPECTED_STATES = [
    "Initializing",
    "Initializing",
    "Collecting",
    "Collecting",
    "Collecting",
    "Collecting",
    "Publishing",
    "Publishing",
    "FeedDown",
    "FeedDown",
    "FeedDown",
    "Collecting",
    "Collecting",
    "Shutdown",
]

EXPECTED_CALLS: list[Any] = [
    "open_feeds",
    ("window_full_after", 1),
    ("add", 1),
    ("window_full_after", 2),
    ("add", 2),
    ("window_full_after", 3),
    ("add", 3),
    "mark_average_up",
    ("publish_average", 2.0),
    ("add", 4),
    ("publish_average", 3.0),
    "mark_average_down",
    "clear_window",
    "mark_average_down",
    "clear_window",
    ("window_full_after", 6),
    ("add", 6),
    "close_feeds",
]


def run(engine_factory: Any, declaration: Any) -> tuple[list[str], list[Any]]:
    ctxt = RecordingCalculator()
    engine = engine_factory(declaration, ctxt)
    engine.start()
    states = [engine.current_state]
    for event, kwargs in SCRIPT:
        engine.send(event, **kwargs)
        states.append(engine.current_state)
    assert engine.is_final
    with pytest.raises(TransitionNotAllowed):
        engine.send("data", msg=7)
    return states, ctxt.calls


@pytest.mark.parametrize("declaration", ["sm", "python"])
def test_calculator_follows_the_spec(make: MakeEngine, declaration: str) -> None:
    machine = load_sm(CALCULATOR_SM) if declaration == "sm" else CalculatorMachine
    states, calls = run(make, machine)
    assert states == EXPECTED_STATES
    assert calls == EXPECTED_CALLS


def test_sm_and_python_declarations_are_identical_on_both_engines() -> None:
    runs = {
        (name, engine.__name__): run(engine, machine)
        for name, machine in (("sm", load_sm(CALCULATOR_SM)), ("python", CalculatorMachine))
        for engine in (compile_machine, reference_machine)
    }
    first = next(iter(runs.values()))
    assert all(result == first for result in runs.values()), runs


def test_calculator_machines_have_the_same_shape() -> None:
    sm_spec = load_sm(CALCULATOR_SM).spec
    py_spec = machine_spec(CalculatorMachine)
    for spec in (sm_spec, py_spec):
        assert [s.id for s in spec.states] == [
            "Initializing",
            "FeedDown",
            "Collecting",
            "Publishing",
            "Shutdown",
        ]
        assert spec.start == "Initializing"
        assert [s.id for s in spec.states if s.final] == ["Shutdown"]
        assert sorted(spec.events) == ["data", "feed_down", "feed_up", "shutdown"]
    for state in sm_spec.states:
        shape = [(t.events, t.target, t.loopback, t.from_default) for t in state.transitions]
        twin = py_spec.state(state.id)
        assert shape == [(t.events, t.target, t.loopback, t.from_default) for t in twin.transitions]


@pytest.mark.parametrize("path", sorted(ROOT.glob("demos/**/*.sm")), ids=lambda p: p.name)
def test_every_demo_machine_loads(path: Path) -> None:
    machine = load_sm(path)
    assert issubclass(machine.machine_class, StateMachine)
    assert machine.spec.states and machine.spec.start
