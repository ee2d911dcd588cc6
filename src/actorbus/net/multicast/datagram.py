"""The datagrams of a reliable multicast channel: encoding, decoding, limits.

Every datagram starts with the same 24-byte header, in network byte order::

    magic   2 bytes   b"AB"
    version 1 byte    VERSION
    kind    1 byte    DATA, NAK, HEARTBEAT, LOST, ANNOUNCE or BYE
    flags   1 byte    bit 0: a MAC ends the datagram; bit 1: a retransmission
    (3 bytes zero)
    stream  8 bytes   the sender's stream: a random number drawn per run (the
                      per-run nonce), never 0
    stamp   8 bytes   the sender's datagram counter, +1 per datagram it sends
                      (the MAC's replay window)

then the kind's fields (below), then, with a secret, a 16-byte MAC: the first
16 bytes of HMAC-SHA256 over everything before it, keyed by
:func:`channel_key`.

* DATA: ``seq`` (8), ``index`` (2), ``count`` (2), then the segment's bytes.
  One sequence number per datagram; a message of ``count`` segments takes
  ``count`` consecutive sequence numbers, ``index`` 0 first.
* NAK: ``target`` stream (8), ``n`` (2), then ``n`` ranges of ``first`` (8) and
  ``length`` (4): the sequence numbers a receiver misses.
* HEARTBEAT: ``next_seq`` (8, the first sequence number not sent yet), then
  the node's name (1-byte length, UTF-8).
* LOST: ``first`` (8), ``length`` (8): sequence numbers the publisher no longer
  holds.
* ANNOUNCE: ``as_of`` (8, the ``next_seq`` when the state was taken),
  ``page`` (2) and ``pages`` (2), the name (1-byte length, UTF-8), then that
  page of the feed state (opaque bytes; a state larger than one datagram is
  cut into pages, all with the same ``as_of``).
* BYE: ``next_seq`` (8): the publisher closes its stream.

:func:`decode` accepts exactly these; anything else raises
:class:`DatagramError` naming the reason (:data:`REASONS`), which the channel
counts per reason and drops — a truncated datagram, another version, a
segment count or index out of bounds, an empty or oversized NAK range, a
range reaching past 2**63, a name that is not UTF-8, a missing or wrong MAC.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

__all__ = [
    "ANNOUNCE",
    "BYE",
    "DATA",
    "HEADER_SIZE",
    "HEARTBEAT",
    "LOST",
    "MAC_SIZE",
    "MAX_NAK_LENGTH",
    "MAX_NAK_RANGES",
    "MAX_SEGMENTS",
    "NAK",
    "REASONS",
    "VERSION",
    "Announce",
    "Bye",
    "Data",
    "DatagramError",
    "Decoded",
    "Heartbeat",
    "Lost",
    "Nak",
    "announce_overhead",
    "channel_key",
    "data_overhead",
    "decode",
    "encode_announce",
    "encode_bye",
    "encode_data",
    "encode_heartbeat",
    "encode_lost",
    "encode_nak",
]

MAGIC = b"AB"
VERSION = 1
DATA, NAK, HEARTBEAT, LOST, ANNOUNCE, BYE = 1, 2, 3, 4, 5, 6
_FLAG_MAC = 1
_FLAG_RETRANSMIT = 2

_HEADER = struct.Struct("!2sBBB3xQQ")
HEADER_SIZE = _HEADER.size
_DATA = struct.Struct("!QHH")
#: a DATA datagram's header and fields in one pack (the publisher's hot path)
_DATA_HEAD = struct.Struct("!2sBBB3xQQQHH")
_NAK = struct.Struct("!QH")
_RANGE = struct.Struct("!QI")
_U64 = struct.Struct("!Q")
_LOST = struct.Struct("!QQ")
_ANNOUNCE = struct.Struct("!QHH")
MAC_SIZE = 16

#: most segments of one message (a count above it is refused)
MAX_SEGMENTS = 65_535
#: most ranges in one NAK
MAX_NAK_RANGES = 64
#: most sequence numbers one NAK range asks for
MAX_NAK_LENGTH = 65_536
#: sequence numbers stay below this (a range reaching past it is refused)
_SEQ_LIMIT = 1 << 63

#: why :func:`decode` refuses a datagram (the channel counts each)
REASONS = (
    "truncated",
    "magic",
    "version",
    "kind",
    "stream",
    "mac",
    "segment",
    "nak_range",
    "sequence",
    "name",
)


class DatagramError(ValueError):
    """A datagram :func:`decode` refuses; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"multicast datagram refused ({reason}): {detail}")
        self.reason = reason


