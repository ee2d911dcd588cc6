"""msgpack for field values: the per-thread packer, untrusted unpacking, big ints, sub-structs.

What the field types and the generated codecs share to put values on the wire and
take them off: ints beyond msgpack's 64-bit range travel as ``bin`` (big-endian two's
complement, minimal length) through :func:`pack_default`; :func:`unpack` reads
untrusted bytes into tuples, natives and :class:`SubStructExt`; ``_DEPTH`` bounds how
deeply sub-struct extensions nest.  It is separate from the field types because it
knows msgpack and not annotations: :mod:`.codec` uses it directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgpack

from ..errors import CodecError
from ._fieldtype import _Mismatch, _short_repr

#: msgpack extension code of a nested struct whose class is a strict subclass of
#: the declared one: the payload is the msgpack array ``[type name, fields]``.
EXT_SUBSTRUCT = 1
#: how deeply sub-struct extensions may nest (bounds recursion on hostile input).
MAX_EXT_DEPTH = 32

_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1


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
    """One msgpack Packer per thread (a Packer is not thread-safe, and ``packb``
    builds a Packer per call)."""

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
