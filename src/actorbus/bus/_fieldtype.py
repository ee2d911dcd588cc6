"""The contract of a field type: :class:`FieldType` and the :class:`_Mismatch` it raises.

Every field type (:mod:`._scalars`, :mod:`._converted`, :mod:`._composite`) derives
from :class:`FieldType` and implements ``check``, ``to_wire`` and ``from_wire`` as
:mod:`._types` describes; a value that does not fit raises :class:`_Mismatch`, which
the message class or the codec turns into a ValidationError or a CodecError naming
class and field.  This module is the bottom of the field-type modules: it imports
none of them, so each family can import it without a cycle.
"""

from __future__ import annotations

from typing import Any


class _Mismatch(Exception):
    """Internal: a value does not fit a field type.  Converted by the caller into
    ValidationError (construction) or CodecError (decoding) naming class and field."""

    def __init__(self, expected: str, found: object, detail: str = "") -> None:
        super().__init__(expected)
        self.expected = expected
        self.found = found
        self.detail = detail

    def describe(self) -> str:
        found = self.found
        text = f"expected {self.expected}, found {type(found).__name__} {_short_repr(found)}"
        if self.detail:
            text += f" ({self.detail})"
        return text


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long for str()
        return f"<{type(value).__name__} too long to show>"
    return text if len(text) <= 60 else text[:57] + "..."


class FieldType:
    """How one declared field type is checked, encoded and decoded."""

    __slots__ = ("display", "native", "nests", "optional", "python_type")

    #: the Python type the annotation named (for schemas, docs and errors).
    python_type: Any
    #: the annotation as written in messages (``list[int] | None``).
    display: str
    #: the wire form is the value itself (bool, int, float, str, bytes).
    native: bool
    #: None is allowed (and costs no value bytes on the wire).
    optional: bool
    #: holds Field structs, whose decoders raise CodecError themselves.
    nests: bool

    def __init__(self, python_type: Any, display: str, native: bool = False) -> None:
        self.python_type = python_type
        self.display = display
        self.native = native
        self.optional = False
        self.nests = False

    def check(self, value: object) -> object:
        raise _Mismatch(self.display, value)

    def to_wire(self, value: Any) -> object:
        return value

    def from_wire(self, obj: object) -> object:
        raise _Mismatch(self.display, obj)

    def __repr__(self) -> str:
        return f"<field type {self.display}>"