@dataclass(slots=True)
class Data:
    """A DATA datagram.  Not frozen (a frozen dataclass's ``__init__`` sets
    each field through ``object.__setattr__``, the slow way): one is made
    per datagram received, the receiver's hot path; nothing changes it."""

    stream: int
    stamp: int
    seq: int
    index: int
    count: int
    payload: bytes
    retransmit: bool


@dataclass(frozen=True, slots=True)
class Nak:
    stream: int
    stamp: int
    target: int
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    stream: int
    stamp: int
    next_seq: int
    name: str


@dataclass(frozen=True, slots=True)
class Lost:
    stream: int
    stamp: int
    first: int
    length: int


@dataclass(frozen=True, slots=True)
class Announce:
    stream: int
    stamp: int
    as_of: int
    name: str
    state: bytes
    page: int = 0
    pages: int = 1


@dataclass(frozen=True, slots=True)
class Bye:
    stream: int
    stamp: int
    next_seq: int


Decoded = Data | Nak | Heartbeat | Lost | Announce | Bye


def channel_key(secret: bytes, group: str, port: int) -> bytes:
    """The MAC key of a channel: derived from the secret and the channel's
    address, so that the same secret on two channels gives two keys."""
    return hmac.new(secret, f"actorbus-multicast-1 {group}:{port}".encode(), "sha256").digest()


def data_overhead(with_mac: bool) -> int:
    """Bytes of a DATA datagram that are not the segment's."""
    return HEADER_SIZE + _DATA.size + (MAC_SIZE if with_mac else 0)


def _seal(body: bytearray, key: bytes | None) -> bytes:
    if key is not None:
        body[4] |= _FLAG_MAC
        body += hmac.new(key, body, hashlib.sha256).digest()[:MAC_SIZE]
    return bytes(body)


def _header(kind: int, stream: int, stamp: int, flags: int = 0) -> bytearray:
    return bytearray(_HEADER.pack(MAGIC, VERSION, kind, flags, stream, stamp))


def _name_bytes(name: str) -> bytes:
    raw = name.encode()[:255]
    # a cut inside a character would not decode: cut back to a whole one
    return raw.decode(errors="ignore").encode()


# (the fields positionally, in their wire order: the publisher's hot path)
def encode_data(  # noqa: PLR0917
    stream: int,
    stamp: int,
    seq: int,
    index: int,
    count: int,
    payload: bytes,
    key: bytes | None,
    *,
    retransmit: bool = False,
) -> bytes:
    flags = _FLAG_RETRANSMIT if retransmit else 0
    if key is None:
        head: bytes = _DATA_HEAD.pack(MAGIC, VERSION, DATA, flags, stream, stamp, seq, index, count)
        return head + payload
    body = bytearray(_DATA_HEAD.pack(MAGIC, VERSION, DATA, flags, stream, stamp, seq, index, count))
    body += payload
    return _seal(body, key)


def encode_nak(
    stream: int, stamp: int, target: int, ranges: list[tuple[int, int]], key: bytes | None
) -> bytes:
    if not 0 < len(ranges) <= MAX_NAK_RANGES:
        raise ValueError(f"a NAK holds 1 to {MAX_NAK_RANGES} ranges, not {len(ranges)}")
    body = _header(NAK, stream, stamp) + _NAK.pack(target, len(ranges))
    for first, length in ranges:
        body += _RANGE.pack(first, length)
    return _seal(body, key)


