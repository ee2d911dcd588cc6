"""Turn a :class:`MachineSpec` plus a model into generated Python handler functions.

Theory of operation
-------------------
Two steps, both done once per engine instance (the second is cached):

1. **Resolve.**  Every :class:`CallbackRef` of the spec is looked up the way
   python-statemachine does it at instantiation: names on the machine class first, then
   on the model (both are used if both define the name); unbound functions of the class
   body are bound to the machine; non-callable attributes are read at call time; names
   of events become "send that event".  Each resolved callable's signature is inspected
   *here*, once, and turned into an argument plan: which parameters are injected
   (``event``, ``source``, ``target``, ``state``, ``model``/``ctxt``, ``machine``), which
   come from ``send()``'s keyword arguments (with or without a default), and whether a
   ``**kwargs`` catch-all wants everything.

2. **Generate.**  From the plans, one Python function is written per (state, event):
   the candidate transitions in order, each guard an ``if`` calling the resolved object
   directly with its arguments, the body the exact callback sequence (before, exit,
   actions, state switch, entry, after).  A per-state dict ``event -> handler`` is the
   dispatch table; wildcard transitions get one extra handler per state.  Guard and
   action code from ``.sm`` files is pasted in (see :mod:`actorbus.fsm._inline`) rather
   than called.  The source is compiled once per distinct text and registered with
   :mod:`linecache` so tracebacks show it.

The generated code only reads closure variables (resolved callables, state specs,
tables), so a send costs one dict lookup and one call plus the user's own callbacks.

The two steps live in :mod:`actorbus.fsm._resolve` and :mod:`actorbus.fsm._codegen`;
this module caches the generated factories, compiles their source and holds the
run-time helpers the generated code calls.
"""

from __future__ import annotations

import builtins
import itertools
import linecache
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statemachine.event import Event

from actorbus.fsm._codegen import _Generator
from actorbus.fsm._errors import TransitionNotAllowed, missing_argument
from actorbus.fsm._inline import InlineCode
from actorbus.fsm._resolve import _Resolver
from actorbus.fsm.spec import INLINE_ATTR, MachineSpec

#: The model attribute the reference engine stores its state in (never a callback).
STATE_FIELD = "_actorbus_fsm_state"

#: A model may name, in this attribute, the object its guards, actions and ``ctxt``
#: code run on: names are resolved on the model (what its ``dir()`` shows), the
#: code runs on the target.  FsmActor's model is a view that hides the actor's bus
#: callbacks from name resolution; at run time ``ctxt`` is the actor itself, so
#: inline ``.sm`` code pays no forwarding per attribute access.
TARGET_ATTR = "_ab_target"


# The run-time helpers the generated code calls by name (its namespace gets _HELPERS).


def _ab_missing(engine: Any, event: str, name: str, label: str) -> None:
    raise missing_argument(engine.spec.name, event, engine.current_state, name, label)


def _ab_reject(engine: Any, event: str, reason: str) -> None:
    raise TransitionNotAllowed(engine.spec.name, engine.current_state, event, reason)


def _ab_extra(
    kwargs: dict[str, Any], injected: dict[str, Any], named: tuple[str, ...]
) -> dict[str, Any]:
    merged = {**kwargs, **injected}
    for name in named:
        merged.pop(name, None)
    return merged


def _ab_in(engine: Any, ids: tuple[str, ...]) -> bool:
    return all(i == engine.current_state for i in ids)


_HELPERS = {
    "_ab_now": time.time,
    "_ab_missing": _ab_missing,
    "_ab_reject": _ab_reject,
    "_ab_extra": _ab_extra,
    "_ab_in": _ab_in,
}

Built = tuple[Callable[[dict[str, Any]], None], tuple[dict[str, Any], ...], tuple[Any, ...]]


@dataclass(frozen=True)
class _CachedBuild:
    """A generated factory, reusable for models whose resolution looks the same."""

    factory: Callable[..., Built]
    recipes: tuple[Any, ...]
    touched: tuple[str, ...]
    fingerprint: tuple[Any, ...]


