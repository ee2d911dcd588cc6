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
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import itertools
import linecache
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from statemachine.event import Event
from statemachine.spec_parser import replace_operators

from actorbus.errors import FsmError
from actorbus.fsm._errors import EventArgumentError, TransitionNotAllowed, UnsupportedMachineError
from actorbus.fsm._inline import InlineCode
from actorbus.fsm.spec import INLINE_ATTR, CallbackRef, MachineSpec, StateSpec, TransitionSpec

#: Names every callback can ask for by parameter name.
INJECTED = frozenset({"event", "source", "target", "state", "model", "ctxt", "machine"})
#: Names only python-statemachine's own engine provides.
REFERENCE_ONLY = frozenset({"transition", "event_data"})
#: The model attribute the reference engine stores its state in (never a callback).
STATE_FIELD = "_actorbus_fsm_state"

#: A model may name, in this attribute, the object its guards, actions and ``ctxt``
#: code run on: names are resolved on the model (what its ``dir()`` shows), the
#: code runs on the target.  FsmActor's model is a view that hides the actor's bus
#: callbacks from name resolution; at run time ``ctxt`` is the actor itself, so
#: inline ``.sm`` code pays no forwarding per attribute access.
TARGET_ATTR = "_ab_target"
_PREFIX = "_ab_"


# ----------------------------------------------------------------------- plans


@dataclass(frozen=True)
class _Param:
    name: str
    mode: str  # "inject" | "req" | "opt" | "varkw"
    keyword: bool = False
    default: Any = None


#: How to get a resolved object again for another model of the same class:
#: ``("fixed",)`` the object itself, ``("model", name)`` / ``("machine", name)`` an
#: attribute of the model / machine, ``("model_self",)`` / ``("machine_self",)`` them.
_Recipe = tuple[str, ...]


@dataclass(frozen=True)
class _Call:
    obj: Any
    params: tuple[_Param, ...]
    label: str
    recipe: _Recipe = ("fixed",)


@dataclass(frozen=True)
class _Attr:
    obj: Any
    name: str
    recipe: _Recipe = ("fixed",)


@dataclass(frozen=True)
class _Send:
    event: str


@dataclass(frozen=True)
class _Inline:
    code: InlineCode


@dataclass(frozen=True)
class _Expr:
    node: Any  # nested tuples, see _Resolver._expr_node
    text: str


_Item = _Call | _Attr | _Send | _Inline | _Expr

#: Argument plans by function (weak: per-instance lambdas must not accumulate).  Bound
#: methods are keyed by their function, other callables by themselves.
_SIGNATURES: weakref.WeakKeyDictionary[Any, tuple[_Param, ...]] = weakref.WeakKeyDictionary()
_BOUND_SIGNATURES: weakref.WeakKeyDictionary[Any, tuple[_Param, ...]] = weakref.WeakKeyDictionary()


def _params(obj: Any, label: str) -> tuple[_Param, ...]:
    """The argument plan for ``obj``, cached per underlying function."""
    bound = inspect.ismethod(obj)
    cache, key = (_BOUND_SIGNATURES, obj.__func__) if bound else (_SIGNATURES, obj)
    try:
        cached = cache.get(key)
    except TypeError:  # not hashable or not weak-referenceable: no caching
        cached, key = None, None
    if cached is not None:
        return cached
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError) as exc:
        raise FsmError(
            f"cannot inspect the signature of callback {label!r} ({obj!r}): {exc}; wrap it in "
            f"a def with named parameters"
        ) from exc
    plan: list[_Param] = []
    for p in signature.parameters.values():
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            plan.append(_Param(p.name, "varkw"))
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            if p.default is inspect.Parameter.empty:
                raise UnsupportedMachineError(
                    f"callback {label!r} has the positional-only parameter {p.name!r}; events "
                    f"carry keyword arguments only, make it a normal parameter"
                )
            plan.append(_Param(p.name, "opt", False, p.default))
            continue
        keyword = p.kind is inspect.Parameter.KEYWORD_ONLY
        if p.name in REFERENCE_ONLY:
            raise UnsupportedMachineError(
                f"callback {label!r} asks for {p.name!r}, which only python-statemachine's own "
                f"engine provides; use event/source/target/state instead, or run the machine "
                f"with reference_machine()"
            )
        if p.name.startswith(_PREFIX):
            raise FsmError(f"callback {label!r}: parameter names starting {_PREFIX!r} are reserved")
        if p.name in INJECTED:
            plan.append(_Param(p.name, "inject", keyword))
        elif p.default is inspect.Parameter.empty:
            plan.append(_Param(p.name, "req", keyword))
        else:
            plan.append(_Param(p.name, "opt", keyword, p.default))
    result = tuple(plan)
    if key is not None:
        try:
            cache[key] = result
        except TypeError:
            pass
    return result


