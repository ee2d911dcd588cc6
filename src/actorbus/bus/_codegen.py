"""The generator of a class's codec: Python source for its encoder and decoder.

:func:`generate` writes, compiles and stores on the class the two functions
:mod:`actorbus.bus.codec` describes (``__wire_encode__``, ``__wire_decode__``),
and :func:`_slow_from_wire` is the reference decoder the generated fast path
hands over to on any mismatch.  :mod:`actorbus.bus.message` calls
:func:`generate` on a class's first encode or decode; :func:`actorbus.bus.codec.compile`
calls it ahead of time.  It needs nothing of the message module but the
classes' ``__fields__`` (and ``_ab_message``), so the message module imports it
directly.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import CodecError
from ._types import TIMESTAMP_MAX, _EnumType, _Mismatch

if TYPE_CHECKING:
    from .message import Field, FieldSpec, Message

__all__ = ["generate"]


def generate(cls: Any) -> None:
    """Generate ``cls``'s encoder and decoder and store them on the class (once)."""
    if cls.__dict__.get("_ab_compiled"):
        return
    enc, dec = _generate(cls)
    type.__setattr__(cls, "__wire_encode__", enc)
    type.__setattr__(cls, "__wire_decode__", dec)
    type.__setattr__(cls, "_ab_compiled", True)


def _generate(
    cls: type[Message] | type[Field],
) -> tuple[Callable[[Any], Any] | None, Callable[[Any], Any]]:
    fields = cls.__fields__
    env: dict[str, Any] = {
        "_cls": cls,
        "_new": tuple.__new__,
        "_tuple": tuple,
        "_type": builtins.type,
        "_len": len,
        "_int": int,
        "_TS_MAX": TIMESTAMP_MAX,
        "_Mismatch": _Mismatch,
        "_CodecError": CodecError,
        "_slow": lambda obj: _slow_from_wire(cls, obj),
        "_nested": lambda field, exc: _decode_error(cls, f"field {field}: {exc}"),
    }
    for f in fields:
        env[f"_t{f.position}"] = f.type.python_type
        env[f"_e{f.position}"] = f.type.to_wire
        env[f"_d{f.position}"] = f.type.from_wire
        if type(f.type) is _EnumType and f.type.value_type is not None:
            env[f"_k{f.position}"] = f.type.value_type
            env[f"_g{f.position}"] = f.type._cls._value2member_map_.get
    is_message = cls._ab_message
    source = _encoder_source(fields) + _decoder_source(fields, is_message)
    exec(builtins.compile(source, f"<actorbus codec {cls.__qualname__}>", "exec"), env)
    return env.get("to_wire"), env["from_wire"]


def _as_is(f: FieldSpec) -> bool:
    """The field's value is its own wire form: a native, or an enum member that
    msgpack packs as its value (``_EnumType.packs_as_value``)."""
    return f.type.native or (type(f.type) is _EnumType and f.type.packs_as_value)


def _encoder_source(fields: tuple[FieldSpec, ...]) -> str:
    """Source of ``to_wire``, or "" when a message is its own wire form."""
    optional = any(f.type.optional for f in fields)
    if not optional and all(_as_is(f) for f in fields):
        return ""
    names = [f"v{f.position}" for f in fields]
    lines = ["def to_wire(m):", f"    {', '.join(names)}{',' if len(names) == 1 else ''} = m"]

    def value(f: FieldSpec) -> str:
        v = f"v{f.position}"
        return v if _as_is(f) else f"_e{f.position}({v})"

    if not optional:
        lines.append(f"    return ({', '.join(value(f) for f in fields)},)")
        return "\n".join(lines) + "\n"
    lead = 0  # the required fields before the first optional one start the list
    while not fields[lead].type.optional:
        lead += 1
    lines.append("    _m = 0")
    lines.append(f"    _o = [0, {''.join(value(f) + ', ' for f in fields[:lead])}]")
    bit = 0
    for f in fields[lead:]:
        if f.type.optional:
            lines.append(f"    if v{f.position} is not None:")
            lines.append(f"        _m |= {1 << bit}")
            lines.append(f"        _o.append({value(f)})")
            bit += 1
        else:
            lines.append(f"    _o.append({value(f)})")
    lines.append("    _o[0] = _m")
    lines.append("    return _o")
    return "\n".join(lines) + "\n"


