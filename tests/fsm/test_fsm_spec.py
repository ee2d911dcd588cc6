"""``actorbus.fsm.spec.machine_spec``'s old import: it warns and names the new one."""

from __future__ import annotations

import pytest
from statemachine import State, StateMachine

from actorbus.errors import FsmError
from actorbus.fsm import machine_spec
from actorbus.fsm import spec as spec_module


class Door(StateMachine):
    closed = State(initial=True)
    opened = State()
    open = closed.to(opened)
    close = opened.to(closed)


def test_the_old_machine_spec_warns_and_gives_the_same_spec() -> None:
    with pytest.warns(DeprecationWarning, match="from actorbus.fsm import machine_spec"):
        old = spec_module.machine_spec(Door)
    assert old is machine_spec(Door)


def test_the_old_machine_spec_sends_a_path_to_the_new_one() -> None:
    with (
        pytest.warns(DeprecationWarning, match="machine_spec moved"),
        pytest.raises(FsmError, match="import it from actorbus.fsm"),
    ):
        spec_module.machine_spec("door.sm")