def _callable_label(obj: Any) -> str:
    return str(getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj))


# -------------------------------------------------------------------- resolver

_LIBRARY_MODULES = ("statemachine", "actorbus.fsm")


def _machine_names(cls: type) -> frozenset[str]:
    """Attributes the user's machine classes define (python-statemachine's own are not
    callbacks), minus states and protected names."""
    names: set[str] = set()
    for klass in cls.__mro__:
        module = getattr(klass, "__module__", "")
        if klass is object or module.startswith(_LIBRARY_MODULES) or module == "typing":
            continue
        names.update(vars(klass))
    protected = set(getattr(cls, "_protected_attrs", ()))
    states = {s.id for s in getattr(cls, "states", ())}
    return frozenset(n for n in names if n not in protected and n not in states)


class _Resolver:
    """Resolve callback references against one model, python-statemachine style."""

    def __init__(self, spec: MachineSpec, model: Any, model_names: frozenset[str]) -> None:
        self.spec = spec
        self.cls: Any = spec.declaration
        self.model = model
        self.events = frozenset(str(e) for e in self.cls._events)
        self.machine_names = _machine_names(self.cls) | self.events
        self.model_names = model_names
        #: every model attribute name resolution looked at (see _fingerprint)
        self.touched: set[str] = set()
        self._shadow: Any = None
        self._memo: dict[int, list[tuple[str, _Item]]] = {}

    @property
    def shadow(self) -> Any:
        """An instance of the machine class to bind its methods to.

        It is made without running python-statemachine's ``__init__`` (which would start
        a second engine); it carries ``model`` only.
        """
        if self._shadow is None:
            shadow = object.__new__(self.cls)
            object.__setattr__(shadow, "model", self.model)
            self._shadow = shadow
        return self._shadow

    def _listeners(self) -> Iterable[tuple[str, Callable[[], Any], frozenset[str]]]:
        yield "machine", lambda: self.shadow, self.machine_names
        yield "model", lambda: self.model, self.model_names

    def _by_name(self, name: str, where: str) -> list[tuple[str, _Item]]:
        found: list[tuple[str, _Item]] = []
        self.touched.add(name)
        for key, obj_of, names in self._listeners():
            if name not in names:
                continue
            if key == "machine" and name in self.events:
                found.append((f"{name}@{key}", _Send(name)))
                continue
            obj = obj_of()
            try:
                value = getattr(obj, name)
            except Exception as exc:
                raise FsmError(
                    f"{self.spec.name}: {where}: reading {name!r} on the {key} failed "
                    f"({exc!r}); under the compiled engine, machine-class members see an "
                    f"instance that only has 'model'"
                ) from exc
            if isinstance(value, Event):
                found.append((f"{name}@{key}", _Send(str(value.id))))
            elif callable(value):
                plan = _params(value, name)
                found.append((f"{name}@{key}", _Call(value, plan, name, (key, name))))
            else:
                found.append((f"{name}@{key}", _Attr(obj, name, (f"{key}_self",))))
        return found

    def _missing(self, ref: CallbackRef, names: Iterable[str], where: str) -> FsmError:
        model = type(self.model).__name__
        listed = ", ".join(repr(n) for n in names)
        return FsmError(
            f"{self.spec.name}: {where}: {listed} is defined neither on the model ({model}) "
            f"nor on the machine class ({self.cls.__name__}); define it as a method or "
            f"attribute of one of them (callback {ref.label!r})"
        )

    def resolve(self, ref: CallbackRef, where: str) -> list[tuple[str, _Item]]:
        """The (dedupe key, item) pairs ``ref`` resolves to; empty for absent conventions."""
        memo = self._memo.get(id(ref))
        if memo is None:
            memo = self._memo[id(ref)] = self._resolve(ref, where)
        return memo

    def _resolve(self, ref: CallbackRef, where: str) -> list[tuple[str, _Item]]:
        if ref.kind == "callable":
            inline = getattr(ref.target, INLINE_ATTR, None)
            if isinstance(inline, InlineCode):
                return [(f"inline-{id(ref.target)}", _Inline(inline))]
            if not ref.bound:
                self.touched.add(ref.lookup_name)
                for key, obj_of, _names in self._listeners():
                    candidate = getattr(obj_of(), ref.lookup_name, None)
                    if getattr(candidate, "__func__", None) is ref.target:
                        plan = _params(candidate, ref.lookup_name)
                        item = _Call(candidate, plan, ref.label, (key, ref.lookup_name))
                        return [(f"{ref.lookup_name}@{key}", item)]
            target = ref.target
            label = _callable_label(target)
            return [(f"{label}-{id(target)}@None", _Call(target, _params(target, label), label))]
        if ref.kind == "property":
            name = getattr(ref.target.fget, "__name__", "")
            self.touched.add(name)
            for key, obj_of, names in self._listeners():
                if name in names and getattr(type(obj_of()), name, None) is ref.target:
                    return [(f"{name}@{key}", _Attr(obj_of(), name, (f"{key}_self",)))]
            raise self._missing(ref, [name], where)
        if ref.kind == "expr":
            text = str(ref.target)
            return [(f"expr-{text}", _Expr(self._expr(text, ref, where), text))]
        name = str(ref.target)
        found = self._by_name(name, where)
        if not found and not ref.convention:
            raise self._missing(ref, [name], where)
        return found

    # boolean guard expressions, python-statemachine's mini-language
    def _expr(self, text: str, ref: CallbackRef, where: str) -> Any:
        try:
            tree = ast.parse(replace_operators(text), mode="eval")
        except SyntaxError as exc:
            raise FsmError(
                f"{self.spec.name}: {where}: cannot parse the guard expression {text!r}: {exc.msg}"
            ) from exc
        missing: list[str] = []
        node = self._expr_node(tree.body, missing, text, where)
        if missing:
            raise self._missing(ref, missing, where)
        return node

    def _expr_node(self, node: ast.AST, missing: list[str], text: str, where: str) -> Any:
        def sub(child: ast.AST) -> Any:
            return self._expr_node(child, missing, text, where)

        if isinstance(node, ast.BoolOp):
            return (
                "bool",
                "and" if isinstance(node.op, ast.And) else "or",
                [sub(v) for v in node.values],
            )
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", sub(node.operand))
        if isinstance(node, ast.Compare):
            ops = {
                ast.Eq: "==",
                ast.NotEq: "!=",
                ast.Lt: "<",
                ast.LtE: "<=",
                ast.Gt: ">",
                ast.GtE: ">=",
            }
            pairs: list[tuple[str, Any]] = []
            for op, right in zip(node.ops, node.comparators, strict=True):
                symbol = ops.get(type(op))
                if symbol is None:
                    break
                pairs.append((symbol, sub(right)))
            else:
                return ("cmp", sub(node.left), pairs)
        elif isinstance(node, ast.Name):
            found = [item for _key, item in self._by_name(node.id, where)]
            if not found:
                missing.append(node.id)
            return ("names", found)
        elif isinstance(node, ast.Constant):
            return ("const", node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.lower() == "in"
            and all(isinstance(a, ast.Constant) for a in node.args)
        ):
            return ("in", tuple(str(a.value) for a in node.args if isinstance(a, ast.Constant)))
        raise UnsupportedMachineError(
            f"{self.spec.name}: {where}: the guard expression {text!r} uses "
            f"{type(node).__name__}, which the compiled engine does not evaluate; use names "
            f"combined with and/or/not and comparisons, or a method"
        )


