"""Declaring machines in Python: :class:`Machine` and the :class:`DefaultState` marker.

Theory of operation
-------------------
A machine is a python-statemachine ``StateMachine`` class.  Two SMC ideas have no
direct python-statemachine spelling, so :class:`Machine` adds them *before*
python-statemachine's metaclass validates the class:

* **The Default pseudo-state.**  Declare ``Default = DefaultState()`` in the class body
  and give it transitions like any state (``feed_down = Default.to(FeedDown)``,
  ``data = Default.to.itself(internal=True)``).  When the class statement runs, the
  metaclass copies every Default transition into every non-final state, *after* that
  state's own transitions, then removes ``Default`` from the class.  The result is an
  ordinary flat ``StateMachine`` whose states carry real transitions, so
  python-statemachine's own engine and our compiled engine see the same thing.

  Because the copies come last, the rule is SMC's: a state's own transitions for an
  event are tried first, in declaration order; if the state does not define the event,
  *or every guard it declares for it is false*, the Default transitions for that event
  are tried.  (SMC generates exactly this: a guarded transition whose guards all fail
  calls the Default state's method for the same transition.)

  Final states get no copies: python-statemachine forbids transitions out of a final
  state, and a final state is where the machine stops.

* **Wildcard ("Default") transitions.**  A transition declared with ``event="*"``
  matches any event (python-statemachine's own wildcard).  SMC's lookup order is kept
  by reordering each state's list to: own named transitions, Default's named
  transitions, own wildcard transitions, Default's wildcard transitions.

* **Loopbacks** (SMC ``nil``) are python-statemachine internal self-transitions,
  ``S.to.itself(internal=True)``, or targetless ones: no exit or entry action runs.
  ``Default.to.itself(internal=True)`` is a loopback in whatever state is current.

Every expanded copy remembers the Default transition it came from (diagrams draw the
Default transitions once, from a "Default" node, instead of once per state).
"""

from __future__ import annotations

import copy
from typing import Any, cast

from statemachine import State, StateMachine
from statemachine.event import Event, _expand_event_id
from statemachine.factory import StateMachineMetaclass
from statemachine.transition import Transition
from statemachine.transition_list import TransitionList

from actorbus.errors import FsmError

__all__ = ["DefaultState", "Machine"]

#: Attribute set on an expanded copy: the Default-state transition it was copied from.
FROM_DEFAULT_ATTR = "_actorbus_from_default"
#: Class attribute holding the Default-state transitions as declared.
DEFAULT_TRANSITIONS_ATTR = "_actorbus_default_transitions"
#: Class attribute holding the attribute name the Default pseudo-state was declared under.
DEFAULT_NAME_ATTR = "_actorbus_default_name"


class DefaultState(State):
    """The SMC *Default* pseudo-state: its transitions apply in every non-final state.

    Declare at most one per :class:`Machine` and give it transitions; it never becomes a
    real state.  A transition from it to ``itself(internal=True)`` is a loopback in the
    current state; a transition to a real state leaves the current state (exit actions
    run) and enters that one.  It takes no ``enter``/``exit`` actions and cannot be a
    transition target.
    """

    def __init__(self, name: str = "Default") -> None:
        super().__init__(name=name)


def _events_by_transition(attrs: dict[str, Any]) -> dict[int, list[str]]:
    """Map id(transition) -> the event ids the class body gives it through attribute names."""
    found: dict[int, list[str]] = {}

    def note(transitions: Any, ids: list[str]) -> None:
        items = (
            transitions.transitions if isinstance(transitions, TransitionList) else [transitions]
        )
        for transition in items:
            bucket = found.setdefault(id(transition), [])
            bucket.extend(i for i in ids if i not in bucket)

    for key, value in attrs.items():
        if isinstance(value, (Transition, TransitionList)):
            note(value, _expand_event_id(key))
        elif isinstance(value, Event):
            if value._transitions is not None:
                note(
                    value._transitions, [value.id] if value._has_real_id else _expand_event_id(key)
                )
        elif getattr(value, "is_event", False) and getattr(value, "_transitions", None) is not None:
            note(value._transitions, _expand_event_id(key))
    return found


def _copy_transition(
    original: Any, source: Any, target: Any, events: list[str], internal: bool
) -> Any:
    """A new transition from ``source`` carrying ``original``'s callbacks and events."""
    new = Transition(source, target, event=" ".join(events), internal=internal)
    for spec in original._specs:
        new._specs._add(copy.copy(spec), group=spec.group)
    setattr(new, FROM_DEFAULT_ATTR, original)
    return new


