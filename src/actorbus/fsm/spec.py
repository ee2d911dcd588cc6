"""The neutral machine model: :class:`MachineSpec` and its parts.

Theory of operation
-------------------
Machines are *declared* with python-statemachine (a Python class, or a class generated
from an SMC ``.sm`` file) and *executed* by one of two engines.  Between the two sits
this model, built once per declaration by :func:`machine_spec` and cached:

* a :class:`StateSpec` per state: id, initial/final flags, entry and exit callbacks,
  and its transitions *in the order they are tried* (the state's own first, then the
  ones copied from the Default pseudo-state, then wildcards — see
  :mod:`actorbus.fsm.declare`);
* a :class:`TransitionSpec` per transition: the events it answers (``"*"`` answers any
  event), its target (``None`` for a loopback: no exit, no entry), validators, guards
  (``cond`` expects true, ``unless`` expects false) and ``before``/``on``/``after``
  actions;
* a :class:`CallbackRef` per guard or action, *unresolved*: a name to look up on the
  machine class and the model, a callable, a property, or a boolean expression over
  names.  Resolution against a concrete model happens when an engine is made.

Callbacks are kept in python-statemachine's own order: sorted by priority (generic
``on_transition``-style conventions, then inline ``on=``/``cond=``, then decorators and
``on_<event>`` naming conventions, then ``after_transition``), declaration order within
a priority.  Convention callbacks (``on_enter_<state>``, ``before_<event>`` ...) are
listed too, flagged ``convention=True``: they run only if the model or machine class
defines them.

The model is flat.  Features python-statemachine has and the compiled engine does not
reproduce (compound/parallel states, history, eventless or delayed transitions, async
callbacks, ``prepare_event``, class listeners) make :func:`machine_spec` raise
:class:`~actorbus.fsm.UnsupportedMachineError`; such machines still run on
:func:`~actorbus.fsm.reference_machine`.
"""

from __future__ import annotations

import inspect
import os
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from statemachine import StateChart, StateMachine
from statemachine.callbacks import CallbackGroup, SpecReference

from actorbus.errors import FsmError
from actorbus.fsm._errors import UnsupportedMachineError
from actorbus.fsm._stack import STACK_OP_ATTR
from actorbus.fsm.declare import DEFAULT_TRANSITIONS_ATTR, FROM_DEFAULT_ATTR

if TYPE_CHECKING:
    from actorbus.fsm.smc import SmMachine

__all__ = [
    "CallbackRef",
    "Declaration",
    "MachineSpec",
    "StateSpec",
    "TransitionSpec",
    "declared_spec",
]

CallbackKind = Literal["name", "expr", "callable", "property"]

#: Attribute set by the SMC loader on the Python functions it compiles from guard and
#: action code, so the compiled engine can inline that code instead of calling it.
INLINE_ATTR = "_actorbus_inline"

#: Attribute of a class generated from a ``.sm`` file: ``{event: python-statemachine
#: id}`` for the SMC events whose names python-statemachine's class namespace holds
#: already (a state, ``send``, ``name`` ...).  The spec and the engines use the SMC
#: names; only python-statemachine sees the ids.
EVENT_IDS_ATTR = "_actorbus_event_ids"

#: Attribute of a class generated from a ``.sm`` file: ``{parameter: alias}`` for the
#: transition parameters named like an argument python-statemachine injects
#: (``state``, ``event`` ...).  Its functions take the alias; the reference engine
#: passes each such event argument under its alias as well.
ARG_ALIASES_ATTR = "_actorbus_arg_aliases"


@dataclass(frozen=True)
class CallbackRef:
    """One guard, validator or action, not yet resolved against a model.

    Attributes:
        kind: ``"name"`` (attribute looked up on the machine class, then the model),
            ``"expr"`` (a boolean expression over such names, guards only),
            ``"callable"`` (a function or bound method), ``"property"``.
        target: the name, expression text, callable or property object.
        expected: for guards, the value the callback must have (``True`` for
            ``cond``, ``False`` for ``unless``); ``None`` for actions.
        convention: ``True`` for python-statemachine naming conventions
            (``on_enter_<state>`` ...): skipped when nothing defines them.
        priority: python-statemachine's callback priority (lower runs first).
        only_event: run only for this event (``on_<event>`` conventions of a
            transition that answers several events).
        lookup_name: for an unbound function declared in the machine class body, the
            class attribute it is bound through.
        bound: ``True`` if ``target`` is already bound (a bound method or partial).
    """

    kind: CallbackKind
    target: Any
    expected: bool | None = None
    convention: bool = False
    priority: int = 10
    only_event: str | None = None
    lookup_name: str = ""
    bound: bool = True

    @property
    def label(self) -> str:
        """Human-readable text for diagrams and error messages."""
        inline = getattr(self.target, INLINE_ATTR, None)
        if inline is not None:
            text = str(inline.label)
        elif self.kind in ("name", "expr"):
            text = str(self.target)
        elif self.kind == "property":
            fget = getattr(self.target, "fget", None)
            text = getattr(fget, "__name__", repr(self.target))
        else:
            text = getattr(self.target, "__name__", None) or repr(self.target)
        if self.expected is False:
            return f"not {text}" if self.kind != "expr" else f"not ({text})"
        return text


