"""Writing a machine's handlers as Python source, from the resolved callbacks.

Step 2 of :mod:`actorbus.fsm._compile`.  :class:`_Generator` writes one function per
(state, event) — the candidate transitions in order, each guard an ``if`` calling the
resolved object directly, the body the exact callback sequence (before, exit,
actions, state switch, entry, after) — and the per-state dispatch tables, all inside
one ``_ab_build`` factory.  :class:`_Emitter` holds the lines, the closure constants
and how to get each constant again for another model.  ``.sm`` guard and action code
is pasted in (see :mod:`actorbus.fsm._inline`) rather than called.  It is separate
from resolution (:mod:`actorbus.fsm._resolve`), whose items it only reads, and from
the run-time support the source calls (``_ab_missing``, ``_ab_reject``, ``_ab_extra``,
``_ab_in`` in :mod:`actorbus.fsm._compile`), which it only names.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Any

from actorbus.fsm._resolve import (
    INJECTED,
    _Attr,
    _Call,
    _Inline,
    _Item,
    _Recipe,
    _Resolver,
    _Send,
)
from actorbus.fsm.spec import CallbackRef, MachineSpec, StateSpec, TransitionSpec


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
            for statement in self._inline_code(item, indent, fetched):
                first, *rest = statement.split("\n")  # a 'try' (commit_on_error) spans lines
                self.put(indent, f"{first}  # {item.code.where}")
                for line in rest:
                    self.put(indent, line)
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
            # the state changed: kept when the engine keeps a history (its own cost only)
            changed = (_state_var(src), _state_var(tgt))
            em.put(indent, "if _ab_E.history is not None:")
            em.put(
                indent + 1,
                f"_ab_E.history.append((_ab_now(), _ab_event, {changed[0]}.id, {changed[1]}.id))",
            )
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
