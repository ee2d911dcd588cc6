"""The binary message codec: msgpack with a generated encoder/decoder per class.

Theory of operation
-------------------
A message's *wire form* is a msgpack array of its field values in declaration
order (``subject, timestamp, ...``).  Each class gets two generated functions
(see :func:`actorbus.bus.message._generate_codec`), built on first use or by
:func:`compile`:

* ``to_wire(msg)`` — for a class whose fields are all msgpack-native (bool, int,
  float, str, bytes) this returns the message itself: messages are tuples, and
  msgpack packs a tuple as an array, so there is no conversion step at all.
  Other types convert (Decimal → text, datetime → (µs since epoch, UTC offset),
  UUID/IP → bytes, Enum → value, nested struct → its own array, ints beyond 64
  bits → decimal text).  Classes with optional fields put a *presence mask*
  first and leave ``None`` values out, so a ``None`` costs no bytes of value.
* ``from_wire(obj)`` — validates an untrusted, already unpacked object against
  the declaration (inlined ``type(v) is int`` checks on the fast path; a precise
  field-by-field path when anything is off) and builds the message without
  re-running the constructor.

The wire never names a Python module or class to import: a class is identified
by its *type name* (``Message.__type_name__``), resolved in the registry of
classes already defined in the process.  The type name itself travels outside
the body (in the link's key table, the journal record), so a body is just the
array.

Size: :class:`Codec` enforces a maximum encoded size (default 1 MiB) on encode
and on decode (checked before unpacking).  Decoding arbitrary bytes returns a
message or raises :class:`~actorbus.CodecError` — never another exception type;
msgpack bounds container sizes by the input length, so memory stays bounded.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgpack

from ..errors import CodecError, MessageTooLargeError
from ._types import EXT_SUBSTRUCT, _Mismatch
from .message import Field, Message, lookup_type

__all__ = ["DEFAULT_MAX_SIZE", "Codec", "compile", "decode", "encode", "from_wire", "to_wire"]

DEFAULT_MAX_SIZE = 1 << 20
M = TypeVar("M", bound=Message)

_packb = msgpack.packb
_unpackb = msgpack.unpackb
_MAX_NESTING = 64


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack ext hook: rebuild a nested struct of a subclass from its type name."""
    if code != EXT_SUBSTRUCT:
        raise CodecError(
            f"unknown msgpack extension type {code}; this peer sends data we cannot read"
        )
    try:
        inner = _unpackb(data, use_list=False, raw=False, ext_hook=ext_hook, strict_map_key=True)
    except (ValueError, TypeError) as exc:
        raise CodecError(f"malformed nested struct: {exc}") from None
    if type(inner) is not tuple or len(inner) != 2 or type(inner[0]) is not str:
        raise CodecError("malformed nested struct: expected (type name, fields)")
    cls = lookup_type(inner[0])
    if cls is None or not issubclass(cls, Field):
        raise CodecError(f"nested struct of unknown type {inner[0]!r}; define that Field class")
    try:
        return cls._ab_codec().from_wire(inner[1])
    except _Mismatch as exc:
        raise CodecError(f"nested struct {inner[0]}: {exc.describe()}") from None


def _default(obj: object) -> Any:
    raise CodecError(
        f"cannot encode a value of type {type(obj).__name__}: it is not a declared field type"
    )


def compile(cls: type[Message] | type[Field]) -> None:
    """Generate ``cls``'s encoder and decoder now rather than on first use."""
    cls._ab_codec()


def to_wire(message: Message | Field) -> Any:
    """The msgpack-native wire form of ``message`` (an array of field values)."""
    return type(message)._ab_codec().to_wire(message)


def from_wire(cls: type[M], obj: object) -> M:
    """Build a ``cls`` from an unpacked, untrusted wire form; CodecError if it does not fit."""
    try:
        msg: M = cls._ab_codec().from_wire(obj)
    except _Mismatch as exc:  # defensive: generated code converts, but never leak the signal
        raise CodecError(f"cannot decode {cls.__qualname__}: {exc.describe()}") from None
    return msg


class Codec:
    """Encodes and decodes message bodies with a maximum size.

    ``encode(msg) -> bytes`` and ``decode(cls, data) -> msg``; the type name is
    carried by whoever stores or transmits the body (``type(msg).__type_name__``)."""

    __slots__ = ("max_size",)

    def __init__(self, max_size: int = DEFAULT_MAX_SIZE) -> None:
        if max_size < 16:
            raise ValueError(f"max_size={max_size} is too small; use at least 16 bytes")
        self.max_size = max_size

    def encode(self, message: Message | Field) -> bytes:
        """The encoded body of ``message``; MessageTooLargeError beyond ``max_size``."""
        wire = type(message)._ab_codec().to_wire(message)
        data: bytes = _packb(wire, use_bin_type=True, default=_default)
        if len(data) > self.max_size:
            raise MessageTooLargeError(
                f"{type(message).__qualname__} on subject {getattr(message, 'subject', '?')!r} "
                f"encodes to {len(data)} bytes, over the limit of {self.max_size}; send less "
                f"data per message or raise the codec's max_size on every node"
            )
        return data

    def decode(self, cls: type[M], data: bytes | bytearray | memoryview) -> M:
        """Decode an untrusted body as ``cls``: a message, or CodecError."""
        if len(data) > self.max_size:
            raise MessageTooLargeError(
                f"{len(data)}-byte body for {cls.__qualname__} is over the limit of "
                f"{self.max_size}; the sender must send smaller messages"
            )
        try:
            obj = _unpackb(data, use_list=False, raw=False, ext_hook=ext_hook, strict_map_key=True)
        except (ValueError, TypeError) as exc:
            # ValueError covers msgpack's FormatError/StackError/ExtraData and
            # UnicodeDecodeError; TypeError an unhashable map key.
            raise CodecError(f"malformed {cls.__qualname__} body: {exc}") from None
        return from_wire(cls, obj)


_DEFAULT = Codec()


def encode(message: Message | Field) -> bytes:
    """Encode with the default 1 MiB limit."""
    return _DEFAULT.encode(message)


def decode(cls: type[M], data: bytes | bytearray | memoryview) -> M:
    """Decode with the default 1 MiB limit."""
    return _DEFAULT.decode(cls, data)