# --------------------------------------------------------------------- emitter


@functools.lru_cache(maxsize=4096)
def _renamed(kind: str, code: tuple[str, ...], params: tuple[str, ...]) -> tuple[str, ...]:
    """``.sm`` code with ``ctxt`` and the parameters renamed to the handler's locals."""
    renames = {"ctxt": "_ab_M", **{p: f"_ab_v_{p}" for p in params}}
    out: list[str] = []
    for text in code:
        tree = ast.parse(text, mode="eval" if kind == "expr" else "exec")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in renames:
                node.id = renames[node.id]
        out.append(ast.unparse(tree))
    return tuple(out)


@dataclass
class _Ctx:
    """Expressions the injected parameters take at one point of a handler."""

    source: str
    target: str
    state: str


@dataclass
class _Emitter:
    resolver: _Resolver
    spec: MachineSpec
    lines: list[str] = field(default_factory=list)
    consts: list[Any] = field(default_factory=list)
    recipes: list[_Recipe | Any] = field(default_factory=list)
    _const_index: dict[Any, int] = field(default_factory=dict)

    def const(self, obj: Any, recipe: _Recipe = ("fixed",)) -> str:
        """A closure variable holding ``obj``; ``recipe`` says how to get it again."""
        key: Any = recipe if recipe[0] != "fixed" else ("fixed", id(obj))
        index = self._const_index.get(key)
        if index is None:
            index = len(self.consts)
            self.consts.append(obj)
            self.recipes.append(recipe if recipe[0] != "fixed" else ("fixed", obj))
            self._const_index[key] = index
        return f"_ab_c{index}"

    def put(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    # -- arguments
    def _fetch(self, name: str, label: str, indent: int, fetched: set[str]) -> str:
        var = f"_ab_v_{name}"
        if name not in fetched:
            self.put(indent, "try:")
            self.put(indent + 1, f"{var} = _ab_kw[{name!r}]")
            self.put(indent, "except KeyError:")
            self.put(indent + 1, f"_ab_missing(_ab_E, _ab_event, {name!r}, {label!r})")
            fetched.add(name)
        return var

    def _inject(self, name: str, ctx: _Ctx) -> str:
        return {
            "event": "_ab_event",
            "source": ctx.source,
            "target": ctx.target,
            "state": ctx.state,
            "model": "_ab_M",
            "ctxt": "_ab_M",
            "machine": "_ab_E",
        }[name]

    def _call_expr(self, item: _Call, ctx: _Ctx, indent: int, fetched: set[str]) -> str:
        args: list[str] = []
        named = tuple(p.name for p in item.params if p.mode != "varkw")
        for p in item.params:
            if p.mode == "inject":
                value = self._inject(p.name, ctx)
            elif p.mode == "req":
                value = self._fetch(p.name, item.label, indent, fetched)
            elif p.mode == "opt":
                value = f"_ab_kw.get({p.name!r}, {self.const(p.default)})"
            else:
                injected = ", ".join(f"{n!r}: {self._inject(n, ctx)}" for n in sorted(INJECTED))
                args.append(f"**_ab_extra(_ab_kw, {{{injected}}}, {named!r})")
                continue
            args.append(f"{p.name}={value}" if p.keyword else value)
        return f"{self.const(item.obj, item.recipe)}({', '.join(args)})"

    def _inline_code(self, item: _Inline, indent: int, fetched: set[str]) -> list[str]:
        code = item.code
        for name in code.params:
            self._fetch(name, f"{code.label} ({code.where})", indent, fetched)
        return list(_renamed(code.kind, code.code, code.params))

    def expr(self, item: _Item, ctx: _Ctx, indent: int, fetched: set[str]) -> str:
        """Emit the argument fetches ``item`` needs; return its value as an expression."""
        if isinstance(item, _Call):
            return self._call_expr(item, ctx, indent, fetched)
        if isinstance(item, _Attr):
            return f"{self.const(item.obj, item.recipe)}.{item.name}"
        if isinstance(item, _Send):
            return f"_ab_E.send({item.event!r}, **_ab_kw)"
        if isinstance(item, _Inline):
            return f"({self._inline_code(item, indent, fetched)[0]})"
        return self._expr_tree(item.node, ctx, indent, fetched)

    def _expr_tree(self, node: Any, ctx: _Ctx, indent: int, fetched: set[str]) -> str:
        kind = node[0]
        if kind == "bool":
            joiner = f" {node[1]} "
            return (
                "(" + joiner.join(self._expr_tree(n, ctx, indent, fetched) for n in node[2]) + ")"
            )
        if kind == "not":
            return f"(not {self._expr_tree(node[1], ctx, indent, fetched)})"
        if kind == "cmp":
            left = self._expr_tree(node[1], ctx, indent, fetched)
            parts: list[str] = []
            for symbol, right_node in node[2]:
                right = self._expr_tree(right_node, ctx, indent, fetched)
                parts.append(f"bool({left} {symbol} {right})")
                left = right
            return "(" + " and ".join(parts) + ")"
        if kind == "const":
            return self.const(node[1])
        if kind == "in":
            return f"_ab_in(_ab_E, {node[1]!r})"
        values = [self.expr(i, ctx, indent, fetched) for i in node[1]]
        return "(" + " and ".join(values) + ")"

    def action(self, item: _Item, ctx: _Ctx, indent: int, fetched: set[str]) -> None:
        """Emit ``item`` as statements."""
        if isinstance(item, _Inline) and item.code.kind == "stmts":
            for line in self._inline_code(item, indent, fetched):
                self.put(indent, f"{line}  # {item.code.where}")
            return
        self.put(indent, self.expr(item, ctx, indent, fetched))

    # -- groups
    def resolve(
        self, refs: tuple[CallbackRef, ...], where: str, event: str | None
    ) -> list[tuple[CallbackRef, _Item]]:
        """Resolve a callback group, deduplicated like python-statemachine's registry.

        ``event`` is the handler's event (``None`` in a wildcard handler, where
        ``on_<event>`` conventions are checked at run time).
        """
        seen: set[str] = set()
        out: list[tuple[CallbackRef, _Item]] = []
        for ref in refs:
            if event is not None and ref.only_event is not None and ref.only_event != event:
                continue
            for key, item in self.resolver.resolve(ref, where):
                if key not in seen:
                    seen.add(key)
                    out.append((ref, item))
        return out

    def actions(
        self,
        resolved: list[tuple[CallbackRef, _Item]],
        ctx: _Ctx,
        indent: int,
        fetched: set[str],
        dynamic: bool,
    ) -> None:
        for ref, item in resolved:
            if dynamic and ref.only_event is not None:
                self.put(indent, f"if _ab_event == {ref.only_event!r}:")
                self.action(item, ctx, indent + 1, set(fetched))
            else:
                self.action(item, ctx, indent, fetched)


def _state_var(index: int) -> str:
    return f"_ab_s{index}"


class _Generator:
    """Writes the ``_ab_build`` function for one machine and one model."""

    def __init__(self, spec: MachineSpec, resolver: _Resolver) -> None:
        self.spec = spec
        self.em = _Emitter(resolver, spec)
        self.index = {s.id: i for i, s in enumerate(spec.states)}
        self.handlers: list[tuple[int, str | None, str]] = []

    def where(self, state: StateSpec, what: str) -> str:
        return f"{what} of state {state.id!r}"

    def _switch(self, indent: int, target: int) -> None:
        self.em.put(indent, f"_ab_E._state = {_state_var(target)}; _ab_E._table = _ab_T{target}")

    def transition(
        self, state: StateSpec, t: TransitionSpec, event: str | None, indent: int, fetched: set[str]
    ) -> None:
        em = self.em
        src = self.index[state.id]
        dynamic = event is None
        label = f"transition {'/'.join(t.events)} of state {state.id!r}"
        external = t.target is not None and not t.internal
        tgt = self.index[t.target] if t.target is not None else None
        target_expr = _state_var(tgt) if tgt is not None else "None"
        at_source = _Ctx(_state_var(src), target_expr, _state_var(src))
        before = em.resolve(t.before, label, event)
        on = em.resolve(t.on, label, event)
        after = em.resolve(t.after, label, event)
        em.actions(before, at_source, indent, fetched, dynamic)
        if external and tgt is not None:
            exits = em.resolve(state.exit, self.where(state, "exit"), event)
            em.actions(exits, at_source, indent, fetched, dynamic)
        em.actions(on, at_source, indent, fetched, dynamic)
        if external and tgt is not None:
            target = self.spec.states[tgt]
            self._switch(indent, tgt)
            enters = em.resolve(target.enter, self.where(target, "entry"), event)
            if enters:
                at_target = _Ctx(_state_var(src), _state_var(tgt), _state_var(tgt))
                em.put(indent, "try:")
                em.actions(enters, at_target, indent + 1, fetched, dynamic)
                em.put(indent, "except Exception:")
                self._switch(indent + 1, src)
                em.put(indent + 1, "raise")
        state_after = target_expr if t.target is not None else _state_var(src)
        em.actions(after, _Ctx(_state_var(src), target_expr, state_after), indent, fetched, dynamic)
        em.put(indent, "return")

    def handler(
        self, state: StateSpec, candidates: tuple[TransitionSpec, ...], event: str | None
    ) -> str:
        em = self.em
        name = f"_ab_h{len(self.handlers)}"
        self.handlers.append((self.index[state.id], event, name))
        em.put(1, f"def {name}(_ab_kw, _ab_event):")
        fetched: set[str] = set()
        src = _state_var(self.index[state.id])
        open_end = True
        for t in candidates:
            label = f"guard of {'/'.join(t.events)} in state {state.id!r}"
            target = _state_var(self.index[t.target]) if t.target is not None else "None"
            ctx = _Ctx(src, target, src)
            for _ref, item in em.resolve(t.validators, label, event):
                em.action(item, ctx, 2, fetched)
            guards = em.resolve(t.guards, label, event)
            if not guards:
                self.transition(state, t, event, 2, fetched)
                open_end = False
                break
            # Guards are tried in order, each inside the previous one (python-statemachine
            # stops at the first false one).  Arguments fetched for the first guard stay
            # fetched for the next transitions; those fetched deeper do not.
            indent = 2
            scope = fetched
            for position, (ref, item) in enumerate(guards):
                value = em.expr(item, ctx, indent, scope)
                test = f"if {value}:" if ref.expected is not False else f"if not {value}:"
                if isinstance(item, _Inline):
                    test += f"  # {item.code.where}"
                em.put(indent, test)
                indent += 1
                if position == 0:
                    scope = set(fetched)
            self.transition(state, t, event, indent, scope)
        if open_end:
            em.put(2, "_ab_reject(_ab_E, _ab_event, 'none of the guards of its transitions held')")
        return name

    def generate(self) -> str:
        em = self.em
        start = self.index[self.spec.start]
        em.put(1, "def _ab_start(_ab_kw):")
        em.put(2, "_ab_event = '__initial__'")
        self._switch(2, start)
        state = self.spec.states[start]
        enters = em.resolve(state.enter, self.where(state, "entry"), "__initial__")
        em.actions(enters, _Ctx("None", _state_var(start), _state_var(start)), 2, set(), False)
        em.put(2, "return")
        tables: list[str] = []
        wild: list[str] = []
        for i, st in enumerate(self.spec.states):
            entries: list[str] = []
            for event in self.spec.events:
                candidates = st.candidates(event)
                if candidates:
                    entries.append(f"{event!r}: {self.handler(st, candidates, event)}")
            tables.append(f"_ab_T{i} = {{{', '.join(entries)}}}")
            wildcards = tuple(t for t in st.transitions if t.wildcard)
            wild.append(self.handler(st, wildcards, None) if wildcards else "None")
        body = em.lines
        header = ["def _ab_build(_ab_E, _ab_M, _ab_C, _ab_S):"]
        if em.consts:
            names = ", ".join(f"_ab_c{i}" for i in range(len(em.consts)))
            header.append(f"    {names}, = _ab_C")
        states = ", ".join(_state_var(i) for i in range(len(self.spec.states)))
        header.append(f"    {states}, = _ab_S")
        footer = [f"    {t}" for t in tables]
        footer.append(
            f"    return _ab_start, ({', '.join(f'_ab_T{i}' for i in range(len(tables)))},), "
            f"({', '.join(wild)},)"
        )
        return "\n".join(header + body + footer) + "\n"


# ------------------------------------------------------------- run-time helpers


def _ab_missing(engine: Any, event: str, name: str, label: str) -> None:
    raise EventArgumentError(
        f"{engine.spec.name}: event {event!r} in state {engine.current_state!r}: {label} needs "
        f"the event argument {name!r}, which send() did not pass; call "
        f"send({event!r}, {name}=...)"
    )


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
    namespace: dict[str, Any] = {"__builtins__": builtins, **_namespace(spec), **_HELPERS}
    exec(code, namespace)
    factory = namespace["_ab_build"]
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
