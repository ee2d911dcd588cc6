"""Per message class, generated JSON converters: the fast path of
:mod:`~actorbus.net.jrep._values`.

A ``Value`` object is turned into a message (and back) by code generated once
per class, as the binary codec does (:mod:`actorbus.bus.codec`): the common
JSON forms are handled inline (an int, a string, a bool or a float as itself; a
bytes field as its base64 text; an enum member by its name; the timestamp
absent for "now"), every other
field type through the generic per-field rule it is given.

The generated decoder decides nothing on its own: whenever a value is not in
the form it handles inline, a field is missing, there is a key it does not
know, or the message's constructor refuses what it built, it hands the
untouched ``Value`` to the generic ``slow`` conversion, which gives the same
result, or raises the error naming the field and the fix.  So a ``Value`` is
converted exactly as the generic rules say, the common case without walking
them.  Every name the generated code uses itself starts with ``_``, which field
names may not.
"""

from __future__ import annotations

import binascii
import enum
from collections.abc import Callable
from typing import Any, Final

from ...bus.message import FieldSpec, Message

__all__ = ["decoder_source", "encoder_source", "make_decoder", "make_encoder"]

#: the largest integer a JavaScript number holds exactly (as _values.JS_SAFE)
_JS_SAFE: Final = 2**53 - 1
_MISSING: Final = object()


def _plain(spec: FieldSpec) -> type | None:
    """The Python type whose values a field takes and shows in JSON as they are
    (or as base64 text, for bytes), when it is one of those; else None."""
    ftype = spec.type
    if getattr(ftype, "item", None) is not None:
        return None
    pt = getattr(ftype, "python_type", None)
    return pt if pt in (int, str, bool, float, bytes) else None


def _enum_of(spec: FieldSpec) -> type[enum.Enum] | None:
    """The enum class of a field whose values travel as member names (not a
    Flag: a combination of flags has no name), else None."""
    ftype = spec.type
    if getattr(ftype, "optional", False):
        ftype = ftype.inner  # type: ignore[attr-defined]
    pt = getattr(ftype, "python_type", None)
    if isinstance(pt, type) and issubclass(pt, enum.Enum) and not issubclass(pt, enum.Flag):
        return pt
    return None


def _fields(cls: type[Message]) -> tuple[FieldSpec, ...]:
    return tuple(spec for spec in cls.__fields__ if spec.position)  # 0 is the subject


# ------------------------------------------------------------------ JSON -> message


def decoder_source(cls: type[Message]) -> str:
    """The source of ``cls``'s decoder (for tests and the curious)."""
    lines = [
        "def from_json(_subject, _v):",
        "    try:",
        "        if _type(_v) is not _dict:",
        "            raise _Miss",
        "        _n = 0",
    ]
    add = lines.append
    for spec in _fields(cls):
        name = spec.name
        ind = "        "
        if spec.position == 1 and issubclass(cls, Message):  # timestamp: absent = now
            add(f"{ind}{name} = _v.get({name!r}, _M)")
            add(f"{ind}if {name} is _M:")
            add(f"{ind}    {name} = None")
            add(f"{ind}else:")
            ind += "    "
        elif spec.required:
            add(f"{ind}{name} = _v[{name!r}]")
        else:
            add(f"{ind}{name} = _v.get({name!r}, _M)")
            add(f"{ind}if {name} is _M:")
            add(f"{ind}    {name} = _d_{name}")
            add(f"{ind}else:")
            ind += "    "
        add(f"{ind}_n += 1")
        plain = _plain(spec)
        optional = getattr(spec.type, "optional", False)
        if optional:
            add(f"{ind}if {name} is not None:")
            ind += "    "
        if plain is bytes:
            add(f"{ind}if _type({name}) is not _str:")
            add(f"{ind}    raise _Miss")
            add(f"{ind}{name} = _a2b({name}, strict_mode=True)")
        elif plain is not None:
            add(f"{ind}if _type({name}) is not _t_{name}:")
            add(f"{ind}    raise _Miss")
        elif _enum_of(spec) is not None:  # a member by name
            add(f"{ind}{name} = _e_{name}[{name}] if _type({name}) is _str else _c_{name}({name})")
        else:
            add(f"{ind}{name} = _c_{name}({name})")
    add("        if _n != _len(_v):")
    add("            raise _Miss")
    names = ", ".join(spec.name for spec in _fields(cls))
    add(f"        return _cls(_subject, {names})" if names else "        return _cls(_subject)")
    add("    except Exception:")
    add("        return _slow(_cls, _subject, _v)")
    return "\n".join(lines) + "\n"


