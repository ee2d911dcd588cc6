"""Framing of the link protocol: the length prefix, the unpacker buffer, frame size limits.

A frame is a 4-byte unsigned length (big-endian unless ``byte_order`` says
little) and that many bytes of body: exactly one msgpack value.  The receiver
feeds what arrives into one streaming ``msgpack.Unpacker`` whose buffer holds at
most one maximum frame plus its prefix (``max_frame_size + 4`` bytes); it checks
each body's end against its prefix with ``Unpacker.tell()``.  The sender packs
one tuple per frame with a reused ``msgpack.Packer`` and prefixes it.

:class:`Reject` is how a broken rule travels inside the parser (never out of it):
``message`` for the local log, ``wire_reason`` for the peer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from struct import Struct
from typing import Final, Literal

import msgpack

from ..config.settings import LinkSettings, default_of
from ..errors import CodecError

__all__ = [
    "BAD_BODY",
    "DECODE_ERRORS",
    "DEFAULT_MAX_FRAME_SIZE",
    "ENCODE_ERRORS",
    "LOGON_FRAME_LIMIT",
    "MAX_PREFIX_VALUE",
    "MIN_FRAME_SIZE",
    "PREFIX",
    "OverLimit",
    "Reject",
    "bad_body",
    "bad_length",
    "closed_unpacker",
    "length_packer",
    "length_reader",
    "length_reader_from",
    "new_packer",
    "new_unpackb",
    "new_unpacker",
]

#: Default largest frame body: a 1 MiB message plus room for the frame header
#: (``LinkSettings.max_frame_size``'s default).
DEFAULT_MAX_FRAME_SIZE: Final[int] = default_of(LinkSettings, "max_frame_size")

#: Smallest allowed ``max_frame_size``: handshake and closing frames always fit.
MIN_FRAME_SIZE: Final = 1024
#: Largest value a 4-byte length prefix can carry.
MAX_PREFIX_VALUE: Final = 0xFFFF_FFFF
#: Bytes of the length prefix.
PREFIX: Final = 4
#: Largest frame body accepted before the logon is accepted: the handshake's
#: frames (LOGON, CHALLENGE, PROOF, LOGON_ACCEPT/REJECT, LOGOFF) hold ids,
#: nonces and proofs of fixed bounds and a reason cut to 512 bytes, so a
#: stranger cannot make a connection buffer more than this before it proved
#: anything.
LOGON_FRAME_LIMIT: Final = 4_096
#: Bytes a new packer or unpacker allocates at first; each grows when a frame
#: needs more (so a connection that never carries big frames stays small).
_FIRST_BUFFER: Final = 4_096

# msgpack's decoding failures: its own exception tree plus the ValueErrors it
# raises for bad UTF-8, bad map keys and bad timestamps; CodecError is what an
# ext_hook raises for an extension value it cannot read.  Nothing broader.
DECODE_ERRORS: Final = (msgpack.UnpackException, ValueError, CodecError)
# msgpack's encoding failures for a value it cannot represent; CodecError is what
# a ``pack_default`` hook raises for a value it does not handle either.
ENCODE_ERRORS: Final = (TypeError, ValueError, OverflowError, CodecError)

#: The reason the peer is told for a body that is not one msgpack value.
BAD_BODY: Final = "frame body is not one valid msgpack value"


class Reject(Exception):
    """A received frame broke a rule.  Raised and caught inside the parser only.

    ``message`` is for the local log (it may quote peer values); ``wire_reason``
    is the short, fixed text sent back to the peer.
    """

    def __init__(self, message: str, wire_reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.wire_reason = wire_reason


class OverLimit(Reject):
    """A received frame went over one of the link's limits (counted apart from
    broken rules, in ``over_limit``)."""


#: the length prefix's Struct per byte order, made once: every connection
#: shares its (stateless) pack and unpack methods rather than holding its own
#: Struct and three bound methods, so a burst of connections allocates less
#: that a survivor of it can keep (docs/reliability.md, "What stays")
_PREFIX: Final = {"big": Struct(">I"), "little": Struct("<I")}
_PACK: Final = {order: st.pack for order, st in _PREFIX.items()}
_UNPACK: Final = {order: st.unpack for order, st in _PREFIX.items()}
_UNPACK_FROM: Final = {order: st.unpack_from for order, st in _PREFIX.items()}


def length_packer(byte_order: Literal["big", "little"]) -> Callable[[int], bytes]:
    """``pack(n)``: the 4-byte length prefix of an ``n``-byte body."""
    return _PACK[byte_order]


def length_reader(byte_order: Literal["big", "little"]) -> Callable[[bytes], tuple[int]]:
    """``unpack(prefix)``: the body length a 4-byte prefix announces, as a 1-tuple."""
    return _UNPACK[byte_order]


def length_reader_from(
    byte_order: Literal["big", "little"],
) -> Callable[[bytes | bytearray | memoryview, int], tuple[int]]:
    """``unpack_from(data, offset)``: the body length the prefix at ``offset`` announces."""
    return _UNPACK_FROM[byte_order]


def new_packer(pack_default: Callable[[object], object] | None) -> Callable[[object], bytes]:
    """``pack(frame)``: one frame body (bin type for bytes; no datetime conversion)."""
    pack: Callable[[object], bytes] = msgpack.Packer(
        use_bin_type=True, datetime=False, default=pack_default, buf_size=_FIRST_BUFFER
    ).pack
    return pack


def new_unpacker(
    buffer_limit: int, ext_hook: Callable[[int, bytes], object] | None
) -> msgpack.Unpacker:
    """The streaming unpacker of received frames: arrays as tuples, str keys only,
    never more than ``buffer_limit`` bytes buffered."""
    options: dict[str, object] = {}
    if ext_hook is not None:
        options["ext_hook"] = ext_hook
    return msgpack.Unpacker(
        use_list=False,
        raw=False,
        strict_map_key=True,
        max_buffer_size=buffer_limit,
        read_size=min(_FIRST_BUFFER, buffer_limit),
        **options,
    )


@functools.lru_cache(maxsize=8)
def new_unpackb(
    ext_hook: Callable[[int, bytes], object] | None,
) -> Callable[[bytes | bytearray | memoryview], object]:
    """``unpackb(body)``: one whole frame body, with the streaming unpacker's
    options; a body that is not exactly one value raises (bytes after it:
    ``ExtraData``, a ValueError).  One per ``ext_hook`` (the codec's, for every
    connection), shared: it holds no state."""
    options: dict[str, object] = {"use_list": False, "raw": False, "strict_map_key": True}
    if ext_hook is not None:
        options["ext_hook"] = ext_hook
    return functools.partial(msgpack.unpackb, **options)


def closed_unpacker() -> msgpack.Unpacker:
    """An unpacker holding nothing, in place of one whose partial frame is dropped."""
    return msgpack.Unpacker(max_buffer_size=1)


def bad_body(size: int) -> str:
    """The log text for a ``size``-byte body that is not exactly one msgpack value."""
    return (
        f"a {size}-byte frame body is not exactly one valid msgpack value "
        "(corrupt, truncated, or followed by extra bytes)"
    )


def bad_length(need: int, max_frame: int, logged_on: bool = True) -> Reject:
    """The rejection of a length prefix out of 1..``max_frame`` (``logged_on``
    False: the limit is :data:`LOGON_FRAME_LIMIT`, the logon is not accepted)."""
    if need and not logged_on:
        return Reject(
            f"the peer announced a frame of {need} bytes before its logon was accepted, "
            f"above the handshake's limit of {max_frame} bytes (max_frame_size applies "
            "once logged on); its byte stream is not this protocol's logon, or the two "
            "nodes disagree on byte_order",
            f"frame of {need} bytes before logon exceeds the limit of {max_frame}",
        )
    if need:
        return Reject(
            f"the peer announced a frame of {need} bytes, above "
            f"max_frame_size={max_frame}; it sends bigger messages than "
            "this link allows (raise max_frame_size on both nodes) or its "
            "byte stream is not this protocol",
            f"frame of {need} bytes exceeds the limit of {max_frame}",
        )
    return Reject(
        "the peer sent a frame of length 0; every frame holds a msgpack array",
        "empty frame",
    )