def _decoder_source(fields: tuple[FieldSpec, ...], is_message: bool) -> str:
    """Source of ``from_wire``: the fast path; anything unusual goes to ``_slow``."""
    optional = [f for f in fields if f.type.optional]
    n_required = len(fields) - len(optional)
    names = ", ".join(f"v{f.position}" for f in fields) + ("," if len(fields) == 1 else "")

    def convert(f: FieldSpec, indent: str) -> list[str]:
        v, p = f"v{f.position}", f.position
        if is_message and p == 1:  # the timestamp
            return [
                f"{indent}if _type({v}) is not _int or not 0 <= {v} <= _TS_MAX: raise _Mismatch('timestamp', {v})"
            ]
        if f.type.native:
            return [f"{indent}if _type({v}) is not _t{p}: {v} = _d{p}({v})"]
        if type(f.type) is _EnumType and f.type.value_type is not None:
            # a known value is one C lookup; anything else takes from_wire (errors, flags)
            return [
                f"{indent}_x = _g{p}({v}) if _type({v}) is _k{p} else None",
                f"{indent}{v} = _d{p}({v}) if _x is None else _x",
            ]
        if f.type.nests:  # remember the field for the error of a nested struct
            return [f"{indent}_f = {f.name!r}", f"{indent}{v} = _d{p}({v})"]
        return [f"{indent}{v} = _d{p}({v})"]

    lines = ["def from_wire(o):"]
    if not optional:
        lines += [
            f"    if _type(o) is not _tuple or _len(o) != {len(fields)}:",
            "        return _slow(o)",
        ]
        if fields:
            lines.append(f"    {names} = o")
        if fields and all(f.type.native for f in fields):
            # Every value already has its exact type (the common case): the
            # unpacked tuple holds exactly the field values, so it is reused
            # as is rather than rebuilt.
            exact = " and ".join(
                f"_type(v{p}) is _int and 0 <= v{p} <= _TS_MAX"
                if is_message and p == 1
                else f"_type(v{p}) is _t{p}"
                for p in (f.position for f in fields)
            )
            lines += [f"    if {exact}:", "        return _new(_cls, o)"]
        lines.append("    try:")
        body = [line for f in fields for line in convert(f, "        ")]
        lines += body or ["        pass"]
    else:
        sizes = tuple(1 + n_required + m.bit_count() for m in range(1 << len(optional)))
        lines += [
            "    if _type(o) is not _tuple or not o:",
            "        return _slow(o)",
            "    _m = o[0]",
            f"    if _type(_m) is not _int or not 0 <= _m < {1 << len(optional)}:",
            "        return _slow(o)",
        ]
        if len(optional) <= 10:
            lines.append(f"    if _len(o) != {sizes!r}[_m]:")
        else:
            lines.append(f"    if _len(o) != {1 + n_required} + _m.bit_count():")
        lines += ["        return _slow(o)", "    try:"]
        index: int | None = 1  # a constant position until the first optional field
        bit = 0
        for f in fields:
            v = f"v{f.position}"
            if f.type.optional:
                if index is not None:
                    lines.append(f"        _i = {index}")
                    index = None
                lines.append(f"        if _m & {1 << bit}:")
                lines.append(f"            {v} = o[_i]")
                lines.append("            _i += 1")
                lines += convert(f, "            ")
                lines.append("        else:")
                lines.append(f"            {v} = None")
                bit += 1
            elif index is not None:
                lines.append(f"        {v} = o[{index}]")
                lines += convert(f, "        ")
                index += 1
            else:
                lines.append(f"        {v} = o[_i]")
                lines.append("        _i += 1")
                lines += convert(f, "        ")
    # A mismatch goes to the reference decoder for a precise error.  A nested
    # struct's CodecError is already precise: add the field, do not decode again
    # (re-decoding at every level would cost 2**depth on hostile input).
    lines += ["    except _Mismatch:", "        return _slow(o)"]
    if any(f.type.nests for f in fields):
        lines += ["    except _CodecError as exc:", "        raise _nested(_f, exc) from exc"]
    lines.append(f"    return _new(_cls, ({names}))")
    return "\n".join(lines) + "\n"


def _decode_error(cls: type[Message] | type[Field], detail: str) -> CodecError:
    return CodecError(f"cannot decode {cls.__qualname__} ({cls.__type_name__}): {detail}")


def _slow_from_wire(cls: type[Message] | type[Field], obj: object) -> Any:
    """The reference decoder: field by field, with an error naming the field."""
    fields = cls.__fields__
    if type(obj) is not tuple:
        raise _decode_error(cls, f"expected an array, found {type(obj).__name__}")
    n_optional = sum(1 for f in fields if f.type.optional)
    if n_optional:
        if not obj:
            raise _decode_error(cls, "empty array; expected the presence mask first")
        mask = obj[0]
        if type(mask) is not int:
            raise _decode_error(cls, f"the presence mask is a {type(mask).__name__}, not an int")
        if not 0 <= mask < 1 << n_optional:
            raise _decode_error(
                cls, f"presence mask {mask:#x} has bits beyond the {n_optional} optional fields"
            )
        expected = 1 + len(fields) - n_optional + mask.bit_count()
        if len(obj) != expected:
            raise _decode_error(
                cls, f"presence mask {mask:#x} needs {expected} items, found {len(obj)}"
            )
        present = iter(obj[1:])
    else:
        mask = 0
        if len(obj) != len(fields):
            raise _decode_error(cls, f"expected {len(fields)} field values, found {len(obj)}")
        present = iter(obj)
    out: list[object] = []
    bit = 1
    for f in fields:
        if f.type.optional:
            has_value = mask & bit
            bit <<= 1
            if not has_value:
                out.append(None)
                continue
        raw = next(present)
        try:
            out.append(f.type.from_wire(raw))
        except _Mismatch as exc:
            raise _decode_error(cls, f"field {f.name}: {exc.describe()}") from None
        except CodecError as exc:  # from a nested struct's decoder
            raise _decode_error(cls, f"field {f.name}: {exc}") from exc
    return tuple.__new__(cls, out)  # type: ignore[type-var]
