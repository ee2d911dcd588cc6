"""Reading segment files: directory listing, header checks, the frame cursor.

Shared by the writer (recovery) and the reader.  Files are read with
``os.pread`` on a plain descriptor — never ``mmap``, because a writer that
recovers a torn tail truncates the open segment, and touching a truncated
mapping kills the reading process with SIGBUS.
"""

from __future__ import annotations

import enum
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from ._errors import JournalCorruptError, JournalError, JournalUsageError
from ._format import (
    FRAME_HEADER,
    KIND_RECORDS,
    KIND_SEAL,
    MAGIC,
    MAX_PAYLOAD_BYTES,
    SEAL_FRAME_BYTES,
    SEGMENT_HEADER,
    FrameHeader,
    PayloadError,
    decode_seal,
    frame_crc,
    parse_segment_name,
)

__all__ = [
    "Frame",
    "FrameCursor",
    "Listed",
    "SegmentInfo",
    "Stop",
    "check_segment_header",
    "fsync_directory",
    "list_segments",
    "read_seal",
]

#: how often a listing that does not form a chain is retried before it is
#: reported: ``readdir`` racing a rename may show a file twice or not at all.
_LIST_ATTEMPTS: Final = 5
#: bytes read ahead when looking for the next frame header while skipping.
_SKIP_READ: Final = 4096
#: bytes read ahead when a frame's payload is needed.
_BULK_READ: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment file of a journal.

    For the open segment, ``last_seq`` is the last *committed* record (complete,
    with a good crc32) when it was listed, ``first_seq - 1`` if it has none yet.
    """

    first_seq: int
    last_seq: int
    path: Path
    size: int
    sealed: bool

    @property
    def count(self) -> int:
        """How many records the segment holds."""
        return self.last_seq - self.first_seq + 1


class Listed(NamedTuple):
    """A segment file as named in the directory: ``last`` is None while open."""

    first: int
    last: int | None
    path: Path


def _chain_problem(segments: list[Listed]) -> str | None:
    for i, seg in enumerate(segments):
        if seg.last is None and i != len(segments) - 1:
            return f"open segment {seg.path.name} is followed by {segments[i + 1].path.name}"
        if seg.last is not None and seg.last < seg.first:
            return f"sealed segment {seg.path.name} ends before it starts"
        if i and segments[i - 1].last is not None:
            expected = segments[i - 1].last + 1  # type: ignore[operator]
            if seg.first != expected:
                return (
                    f"segment {seg.path.name} starts at seq {seg.first} but "
                    f"{segments[i - 1].path.name} ends at seq {expected - 1}"
                )
    return None


def list_segments(directory: Path) -> list[Listed]:
    """The directory's segment files, sorted, checked to form one contiguous chain.

    Files whose names are not segment names are ignored.  When ``readdir``
    catches a rename half-way (both names, or neither) the listing is retried;
    a chain that stays broken is a :class:`JournalCorruptError`.
    """
    problem = ""
    for _ in range(_LIST_ATTEMPTS):
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            raise JournalError(
                f"no journal at {directory}: the directory does not exist; "
                "open a JournalWriter there first, or fix the path"
            ) from None
        except NotADirectoryError:
            raise JournalUsageError(
                f"journal path {directory} is a file, not a directory; give the journal's directory"
            ) from None
        by_first: dict[int, Listed] = {}
        problem = ""
        for name in names:
            parsed = parse_segment_name(name)
            if parsed is None:
                continue
            first, last = parsed
            seen = by_first.get(first)
            if seen is None or (seen.last is None and last is not None):
                by_first[first] = Listed(first, last, directory / name)
            elif last is not None and seen.last != last:
                problem = f"two sealed segments start at seq {first}: {seen.path.name}, {name}"
        segments = [by_first[k] for k in sorted(by_first)]
        problem = problem or _chain_problem(segments) or ""
        if not problem:
            return segments
    raise JournalCorruptError(
        f"journal {directory}: {problem}; the directory was edited by hand or mixes two "
        "journals — move the stray segment files out",
        path=str(directory),
    )


def fsync_directory(directory: Path) -> None:
    """Make creations, renames and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_segment_header(fd: int, path: Path, first_seq: int) -> None:
    """Raise :class:`JournalCorruptError` unless the file starts with the header
    of a segment starting at ``first_seq``."""
    header = os.pread(fd, SEGMENT_HEADER.size, 0)
    if len(header) < SEGMENT_HEADER.size:
        raise JournalCorruptError(
            f"journal segment {path}: only {len(header)} of the {SEGMENT_HEADER.size} "
            "header bytes exist; segments are created complete (temp file + rename), so "
            "something else wrote this file — move it out of the journal directory",
            path=str(path),
        )
    magic, first = SEGMENT_HEADER.unpack(header)
    if magic != MAGIC:
        raise JournalCorruptError(
            f"journal segment {path}: starts with {magic!r}, not the journal magic "
            f"{MAGIC!r} (format version 1); move the file out of the journal directory",
            path=str(path),
        )
    if first != first_seq:
        raise JournalCorruptError(
            f"journal segment {path}: header says first seq {first}, the file name says "
            f"{first_seq}; the file was renamed by hand — restore its name",
            path=str(path),
        )


