"""Field types: what a message field may hold, how it is checked and put on the wire.

Theory of operation
-------------------
A message class is declared with annotations.  When the class statement runs,
each annotation is *compiled* into a :class:`FieldType`: a small object that
knows

* ``check(value)`` — validate a constructor argument and normalise it (``int`` to
  ``float`` for a float field, ``list`` to ``tuple`` for a sequence field), raising
  :class:`_Mismatch` with the expected and found type;
* ``to_wire(value)`` — turn a valid value into msgpack-native data (``None``,
  ``bool``, ``int``, ``float``, ``str``, ``bytes``, tuples of those, or an
  ``ExtType`` for a nested struct of a subclass);
* ``from_wire(obj)`` — the reverse for *untrusted* data: check the wire shape and
  build the value, raising :class:`_Mismatch` on anything unexpected.

``native`` types (bool, int, float, str, bytes) are the same on the wire as in
memory, which lets the generated per-class codec skip conversion for them; the
others (Decimal, the datetime family, UUID, IP addresses, Enum, MessageKey,
SocketAddress, nested structs, sequences) convert.  The code generator in
:mod:`.message` inlines the native checks (``type(v) is int``) and calls these
objects only for the rest.
"""

from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
import types
import typing
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

import msgpack

__all__ = ["FieldType", "SocketAddress", "compile_type"]

# msgpack extension code for a nested struct whose class is a subclass of the declared one.
EXT_SUBSTRUCT = 1
_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE_ORDINAL = _dt.date(1970, 1, 1).toordinal()


class SocketAddress(NamedTuple):
    """A (host, port) socket address field value."""

    host: str
    port: int


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
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class FieldType:
    """How one declared field type is checked, encoded and decoded."""

    __slots__ = ("display", "native", "optional", "python_type")

    #: the Python type the annotation named (for the Spark schema, docs, errors).
    python_type: Any
    display: str
    native: bool
    optional: bool

    def check(self, value: object) -> object:
        raise _Mismatch(self.display, value)

    def to_wire(self, value: Any) -> object:
        return value

    def from_wire(self, obj: object) -> object:
        return self.check(obj)


# --------------------------------------------------------------------------- natives


class _Bool(FieldType):
    __slots__ = ()

    def __init__(self) -> None:
        self.python_type, self.display, self.native, self.optional = bool, "bool", True, False

    def check(self, value: object) -> object:
        if type(value) is bool:
            return value
        raise _Mismatch("bool", value)


