"""The builder of ``.sm`` machines: a syntax tree to a python-statemachine class.

The third stage of :mod:`actorbus.fsm.smc`.  It checks names (start state, targets,
parameters, clashes), compiles each guard and each action list to a Python function
*once* (from the AST, so tracebacks point at the ``.sm`` line), and generates a
python-statemachine ``StateMachine`` subclass, returned in an :class:`SmMachine`.
The compiled engine inlines the same code (see :mod:`actorbus.fsm._inline`).  It is
separate from the parser because it works on the finished tree only
(:mod:`actorbus.fsm._smc_ast`), never on tokens.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import itertools
import keyword
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from statemachine import State, StateMachine
from statemachine.factory import StateMachineMetaclass
from statemachine.transition import Transition

from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm._errors import TransitionNotAllowed
from actorbus.fsm._inline import InlineCode
from actorbus.fsm._smc_ast import _Action, _Code, _File, _MapDecl, _StateDecl, _TransitionDecl
from actorbus.fsm._smc_lexer import _Token
from actorbus.fsm.declare import DEFAULT_TRANSITIONS_ATTR, FROM_DEFAULT_ATTR, DefaultState
from actorbus.fsm.spec import (
    ARG_ALIASES_ATTR,
    EVENT_IDS_ATTR,
    INLINE_ATTR,
    MachineSpec,
    declared_spec,
)

#: Names python-statemachine injects into callbacks by parameter name.  A ``.sm``
#: transition parameter may use them (SMC allows any name): the generated function
#: takes it as ``_ARG_ALIAS_PREFIX + name``, which the reference engine passes too.
_INJECTED_BY_PSM = frozenset(
    {"model", "machine", "event", "source", "target", "state", "transition", "event_data"}
)
_NAMES_OF_STATEMACHINE = frozenset(dir(StateMachine))
#: python-statemachine keeps states, events and its own attributes in one class
#: namespace; an SMC event whose name is taken there gets this prefix as its
#: python-statemachine id (':' is in no Python name, so the id collides with nothing).
_EVENT_ID_PREFIX = "sm:"
_ARG_ALIAS_PREFIX = "_ab_p_"


@dataclass(frozen=True)
class SmMachine:
    """A loaded ``.sm`` file: what it declares, and the machine built from it.

    Pass it (or its :attr:`machine_class`) to :func:`~actorbus.fsm.compile_machine`,
    :func:`~actorbus.fsm.reference_machine` or :func:`~actorbus.fsm.render`.

    Attributes:
        path: the file (``"<string>"`` for :func:`parse_sm` without a path).
        machine_class: the generated python-statemachine ``StateMachine`` subclass.
        spec: its :class:`~actorbus.fsm.MachineSpec`.
        start: ``(map, state)`` of ``%start``.
        maps: the map names, in file order.
        class_name, fsm_class, fsm_file, package: the directives' values, or ``None``.
        imports, declares, access, headers, includes: the raw lines of those directives.
        raw_source: the text of the ``%{ ... %}`` blocks (run when the file was loaded).
        commit_on_error: ``True`` if loaded with SMC's rule for exceptions of transition
            and entry actions (see :func:`~actorbus.fsm.parse_sm`).
    """

    path: str
    machine_class: type[StateMachine]
    spec: MachineSpec
    start: tuple[str, str]
    maps: tuple[str, ...]
    class_name: str | None = None
    fsm_class: str | None = None
    fsm_file: str | None = None
    package: str | None = None
    imports: tuple[str, ...] = ()
    declares: tuple[str, ...] = ()
    access: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()
    raw_source: tuple[str, ...] = ()
    commit_on_error: bool = False


class _SmState(State):
    """A state of a ``.sm`` machine: no python-statemachine naming conventions.

    SMC runs the actions the file names and nothing else; without this an actor method
    that happens to be called ``on_enter_Idle`` or ``on_data`` would run too.
    """

    def _setup(self) -> None:
        return None


class _SmTransition(Transition):
    """A transition of a ``.sm`` machine: no naming conventions (see :class:`_SmState`)."""

    def _setup(self) -> None:
        return None


def _shift(tree: ast.AST, line: int) -> None:
    """Move ``tree``, parsed from a snippet, to where the snippet starts in the file."""
    node: Any
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno += line - 1
            end = getattr(node, "end_lineno", None)
            if end is not None:
                node.end_lineno = end + line - 1


def _fix_locations(module: ast.Module) -> None:
    """Give built nodes valid positions: ends never before starts (tracebacks use lines)."""
    ast.fix_missing_locations(module)
    nodes: list[Any] = [n for n in ast.walk(module) if hasattr(n, "lineno")]
    for node in nodes:
        end = getattr(node, "end_lineno", None)
        if end is None or end < node.lineno:
            node.end_lineno = node.lineno
        if (
            node.end_lineno == node.lineno
            and (getattr(node, "end_col_offset", None) or 0) < node.col_offset
        ):
            node.end_col_offset = node.col_offset
    for node in nodes:
        child: Any
        for child in ast.walk(node):
            child_end = getattr(child, "end_lineno", None)
            if child_end is not None and child_end > (node.end_lineno or 0):
                node.end_lineno = child_end
                node.end_col_offset = getattr(child, "end_col_offset", 0)


def _ctxt() -> ast.expr:
    return ast.Name("ctxt", ast.Load())


def _call(helper: str, line: int) -> ast.stmt:
    """``helper(ctxt)``: a call of one of ``_commit_helpers()``."""
    return ast.Expr(
        ast.Call(ast.Name(helper, ast.Load()), [_ctxt()], []), lineno=line, col_offset=0
    )


def _commit_helpers() -> dict[str, Any]:
    """What the code of a machine loaded with ``commit_on_error=True`` calls.

    SMC's generated transition runs the actions in a ``try`` whose ``finally`` sets the
    target state and runs its entry actions, so an exception of either leaves the
    machine in the target.  Both engines run python-statemachine's order instead
    (actions, state switch, entry actions, ``after``), where an exception before the
    switch rolls back.  So an external transition of such a machine begins with
    ``_ab_begin(ctxt)``, its actions and the entry actions of every state keep an
    exception (``_ab_defer``) instead of raising it, and the transition's ``after``
    callback, run once the target is entered, raises the last one kept, chained to the
    earlier one (``_ab_end``).  Entry actions outside a transition (the start) raise at
    once.  Keyed by the model, as one engine runs one model on one thread at a time.
    """
    pending: dict[int, list[BaseException]] = {}

    def begin(ctxt: object) -> None:
        pending[id(ctxt)] = []

    def defer(ctxt: object, error: BaseException) -> None:
        errors = pending.get(id(ctxt))
        if errors is None:
            raise error
        errors.append(error)

    def end(ctxt: object) -> None:
        errors = pending.pop(id(ctxt), None)
        if errors:
            for earlier, later in itertools.pairwise(errors):
                later.__context__ = earlier
            raise errors[-1]

    return {"_ab_begin": begin, "_ab_defer": defer, "_ab_end": end}


def _alias(param: str) -> str:
    """The name a generated function takes ``param`` under (see ``_INJECTED_BY_PSM``)."""
    return _ARG_ALIAS_PREFIX + param if param in _INJECTED_BY_PSM else param


class _Builder:
    def __init__(self, parsed: _File, path: str, *, commit_on_error: bool = False) -> None:
        self.parsed = parsed
        self.path = path
        self.commit_on_error = commit_on_error
        # the module namespace of guards, actions and %{ %} blocks
        self.namespace: dict[str, Any] = {
            "__builtins__": builtins,
            "__name__": "actorbus.fsm.generated",
        }
        self.functions = 0
        self.event_ids: dict[str, str] = {}
        self.declared: list[str] = []

    def error(self, token: _Token | _Code, message: str) -> SmSyntaxError:
        return SmSyntaxError(message, path=self.path, line=token.line, column=token.column)

    # -- Python code
    def _parse_code(self, code: _Code, prefix: str, what: str) -> ast.expr:
        """Parse ``prefix + code.text + ')'`` as an expression, mapping errors to the file."""
        source = f"{prefix}{code.text}\n)"
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            lineno = exc.lineno or 1
            offset = exc.offset or 1
            lines = code.text.split("\n")
            if lineno > len(lines):
                line = code.line + len(lines) - 1
                column = (code.column if len(lines) == 1 else 1) + len(lines[-1])
            elif lineno == 1:
                line, column = code.line, code.column + max(offset - 1 - len(prefix), 0)
            else:
                line, column = code.line + lineno - 1, offset
            raise SmSyntaxError(
                f"found invalid Python in {what}: {exc.msg}; expected {what} to be valid Python",
                path=self.path,
                line=line,
                column=column,
            ) from None
        _shift(tree, code.line)
        return tree.body

    def _target_of(self, name: _Token) -> ast.expr:
        parts = name.text.split(".")
        if parts[0] == "ctxt":
            parts = parts[1:]
        for part in parts:
            if not part.isidentifier() or keyword.iskeyword(part):
                raise self.error(
                    name, f"found the action name {name.text!r}; expected a Python name"
                )
        where = {
            "lineno": name.line,
            "end_lineno": name.line,
            "col_offset": name.column - 1,
            "end_col_offset": name.column - 1 + len(name.text),
        }
        node: ast.expr = ast.Name("ctxt", ast.Load(), **where)
        for part in parts:
            node = ast.Attribute(node, part, ast.Load(), **where)
        return node

    def _statements(self, actions: list[_Action]) -> list[ast.stmt]:
        statements: list[ast.stmt] = []
        for action in actions:
            target = self._target_of(action.name)
            if action.args is not None:
                call = self._parse_code(
                    action.args, "_(", f"the arguments of {action.name.text}(...)"
                )
                assert isinstance(call, ast.Call)
                call.func = target
                statements.append(ast.Expr(call, lineno=action.name.line, col_offset=0))
            else:
                assert action.value is not None
                value = self._parse_code(
                    action.value, "(", f"the value assigned to {action.name.text}"
                )
                assert isinstance(target, ast.Attribute)
                target.ctx = ast.Store()
                statements.append(
                    ast.Assign([target], value, lineno=action.name.line, col_offset=0)
                )
        return statements

    def _function(
        self,
        name: str,
        params: list[str],
        body: ast.expr | list[ast.stmt],
        label: str,
        line: int,
    ) -> Any:
        """Compile one guard (an expression) or action list (statements) into a function."""
        self.functions += 1
        fname = f"{name}_{self.functions}"
        # ctxt first: a parameter may be called model, and takes that name next
        prologue: list[ast.stmt] = [
            ast.Assign([ast.Name(p, ast.Store())], ast.Name(arg, ast.Load()), lineno=line)
            for p, arg in [("ctxt", "model"), *((p, _alias(p)) for p in params if _alias(p) != p)]
        ]
        if isinstance(body, list):
            kind: Literal["expr", "stmts"] = "stmts"
            statements: list[ast.stmt] = [*prologue, *body]
            code = tuple(ast.unparse(s) for s in body)
        else:
            kind = "expr"
            statements = [*prologue, ast.Return(body, lineno=line, col_offset=0)]
            code = (ast.unparse(body),)
        arguments = ast.arguments(
            posonlyargs=[],
            args=[ast.arg("model"), *(ast.arg(_alias(p)) for p in params)],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        function = ast.FunctionDef(fname, arguments, statements, [], lineno=line, col_offset=0)
        module = ast.Module([function], [])
        _fix_locations(module)
        scope: dict[str, Any] = {}
        exec(compile(module, self.path, "exec"), self.namespace, scope)
        func = scope[fname]
        setattr(
            func,
            INLINE_ATTR,
            InlineCode(kind, code, tuple(params), label, f"{self.path}:{line}", self.namespace),
        )
        return func

    def _run_raw_source(self) -> None:
        """Run the ``%{ ... %}`` blocks, in file order, in the namespace guards and
        actions run in, so the helpers they define are in scope there (SMC pastes the
        blocks into the module it generates)."""
        for block in self.parsed.raw_source:
            try:
                tree = ast.parse(block.text, self.path, "exec")
            except SyntaxError as exc:
                lineno = exc.lineno or 1
                offset = exc.offset or 1
                line = block.line + lineno - 1
                column = block.column + offset - 1 if lineno == 1 else offset
                raise SmSyntaxError(
                    f"found invalid Python in a '%{{ ... %}}' block: {exc.msg}; expected "
                    f"Python (the blocks of a .sm file run as Python when it is loaded)",
                    path=self.path,
                    line=line,
                    column=column,
                ) from None
            _shift(tree, block.line)
            try:
                exec(compile(tree, self.path, "exec"), self.namespace)
            except Exception as exc:
                raise FsmError(
                    f"{self.path}:{block.line}: the '%{{ ... %}}' block raised "
                    f"{type(exc).__name__}: {exc}; fix the block (it runs when the file is "
                    f"loaded, after the %import lines)"
                ) from exc

    # -- checks
    def _imports(self) -> None:
        for line in self.parsed.lines.get("%import", []):
            module = line.rstrip(";").strip()
            if module.startswith("import "):
                module = module[len("import ") :].strip()
            if not all(p.isidentifier() for p in module.split(".")):
                continue  # not a Python module path: kept as metadata only
            try:
                importlib.import_module(module)
            except ImportError:
                continue  # e.g. a Java import in a file shared with SMC's Java target
            top = module.split(".")[0]
            self.namespace[top] = importlib.import_module(top)

    def _check_names(self, states: dict[str, _StateDecl]) -> dict[str, list[str]]:
        params_of: dict[str, tuple[list[str], _Token]] = {}
        for state in states.values():
            sname = state.name.text
            if sname in _NAMES_OF_STATEMACHINE or sname.startswith("_") or "." in sname:
                raise self.error(
                    state.name,
                    f"found the state name {sname!r}, which python-statemachine cannot use "
                    f"(a StateMachine attribute, a leading '_' or a '.'); expected another name",
                )
        for state in self._all_states():
            unguarded: dict[str, _Token] = {}
            for t in state.transitions:
                event = t.name.text
                if not t.wildcard:
                    if "." in event:
                        raise self.error(
                            t.name,
                            f"found the transition name {event!r}; expected a name without '.'",
                        )
                elif t.params:
                    raise self.error(
                        t.params[0].name,
                        "found parameters on a 'Default' transition; expected none (it "
                        "answers any event, whatever its arguments)",
                    )
                names: list[str] = []
                for p in t.params:
                    pname = p.name.text
                    if not pname.isidentifier() or keyword.iskeyword(pname):
                        raise self.error(
                            p.name, f"found the parameter {pname!r}; expected a Python name"
                        )
                    if pname == "ctxt" or pname.startswith("_ab_"):
                        raise self.error(
                            p.name,
                            f"found the parameter name {pname!r}, which guards and actions "
                            f"use for the context (ctxt) or actorbus uses ('_ab_' names); "
                            f"expected another name",
                        )
                    if pname in names:
                        raise self.error(
                            p.name, f"found the parameter {pname!r} twice; expected distinct names"
                        )
                    names.append(pname)
                previous = params_of.get(event)
                if previous is None:
                    params_of[event] = (names, t.name)
                elif previous[0] != names and not t.wildcard:
                    raise self.error(
                        t.name,
                        f"found transition {event!r} with parameters ({', '.join(names)}); "
                        f"expected ({', '.join(previous[0])}) as declared at line "
                        f"{previous[1].line}: a transition has one parameter list everywhere",
                    )
                first = unguarded.get(event)
                if first is not None:
                    raise self.error(
                        t.name,
                        f"found transition {event!r} after an unguarded {event!r} at line "
                        f"{first.line} in state {state.name.text!r}; expected the unguarded "
                        f"one last (it always wins, so this one could never be taken)",
                    )
                if t.guard is None:
                    unguarded[event] = t.name
        return {event: names for event, (names, _t) in params_of.items()}

    def _all_states(self) -> list[_StateDecl]:
        out: list[_StateDecl] = []
        for m in self.parsed.maps:
            out.extend(m.states)
            if m.default is not None:
                out.append(m.default)
        return out

    def _resolve_target(
        self, t: _TransitionDecl, state: _StateDecl, maps: dict[str, _MapDecl]
    ) -> str | None:
        if t.target is None:
            return None
        map_name = t.target_map.text if t.target_map is not None else state.map
        decl = maps.get(map_name)
        if decl is None:
            raise self.error(
                t.target_map or t.target,
                f"found the unknown map {map_name!r}; expected one of: {', '.join(maps)}",
            )
        if t.target.text == "Default":
            raise self.error(
                t.target, "found 'Default' as a next state; expected a real state (or nil)"
            )
        if t.target.text not in {s.name.text for s in decl.states}:
            known = ", ".join(s.name.text for s in decl.states)
            raise self.error(
                t.target,
                f"found the unknown state {t.target.text!r} in map {map_name!r}; expected one "
                f"of: {known} (or nil)",
            )
        return t.target.text

    # -- build
    def build(self) -> SmMachine:
        parsed = self.parsed
        maps: dict[str, _MapDecl] = {}
        states: dict[str, _StateDecl] = {}
        for m in parsed.maps:
            if m.name.text in maps:
                raise self.error(
                    m.name, f"found a second map {m.name.text!r}; expected distinct map names"
                )
            maps[m.name.text] = m
            for s in m.states:
                other = states.get(s.name.text)
                if other is not None:
                    raise self.error(
                        s.name,
                        f"found state {s.name.text!r} in map {m.name.text!r}, already defined "
                        f"in map {other.map!r} at line {other.name.line}; expected state names "
                        f"unique across maps",
                    )
                states[s.name.text] = s
        assert parsed.start is not None
        start_map, start_state = parsed.start
        decl = maps.get(start_map.text)
        if decl is None:
            raise self.error(
                start_map,
                f"found the unknown map {start_map.text!r} in %start; expected one of: {', '.join(maps)}",
            )
        if start_state.text not in {s.name.text for s in decl.states}:
            raise self.error(
                start_state,
                f"found the unknown state {start_state.text!r} in %start; expected a state of "
                f"map {start_map.text!r}",
            )
        params_of = self._check_names(states)
        self.event_ids = {
            event: _EVENT_ID_PREFIX + event
            for event in params_of
            if event in states or event in _NAMES_OF_STATEMACHINE or event.startswith("_")
        }
        self.declared = [event for event in params_of if event != "Default"]
        aliases = {p: _alias(p) for names in params_of.values() for p in names if _alias(p) != p}
        self._imports()
        self._run_raw_source()
        if self.commit_on_error:
            self.namespace.update(_commit_helpers())

        objects: dict[str, State] = {}
        for name, s in states.items():
            hooks: dict[str, list[Any]] = {}
            for which, actions in (("enter", s.entry), ("exit", s.exit)):
                if actions:
                    statements = self._statements(actions)
                    if which == "enter" and self.commit_on_error:
                        statements = self._deferring(statements, actions[0].name.line)
                    hooks[which] = [
                        self._function(
                            f"{name}_{which}",
                            [],
                            statements,
                            "; ".join(self._action_label(a) for a in actions),
                            actions[0].name.line,
                        )
                    ]
            objects[name] = _SmState(
                name=name,
                initial=name == start_state.text,
                final=not s.transitions,
                enter=hooks.get("enter"),
                exit=hooks.get("exit"),
            )

        compiled: dict[int, dict[str, Any]] = {}
        for s in self._all_states():
            for t in s.transitions:
                compiled[id(t)] = self._compile(t, s, params_of.get(t.name.text, []), maps)

        default_objects: dict[str, DefaultState] = {}
        declared_defaults: list[Any] = []
        originals: dict[int, Any] = {}
        for m in parsed.maps:
            if m.default is None:
                continue
            pseudo = DefaultState()
            pseudo._set_id("Default")
            default_objects[m.name.text] = pseudo
            for t in m.default.transitions:
                info = compiled[id(t)]
                target = objects[info["target"]] if info["target"] is not None else pseudo
                declared = _SmTransition(
                    pseudo,
                    target,
                    event=info["event"],
                    internal=info["target"] is None,
                    **info["callbacks"],
                )
                originals[id(t)] = declared
                declared_defaults.append(declared)

        for name, s in states.items():
            source = objects[name]
            if source.final:
                continue
            default = maps[s.map].default
            default_list = default.transitions if default is not None else []
            groups: list[list[Any]] = [[], [], [], []]
            for t in s.transitions:
                groups[2 if t.wildcard else 0].append(
                    self._make(source, compiled[id(t)], objects, None)
                )
            for t in default_list:
                groups[3 if t.wildcard else 1].append(
                    self._make(source, compiled[id(t)], objects, originals[id(t)])
                )
            for group in groups:
                for transition in group:
                    source.transitions.add_transitions(transition)

        class_name = self._class_name()
        attrs: dict[str, Any] = dict(objects)
        attrs.update(
            {
                "__module__": "actorbus.fsm.generated",
                "__doc__": f"State machine generated from {self.path}.",
                "_actorbus_source_path": self.path,
                DEFAULT_TRANSITIONS_ATTR: tuple(declared_defaults),
                EVENT_IDS_ATTR: self.event_ids,
                ARG_ALIASES_ATTR: aliases,
                "validate_disconnected_states": False,
                "validate_final_reachability": False,
            }
        )
        try:
            cls: Any = StateMachineMetaclass(class_name, (StateMachine,), attrs)
        except Exception as exc:  # python-statemachine's InvalidDefinition and friends
            raise FsmError(f"{self.path}: python-statemachine rejected the machine: {exc}") from exc
        cls._specs.items = [spec for spec in cls._specs.items if not spec.is_convention]
        cls._specs.conventional_specs = set()
        directives = parsed.directives
        return SmMachine(
            path=self.path,
            machine_class=cls,
            spec=declared_spec(cls),
            start=(start_map.text, start_state.text),
            maps=tuple(maps),
            class_name=directives["%class"].text if "%class" in directives else None,
            fsm_class=directives["%fsmclass"].text if "%fsmclass" in directives else None,
            fsm_file=directives["%fsmfile"].text if "%fsmfile" in directives else None,
            package=directives["%package"].text if "%package" in directives else None,
            imports=tuple(parsed.lines.get("%import", [])),
            declares=tuple(parsed.lines.get("%declare", [])),
            access=tuple(parsed.lines.get("%access", [])),
            headers=tuple(parsed.lines.get("%header", [])),
            includes=tuple(parsed.lines.get("%include", [])),
            raw_source=tuple(block.text for block in parsed.raw_source),
            commit_on_error=self.commit_on_error,
        )

    def _class_name(self) -> str:
        directives = self.parsed.directives
        if "%fsmclass" in directives:
            return directives["%fsmclass"].text.split(".")[-1]
        if "%class" in directives:
            return directives["%class"].text.split(".")[-1] + "Context"
        stem = Path(self.path).stem if self.path != "<string>" else "Sm"
        return "".join(p.capitalize() for p in stem.replace("-", "_").split("_") if p) + "Context"

    def _deferring(self, statements: list[ast.stmt], line: int) -> list[ast.stmt]:
        """``statements`` under SMC's commit rule: an exception is kept until the
        transition has entered its target (``_ab_end``), as SMC's ``finally`` does."""
        if not statements:
            return []
        error = ast.Name("_ab_error", ast.Load())
        handler = ast.ExceptHandler(
            ast.Name("BaseException", ast.Load()),
            "_ab_error",
            [ast.Expr(ast.Call(ast.Name("_ab_defer", ast.Load()), [_ctxt(), error], []))],
            lineno=line,
            col_offset=0,
        )
        return [ast.Try(statements, [handler], [], [], lineno=line, col_offset=0)]

    def _declared_only(self) -> Any:
        """The validator of every ``Default`` transition: SMC generates one method per
        event the file declares, so an event it never declares reaches no Default
        transition there (the call fails); it is rejected here too."""
        events = frozenset(self.declared) | frozenset(self.event_ids.values())
        machine = self._class_name()

        def declared(event: str, state: Any) -> None:
            if event not in events:
                raise TransitionNotAllowed(
                    machine,
                    str(getattr(state, "id", state)),
                    str(event),
                    "the .sm file declares no transition of that name, and a 'Default' "
                    "transition answers only the events the file declares (SMC's rule: "
                    f"'{event} nil {{}}' in the Default state declares it)",
                )

        return declared

    @staticmethod
    def _action_label(action: _Action) -> str:
        if action.args is not None:
            return f"{action.name.text}({' '.join(action.args.text.split())})"
        assert action.value is not None
        return f"{action.name.text} = {' '.join(action.value.text.split())}"

    def _compile(
        self, t: _TransitionDecl, state: _StateDecl, params: list[str], maps: dict[str, _MapDecl]
    ) -> dict[str, Any]:
        where = f"{state.name.text}_{'Default' if t.wildcard else t.name.text}"
        target = self._resolve_target(t, state, maps)
        callbacks: dict[str, Any] = {}
        if t.wildcard:
            callbacks["validators"] = [self._declared_only()]
        if t.guard is not None:
            expr = self._parse_code(t.guard, "(", "the guard")
            label = " ".join(t.guard.text.split())
            callbacks["cond"] = [
                self._function(f"{where}_guard", params, expr, label, t.guard.line)
            ]
        commit = self.commit_on_error and target is not None
        if t.actions or commit:
            line = t.actions[0].name.line if t.actions else t.name.line
            statements = self._statements(t.actions)
            if commit:
                statements = [_call("_ab_begin", line), *self._deferring(statements, line)]
            callbacks["on"] = [
                self._function(
                    f"{where}_actions",
                    params if t.actions else [],
                    statements,
                    "; ".join(self._action_label(a) for a in t.actions),
                    line,
                )
            ]
        if commit:
            callbacks["after"] = [
                self._function(
                    f"{where}_commit", [], [_call("_ab_end", t.name.line)], "", t.name.line
                )
            ]
        return {
            "event": "*" if t.wildcard else self.event_ids.get(t.name.text, t.name.text),
            "target": target,
            "callbacks": callbacks,
        }

    @staticmethod
    def _make(source: State, info: dict[str, Any], objects: dict[str, State], original: Any) -> Any:
        loop = info["target"] is None
        target = source if loop else objects[info["target"]]
        transition = _SmTransition(
            source, target, event=info["event"], internal=loop, **info["callbacks"]
        )
        if original is not None:
            setattr(transition, FROM_DEFAULT_ATTR, original)
        return transition