def read_seal(fd: int, path: Path, size: int, last_seq: int) -> tuple[int, int]:
    """``(oldest, newest)`` record timestamp from a sealed segment's SEAL frame."""
    at = size - SEAL_FRAME_BYTES
    raw = os.pread(fd, SEAL_FRAME_BYTES, at) if at >= SEGMENT_HEADER.size else b""
    problem = ""
    if len(raw) != SEAL_FRAME_BYTES:
        problem = "the file is too short to end with a seal frame"
    else:
        header = FrameHeader._make(FRAME_HEADER.unpack_from(raw))
        if header.kind != KIND_SEAL or header.first_seq != last_seq + 1:
            problem = f"the last {SEAL_FRAME_BYTES} bytes are not a seal frame for seq {last_seq}"
        elif frame_crc(raw[: FRAME_HEADER.size], raw[FRAME_HEADER.size :]) != header.crc:
            problem = "the seal frame has a bad crc32"
        else:
            try:
                return decode_seal(raw[FRAME_HEADER.size :])
            except PayloadError as exc:  # pragma: no cover - length is checked above
                problem = str(exc)
    raise JournalCorruptError(
        f"journal segment {path}: {problem} (file size {size}); sealed segments are "
        "fsynced before they are renamed, so it was damaged afterwards — restore it from "
        "a backup or move it and every older segment out of the directory",
        path=str(path),
    )


class Stop(enum.Enum):
    """Why a :class:`FrameCursor` returned no frame."""

    #: the file ends exactly where a frame would start.
    END = "end of file"
    #: the file ends inside a frame: a write in progress, or a torn tail.
    TORN = "incomplete frame"
    #: a complete frame whose crc32 does not match.
    CRC = "bad crc32"
    #: a frame header that cannot be right (kind, seq, length).
    INVALID = "invalid frame header"


@dataclass(slots=True)
class Frame:
    """One frame found by a :class:`FrameCursor`.

    ``payload`` is None for a frame skipped because all its records lay before
    the wanted seq; such a frame's crc32 was not checked.
    """

    offset: int
    end: int
    first_seq: int
    count: int
    kind: int
    payload: memoryview | None


