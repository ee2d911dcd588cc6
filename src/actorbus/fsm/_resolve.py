"""Resolving a machine's callback references against one model: the argument plans.

Step 1 of :mod:`actorbus.fsm._compile`.  Every :class:`~actorbus.fsm.spec.CallbackRef`
is looked up the way python-statemachine does it at instantiation (machine class
first, then the model), and each resolved callable's signature is turned, once, into
an argument plan (:class:`_Param`): injected, from ``send()``'s keyword arguments, or
a ``**kwargs`` catch-all.  The result is a list of items (:data:`_Item`) the code
generator (:mod:`actorbus.fsm._codegen`) writes calls for.  It is separate from
generation because it knows python-statemachine's lookup rules and signatures, and
nothing of the code written from them.
"""

from __future__ import annotations

import ast
import inspect
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from statemachine.event import Event
from statemachine.spec_parser import replace_operators

from actorbus.errors import FsmError
from actorbus.fsm._errors import UnsupportedMachineError
from actorbus.fsm._inline import InlineCode
from actorbus.fsm.spec import INLINE_ATTR, CallbackRef, MachineSpec

#: Names every callback can ask for by parameter name.
INJECTED = frozenset({"event", "source", "target", "state", "model", "ctxt", "machine"})
#: Names only python-statemachine's own engine provides.
REFERENCE_ONLY = frozenset({"transition", "event_data"})
_PREFIX = "_ab_"


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
