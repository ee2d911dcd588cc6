"""The journal's on-disk format: file names, segment header, frames. Pure, no I/O.

Everything here turns values into bytes or bytes into values; nothing opens a
file.  ``_segments`` does the reading, ``_writer`` the writing.  docs/journal.md
describes the same bytes for people.

* A **segment** file is named ``{first:020d}-open.seg`` while the writer appends
  to it and ``{first:020d}-{last:020d}.seg`` once sealed.  It starts with a
  16-byte header: the 8-byte magic ``ABJRNL\\0\\1`` (format version 1) and the
  segment's first seq as u64 little-endian.
* After the header come **frames**, back to back.  A frame is a 24-byte header
  ``<IIQII``: crc32, payload length, first seq, record count, kind — then the
  payload.  The crc32 covers the header bytes after the crc field *and* the
  payload, so a frame that was only partly written (a torn tail) or damaged is
  detected.
* A ``RECORDS`` frame's payload is one msgpack array of four equally long
  arrays — the *columns* type names (str), subjects (str), timestamps (int),
  bodies (bin).  Record ``i`` of the frame has seq ``first + i``.  Columnar
  storage makes encoding one C call per batch and hands a reader its columns
  with no per-record work.
* A ``SEAL`` frame closes a segment: count 0, first seq = the segment's last
  seq + 1, payload ``<qq`` (oldest and newest record timestamp, used by age
  retention).  Only a sealed segment ends with one.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Sequence
from typing import Final, NamedTuple, TypeAlias

import msgpack

__all__ = [
    "FRAME_HEADER",
    "KIND_RECORDS",
    "KIND_SEAL",
    "MAGIC",
    "MAX_PAYLOAD_BYTES",
    "MAX_SEQ",
    "SEAL_FRAME_BYTES",
    "SEGMENT_HEADER",
    "ColumnData",
    "FrameHeader",
    "PayloadError",
    "decode_payload",
    "decode_seal",
    "encode_records_frame",
    "encode_seal_frame",
    "encode_segment_header",
    "frame_crc",
    "open_segment_name",
    "parse_segment_name",
    "sealed_segment_name",
]

#: 6-byte tag + 2-byte format version.
MAGIC: Final = b"ABJRNL\x00\x01"
#: magic, first seq.
SEGMENT_HEADER: Final = struct.Struct("<8sQ")
#: crc32, payload length, first seq, record count, kind.
FRAME_HEADER: Final = struct.Struct("<IIQII")
_CRC: Final = struct.Struct("<I")
#: the header without its crc field: what the crc covers before the payload.
_FRAME_TAIL: Final = struct.Struct("<IQII")
_SEAL_PAYLOAD: Final = struct.Struct("<qq")
SEAL_FRAME_BYTES: Final = FRAME_HEADER.size + _SEAL_PAYLOAD.size

KIND_RECORDS: Final = 1
KIND_SEAL: Final = 2

#: a frame payload larger than this is refused by the writer and treated as
#: damage by readers (from the length prefix, before reading the payload).
MAX_PAYLOAD_BYTES: Final = 1 << 30
#: sequence numbers live in 1 .. MAX_SEQ (they are stored as u64, kept i64-safe).
MAX_SEQ: Final = (1 << 63) - 1

_OPEN_RE: Final = re.compile(r"(\d{20})-open\.seg")
_SEALED_RE: Final = re.compile(r"(\d{20})-(\d{20})\.seg")

#: The four record columns: type names, subjects, timestamps, bodies.
ColumnData: TypeAlias = tuple[list[str], list[str], list[int], list[bytes]]


class PayloadError(ValueError):
    """A frame payload with a valid crc32 does not hold the promised columns."""


class FrameHeader(NamedTuple):
    """The fields of a frame header, as stored."""

    crc: int
    length: int
    first_seq: int
    records: int
    kind: int


# ------------------------------------------------------------------------- names


def open_segment_name(first_seq: int) -> str:
    """File name of the open segment starting at ``first_seq``."""
    return f"{first_seq:020d}-open.seg"


def sealed_segment_name(first_seq: int, last_seq: int) -> str:
    """File name of the sealed segment holding ``first_seq .. last_seq``."""
    return f"{first_seq:020d}-{last_seq:020d}.seg"


def parse_segment_name(name: str) -> tuple[int, int | None] | None:
    """``(first, last)`` for a sealed name, ``(first, None)`` for an open one, else None."""
    m = _SEALED_RE.fullmatch(name)
    if m is not None:
        return int(m.group(1)), int(m.group(2))
    m = _OPEN_RE.fullmatch(name)
    if m is not None:
        return int(m.group(1)), None
    return None


# ----------------------------------------------------------------------- encoding


def encode_segment_header(first_seq: int) -> bytes:
    """The 16 bytes every segment file starts with."""
    return SEGMENT_HEADER.pack(MAGIC, first_seq)


def frame_crc(header: bytes | memoryview, payload: bytes | memoryview) -> int:
    """crc32 of a frame: the header after its crc field, then the payload."""
    return zlib.crc32(payload, zlib.crc32(header[4:]))


def _frame(first_seq: int, count: int, kind: int, payload: bytes) -> bytes:
    tail = _FRAME_TAIL.pack(len(payload), first_seq, count, kind)
    crc = zlib.crc32(payload, zlib.crc32(tail))
    return b"".join((_CRC.pack(crc), tail, payload))


def encode_records_frame(
    first_seq: int,
    type_names: Sequence[str],
    subjects: Sequence[str],
    timestamps: Sequence[int],
    bodies: Sequence[bytes | bytearray | memoryview],
) -> bytes:
    """One complete RECORDS frame.  The columns must be equally long and valid
    (the writer checks them); raises :class:`PayloadError` if the payload would
    exceed :data:`MAX_PAYLOAD_BYTES`."""
    payload = msgpack.packb((type_names, subjects, timestamps, bodies))
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise PayloadError(
            f"{len(timestamps)} records encode to {len(payload)} bytes, more than "
            f"the {MAX_PAYLOAD_BYTES}-byte frame limit"
        )
    return _frame(first_seq, len(timestamps), KIND_RECORDS, payload)


def encode_seal_frame(next_seq: int, min_timestamp: int, max_timestamp: int) -> bytes:
    """The SEAL frame that ends a segment whose last seq is ``next_seq - 1``."""
    return _frame(next_seq, 0, KIND_SEAL, _SEAL_PAYLOAD.pack(min_timestamp, max_timestamp))


# ----------------------------------------------------------------------- decoding


def decode_payload(payload: bytes | memoryview, count: int) -> ColumnData:
    """The four columns of a RECORDS payload whose crc32 was already checked.

    Raises :class:`PayloadError` if the bytes are not four arrays of ``count``
    values — which a correct writer never produces.
    """
    try:
        columns = msgpack.unpackb(payload)
    except (ValueError, msgpack.UnpackException) as exc:
        raise PayloadError(f"payload is not valid msgpack: {exc}") from exc
    if (
        type(columns) is not list
        or len(columns) != 4
        or any(type(c) is not list or len(c) != count for c in columns)
    ):
        raise PayloadError(f"payload is not 4 columns of {count} values")
    return columns[0], columns[1], columns[2], columns[3]


def decode_seal(payload: bytes | memoryview) -> tuple[int, int]:
    """``(oldest, newest)`` record timestamp from a SEAL payload."""
    if len(payload) != _SEAL_PAYLOAD.size:
        raise PayloadError(f"seal payload has {len(payload)} bytes, expected {_SEAL_PAYLOAD.size}")
    lo, hi = _SEAL_PAYLOAD.unpack(payload)
    return int(lo), int(hi)
