"""Load state machines written in SMC's ``.sm`` language (the State Machine Compiler).

Theory of operation
-------------------
Three stages, each reporting errors as :class:`~actorbus.errors.SmSyntaxError` with
``path:line:column``, what was found and what was expected:

1. **Lexer** (:class:`_Lexer`): turns text into tokens — words, ``%`` directives,
   ``%%``, ``::`` and punctuation — skipping whitespace, ``//`` line comments and
   (nested) ``/* */`` comments.  The parser asks it for *raw code* where SMC has target
   language code: a guard ``[...]``, action arguments ``(...)``, a parameter type, an
   assignment value, the rest of a ``%import`` line, a ``%{ ... %}`` block.  Raw code is
   scanned with Python's bracket and string rules and no comment rules (``//`` is floor
   division in Python).

2. **Parser** (:class:`_Parser`, recursive descent) follows SMC's grammar::

       fsm        := (raw_source | directive)* map+
       directive  := %start Map::State | %class W | %fsmclass W | %fsmfile W | %package W
                   | %import LINE | %declare LINE | %access LINE | %header LINE | %include LINE
       map        := %map W %% state* %%
       state      := W (Entry {action*})? (Exit {action*})? { transition* }
       transition := W ( '(' param (, param)* ')' )? ( '[' guard ']' )? next { action* }
       param      := W (':' type)?          types are read and ignored
       next       := nil | W | Map::State | jump(Map::State)      push/pop: rejected
       action     := W '(' args ')' ';' | W '=' value ';'

3. **Builder**: checks names (start state, targets, parameters, clashes), compiles each
   guard and each action list to a Python function *once* (from the AST, so tracebacks
   point at the ``.sm`` line), and generates a python-statemachine ``StateMachine``
   subclass.  The compiled engine inlines the same code (see :mod:`actorbus.fsm._inline`).

Semantics of the Python flavour (documented in ``docs/fsm.md``):

* A guard is a Python expression; ``ctxt`` (the model) and the transition's parameters
  are in scope, plus the modules named by ``%import`` lines that Python can import.
* An action ``name(args);`` calls ``ctxt.name(args)``, as SMC does; ``ctxt.name(args);``
  is accepted as well.  ``name = value;`` sets ``ctxt.name``.
* ``nil`` is a loopback: the actions run, the state's exit and entry actions do not.
  Naming the current state instead runs exit and entry actions (SMC rule).
* The ``Default`` state's transitions apply to every state of its map, after that
  state's own transitions for the same event (so also when all of its guards fail); a
  transition named ``Default`` answers any event the state does not otherwise handle.
  Lookup order: own transitions, Default state's transitions, own ``Default``
  transition, Default state's ``Default`` transition (SMC's generated code does this).
* A state whose body declares no transitions is *final* (as SMC's "OK {}" examples):
  Default transitions do not apply to it and every event there is rejected.  Give it a
  transition (a ``nil`` loopback will do) to keep it reacting.
* ``push``/``pop`` transitions are rejected: they need a state stack that neither
  python-statemachine's ``StateMachine`` nor the flat engine has.  ``jump(Map::State)``
  is a plain transition into another map and is supported.
* ``%{ ... %}``, ``%declare``, ``%access``, ``%header``, ``%include``, ``%package`` and
  non-Python ``%import`` lines are kept on :class:`SmMachine` and otherwise ignored.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import keyword
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from statemachine import State, StateMachine
from statemachine.factory import StateMachineMetaclass
from statemachine.transition import Transition

from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm._inline import InlineCode
from actorbus.fsm.declare import DEFAULT_TRANSITIONS_ATTR, FROM_DEFAULT_ATTR, DefaultState
from actorbus.fsm.spec import INLINE_ATTR, MachineSpec, machine_spec, use_sm_loader

__all__ = ["SmMachine", "load_sm", "parse_sm"]

#: Parameter names the engines inject; a transition parameter may not use them.
_RESERVED_PARAMS = frozenset(
    {"ctxt", "model", "machine", "event", "source", "target", "state", "transition", "event_data"}
)
_MODIFIERS = frozenset({"final", "const", "volatile"})
_NAMES_OF_STATEMACHINE = frozenset(dir(StateMachine))

# ------------------------------------------------------------------------- lexer

TokenKind = Literal[
    "word",
    "directive",
    "%%",
    "raw_source",
    "::",
    ":",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ";",
    "/",
    "=",
    "eof",
]


@dataclass(frozen=True)
class _Token:
    kind: TokenKind
    text: str
    line: int
    column: int

    def describe(self) -> str:
        if self.kind == "eof":
            return "the end of the file"
        if self.kind == "word":
            return f"the word {self.text!r}"
        if self.kind == "directive":
            return f"the directive {self.text!r}"
        if self.kind == "raw_source":
            return "a '%{ ... %}' block"
        return repr(self.text)


_PUNCTUATION = {"{", "}", "(", ")", "[", "]", ",", ";", "/", "="}


class _Lexer:
    """Tokens and raw code from ``.sm`` text, with 1-based line and column numbers."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.pos = 0
        self.line = 1
        self.column = 1
        self._peeked: _Token | None = None

    def error(self, message: str, line: int, column: int) -> SmSyntaxError:
        return SmSyntaxError(message, path=self.path, line=line, column=column)

    def _advance(self, count: int = 1) -> None:
        for _ in range(count):
            if self.text[self.pos] == "\n":
                self.line += 1
                self.column = 1
            else:
                self.column += 1
            self.pos += 1

    def _skip_blank(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\f\v":
                self._advance()
            elif text.startswith("//", self.pos):
                while self.pos < len(text) and text[self.pos] != "\n":
                    self._advance()
            elif text.startswith("/*", self.pos):
                line, column = self.line, self.column
                depth = 0
                while True:
                    if self.pos >= len(text):
                        raise self.error(
                            "found the end of the file inside a '/*' comment; expected '*/' "
                            "to close the comment opened here",
                            line,
                            column,
                        )
                    if text.startswith("/*", self.pos):
                        depth += 1
                        self._advance(2)
                    elif text.startswith("*/", self.pos):
                        depth -= 1
                        self._advance(2)
                        if depth == 0:
                            break
                    else:
                        self._advance()
            else:
                return

    def peek(self) -> _Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> _Token:
        token = self.peek()
        self._peeked = None
        return token

    def _scan(self) -> _Token:
        self._skip_blank()
        text = self.text
        line, column = self.line, self.column
        if self.pos >= len(text):
            return _Token("eof", "", line, column)
        char = text[self.pos]
        if char == "%":
            if text.startswith("%%", self.pos):
                self._advance(2)
                return _Token("%%", "%%", line, column)
            if text.startswith("%{", self.pos):
                end = text.find("%}", self.pos + 2)
                if end < 0:
                    raise self.error(
                        "found the end of the file inside a '%{' block; expected '%}' to "
                        "close the block opened here",
                        line,
                        column,
                    )
                body = text[self.pos + 2 : end]
                self._advance(end + 2 - self.pos)
                return _Token("raw_source", body, line, column)
            start = self.pos
            self._advance()
            while self.pos < len(text) and (text[self.pos].isalnum() or text[self.pos] == "_"):
                self._advance()
            return _Token("directive", text[start : self.pos], line, column)
        if char.isalpha() or char == "_":
            start = self.pos
            while self.pos < len(text) and (text[self.pos].isalnum() or text[self.pos] in "_."):
                self._advance()
            return _Token("word", text[start : self.pos], line, column)
        if char == ":":
            if text.startswith("::", self.pos):
                self._advance(2)
                return _Token("::", "::", line, column)
            self._advance()
            return _Token(":", ":", line, column)
        if char in _PUNCTUATION:
            self._advance()
            return _Token(char, char, line, column)  # type: ignore[arg-type]
        raise self.error(
            f"found the character {char!r}; expected a name, a directive (%...), a brace, a "
            f"bracket or a parenthesis",
            line,
            column,
        )

    # -- raw code
    def raw(
        self, stops: str, what: str, opened: _Token, angle: bool = False
    ) -> tuple[str, int, int]:
        """Read Python-ish raw code up to one of ``stops`` at nesting depth 0.

        The stop character is not consumed.  Returns ``(text, line, column)`` of the text
        start.  ``angle`` also nests ``<...>`` (generic types).
        """
        assert self._peeked is None, "raw() called with a token peeked"
        text = self.text
        line, column = self.line, self.column
        start = self.pos
        closers: list[str] = []
        pairs = {"(": ")", "[": "]", "{": "}"}
        if angle:
            pairs["<"] = ">"
        while True:
            if self.pos >= len(text):
                raise self.error(
                    f"found the end of the file inside {what}; expected {stops[0]!r} to close "
                    f"the {opened.text!r} at line {opened.line}, column {opened.column}",
                    opened.line,
                    opened.column,
                )
            char = text[self.pos]
            if not closers and char in stops:
                return text[start : self.pos], line, column
            if char in pairs:
                closers.append(pairs[char])
                self._advance()
            elif closers and char == closers[-1]:
                closers.pop()
                self._advance()
            elif char in ")]}" or (angle and char == ">"):
                raise self.error(
                    f"found an unbalanced {char!r} inside {what}; expected "
                    f"{closers[-1] if closers else stops[0]!r}",
                    self.line,
                    self.column,
                )
            elif char in "'\"":
                self._string()
            else:
                self._advance()

    def _string(self) -> None:
        text = self.text
        line, column = self.line, self.column
        quote = text[self.pos]
        triple = text.startswith(quote * 3, self.pos)
        delimiter = quote * 3 if triple else quote
        self._advance(len(delimiter))
        while True:
            if self.pos >= len(text) or (not triple and text[self.pos] == "\n"):
                raise self.error(
                    f"found the end of the {'file' if self.pos >= len(text) else 'line'} inside "
                    f"a string; expected {delimiter} to close it",
                    line,
                    column,
                )
            if text[self.pos] == "\\":
                self._advance(2 if self.pos + 1 < len(text) else 1)
            elif text.startswith(delimiter, self.pos):
                self._advance(len(delimiter))
                return
            else:
                self._advance()

    def rest_of_line(self) -> tuple[str, int, int]:
        assert self._peeked is None
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self._advance()
        line, column = self.line, self.column
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] != "\n":
            self._advance()
        return self.text[start : self.pos].strip(), line, column


