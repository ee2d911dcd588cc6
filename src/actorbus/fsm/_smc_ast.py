"""The syntax tree of a ``.sm`` file: what the parser produces and the builder reads.

The parser (:mod:`actorbus.fsm._smc_parser`) fills these plain records from tokens; the
builder (:mod:`actorbus.fsm._smc_builder`) checks names and turns them into a machine.
They sit in a module of their own so that neither stage imports the other.  Every
record keeps the tokens it came from, so the builder's errors point at the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from actorbus.fsm._smc_lexer import _Token


@dataclass
class _Code:
    """Raw code and where it starts."""

    text: str
    line: int
    column: int


@dataclass
class _Action:
    name: _Token
    args: _Code | None  # None for an assignment
    value: _Code | None  # the assigned value


@dataclass
class _Param:
    name: _Token
    type: str


@dataclass
class _TransitionDecl:
    name: _Token
    params: list[_Param]
    guard: _Code | None
    target: _Token | None  # None for nil
    target_map: _Token | None
    actions: list[_Action]
    kind: Literal["set", "jump", "push", "pop"] = "set"
    # push: the pushed state (target/target_map stay the end state, None for the current)
    push_target: _Token | None = None
    push_map: _Token | None = None
    # pop: the transition it issues (None for a bare pop) and that transition's arguments
    pop_event: _Token | None = None
    pop_args: _Code | None = None
    # the 'push' or 'pop' keyword, for errors
    keyword: _Token | None = None

    @property
    def wildcard(self) -> bool:
        return self.name.text == "Default"


@dataclass
class _StateDecl:
    name: _Token
    map: str
    entry: list[_Action] | None = None
    exit: list[_Action] | None = None
    transitions: list[_TransitionDecl] = field(default_factory=list)


@dataclass
class _MapDecl:
    name: _Token
    states: list[_StateDecl] = field(default_factory=list)
    default: _StateDecl | None = None


@dataclass
class _File:
    start: tuple[_Token, _Token] | None = None
    directives: dict[str, _Token] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=dict)
    raw_source: list[_Code] = field(default_factory=list)
    maps: list[_MapDecl] = field(default_factory=list)
