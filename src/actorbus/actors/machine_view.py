"""What an actor shows of its state machine when its node is inspected.

:meth:`Actor.inspect_machine <actorbus.actors.Actor.inspect_machine>` returns
None for a plain actor; an actor driven by a machine (``actorbus.fsm.FsmActor``)
overrides it and returns a :class:`MachineView`: its current state, its last
transitions and, when asked, its diagram.  Both records are field structs, so a
node's inspection (``actorbus.inspection``) carries them to a peer over a link
as they are.
"""

from __future__ import annotations

from actorbus.bus.message import Field

__all__ = ["DIAGRAM_FORMATS", "MachineView", "TransitionRecord"]

#: the diagram texts :meth:`Actor.inspect_machine` may be asked for.
DIAGRAM_FORMATS = ("mermaid", "dot")


class TransitionRecord(Field, type_name="actorbus.TransitionRecord"):
    """One transition a machine took: when, on which event, from which state to which."""

    time: float
    """When it ended, seconds since the epoch."""
    event: str
    """The event (``"<start>"`` for entering the start state)."""
    source: str
    """The state before (``""`` for the start)."""
    target: str
    """The state after."""


class MachineView(Field, type_name="actorbus.MachineView"):
    """An actor's state machine, as inspection shows it."""

    state: str
    """The current state's id (``""`` before the machine started)."""
    engine: str
    """``"compiled"`` or ``"reference"``."""
    state_changes: int
    """Times the state changed since the machine started, its start included
    (events that leave the state as it was are not counted: counting them would
    cost every event)."""
    transitions: tuple[TransitionRecord, ...] = ()
    """The last changes of state, oldest first (a bounded number: the actor's
    ``fsm_history``)."""
    diagram: str | None = None
    """The machine's diagram with its current state highlighted, when asked for
    (Mermaid or DOT text), else None."""
