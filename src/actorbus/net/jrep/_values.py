"""Typed messages as JSON values, both ways, by the field rules of docs/messages.md.

A message travels in J.REP as its type name (the ``Type`` part), its subject
(``ToSubject``) and a ``Value`` object holding every other field by name.
Field values take the JSON forms of the table in docs/jrep.md: what JSON holds
exactly (bool, str, numbers within JavaScript's safe range) as itself; what it
would round or cannot hold (Decimal, integers beyond ±2**53-1, bytes, times,
addresses, keys) as a string.

Incoming values are first turned into the Python values the field types accept
(:func:`message_from_json`), then the message class's own constructor checks
them, so a message from a browser gets exactly the validation of any other:
a value that does not fit raises :class:`~._parts.JrepFault` (``BadValue``)
naming the class, the field, what was found and what to send instead — never
another exception, whatever the JSON holds.

Both ways, each class's common case runs through code generated for it
(:mod:`~actorbus.net.jrep._compiled`), which defers to the generic rules here
for anything else: the result is the same either way.

This module reads a field's type through what every field type shows
(``python_type``, ``optional``, ``display``; a sequence's ``item``, an
optional's ``inner``) and the message module's registry; it imports nothing of
the bus but :mod:`actorbus.bus.message`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import enum
import ipaddress
import math
import re
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from ...bus.message import Field, FieldSpec, Message, MessageKey, lookup_type
from ...errors import UsageError, ValidationError
from ._compiled import make_decoder, make_encoder
from ._parts import BAD_VALUE, JrepFault, shown_json

__all__ = ["JS_SAFE", "STRUCT_TYPE", "decoder_of", "message_from_json", "message_to_json"]

#: the largest integer a JavaScript number holds exactly; beyond it ints travel as strings
JS_SAFE: Final = 2**53 - 1
#: the key of a struct object naming a subclass of the declared struct class
STRUCT_TYPE: Final = "@type"
#: struct levels a value may nest (as the binary codec's sub-struct limit)
MAX_DEPTH: Final = 32
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,4000}")
#: integers beyond this are out of a float's range
_FLOAT_INT_MAX: Final = 2**1023
#: beyond any timedelta (999999999 days)
_MAX_MICROS: Final = 10**17
_FLOATS: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class _Bad(Exception):
    """Internal: a JSON value does not fit; ``text`` says what to send instead."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# ------------------------------------------------------------------ JSON -> Python


def message_from_json(cls: type[Message], subject: str, value: object) -> Message:
    """A message of ``cls`` on ``subject`` from the ``Value`` part (None: no
    fields given); JrepFault(BadValue) naming the field when it does not fit."""
    return decoder_of(cls)(subject, value)