@dataclass(frozen=True)
class TransitionSpec:
    """One transition, as the engines run it.

    Attributes:
        source: the id of the state it leaves, ``None`` for a transition declared on
            the Default pseudo-state (see :attr:`MachineSpec.default_transitions`).
        target: the id of the state it goes to, ``None`` for a targetless transition.
            For a Default-state transition, the Default pseudo-state's own id means
            "the current state".
        internal: ``True`` for an internal self-transition.  Together with targetless
            transitions these are *loopbacks* (SMC ``nil``, see :attr:`loopback`): only
            their actions run, no exit or entry.  An *external* self-transition
            (``target == source``, not internal) runs exit and entry actions.
        events: the event ids it answers; ``"*"`` answers any event.
        validators, guards, before, on, after: callbacks, in execution order.
        from_default: ``True`` if it was copied from the Default pseudo-state.
        push: for an SMC push transition (``.sm`` files only), the id of the state it
            puts on the state stack, which a pop returns to; :attr:`target` is the
            pushed state.  On a transition of the Default pseudo-state, ``""`` stands
            for whatever state is current.  ``None`` otherwise.
        pop: for an SMC pop transition, its text (``"pop"``, ``"pop(ok, n)"``); it is
            written as one copy per state a pop may return to (:attr:`target`), each
            taken only when that state is on top of the stack, and a last loopback copy
            that raises :class:`~actorbus.errors.FsmError` when the stack is empty.
            ``None`` otherwise.
    """

    source: str | None
    target: str | None
    events: tuple[str, ...]
    internal: bool = False
    validators: tuple[CallbackRef, ...] = ()
    guards: tuple[CallbackRef, ...] = ()
    before: tuple[CallbackRef, ...] = ()
    on: tuple[CallbackRef, ...] = ()
    after: tuple[CallbackRef, ...] = ()
    from_default: bool = False
    push: str | None = None
    pop: str | None = None

    @property
    def wildcard(self) -> bool:
        """``True`` if the transition answers any event."""
        return "*" in self.events

    @property
    def loopback(self) -> bool:
        """``True`` if taking it runs no exit/entry action (internal or targetless)."""
        return self.target is None or self.internal

    def answers(self, event: str) -> bool:
        """``True`` if this transition is a candidate for ``event``."""
        return event in self.events or "*" in self.events


@dataclass(frozen=True, eq=False)
class StateSpec:
    """One state.  Compares equal to its id string, like python-statemachine states.

    Attributes:
        id: the state id (the class attribute name, or the ``.sm`` state name).
        name: a human-readable name.
        initial: ``True`` for the start state.
        final: ``True`` for a final state: no transitions leave it; events sent to a
            machine in a final state raise :class:`~actorbus.fsm.TransitionNotAllowed`.
        enter, exit: entry and exit callbacks, in execution order.
        transitions: every transition leaving the state, in the order they are tried.
    """

    id: str
    name: str
    initial: bool = False
    final: bool = False
    enter: tuple[CallbackRef, ...] = ()
    exit: tuple[CallbackRef, ...] = ()
    transitions: tuple[TransitionSpec, ...] = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other == self.id
        return self is other

    def __hash__(self) -> int:
        return hash(self.id)

    def __str__(self) -> str:
        return self.id

    def candidates(self, event: str) -> tuple[TransitionSpec, ...]:
        """The transitions tried, in order, when ``event`` arrives in this state."""
        return tuple(t for t in self.transitions if t.answers(event))


