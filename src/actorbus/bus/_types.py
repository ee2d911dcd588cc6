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
"""

from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
import math
import re
import threading
import types
import typing
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, NamedTuple

import msgpack

from ..errors import CodecError

if TYPE_CHECKING:
    from .message import MessageKey

__all__ = ["ALLOWED_TYPES_TEXT", "FieldType", "SocketAddress", "compile_type"]

#: msgpack extension code of a nested struct whose class is a strict subclass of
#: the declared one: the payload is the msgpack array ``[type name, fields]``.
EXT_SUBSTRUCT = 1
#: how deeply sub-struct extensions may nest (bounds recursion on hostile input).
MAX_EXT_DEPTH = 32

_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_DAY_SECONDS = 86_400
_DAY_MICROS = 86_400_000_000


class SocketAddress(NamedTuple):
    """A ``(host, port)`` socket address field value; port is 0..65535."""

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
    try:
        text = repr(value)
    except ValueError:  # an int too long for str()
        return f"<{type(value).__name__} too long to show>"
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ packing helpers


def big_int_to_wire(value: int) -> bytes:
    """An int outside the 64-bit range as minimal big-endian two's complement."""
    return value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)


def big_int_from_wire(data: bytes) -> int:
    value = int.from_bytes(data, "big", signed=True)
    if _INT64_MIN <= value <= _UINT64_MAX:
        raise _Mismatch("int", data, "64-bit integers must travel as msgpack ints")
    if len(data) != (value.bit_length() + 8) // 8:
        raise _Mismatch("int", data, "big integer bytes are not minimal")
    return value


def pack_default(obj: object) -> object:
    """msgpack ``default`` hook: ints beyond 64 bits become bytes; nothing else is
    packable (field values are validated, so this is a bug or misuse)."""
    if type(obj) is int:
        return big_int_to_wire(obj)
    raise CodecError(
        f"cannot encode a value of type {type(obj).__name__}: it is not a declared field type"
    )


class _Packers(threading.local):
    """One msgpack Packer per thread (a Packer is not thread-safe; ``packb`` costs
    twice as much because it builds a Packer per call)."""

    def __init__(self) -> None:
        self.pack: Callable[[object], bytes] = msgpack.Packer(default=pack_default).pack


_PACKERS = _Packers()


def pack(obj: object) -> bytes:
    """Pack ``obj`` with this thread's Packer (big ints handled)."""
    return _PACKERS.pack(obj)


