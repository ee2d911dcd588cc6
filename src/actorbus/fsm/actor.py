"""Actors driven by a state machine: feed callbacks become FSM events.

Theory of operation
-------------------
An :class:`FsmActor` names a machine declaration (a python-statemachine class,
typically a :class:`~actorbus.fsm.Machine`, or a ``.sm`` file) in its class
attribute ``machine`` or its constructor.  On :meth:`startup` — which runs on
the actor's own dispatcher — the machine is built with the actor as its model
(``ctxt`` in ``.sm`` files) and started, so the start state's entry actions run
there, before any feed callback can be delivered.  On :meth:`shutdown` the
``shutdown`` event is sent (when the machine declares one and is not final).

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
selects python-statemachine's own engine (same semantics, ~500x slower).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .._log import logger
from ..actors import Actor
from ..bus.scope import FeedState
from ..errors import FsmError
from .engine import compile_machine
from .reference import reference_machine
from .spec import machine_spec

__all__ = ["FsmActor"]

_ENGINES: dict[str, Callable[..., Any]] = {
    "compiled": compile_machine,
    "reference": reference_machine,
}


class FsmActor(Actor):
    """An actor whose behaviour is a declarative state machine (see module doc)."""

    #: the machine declaration (class, SmMachine, MachineSpec or .sm path)
    machine: ClassVar[Any] = None
    #: "compiled" (default) or "reference" (python-statemachine's engine)
    engine: ClassVar[str] = "compiled"

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
        self._fsm_events = frozenset(machine_spec(self._fsm_declaration).events)
        self._fsm_maps: dict[int, dict[str, str]] = {}
        self.fsm: Any = None
        self.fsm_trace: list[tuple[str, str]] | None = None

    # ------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Build the machine with this actor as its model and enter the start state."""
        self.fsm = _ENGINES[self._fsm_engine_kind](self._fsm_declaration, self)
        self.fsm.start()
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
        """Send ``event`` to the machine if it declares it and is not final."""
        fsm = self.fsm
        if fsm is None or fsm.is_final:
            return
        if event not in self._fsm_events:
            logger.debug("{}: machine has no event {!r}; ignored", self.name, event)
            return
        fsm.send(event, **kwargs)
        self._trace(event)

    def _trace(self, event: str) -> None:
        if self.fsm_trace is not None:
            self.fsm_trace.append((event, self.fsm.current_state))

    @property
    def current_state(self) -> str | None:
        """The machine's current state id (None before startup)."""
        return None if self.fsm is None else str(self.fsm.current_state)

    # ------------------------------------------------------------ callbacks
    def on_feed_status(self, state: FeedState, feed: Any) -> None:
        kind = "up" if state is FeedState.UP else "down"
        event = self._event(feed, kind, f"feed_{kind}")
        self.fsm_send(event, state=state, status=state, feed_state=state, feed=feed)

    def on_publish_status(self, state: FeedState, feed: Any) -> None:
        kind = "up" if state is FeedState.UP else "down"
        event = self._event(feed, kind, f"publish_{kind}")
        self.fsm_send(event, state=state, status=state, feed_state=state, feed=feed)

    def on_message(self, message: Any, feed: Any) -> None:
        # the hot path of a feed-driven machine: one lookup, one send
        fsm = self.fsm
        if fsm is None or fsm.is_final:
            return
        mapping = self._fsm_maps.get(id(feed))
        event = "message" if mapping is None else mapping.get("message", "message")
        if event not in self._fsm_events:
            return
        fsm.send(event, msg=message, message=message, feed=feed)
        if self.fsm_trace is not None:
            self._trace(event)

    def on_request(self, request: Any) -> None:
        self.fsm_send(
            self._event(request.feed, "request", "request"),
            request=request,
            msg=request.request,
            message=request.request,
        )

    def on_cancel(self, request: Any) -> None:
        self.fsm_send(
            self._event(request.feed, "cancel", "cancel"), request=request, cancel=request
        )

    def on_reply(self, remaining: int, reply: Any, request: Any) -> None:
        self.fsm_send(
            self._event(request.feed, "reply", "reply"),
            remaining=remaining,
            reply=reply,
            request=request,
            msg=reply,
        )
