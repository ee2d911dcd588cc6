"""A Java ``.properties`` reader whose errors carry file:line.

Theory of operation
-------------------
Text is split into *physical* lines at ``\\r\\n``, ``\\r`` or ``\\n`` (only
those; ``str.splitlines`` would also split at form feeds and Unicode line
separators, which Java does not).  Physical lines are joined into *logical*
lines: a physical line that ends in an odd number of backslashes continues on
the next one, whose leading whitespace is dropped.  A logical line whose first
non-blank character is ``#`` or ``!`` is a comment; a blank one is skipped.
Comment lines never continue.

A logical line is scanned once, left to right.  The key runs up to the first
unescaped ``=``, ``:`` or whitespace; then whitespace, at most one ``=`` or
``:``, and more whitespace are skipped; the rest is the value.  Escapes are
decoded during the scan, and unescaped whitespace at the end of the value is
dropped ("whitespace" means space, tab and form feed, as in Java).  Every
position in the logical line knows its physical line, so an error inside a
continued line names the line it is really on.

Deliberate differences from ``java.util.Properties``:

* Files are read as UTF-8 (a leading byte-order mark is skipped), not ISO-8859-1.
* Trailing whitespace of a value is dropped unless escaped (``\\ ``).
* An unknown escape such as ``\\d`` is an error instead of silently dropping the
  backslash (that turns ``C:\\dir`` into ``C:dir``).  Allowed escapes:
  ``\\t \\n \\r \\f \\\\ \\= \\: \\# \\! \\; \\<space>`` and ``\\uHHHH``.
  ``\\;`` is ours; Java reads it as ``;`` too.
* ``\\uHHHH`` needs exactly four hex digits; a UTF-16 surrogate pair written
  as two escapes becomes one character, a lone surrogate is an error.
* A line with a value but no key (``=value``) is an error.
* A key set twice: the last value wins and the earlier line is logged.

Each entry also notes where its value holds an unescaped ``;`` or ``#`` right
after whitespace (``4 ; four threads``): people write end-of-line comments by
habit, and properties files have none.  The loader rejects such values rather
than keep a silently wrong one; :func:`parse_properties` itself accepts them.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass

from actorbus._log import logger
from actorbus.errors import ConfigError

__all__ = ["Property", "format_property", "parse_properties", "read_properties"]

#: Java's whitespace inside a properties line.
_WS = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SIMPLE_ESCAPES = {
    "t": "\t",
    "n": "\n",
    "r": "\r",
    "f": "\f",
    "\\": "\\",
    "=": "=",
    ":": ":",
    "#": "#",
    "!": "!",
    ";": ";",
    " ": " ",
}
_ALLOWED_ESCAPES = r"\t \n \r \f \\ \= \: \# \! \; '\ ' (backslash space) and \uHHHH"


@dataclass(frozen=True, slots=True)
class Property:
    """One ``key=value`` entry of a properties file, escapes decoded."""

    key: str
    value: str
    #: 1-based physical line where the entry starts.
    line: int
    #: index in ``value`` of an unescaped ``;`` or ``#`` that follows whitespace
    #: (what other formats take as an end-of-line comment), else ``None``.
    trailing_comment_at: int | None = None


class _LogicalLine:
    """A logical line: the joined text plus, per character, its physical line."""

    __slots__ = ("_lines", "_starts", "text")

    def __init__(self, chunks: list[tuple[str, int]]) -> None:
        self.text = "".join(text for text, _ in chunks)
        self._starts: list[int] = []
        self._lines: list[int] = []
        offset = 0
        for text, line in chunks:
            self._starts.append(offset)
            self._lines.append(line)
            offset += len(text)

    @property
    def first_line(self) -> int:
        return self._lines[0]

    def line_at(self, index: int) -> int:
        return self._lines[bisect_right(self._starts, index) - 1]


def _ends_with_odd_backslashes(text: str) -> bool:
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> list[_LogicalLine]:
    physical = _LINE_BREAK.split(text)
    result: list[_LogicalLine] = []
    i = 0
    while i < len(physical):
        first = physical[i].lstrip(_WS)
        i += 1
        if not first or first[0] in "#!":
            continue
        chunks = [(first, i)]
        while _ends_with_odd_backslashes(chunks[-1][0]):
            last, number = chunks[-1]
            chunks[-1] = (last[:-1], number)  # drop the continuation backslash
            if i == len(physical):
                break  # a continuation at end of file continues into nothing
            chunks.append((physical[i].lstrip(_WS), i + 1))
            i += 1
        result.append(_LogicalLine(chunks))
    return result


class _Scanner:
    """Decodes one logical line into key and value."""

    __slots__ = ("_line", "_path", "_pos", "_text")

    def __init__(self, line: _LogicalLine, path: str) -> None:
        self._line = line
        self._text = line.text
        self._path = path
        self._pos = 0

    def _error(self, message: str, index: int, key: str | None) -> ConfigError:
        return ConfigError(message, path=self._path, line=self._line.line_at(index), key=key)

    def _escape(self, key: str | None) -> str:
        """Decode the escape whose backslash is at the current position."""
        text, start = self._text, self._pos
        if start + 1 >= len(text):
            raise self._error("backslash at end of line with nothing to escape", start, key)
        code = text[start + 1]
        if code != "u":
            decoded = _SIMPLE_ESCAPES.get(code)
            if decoded is None:
                written = text[start : start + 2]
                raise self._error(
                    f"unknown escape '{written}'; allowed escapes are {_ALLOWED_ESCAPES} "
                    r"(write \\ for a literal backslash)",
                    start,
                    key,
                )
            self._pos = start + 2
            return decoded
        unit = self._hex_unit(start, key)
        self._pos = start + 6
        if 0xD800 <= unit <= 0xDBFF:
            if text.startswith("\\u", self._pos):
                low = self._hex_unit(self._pos, key)
                if 0xDC00 <= low <= 0xDFFF:
                    self._pos += 6
                    return chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
            raise self._error(
                f"lone UTF-16 surrogate '{text[start : start + 6]}'; expected it to be "
                r"followed by a low surrogate \uDC00..\uDFFF (or write the character itself)",
                start,
                key,
            )
        if 0xDC00 <= unit <= 0xDFFF:
            raise self._error(
                f"lone UTF-16 surrogate '{text[start : start + 6]}'; a low surrogate must "
                r"follow a high surrogate \uD800..\uDBFF (or write the character itself)",
                start,
                key,
            )
        return chr(unit)

    def _hex_unit(self, start: int, key: str | None) -> int:
        digits = self._text[start + 2 : start + 6]
        if _HEX4.fullmatch(digits) is None:
            raise self._error(
                f"malformed \\u escape '{self._text[start : start + 6]}': "
                r"expected \u followed by exactly 4 hex digits, e.g. \u00e9",
                start,
                key,
            )
        return int(digits, 16)

    def _skip_ws(self) -> None:
        while self._pos < len(self._text) and self._text[self._pos] in _WS:
            self._pos += 1

    def scan(self) -> Property:
        text = self._text
        key_chars: list[str] = []
        while self._pos < len(text):
            ch = text[self._pos]
            if ch == "\\":
                key_chars.append(self._escape(None))
            elif ch in "=:" or ch in _WS:
                break
            else:
                key_chars.append(ch)
                self._pos += 1
        key = "".join(key_chars)
        if not key:
            raise self._error(
                "the line has no key before its separator; expected key=value (the value "
                "is not shown: it may be a secret)",
                0,
                None,
            )
        self._skip_ws()
        if self._pos < len(text) and text[self._pos] in "=:":
            self._pos += 1
            self._skip_ws()

        value: list[str] = []
        keep = 0  # length of the value up to its last significant character
        comment_at: int | None = None
        while self._pos < len(text):
            ch = text[self._pos]
            if ch == "\\":
                value.append(self._escape(key))
                keep = len(value)
                continue
            if ch in ";#" and comment_at is None and value and value[-1] in _WS:
                comment_at = len(value)
            value.append(ch)
            self._pos += 1
            if ch not in _WS:
                keep = len(value)
        return Property(key, "".join(value[:keep]), self._line.first_line, comment_at)


def parse_properties(text: str, path: str = "<string>") -> list[Property]:
    """Parse properties ``text``; ``path`` only labels error messages.

    Returns one :class:`Property` per distinct key, in the order of the line
    that set it last.  Raises :class:`~actorbus.errors.ConfigError` (with
    ``path`` and the physical line) on a malformed escape or a line without a key.
    """
    entries: dict[str, Property] = {}
    for line in _logical_lines(text):
        prop = _Scanner(line, path).scan()
        earlier = entries.pop(prop.key, None)
        if earlier is not None:
            logger.warning(
                "{}:{}: key {!r} is set again on line {}; the value from line {} is used",
                path,
                earlier.line,
                prop.key,
                prop.line,
                prop.line,
            )
        entries[prop.key] = prop
    return list(entries.values())


def read_properties(path: str | os.PathLike[str]) -> list[Property]:
    """Read and parse the properties file at ``path`` as UTF-8.

    Java reads ``.properties`` as ISO-8859-1 by default; actorbus does not: save
    the file as UTF-8, or write non-ASCII characters as ``\\uHHHH``.
    Raises :class:`~actorbus.errors.ConfigError` if the file cannot be read, is
    not UTF-8, or is malformed.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file: {exc.strerror or exc}", path=name
        ) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8-sig")
        line = len(_LINE_BREAK.findall(before)) + 1
        raise ConfigError(
            f"byte 0x{data[exc.start]:02x} is not valid UTF-8; expected a UTF-8 file "
            r"(Java's ISO-8859-1 default is not followed: re-save as UTF-8 or write \uHHHH)",
            path=name,
            line=line,
        ) from exc
    return parse_properties(text, name)


def _escape_char(ch: str) -> str:
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


_KEY_ESCAPES = {
    "\\": "\\\\",
    "=": "\\=",
    ":": "\\:",
    " ": "\\ ",
    "#": "\\#",
    "!": "\\!",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\f": "\\f",
}
_VALUE_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def format_property(key: str, value: str) -> str:
    """Write one ``key=value`` line (no line break) that parses back to exactly
    ``key`` and ``value``.

    Non-printable characters become ``\\uHHHH``; other non-ASCII characters are
    kept as they are (the file is UTF-8).  ``key`` must not be empty.
    """
    if not key:
        raise ConfigError("format_property() needs a non-empty key; found ''")
    out = [_KEY_ESCAPES.get(ch) or _escape_char(ch) for ch in key]
    out.append("=")
    last = len(value) - 1
    for i, ch in enumerate(value):
        if ch == " " and i in (0, last):
            out.append("\\ ")
        elif ch in ";#" and i > 0 and value[i - 1] in _WS:
            out.append("\\" + ch)
        else:
            out.append(_VALUE_ESCAPES.get(ch) or _escape_char(ch))
    return "".join(out)