def encode_heartbeat(stream: int, stamp: int, next_seq: int, name: str, key: bytes | None) -> bytes:
    raw = _name_bytes(name)
    body = _header(HEARTBEAT, stream, stamp) + _U64.pack(next_seq) + bytes([len(raw)]) + raw
    return _seal(body, key)


def encode_lost(stream: int, stamp: int, first: int, length: int, key: bytes | None) -> bytes:
    return _seal(_header(LOST, stream, stamp) + _LOST.pack(first, length), key)


def encode_announce(  # noqa: PLR0917
    stream: int,
    stamp: int,
    as_of: int,
    name: str,
    state: bytes,
    key: bytes | None,
    page: int = 0,
    pages: int = 1,
) -> bytes:
    raw = _name_bytes(name)
    body = _header(ANNOUNCE, stream, stamp) + _ANNOUNCE.pack(as_of, page, pages)
    body += bytes([len(raw)]) + raw + state
    return _seal(body, key)


def announce_overhead(name: str, with_mac: bool) -> int:
    """Bytes of an ANNOUNCE datagram that are not its page of the state."""
    return HEADER_SIZE + _ANNOUNCE.size + 1 + len(_name_bytes(name)) + (MAC_SIZE if with_mac else 0)


def encode_bye(stream: int, stamp: int, next_seq: int, key: bytes | None) -> bytes:
    return _seal(_header(BYE, stream, stamp) + _U64.pack(next_seq), key)


def _name(view: memoryview, at: int) -> tuple[str, int]:
    if at >= len(view):
        raise DatagramError("truncated", "the name's length is missing")
    end = at + 1 + view[at]
    if end > len(view):
        raise DatagramError("truncated", f"a name of {view[at]} bytes ends past the datagram")
    try:
        return bytes(view[at + 1 : end]).decode(), end
    except UnicodeDecodeError:
        raise DatagramError("name", "the name is not UTF-8") from None


def _need(view: memoryview, size: int, what: str) -> None:
    if len(view) < size:
        raise DatagramError("truncated", f"{len(view)} bytes, {what} needs {size}")