def decoder_of(cls: type[Message]) -> Callable[[str, object], Message]:
    """``message_from_json`` for ``cls``: ``decode(subject, value)``."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = make_decoder(cls, _message_from_json, _field_from_json)
    return decoder


#: per message class: its generated decoder (_compiled.make_decoder)
_DECODERS: dict[type, Callable[[str, object], Message]] = {}


def _field_from_json(ftype: Any, value: object, where: str) -> object:
    return _from_json(ftype, value, where, 0)


def _message_from_json(cls: type[Message], subject: str, value: object) -> Message:
    """``message_from_json`` by the generic rules (what the generated decoder
    defers to for any form it does not handle inline)."""
    name = cls.__type_name__
    try:
        fields = _fields_from_json(cls, value, name, 0, skip=("subject",))
        return cls(subject, **fields)
    except _Bad as exc:
        raise JrepFault(BAD_VALUE, exc.text) from None
    except ValidationError as exc:
        raise JrepFault(BAD_VALUE, f"{exc} (in the Value of a {name})") from None
    except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError) as exc:
        raise JrepFault(
            BAD_VALUE, f"{name}: the Value does not make a message ({exc}); see docs/jrep.md"
        ) from None


#: per (class, skipped names): its field names, specs by name, the required
#: ones a Value must give (a message's timestamp defaults to now)
_SHAPES: dict[tuple[type, tuple[str, ...]], tuple[list[str], dict[str, Any], list[Any]]] = {}


def _shape(
    cls: type[Message] | type[Field], skip: tuple[str, ...]
) -> tuple[list[str], dict[str, Any], list[Any]]:
    shape = _SHAPES.get((cls, skip))
    if shape is None:
        specs: tuple[FieldSpec, ...] = cls.__fields__
        by_name = {s.name: s for s in specs if s.name not in skip}
        stamped = issubclass(cls, Message)
        required = [s for s in by_name.values() if s.required and not (stamped and s.position == 1)]
        shape = _SHAPES[cls, skip] = (list(by_name), by_name, required)
    return shape


def _fields_from_json(
    cls: type[Message] | type[Field], value: object, where: str, depth: int, skip: tuple[str, ...]
) -> dict[str, Any]:
    names, by_name, required = _shape(cls, skip)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _Bad(
            f"{where}: expected a JSON object of its fields ({', '.join(names)}), found "
            f"{_kind(value)} {shown_json(value)}"
        )
    out: dict[str, Any] = {}
    for key, item in value.items():
        spec = by_name.get(key)
        if spec is None:
            if key == STRUCT_TYPE and depth > 0:
                continue
            extra = " (the subject is ToSubject)" if key == "subject" else ""
            raise _Bad(
                f"{where}: has no field {shown_json(key)}{extra}; its fields are "
                f"{', '.join(names) or 'none'}"
            )
        ftype = spec.type
        if type(item) is int and ftype.python_type is int and not ftype.optional:
            out[key] = item  # the common case, checked as _from_json would
        elif type(item) is str and ftype.python_type is str and not ftype.optional:
            out[key] = item
        else:
            out[key] = _from_json(ftype, item, f"{where}.{key}", depth)
    for spec in required:
        if spec.name not in out:
            raise _Bad(
                f"{where}: the field {spec.name!r} ({spec.type.display}) is required and "
                "missing; add it to the Value object"
            )
    return out


def _from_json(ftype: Any, value: object, where: str, depth: int) -> object:
    if value is None:
        if ftype.optional:
            return None
        raise _Bad(f"{where}: expected {ftype.display}, found null; this field is required")
    if ftype.optional:
        ftype = ftype.inner
    pt = ftype.python_type
    item = getattr(ftype, "item", None)
    if pt is tuple and item is not None:
        if not isinstance(value, list):
            raise _Bad(f"{where}: expected {ftype.display} (a JSON array), {_found(value)}")
        return tuple(_from_json(item, v, f"{where}[{i}]", depth) for i, v in enumerate(value))
    if pt is bool:
        if isinstance(value, bool):
            return value
        raise _Bad(f"{where}: expected bool (true or false), {_found(value)}")
    if isinstance(value, bool):  # never a number
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}")
    if pt is int:
        if isinstance(value, int):
            return value
        if isinstance(value, str) and _INT_TEXT.fullmatch(value):
            return int(value)
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}")
    if pt is float:
        if isinstance(value, float):
            return value
        if isinstance(value, int):
            if abs(value) > _FLOAT_INT_MAX:
                raise _Bad(f"{where}: the integer {shown_json(value)} is too large for a float")
            return float(value)
        if isinstance(value, str) and value in _FLOATS:
            return _FLOATS[value]
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}")
    if pt is Decimal:
        if isinstance(value, int):
            return Decimal(value)
        if isinstance(value, str):
            try:
                return Decimal(value)
            except InvalidOperation:
                pass
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}")
    if issubclass(pt, enum.Enum):
        return _enum_from_json(pt, value, where)
    if isinstance(pt, type) and issubclass(pt, Field):
        return _struct_from_json(pt, value, where, depth)
    if issubclass(pt, tuple) and getattr(pt, "_fields", None) == ("host", "port"):
        if isinstance(value, list) and len(value) == 2:
            return pt(*value)  # the field type checks host and port
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}")
    if not isinstance(value, str):
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}")
    return _from_text(pt, ftype, value, where)


def _from_text(pt: Any, ftype: Any, value: str, where: str) -> object:
    try:
        if pt is str:
            return value
        if pt is bytes:
            return base64.b64decode(value, validate=True)
        if pt is dt.datetime:
            return dt.datetime.fromisoformat(value)
        if pt is dt.date:
            if len(value) != 10:
                raise ValueError("not YYYY-MM-DD")
            return dt.date.fromisoformat(value)
        if pt is dt.time:
            return dt.time.fromisoformat(value)
        if pt is dt.timedelta:
            micros = Decimal(value) * 1_000_000
            if not micros.is_finite() or abs(micros) > _MAX_MICROS:
                raise ValueError("out of range")
            if micros != micros.to_integral_value():
                raise ValueError("not a whole number of microseconds")
            return dt.timedelta(microseconds=int(micros))
        if pt is uuid.UUID:
            return uuid.UUID(value)
        if pt is ipaddress.IPv4Address:
            return ipaddress.IPv4Address(value)
        if pt is ipaddress.IPv6Address:
            return ipaddress.IPv6Address(value)
        if issubclass(pt, ipaddress._BaseAddress):
            return ipaddress.ip_address(value)
        if pt is MessageKey:
            return MessageKey.parse(value)
    except (ValueError, TypeError, OverflowError, ArithmeticError, binascii.Error, UsageError):
        raise _Bad(f"{where}: expected {_form(ftype)}, {_found(value)}") from None
    raise _Bad(f"{where}: the field type {ftype.display} has no JSON form here")


def _enum_from_json(cls: type[enum.Enum], value: object, where: str) -> enum.Enum:
    if isinstance(value, str) and value in cls.__members__:
        return cls.__members__[value]
    try:
        return cls(value)
    except (ValueError, TypeError):
        names = ", ".join(list(cls.__members__)[:20])
        raise _Bad(
            f"{where}: expected a member of {cls.__name__} by name ({names}), {_found(value)}"
        ) from None


def _struct_from_json(cls: type[Field], value: object, where: str, depth: int) -> Field:
    if depth >= MAX_DEPTH:
        raise _Bad(f"{where}: structs nested more than {MAX_DEPTH} levels deep; flatten it")
    if not isinstance(value, dict):
        raise _Bad(f"{where}: expected {cls.__name__} (a JSON object), {_found(value)}")
    named = value.get(STRUCT_TYPE)
    if named is not None:
        found = lookup_type(named) if isinstance(named, str) else None
        if found is None or not (isinstance(found, type) and issubclass(found, cls)):
            raise _Bad(
                f"{where}: {STRUCT_TYPE} is {shown_json(named)}, not a registered subclass of "
                f"{cls.__name__}; give one or leave {STRUCT_TYPE} out"
            )
        cls = found
    fields = _fields_from_json(cls, value, where, depth + 1, skip=())
    try:
        return cls(**fields)
    except ValidationError as exc:
        raise _Bad(f"{where}: {exc}") from None


def _form(ftype: Any) -> str:
    """The JSON form a field type takes, for error messages."""
    pt = ftype.python_type
    forms = {
        int: "int (a JSON integer, or a string of digits)",
        float: 'float (a JSON number, or "NaN", "Infinity", "-Infinity")',
        Decimal: 'Decimal (a string such as "9.90", or a JSON integer)',
        str: "str (a JSON string)",
        bytes: "bytes (a base64 string)",
        dt.datetime: 'datetime (an ISO 8601 string such as "2024-05-01T12:00:00+00:00")',
        dt.date: 'date (an ISO 8601 string "YYYY-MM-DD")',
        dt.time: 'time (an ISO 8601 string such as "12:30:00")',
        dt.timedelta: 'timedelta (a string of seconds such as "90.5")',
        uuid.UUID: "UUID (a string)",
        MessageKey: 'MessageKey (a string Type:"subject")',
    }
    if pt in forms:
        return forms[pt]
    if isinstance(pt, type) and issubclass(pt, tuple) and getattr(pt, "_fields", None):
        return "SocketAddress (a JSON array [host, port])"
    if isinstance(pt, type) and issubclass(pt, ipaddress._BaseAddress):
        return f"{ftype.display} (a string)"
    return str(ftype.display)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    return "an object"


def _found(value: object) -> str:
    return f"found {_kind(value)} {shown_json(value)}"


# ------------------------------------------------------------------ Python -> JSON


def message_to_json(message: Message) -> dict[str, Any]:
    """The ``Value`` object of ``message``: every field but the subject."""
    cls = type(message)
    encoder = _ENCODERS.get(cls)
    if encoder is None:
        encoder = _ENCODERS[cls] = make_encoder(cls, _to_json)
    return encoder(message)


#: per message class: its generated encoder (_compiled.make_encoder)
_ENCODERS: dict[type, Callable[[Message], dict[str, Any]]] = {}


def _message_to_json(message: Message) -> dict[str, Any]:
    """``message_to_json`` by the generic rules (the generated encoder's
    reference, for tests)."""
    out: dict[str, Any] = {}
    plan = _PLANS.get(type(message))
    if plan is None:
        plan = _PLANS[type(message)] = tuple(
            (spec.position, spec.name, spec.type, _plain(spec.type))
            for spec in message.__fields__
            if spec.position  # 0 is the subject
        )
    for position, name, ftype, plain in plan:
        value: Any = message[position]
        if plain and type(value) is plain:
            out[name] = value  # a str, a bool, a finite-enough int: as it is
            if plain is int and not -JS_SAFE <= value <= JS_SAFE:  # type: ignore[operator]
                out[name] = str(value)
        else:
            out[name] = _to_json(ftype, value)
    return out


#: per message class: (position, name, field type, the plain type its values
#: pass through as, or None)
_PLANS: dict[type, tuple[tuple[int, str, Any, type | None], ...]] = {}


def _plain(ftype: Any) -> type | None:
    """``int``, ``str`` or ``bool`` for a field whose values go into JSON as they
    are (an int within JavaScript's exact range), else None."""
    if getattr(ftype, "optional", False) or getattr(ftype, "item", None) is not None:
        return None
    pt = getattr(ftype, "python_type", None)
    return pt if pt in (int, str, bool) else None


class _IntField:
    """What ``_to_json`` needs of an int field (a Flag's value)."""

    optional = False
    python_type = int


_INT_FIELD = _IntField()


def _to_json(ftype: Any, value: Any) -> Any:
    if value is None:
        return None
    if ftype.optional:
        ftype = ftype.inner
    item = getattr(ftype, "item", None)
    if ftype.python_type is tuple and item is not None:
        return [_to_json(item, v) for v in value]
    if isinstance(value, Field):
        fields = {s.name: _to_json(s.type, v) for s, v in zip(value.__fields__, value, strict=True)}
        if type(value) is not ftype.python_type:
            fields[STRUCT_TYPE] = type(value).__type_name__
        return fields
    if isinstance(value, enum.Flag):  # a combination of flags has no member name
        return _to_json(_INT_FIELD, value.value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -JS_SAFE <= value <= JS_SAFE else str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.date, dt.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        whole, frac = divmod(abs(micros), 1_000_000)
        text = f"{whole}.{frac:06d}".rstrip("0").rstrip(".")
        return "-" + text if micros < 0 else text
    if isinstance(value, MessageKey):
        return str(value)
    if isinstance(value, tuple):  # SocketAddress
        return [value[0], value[1]]
    return str(value)  # Decimal, UUID, IP addresses
