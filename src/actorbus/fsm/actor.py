"""Actors driven by a state machine: feed callbacks become FSM events.

Theory of operation
-------------------
An :class:`FsmActor` names a machine declaration (a python-statemachine class,
typically a :class:`~actorbus.fsm.Machine`, or a ``.sm`` file) in its class
attribute ``machine`` or its constructor.  On :meth:`startup` — which runs on
the actor's own dispatcher — the machine is built with the actor's
:class:`FsmModel` as its model (``ctxt`` in ``.sm`` files) and started, so the
start state's entry actions run there, before any feed callback can be
delivered.  On :meth:`shutdown` the ``shutdown`` event is sent (when the machine
declares one and is not final).

Feed callbacks arrive as mailbox tasks like any actor callback and are turned
into events, with the callback's arguments passed by name so guards and
actions can ask for them:

==================  =========================================  ==================================
callback            event (default; per feed with map_events)  arguments
==================  =========================================  ==================================
feed status         ``feed_up`` / ``feed_down``                 ``state``, ``status``, ``feed_state``, ``feed``
publish status      ``publish_up`` / ``publish_down``           ``state``, ``status``, ``feed_state``, ``feed``
notification        ``message``                                 ``msg``, ``message``, ``feed``
request             ``request``                                 ``request``, ``msg``, ``message``
cancel              ``cancel``                                  ``request``, ``cancel``
reply               ``reply``                                   ``remaining``, ``reply``, ``request``, ``msg``
==================  =========================================  ==================================

An event the machine does not declare at all is ignored (debug-logged), so a
machine need only name the events it cares about.  An event it declares but
that has no transition in the current state raises
:class:`~actorbus.fsm.TransitionNotAllowed` — the actor's failure contract logs
it with the actor and callback.  Once the machine is final, no event is sent.

By default the machine runs on the compiled engine; ``engine="reference"``
selects python-statemachine's own engine (same semantics, much slower per
transition; docs/performance.md has the figures).

The machine's model is a view of the actor, not the actor
-----------------------------------------------------------
python-statemachine calls model methods by naming convention (``on_<event>``,
``before_<event>``, ``after_<event>``, ``on_enter_<state>``, ``on_exit_<state>``
...).  The bus callbacks of an actor have exactly those shapes.  With the actor
itself as the model, an event ``message`` would run :meth:`on_message` as its
``on_`` hook, which sends ``message`` again from inside the machine, which
queues it, and so on for ever: the dispatcher thread never returns.  An event
``cancel`` would run :meth:`on_cancel`, which needs a request the event may not
carry, so the transition fails.

Refusing such event names at class creation would break the defaults above
(``message``, ``request``, ``cancel`` and ``reply`` are themselves such names)
and would make every new actor method a new forbidden name.  So the model the
engines see is an :class:`FsmModel`: it reads and writes every attribute through
to the actor, but lists — and so lets python-statemachine resolve by name, by
convention or by explicit string — only what the user's own classes declare
(their methods and attributes, and the actor's instance attributes).  actorbus's
own methods, the bus callbacks above all, are never hooks, whatever the event
and state names are, and a subclass that overrides a bus callback does not make
it one.  A callback *named* explicitly that the view does not show (``on=
"on_message"``, ``cond="is_started"``, a ``.sm`` action ``on_message(msg);``) is
refused when the actor is constructed, with the name and the fix, rather than
failing at startup.  Code reaches the whole actor: methods run with ``self`` the
actor, and ``ctxt.anything`` in ``.sm`` code reads the actor.

A bus callback called while the machine is handling an event (from inside a
guard or action) raises :class:`~actorbus.errors.FsmError`: it would feed its
event back into the machine that is running it.  Actions send events with
:meth:`FsmActor.fsm_send`.

A run-to-completion step is bounded
-----------------------------------
An event sent from inside a guard or action is queued and runs in the same step, on
the same dispatcher call.  An action that sends the event it handles, in a state whose
transition answers it with the same action, would therefore hold the dispatcher thread
for ever.  Both engines cap a step at :data:`~actorbus.fsm.engine.MAX_STEP_EVENTS`
(10,000) events, the one that started it included (the start of the machine counts as
one): the send that would queue one more raises :class:`~actorbus.errors.FsmError` in
the action that makes it, naming the machine, the event, the state and the fix.  Like
any exception of an action it ends the step and drops its queue; it leaves the feed
callback or :meth:`~FsmActor.fsm_send` that started the step, the failure contract
reports it (:meth:`~actorbus.actors.Actor.on_failure`), and the actor and its machine go
on with the next event (a loop started by the start state's entry actions fails
:meth:`~FsmActor.startup` instead).  To repeat an event on purpose, send it from a later
task: ``self.post(self.fsm_send, event)`` or ``self.schedule(delay, self.fsm_send, event)``.
"""