def decode(datagram: bytes, key: bytes | None, max_segments: int = MAX_SEGMENTS) -> Decoded:
    """The datagram's fields, or :class:`DatagramError`.

    ``key``: the channel's MAC key: with one, a datagram without a MAC or with
    a wrong one is refused; without one, a datagram with a MAC is refused (it
    cannot be checked).  ``max_segments``: a DATA with a larger count is
    refused (the channel passes what its largest message needs)."""
    if key is None and len(datagram) >= _DATA_HEAD.size:
        # the common case first, in one unpack: an unsigned DATA (else the checks below)
        magic, version, kind, flags, stream, stamp, seq, index, count = _DATA_HEAD.unpack_from(
            datagram
        )
        if (
            kind == DATA
            and magic == MAGIC
            and version == VERSION
            and not flags & _FLAG_MAC
            and stream
            and 0 < count <= max_segments
            and index < count
            and seq < _SEQ_LIMIT - count
        ):
            return Data(
                stream,
                stamp,
                seq,
                index,
                count,
                datagram[_DATA_HEAD.size :],
                bool(flags & _FLAG_RETRANSMIT),
            )
    view = memoryview(datagram)
    _need(view, HEADER_SIZE, "the header")
    magic, version, kind, flags, stream, stamp = _HEADER.unpack_from(view)
    if magic != MAGIC:
        raise DatagramError("magic", f"starts {bytes(magic)!r}, not {MAGIC!r}")
    if version != VERSION:
        raise DatagramError("version", f"version {version}, this node speaks {VERSION}")
    if stream == 0:
        raise DatagramError("stream", "stream 0")
    if key is not None:
        if not flags & _FLAG_MAC:
            raise DatagramError("mac", "no MAC and the channel has a secret")
        _need(view, HEADER_SIZE + MAC_SIZE, "a MAC")
        end = len(view) - MAC_SIZE
        want = hmac.new(key, view[:end], hashlib.sha256).digest()[:MAC_SIZE]
        if not hmac.compare_digest(want, view[end:]):
            raise DatagramError("mac", "the MAC does not match the channel's secret")
        view = view[:end]
    elif flags & _FLAG_MAC:
        raise DatagramError("mac", "a MAC and the channel has no secret")
    at = HEADER_SIZE
    if kind == DATA:
        _need(view, at + _DATA.size, "a DATA")
        seq, index, count = _DATA.unpack_from(view, at)
        if not 0 < count <= max_segments or index >= count:
            raise DatagramError("segment", f"segment {index} of {count} (most {max_segments})")
        if seq >= _SEQ_LIMIT - count:
            raise DatagramError("sequence", f"sequence number {seq}")
        payload = bytes(view[at + _DATA.size :])
        return Data(stream, stamp, seq, index, count, payload, bool(flags & _FLAG_RETRANSMIT))
    if kind == NAK:
        _need(view, at + _NAK.size, "a NAK")
        target, n = _NAK.unpack_from(view, at)
        if not 0 < n <= MAX_NAK_RANGES:
            raise DatagramError("nak_range", f"{n} ranges (1 to {MAX_NAK_RANGES})")
        at += _NAK.size
        if len(view) != at + n * _RANGE.size:
            raise DatagramError("truncated", f"{len(view)} bytes for {n} NAK ranges")
        ranges = []
        for _ in range(n):
            first, length = _RANGE.unpack_from(view, at)
            at += _RANGE.size
            if not 0 < length <= MAX_NAK_LENGTH or first + length > _SEQ_LIMIT:
                raise DatagramError("nak_range", f"{length} from {first} (1 to {MAX_NAK_LENGTH})")
            ranges.append((first, length))
        return Nak(stream, stamp, target, tuple(ranges))
    if kind == HEARTBEAT:
        _need(view, at + 8, "a HEARTBEAT")
        (next_seq,) = _U64.unpack_from(view, at)
        name, end = _name(view, at + 8)
        if end != len(view) or next_seq > _SEQ_LIMIT:
            raise DatagramError("truncated", "a HEARTBEAT with bytes after its name")
        return Heartbeat(stream, stamp, next_seq, name)
    if kind == LOST:
        if len(view) != at + _LOST.size:
            raise DatagramError("truncated", f"a LOST of {len(view)} bytes")
        first, length = _LOST.unpack_from(view, at)
        if length == 0 or first + length > _SEQ_LIMIT:
            raise DatagramError("sequence", f"LOST {length} from {first}")
        return Lost(stream, stamp, first, length)
    if kind == ANNOUNCE:
        _need(view, at + _ANNOUNCE.size, "an ANNOUNCE")
        as_of, page, pages = _ANNOUNCE.unpack_from(view, at)
        if as_of > _SEQ_LIMIT:
            raise DatagramError("sequence", f"ANNOUNCE as of {as_of}")
        if not 0 < pages <= MAX_SEGMENTS or page >= pages:
            raise DatagramError("segment", f"ANNOUNCE page {page} of {pages}")
        name, end = _name(view, at + _ANNOUNCE.size)
        return Announce(stream, stamp, as_of, name, bytes(view[end:]), page, pages)
    if kind == BYE:
        if len(view) != at + 8:
            raise DatagramError("truncated", f"a BYE of {len(view)} bytes")
        (next_seq,) = _U64.unpack_from(view, at)
        if next_seq > _SEQ_LIMIT:
            raise DatagramError("sequence", f"BYE at {next_seq}")
        return Bye(stream, stamp, next_seq)
    raise DatagramError("kind", f"kind {kind}")
