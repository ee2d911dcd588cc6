"""Every FSM behaviour test runs twice: on the compiled engine and on python-statemachine's.

The ``make`` fixture is the engine factory (``compile_machine`` or
``reference_machine``); a test written against it checks that the compiled engine
behaves exactly like the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from actorbus.fsm import FsmEngine, compile_machine, reference_machine

MakeEngine = Callable[..., FsmEngine]


@pytest.fixture(params=["compiled", "reference"])
def make(request: pytest.FixtureRequest) -> MakeEngine:
    """``make(declaration, model)`` builds an engine of the parametrized kind."""
    factory: Callable[..., Any] = (
        compile_machine if request.param == "compiled" else reference_machine
    )
    return factory
