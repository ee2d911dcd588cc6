"""The builder of ``.sm`` machines: a syntax tree to a python-statemachine class.

The third stage of :mod:`actorbus.fsm.smc`.  It checks names (start state, targets,
parameters, clashes), has each guard and each action list compiled to a Python
function *once*, in the file's namespace (:mod:`actorbus.fsm._smc_code`), and
generates a python-statemachine ``StateMachine`` subclass, returned in an
:class:`SmMachine`.  The compiled engine inlines the same code (see
:mod:`actorbus.fsm._inline`).  Push and pop transitions become ordinary transitions
plus the state-stack callbacks of :mod:`actorbus.fsm._stack`, and a state name
declared in several maps gets the id ``Map::State``.  It is separate from the parser
because it works on the finished tree only (:mod:`actorbus.fsm._smc_ast`), never on
tokens.
"""

from __future__ import annotations

import ast
import keyword
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statemachine import State, StateMachine
from statemachine.factory import StateMachineMetaclass
from statemachine.transition import Transition

from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm import _stack
from actorbus.fsm._errors import TransitionNotAllowed
from actorbus.fsm._smc_ast import _Action, _Code, _File, _MapDecl, _StateDecl, _TransitionDecl
from actorbus.fsm._smc_code import _alias, _call, _commit_helpers, _SmCode
from actorbus.fsm._smc_lexer import _Token
from actorbus.fsm.declare import DEFAULT_TRANSITIONS_ATTR, FROM_DEFAULT_ATTR, DefaultState
from actorbus.fsm.spec import ARG_ALIASES_ATTR, EVENT_IDS_ATTR, MachineSpec, declared_spec

_NAMES_OF_STATEMACHINE = frozenset(dir(StateMachine))
#: python-statemachine keeps states, events and its own attributes in one class
#: namespace; an SMC event whose name is taken there gets this prefix as its
#: python-statemachine id (':' is in no Python name, so the id collides with nothing).
_EVENT_ID_PREFIX = "sm:"


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


