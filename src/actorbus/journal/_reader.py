"""Reading a journal directory by seq ranges, from the files alone.

Theory of operation
-------------------
A reader holds no lock and shares nothing with the writer: each call lists the
directory, picks the segments whose names cover the range (sealed names carry
first and last seq; the open one its first), and walks their frames with
``pread``.  Frames wholly before the range are skipped by their headers; every
frame whose records are returned has its crc32 checked.

In the open segment, the first frame that is incomplete, fails its crc32 or
does not carry the expected seq is where *committed* data ends — the writer may
be writing it right now — so reading stops there, silently.  In a sealed
segment the same finding is damage and raises :class:`JournalCorruptError`.

The writer may seal the open segment (rename) or retention may delete a sealed
one while a reader works: an open descriptor keeps reading the same file, a
name that vanished makes the reader list again, and a range that now starts
below the first segment raises :class:`RecordsDeletedError`.

The reader remembers, per open segment, how far it already checked the frames,
so polling :meth:`JournalReader.end_seq` costs only the new bytes.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Generator, Iterator
from itertools import repeat
from pathlib import Path
from typing import Final, NamedTuple, TypedDict, cast

from ._errors import JournalCorruptError, JournalError, JournalUsageError, RecordsDeletedError
from ._format import (
    KIND_SEAL,
    MAX_SEQ,
    SEGMENT_HEADER,
    ColumnData,
    PayloadError,
    decode_payload,
)
from ._segments import (
    FrameCursor,
    Listed,
    SegmentInfo,
    check_segment_header,
    list_segments,
)

__all__ = ["Columns", "JournalReader", "Record"]

#: consecutive times a listed segment may vanish before a read gives up.
_VANISH_LIMIT: Final = 100


class Record(NamedTuple):
    """One journal record."""

    seq: int
    type_name: str
    subject: str
    #: epoch milliseconds, as given to the writer.
    timestamp: int
    #: the message's encoded bytes, opaque to the journal.
    body: bytes


class Columns(TypedDict):
    """Records as five equally long lists — the columnar fast path."""

    seq: list[int]
    type_name: list[str]
    subject: list[str]
    timestamp: list[int]
    body: list[bytes]


def _empty_columns() -> Columns:
    return {"seq": [], "type_name": [], "subject": [], "timestamp": [], "body": []}


def _extend(out: Columns, first: int, cols: ColumnData) -> None:
    out["seq"].extend(range(first, first + len(cols[2])))
    out["type_name"].extend(cols[0])
    out["subject"].extend(cols[1])
    out["timestamp"].extend(cols[2])
    out["body"].extend(cols[3])


_SegmentRead = Generator[tuple[int, ColumnData], None, tuple[int, bool]]


class JournalReader:
    """Reads the journal in directory ``path``; any number may run, in any process.

    Seqs are read as half-open ranges ``[start, end)``: ``end`` is exclusive,
    and :meth:`end_seq` (last committed seq + 1) is the natural end and the
    next start.  Only complete, crc-checked records are returned.
    Constructing a reader touches no file; methods raise :class:`JournalError`
    if the directory holds no journal.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._dir = Path(path)
        # open segment first seq -> (offset, next seq) its checked frames end at
        self._checked: dict[int, tuple[int, int]] = {}

    @property
    def path(self) -> Path:
        """The journal directory."""
        return self._dir

    def __repr__(self) -> str:
        return f"<JournalReader {str(self._dir)!r}>"

    # ---------------------------------------------------------------- queries

    def segments(self) -> list[SegmentInfo]:
        """The segment files, oldest first; the last one is usually open."""
        for _ in range(_VANISH_LIMIT):
            listed = self._listing()
            infos: list[SegmentInfo] = []
            for seg in listed:
                try:
                    if seg.last is None:
                        end = self._committed_end(seg)
                        if end is None:
                            break
                        size = os.stat(seg.path).st_size  # after the scan: covers `end`
                        infos.append(SegmentInfo(seg.first, end - 1, seg.path, size, False))
                    else:
                        size = os.stat(seg.path).st_size
                        infos.append(SegmentInfo(seg.first, seg.last, seg.path, size, True))
                except FileNotFoundError:
                    break
            else:
                return infos
        raise self._vanishing()

    def first_seq(self) -> int:
        """The seq of the oldest record still in the journal (the journal's
        start; while it is empty, the seq its first record will get)."""
        return self._listing()[0].first

    def end_seq(self) -> int:
        """Last committed seq + 1: the exclusive end of what can be read now."""
        for _ in range(_VANISH_LIMIT):
            last = self._listing()[-1]
            if last.last is not None:
                return last.last + 1
            end = self._committed_end(last)
            if end is not None:
                return end
        raise self._vanishing()

    def last_seq(self) -> int:
        """The seq of the last committed record (``first_seq() - 1`` when empty)."""
        return self.end_seq() - 1

    # ---------------------------------------------------------------- reading

    def read(self, start: int, end: int | None = None) -> Iterator[Record]:
        """The committed records with ``start <= seq < end``, in seq order.

        ``end=None`` reads to the end of what is committed.  Fewer than
        ``end - start`` records come back when the journal does not reach
        ``end`` yet.  Raises :class:`RecordsDeletedError` (when iterated) if
        retention already deleted ``start``.
        """
        return self._records(*self._check_range(start, end))

    def read_columns(self, start: int, end: int | None = None) -> Columns:
        """Like :meth:`read`, as one :class:`Columns` batch: the fast path."""
        out = _empty_columns()
        for first, cols in self._frames(*self._check_range(start, end)):
            _extend(out, first, cols)
        return out

    def iter_columns(
        self, start: int, end: int | None = None, *, max_records: int = 65536
    ) -> Iterator[Columns]:
        """Like :meth:`read_columns`, in batches of at most ``max_records``."""
        if type(max_records) is not int or max_records < 1:
            raise JournalUsageError(
                f"iter_columns() max_records={max_records!r}: expected an integer >= 1"
            )
        return self._column_batches(*self._check_range(start, end), max_records)

    # -------------------------------------------------------------- internals

    def _check_range(self, start: int, end: int | None) -> tuple[int, int]:
        if type(start) is not int or not 1 <= start <= MAX_SEQ + 1:
            raise JournalUsageError(
                f"read of journal {self._dir}: start={start!r}: expected an integer seq in "
                f"1..{MAX_SEQ + 1} (use first_seq() to start at the beginning)"
            )
        if end is None:
            return start, MAX_SEQ + 1
        if type(end) is not int or end < start:
            raise JournalUsageError(
                f"read of journal {self._dir}: end={end!r} with start={start}: expected an "
                "integer >= start (end is exclusive), or None for everything committed"
            )
        return start, end

    def _records(self, start: int, end: int) -> Iterator[Record]:
        new = tuple.__new__
        for first, (types, subjects, times, bodies) in self._frames(start, end):
            rows = zip(
                range(first, first + len(times)), types, subjects, times, bodies, strict=True
            )
            yield from cast(Iterator[Record], map(new, repeat(Record), rows))

    def _column_batches(self, start: int, end: int, max_records: int) -> Iterator[Columns]:
        out = _empty_columns()
        for first, cols in self._frames(start, end):
            at, n = 0, len(cols[2])
            while at < n:
                take = min(n - at, max_records - len(out["seq"]))
                part = (
                    cols if take == n else cast(ColumnData, tuple(c[at : at + take] for c in cols))
                )
                _extend(out, first + at, part)
                at += take
                if len(out["seq"]) == max_records:
                    yield out
                    out = _empty_columns()
        if out["seq"]:
            yield out

    def _listing(self) -> list[Listed]:
        listed = list_segments(self._dir)
        if not listed:
            raise JournalError(
                f"no journal at {self._dir}: the directory holds no segment files; open a "
                "JournalWriter there first, or fix the path"
            )
        return listed

    def _vanishing(self) -> JournalError:
        return JournalError(
            f"journal {self._dir}: segment files kept vanishing while being read "
            f"({_VANISH_LIMIT} times in a row); is something else deleting them?"
        )

    def _deleted(self, start: int, first: int) -> RecordsDeletedError:
        return RecordsDeletedError(
            f"journal {self._dir}: records from seq {start} to {first - 1} were deleted by "
            f"retention; the journal now starts at seq {first} — resume from first_seq(), "
            "or keep more with a larger Retention",
            requested=start,
            first_seq=first,
        )

    def _listing_from(self, seq: int) -> list[Listed]:
        """A listing that still holds ``seq``; listed twice before concluding
        the records are gone, since a listing can race a rename."""
        listed = self._listing()
        if seq < listed[0].first:
            listed = self._listing()
            if seq < listed[0].first:
                raise self._deleted(seq, listed[0].first)
        return listed

    def _committed_end(self, seg: Listed) -> int | None:
        """End seq of the checked frames of open segment ``seg``; None if the
        file is gone (it was sealed: list again)."""
        try:
            fd = os.open(seg.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            offset, nseq = self._checked.get(seg.first, (0, seg.first))
            if offset == 0:
                check_segment_header(fd, seg.path, seg.first)
                offset = SEGMENT_HEADER.size
            cursor = FrameCursor(fd, offset, nseq)
            cursor.skip_checked()
        finally:
            os.close(fd)
        self._remember(seg.first, cursor.offset, cursor.next_seq)
        return cursor.next_seq

    def _remember(self, first: int, offset: int, next_seq: int) -> None:
        known = self._checked.get(first)
        if known is None:
            for old in [k for k in self._checked if k < first]:
                del self._checked[old]  # segments sealed since
        if known is None or known[1] < next_seq:
            self._checked[first] = (offset, next_seq)

    def _frames(self, start: int, end: int) -> Iterator[tuple[int, ColumnData]]:
        """Decoded frames (first seq, columns), cut to ``[start, end)``."""
        if start >= end:
            return
        listed = self._listing_from(start)
        seq = start
        vanished = 0
        while seq < end:
            i = bisect.bisect_right([s.first for s in listed], seq) - 1
            seg = listed[i]
            if seg.last is not None and seq > seg.last:
                return  # past the last sealed segment and no open one listed yet
            try:
                fd = os.open(seg.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                vanished += 1
                if vanished > _VANISH_LIMIT:
                    raise self._vanishing() from None
                listed = self._listing_from(seq)
                continue
            vanished = 0
            try:
                seq, more = yield from self._segment_frames(fd, seg, seq, end)
            finally:
                os.close(fd)
            if not more:
                return
            if seg.last is None:
                listed = self._listing_from(seq)  # it was sealed while we read

    def _segment_frames(self, fd: int, seg: Listed, start: int, end: int) -> _SegmentRead:
        """Frames of one segment file; returns (next seq, whether a later
        segment may continue the range)."""
        offset, nseq = SEGMENT_HEADER.size, seg.first
        if seg.last is None and (known := self._checked.get(seg.first)) and known[1] <= start:
            offset, nseq = known
        else:
            check_segment_header(fd, seg.path, seg.first)
        cursor = FrameCursor(fd, offset, nseq)
        cursor.skip_before(start)
        while cursor.next_seq < end:
            frame = cursor.next(start)
            if frame is None:
                if seg.last is not None:
                    raise JournalCorruptError(
                        f"journal segment {seg.path}: {cursor.detail}, inside a sealed segment; "
                        "sealed segments are fsynced before they are renamed, so the file was "
                        "damaged afterwards — restore it from a backup",
                        path=str(seg.path),
                    )
                return cursor.next_seq, False  # the committed end of the open segment
            if frame.kind == KIND_SEAL:
                return cursor.next_seq, True
            if frame.payload is None:
                continue
            if seg.last is None:
                self._remember(seg.first, frame.end, cursor.next_seq)
            try:
                cols = decode_payload(frame.payload, frame.count)
            except PayloadError as exc:
                raise JournalCorruptError(
                    f"journal segment {seg.path}: frame at offset {frame.offset} (seq "
                    f"{frame.first_seq}) has a good crc32 but {exc}; keep the file for a bug "
                    "report",
                    path=str(seg.path),
                ) from exc
            lo = start - frame.first_seq if start > frame.first_seq else 0
            hi = min(end - frame.first_seq, frame.count)
            if lo or hi < frame.count:
                cols = cast(ColumnData, tuple(c[lo:hi] for c in cols))
            yield frame.first_seq + lo, cols
        return cursor.next_seq, True