from __future__ import annotations

import ast
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, cast

from statemachine.spec_parser import replace_operators

from .._log import logger
from ..actors import Actor
from ..actors.machine_view import DIAGRAM_FORMATS, MachineView, TransitionRecord
from ..bus.owner import FeedOwner
from ..bus.scope import FeedState
from ..errors import FsmError
from ._compile import STATE_FIELD
from ._declaration import machine_spec
from ._inline import InlineCode
from .diagram import to_dot, to_mermaid
from .engine import compile_machine
from .reference import reference_machine
from .spec import INLINE_ATTR, CallbackRef, MachineSpec

__all__ = ["BUS_CALLBACKS", "FsmActor", "FsmModel"]

_ENGINES: dict[str, Callable[..., Any]] = {
    "compiled": compile_machine,
    "reference": reference_machine,
}

#: The actor methods the bus calls (FeedOwner's role methods), which FsmActor turns
#: into events.  The machine never sees them, even when a subclass overrides them.
BUS_CALLBACKS: frozenset[str] = frozenset(
    name for name, value in vars(FeedOwner).items() if getattr(value, "_ab_default_callback", False)
)
#: Instance attributes FsmActor itself sets (not the user's).
_OWN_INSTANCE_ATTRS = frozenset({"fsm", "fsm_model", "fsm_trace"})
#: Prefixes of the runtime's and FsmActor's private attributes.
_PRIVATE_PREFIXES = ("_ab_", "_fsm_")
#: Names a guard expression may use that are not callbacks.
_EXPRESSION_WORDS = frozenset({"In", "True", "False", "None"})


def _user_visible(name: str) -> bool:
    return not (
        name in BUS_CALLBACKS
        or name in _OWN_INSTANCE_ATTRS
        or name.startswith(_PRIVATE_PREFIXES)
        or (name.startswith("__") and name.endswith("__"))
    )