class _Builder:
    def __init__(self, parsed: _File, path: str, *, commit_on_error: bool = False) -> None:
        self.parsed = parsed
        self.path = path
        self.commit_on_error = commit_on_error
        # the namespace of guards, actions and %{ %} blocks, and their compiler
        self.code = _SmCode(path)
        # (map, state name) -> state id
        self.ids: dict[tuple[str, str], str] = {}
        # the states push transitions put on the stack, in file order
        self.returns: tuple[str, ...] = ()
        self.event_ids: dict[str, str] = {}
        self.declared: list[str] = []

    def error(self, token: _Token | _Code, message: str) -> SmSyntaxError:
        return SmSyntaxError(message, path=self.path, line=token.line, column=token.column)

    # -- checks
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

    def _state_id(
        self,
        name: _Token | None,
        map_token: _Token | None,
        state: _StateDecl,
        maps: dict[str, _MapDecl],
    ) -> str | None:
        """The id of the state ``[map_token::]name`` seen from ``state`` (``None`` for nil)."""
        if name is None:
            return None
        map_name = map_token.text if map_token is not None else state.map
        decl = maps.get(map_name)
        if decl is None:
            raise self.error(
                map_token or name,
                f"found the unknown map {map_name!r}; expected one of: {', '.join(maps)}",
            )
        if name.text == "Default":
            raise self.error(
                name, "found 'Default' as a next state; expected a real state (or nil)"
            )
        state_id = self.ids.get((map_name, name.text))
        if state_id is None:
            known = ", ".join(s.name.text for s in decl.states)
            raise self.error(
                name,
                f"found the unknown state {name.text!r} in map {map_name!r}; expected one "
                f"of: {known} (or nil)",
            )
        return state_id

    # -- build
    def build(self) -> SmMachine:
        parsed = self.parsed
        maps: dict[str, _MapDecl] = {}
        for m in parsed.maps:
            if m.name.text in maps:
                raise self.error(
                    m.name, f"found a second map {m.name.text!r}; expected distinct map names"
                )
            maps[m.name.text] = m
        # A state's id is its name, or 'Map::Name' when several maps declare that name.
        maps_of: dict[str, int] = {}
        for m in parsed.maps:
            for s in m.states:
                maps_of[s.name.text] = maps_of.get(s.name.text, 0) + 1
        states: dict[str, _StateDecl] = {}
        for m in parsed.maps:
            for s in m.states:
                name = s.name.text
                state_id = name if maps_of[name] == 1 else f"{m.name.text}::{name}"
                self.ids[(m.name.text, name)] = state_id
                states[state_id] = s
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
        start_id = self.ids[(start_map.text, start_state.text)]
        params_of = self._check_names(states)
        # an event named like a state: like its id, or like its name ('Busy' for 'M::Busy')
        state_names = {s.name.text for s in states.values()}
        self.event_ids = {
            event: _EVENT_ID_PREFIX + event
            for event in params_of
            if event in states
            or event in state_names
            or event in _NAMES_OF_STATEMACHINE
            or event.startswith("_")
        }
        self.declared = [event for event in params_of if event != "Default"]
        aliases = {p: _alias(p) for names in params_of.values() for p in names if _alias(p) != p}
        self.code.imports(self.parsed.lines.get("%import", []))
        self.code.run_raw_source(self.parsed.raw_source)
        if self.commit_on_error:
            self.code.namespace.update(_commit_helpers())
        self.code.namespace[_stack.SEND_HELPER] = _stack.sender(self.event_ids, aliases)

        compiled: dict[int, dict[str, Any]] = {}
        for s in self._all_states():
            for t in s.transitions:
                compiled[id(t)] = self._compile(t, s, params_of, maps)
        applies = {sid: self._applying(s, maps, compiled) for sid, s in states.items()}
        # Push transitions: the states they put on the stack (where pops return to), and
        # the states whose Exit a push skips.
        returns: dict[str, None] = {}
        kept: set[str] = set()
        for sid, items in applies.items():
            for info, _t in items:
                if info["push"] is not None:
                    back = info["target"] or sid
                    returns[back] = None
                    if back == sid:
                        kept.add(sid)
        self.returns = tuple(returns)

        objects: dict[str, State] = {}
        for sid, s in states.items():
            hooks: dict[str, list[Any]] = {}
            for which, actions in (("enter", s.entry), ("exit", s.exit)):
                action = None
                label = ""
                if actions:
                    label = "; ".join(self._action_label(a) for a in actions)
                    statements = self.code.statements(actions)
                    if which == "enter" and self.commit_on_error:
                        statements = self.code.deferring(statements, actions[0].name.line)
                    action = self.code.function(
                        f"{s.name.text}_{which}",
                        [],
                        statements,
                        label,
                        actions[0].name.line,
                    )
                gate = sid in returns if which == "enter" else sid in kept
                if gate:
                    hooks[which] = [
                        _stack.gated("entry" if which == "enter" else "exit", action, label)
                    ]
                elif action is not None:
                    hooks[which] = [action]
            objects[sid] = _SmState(
                name=sid,
                initial=sid == start_id,
                final=not s.transitions,
                enter=hooks.get("enter"),
                exit=hooks.get("exit"),
            )

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
                shown = info["push"] if info["push"] is not None else info["target"]
                target = objects[shown] if shown is not None and info["pop"] is None else pseudo
                declared = _SmTransition(
                    pseudo,
                    target,
                    event=info["event"],
                    internal=target is pseudo,
                    **info["callbacks"],
                )
                if info["push"] is not None:
                    setattr(declared, _stack.STACK_OP_ATTR, ("push", info["target"] or ""))
                if info["pop"] is not None:
                    setattr(declared, _stack.STACK_OP_ATTR, ("pop", info["pop"]))
                originals[id(t)] = declared
                declared_defaults.append(declared)

        for sid, items in applies.items():
            source = objects[sid]
            for info, original in items:
                for transition in self._make(
                    sid, source, info, objects, original and originals[id(original)]
                ):
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

    def _applying(
        self, state: _StateDecl, maps: dict[str, _MapDecl], compiled: dict[int, dict[str, Any]]
    ) -> list[tuple[dict[str, Any], _TransitionDecl | None]]:
        """The transitions of ``state`` in the order they are tried, each with the Default
        state's transition it copies (``None`` for the state's own); none if it is final."""
        if not state.transitions:
            return []
        default = maps[state.map].default
        default_list = default.transitions if default is not None else []
        groups: list[list[tuple[dict[str, Any], _TransitionDecl | None]]] = [[], [], [], []]
        for t in state.transitions:
            groups[2 if t.wildcard else 0].append((compiled[id(t)], None))
        for t in default_list:
            groups[3 if t.wildcard else 1].append((compiled[id(t)], t))
        return [item for group in groups for item in group]

    def _compile(
        self,
        t: _TransitionDecl,
        state: _StateDecl,
        params_of: dict[str, list[str]],
        maps: dict[str, _MapDecl],
    ) -> dict[str, Any]:
        params = params_of.get(t.name.text, [])
        where = f"{state.name.text}_{'Default' if t.wildcard else t.name.text}"
        target = self._state_id(t.target, t.target_map, state, maps)
        pushed = (
            self._state_id(t.push_target, t.push_map, state, maps) if t.kind == "push" else None
        )
        callbacks: dict[str, Any] = {}
        if t.wildcard:
            callbacks["validators"] = [self._declared_only()]
        if t.guard is not None:
            expr = self.code.parse(t.guard, "(", "the guard")
            label = " ".join(t.guard.text.split())
            callbacks["cond"] = [
                self.code.function(f"{where}_guard", params, expr, label, t.guard.line)
            ]
        # SMC's commit rule applies to every transition that changes state: a push enters
        # the pushed state, a pop returns to the state on top of the stack
        commit = self.commit_on_error and (target is not None or t.kind in ("push", "pop"))
        if t.actions or commit:
            line = t.actions[0].name.line if t.actions else t.name.line
            statements = self.code.statements(t.actions)
            if commit:
                statements = [_call("_ab_begin", line), *self.code.deferring(statements, line)]
            callbacks["on"] = [
                self.code.function(
                    f"{where}_actions",
                    params if t.actions else [],
                    statements,
                    "; ".join(self._action_label(a) for a in t.actions),
                    line,
                )
            ]
        if commit:
            callbacks["after"] = [
                self.code.function(
                    f"{where}_commit", [], [_call("_ab_end", t.name.line)], "", t.name.line
                )
            ]
        pop: str | None = None
        sender = None
        if t.kind == "pop":
            pop, sender = self._pop(t, where, params, params_of)
        return {
            "event": "*" if t.wildcard else self.event_ids.get(t.name.text, t.name.text),
            "target": target,
            "push": pushed,
            "pop": pop,
            "sender": sender,
            "callbacks": callbacks,
        }

    def _pop(
        self, t: _TransitionDecl, where: str, params: list[str], params_of: dict[str, list[str]]
    ) -> tuple[str, Any]:
        """The text of ``pop(...)`` and the function sending its transition (or ``None``)."""
        event = t.pop_event
        if event is None:
            return "pop", None
        expected = params_of.get(event.text)
        if expected is None or event.text == "Default":
            raise self.error(
                event,
                f"found pop({event.text}), but no state declares a transition {event.text!r}; "
                f"expected the name of a transition this machine declares",
            )
        values: list[ast.expr] = []
        text = ""
        if t.pop_args is not None:
            call = self.code.parse(t.pop_args, "_(", "the arguments of pop(...)")
            assert isinstance(call, ast.Call)
            if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
                raise self.error(
                    t.pop_args,
                    "found keyword or starred arguments in pop(...); expected plain values",
                )
            values = list(call.args)
            text = ", " + " ".join(t.pop_args.text.split())
        if len(values) != len(expected):
            raise self.error(
                t.pop_args or event,
                f"found pop({event.text}) with {len(values)} argument(s); expected "
                f"{len(expected)}, for the parameters ({', '.join(expected)}) of transition "
                f"{event.text!r}",
            )
        label = f"pop({event.text}{text})"
        send = ast.Expr(
            ast.Call(
                ast.Name(_stack.SEND_HELPER, ast.Load()),
                [ast.Name("machine", ast.Load()), ast.Constant(event.text)],
                [ast.keyword(name, value) for name, value in zip(expected, values, strict=True)],
            ),
            lineno=event.line,
            col_offset=0,
        )
        sender = self.code.function(
            f"{where}_pop", params, [send], label, event.line, leading=("machine", "model")
        )
        setattr(sender, _stack.HELPER_ATTR, True)
        return label, sender

    def _make(
        self,
        sid: str,
        source: State,
        info: dict[str, Any],
        objects: dict[str, State],
        original: Any,
    ) -> list[Any]:
        """The python-statemachine transitions of one ``.sm`` transition of state ``sid``."""
        callbacks = info["callbacks"]
        made: list[Any] = []
        if info["pop"] is not None:
            # one copy per state the stack may return to, then the empty-stack copy
            guards = callbacks.get("cond", [])
            actions = callbacks.get("on", [])
            validators = callbacks.get("validators", [])
            # commit_on_error: '_ab_end' raises what the actions kept before the pop's
            # transition is sent (SMC issues it after its 'finally', so not if they raised)
            after = [*callbacks.get("after", [])]
            if info["sender"] is not None:
                after.append(info["sender"])
            for back in self.returns:
                made.append(
                    _SmTransition(
                        source,
                        objects[back],
                        event=info["event"],
                        validators=validators,
                        cond=[_stack.top_is(back), *guards],
                        on=[*actions, _stack.pop_state()],
                        after=after,
                    )
                )
            names = {psm_id: event for event, psm_id in self.event_ids.items()}
            fail = _stack.empty_error(self._class_name(), sid, info["pop"], names)
            made.append(
                _SmTransition(
                    source,
                    source,
                    event=info["event"],
                    internal=True,
                    validators=validators,
                    cond=[_stack.stack_empty(), *guards, fail],
                    on=actions,  # never run (fail raises first); drawn in diagrams
                )
            )
            op: tuple[str, str] = ("pop", info["pop"])
        elif info["push"] is not None:
            back = info["target"] or sid
            # the push first: under commit_on_error, '_ab_end' then raises what the
            # actions or the pushed state's Entry kept, with the push done (SMC's 'finally')
            extra = {**callbacks, "after": [_stack.push_state(back), *callbacks.get("after", [])]}
            if back == sid:
                extra["before"] = [_stack.skip_exit()]
            made.append(_SmTransition(source, objects[info["push"]], event=info["event"], **extra))
            op = ("push", back)
        else:
            loop = info["target"] is None
            target = source if loop else objects[info["target"]]
            made.append(
                _SmTransition(source, target, event=info["event"], internal=loop, **callbacks)
            )
            return self._mark(made, original)
        for transition in made:
            setattr(transition, _stack.STACK_OP_ATTR, op)
        return self._mark(made, original)

    @staticmethod
    def _mark(made: list[Any], original: Any) -> list[Any]:
        if original is not None:
            for transition in made:
                setattr(transition, FROM_DEFAULT_ATTR, original)
        return made