class _Int(FieldType):
    __slots__ = ()

    def __init__(self) -> None:
        self.python_type, self.display, self.native, self.optional = int, "int", True, False

    def check(self, value: object) -> object:
        if type(value) is int:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
        raise _Mismatch("int", value, "bool is not accepted" if type(value) is bool else "")

    def to_wire(self, value: Any) -> object:
        if _INT64_MIN <= value <= _UINT64_MAX:
            return value
        return _BigInt(value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is int:
            return obj
        if type(obj) is str:  # big integer outside the 64-bit range travels as text
            try:
                value = int(obj, 10)
            except ValueError:
                raise _Mismatch("int", obj) from None
            if _INT64_MIN <= value <= _UINT64_MAX:
                raise _Mismatch("int", obj, "small integers must travel as msgpack ints")
            return value
        raise _Mismatch("int", obj)


class _BigInt(str):
    """Marker: an int outside msgpack's 64-bit range, sent as decimal text."""

    __slots__ = ()

    def __new__(cls, value: int) -> _BigInt:
        return super().__new__(cls, str(value))


class _Float(FieldType):
    __slots__ = ()

    def __init__(self) -> None:
        self.python_type, self.display, self.native, self.optional = float, "float", True, False

    def check(self, value: object) -> object:
        if type(value) is float:
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch("float", value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is float:
            return obj
        raise _Mismatch("float", obj)


class _Str(FieldType):
    __slots__ = ()

    def __init__(self) -> None:
        self.python_type, self.display, self.native, self.optional = str, "str", True, False

    def check(self, value: object) -> object:
        if type(value) is str:
            return value
        if isinstance(value, str):
            return str(value)
        raise _Mismatch("str", value)


class _Bytes(FieldType):
    __slots__ = ()

    def __init__(self) -> None:
        self.python_type, self.display, self.native, self.optional = bytes, "bytes", True, False

    def check(self, value: object) -> object:
        if type(value) is bytes:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise _Mismatch("bytes", value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is bytes:
            return obj
        raise _Mismatch("bytes", obj)


# ------------------------------------------------------------------------ converted


class _Converted(FieldType):
    """A type with a distinct wire form; subclasses set ``_encode``/``_decode``."""

    __slots__ = ("_decode", "_encode", "_wire_type")

    def __init__(
        self,
        python_type: type,
        encode: Callable[[Any], object],
        wire_type: type | tuple[type, ...],
        decode: Callable[[Any], object],
        display: str | None = None,
    ) -> None:
        self.python_type = python_type
        self.display = display or python_type.__name__
        self.native = False
        self.optional = False
        self._encode = encode
        self._wire_type = wire_type
        self._decode = decode

    def check(self, value: object) -> object:
        if isinstance(value, self.python_type):
            return value
        raise _Mismatch(self.display, value)

    def to_wire(self, value: Any) -> object:
        return self._encode(value)

    def from_wire(self, obj: object) -> object:
        if not isinstance(obj, self._wire_type) or isinstance(obj, bool):
            raise _Mismatch(f"{self.display} wire form", obj)
        try:
            return self._decode(obj)
        except (ValueError, TypeError, OverflowError, ArithmeticError) as exc:
            raise _Mismatch(self.display, obj, str(exc)) from None


def _decode_decimal(text: str) -> Decimal:
    if len(text) > 1000:
        raise ValueError("decimal text longer than 1000 characters")
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError("not a decimal number") from None


def _encode_tz(tz: _dt.tzinfo | None, ref: _dt.datetime | None) -> int | None:
    if tz is None:
        return None
    offset = tz.utcoffset(ref)
    if offset is None:
        return None
    return (
        int(offset.total_seconds() * 1_000_000)
        if offset.microseconds
        else int(offset.total_seconds())
    )


def _decode_tz(offset: object) -> _dt.tzinfo | None:
    if offset is None:
        return None
    if type(offset) is not int:
        raise ValueError("timezone offset must be an int")
    seconds = offset / 1_000_000 if abs(offset) >= 86_400 else offset
    if abs(seconds) >= 86_400:
        raise ValueError("timezone offset out of range")
    return _dt.timezone(_dt.timedelta(seconds=seconds))


def _encode_datetime(value: _dt.datetime) -> tuple[int, int | None]:
    naive = value.replace(tzinfo=None)
    delta = naive - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros, _encode_tz(value.tzinfo, value)


def _decode_datetime(obj: tuple[object, ...]) -> _dt.datetime:
    if len(obj) != 2 or type(obj[0]) is not int:
        raise ValueError("datetime wire form is (microseconds, offset)")
    naive = _EPOCH + _dt.timedelta(microseconds=obj[0])
    tz = _decode_tz(obj[1])
    return naive if tz is None else naive.replace(tzinfo=tz)


def _encode_time(value: _dt.time) -> tuple[int, int | None]:
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
    return micros + value.microsecond, _encode_tz(value.tzinfo, None)


def _decode_time(obj: tuple[object, ...]) -> _dt.time:
    if len(obj) != 2 or type(obj[0]) is not int or not 0 <= obj[0] < 86_400_000_000:
        raise ValueError("time wire form is (microseconds of the day, offset)")
    seconds, micro = divmod(obj[0], 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return _dt.time(hour, minute, second, micro, tzinfo=_decode_tz(obj[1]))


def _encode_timedelta(value: _dt.timedelta) -> tuple[int, int, int]:
    return value.days, value.seconds, value.microseconds


def _decode_timedelta(obj: tuple[object, ...]) -> _dt.timedelta:
    if len(obj) != 3 or not all(type(x) is int for x in obj):
        raise ValueError("timedelta wire form is (days, seconds, microseconds)")
    return _dt.timedelta(days=obj[0], seconds=obj[1], microseconds=obj[2])  # type: ignore[arg-type]


def _decode_uuid(data: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=data)


def _decode_ipv4(data: bytes) -> ipaddress.IPv4Address:
    if len(data) != 4:
        raise ValueError("IPv4 address must be 4 bytes")
    return ipaddress.IPv4Address(data)


def _decode_ipv6(data: bytes) -> ipaddress.IPv6Address:
    if len(data) != 16:
        raise ValueError("IPv6 address must be 16 bytes")
    return ipaddress.IPv6Address(data)


def _decode_ip_any(data: bytes) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if len(data) == 4:
        return ipaddress.IPv4Address(data)
    if len(data) == 16:
        return ipaddress.IPv6Address(data)
    raise ValueError("an IP address is 4 or 16 bytes")


class _SocketAddressType(FieldType):
    __slots__ = ()

    def __init__(self) -> None:
        self.python_type, self.display = SocketAddress, "SocketAddress (host: str, port: int)"
        self.native, self.optional = False, False

    def check(self, value: object) -> object:
        if (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[0], str)
            and type(value[1]) is int
            and 0 <= value[1] <= 65535
        ):
            return value if type(value) is SocketAddress else SocketAddress(value[0], value[1])
        raise _Mismatch(self.display, value, "port must be 0..65535")

    def to_wire(self, value: Any) -> object:
        return (value[0], value[1])

    def from_wire(self, obj: object) -> object:
        return self.check(obj)


class _EnumType(FieldType):
    __slots__ = ("_cls",)

    def __init__(self, cls: type[enum.Enum]) -> None:
        self.python_type, self.display, self.native, self.optional = cls, cls.__name__, False, False
        self._cls = cls

    def check(self, value: object) -> object:
        if isinstance(value, self._cls):
            return value
        raise _Mismatch(f"{self.display} member", value)

    def to_wire(self, value: Any) -> object:
        return value.value

    def from_wire(self, obj: object) -> object:
        if type(obj) not in (int, str):
            raise _Mismatch(f"{self.display} value", obj)
        try:
            return self._cls(obj)
        except ValueError:
            raise _Mismatch(f"{self.display} value", obj, "no such member") from None


class _KeyType(FieldType):
    """A MessageKey field: (type name, subject) on the wire, resolved by the registry."""

    __slots__ = ()

    def __init__(self) -> None:
        from .message import MessageKey

        self.python_type, self.display, self.native, self.optional = (
            MessageKey,
            "MessageKey",
            False,
            False,
        )

    def check(self, value: object) -> object:
        if isinstance(value, self.python_type):
            return value
        raise _Mismatch("MessageKey", value)

    def to_wire(self, value: Any) -> object:
        return (value.message_class.__type_name__, value.subject)

    def from_wire(self, obj: object) -> object:
        from .message import MessageKey, lookup_type

        if not (
            type(obj) is tuple and len(obj) == 2 and type(obj[0]) is str and type(obj[1]) is str
        ):
            raise _Mismatch("MessageKey wire form (type name, subject)", obj)
        cls = lookup_type(obj[0])
        if cls is None:
            raise _Mismatch("MessageKey of a registered message type", obj, "unknown type name")
        return MessageKey(cls, obj[1])


class _StructType(FieldType):
    """A nested Field struct; a subclass instance may stand for the declared class."""

    __slots__ = ("_cls",)

    def __init__(self, cls: type) -> None:
        self.python_type, self.display, self.native, self.optional = cls, cls.__name__, False, False
        self._cls = cls

    def check(self, value: object) -> object:
        if isinstance(value, self._cls):
            return value
        raise _Mismatch(f"{self.display} (or a subclass)", value)

    def to_wire(self, value: Any) -> object:
        cls = type(value)
        wire = cls._ab_codec().to_wire(value)
        if cls is self._cls:
            return wire
        payload = msgpack.packb((cls.__type_name__, wire), use_bin_type=True)
        return msgpack.ExtType(EXT_SUBSTRUCT, payload)

    def from_wire(self, obj: object) -> object:
        if type(obj) is tuple:
            return self._cls._ab_codec().from_wire(obj)  # type: ignore[attr-defined]
        if isinstance(obj, self._cls):  # a subclass instance built by the ext hook
            return obj
        raise _Mismatch(f"{self.display} (or a subclass)", obj)


class _SequenceType(FieldType):
    __slots__ = ("item",)

    def __init__(self, item: FieldType, origin: str) -> None:
        self.python_type = tuple
        self.display = f"{origin}[{item.display}]"
        self.native = False
        self.optional = False
        self.item = item

    def check(self, value: object) -> object:
        if not isinstance(value, (list, tuple)):
            raise _Mismatch(self.display, value)
        check = self.item.check
        out = []
        for index, element in enumerate(value):
            try:
                out.append(check(element))
            except _Mismatch as exc:
                raise _Mismatch(self.display, value, f"item {index}: {exc.describe()}") from None
        return tuple(out)

    def to_wire(self, value: Any) -> object:
        if self.item.native and type(self.item) is not _Int:
            return value
        enc = self.item.to_wire
        return tuple([enc(v) for v in value])

    def from_wire(self, obj: object) -> object:
        if type(obj) is not tuple:
            raise _Mismatch(f"{self.display} (array)", obj)
        dec = self.item.from_wire
        return tuple([dec(v) for v in obj])


class _Optional(FieldType):
    __slots__ = ("inner",)

    def __init__(self, inner: FieldType) -> None:
        self.python_type = inner.python_type
        self.display = f"{inner.display} | None"
        self.native = inner.native
        self.optional = True
        self.inner = inner

    def check(self, value: object) -> object:
        return None if value is None else self.inner.check(value)

    def to_wire(self, value: Any) -> object:
        return self.inner.to_wire(value)

    def from_wire(self, obj: object) -> object:
        return None if obj is None else self.inner.from_wire(obj)


_IP_ANY = _Converted(
    ipaddress._BaseAddress,  # type: ignore[arg-type]
    lambda v: v.packed,
    bytes,
    _decode_ip_any,
    "IPv4Address | IPv6Address",
)

_SIMPLE: dict[object, FieldType] = {
    bool: _Bool(),
    int: _Int(),
    float: _Float(),
    str: _Str(),
    bytes: _Bytes(),
    Decimal: _Converted(Decimal, str, str, _decode_decimal),
    _dt.datetime: _Converted(_dt.datetime, _encode_datetime, tuple, _decode_datetime),
    _dt.date: _Converted(
        _dt.date,
        lambda v: v.toordinal() - _EPOCH_DATE_ORDINAL,
        int,
        lambda o: _dt.date.fromordinal(o + _EPOCH_DATE_ORDINAL),
    ),
    _dt.time: _Converted(_dt.time, _encode_time, tuple, _decode_time),
    _dt.timedelta: _Converted(_dt.timedelta, _encode_timedelta, tuple, _decode_timedelta),
    uuid.UUID: _Converted(uuid.UUID, lambda v: v.bytes, bytes, _decode_uuid),
    ipaddress.IPv4Address: _Converted(
        ipaddress.IPv4Address, lambda v: v.packed, bytes, _decode_ipv4
    ),
    ipaddress.IPv6Address: _Converted(
        ipaddress.IPv6Address, lambda v: v.packed, bytes, _decode_ipv6
    ),
    SocketAddress: _SocketAddressType(),
}

ALLOWED_TYPES_TEXT = (
    "bool, int, float, str, bytes, Decimal, datetime, date, time, timedelta, an Enum, "
    "UUID, IPv4Address, IPv6Address, SocketAddress, MessageKey, a Field subclass, "
    "list[T] or tuple[T, ...] of those, and X | None"
)


class UnsupportedType(Exception):
    """Internal: an annotation names a type fields cannot hold."""


def compile_type(annotation: object) -> FieldType:
    """Turn a resolved annotation into a FieldType, or raise UnsupportedType."""
    from . import message as _message

    Field = getattr(_message, "Field", None)
    MessageKey = getattr(_message, "MessageKey", None)
    if annotation in _SIMPLE:
        # datetime is a subclass of date: the dict lookup is exact, so no confusion.
        return _SIMPLE[annotation]
    if annotation is MessageKey:
        return _KeyType()
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        has_none = len(members) != len(args)
        if set(members) == {ipaddress.IPv4Address, ipaddress.IPv6Address}:
            inner: FieldType = _IP_ANY
        elif len(members) == 1:
            inner = compile_type(members[0])
        else:
            raise UnsupportedType(f"union {annotation!r}; only X | None is allowed")
        if inner.optional:
            return inner
        return _Optional(inner) if has_none else inner
    if origin in (list, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise UnsupportedType(
                f"{annotation!r}; sequences must be homogeneous: tuple[T, ...] or list[T]"
            )
        if not args:
            raise UnsupportedType(f"{annotation!r} without an item type; write list[T]")
        item = compile_type(args[0])
        if item.optional:
            raise UnsupportedType(f"{annotation!r}; sequence items may not be None")
        return _SequenceType(item, "list" if origin is list else "tuple")
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _EnumType(annotation)
        if Field is not None and issubclass(annotation, Field):
            return _StructType(annotation)
    raise UnsupportedType(repr(annotation))
