"""The parser of ``.sm`` files: recursive descent over SMC's grammar to a syntax tree.

The second stage of :mod:`actorbus.fsm.smc` (the grammar is in that module's
docstring).  It reads tokens from :class:`~actorbus.fsm._smc_lexer._Lexer` and returns
the :class:`~actorbus.fsm._smc_ast._File` the builder turns into a machine; it checks
only what the grammar says (order and shape), not what names refer to.

It also finds the '{' to blame when a '}' is missing (:func:`_find_unclosed_brace`):
the parser then fails later, at a token that is fine where it stands, so the brace
is located by a second pass over the tokens, with the same raw-code skipping.
"""

from __future__ import annotations

from actorbus.errors import SmSyntaxError
from actorbus.fsm._smc_ast import (
    _Action,
    _Code,
    _File,
    _MapDecl,
    _Param,
    _StateDecl,
    _TransitionDecl,
)
from actorbus.fsm._smc_lexer import _Lexer, _Token

_MODIFIERS = frozenset({"final", "const", "volatile"})

_LINE_DIRECTIVES = ("%import", "%declare", "%access", "%header", "%include")
_WORD_DIRECTIVES = ("%class", "%fsmclass", "%fsmfile", "%package")


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
                block = lexer.next()
                result.raw_source.append(_Code(block.text, block.line, block.column + 2))
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
        decl = self._next_state(name)
        self.open_brace(f"the actions of transition {name.text!r}")
        decl.params = params
        decl.guard = guard
        decl.actions = self._actions()
        return decl

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

    def _next_state(self, name: _Token) -> _TransitionDecl:
        """The next state of transition ``name``: a state, nil, jump, push or pop.

        The returned record has no guard, parameters or actions yet.
        """
        lexer = self.lexer
        token = self.expect(
            "word", f"the next state of transition {name.text!r} (a state name or nil)"
        )
        decl = _TransitionDecl(name, [], None, None, None, [])
        if token.text == "pop":
            decl.kind = "pop"
            decl.keyword = token
            if lexer.peek().kind == "(":
                self._pop_arguments(decl)
            return decl
        if token.text == "push" and lexer.peek().kind == "(":
            decl.kind = "push"
            decl.keyword = token
            self._push_target(decl)
            return decl
        if token.text == "jump" and lexer.peek().kind == "(":
            lexer.next()
            decl.target, decl.target_map = self._state_ref("a state as 'Map::State' in jump(...)")
            self.expect(")", "')' to close jump(...)")
            decl.kind = "jump"
            return decl
        if token.text != "nil":
            decl.target = token
            if lexer.peek().kind == "::":
                lexer.next()
                decl.target_map = token
                decl.target = self.expect("word", "a state name after '::'")
        if lexer.peek().kind == "/":
            lexer.next()
            keyword = self.expect("word", "'push(Map::State)' after '/'")
            if keyword.text != "push":
                raise self.error(keyword, "'push(Map::State)' after '/'")
            decl.kind = "push"
            decl.keyword = keyword
            self._push_target(decl)
        return decl

    def _push_target(self, decl: _TransitionDecl) -> None:
        self.expect("(", "'(' after push, as in push(Map::State)")
        decl.push_target, decl.push_map = self._state_ref("the pushed state as 'Map::State'")
        self.expect(")", "')' to close push(...)")

    def _pop_arguments(self, decl: _TransitionDecl) -> None:
        """``(``, optionally a transition name and its arguments, ``)``."""
        lexer = self.lexer
        opened = lexer.next()
        if lexer.peek().kind == ")":
            lexer.next()
            return
        decl.pop_event = self.expect("word", "the transition pop(...) issues, or ')'")
        separator = lexer.peek()
        if separator.kind == ")":
            lexer.next()
            return
        if separator.kind != ",":
            raise self.error(separator, "',' or ')' after the transition name in pop(...)")
        lexer.next()
        text, line, column = lexer.raw(")", "the arguments of pop(...)", opened)
        lexer.next()
        if not text.strip():
            raise lexer.error(
                "found no arguments after ',' in pop(...); expected Python expressions",
                line,
                column,
            )
        decl.pop_args = _Code(text, line, column)

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