@dataclass(frozen=True, eq=False)
class MachineSpec:
    """A flat machine: states, start state, events and (for diagrams) Default transitions.

    Build it with :func:`machine_spec`; it is immutable and cached per declaration.

    Attributes:
        name: the machine class name.
        states: every state, in declaration order.
        start: the id of the start state.
        events: every event id some transition answers (``"*"`` excluded).
        default_transitions: the transitions declared on the Default pseudo-state,
            before expansion (``source`` is ``None``); their copies are in the states.
        declaration: the python-statemachine class the spec was built from.
        source_path: the ``.sm`` file, for machines loaded from one.
    """

    name: str
    states: tuple[StateSpec, ...]
    start: str
    events: tuple[str, ...]
    default_transitions: tuple[TransitionSpec, ...]
    declaration: type[StateMachine]
    source_path: str | None = None
    _by_id: dict[str, StateSpec] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_id.update((s.id, s) for s in self.states)

    def state(self, state_id: str) -> StateSpec:
        """The state with id ``state_id``; :class:`FsmError` naming the ids if unknown."""
        try:
            return self._by_id[state_id]
        except KeyError:
            known = ", ".join(s.id for s in self.states)
            raise FsmError(f"{self.name}: no state {state_id!r}; the states are: {known}") from None

    def transitions(self) -> tuple[TransitionSpec, ...]:
        """Every transition of every state, copies of Default transitions included."""
        return tuple(t for s in self.states for t in s.transitions)


#: What the engines, :func:`machine_spec` and the diagram functions accept: a
#: python-statemachine ``StateMachine`` subclass, a loaded ``.sm`` file
#: (:class:`~actorbus.fsm.SmMachine`), a :class:`MachineSpec`, or the path of a ``.sm``
#: file.
Declaration: TypeAlias = Union[
    type[StateMachine], "SmMachine", MachineSpec, str, "os.PathLike[str]"
]

# ------------------------------------------------------------------ extraction

_GROUPS: dict[CallbackGroup, str] = {
    CallbackGroup.VALIDATOR: "validators",
    CallbackGroup.COND: "guards",
    CallbackGroup.BEFORE: "before",
    CallbackGroup.ON: "on",
    CallbackGroup.AFTER: "after",
}

_SPEC_CACHE: weakref.WeakKeyDictionary[type, MachineSpec] = weakref.WeakKeyDictionary()

#: python-statemachine ``StateMachine`` flags the compiled engine reproduces.
_EXPECTED_FLAGS = {
    "allow_event_without_transition": False,
    "enable_self_transition_entries": False,
    "atomic_configuration_update": True,
    "catch_errors_as_events": False,
}


def declared_spec(declaration: Declaration) -> MachineSpec:
    """Build (once, then cached) the :class:`MachineSpec` of a declaration that is
    not a path (:func:`actorbus.fsm.machine_spec` reads a ``.sm`` path first).

    Args:
        declaration: a python-statemachine ``StateMachine`` subclass (plain or
            :class:`~actorbus.fsm.Machine`), an :class:`~actorbus.fsm.SmMachine` or a
            :class:`MachineSpec` (returned as is).

    Raises:
        FsmError: the declaration is not one of those.
        UnsupportedMachineError: it uses a feature outside the flat model.
    """
    if isinstance(declaration, MachineSpec):
        return declaration
    spec = getattr(declaration, "spec", None)
    if isinstance(spec, MachineSpec):
        return spec
    if not (isinstance(declaration, type) and issubclass(declaration, StateChart)):
        raise FsmError(
            f"expected a python-statemachine StateMachine subclass, an SmMachine or the "
            f"path of a .sm file; got {declaration!r}"
        )
    cached = _SPEC_CACHE.get(declaration)
    if cached is None:
        cached = _extract(declaration)
        _SPEC_CACHE[declaration] = cached
    return cached


def _unsupported(cls: type, what: str) -> UnsupportedMachineError:
    return UnsupportedMachineError(
        f"{cls.__name__}: {what} is not supported by the compiled engine; run this machine "
        f"with reference_machine(), or flatten it"
    )


def _check_class(cls: Any) -> None:
    if not issubclass(cls, StateMachine):
        raise FsmError(
            f"{cls.__name__} derives from StateChart; derive from StateMachine (or "
            f"actorbus.fsm.Machine): actorbus relies on StateMachine's contract (an event "
            f"without transition raises, action errors propagate)"
        )
    for flag, expected in _EXPECTED_FLAGS.items():
        if getattr(cls, flag) != expected:
            raise _unsupported(cls, f"setting {flag}={getattr(cls, flag)!r}")
    if cls._abstract or not cls.states:
        raise FsmError(f"{cls.__name__} declares no states; declare at least a start state")
    if cls._class_listeners:
        raise _unsupported(cls, "a class-level 'listeners' declaration")
    if list(cls.start_configuration_values):
        raise _unsupported(cls, "start_configuration_values")
    for event in cls._events:
        if event.delay:
            raise _unsupported(cls, f"the delayed event {event.id!r}")
        if event.internal:
            raise _unsupported(cls, f"the internal event {event.id!r}")
    for state in cls.states:
        if state.states or state.parallel:
            raise _unsupported(cls, f"the compound/parallel state {state.id!r}")
        if state.history:
            raise _unsupported(cls, f"the history state in {state.id!r}")