def _line_indent(text: str, line: int) -> int:
    """The column (1-based) of the first non-blank character of ``line``."""
    content = text.split("\n")[line - 1]
    return len(content) - len(content.lstrip(" \t")) + 1


def _find_unclosed_brace(text: str, path: str) -> _Token | None:
    """The '{' a missing '}' belongs to, or ``None`` if the braces balance.

    Braces are paired over the token stream, skipping raw code as the parser does (a
    guard, parenthesised arguments or parameters, an assigned value, the rest of a
    directive line), so braces of Python code inside it do not count.  Pairing alone
    blames the wrong brace when an inner block lacks its '}': the outer block's '}'
    closes the inner one and the outer one stays open.  Indentation tells them apart:
    a '}' on a line of its own is written at the indentation of the line of the '{' it
    closes, so a '}' that matches an *outer* '{' that way, and not the innermost open
    one, means the innermost one was never closed.  When indentation says nothing, the
    innermost brace still open at the end of the file is the one reported.
    """
    lexer = _Lexer(text, path)
    stack: list[_Token] = []
    try:
        while True:
            token = lexer.next()
            if token.kind == "eof":
                break
            if token.kind == "{":
                stack.append(token)
            elif token.kind == "}":
                if not stack:
                    return None  # a '}' too many: the parser's own error says so
                opened = stack[-1]
                if token.line != opened.line:
                    column = token.column
                    if column != _line_indent(text, opened.line) and any(
                        column == _line_indent(text, outer.line) for outer in stack[:-1]
                    ):
                        return opened
                stack.pop()
            elif token.kind == "[":
                lexer.raw("]", "a guard", token)
                lexer.next()
            elif token.kind == "(":
                lexer.raw(")", "parentheses", token)
                lexer.next()
            elif token.kind == "=":
                lexer.raw(";", "an assigned value", token)
                lexer.next()
            elif token.kind == "directive" and token.text in _LINE_DIRECTIVES:
                lexer.rest_of_line()
    except SmSyntaxError:
        return None  # the text cannot be read that far: the parser's error stands
    return stack[-1] if stack else None


