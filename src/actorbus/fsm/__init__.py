"""State machines for actors: declare with python-statemachine or SMC ``.sm``, run compiled.

Theory of operation
-------------------
A machine is *declared* once — a python-statemachine ``StateMachine`` class (derive
from :class:`Machine` to get SMC's Default pseudo-state), or a ``.sm`` file loaded by
:func:`load_sm` — and turned into a flat, neutral :class:`MachineSpec`.  It is
*executed* by an engine bound to a model (the actor; ``ctxt`` in ``.sm`` code):

* :func:`compile_machine` (the default) generates per-state dispatch tables with every
  guard and action resolved once; a send costs a dict lookup and a call;
* :func:`reference_machine` runs python-statemachine's own engine behind the same
  interface, the yardstick every FSM test compares against.

Both engines: ``start()``, ``send(event, **kwargs)``, ``current_state``, ``is_final``.
An event nothing accepts raises :class:`TransitionNotAllowed`; exceptions of guards and
actions propagate unchanged.  :func:`render` draws any machine as Mermaid, DOT, SVG or
PNG with the current state highlighted.  See ``docs/fsm.md``.
"""

from actorbus.fsm._declaration import machine_spec
from actorbus.fsm._errors import (
    EventArgumentError,
    GraphvizNotFoundError,
    TransitionNotAllowed,
    UnsupportedMachineError,
)
from actorbus.fsm.declare import DefaultState, Machine
from actorbus.fsm.diagram import DiagramFormat, render, write_diagram
from actorbus.fsm.engine import CompiledMachine, FsmEngine, compile_machine
from actorbus.fsm.reference import ReferenceMachine, reference_machine
from actorbus.fsm.smc import SmMachine, load_sm, parse_sm
from actorbus.fsm.spec import (
    CallbackRef,
    Declaration,
    MachineSpec,
    StateSpec,
    TransitionSpec,
)

__all__ = [
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

from actorbus.fsm.actor import FsmActor
