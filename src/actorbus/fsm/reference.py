"""The reference engine: python-statemachine's own engine behind the engine interface.

:func:`reference_machine` returns an object with the same interface as
:class:`~actorbus.fsm.CompiledMachine`, backed by an instance of the declared
``StateMachine`` class.  It exists so that every behaviour of the compiled engine can
be checked against python-statemachine itself (the FSM test suite runs every script on
both), and to run machines the compiled engine does not support (compound states ...).

Differences, all deliberate and documented in ``docs/fsm.md``:

* the python-statemachine instance is created by :meth:`ReferenceMachine.start` (its
  constructor enters the start state), and it stores its current state on the model
  under ``_actorbus_fsm_state``;
* ``ctxt`` (the model) is passed with every event so callbacks can ask for it by name,
  as under the compiled engine;
* the ``machine`` a callback receives is the python-statemachine instance (it has
  ``send`` and ``model`` like the compiled engine);
* python-statemachine's ``TransitionNotAllowed`` becomes
  :class:`actorbus.fsm.TransitionNotAllowed`, and a definition error found at
  instantiation (``InvalidDefinition``) becomes :class:`actorbus.errors.FsmError`.

Where python-statemachine differs from the compiled engine, this engine makes it agree:

* the ``TypeError`` Python raises when python-statemachine calls a callback without a
  required event argument becomes the compiled engine's
  :class:`~actorbus.fsm.EventArgumentError` (a ``TypeError`` raised inside the callback
  stays as it is);
* a start whose entry actions fail leaves the engine not started, with no state left
  on the model, so ``start()`` may be called again;
* a ``.sm`` event whose name python-statemachine's class namespace holds already is
  sent under its python-statemachine id, and an argument named like one
  python-statemachine injects is passed under its alias (the class's
  ``EVENT_IDS_ATTR`` and ``ARG_ALIASES_ATTR``, see :mod:`actorbus.fsm.spec`).

A run-to-completion step holds at most :data:`~actorbus.fsm.engine.MAX_STEP_EVENTS`
events, as under the compiled engine.  python-statemachine queues an event sent from
inside a callback and runs it in the loop of the ``send()`` that started the step,
whichever way it was sent (``machine.send()``, an action string naming the event, an
event method, :meth:`~actorbus.fsm.FsmActor.fsm_send` through :meth:`ReferenceMachine.send`).
Every one of those ways puts the event through the instance's ``_put_nonblocking``
method, and nothing else does; so :meth:`ReferenceMachine.start` makes the instance
with that method wrapped (on the instance only, before python-statemachine's
``__init__`` runs the start state's entry actions), and the wrapper counts the step's
events and raises :func:`~actorbus.fsm.engine.runaway_step` instead of queueing one
past the bound.  A naming-convention listener (``before_transition``) would not do:
``.sm`` machines have no naming conventions.  The exception leaves the callback that
sent the event, and python-statemachine's loop, which drops its queues, as any
exception of a callback does.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import statemachine
from statemachine import StateChart, StateMachine
from statemachine.exceptions import InvalidDefinition
from statemachine.exceptions import TransitionNotAllowed as PsmTransitionNotAllowed

from actorbus.errors import FsmError
from actorbus.fsm._compile import STATE_FIELD
from actorbus.fsm._declaration import machine_spec
from actorbus.fsm._errors import (
    EventArgumentError,
    TransitionNotAllowed,
    UnsupportedMachineError,
    missing_argument,
)
from actorbus.fsm._stack import STACK_ATTR, StateStack
from actorbus.fsm.engine import MAX_STEP_EVENTS, _default_model, runaway_step
from actorbus.fsm.spec import ARG_ALIASES_ATTR, EVENT_IDS_ATTR, Declaration, MachineSpec

__all__ = ["ReferenceMachine", "reference_machine"]


#: The python-statemachine method every queued event passes through (see module doc).
_PUT = "_put_nonblocking"

_PSM_DIR = os.path.dirname(os.path.abspath(statemachine.__file__))
#: What Python says when python-statemachine calls a callback without an argument it
#: requires: the callback's name, then the first missing parameter.
_MISSING = re.compile(r"^(\S+)\(\) missing \d+ required [\w-]+ arguments?: '(\w+)'")


class ReferenceMachine:
    """A running machine backed by python-statemachine's engine; see :func:`reference_machine`."""

    def __init__(
        self,
        declaration: type[StateMachine],
        model: Any,
        spec: MachineSpec | None,
        unsupported: UnsupportedMachineError | None = None,
    ) -> None:
        self.declaration = declaration
        self.name = declaration.__name__
        self.model = model
        self._spec = spec
        self._unsupported = unsupported
        # a .sm machine's events and parameters under python-statemachine (spec.py)
        self._event_ids: dict[str, str] = getattr(declaration, EVENT_IDS_ATTR, {})
        self._event_names = {psm_id: event for event, psm_id in self._event_ids.items()}
        self._aliases: dict[str, str] = getattr(declaration, ARG_ALIASES_ATTR, {})
        self._sm: Any = None
        self._starting = False
        # the instance whose constructor start() is running (None otherwise)
        self._constructing: Any = None
        # True while start() or an outermost send() runs: a step the bound applies to
        self._stepping = False
        self._step_events = 0
        # the bound's error, raised again when the step ends in case a callback caught
        # it (or the machine turned it into an event, catch_errors_as_events)
        self._runaway: FsmError | None = None
        #: None (the default), or a deque to which each event sent from outside the
        #: machine appends ``(time.time(), event, from, to)`` when its step changed the
        #: state (the events its actions queued are part of that step here)
        self.history: deque[tuple[float, str, str, str]] | None = None
        # SMC's state stack, attached to the python-statemachine instance (see _stack.py)
        self._stack = StateStack()

    def __repr__(self) -> str:
        state = self.current_state if self._sm is not None else None
        return f"<ReferenceMachine {self.name} state={state!r}>"

    @property
    def spec(self) -> MachineSpec:
        """The machine's :class:`MachineSpec`.

        Raises:
            UnsupportedMachineError: the machine is outside the flat model (it still
                runs on this engine).
        """
        if self._spec is None:
            assert self._unsupported is not None
            raise self._unsupported
        return self._spec

    @property
    def machine(self) -> Any:
        """The python-statemachine instance (``None`` before :meth:`start`)."""
        return self._sm

    @property
    def current_state(self) -> str:
        """The id of the current state.  :class:`FsmError` before :meth:`start`."""
        if self._sm is not None:
            return str(next(iter(self._sm.configuration)).id)
        if self._starting:
            # python-statemachine is still in its constructor (running entry actions); it
            # already wrote the start state on the model.
            value = getattr(self.model, STATE_FIELD, None)
            state = self.declaration.states_map.get(value)
            if state is not None:
                return str(state.id)
        raise FsmError(f"{self.name} is not started; call start() first")

    @property
    def state_stack(self) -> tuple[str, ...]:
        """The states SMC push transitions put on the stack, bottom first; a pop
        returns to the last.  Empty for machines without push transitions."""
        return tuple(self._stack.ids)

    @property
    def started(self) -> bool:
        """``True`` once :meth:`start` ran."""
        return self._sm is not None

    @property
    def is_final(self) -> bool:
        """``True`` when the current state is final."""
        return self._sm is not None and bool(self._sm.is_terminated)

    def _bounded_put(self, sm: Any) -> Callable[..., Any]:
        """``sm``'s ``_put_nonblocking``, counting the events of the current step."""
        put = getattr(sm, _PUT)

        def bounded_put(trigger_data: Any, *args: Any, **kwargs: Any) -> Any:
            if self._stepping:  # not when the instance is used directly, outside a step
                if self._step_events >= MAX_STEP_EVENTS:
                    event = str(getattr(trigger_data, "event", None))
                    event = self._event_names.get(event, event)
                    error = runaway_step(self.name, self._state_on_model(), event)
                    self._runaway = error
                    raise error
                self._step_events += 1
            return put(trigger_data, *args, **kwargs)

        return bounded_put

    def _state_on_model(self) -> str | None:
        """The current state's id as python-statemachine last wrote it on the model."""
        value = getattr(self.model, STATE_FIELD, None)
        try:
            state = self.declaration.states_map.get(value)
        except TypeError:  # several active states (compound machines): a set of values
            state = None
        if state is not None:
            return str(state.id)
        return None if value is None else str(value)

    def _begin_step(self, events: int) -> None:
        self._stepping = True
        self._step_events = events
        self._runaway = None

    def _end_step(self) -> None:
        self._stepping = False
        runaway, self._runaway = self._runaway, None
        if runaway is not None:
            raise runaway

    def start(self, **kwargs: Any) -> None:
        """Instantiate the python-statemachine class, which enters the start state."""
        if self._sm is not None:
            raise FsmError(f"{self.name} is already started (in {self.current_state!r})")
        cls: Any = self.declaration
        if not callable(getattr(cls, _PUT, None)):
            raise FsmError(
                f"{self.name}: this python-statemachine has no StateMachine.{_PUT}(), "
                f"through which the reference engine bounds a run-to-completion step; "
                f"install the python-statemachine version actorbus requires"
            )
        sm = cls.__new__(cls)
        setattr(sm, _PUT, self._bounded_put(sm))
        setattr(sm, STACK_ATTR, self._stack)
        no_state = object()
        before = getattr(self.model, STATE_FIELD, no_state)
        self._starting = True
        self._constructing = sm
        self._begin_step(1)  # the start counts as the step's first event
        try:
            try:
                sm.__init__(self.model, state_field=STATE_FIELD, ctxt=self.model, **kwargs)
            except BaseException:
                # not started, as under the compiled engine: forget the state
                # python-statemachine wrote, or a later start() would resume it
                if before is no_state:
                    with contextlib.suppress(AttributeError):
                        delattr(self.model, STATE_FIELD)
                else:
                    setattr(self.model, STATE_FIELD, before)
                self._stack.clear()  # nor what its entry actions' events pushed
                raise
            self._sm = sm
        except InvalidDefinition as exc:
            raise FsmError(f"{self.name}: {exc}") from exc
        except TypeError as exc:
            error = self._missing(exc, "__initial__")
            if error is exc:
                raise
            raise error from exc
        finally:
            self._starting = False
            self._constructing = None
            self._stepping = False
        self._end_step()

    def send(self, event: str, /, **kwargs: Any) -> None:
        """Send ``event`` through python-statemachine's engine.

        Raises:
            FsmError: from inside a callback, the step already holds
                :data:`~actorbus.fsm.engine.MAX_STEP_EVENTS` events (see
                :func:`~actorbus.fsm.engine.runaway_step`); from outside, the step
                ended that way.
        """
        sm = self._sm
        if sm is None:
            # from an entry action of the start state: its constructor is running them
            sm = self._constructing
        if sm is None:
            raise FsmError(f"{self.name}: send({event!r}) before start(); call start() first")
        if self._stepping:
            # from inside a callback: python-statemachine queues it in the running step
            self._send(sm, event, kwargs)
            return
        history = self.history
        before = self.current_state if history is not None and self._sm is not None else None
        self._begin_step(0)
        try:
            self._send(sm, event, kwargs)
        finally:
            self._stepping = False
            if history is not None and before is not None and self.current_state != before:
                history.append((time.time(), event, before, self.current_state))
        self._end_step()

    def _send(self, sm: Any, event: str, kwargs: dict[str, Any]) -> None:
        if self._aliases:
            # python-statemachine would pass its own value under these names
            aliases = self._aliases
            kwargs = {aliases.get(name, name): value for name, value in kwargs.items()}
        try:
            sm.send(self._event_ids.get(event, event), ctxt=self.model, **kwargs)
        except PsmTransitionNotAllowed as exc:
            if getattr(exc.event, "_sm", sm) is not sm:
                raise
            state = next(iter(sm.configuration)).id if sm.configuration else None
            name = str(exc.event.id) if exc.event is not None else event
            name = self._event_names.get(name, name)
            final = bool(sm.is_terminated)
            reason = (
                "it is a final state"
                if final
                else "python-statemachine found no enabled transition"
            )
            raise TransitionNotAllowed(self.name, state, name, reason, final=final) from exc
        except TypeError as exc:
            error = self._missing(exc, event)
            if error is exc:
                raise
            raise error from exc

    def _missing(self, exc: TypeError, event: str) -> TypeError:
        """``exc`` as the compiled engine's :class:`EventArgumentError`, if it is
        python-statemachine calling a callback without an event argument it requires
        (Python raised it at the call, in python-statemachine's frame); else ``exc``."""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        match = _MISSING.match(str(exc))
        if tb is None or match is None or isinstance(exc, EventArgumentError):
            return exc
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PSM_DIR + os.sep):
            return exc  # raised inside the callback: the callback's own TypeError
        callback, name = match.groups()
        name = next((n for n, alias in self._aliases.items() if alias == name), name)
        state = self._state_on_model()
        return missing_argument(self.name, event, state, name, f"{callback}()")


def reference_machine(declaration: Declaration, model: Any = None) -> ReferenceMachine:
    """Make a python-statemachine-backed engine with the compiled engine's interface.

    Same arguments as :func:`~actorbus.fsm.compile_machine`; call ``start()`` next.
    Unlike the compiled engine it also runs ``StateMachine`` classes outside the flat
    model (compound states, history ...); their :attr:`ReferenceMachine.spec` raises.
    """
    if isinstance(declaration, type) and issubclass(declaration, StateChart):
        if not issubclass(declaration, StateMachine):
            raise FsmError(
                f"{declaration.__name__} derives from StateChart; derive from StateMachine "
                f"(or actorbus.fsm.Machine)"
            )
        try:
            spec: MachineSpec | None = machine_spec(declaration)
        except UnsupportedMachineError as exc:
            return ReferenceMachine(declaration, _model(model), None, exc)
    else:
        spec = machine_spec(declaration)
    assert spec is not None
    return ReferenceMachine(spec.declaration, _model(model), spec)


def _model(model: Any) -> Any:
    return _default_model() if model is None else model