def _declared_class_names(cls: type) -> set[str]:
    """Attributes the classes of ``cls`` that are not actorbus's own define."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass not in _FSM_ACTOR_MRO:
            names.update(vars(klass))
    return {n for n in names if _user_visible(n)}


class FsmModel:
    """The model an :class:`FsmActor`'s machine runs on: a view of the actor.

    Every attribute read, write and delete goes to the actor (``ctxt.window``,
    ``ctxt.count = 1``, ``ctxt.publish_average()``).  ``dir()`` — which is where
    python-statemachine and the compiled engine look for callbacks named by string
    and for naming-convention hooks — lists only what the user declared: attributes
    of the actor's classes below :class:`FsmActor` and the actor's instance
    attributes, without the bus callbacks (:data:`BUS_CALLBACKS`), ``fsm``,
    ``fsm_model``, ``fsm_trace`` and private ``_ab_``/``_fsm_`` names.

    The reference engine keeps the current state here, not on the actor.
    """

    __slots__ = ("__dict__", "__weakref__", "_ab_actor")  # __dict__: the reference engine's state

    _ab_actor: FsmActor

    def __init__(self, actor: FsmActor) -> None:
        object.__setattr__(self, "_ab_actor", actor)

    def __getattr__(self, name: str) -> Any:
        if name == STATE_FIELD or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._ab_actor, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == STATE_FIELD:
            object.__setattr__(self, name, value)
        else:
            setattr(self._ab_actor, name, value)

    def __delattr__(self, name: str) -> None:
        if name == STATE_FIELD:
            object.__delattr__(self, name)
        else:
            delattr(self._ab_actor, name)

    def __dir__(self) -> list[str]:
        actor = self._ab_actor
        names = _declared_class_names(type(actor))
        # The instance's own names as dir() minus the class's, not vars(actor): on
        # CPython 3.11 vars() materializes the instance __dict__, and every later
        # attribute access of the actor (its actions' self.x) takes a slower path.
        own = set(dir(actor)) - set(dir(type(actor)))
        names.update(n for n in own if _user_visible(n))
        return sorted(names)

    @property
    def _ab_target(self) -> FsmActor:
        """The actor: the compiled engine runs guards, actions and ``ctxt`` code on
        it, after resolving their names on this view (see ``_compile.TARGET_ATTR``)."""
        return self._ab_actor

    def __repr__(self) -> str:
        return f"<FsmModel of {self._ab_actor!r}>"


_MODEL_CLASSES: weakref.WeakKeyDictionary[type, type[FsmModel]] = weakref.WeakKeyDictionary()


def _model_class(actor_class: type) -> type[FsmModel]:
    """One FsmModel subclass per actor class: the compiled engine caches generated
    code per model class, and actor classes resolve names differently."""
    cls = _MODEL_CLASSES.get(actor_class)
    if cls is None:
        cls = cast(
            "type[FsmModel]",
            type(f"{actor_class.__name__}Model", (FsmModel,), {"__slots__": ()}),
        )
        _MODEL_CLASSES[actor_class] = cls
    return cls


def _callbacks(spec: MachineSpec) -> Iterator[tuple[str, CallbackRef]]:
    """Every declared callback of ``spec`` with where it is declared."""
    for state in spec.states:
        for ref in state.enter:
            yield f"entry action of state {state.id!r}", ref
        for ref in state.exit:
            yield f"exit action of state {state.id!r}", ref
        for t in state.transitions:
            where = f"transition {'|'.join(t.events)!r} from state {state.id!r}"
            for group, refs in (
                ("validator", t.validators),
                ("guard", t.guards),
                ("before action", t.before),
                ("action", t.on),
                ("after action", t.after),
            ):
                for ref in refs:
                    yield f"{group} of {where}", ref


def _names_used(ref: CallbackRef) -> list[str]:
    """The actor attribute names a declared callback refers to."""
    if ref.convention:
        return []  # a hook, looked up only in the view: never an actorbus method
    if ref.kind == "name":
        return [str(ref.target)]
    if ref.kind == "expr":
        try:
            tree = ast.parse(replace_operators(str(ref.target)), mode="eval")
        except SyntaxError:
            return []  # the engine reports the expression itself
        return [
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and n.id not in _EXPRESSION_WORDS
        ]
    inline = getattr(ref.target, INLINE_ATTR, None)
    if isinstance(inline, InlineCode):
        names: list[str] = []
        for line in inline.code:
            for node in ast.walk(ast.parse(line)):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "ctxt"
                    and node.attr in BUS_CALLBACKS
                ):
                    names.append(node.attr)
        return names
    return []


def _check_names(actor_class: type, spec: MachineSpec) -> None:
    """Refuse a machine that names an actor attribute its model does not show."""
    machine_class = spec.declaration
    declared = _declared_class_names(actor_class)
    for where, ref in _callbacks(spec):
        for name in _names_used(ref):
            if hasattr(machine_class, name) or name in declared:
                continue
            if name in BUS_CALLBACKS:
                raise FsmError(
                    f"{actor_class.__name__}: machine {spec.name} calls {name!r} "
                    f"({where}); {name} is the bus callback FsmActor turns into an event, "
                    f"and calling it from the machine would send that event into the "
                    f"machine again; put the work in a method of your own (for example "
                    f"'handle_{name[3:]}') and call that"
                )
            if name in _FSM_ACTOR_NAMES:
                raise FsmError(
                    f"{actor_class.__name__}: machine {spec.name} names {name!r} "
                    f"({where}), which is FsmActor's own; the machine sees only the "
                    f"attributes your actor class declares (so that no actorbus method "
                    f"can be taken for a hook); define a method of your own that uses "
                    f"it and name that"
                )


class _History(deque[tuple[float, str, str, str]]):
    """The last changes of state an engine appended, and how many there were in all."""

    def __init__(self, size: int) -> None:
        super().__init__(maxlen=size)
        self.total = 0

    def append(self, change: tuple[float, str, str, str], /) -> None:
        self.total += 1
        super().append(change)


class FsmActor(Actor):
    """An actor whose behaviour is a declarative state machine (see module doc)."""

    #: the machine declaration (class, SmMachine, MachineSpec or .sm path)
    machine: ClassVar[Any] = None
    #: "compiled" (default) or "reference" (python-statemachine's engine)
    engine: ClassVar[str] = "compiled"
    #: how many of its last state changes the actor keeps for inspection
    #: (:meth:`inspect_machine`)
    fsm_history: ClassVar[int] = 16

    def __init__(
        self, name: str | None = None, *, machine: Any = None, engine: str | None = None
    ) -> None:
        super().__init__(name=name)
        self._fsm_declaration = machine if machine is not None else type(self).machine
        if self._fsm_declaration is None:
            raise FsmError(
                f"{type(self).__name__} has no state machine: set the class attribute "
                f"'machine' or pass machine=... to the constructor"
            )
        kind = engine or type(self).engine
        if kind not in _ENGINES:
            raise FsmError(f"unknown FSM engine {kind!r}; use 'compiled' or 'reference'")
        self._fsm_engine_kind = kind
        spec = machine_spec(self._fsm_declaration)
        _check_names(type(self), spec)
        self._fsm_events = frozenset(spec.events)
        self._fsm_maps: dict[int, dict[str, str]] = {}
        # True while the machine runs a start or an event (its callbacks are running)
        self._fsm_running = False
        #: what the machine sees as its model (``ctxt``): a view of this actor
        self.fsm_model: FsmModel = _model_class(type(self))(self)
        self.fsm: Any = None
        self.fsm_trace: list[tuple[str, str]] | None = None
        # (time, event, from, to) of the last state changes: the engine appends them
        self._fsm_changes = _History(self.fsm_history)

    # ------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Build the machine on this actor's :class:`FsmModel` and enter the start state."""
        self.fsm = _ENGINES[self._fsm_engine_kind](self._fsm_declaration, self.fsm_model)
        self.fsm.history = self._fsm_changes  # the engine keeps the state changes there
        self._fsm_running = True
        try:
            self.fsm.start()
        finally:
            self._fsm_running = False
        self._fsm_changes.append((time.time(), "<start>", "", self.fsm.current_state))
        self._trace("<start>")

    def shutdown(self) -> None:
        """Send ``shutdown`` (when declared and the machine is not final)."""
        self.fsm_send("shutdown")

    # ------------------------------------------------------------ mapping
    def map_events(
        self,
        feed: Any,
        *,
        up: str | None = None,
        down: str | None = None,
        message: str | None = None,
        request: str | None = None,
        cancel: str | None = None,
        reply: str | None = None,
    ) -> None:
        """Name the events one feed's callbacks send (instead of the defaults)."""
        names = {
            "up": up,
            "down": down,
            "message": message,
            "request": request,
            "cancel": cancel,
            "reply": reply,
        }
        self._fsm_maps[id(feed)] = {k: v for k, v in names.items() if v is not None}

    def _event(self, feed: Any, kind: str, default: str) -> str:
        mapping = self._fsm_maps.get(id(feed))
        if mapping is None:
            return default
        return mapping.get(kind, default)

    def fsm_send(self, event: str, **kwargs: Any) -> None:
        """Send ``event`` to the machine if it declares it and is not final.

        Called from inside a guard or action, the event is queued and runs when the
        current one has finished (run to completion).

        Raises:
            FsmError: from inside a guard or action, the current step already holds
                :data:`~actorbus.fsm.engine.MAX_STEP_EVENTS` events (see the module
                doc); from outside, the step this call started ended that way.
        """
        fsm = self.fsm
        if fsm is None or fsm.is_final:
            return
        if event not in self._fsm_events:
            logger.debug("{}: machine has no event {!r}; ignored", self.name, event)
            return
        if self._fsm_running:
            fsm.send(event, **kwargs)
        else:
            self._fsm_running = True
            try:
                fsm.send(event, **kwargs)
            finally:
                self._fsm_running = False
        self._trace(event)

    def inspect_machine(self, diagram: str | None = None) -> MachineView | None:
        """The machine as inspection shows it: its current state (``""``
        before startup), how many times its state changed, its last
        :attr:`fsm_history` changes (the engine appends them as it takes them,
        so an event that leaves the state as it was costs nothing) and, when
        ``diagram`` is ``"mermaid"`` or ``"dot"``, its diagram with the current
        state highlighted (``actorbus.fsm.diagram``).  Called on the inspecting
        thread; it only reads."""
        fsm = self.fsm
        state = "" if fsm is None or not fsm.started else str(fsm.current_state)
        drawn: str | None = None
        if diagram is not None:
            if diagram not in DIAGRAM_FORMATS:
                raise FsmError(
                    f"{self.name}: diagram format {diagram!r} is not one a node renders; "
                    f"use one of {', '.join(DIAGRAM_FORMATS)}"
                )
            spec = machine_spec(self._fsm_declaration)
            render = to_mermaid if diagram == "mermaid" else to_dot
            drawn = render(spec, state or None)
        return MachineView(
            state=state,
            engine=self._fsm_engine_kind,
            state_changes=self._fsm_changes.total,
            transitions=tuple(
                TransitionRecord(time=t, event=e, source=a, target=b)
                for t, e, a, b in tuple(self._fsm_changes)
            ),
            diagram=drawn,
        )

    def _trace(self, event: str) -> None:
        if self.fsm_trace is not None:
            self.fsm_trace.append((event, self.fsm.current_state))

    @property
    def current_state(self) -> str | None:
        """The machine's current state id (None before startup)."""
        return None if self.fsm is None else str(self.fsm.current_state)

    # ------------------------------------------------------------ callbacks
    def _reentered(self, callback: str, event: str) -> FsmError:
        return FsmError(
            f"{self.name}: {callback}() was called while the machine handles an event "
            f"(from one of its guards or actions); it would send {event!r} into the machine "
            f"again from inside it; only the bus calls {callback}(): to send an event from "
            f"an action, call self.fsm_send(event, ...)"
        )

    def _from_bus(self, callback: str, event: str, **kwargs: Any) -> None:
        if self._fsm_running:
            raise self._reentered(callback, event)
        self.fsm_send(event, **kwargs)

    def on_feed_status(self, state: FeedState, feed: Any) -> None:
        kind = "up" if state is FeedState.UP else "down"
        event = self._event(feed, kind, f"feed_{kind}")
        self._from_bus(
            "on_feed_status", event, state=state, status=state, feed_state=state, feed=feed
        )

    def on_publish_status(self, state: FeedState, feed: Any) -> None:
        kind = "up" if state is FeedState.UP else "down"
        event = self._event(feed, kind, f"publish_{kind}")
        self._from_bus(
            "on_publish_status", event, state=state, status=state, feed_state=state, feed=feed
        )

    def on_message(self, message: Any, feed: Any) -> None:
        # the hot path of a feed-driven machine: one lookup, one send
        fsm = self.fsm
        if fsm is None or fsm.is_final:
            return
        mapping = self._fsm_maps.get(id(feed))
        event = "message" if mapping is None else mapping.get("message", "message")
        if event not in self._fsm_events:
            return
        if self._fsm_running:
            raise self._reentered("on_message", event)
        self._fsm_running = True
        try:
            fsm.send(event, msg=message, message=message, feed=feed)
        finally:
            self._fsm_running = False
        if self.fsm_trace is not None:
            self._trace(event)

    def on_request(self, request: Any) -> None:
        self._from_bus(
            "on_request",
            self._event(request.feed, "request", "request"),
            request=request,
            msg=request.request,
            message=request.request,
        )

    def on_cancel(self, request: Any) -> None:
        self._from_bus(
            "on_cancel",
            self._event(request.feed, "cancel", "cancel"),
            request=request,
            cancel=request,
        )

    def on_reply(self, remaining: int, reply: Any, request: Any) -> None:
        self._from_bus(
            "on_reply",
            self._event(request.feed, "reply", "reply"),
            remaining=remaining,
            reply=reply,
            request=request,
            msg=reply,
        )


_FSM_ACTOR_MRO = frozenset(FsmActor.__mro__)
#: Every attribute name actorbus's actor classes define.
_FSM_ACTOR_NAMES = frozenset(dir(FsmActor))