class SubStructExt:
    """What the unpacker produces for an ext value: decoded only where a struct
    field expects it, so decoding depth follows the declaration."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data

    def __repr__(self) -> str:
        return f"ExtType({self.code}, {_short_repr(self.data)})"


def unpack(data: bytes | bytearray | memoryview) -> object:
    """Unpack untrusted bytes into tuples/natives/SubStructExt; ValueError on garbage."""
    return msgpack.unpackb(
        data, use_list=False, raw=False, ext_hook=SubStructExt, strict_map_key=True
    )


class _Depth(threading.local):
    def __init__(self) -> None:
        self.encode = 0
        self.decode = 0


_DEPTH = _Depth()


# ----------------------------------------------------------------------- base class


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


# --------------------------------------------------------------------------- natives


class _Bool(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is bool:
            return value
        raise _Mismatch("bool", value)

    def from_wire(self, obj: object) -> object:
        return self.check(obj)


class _Int(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is int:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return int.__int__(value)  # an int subclass (IntEnum...) as a plain int
        raise _Mismatch("int", value, "bool is not an int here" if type(value) is bool else "")

    def from_wire(self, obj: object) -> object:
        if type(obj) is int:
            return obj
        if type(obj) is bytes:
            return big_int_from_wire(obj)
        raise _Mismatch("int", obj)


TIMESTAMP_MAX = (1 << 63) - 1


class _Timestamp(_Int):
    """The ``timestamp`` base field: int epoch milliseconds in 0..2**63-1."""

    __slots__ = ()

    def check(self, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            if 0 <= value <= TIMESTAMP_MAX:
                return int.__int__(value)
            raise _Mismatch(self.display, value, "out of range")
        raise _Mismatch(self.display, value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is int and 0 <= obj <= TIMESTAMP_MAX:
            return obj
        raise _Mismatch(self.display, obj)


TIMESTAMP = _Timestamp(int, "int epoch milliseconds in 0..2**63-1", native=True)


class _Float(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is float:
            return value
        if isinstance(value, float):
            return float.__float__(value)
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return int.__float__(value)
            except OverflowError:
                raise _Mismatch("float", value, "int too large for a float") from None
        raise _Mismatch("float", value)

    def from_wire(self, obj: object) -> object:
        # A peer may send an integral value as a msgpack int (the constructor
        # accepts ints too); a bool or a big-int bin is not a float.
        if type(obj) is float:
            return obj
        if type(obj) is int:
            return float(obj)
        raise _Mismatch("float", obj)


class _Str(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is str:
            return value
        if isinstance(value, str):
            return str.__str__(value)  # the characters, not a subclass's __str__
        raise _Mismatch("str", value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is str:
            return obj
        raise _Mismatch("str", obj)


class _Bytes(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is bytes:
            return value
        if isinstance(value, bytes):
            return bytes.__bytes__(value)
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise _Mismatch("bytes", value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is bytes:
            return obj
        raise _Mismatch("bytes", obj)


# ------------------------------------------------------------------------ converted


class _Converted(FieldType):
    """A type with a distinct wire form given by an encode/decode pair.

    ``check`` accepts instances of ``python_type``; an instance of a subclass is
    normalised to the exact type through the wire form, so what is stored is what
    a receiver gets.  ``decode`` receives an object of exactly ``wire_type`` and
    raises ValueError/TypeError/OverflowError/ArithmeticError on bad data."""

    __slots__ = ("_decode", "_encode", "_reject", "_wire_types")

    def __init__(  # noqa: PLR0917
        self,
        python_type: type,
        encode: Callable[[Any], object],
        wire_types: tuple[type, ...],
        decode: Callable[[Any], object],
        display: str | None = None,
        reject: tuple[type, str] | None = None,
    ) -> None:
        super().__init__(python_type, display or python_type.__name__)
        self._encode = encode
        self._wire_types = wire_types
        self._decode = decode
        self._reject = reject

    def check(self, value: object) -> object:
        if type(value) is self.python_type:
            return self._validate(value)
        if isinstance(value, self.python_type):
            if self._reject is not None and isinstance(value, self._reject[0]):
                raise _Mismatch(self.display, value, self._reject[1])
            try:  # a subclass instance: keep only what travels, as the exact type
                wire = self._encode(value)
            except (ValueError, TypeError, OverflowError, ArithmeticError) as exc:
                raise _Mismatch(self.display, value, str(exc)) from None
            return self._validate(self._convert(wire))
        raise _Mismatch(self.display, value)

    def _validate(self, value: Any) -> object:
        return value

    def to_wire(self, value: Any) -> object:
        return self._encode(value)

    def from_wire(self, obj: object) -> object:
        if type(obj) not in self._wire_types:
            raise _Mismatch(f"{self.display} wire form", obj)
        return self._validate(self._convert(obj))

    def _convert(self, obj: object) -> object:
        try:
            return self._decode(obj)
        except (ValueError, TypeError, OverflowError, ArithmeticError) as exc:
            raise _Mismatch(self.display, obj, str(exc)) from None


# Decimal -------------------------------------------------------------------------

_DECIMAL_TEXT = re.compile(
    r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|NaN\d*|Infinity)", re.ASCII
)


def _decode_decimal(text: str) -> Decimal:
    if _DECIMAL_TEXT.fullmatch(text) is None:
        raise ValueError("not a decimal number in canonical text form")
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError("decimal exponent out of range") from None


class _DecimalType(_Converted):
    __slots__ = ()

    def _validate(self, value: Any) -> object:
        if value.is_snan():
            # sNaN cannot be hashed or compared: it would poison every message.
            raise _Mismatch("Decimal", value, "a signaling NaN is not allowed; use Decimal('NaN')")
        return value


# Time zones and the datetime family --------------------------------------------


def _encode_offset(offset: _dt.timedelta | None) -> int | float | None:
    if offset is None:
        return None
    if offset.microseconds:
        return offset.total_seconds()  # exact to the microsecond for |offset| < 1 day
    return offset.days * _DAY_SECONDS + offset.seconds


def _decode_offset(wire: object) -> _dt.timezone | None:
    if wire is None:
        return None
    if type(wire) is int:
        seconds: float = wire
    elif type(wire) is float and not math.isnan(wire):
        seconds = wire
    else:
        raise ValueError("a UTC offset is an int or float number of seconds, or nil")
    if not -_DAY_SECONDS < seconds < _DAY_SECONDS:
        raise ValueError("a UTC offset must be strictly within one day")
    return _dt.timezone(_dt.timedelta(seconds=seconds))


def _check_tzinfo(value: _dt.datetime | _dt.time) -> _dt.datetime | _dt.time:
    tz = value.tzinfo
    if tz is None or type(tz) is _dt.timezone:
        return value
    try:  # a user tzinfo may be broken: find out now, not when sending
        value.utcoffset()
    except (ValueError, TypeError, ArithmeticError, LookupError) as exc:
        raise _Mismatch(type(value).__name__, value, f"its tzinfo fails: {exc}") from None
    return value


def _encode_datetime(value: _dt.datetime) -> tuple[int, int | float | None]:
    delta = value.replace(tzinfo=None) - _EPOCH
    micros = (delta.days * _DAY_SECONDS + delta.seconds) * 1_000_000 + delta.microseconds
    return micros, _encode_offset(value.utcoffset())


def _decode_datetime(obj: tuple[object, ...]) -> _dt.datetime:
    if len(obj) != 2 or type(obj[0]) is not int:
        raise ValueError("datetime wire form is [microseconds since 1970-01-01, UTC offset]")
    days, micros = divmod(obj[0], _DAY_MICROS)
    naive = _EPOCH + _dt.timedelta(days=days, microseconds=micros)
    tz = _decode_offset(obj[1])
    return naive if tz is None else naive.replace(tzinfo=tz)


def _encode_time(value: _dt.time) -> tuple[int, int | float | None]:
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
    return micros + value.microsecond, _encode_offset(value.utcoffset())


def _decode_time(obj: tuple[object, ...]) -> _dt.time:
    if len(obj) != 2 or type(obj[0]) is not int or not 0 <= obj[0] < _DAY_MICROS:
        raise ValueError("time wire form is [microseconds of the day, UTC offset]")
    seconds, micro = divmod(obj[0], 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return _dt.time(hour, minute, second, micro, tzinfo=_decode_offset(obj[1]))


def _encode_date(value: _dt.date) -> int:
    return value.toordinal() - _EPOCH_ORDINAL


def _decode_date(obj: int) -> _dt.date:
    return _dt.date.fromordinal(obj + _EPOCH_ORDINAL)


def _encode_timedelta(value: _dt.timedelta) -> tuple[int, int, int]:
    return value.days, value.seconds, value.microseconds


def _decode_timedelta(obj: tuple[object, ...]) -> _dt.timedelta:
    if not (
        len(obj) == 3
        and type(obj[0]) is int
        and type(obj[1]) is int
        and type(obj[2]) is int
        and 0 <= obj[1] < _DAY_SECONDS
        and 0 <= obj[2] < 1_000_000
    ):
        raise ValueError("timedelta wire form is [days, seconds 0..86399, microseconds]")
    return _dt.timedelta(days=obj[0], seconds=obj[1], microseconds=obj[2])


class _DateTimeType(_Converted):
    __slots__ = ()

    def _validate(self, value: Any) -> object:
        return _check_tzinfo(value)


# UUID and IP addresses ------------------------------------------------------------


def _decode_uuid(data: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=data)


def _decode_ipv4(data: bytes) -> ipaddress.IPv4Address:
    if len(data) != 4:
        raise ValueError("an IPv4 address is 4 bytes")
    return ipaddress.IPv4Address(data)


def _encode_ipv6(value: ipaddress.IPv6Address) -> bytes | str:
    # a scoped address (fe80::1%eth0) travels as text: the zone is part of it
    return value.packed if value.scope_id is None else str(value)


def _decode_ipv6(data: bytes | str) -> ipaddress.IPv6Address:
    if type(data) is str:
        if "%" not in data:
            raise ValueError("an unscoped IPv6 address travels as 16 bytes")
        return ipaddress.IPv6Address(data)
    if len(data) != 16:
        raise ValueError("an IPv6 address is 16 bytes")
    return ipaddress.IPv6Address(data)


def _encode_ip(value: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bytes | str:
    return value.packed if type(value) is ipaddress.IPv4Address else _encode_ipv6(value)  # type: ignore[arg-type]


def _decode_ip(data: bytes | str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if type(data) is bytes and len(data) == 4:
        return ipaddress.IPv4Address(data)
    return _decode_ipv6(data)


# --------------------------------------------------------------- structured values


class _SocketAddressType(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if not (isinstance(value, tuple) and len(value) == 2):
            raise _Mismatch(self.display, value, "give SocketAddress(host, port)")
        host, port = value
        if not isinstance(host, str):
            raise _Mismatch(self.display, value, "host must be a str")
        if not (isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535):
            raise _Mismatch(self.display, value, "port must be an int in 0..65535")
        if type(value) is SocketAddress and type(host) is str and type(port) is int:
            return value
        return SocketAddress(str.__str__(host), int.__int__(port))

    def to_wire(self, value: Any) -> object:
        return (value[0], value[1])

    def from_wire(self, obj: object) -> object:
        if not (
            type(obj) is tuple
            and len(obj) == 2
            and type(obj[0]) is str
            and type(obj[1]) is int
            and 0 <= obj[1] <= 65535
        ):
            raise _Mismatch(f"{self.display} wire form [host, port 0..65535]", obj)
        return SocketAddress(obj[0], obj[1])


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
        enc = cls._ab_enc
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
            return self._cls._ab_dec(obj)
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
            return cls._ab_dec(inner[1])
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
            if cls._ab_enc is None and all(type(v) is cls for v in value):
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


# ------------------------------------------------------------------------ the table

_IP_ANY = _Converted(
    ipaddress._BaseAddress,  # common base of IPv4Address and IPv6Address
    _encode_ip,
    (bytes, str),
    _decode_ip,
    "IPv4Address | IPv6Address",
)

_SIMPLE: dict[object, FieldType] = {
    bool: _Bool(bool, "bool", native=True),
    int: _Int(int, "int", native=True),
    float: _Float(float, "float", native=True),
    str: _Str(str, "str", native=True),
    bytes: _Bytes(bytes, "bytes", native=True),
    Decimal: _DecimalType(Decimal, str, (str,), _decode_decimal),
    _dt.datetime: _DateTimeType(_dt.datetime, _encode_datetime, (tuple,), _decode_datetime),
    _dt.date: _Converted(
        _dt.date,
        _encode_date,
        (int,),
        _decode_date,
        reject=(_dt.datetime, "a datetime is not a date here; pass value.date()"),
    ),
    _dt.time: _DateTimeType(_dt.time, _encode_time, (tuple,), _decode_time),
    _dt.timedelta: _Converted(_dt.timedelta, _encode_timedelta, (tuple,), _decode_timedelta),
    uuid.UUID: _Converted(uuid.UUID, lambda v: v.bytes, (bytes,), _decode_uuid),
    ipaddress.IPv4Address: _Converted(
        ipaddress.IPv4Address, lambda v: v.packed, (bytes,), _decode_ipv4
    ),
    ipaddress.IPv6Address: _Converted(
        ipaddress.IPv6Address, _encode_ipv6, (bytes, str), _decode_ipv6
    ),
    SocketAddress: _SocketAddressType(SocketAddress, "SocketAddress"),
}

ALLOWED_TYPES_TEXT = (
    "bool, int, float, str, bytes, Decimal, datetime, date, time, timedelta, an Enum, "
    "UUID, IPv4Address, IPv6Address, SocketAddress, MessageKey, a Field subclass, "
    "list[T] or tuple[T, ...] of those, and X | None"
)


class UnsupportedType(Exception):
    """Internal: an annotation names a type fields cannot hold."""


class _Records:
    """The message module's classes that annotations may name, handed over by
    :mod:`actorbus.bus.message` when it is imported (it imports this module, so
    this module never imports it)."""

    message_key: Any = None
    message: Any = None
    field: Any = None
    lookup_type: Any = None


def use_records(message_key: Any, message: Any, field: Any, lookup_type: Any) -> None:
    """(actorbus.bus.message, at import) The classes ``compile_type`` checks
    annotations against."""
    _Records.message_key = message_key
    _Records.message = message
    _Records.field = field
    _Records.lookup_type = lookup_type


def compile_type(annotation: object) -> FieldType:
    """Turn a resolved annotation into a FieldType, or raise UnsupportedType."""
    _message = _Records
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
            inner = compile_type(members[0])
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
        item = compile_type(args[0])
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
