"""Errors raised by the state machine package, all under :class:`actorbus.errors.FsmError`.

They live here rather than in :mod:`actorbus.errors` because only ``actorbus.fsm`` raises
them; ``actorbus.fsm`` re-exports them.
"""

from __future__ import annotations

from actorbus.errors import FsmError

__all__ = [
    "EventArgumentError",
    "GraphvizNotFoundError",
    "TransitionNotAllowed",
    "UnsupportedMachineError",
]


class TransitionNotAllowed(FsmError):
    """An event arrived that no transition of the current state accepts.

    Raised by both engines when the current state (and the Default pseudo-state)
    declares no transition for the event, when every guard of the candidate
    transitions is false, or when the machine already reached a final state.
    The actor failure contract relies on it: the event is rejected and the machine
    stays where it was.

    Attributes:
        machine: the machine class name.
        state: the id of the current state (``None`` before ``start()``).
        event: the event that was sent.
    """

    def __init__(
        self, machine: str, state: str | None, event: str, reason: str, *, final: bool = False
    ) -> None:
        advice = (
            "the machine has stopped; do not send events after it reached a final state"
            if final
            else f"declare a transition for {event!r} in {state!r} (or a Default transition, "
            f"e.g. a 'nil' loopback to ignore it), or do not send it in this state"
        )
        super().__init__(
            f"{machine}: event {event!r} is not allowed in state {state!r}: {reason}; {advice}"
        )
        self.machine = machine
        self.state = state
        self.event = event


class EventArgumentError(FsmError, TypeError):
    """A guard or action needs an event argument that ``send()`` did not pass.

    Also a :class:`TypeError`, which is what python-statemachine's own engine raises
    in the same situation, so code catching either works with both engines.
    """


def missing_argument(
    machine: str, event: str, state: str | None, name: str, label: str
) -> EventArgumentError:
    """The error of both engines when ``label`` (a guard or action) needs the event
    argument ``name`` and ``send(event)`` did not pass it."""
    return EventArgumentError(
        f"{machine}: event {event!r} in state {state!r}: {label} needs the event argument "
        f"{name!r}, which send() did not pass; call send({event!r}, {name}=...)"
    )


class UnsupportedMachineError(FsmError):
    """The declaration uses a python-statemachine feature the compiled engine does not
    reproduce (compound or parallel states, history, eventless or delayed transitions,
    async callbacks, ...).  Use :func:`actorbus.fsm.reference_machine` for it, or
    flatten the machine."""


class GraphvizNotFoundError(FsmError):
    """A picture (SVG/PNG) was asked for but Graphviz's ``dot`` executable is missing."""