def _is_wildcard(transition: Any, events: list[str]) -> bool:
    return "*" in events or any(str(e) == "*" for e in transition.events)


def expand_default(
    cls_name: str,
    states: list[Any],
    default: Any,
    events_of: dict[int, list[str]],
) -> None:
    """Copy ``default``'s transitions into every non-final state of ``states`` (SMC order).

    ``events_of`` maps id(transition) to the event ids it gets from the class body; a
    transition's explicit ``event=`` ids are added to those.
    """

    def events(transition: Any) -> list[str]:
        names = [str(e) for e in transition.events]
        names.extend(e for e in events_of.get(id(transition), []) if e not in names)
        return names

    defaults = list(default.transitions)
    for transition in defaults:
        if not events(transition):
            target = transition.target.id if transition.target is not None else None
            raise FsmError(
                f"{cls_name}: a Default transition (to {target!r}) has no event; assign it "
                f"to a class attribute named after the event (feed_down = Default.to(X)) "
                f"or pass event='name'"
            )
    for state in states:
        if state.final:
            continue
        own_named: list[Any] = []
        own_wild: list[Any] = []
        for transition in state.transitions:
            (own_wild if _is_wildcard(transition, events(transition)) else own_named).append(
                transition
            )
        copied_named: list[Any] = []
        copied_wild: list[Any] = []
        for transition in defaults:
            names = events(transition)
            loops = transition.target is None or transition.target is default
            target = None if transition.target is None else state if loops else transition.target
            internal = bool(transition.internal) and target is not None
            new = _copy_transition(transition, state, target, names, internal)
            (copied_wild if _is_wildcard(transition, names) else copied_named).append(new)
        state.transitions.transitions = own_named + copied_named + own_wild + copied_wild


class _MachineMetaclass(StateMachineMetaclass):
    """Expands the :class:`DefaultState` of a class body, then lets python-statemachine
    build and validate the class as usual."""

    def __init__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> None:
        defaults = [(key, value) for key, value in attrs.items() if isinstance(value, DefaultState)]
        if len(defaults) > 1:
            raise FsmError(
                f"{name}: more than one DefaultState ({', '.join(k for k, _ in defaults)}); "
                f"declare a single Default pseudo-state"
            )
        if defaults:
            key, default = defaults[0]
            default._set_id(key)
            if list(default._specs):
                raise FsmError(
                    f"{name}: the Default pseudo-state {key!r} cannot have enter/exit actions; "
                    f"put them on real states"
                )
            states = [v for v in attrs.values() if isinstance(v, State) and v is not default]
            for state in states:
                for transition in state.transitions:
                    if default in transition.targets:
                        raise FsmError(
                            f"{name}: state {state.id!r} has a transition into the Default "
                            f"pseudo-state {key!r}; Default is not a real state, target a "
                            f"real one"
                        )
            expand_default(name, states, default, _events_by_transition(attrs))
            del attrs[key]
            if key in cls.__dict__:
                delattr(cls, key)
            attrs[DEFAULT_TRANSITIONS_ATTR] = tuple(default.transitions)
            attrs[DEFAULT_NAME_ATTR] = key
            setattr(cls, DEFAULT_TRANSITIONS_ATTR, attrs[DEFAULT_TRANSITIONS_ATTR])
            setattr(cls, DEFAULT_NAME_ATTR, key)
        super().__init__(name, cast(Any, bases), attrs)


class Machine(StateMachine, metaclass=_MachineMetaclass):
    """Base class for machines declared in Python, with SMC's Default pseudo-state.

    A plain python-statemachine ``StateMachine`` works everywhere a ``Machine`` does;
    derive from ``Machine`` to use :class:`DefaultState`.  Example::

        from statemachine import State
        from actorbus.fsm import DefaultState, Machine

        class Door(Machine):
            Closed = State(initial=True)
            Open = State(enter="log_open")
            Gone = State(final=True)
            Default = DefaultState()

            open = Closed.to(Open, cond="unlocked")
            close = Open.to(Closed)
            knock = Default.to.itself(internal=True, on="answer")   # any state
            demolish = Default.to(Gone)                              # global shutdown

    Callbacks named by string are looked up on the machine class, then on the model
    (the object given to the engine, an actor for instance), as python-statemachine does.
    """
