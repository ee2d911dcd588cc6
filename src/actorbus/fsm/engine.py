"""The compiled engine: run a declared machine through generated dispatch tables.

Theory of operation
-------------------
python-statemachine's engine is general (compound and parallel states, SCXML queues,
callback registries resolved per call) and runs hundreds of Python calls per
guarded transition (docs/performance.md has the figures).  A flat machine needs far less.
:func:`compile_machine` builds the :class:`~actorbus.fsm.MachineSpec` of the
declaration once, resolves every guard and action against the model once (signatures
inspected once), and generates one Python function per (state, event) — see
:mod:`actorbus.fsm._compile`.  At run time the engine holds the current state and that
state's dict ``event -> handler``; :meth:`CompiledMachine.send` is a dict lookup and a
call.

Semantics are python-statemachine's ``StateMachine``, which every FSM test checks by
running the same script on :func:`~actorbus.fsm.reference_machine`:

* ``start()`` enters the start state: the state is set, then its entry actions run.
  If they fail, the machine is not started (``start()`` may be called again).
* The candidate transitions of the current state for the event are tried in order;
  the first whose validators pass and guards all hold is taken.  With a Default
  pseudo-state the state's own transitions come first, then Default's (SMC rule).
* An external transition runs ``before`` actions, the source's exit actions, the
  transition's ``on`` actions, switches the state, runs the target's entry actions,
  then ``after`` actions.  A loopback runs ``before``, ``on``, ``after`` only.
* If ``before``/exit/``on``/entry raise, the exception propagates unchanged and the
  machine is back in the source state; an ``after`` exception leaves it in the target.
* An event no transition accepts raises :class:`~actorbus.fsm.TransitionNotAllowed`.
* An event sent from inside a callback is queued and processed, in order, when the
  current one has finished (run to completion); if one fails, the queue is dropped.
  Events queued when a final state is reached are dropped.
* A run-to-completion step (the event sent from outside, or ``start()``, plus every
  event its callbacks queue) holds at most :data:`MAX_STEP_EVENTS` events: the send
  that would queue one more raises :class:`~actorbus.errors.FsmError` (see
  :func:`runaway_step`) in the callback that made it, which fails like any exception
  of a callback: the queue is dropped and the exception leaves ``send()``.  If the
  callback catches it, the step still ends with it once the queue is done.

An engine is not thread-safe: one thread at a time must call it (an actor's mailbox
guarantees that).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from statemachine.model import Model

from actorbus.errors import FsmError
from actorbus.fsm._compile import build
from actorbus.fsm._declaration import machine_spec
from actorbus.fsm._errors import TransitionNotAllowed
from actorbus.fsm._stack import StateStack
from actorbus.fsm.spec import Declaration, MachineSpec, StateSpec

__all__ = ["MAX_STEP_EVENTS", "CompiledMachine", "FsmEngine", "compile_machine", "runaway_step"]

_Handler = Callable[[dict[str, Any], str], None]

#: The most events one run-to-completion step holds: the event sent from outside the
#: machine (or its start, which counts as one) and the events its callbacks send while
#: it runs.  Without a bound, an action that sends the event it handles, in a state
#: whose transition answers it with the same action, loops inside one send() for ever
#: and the actor's dispatcher thread never returns.  Real steps are a few events long,
#: or one event per item of a batch; 10,000 leaves room for such fan-outs, while a
#: loop reaches it soon enough (on either engine) to free the thread, fail loudly and
#: leave the machine usable.
MAX_STEP_EVENTS = 10_000


def runaway_step(machine: str, state: str | None, event: str) -> FsmError:
    """The error of a send that would put event ``MAX_STEP_EVENTS + 1`` into one step.

    ``state`` is the current state when ``event`` was sent.  Both engines raise it.
    """
    return FsmError(
        f"{machine}: {event!r}, sent in state {state!r}, would be event "
        f"{MAX_STEP_EVENTS + 1} of one run-to-completion step (the event sent from "
        f"outside the machine, then those its actions sent): the actions keep sending "
        f"events that send more, which would never end, so this send raises, the step "
        f"stops and its queued events are dropped; an action must not send the event it "
        f"handles in a state whose transition sends it again; to go on later, send it "
        f"from a timer (self.schedule(delay, self.fsm_send, {event!r})) or a task "
        f"(self.post(self.fsm_send, {event!r}))"
    )


class FsmEngine(Protocol):
    """What the actor binding (and any caller) uses, whichever engine runs the machine."""

    #: None, or a deque the engine appends ``(time.time(), event, from, to)`` to
    #: when its state changes (an FSM actor hands in its bounded one)
    history: deque[tuple[float, str, str, str]] | None

    @property
    def spec(self) -> MachineSpec:
        """The machine's :class:`~actorbus.fsm.MachineSpec`."""

    @property
    def model(self) -> Any:
        """The object guards and actions act on (``ctxt``)."""

    def start(self, **kwargs: Any) -> None:
        """Enter the start state, running its entry actions (``kwargs`` injectable)."""

    def send(self, event: str, /, **kwargs: Any) -> None:
        """Process ``event``; guards and actions get ``kwargs`` by parameter name."""

    @property
    def current_state(self) -> str:
        """The id of the current state (the pushed one, while a push is in effect)."""

    @property
    def state_stack(self) -> tuple[str, ...]:
        """The states SMC push transitions put on the stack, bottom first."""

    @property
    def started(self) -> bool:
        """``True`` once :meth:`start` ran."""

    @property
    def is_final(self) -> bool:
        """``True`` when the current state is final (every event is then rejected)."""


