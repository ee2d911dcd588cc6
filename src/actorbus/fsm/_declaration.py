"""Any machine declaration -> its :class:`~actorbus.fsm.spec.MachineSpec`.

The one function the engines, the diagrams and :class:`~actorbus.fsm.FsmActor`
call: a ``.sm`` path is read by :mod:`actorbus.fsm.smc` (whose builder needs
:mod:`actorbus.fsm.spec`, so the spec module cannot read paths itself),
anything else goes to :func:`~actorbus.fsm.spec.declared_spec`.
"""

from __future__ import annotations

import os

from actorbus.fsm.smc import load_sm
from actorbus.fsm.spec import Declaration, MachineSpec, declared_spec

__all__ = ["machine_spec"]


def machine_spec(declaration: Declaration) -> MachineSpec:
    """Build (once, then cached) the :class:`MachineSpec` of a declaration.

    Args:
        declaration: a python-statemachine ``StateMachine`` subclass (plain or
            :class:`~actorbus.fsm.Machine`), an :class:`~actorbus.fsm.SmMachine`, a
            :class:`MachineSpec` (returned as is) or the path of a ``.sm`` file.

    Raises:
        FsmError: the declaration is not one of those.
        UnsupportedMachineError: it uses a feature outside the flat model.
    """
    if isinstance(declaration, (str, os.PathLike)):
        return load_sm(declaration).spec
    return declared_spec(declaration)
