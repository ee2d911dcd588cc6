"""Field types: what a message field may hold, how it is checked and put on the wire.

Theory of operation
-------------------
A message class is declared with annotations.  When the class statement runs,
each annotation is *compiled* into a :class:`FieldType`: a small object that
knows

* ``check(value)`` — validate a constructor argument and normalise it (an ``int``
  to ``float`` for a float field, a ``list`` to ``tuple`` for a sequence field, a
  ``str`` subclass to a plain ``str``), raising :class:`_Mismatch` with the
  expected and found type;
* ``to_wire(value)`` — turn a checked value into msgpack-native data (``bool``,
  ``int``, ``float``, ``str``, ``bytes``, tuples of those, or an ``ExtType`` for a
  nested struct of a subclass of the declared class);
* ``from_wire(obj)`` — the reverse for *untrusted*, already unpacked data: check
  the exact wire shape and build the value, raising :class:`_Mismatch` on
  anything unexpected.  It never raises anything else (except a
  :class:`~actorbus.CodecError` from a nested struct's own decoder).

``native`` types (bool, int, float, str, bytes) look the same on the wire as in
memory, which lets the generated per-class codec (:mod:`.codec`) skip
conversion for them and inline ``type(v) is int`` checks.  An ``int`` outside
msgpack's 64-bit range is still "native": the packer hands it to
:func:`pack_default`, which writes it as ``bin`` (big-endian two's complement,
minimal length), and ``_Int.from_wire`` reads it back.

Wire forms are documented in ``docs/messages.md``; every ``from_wire`` is
strict (exact msgpack types, canonical forms) so that garbage is rejected, not
guessed at.

Modules
-------
The field types live by family, each module with one idea: :mod:`._fieldtype` (the
:class:`FieldType` contract and :class:`_Mismatch`), :mod:`._packing` (msgpack,
big ints, sub-struct extensions), :mod:`._scalars` (the natives), :mod:`._converted`
(Decimal, date and time, UUID, IP and socket addresses) and :mod:`._composite`
(enums, message keys, nested structs, sequences, optionals).  This module turns an
annotation into one of them (:func:`compile_type`) and is where the rest of the bus
imports them from.
"""

from __future__ import annotations

import enum
import ipaddress
import types
import typing
from typing import Any

from ._composite import _EnumType, _KeyType, _Optional, _SequenceType, _StructType
from ._converted import _CONVERTED, _IP_ANY
from ._fieldtype import FieldType, _Mismatch
from ._packing import (
    EXT_SUBSTRUCT,
    MAX_EXT_DEPTH,
    SubStructExt,
    big_int_from_wire,
    big_int_to_wire,
    pack,
    pack_default,
    unpack,
)
from ._scalars import _NATIVES, TIMESTAMP, TIMESTAMP_MAX
from .address import SocketAddress

#: Besides this module's own names, those of the field-type modules that the rest of
#: the bus (and its tests) import from here.
__all__ = [
    "ALLOWED_TYPES_TEXT",
    "EXT_SUBSTRUCT",
    "MAX_EXT_DEPTH",
    "TIMESTAMP",
    "TIMESTAMP_MAX",
    "FieldType",
    "Records",
    "SocketAddress",
    "SubStructExt",
    "_EnumType",
    "_Mismatch",
    "big_int_from_wire",
    "big_int_to_wire",
    "compile_type",
    "pack",
    "pack_default",
    "unpack",
]

_SIMPLE: dict[object, FieldType] = {**_NATIVES, **_CONVERTED}

ALLOWED_TYPES_TEXT = (
    "bool, int, float, str, bytes, Decimal, datetime, date, time, timedelta, an Enum, "
    "UUID, IPv4Address, IPv6Address, SocketAddress, MessageKey, a Field subclass, "
    "list[T] or tuple[T, ...] of those, and X | None"
)


class UnsupportedType(Exception):
    """Internal: an annotation names a type fields cannot hold."""


class Records:
    """The message module's classes an annotation may name, handed to
    :func:`compile_type` by :mod:`actorbus.bus.message` (which imports this
    module, so this module never imports it).  The message module makes one and
    fills it once its classes exist: until then no annotation can name them."""

    __slots__ = ("field", "lookup_type", "message", "message_key")

    def __init__(self) -> None:
        self.message_key: Any = None
        self.message: Any = None
        self.field: Any = None
        self.lookup_type: Any = None


def compile_type(annotation: object, records: Records) -> FieldType:
    """Turn a resolved annotation into a FieldType, or raise UnsupportedType;
    ``records``: the classes it may name."""
    _message = records
    try:
        simple = _SIMPLE.get(annotation)
    except TypeError:  # an unhashable annotation such as [int]
        raise UnsupportedType(repr(annotation)) from None
    if simple is not None:
        # exact lookup: datetime (a subclass of date) is not mistaken for date
        return simple
    key_class: Any = _message.message_key
    if key_class is not None and annotation is key_class:
        return _KeyType(_message.message_key, _message.message, _message.lookup_type)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        has_none = len(members) != len(args)
        if set(members) == {ipaddress.IPv4Address, ipaddress.IPv6Address}:
            inner: FieldType = _IP_ANY
        elif len(members) == 1:
            inner = compile_type(members[0], records)
        else:
            raise UnsupportedType(f"{annotation!r}: of unions only X | None is allowed")
        if not has_none or inner.optional:
            return inner
        return _Optional(inner)
    if origin in (list, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise UnsupportedType(
                f"{annotation!r}: sequences must be homogeneous, tuple[T, ...] or list[T]"
            )
        if not args:
            raise UnsupportedType(f"{annotation!r} without an item type; write list[T]")
        item = compile_type(args[0], records)
        if item.optional:
            raise UnsupportedType(f"{annotation!r}: sequence items may not be None")
        return _SequenceType(item, "list" if origin is list else "tuple")
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _EnumType(annotation)
        field = _message.field
        if field is not None and issubclass(annotation, field) and annotation is not field:
            return _StructType(annotation, _message.lookup_type)
    raise UnsupportedType(repr(annotation))
