"""Every FSM behaviour test runs twice: on the compiled engine and on python-statemachine's.

The ``make`` fixture is the engine factory (``compile_machine`` or
``reference_machine``); a test written against it checks that the compiled engine
behaves exactly like the reference.
"""

from __future__ import annotations

import threading
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


def on_actor(actor: Any, fn: Callable[[], Any], timeout: float) -> Any:
    """Run ``fn`` on the actor's dispatcher after everything posted before it; its result.

    Fails (instead of hanging) when the dispatcher does not get to it within
    ``timeout`` seconds, as when a callback never returns.
    """
    box: list[Any] = []
    done = threading.Event()

    def task() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # handed to the test thread
            box.append(exc)
        finally:
            done.set()

    actor.post(task)
    assert done.wait(timeout), f"{actor.name}'s dispatcher did not run a task within {timeout}s"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]
