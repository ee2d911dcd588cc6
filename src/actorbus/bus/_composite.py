"""Field types built from a class or another field type: enums, keys, structs, sequences, optionals.

An Enum travels by value or by member name; a MessageKey and a nested struct of a
subclass name a registered class by its type name, resolved through the registry
lookup the message module hands over (see :class:`._types.Records`); a sequence
and an optional wrap the field type of their item.  They are kept apart from the
value types (:mod:`._scalars`, :mod:`._converted`) because they are built per
annotation by :func:`._types.compile_type` rather than taken from its table.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack

from ..errors import CodecError
from ._fieldtype import FieldType, _Mismatch
from ._packing import (
    _DEPTH,
    _INT64_MIN,
    _UINT64_MAX,
    EXT_SUBSTRUCT,
    MAX_EXT_DEPTH,
    SubStructExt,
    pack,
    unpack,
)

if TYPE_CHECKING:
    from .message import MessageKey


class _EnumType(FieldType):
    """An Enum travels by value when every member's value is a str or a 64-bit int,
    else by member name."""

    __slots__ = ("_by_value", "_cls", "_flag", "packs_as_value", "value_type")

    def __init__(self, cls: type[enum.Enum]) -> None:
        super().__init__(cls, cls.__name__)
        self._cls = cls
        self._flag = issubclass(cls, enum.Flag)
        members = cls.__members__.values()
        self._by_value = all(
            type(m.value) is str or (type(m.value) is int and _INT64_MIN <= m.value <= _UINT64_MAX)
            for m in members
        )
        #: a member packs as its own value (an IntEnum, IntFlag or str-mixin enum
        #: sent by value: msgpack packs int and str subclasses as such), so the
        #: generated encoders pass it through without a call
        self.packs_as_value = self._by_value and (issubclass(cls, int) or issubclass(cls, str))
        kinds = {type(m.value) for m in members}
        #: the one type (int or str) of every member's value when sent by value, for
        #: the generated decoders' inline lookup; None otherwise
        self.value_type: type | None = kinds.pop() if self._by_value and len(kinds) == 1 else None

    def check(self, value: object) -> object:
        if isinstance(value, self._cls):
            return value
        raise _Mismatch(f"a member of {self.display}", value)

    def to_wire(self, value: Any) -> object:
        return value.value if self._by_value else value.name

    def from_wire(self, obj: object) -> object:
        if self._by_value:
            if type(obj) is int or type(obj) is str:
                member = self._cls._value2member_map_.get(obj)
                if member is not None:
                    return member
                if self._flag and type(obj) is int:
                    try:  # a combination of flags not seen before
                        return self._cls(obj)
                    except ValueError:
                        pass
            raise _Mismatch(f"a value of {self.display}", obj)
        if type(obj) is str:
            named = self._cls.__members__.get(obj)
            if named is not None:
                return named
        raise _Mismatch(f"a member name of {self.display}", obj)


class _KeyType(FieldType):
    """A MessageKey field: [type name, subject] on the wire, resolved by the registry."""

    __slots__ = ("_key", "_lookup", "_message")

    def __init__(self, key_cls: type[MessageKey], message_cls: type, lookup: Any) -> None:
        super().__init__(key_cls, "MessageKey")
        self._key = key_cls
        self._message = message_cls
        self._lookup = lookup

    def check(self, value: object) -> object:
        if not isinstance(value, self._key):
            raise _Mismatch("MessageKey", value)
        cls, subject = value
        if not (isinstance(cls, type) and issubclass(cls, self._message)):
            raise _Mismatch("MessageKey", value, "its class is not a message class")
        if not isinstance(subject, str):
            raise _Mismatch("MessageKey", value, "its subject is not a str")
        if type(value) is self._key and type(subject) is str:
            return value
        return self._key(cls, str.__str__(subject))

    def to_wire(self, value: Any) -> object:
        return (value[0].__type_name__, value[1])

    def from_wire(self, obj: object) -> object:
        if not (
            type(obj) is tuple and len(obj) == 2 and type(obj[0]) is str and type(obj[1]) is str
        ):
            raise _Mismatch("MessageKey wire form [type name, subject]", obj)
        cls = self._lookup(obj[0])
        if cls is None or not issubclass(cls, self._message):
            raise _Mismatch("a MessageKey of a registered message class", obj, "unknown type name")
        return self._key(cls, obj[1])


class _StructType(FieldType):
    """A nested Field struct; an instance of a subclass may stand for the declared
    class and then travels as ext ``EXT_SUBSTRUCT`` carrying its type name."""

    __slots__ = ("_cls", "_lookup")

    def __init__(self, cls: type, lookup: Any) -> None:
        super().__init__(cls, cls.__name__)
        self._cls: Any = cls
        self._lookup = lookup
        self.nests = True

    def check(self, value: object) -> object:
        if isinstance(value, self._cls):
            return value
        raise _Mismatch(f"{self.display} (or a subclass)", value)

    def to_wire(self, value: Any) -> object:
        cls = type(value)
        enc = cls.__wire_encode__
        if cls is self._cls:
            return value if enc is None else enc(value)
        depth = _DEPTH.encode
        if depth >= MAX_EXT_DEPTH:
            raise CodecError(
                f"{cls.__qualname__} is nested more than {MAX_EXT_DEPTH} sub-struct levels "
                f"deep; flatten the structure"
            )
        _DEPTH.encode = depth + 1
        try:
            wire = value if enc is None else enc(value)
            payload = pack((cls.__type_name__, wire))
        finally:
            _DEPTH.encode = depth
        return msgpack.ExtType(EXT_SUBSTRUCT, payload)

    def from_wire(self, obj: object) -> object:
        if type(obj) is tuple:
            return self._cls.__wire_decode__(obj)
        if type(obj) is SubStructExt:
            return self._from_ext(obj)
        raise _Mismatch(f"{self.display} wire form (array or sub-struct ext)", obj)

    def _from_ext(self, ext: SubStructExt) -> object:
        if ext.code != EXT_SUBSTRUCT:
            raise _Mismatch(f"{self.display} sub-struct", ext, f"unknown ext code {ext.code}")
        depth = _DEPTH.decode
        if depth >= MAX_EXT_DEPTH:
            raise _Mismatch(
                f"{self.display} sub-struct", ext, f"nested over {MAX_EXT_DEPTH} levels deep"
            )
        try:
            inner = unpack(ext.data)
        except ValueError as exc:
            raise _Mismatch(f"{self.display} sub-struct", ext, f"malformed: {exc}") from None
        if not (type(inner) is tuple and len(inner) == 2 and type(inner[0]) is str):
            raise _Mismatch(f"{self.display} sub-struct [type name, fields]", inner)
        cls = self._lookup(inner[0])
        if cls is None or not issubclass(cls, self._cls):
            raise _Mismatch(
                f"a registered subclass of {self.display}", inner[0], "unknown or unrelated type"
            )
        _DEPTH.decode = depth + 1
        try:
            return cls.__wire_decode__(inner[1])
        finally:
            _DEPTH.decode = depth


class _SequenceType(FieldType):
    """list[T] / tuple[T, ...]: a msgpack array; held as a tuple in memory."""

    __slots__ = ("_exact", "item")

    def __init__(self, item: FieldType, origin: str) -> None:
        super().__init__(tuple, f"{origin}[{item.display}]")
        self.item = item
        self.nests = item.nests
        # items of a native type pass through when every one has the exact type
        self._exact: type | None = item.python_type if item.native else None

    def check(self, value: object) -> object:
        if not isinstance(value, (list, tuple)):
            raise _Mismatch(self.display, value)
        exact = self._exact
        if exact is not None and all(type(v) is exact for v in value):
            return value if type(value) is tuple else tuple(value)
        return tuple(self._each(value, self.item.check))

    def to_wire(self, value: Any) -> object:
        item = self.item
        if item.native:
            return value
        if type(item) is _StructType:
            cls = item._cls
            if cls.__wire_encode__ is None and all(type(v) is cls for v in value):
                return value  # structs of the declared class are their own wire form
        enc = item.to_wire
        return tuple([enc(v) for v in value])

    def from_wire(self, obj: object) -> object:
        if type(obj) is not tuple:
            raise _Mismatch(f"{self.display} (array)", obj)
        exact = self._exact
        if exact is not None and all(type(v) is exact for v in obj):
            return obj
        return tuple(self._each(obj, self.item.from_wire))

    def _each(self, values: Any, convert: Callable[[object], object]) -> list[object]:
        out = []
        for index, element in enumerate(values):
            try:
                out.append(convert(element))
            except _Mismatch as exc:
                raise _Mismatch(self.display, values, f"item {index}: {exc.describe()}") from None
            except CodecError as exc:  # a nested struct's decoder said what is wrong
                raise CodecError(f"item {index}: {exc}") from exc
        return out


class _Optional(FieldType):
    """``X | None``: None is allowed; on the wire it is a cleared presence bit."""

    __slots__ = ("inner",)

    def __init__(self, inner: FieldType) -> None:
        super().__init__(inner.python_type, f"{inner.display} | None", inner.native)
        self.optional = True
        self.nests = inner.nests
        self.inner = inner

    def check(self, value: object) -> object:
        return None if value is None else self.inner.check(value)

    def to_wire(self, value: Any) -> object:
        return self.inner.to_wire(value)

    def from_wire(self, obj: object) -> object:
        # a present optional value is never nil on the wire
        return self.inner.from_wire(obj)
