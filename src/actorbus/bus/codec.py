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
  the rest; on any mismatch it hands over to ``_codegen._slow_from_wire``, the
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

from typing import Any, TypeVar

import msgpack

from ..errors import CodecError, MessageTooLargeError, UsageError
from ._codegen import generate
from ._types import SubStructExt, pack, pack_default
from .message import Field, Message

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
    generate(cls)


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
