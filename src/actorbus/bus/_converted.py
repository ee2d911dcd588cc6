"""Field types with a wire form of their own: Decimal, the datetime family, UUID, addresses.

:class:`_Converted` is a type given by an encode/decode pair (Decimal as canonical
text, datetime as microseconds since the epoch plus a UTC offset, UUID and IP
addresses as bytes, ...); :class:`SocketAddress` is a ``(host, port)`` pair.  Wire
forms are documented in ``docs/messages.md``.  They are separate from the natives
(:mod:`._scalars`) because every value converts on the way out and in, and from the
composite types (:mod:`._composite`) because they refer to no other type or class.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import math
import re
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from ._fieldtype import FieldType, _Mismatch
from .address import SocketAddress

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_DAY_SECONDS = 86_400
_DAY_MICROS = 86_400_000_000


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


#: The union ``IPv4Address | IPv6Address`` (:func:`._types.compile_type` returns it).
_IP_ANY = _Converted(
    ipaddress._BaseAddress,  # common base of IPv4Address and IPv6Address
    _encode_ip,
    (bytes, str),
    _decode_ip,
    "IPv4Address | IPv6Address",
)

#: The converted types by annotation (:func:`._types.compile_type` looks them up).
_CONVERTED: dict[object, FieldType] = {
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