# ------------------------------------------------------------------------ syntax


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
    kind: Literal["set", "jump"] = "set"

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
    raw_source: list[str] = field(default_factory=list)
    maps: list[_MapDecl] = field(default_factory=list)


_LINE_DIRECTIVES = ("%import", "%declare", "%access", "%header", "%include")
_WORD_DIRECTIVES = ("%class", "%fsmclass", "%fsmfile", "%package")


class _Parser:
    def __init__(self, text: str, path: str) -> None:
        self.lexer = _Lexer(text, path)
        self.text = text
        self.path = path
        #: (line, column) of every '{' consumed so far -> the construct it opens
        self.opened: dict[tuple[int, int], str] = {}

    def error(self, token: _Token, expected: str, found: str | None = None) -> SmSyntaxError:
        return self.lexer.error(
            f"found {found or token.describe()}; expected {expected}", token.line, token.column
        )

    def expect(self, kind: str, expected: str) -> _Token:
        token = self.lexer.next()
        if token.kind != kind:
            raise self.error(token, expected)
        return token

    def open_brace(self, what: str, alternative: str = "") -> _Token:
        """Consume the '{' that opens ``what`` (remembered for unclosed-brace errors)."""
        token = self.expect("{", f"'{{' to open {what}{alternative}")
        self.opened[(token.line, token.column)] = what
        return token

    def unclosed_brace(self, failure: SmSyntaxError) -> SmSyntaxError | None:
        """The error to report instead of ``failure`` when a '}' is missing before it.

        A missing '}' makes the parser pair the braces that follow wrongly, so it fails
        later, at a token that is fine where it stands.  The '{' to blame is found by
        :func:`_find_unclosed_brace`; it is reported only if it comes before
        ``failure`` (an unclosed brace after the failure is not its cause).
        """
        found = _find_unclosed_brace(self.text, self.path)
        if found is None or (found.line, found.column) > (failure.line, failure.column):
            return None
        what = self.opened.get((found.line, found.column), "a block")
        return self.lexer.error(
            f"found no '}}' for the '{{' that opens {what}; expected a '}}' to close it "
            f"(without it the parser read on and failed at line {failure.line}, column "
            f"{failure.column}: {failure.detail})",
            found.line,
            found.column,
        )

    def parse(self) -> _File:
        result = _File()
        lexer = self.lexer
        while True:
            token = lexer.peek()
            if token.kind == "eof":
                break
            if token.kind == "raw_source":
                result.raw_source.append(lexer.next().text)
            elif token.kind == "directive":
                self._directive(result)
            else:
                raise self.error(token, "a directive such as '%start', '%class' or '%map'")
        if not result.maps:
            raise self.error(lexer.peek(), "at least one '%map Name %% ... %%' section")
        if result.start is None:
            raise self.error(lexer.peek(), "a '%start Map::State' directive", "no '%start'")
        return result

    def _directive(self, result: _File) -> None:
        lexer = self.lexer
        token = lexer.next()
        name = token.text
        if name == "%map":
            result.maps.append(self._map())
            return
        if name == "%start":
            if result.start is not None:
                raise self.error(token, "a single '%start'", "a second '%start'")
            map_name = self.expect("word", "the start state as 'Map::State' after '%start'")
            self.expect("::", "'::' between map and state names, as in '%start Map::State'")
            state = self.expect("word", "a state name after 'Map::'")
            result.start = (map_name, state)
            return
        if name in _WORD_DIRECTIVES:
            if name in result.directives:
                raise self.error(token, f"a single {name!r}", f"a second {name!r}")
            result.directives[name] = self.expect("word", f"a name after {name!r}")
            return
        if name in _LINE_DIRECTIVES:
            text, line, column = lexer.rest_of_line()
            if not text:
                raise lexer.error(
                    f"found nothing after {name!r}; expected the rest of the line to say what "
                    f"to {name[1:]}",
                    line,
                    column,
                )
            result.lines.setdefault(name, []).append(text)
            return
        raise self.error(
            token,
            "one of %start, %class, %fsmclass, %fsmfile, %package, %import, %declare, "
            "%access, %header, %include, %map",
            f"the unknown directive {name!r}",
        )

    def _map(self) -> _MapDecl:
        name = self.expect("word", "a map name after '%map'")
        self.expect("%%", f"'%%' to open map {name.text!r}")
        decl = _MapDecl(name)
        seen: dict[str, _Token] = {}
        while True:
            token = self.lexer.peek()
            if token.kind == "%%":
                self.lexer.next()
                return decl
            if token.kind != "word":
                raise self.error(token, f"a state name or '%%' to close map {name.text!r}")
            state = self._state(name.text)
            first = seen.get(state.name.text)
            if first is not None:
                raise self.error(
                    state.name,
                    f"each state once per map (first defined at line {first.line})",
                    f"a second state {state.name.text!r}",
                )
            seen[state.name.text] = state.name
            if state.name.text == "Default":
                if state.entry is not None or state.exit is not None:
                    raise self.error(
                        state.name,
                        "no Entry/Exit on the Default state (it is not a real state; put "
                        "them on real states)",
                        "Entry/Exit actions on 'Default'",
                    )
                decl.default = state
            else:
                decl.states.append(state)

    def _state(self, map_name: str) -> _StateDecl:
        lexer = self.lexer
        name = lexer.next()
        state = _StateDecl(name, map_name)
        while lexer.peek().kind == "word" and lexer.peek().text in ("Entry", "Exit"):
            which = lexer.next()
            if (which.text == "Entry" and state.entry is not None) or (
                which.text == "Exit" and state.exit is not None
            ):
                raise self.error(which, f"a single {which.text} block", f"a second {which.text}")
            self.open_brace(f"the {which.text} actions of state {name.text!r}")
            actions = self._actions()
            if which.text == "Entry":
                state.entry = actions
            else:
                state.exit = actions
        self.open_brace(f"the transitions of state {name.text!r}", " (or Entry/Exit)")
        while True:
            token = lexer.peek()
            if token.kind == "}":
                lexer.next()
                return state
            if token.kind != "word":
                raise self.error(token, f"a transition name or '}}' to close state {name.text!r}")
            state.transitions.append(self._transition())

    def _transition(self) -> _TransitionDecl:
        lexer = self.lexer
        name = lexer.next()
        params: list[_Param] = []
        if lexer.peek().kind == "(":
            params = self._params()
        guard: _Code | None = None
        if lexer.peek().kind == "[":
            opened = lexer.next()
            text, line, column = lexer.raw("]", "a guard", opened)
            if not text.strip():
                raise lexer.error(
                    "found an empty guard '[]'; expected a Python expression",
                    opened.line,
                    opened.column,
                )
            guard = _Code(text, line, column)
            lexer.next()
        target, target_map, kind = self._next_state(name)
        self.open_brace(f"the actions of transition {name.text!r}")
        return _TransitionDecl(name, params, guard, target, target_map, self._actions(), kind)

    def _params(self) -> list[_Param]:
        lexer = self.lexer
        opened = lexer.next()
        params: list[_Param] = []
        if lexer.peek().kind == ")":
            lexer.next()
            return params
        while True:
            token = self.expect("word", "a parameter name")
            while token.text in _MODIFIERS and lexer.peek().kind == "word":
                token = lexer.next()
            type_text = ""
            if lexer.peek().kind == ":":
                colon = lexer.next()
                raw, _line, _column = lexer.raw(",)", "a parameter type", opened, angle=True)
                type_text = raw.strip()
                if not type_text:
                    raise lexer.error(
                        f"found no type after ':' of parameter {token.text!r}; expected a type "
                        f"(or drop the ':')",
                        colon.line,
                        colon.column,
                    )
            params.append(_Param(token, type_text))
            separator = lexer.next()
            if separator.kind == ")":
                return params
            if separator.kind != ",":
                raise self.error(separator, "',' or ')' after a parameter")

    def _next_state(
        self, name: _Token
    ) -> tuple[_Token | None, _Token | None, Literal["set", "jump"]]:
        lexer = self.lexer
        token = self.expect(
            "word", f"the next state of transition {name.text!r} (a state name or nil)"
        )
        if token.text in ("push", "pop") or lexer.peek().kind == "/":
            kind = "pop" if token.text == "pop" else "push"
            found = token.text if token.text in ("push", "pop") else f"{token.text}/push"
            raise lexer.error(
                f"found the {kind} transition {found!r} in transition {name.text!r}; push/pop "
                f"transitions are not supported: they need a state stack that "
                f"python-statemachine's StateMachine and the compiled engine do not have; "
                f"expected a plain next state, nil or jump(Map::State) (move the pushed map's "
                f"states into this machine)",
                token.line,
                token.column,
            )
        if token.text == "jump" and lexer.peek().kind == "(":
            lexer.next()
            target, target_map = self._state_ref("a state as 'Map::State' in jump(...)")
            self.expect(")", "')' to close jump(...)")
            return target, target_map, "jump"
        if token.text == "nil":
            return None, None, "set"
        if lexer.peek().kind == "::":
            lexer.next()
            state = self.expect("word", "a state name after '::'")
            return state, token, "set"
        return token, None, "set"

    def _state_ref(self, expected: str) -> tuple[_Token, _Token | None]:
        first = self.expect("word", expected)
        if self.lexer.peek().kind == "::":
            self.lexer.next()
            return self.expect("word", "a state name after '::'"), first
        return first, None

    def _actions(self) -> list[_Action]:
        lexer = self.lexer
        actions: list[_Action] = []
        while True:
            token = lexer.next()
            if token.kind == "}":
                return actions
            if token.kind != "word":
                raise self.error(token, "an action such as 'name(args);' or '}'")
            after = lexer.next()
            if after.kind == "(":
                text, line, column = lexer.raw(")", "action arguments", after)
                lexer.next()
                actions.append(_Action(token, _Code(text, line, column), None))
            elif after.kind == "=":
                text, line, column = lexer.raw(";", "an assigned value", after)
                if not text.strip():
                    raise lexer.error(
                        f"found no value after '=' in the action {token.text!r}; expected a "
                        f"Python expression",
                        after.line,
                        after.column,
                    )
                actions.append(_Action(token, None, _Code(text, line, column)))
            else:
                raise self.error(after, f"'(' after the action name {token.text!r}")
            self.expect(";", f"';' after the action {token.text}(...)")