class FrameCursor:
    """Walks the frames of one segment file, starting at a frame boundary.

    ``offset`` and ``next_seq`` always describe the next frame expected; after
    :meth:`next` returns None, ``stop`` and ``detail`` say why, and ``offset``
    is where the good frames end.
    """

    def __init__(self, fd: int, offset: int, next_seq: int) -> None:
        self.fd = fd
        self.offset = offset
        self.next_seq = next_seq
        self.stop: Stop | None = None
        self.detail = ""
        self._buf = memoryview(b"")
        self._buf_at = offset

    def _read(self, at: int, n: int, ahead: int) -> memoryview:
        rel = at - self._buf_at
        if rel < 0 or rel + n > len(self._buf):
            self._buf = memoryview(os.pread(self.fd, max(n, ahead), at))
            self._buf_at = at
            rel = 0
        return self._buf[rel : rel + n]

    def _halt(self, stop: Stop, detail: str) -> None:
        self.stop = stop
        self.detail = f"{stop.value} at offset {self.offset} (seq {self.next_seq}): {detail}"

    def skip_before(self, seq: int) -> None:
        """Hop over whole RECORDS frames whose records all come before ``seq``,
        reading only their headers (a tight loop: a reader starting in the
        middle of a segment of small frames hops many).  Stops at the first
        frame that is wanted or looks wrong; :meth:`next` then reads or judges it."""
        unpack = FRAME_HEADER.unpack_from
        size = FRAME_HEADER.size
        pos, nseq = self.offset, self.next_seq
        buf, buf_at = self._buf, self._buf_at
        while self.stop is None:
            rel = pos - buf_at
            if rel < 0 or rel + size > len(buf):
                buf, buf_at, rel = memoryview(os.pread(self.fd, _SKIP_READ, pos)), pos, 0
                if len(buf) < size:
                    break
            _, length, first, count, kind = unpack(buf, rel)
            if (
                kind != KIND_RECORDS
                or first != nseq
                or count == 0
                or first + count > seq
                or length > MAX_PAYLOAD_BYTES
            ):
                break
            pos += size + length
            nseq = first + count
        self.offset, self.next_seq = pos, nseq
        self._buf, self._buf_at = buf, buf_at

    def skip_checked(self) -> None:
        """Advance over every complete RECORDS frame with a good crc32 — what
        :meth:`next` would return one by one, in a tight loop, without decoding.
        Stops at the end, a SEAL frame, or the first frame that is not good."""
        unpack = FRAME_HEADER.unpack_from
        size = FRAME_HEADER.size
        crc32 = zlib.crc32
        pos, nseq = self.offset, self.next_seq
        buf, buf_at = self._buf, self._buf_at
        while self.stop is None:
            rel = pos - buf_at
            if rel < 0 or rel + size > len(buf):
                buf, buf_at, rel = memoryview(os.pread(self.fd, _BULK_READ, pos)), pos, 0
                if len(buf) < size:
                    break
            crc, length, first, count, kind = unpack(buf, rel)
            if kind != KIND_RECORDS or first != nseq or count == 0 or length > MAX_PAYLOAD_BYTES:
                break
            end = rel + size + length
            if end > len(buf):
                buf = memoryview(os.pread(self.fd, max(_BULK_READ, size + length), pos))
                buf_at, rel, end = pos, 0, size + length
                if end > len(buf):
                    break
            if crc32(buf[rel + size : end], crc32(buf[rel + 4 : rel + size])) != crc:
                break
            pos += size + length
            nseq = first + count
        self.offset, self.next_seq = pos, nseq
        self._buf, self._buf_at = buf, buf_at

    def next(self, wanted_from: int = 0) -> Frame | None:
        """The next frame, or None when there is no further good frame.

        A RECORDS frame whose records all come before seq ``wanted_from`` is
        skipped: only its header is read and checked.
        """
        if self.stop is not None:
            return None
        pos = self.offset
        header = self._read(pos, FRAME_HEADER.size, _SKIP_READ)
        if len(header) < FRAME_HEADER.size:
            if header:
                self._halt(Stop.TORN, f"{len(header)} of {FRAME_HEADER.size} header bytes")
            else:
                self._halt(Stop.END, "no more bytes")
            return None
        crc, length, first, count, kind = FRAME_HEADER.unpack(header)
        problem = ""
        if kind == KIND_RECORDS:
            if count == 0:
                problem = "records frame with 0 records"
        elif kind == KIND_SEAL:
            if count != 0 or length != SEAL_FRAME_BYTES - FRAME_HEADER.size:
                problem = f"seal frame with count {count} and length {length}"
        else:
            problem = f"unknown frame kind {kind}"
        if not problem and first != self.next_seq:
            problem = f"frame starts at seq {first}"
        if not problem and length > MAX_PAYLOAD_BYTES:
            problem = f"payload length {length} exceeds {MAX_PAYLOAD_BYTES}"
        if problem:
            self._halt(Stop.INVALID, problem)
            return None
        end = pos + FRAME_HEADER.size + length
        payload: memoryview | None = None
        if kind != KIND_RECORDS or first + count > wanted_from:
            header = memoryview(bytes(header))  # the next read may replace the buffer
            payload = self._read(pos + FRAME_HEADER.size, length, _BULK_READ)
            if len(payload) < length:
                self._halt(Stop.TORN, f"{len(payload)} of {length} payload bytes")
                return None
            if frame_crc(header, payload) != crc:
                self._halt(Stop.CRC, f"frame of {count} records, {length} payload bytes")
                return None
        self.offset = end
        self.next_seq = first + count
        return Frame(pos, end, first, count, kind, payload)
