"""The binary message codec: msgpack with a generated encoder/decoder per class.

Theory of operation
-------------------
A message's *body* is a msgpack array of its field values in declaration order
(``subject, timestamp, ...``).  A class with ``X | None`` fields puts a
*presence mask* first — bit *k* set when the *k*-th optional field (in
declaration order) has a value — and leaves absent values out, so a ``None``
costs no value bytes.  Field wire forms are listed in ``docs/messages.md``.

Each class gets two functions, generated as Python source the first time the
class is encoded or decoded (or by :func:`compile`) and stored on the class
itself (``cls.__wire_encode__``, ``cls.__wire_decode__``), where lookup is cheapest.
They are the codec's interface for transports' hot paths, which call them
directly rather than :func:`to_wire` / :func:`from_wire`:

* ``__wire_encode__(msg)`` → the object to pack.  For a class whose fields are all
  native (bool, int, float, str, bytes) and required, there is no encoder at all
  (``__wire_encode__ is None``): a message is a tuple and msgpack packs it as an array
  directly.  An int beyond 64 bits is handled by the packer's ``default`` hook.
* ``__wire_decode__(obj)`` → a message from an untrusted, already unpacked object.  The
  fast path inlines ``type(v) is int`` checks and calls the field types only for
  the rest; on any mismatch it hands over to :func:`_slow_from_wire`, the
  reference decoder, which raises a CodecError naming the class and the field.
  The fast path never accepts what the reference decoder rejects (a property
  test checks that).

The wire never names a Python module or class to import: a class is identified
by its *type name* (``cls.__type_name__``), resolved in the registry of classes
already defined in the process, and nothing is ever unpickled.  The type name
of a message travels outside the body (in a link's key table, a journal
record); the type name of a nested struct of a subclass travels inside it (ext
type 1).

:class:`Codec` enforces a maximum encoded size (default 1 MiB) on encode and on
decode (checked before unpacking).  Decoding arbitrary bytes returns a message
or raises :class:`~actorbus.CodecError` — never another exception type.  Memory
stays bounded: msgpack refuses container lengths beyond the input length, array
nesting is bounded by msgpack's stack and sub-struct nesting by
``MAX_EXT_DEPTH``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, TypeVar

import msgpack

from ..errors import CodecError, MessageTooLargeError, UsageError
from ._types import TIMESTAMP_MAX, SubStructExt, _EnumType, _Mismatch, pack, pack_default
from .message import Field, FieldSpec, Message, use_codec_compiler

__all__ = [
    "DEFAULT_MAX_SIZE",
    "Codec",
    "compile",
    "decode",
    "encode",
    "ext_hook",
    "from_wire",
    "pack_default",
    "to_wire",
]

#: the default maximum encoded size of one message body: 1 MiB.
DEFAULT_MAX_SIZE = 1 << 20

M = TypeVar("M", bound=Message | Field)

_unpackb = msgpack.unpackb


# ------------------------------------------------------------------------ generation


def compile(cls: type[Message] | type[Field]) -> None:
    """Generate ``cls``'s encoder and decoder now rather than on first use.

    Idempotent and cheap the second time.  Nested struct classes compile on their
    own first use."""
    if not (isinstance(cls, type) and issubclass(cls, (Message, Field))):
        raise UsageError(f"compile() takes a Message or Field subclass, found {cls!r}")
    if cls in (Message, Field):
        raise UsageError(f"{cls.__qualname__} is a base class; compile a subclass")
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


# ------------------------------------------------------------------------ public API


#: the msgpack ``ext_hook`` to unpack a wire form embedded in a larger msgpack
#: document before handing it to :func:`from_wire` (with ``use_list=False``).
ext_hook = SubStructExt


def to_wire(message: Message | Field) -> Any:
    """The object :meth:`Codec.encode` packs for ``message``: an array of field
    values (it may be the message itself, a tuple), nested arrays for structs.

    To embed it in a larger msgpack document, pack with
    ``default=codec.pack_default`` (ints beyond 64 bits)."""
    enc = type(message).__wire_encode__
    return message if enc is None else enc(message)


def from_wire(cls: type[M], obj: object) -> M:
    """Build a ``cls`` from an untrusted wire form as msgpack unpacks it (arrays as
    tuples, ``ext_hook=codec.ext_hook``); CodecError if it does not fit."""
    result: M = cls.__wire_decode__(obj)
    return result


class Codec:
    """Encodes and decodes message bodies with a maximum size.

    ``encode(msg) -> bytes`` and ``decode(cls, data) -> msg``.  The type name is
    carried by whoever stores or transmits the body (``type(msg).__type_name__``).
    Thread-safe: each thread packs with its own msgpack Packer."""

    __slots__ = ("max_size",)

    def __init__(self, max_size: int = DEFAULT_MAX_SIZE) -> None:
        if type(max_size) is not int or max_size < 16:
            raise UsageError(f"Codec(max_size={max_size!r}): expected an int number of bytes >= 16")
        self.max_size = max_size

    def __repr__(self) -> str:
        return f"Codec(max_size={self.max_size})"

    def encode(self, message: Message | Field) -> bytes:
        """The encoded body of ``message``.

        MessageTooLargeError beyond ``max_size``; CodecError when a str holds lone
        surrogates (they have no UTF-8 form)."""
        enc = type(message).__wire_encode__
        try:
            data = pack(message if enc is None else enc(message))
        except ValueError as exc:  # UnicodeEncodeError; msgpack's size and depth limits
            raise CodecError(
                f"cannot encode {type(message).__qualname__}: {exc}; fix the field value"
            ) from exc
        if len(data) > self.max_size:
            subject = message.subject if isinstance(message, Message) else None
            where = f" on subject {subject!r}" if subject is not None else ""
            raise MessageTooLargeError(
                f"{type(message).__qualname__}{where} encodes to {len(data)} bytes, over the "
                f"limit of {self.max_size}; send less data per message or raise max_size "
                f"on every node"
            )
        return data

    def decode(self, cls: type[M], data: bytes | bytearray | memoryview) -> M:
        """Decode an untrusted body as ``cls``: a message, or CodecError."""
        size = data.nbytes if type(data) is memoryview else len(data)
        if size > self.max_size:
            raise MessageTooLargeError(
                f"{size}-byte body for {cls.__qualname__} is over the limit of "
                f"{self.max_size}; the sender must send smaller messages"
            )
        try:
            obj = _unpackb(
                data, use_list=False, raw=False, ext_hook=SubStructExt, strict_map_key=True
            )
        except ValueError as exc:
            # msgpack's FormatError/StackError/ExtraData, incomplete input, bad UTF-8
            raise CodecError(f"malformed {cls.__qualname__} body: {exc}") from exc
        result: M = cls.__wire_decode__(obj)
        return result


_DEFAULT = Codec()


def encode(message: Message | Field) -> bytes:
    """Encode with the default 1 MiB limit."""
    return _DEFAULT.encode(message)


def decode(cls: type[M], data: bytes | bytearray | memoryview) -> M:
    """Decode with the default 1 MiB limit."""
    return _DEFAULT.decode(cls, data)


use_codec_compiler(compile)
