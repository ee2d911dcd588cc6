"""The lexer of SMC ``.sm`` text: tokens and raw target-language code.

The first stage of :mod:`actorbus.fsm.smc`.  It turns text into tokens — words, ``%``
directives, ``%%``, ``::`` and punctuation — skipping whitespace, ``//`` line comments
and (nested) ``/* */`` comments, and it reads *raw code* when the parser asks for it
(a guard, action arguments, a parameter type, an assigned value, the rest of a line).
It is separate from the parser because it knows characters and positions only: which
token may follow which is the parser's business (:mod:`actorbus.fsm._smc_parser`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from actorbus.errors import SmSyntaxError

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
