"""SMC's state stack: what push and pop transitions of ``.sm`` machines run on.

Theory of operation
-------------------
python-statemachine's ``StateMachine`` has no state stack, and both engines run the
same python-statemachine class (the compiled engine through its
:class:`~actorbus.fsm.MachineSpec`).  So the ``.sm`` builder writes each push and pop
as ordinary transitions plus the small callbacks made here, which keep a
:class:`StateStack` on the ``machine`` every callback receives: the
:class:`~actorbus.fsm.CompiledMachine` under the compiled engine, the
python-statemachine instance under the reference engine.  Both engines attach an
empty stack, under :data:`STACK_ATTR`, before the start state is entered.

* A **push** ``S --e--> push(P)`` is a transition ``S -> P``.  Its ``before``
  callback (:func:`skip_exit`) arms a flag that S's exit gate (:func:`gated`)
  consumes, so S's Exit actions do not run (SMC rule).  P's Entry actions run.  Its
  ``after`` callback (:func:`push_state`) puts S (or the end state of
  ``Next/push(P)``) on the stack: after P's entry, so that an entry that fails
  leaves the machine in S with the stack unchanged.
* A **pop** ``P --e--> pop(t, args)`` becomes one transition ``P -> R`` per state R
  that some push can put on the stack, each guarded first by :func:`top_is` R, then
  by the user's guard (evaluated once, whichever R is on top).  P's Exit actions and
  the transition's actions run; the last ``on`` callback (:func:`pop_state`) pops R
  and arms the flag R's entry gate consumes: R's Entry actions do not run.  The
  ``after`` callback then sends ``t`` with its arguments, queued in the running step,
  through :func:`sender`: under the reference engine under the python-statemachine
  id and argument names the builder gave ``t`` (an event named like a state is
  ``sm:`` + its name there).
  A last copy, guarded by :func:`stack_empty` and the user's guard, raises
  :class:`~actorbus.errors.FsmError`: a pop with nothing to return to.

Every callback made here carries :data:`HELPER_ATTR`, so diagrams leave them out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statemachine import StateMachine

from actorbus.errors import FsmError

#: The attribute of the engine (or python-statemachine instance) holding its stack.
STACK_ATTR = "_actorbus_stack"

#: Set on the callbacks made here: the machinery of push and pop, not the user's.
HELPER_ATTR = "_actorbus_stack_helper"

#: Set on a generated transition: ``("push", state put on the stack)`` or
#: ``("pop", the pop's text)``; read into :class:`~actorbus.fsm.TransitionSpec`.
STACK_OP_ATTR = "_actorbus_stack_op"


#: The name, in a ``.sm`` file's namespace, of the function a pop's ``after``
#: callback sends its transition with (see :func:`sender`).
SEND_HELPER = "_ab_send"


class StateStack:
    """The pushed states of one running machine, bottom first, and the skip flags."""

    __slots__ = ("ids", "skip_entry", "skip_exit")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.skip_exit = False
        self.skip_entry = False

    def clear(self) -> None:
        """Empty the stack and drop the flags: a start that failed leaves nothing."""
        self.ids.clear()
        self.skip_exit = self.skip_entry = False


def stack_of(machine: Any) -> StateStack:
    """The stack an engine attached to ``machine``."""
    stack = getattr(machine, STACK_ATTR, None)
    if not isinstance(stack, StateStack):
        raise FsmError(
            f"{machine!r} has no state stack; run .sm machines with push or pop through "
            f"compile_machine() or reference_machine()"
        )
    return stack


def _helper(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    func.__name__ = func.__qualname__ = name
    setattr(func, HELPER_ATTR, True)
    return func


def skip_exit() -> Callable[..., Any]:
    """``before`` of a push that stays: the source's exit gate skips its Exit actions."""

    def arm(machine: Any) -> None:
        stack_of(machine).skip_exit = True

    return _helper(arm, "skip_exit")


def push_state(state_id: str) -> Callable[..., Any]:
    """``after`` of a push: put ``state_id`` on the stack."""

    def push(machine: Any) -> None:
        stack_of(machine).ids.append(state_id)

    return _helper(push, f"push_state_{state_id}")


def top_is(state_id: str) -> Callable[..., Any]:
    """The first guard of a pop's copy returning to ``state_id``."""

    def test(machine: Any) -> bool:
        ids = stack_of(machine).ids
        return bool(ids) and ids[-1] == state_id

    return _helper(test, f"top_is_{state_id}")


def stack_empty() -> Callable[..., Any]:
    """The first guard of a pop's last copy, which raises (:func:`empty_error`)."""

    def test(machine: Any) -> bool:
        return not stack_of(machine).ids

    return _helper(test, "stack_empty")


def empty_error(
    machine_name: str, state_id: str, pop: str, names: dict[str, str]
) -> Callable[..., Any]:
    """The last guard of a pop's last copy: the stack is empty and the pop would be taken.
    ``names`` maps python-statemachine event ids back to the file's event names."""

    def fail(event: Any) -> bool:
        event = str(getattr(event, "id", event))  # python-statemachine passes an Event
        event = names.get(event, event)
        raise FsmError(
            f"{machine_name}: {event!r} in state {state_id!r} would {pop}, but the state "
            f"stack is empty: no push transition led here, so there is no state to return "
            f"to (SMC raises too); reach {state_id!r} through a push transition, or send "
            f"{event!r} only after one"
        )

    return _helper(fail, "empty_stack_error")


def pop_state() -> Callable[..., Any]:
    """The last ``on`` callback of a pop: pop the stack; the entry gate skips Entry."""

    def pop(machine: Any) -> None:
        stack = stack_of(machine)
        stack.ids.pop()
        stack.skip_entry = True

    return _helper(pop, "pop_state")


def gated(which: str, action: Callable[..., Any] | None, label: str) -> Callable[..., Any]:
    """An entry (``which="entry"``) or exit gate: ``action(model)`` unless a push (exit)
    or pop (entry) armed the flag, which the gate clears."""
    flag = "skip_entry" if which == "entry" else "skip_exit"

    def gate(machine: Any, model: Any) -> None:
        stack = stack_of(machine)
        if getattr(stack, flag):
            setattr(stack, flag, False)
            return
        if action is not None:
            action(model)

    # diagrams and error messages show the actions' own text
    gate.__name__ = gate.__qualname__ = label or f"{which}_gate"
    if action is None:
        setattr(gate, HELPER_ATTR, True)
    return gate


def sender(event_ids: dict[str, str], aliases: dict[str, str]) -> Callable[..., None]:
    """The function a pop sends its transition with: ``send(machine, event, **kwargs)``.

    The compiled engine takes the file's event and parameter names.  A
    python-statemachine instance (the reference engine) takes the ids and argument
    names the builder gave it: ``event_ids`` (``{event: id}``) and ``aliases``
    (``{parameter: alias}``), as :class:`~actorbus.fsm.ReferenceMachine` translates
    the events sent to it.
    """

    def send(machine: Any, event: str, /, **kwargs: Any) -> None:
        if isinstance(machine, StateMachine):
            event = event_ids.get(event, event)
            kwargs = {aliases.get(name, name): value for name, value in kwargs.items()}
        machine.send(event, **kwargs)

    return _helper(send, "send_popped")