_BUILDS: weakref.WeakKeyDictionary[MachineSpec, dict[type, list[_CachedBuild]]] = (
    weakref.WeakKeyDictionary()
)
_SOURCES: weakref.WeakKeyDictionary[MachineSpec, dict[str, Callable[..., Built]]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()
_MAX_BUILDS_PER_CLASS = 8
_SEQUENCE = itertools.count(1)


def _namespace(spec: MachineSpec) -> dict[str, Any]:
    for state in spec.states:
        for t in state.transitions:
            for ref in t.guards + t.on + t.before + t.after + t.validators:
                inline = getattr(ref.target, INLINE_ATTR, None)
                if isinstance(inline, InlineCode):
                    return inline.namespace
        for ref in state.enter + state.exit:
            inline = getattr(ref.target, INLINE_ATTR, None)
            if isinstance(inline, InlineCode):
                return inline.namespace
    return {}


def _fingerprint(model: Any, names: frozenset[str], touched: tuple[str, ...]) -> tuple[Any, ...]:
    """What resolution saw of each touched model attribute: absent, an event, a plain
    attribute, or a callable (identified by its function, which fixes its signature)."""
    out: list[Any] = []
    for name in touched:
        if name not in names:
            out.append(None)
            continue
        try:
            value = getattr(model, name)
        except Exception:
            out.append(("error",))
            continue
        if isinstance(value, Event):
            out.append(("event", str(value.id)))
        elif callable(value):
            # the function itself, not its id: the entry keeps it alive, so identity holds
            func = getattr(value, "__func__", value)
            out.append(("call", func, type(value)))
        else:
            out.append(("attr",))
    return tuple(out)


def _constants(recipes: tuple[Any, ...], model: Any, spec: MachineSpec) -> tuple[Any, ...]:
    shadow: Any = None
    out: list[Any] = []
    for recipe in recipes:
        kind = recipe[0]
        if kind == "fixed":
            out.append(recipe[1])
            continue
        if kind.startswith("machine") and shadow is None:
            shadow = object.__new__(spec.declaration)
            object.__setattr__(shadow, "model", model)
        if kind == "model":
            out.append(getattr(model, recipe[1]))
        elif kind == "machine":
            out.append(getattr(shadow, recipe[1]))
        elif kind == "model_self":
            out.append(model)
        else:
            out.append(shadow)
    return tuple(out)


def _factory(spec: MachineSpec, source: str) -> Callable[..., Built]:
    with _LOCK:
        sources = _SOURCES.setdefault(spec, {})
        factory = sources.get(source)
    if factory is not None:
        return factory
    filename = f"<actorbus.fsm {spec.name} #{next(_SEQUENCE)}>"
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    # A .sm machine's code runs in the file's own namespace, which its '%{ %}' blocks
    # may change at run time (a helper's 'global'), as under the reference engine.
    namespace = _namespace(spec) or {"__builtins__": builtins}
    namespace.update(_HELPERS)
    scope: dict[str, Any] = {}
    exec(code, namespace, scope)
    factory = scope["_ab_build"]
    with _LOCK:
        return sources.setdefault(source, factory)


def build(spec: MachineSpec, model: Any, engine: Any) -> Built:
    """Resolve ``spec`` against ``model`` and return ``(start, tables, wildcards)``.

    ``start(kwargs)`` enters the start state; ``tables[i]`` maps event ids to handlers
    ``handler(kwargs, event)`` for state ``spec.states[i]``; ``wildcards[i]`` is that
    state's handler for events it has no entry for, or ``None``.

    The generated factory is cached per spec and model class; a new model reuses it
    when every attribute resolution looked at resolves the same way (same functions,
    same kinds), otherwise resolution and generation run again.
    """
    names = frozenset(dir(model)) - {STATE_FIELD}
    target = getattr(model, TARGET_ATTR, model)
    with _LOCK:
        cached = list(_BUILDS.setdefault(spec, {}).get(type(model), ()))
    for entry in cached:
        if entry.fingerprint == _fingerprint(model, names, entry.touched):
            consts = _constants(entry.recipes, target, spec)
            return entry.factory(engine, target, consts, spec.states)
    resolver = _Resolver(spec, model, names)
    generator = _Generator(spec, resolver)
    factory = _factory(spec, generator.generate())
    touched = tuple(sorted(resolver.touched))
    entry = _CachedBuild(
        factory, tuple(generator.em.recipes), touched, _fingerprint(model, names, touched)
    )
    with _LOCK:
        entries = _BUILDS.setdefault(spec, {}).setdefault(type(model), [])
        if len(entries) < _MAX_BUILDS_PER_CLASS:
            entries.append(entry)
    consts = (
        tuple(generator.em.consts)
        if target is model
        else _constants(tuple(generator.em.recipes), target, spec)  # as a cached build does
    )
    return factory(engine, target, consts, spec.states)