def _ref(cls: Any, spec: Any) -> CallbackRef:
    only_event: str | None = None
    if spec.cond is not None:
        owner = getattr(spec.cond, "__self__", None)
        if getattr(spec.cond, "__name__", "") != "is_same_event" or owner is None:
            raise _unsupported(cls, f"the conditional callback {spec.attr_name!r}")
        only_event = str(owner)
    func = spec.func
    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__func__", None)
    ):
        raise _unsupported(cls, f"the async callback {spec.attr_name!r}")
    kind: CallbackKind
    if spec.reference is SpecReference.NAME:
        kind = "expr" if spec.may_contain_boolean_expression and not func.isidentifier() else "name"
    elif spec.reference is SpecReference.PROPERTY:
        kind = "property"
    else:
        kind = "callable"
    return CallbackRef(
        kind=kind,
        target=func,
        expected=spec.expected_value,
        convention=bool(spec.is_convention),
        priority=int(spec.priority),
        only_event=only_event,
        lookup_name=str(getattr(spec, "lookup_name", spec.attr_name)),
        bound=bool(getattr(spec, "is_bounded", True)),
    )


def _refs(cls: Any, specs: Any, group: CallbackGroup) -> tuple[CallbackRef, ...]:
    items = [_ref(cls, s) for s in specs if s.group == group]
    # python-statemachine inserts callbacks sorted by priority, declaration order within one.
    return tuple(sorted(items, key=lambda r: r.priority))


def _transition(cls: Any, transition: Any, source: str | None) -> TransitionSpec:
    names = {psm_id: event for event, psm_id in getattr(cls, EVENT_IDS_ATTR, {}).items()}
    if transition.is_eventless:
        raise _unsupported(cls, f"the eventless transition from {source!r}")
    if len(transition.targets) > 1:
        raise _unsupported(cls, f"the multi-target transition from {source!r}")
    target_state = transition.target
    target = None if target_state is None else str(target_state.id)
    groups = {name: _refs(cls, transition._specs, group) for group, name in _GROUPS.items()}
    for spec in transition._specs:
        if spec.group not in _GROUPS:
            raise _unsupported(cls, f"the {spec.group.name} callback {spec.attr_name!r}")
    op, text = getattr(transition, STACK_OP_ATTR, (None, None))
    return TransitionSpec(
        source=source,
        target=target,
        internal=bool(transition.internal),
        events=tuple(dict.fromkeys(names.get(str(e), str(e)) for e in transition.events)),
        from_default=hasattr(transition, FROM_DEFAULT_ATTR),
        push=text if op == "push" else None,
        pop=text if op == "pop" else None,
        **groups,
    )


def _extract(cls: Any) -> MachineSpec:
    _check_class(cls)
    for spec in cls._specs:
        if spec.group == CallbackGroup.PREPARE and not spec.is_convention:
            raise _unsupported(cls, "a prepare_event callback")
    states: list[StateSpec] = []
    for state in cls.states:
        for spec in state._specs:
            if spec.group == CallbackGroup.INVOKE and not spec.is_convention:
                raise _unsupported(cls, f"invoke= on state {state.id!r}")
        states.append(
            StateSpec(
                id=state.id,
                name=str(state.name),
                initial=bool(state.initial),
                final=bool(state.final),
                enter=_refs(cls, state._specs, CallbackGroup.ENTER),
                exit=_refs(cls, state._specs, CallbackGroup.EXIT),
                transitions=tuple(_transition(cls, t, state.id) for t in state.transitions),
            )
        )
    defaults = tuple(_transition(cls, t, None) for t in getattr(cls, DEFAULT_TRANSITIONS_ATTR, ()))
    events = dict.fromkeys(e for s in states for t in s.transitions for e in t.events if e != "*")
    return MachineSpec(
        name=cls.__name__,
        states=tuple(states),
        start=cls.initial_state.id,
        events=tuple(events),
        default_transitions=defaults,
        declaration=cls,
        source_path=getattr(cls, "_actorbus_source_path", None),
    )


def machine_spec(declaration: Declaration) -> MachineSpec:
    """Deprecated here: :func:`actorbus.fsm.machine_spec` (which reads ``.sm`` paths
    too).  Warns, then builds the spec of a declaration that is not a path."""
    import warnings

    warnings.warn(
        "actorbus.fsm.spec.machine_spec moved; write 'from actorbus.fsm import "
        "machine_spec' (the old name goes away in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    if isinstance(declaration, str | os.PathLike):
        raise FsmError(
            f"actorbus.fsm.spec.machine_spec({declaration!r}): a .sm path is read by "
            "actorbus.fsm.machine_spec; import it from actorbus.fsm"
        )
    return declared_spec(declaration)