def make_decoder(
    cls: type[Message],
    slow: Callable[[type[Message], str, object], Message],
    convert: Callable[[Any, object, str], object],
) -> Callable[[str, object], Message]:
    """``from_json(subject, value)`` for ``cls``: ``slow(cls, subject, value)``
    is the generic conversion it defers to; ``convert(field_type, value,
    where)`` the generic rule for one field of another type."""
    env: dict[str, Any] = {
        "_cls": cls,
        "_slow": slow,
        "_type": type,
        "_len": len,
        "_dict": dict,
        "_str": str,
        "_M": _MISSING,
        "_Miss": _Miss,
        "_a2b": binascii.a2b_base64,
    }
    for spec in _fields(cls):
        env[f"_d_{spec.name}"] = spec.default
        plain = _plain(spec)
        if plain is not None:
            env[f"_t_{spec.name}"] = plain
        else:
            env[f"_c_{spec.name}"] = _converter(convert, spec, cls)
            members = _enum_of(spec)
            if members is not None:
                env[f"_e_{spec.name}"] = dict(members.__members__)
    source = decoder_source(cls)
    exec(compile(source, f"<actorbus jrep decoder {cls.__qualname__}>", "exec"), env)
    decoder: Callable[[str, object], Message] = env["from_json"]
    return decoder


class _Miss(Exception):
    """Internal: not a form the generated code handles inline."""


def _converter(
    convert: Callable[[Any, object, str], object], spec: FieldSpec, cls: type[Message]
) -> Callable[[object], object]:
    ftype = spec.type
    where = f"{cls.__type_name__}.{spec.name}"

    def field_from_json(value: object) -> object:
        return convert(ftype, value, where)

    return field_from_json


# ------------------------------------------------------------------ message -> JSON


def encoder_source(cls: type[Message]) -> str:
    """The source of ``cls``'s encoder (for tests and the curious)."""
    fields = _fields(cls)
    names = ["_s", *(spec.name for spec in fields)]
    lines = ["def to_json(_m):"]
    if len(names) == 1:
        lines.append("    return {}")
        return "\n".join(lines) + "\n"
    lines.append(f"    {', '.join(names)}, = _m")
    items = []
    for spec in fields:
        name = spec.name
        plain = _plain(spec)
        if plain is int:
            value = (
                f"{name} if _type({name}) is _int and -_J <= {name} <= _J else _g_{name}({name})"
            )
        elif plain is bytes:
            value = f"_b2a({name}, newline=False).decode() if _type({name}) is _bytes else _g_{name}({name})"
        elif plain in (str, bool):
            value = f"{name} if _type({name}) is _t_{name} else _g_{name}({name})"
        elif _enum_of(spec) is not None:
            value = f"{name}.name if _type({name}) is _e_{name} else _g_{name}({name})"
        else:
            value = f"_g_{name}({name})"
        items.append(f"        {name!r}: {value},")
    lines.append("    return {")
    lines.extend(items)
    lines.append("    }")
    return "\n".join(lines) + "\n"


def make_encoder(
    cls: type[Message], convert: Callable[[Any, Any], Any]
) -> Callable[[Message], dict[str, Any]]:
    """``to_json(message)``: the ``Value`` object of a ``cls`` message;
    ``convert(field_type, value)`` is the generic rule for a value in any other
    form (None of an optional field, a float, a struct, ...)."""
    env: dict[str, Any] = {
        "_type": type,
        "_int": int,
        "_bytes": bytes,
        "_J": _JS_SAFE,
        "_b2a": binascii.b2a_base64,
    }
    for spec in _fields(cls):
        env[f"_t_{spec.name}"] = _plain(spec)
        env[f"_e_{spec.name}"] = _enum_of(spec)
        env[f"_g_{spec.name}"] = _generic(convert, spec)
    source = encoder_source(cls)
    exec(compile(source, f"<actorbus jrep encoder {cls.__qualname__}>", "exec"), env)
    encoder: Callable[[Message], dict[str, Any]] = env["to_json"]
    return encoder


def _generic(convert: Callable[[Any, Any], Any], spec: FieldSpec) -> Callable[[Any], Any]:
    ftype = spec.type

    def field_to_json(value: Any) -> Any:
        return convert(ftype, value)

    return field_to_json