# ----------------------------------------------------------------------- builder


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
        raw_source: the ``%{ ... %}`` blocks (kept, not executed).
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


class _Builder:
    def __init__(self, parsed: _File, path: str) -> None:
        self.parsed = parsed
        self.path = path
        self.namespace: dict[str, Any] = {"__builtins__": builtins}
        self.functions = 0

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
        prologue = ast.Assign(
            [ast.Name("ctxt", ast.Store())],
            ast.Name("model", ast.Load()),
            lineno=line,
            col_offset=0,
        )
        if isinstance(body, list):
            kind: Literal["expr", "stmts"] = "stmts"
            statements: list[ast.stmt] = [prologue, *body]
            code = tuple(ast.unparse(s) for s in body)
        else:
            kind = "expr"
            statements = [prologue, ast.Return(body, lineno=line, col_offset=0)]
            code = (ast.unparse(body),)
        arguments = ast.arguments(
            posonlyargs=[],
            args=[ast.arg("model"), *(ast.arg(p) for p in params)],
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
                    if "." in event or event.startswith("_") or event in _NAMES_OF_STATEMACHINE:
                        raise self.error(
                            t.name,
                            f"found the transition name {event!r}; expected a name without "
                            f"'.' or a leading '_' that is not a StateMachine attribute",
                        )
                    if event in states:
                        raise self.error(
                            t.name,
                            f"found the transition name {event!r}, also a state name; expected "
                            f"distinct names (python-statemachine keeps states and events in "
                            f"one namespace)",
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
                    if pname in _RESERVED_PARAMS or pname.startswith("_ab_"):
                        raise self.error(
                            p.name,
                            f"found the parameter name {pname!r}, which guards and actions "
                            f"already receive; expected another name",
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
        self._imports()

        objects: dict[str, State] = {}
        for name, s in states.items():
            hooks: dict[str, list[Any]] = {}
            for which, actions in (("enter", s.entry), ("exit", s.exit)):
                if actions:
                    hooks[which] = [
                        self._function(
                            f"{name}_{which}",
                            [],
                            self._statements(actions),
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
            spec=machine_spec(cls),
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
            raw_source=tuple(parsed.raw_source),
        )

    def _class_name(self) -> str:
        directives = self.parsed.directives
        if "%fsmclass" in directives:
            return directives["%fsmclass"].text.split(".")[-1]
        if "%class" in directives:
            return directives["%class"].text.split(".")[-1] + "Context"
        stem = Path(self.path).stem if self.path != "<string>" else "Sm"
        return "".join(p.capitalize() for p in stem.replace("-", "_").split("_") if p) + "Context"

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
        if t.guard is not None:
            expr = self._parse_code(t.guard, "(", "the guard")
            label = " ".join(t.guard.text.split())
            callbacks["cond"] = [
                self._function(f"{where}_guard", params, expr, label, t.guard.line)
            ]
        if t.actions:
            label = "; ".join(self._action_label(a) for a in t.actions)
            callbacks["on"] = [
                self._function(
                    f"{where}_actions",
                    params,
                    self._statements(t.actions),
                    label,
                    t.actions[0].name.line,
                )
            ]
        return {
            "event": "*" if t.wildcard else t.name.text,
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


def parse_sm(text: str, path: str = "<string>") -> SmMachine:
    """Parse ``.sm`` source text and build its machine.

    Args:
        text: the file's content.
        path: the name used in error messages and tracebacks.

    Raises:
        SmSyntaxError: the text is malformed; ``str(err)`` is ``path:line:column: found
            ...; expected ...``.  For a missing '}' the position is that of the '{'
            left open.
        FsmError: python-statemachine rejected the resulting machine.
    """
    parser = _Parser(text, path)
    try:
        parsed = parser.parse()
    except SmSyntaxError as exc:
        unclosed = parser.unclosed_brace(exc)
        if unclosed is None:
            raise
        raise unclosed from None
    return _Builder(parsed, path).build()


_LOADED: dict[str, tuple[tuple[int, int], SmMachine]] = {}


def load_sm(path: str | os.PathLike[str]) -> SmMachine:
    """Read and build a ``.sm`` file; cached until the file changes (mtime or size).

    Raises:
        FsmError: the file cannot be read.
        SmSyntaxError: the file is malformed.
    """
    name = os.fspath(path)
    try:
        stat = os.stat(name)
    except OSError as exc:
        raise FsmError(f"cannot read the state machine file {name!r}: {exc.strerror}") from exc
    key = os.path.realpath(name)
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _LOADED.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FsmError(f"cannot read the state machine file {name!r}: {exc}") from exc
    machine = parse_sm(text, name)
    _LOADED[key] = (stamp, machine)
    return machine


use_sm_loader(lambda path: load_sm(path).spec)