class CompiledMachine:
    """A running machine backed by generated handler functions.

    Make one with :func:`compile_machine`, call :meth:`start`, then :meth:`send` events.
    Guards and actions receive, by parameter name: every keyword argument of
    :meth:`send`; ``event`` (the event id); ``source`` and ``target`` (the transition's
    :class:`~actorbus.fsm.StateSpec`, which compares equal to the state id); ``state``
    (the source during exit/``before``/``on``, the target during entry/``after``);
    ``model`` and ``ctxt`` (the model); ``machine`` (this engine).  A ``**kwargs``
    parameter receives all of those not named explicitly.
    """

    __slots__ = (
        "__weakref__",
        "_actorbus_stack",
        "_busy",
        "_queue",
        "_queued",
        "_runaway",
        "_start",
        "_state",
        "_table",
        "_tables",
        "_wild",
        "history",
        "model",
        "spec",
    )

    def __init__(self, spec: MachineSpec, model: Any) -> None:
        self.spec = spec
        self.model = model
        self._state: StateSpec | None = None
        #: None (the default), or a deque to which every change of state appends
        #: ``(time.time(), event, from, to)``; an FSM actor hands in its bounded one
        self.history: deque[tuple[float, str, str, str]] | None = None
        self._table: dict[str, _Handler] = {}
        self._busy = False
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        # events sent from inside callbacks in the current step (0 between steps; the
        # step's own event is not counted), and the bound's error once raised
        self._queued = 0
        self._runaway: FsmError | None = None
        # SMC's state stack (push/pop transitions of .sm machines; see _stack.py)
        self._actorbus_stack = StateStack()
        start, tables, wild = build(spec, model, self)
        self._start: Callable[[dict[str, Any]], None] = start
        self._tables: dict[str, dict[str, _Handler]] = {
            s.id: table for s, table in zip(spec.states, tables, strict=True)
        }
        self._wild: dict[str, _Handler | None] = {
            s.id: handler for s, handler in zip(spec.states, wild, strict=True)
        }

    def __repr__(self) -> str:
        state = self._state.id if self._state is not None else None
        return f"<CompiledMachine {self.spec.name} state={state!r}>"

    @property
    def current_state(self) -> str:
        """The id of the current state.  :class:`FsmError` before :meth:`start`."""
        state = self._state
        if state is None:
            raise FsmError(f"{self.spec.name} is not started; call start() first")
        return state.id

    @property
    def state_stack(self) -> tuple[str, ...]:
        """The states SMC push transitions put on the stack, bottom first; a pop
        returns to the last.  Empty for machines without push transitions."""
        return tuple(self._actorbus_stack.ids)

    @property
    def started(self) -> bool:
        """``True`` once :meth:`start` ran."""
        return self._state is not None

    @property
    def is_final(self) -> bool:
        """``True`` when the current state is final."""
        return self._state is not None and self._state.final

    def start(self, **kwargs: Any) -> None:
        """Enter the start state and run its entry actions (they see ``event='__initial__'``).

        If they raise, or an event they sent fails, the exception propagates and the
        machine is not started: :attr:`started` is ``False`` and ``start()`` may be
        called again.

        Raises:
            FsmError: the machine was already started.
        """
        if self._state is not None:
            raise FsmError(f"{self.spec.name} is already started (in {self._state.id!r})")
        self._busy = True
        try:
            self._start(kwargs)
            if self._queue:
                self._drain()
        except BaseException:
            self._abort()
            # the start step failed: there is no state to go back to, so the machine is
            # not started (as under the reference engine); start() may be called again
            self._state = None
            self._table = {}
            self._actorbus_stack.clear()
            raise
        finally:
            self._busy = False

    def send(self, event: str, /, **kwargs: Any) -> None:
        """Process ``event`` now, or queue it if called from inside a callback.

        Raises:
            TransitionNotAllowed: no transition of the current state accepts the event.
            EventArgumentError: a guard or action needs an argument that was not passed.
            FsmError: from inside a callback, the step already holds
                :data:`MAX_STEP_EVENTS` events (see :func:`runaway_step`); from outside,
                the step ended that way.
            Exception: whatever a guard or action raised, unchanged.
        """
        if self._busy:
            # The step's own event plus the ones queued so far: checked here, not when
            # the event runs, so the error points at the callback that keeps sending.
            if self._queued + 1 >= MAX_STEP_EVENTS:
                state = self._state
                error = runaway_step(self.spec.name, state.id if state else None, event)
                self._runaway = error  # raised again when the step ends, if caught
                raise error
            self._queued += 1
            self._queue.append((event, kwargs))
            return
        self._busy = True
        try:
            (self._table.get(event) or self._fallback(event))(kwargs, event)
            if self._queue:
                self._drain()
        except BaseException:
            self._abort()
            raise
        finally:
            self._busy = False

    def _drain(self) -> None:
        # Every step whose callbacks sent an event gets here (or to _abort): the step's
        # count is reset only on these paths, so a send with no queued event pays nothing.
        queue = self._queue
        while queue:
            state = self._state
            if state is not None and state.final:
                queue.clear()
                break
            event, kwargs = queue.popleft()
            (self._table.get(event) or self._fallback(event))(kwargs, event)
        self._queued = 0
        runaway, self._runaway = self._runaway, None
        if runaway is not None:
            raise runaway  # a callback caught it; the step still fails

    def _abort(self) -> None:
        """A step failed: drop its queue and its count."""
        self._queue.clear()
        self._queued = 0
        self._runaway = None

    def _fallback(self, event: str) -> _Handler:
        state = self._state
        if state is None:
            raise FsmError(f"{self.spec.name}: send({event!r}) before start(); call start() first")
        handler = self._wild[state.id]
        if handler is not None:
            return handler
        if state.final:
            reason = "it is a final state"
        elif event in self.spec.events:
            reason = "no transition of this state (or of the Default state) answers it"
        else:
            reason = "the machine declares no transition for this event at all"
        raise TransitionNotAllowed(self.spec.name, state.id, event, reason, final=state.final)


def compile_machine(declaration: Declaration, model: Any = None) -> CompiledMachine:
    """Make a compiled engine for ``declaration`` acting on ``model``; call ``start()`` next.

    Args:
        declaration: a ``StateMachine`` subclass (plain python-statemachine or
            :class:`~actorbus.fsm.Machine`), an :class:`~actorbus.fsm.SmMachine`, a
            :class:`~actorbus.fsm.MachineSpec` or the path of a ``.sm`` file.
        model: the object guards and actions act on (``ctxt`` in ``.sm`` code); names
            in the declaration are looked up on the machine class, then on it.  ``None``
            gives an empty python-statemachine ``Model``.

    Raises:
        FsmError: a callback name is defined nowhere, or the declaration is invalid.
        UnsupportedMachineError: the declaration uses a feature outside the flat model.
    """
    return CompiledMachine(machine_spec(declaration), _default_model() if model is None else model)


def _default_model() -> Any:
    """An empty python-statemachine ``Model``, as its engine uses when given none."""
    factory: Any = Model
    return factory()
