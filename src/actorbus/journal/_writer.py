"""The single writer of a journal directory: append, sync, rotate, retain, recover.

Theory of operation
-------------------
Opening takes an exclusive ``flock`` on ``writer.lock`` (a second writer gets
:class:`JournalLockedError`), then recovers: the open segment is scanned frame
by frame, checking every crc32; the first incomplete or damaged frame and
everything after it is a torn tail from a crash, and is truncated, logged and
recorded in :attr:`JournalWriter.recovery`.  Seq continues after the last good
record.  An open segment that already ends with a SEAL frame (a crash during
rotation) is renamed to its sealed name; a directory with only sealed segments
gets a new open segment.  The open segment is never deleted, and its name
carries the next seq, so the next seq survives restarts even after retention
deleted every record — no metadata file is needed.

``append`` buffers records in four column lists; a frame (one ``write``) is
made of whatever is buffered at ``flush``, at ``append_many`` (which adds its
whole batch to the same frame), at ``sync``/``close``, when the buffer reaches
``buffer_bytes``, or when an interval sync falls due.  Readers see a record
once its frame is written.

Before a frame is written, the segment is rotated if the frame would not fit in
``segment_bytes``: a SEAL frame is appended, the file fsynced, renamed from
``F-open.seg`` to ``F-L.seg``, a new open segment created via temp file and
rename, and the directory fsynced; then retention runs.  A crash at any point
leaves a state recovery understands.

An ``OSError`` while writing truncates the partial frame away and raises
:class:`JournalError`; the buffered records stay buffered.  A failed ``fsync``
(after which the kernel may have dropped the data) or a failed rotation poisons
the writer: every later call raises until you close it and open a new one,
which recovers from what is really on disk.

Opening (lock and recovery), rotation and retention, which change the files of the
directory, are in :mod:`._directory` (the base class); this module is the append
path.

The writer is not thread-safe: one thread (or one actor) uses it at a time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from ._directory import LOCK_FILE_NAME, _fdatasync, _JournalDirectory, _Sealed
from ._errors import JournalError, JournalUsageError
from ._format import (
    MAX_SEQ,
    SEAL_FRAME_BYTES,
    SEGMENT_HEADER,
    PayloadError,
    encode_records_frame,
)
from ._policy import RecoveryReport, Retention, SyncPolicy, WriterStats
from ._segments import SegmentInfo

__all__ = ["LOCK_FILE_NAME", "MIN_SEGMENT_BYTES", "JournalWriter"]

#: the smallest ``segment_bytes`` accepted.
MIN_SEGMENT_BYTES: Final = 512

_TS_MIN: Final = -(1 << 63)
_TS_MAX: Final = (1 << 63) - 1
_STR: Final = frozenset({str})
_INT: Final = frozenset({int})
_BODY: Final = frozenset({bytes, bytearray})
#: bookkeeping bytes counted per buffered record besides its strings and body.
_RECORD_OVERHEAD: Final = 16


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def _record_problem(record: Any) -> str | None:
    """Why ``record`` is not a valid ``(type_name, subject, timestamp, body)``."""
    try:
        n = len(record)
    except TypeError:
        return f"is a {type(record).__name__}, expected a 4-tuple"
    if n != 4:
        return f"has {n} items, expected 4 (type_name, subject, timestamp, body)"
    type_name, subject, timestamp, body = record
    for what, value in (("type_name", type_name), ("subject", subject)):
        if type(value) is not str:
            return f"{what} is {type(value).__name__}, expected str"
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"{what} {value!r} cannot be encoded as UTF-8"
    if type(timestamp) is not int:
        return f"timestamp is {type(timestamp).__name__}, expected int (epoch milliseconds)"
    if not _TS_MIN <= timestamp <= _TS_MAX:
        return f"timestamp {timestamp} does not fit in 64 signed bits"
    if type(body) not in _BODY:
        return (
            f"body is {type(body).__name__}, expected bytes "
            "(encode the message with the codec first)"
        )
    return None


class JournalWriter(_JournalDirectory):
    """Appends records to the journal in ``path``; the only writer of that directory.

    Create the directory's first segment (``first_seq`` names the first record
    of a *new* journal; an existing journal continues where it ended and
    ignores it) or recover an existing one — see :attr:`recovery`.  Use it as a
    context manager or call :meth:`close`; until then other writers get
    :class:`JournalLockedError`.

    ``segment_bytes`` is the size at which the open segment is sealed (a
    segment only exceeds it when a single frame is larger).  ``sync`` says when
    to fsync (:class:`SyncPolicy`), ``retention`` which sealed segments to
    delete (:class:`Retention`).  ``buffer_bytes`` bounds what :meth:`append`
    buffers before it writes a frame by itself.  ``monotonic_ns`` (for the
    interval policy) and ``epoch_ms`` (for age retention) are the clocks; pass
    fakes in tests.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        segment_bytes: int = 64 << 20,
        sync: SyncPolicy | None = None,
        retention: Retention | None = None,
        first_seq: int = 1,
        buffer_bytes: int = 1 << 20,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        epoch_ms: Callable[[], int] = _epoch_ms,
    ) -> None:
        sync = SyncPolicy.batch() if sync is None else sync
        if type(segment_bytes) is not int or segment_bytes < MIN_SEGMENT_BYTES:
            raise JournalUsageError(
                f"JournalWriter segment_bytes={segment_bytes!r}: expected an integer "
                f">= {MIN_SEGMENT_BYTES}"
            )
        if not isinstance(sync, SyncPolicy):
            raise JournalUsageError(
                f"JournalWriter sync={sync!r}: expected a SyncPolicy, e.g. SyncPolicy.batch()"
            )
        if retention is not None and not isinstance(retention, Retention):
            raise JournalUsageError(
                f"JournalWriter retention={retention!r}: expected a Retention or None"
            )
        if type(first_seq) is not int or not 1 <= first_seq <= MAX_SEQ:
            raise JournalUsageError(
                f"JournalWriter first_seq={first_seq!r}: expected an integer in 1..{MAX_SEQ}"
            )
        if type(buffer_bytes) is not int or buffer_bytes < 1:
            raise JournalUsageError(
                f"JournalWriter buffer_bytes={buffer_bytes!r}: expected an integer >= 1"
            )
        self._dir = Path(path)
        self._segment_bytes = segment_bytes
        self._sync = sync
        self._interval_ns = sync.interval_ms * 1_000_000
        self._retention = retention
        self._buffer_bytes = buffer_bytes
        self._monotonic_ns = monotonic_ns
        self._epoch_ms = epoch_ms

        self._closed = False
        self._failed = ""
        self._fd = -1
        self._lock_fd = -1
        self._sealed: list[_Sealed] = []
        # the open segment
        self._seg_first = 0
        self._seg_size = 0
        self._seg_lo: int | None = None
        self._seg_hi: int | None = None
        # records buffered by append(): columns; their seqs end at _next_seq
        self._p_types: list[str] = []
        self._p_subjects: list[str] = []
        self._p_times: list[int] = []
        self._p_bodies: list[bytes] = []
        self._p_bytes = 0
        self._next_seq = 0
        # the seq of the first record no frame holds yet: _next_seq - pending
        self._written = 0
        self._dirty = False
        self._last_sync_ns = monotonic_ns()
        self._stats = WriterStats()

        if self._dir.exists() and not self._dir.is_dir():
            raise JournalUsageError(
                f"journal path {self._dir} is a file, not a directory; give a directory "
                "(it is created if missing)"
            )
        try:
            self._lock()
        except OSError as exc:
            raise JournalError(f"cannot open journal {self._dir} for writing ({exc})") from exc
        try:
            #: what opening found and repaired; see :class:`RecoveryReport`.
            self.recovery: RecoveryReport = self._recover(first_seq)
        except OSError as exc:
            self._release()
            raise JournalError(
                f"cannot open journal {self._dir} for writing ({exc}); fix the file system "
                "or permissions and retry"
            ) from exc
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ public

    @property
    def path(self) -> Path:
        """The journal directory."""
        return self._dir

    @property
    def next_seq(self) -> int:
        """The seq the next appended record gets."""
        return self._next_seq

    @property
    def last_seq(self) -> int:
        """The seq of the last appended record (buffered ones included);
        ``next_seq - 1`` — below the first seq while the journal is empty."""
        return self._next_seq - 1

    @property
    def pending(self) -> int:
        """How many records :meth:`append` buffered that no frame holds yet."""
        return len(self._p_times)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def stats(self) -> WriterStats:
        """A snapshot of the writer's counters."""
        return self._stats

    def append(self, type_name: str, subject: str, timestamp: int, body: bytes) -> int:
        """Buffer one record and return its seq.

        The record reaches the file (and readers) at the next :meth:`flush`,
        :meth:`append_many`, :meth:`sync`, :meth:`rotate` or :meth:`close` — or
        at a later ``append`` that finds the buffer holding ``buffer_bytes`` or
        an interval sync due; that write happens *before* the new record is
        taken, so if it raises, the new record was not appended (the buffered
        ones stay buffered).
        """
        self._check_usable()
        if (
            type(type_name) is not str
            or type(subject) is not str
            or type(timestamp) is not int
            or type(body) not in _BODY
            or not (type_name.isascii() and subject.isascii())
            or not _TS_MIN <= timestamp <= _TS_MAX
        ):
            problem = _record_problem((type_name, subject, timestamp, body))
            if problem is not None:
                raise JournalUsageError(
                    f"append() to journal {self._dir}: the record {problem}; nothing was appended"
                )
        seq = self._next_seq
        if seq > MAX_SEQ:
            raise self._exhausted(1)
        if self._p_bytes >= self._buffer_bytes:
            self._write_pending()
        self._sync_if_due()
        self._p_types.append(type_name)
        self._p_subjects.append(subject)
        self._p_times.append(timestamp)
        self._p_bodies.append(body)
        self._next_seq = seq + 1
        self._p_bytes += len(body) + len(type_name) + len(subject) + _RECORD_OVERHEAD
        return seq

    def append_many(self, records: Iterable[tuple[str, str, int, bytes]]) -> range:
        """Append ``(type_name, subject, timestamp, body)`` records as one frame
        (one ``write``, together with anything :meth:`append` buffered) and
        return their seqs.  All or nothing: a bad record raises
        :class:`JournalUsageError` naming it, and nothing is written.
        Under :meth:`SyncPolicy.batch` the records are durable on return.
        """
        self._check_usable()
        batch: Sequence[Any] = records if isinstance(records, list | tuple) else list(records)
        n = len(batch)
        start = self._next_seq
        if n == 0:
            self._write_pending()
            self._sync_if_due()
            return range(start, start)
        if start + n - 1 > MAX_SEQ:
            raise self._exhausted(n)
        types, subjects, times, bodies = self._columns(batch)
        lo, hi = min(times), max(times)
        if not _TS_MIN <= lo <= hi <= _TS_MAX:
            raise self._bad_batch(batch, "has a timestamp out of range")
        if self._p_times:
            types = self._p_types + types
            subjects = self._p_subjects + subjects
            times = self._p_times + times
            bodies = self._p_bodies + bodies
            lo, hi = min(lo, *self._p_times), max(hi, *self._p_times)
        frame = self._encode(self._written, (types, subjects, times, bodies), batch)
        self._write_frame(frame, len(times), lo, hi)
        self._clear_pending()
        self._next_seq = start + n
        self._sync_if_due()
        return range(start, start + n)

    def flush(self) -> None:
        """Write what :meth:`append` buffered as one frame, so readers see it;
        under :meth:`SyncPolicy.batch` also make it durable."""
        self._check_usable()
        self._write_pending()
        self._sync_if_due()

    def sync(self) -> None:
        """Flush, then fsync the open segment whatever the policy: every record
        appended so far survives a power loss once this returns."""
        self._check_usable()
        self._write_pending()
        if self._dirty:
            self._fsync()

    def sync_if_due(self) -> bool:
        """Under :meth:`SyncPolicy.interval`, flush and fsync if the interval
        passed since the last fsync; call it from a timer so records do not
        wait for the next append.  Returns True if it synced.  Other policies:
        does nothing, returns False."""
        self._check_usable()
        return self._sync_if_due()

    def rotate(self) -> None:
        """Flush, then seal the open segment now (if it holds any record) and
        start a new one; retention runs afterwards."""
        self._check_usable()
        self._write_pending()
        self._rotate()

    def apply_retention(self, now_ms: int | None = None) -> list[SegmentInfo]:
        """Delete the sealed segments the :class:`Retention` rules expire, oldest
        first, and return them.  ``now_ms`` (epoch ms) defaults to the clock.
        Rotation runs this by itself; call it from a timer when age matters
        while the journal is idle."""
        self._check_usable()
        if self._retention is None:
            return []
        return self._apply_retention(self._epoch_ms() if now_ms is None else now_ms)

    def close(self) -> None:
        """Flush (and fsync, unless the policy is :meth:`SyncPolicy.os`), then
        release the directory.  Idempotent.  If that last write or fsync fails
        the error propagates, the directory is released all the same and the
        buffered records are lost; after an earlier failure it only releases."""
        if self._closed:
            return
        try:
            if not self._failed:
                self._write_pending()
                if self._dirty and self._sync.mode != "os":
                    self._fsync()
        finally:
            self._release()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("failed" if self._failed else "open")
        return f"<JournalWriter {str(self._dir)!r} next_seq={self._next_seq} {state}>"

    # ---------------------------------------------------------------- checking

    def _check_usable(self) -> None:
        if self._closed:
            raise JournalUsageError(
                f"JournalWriter for {self._dir} is closed; open a new JournalWriter to append"
            )
        if self._failed:
            raise JournalError(
                f"JournalWriter for {self._dir} failed earlier ({self._failed}); close it and "
                "open a new JournalWriter, which recovers what is on disk"
            )

    def _exhausted(self, n: int) -> JournalUsageError:
        return JournalUsageError(
            f"journal {self._dir}: appending {n} record(s) at seq {self._next_seq} would "
            f"pass the largest seq {MAX_SEQ}; start a new journal directory"
        )

    def _bad_batch(self, batch: Sequence[Any], fallback: str) -> JournalUsageError:
        where, problem = "the batch", fallback
        for i, record in enumerate(batch):
            found = _record_problem(record)
            if found is not None:
                where, problem = f"record #{i} of the batch", found
                break
        return JournalUsageError(
            f"append_many() to journal {self._dir}: {where} {problem}; nothing was appended"
        )

    def _columns(self, batch: Sequence[Any]) -> tuple[list[str], list[str], list[int], list[bytes]]:
        """The batch as four columns, type-checked in bulk (C loops over sets of
        types); the per-record slow path only runs to name a bad record."""
        try:
            if set(map(len, batch)) != {4}:
                raise self._bad_batch(batch, "is malformed")
            # list comprehensions beat zip(*batch) here
            types = [r[0] for r in batch]
            subjects = [r[1] for r in batch]
            times = [r[2] for r in batch]
            bodies = [r[3] for r in batch]
        except (TypeError, LookupError):
            raise self._bad_batch(batch, "is malformed") from None
        if not (
            set(map(type, types)) <= _STR
            and set(map(type, subjects)) <= _STR
            and set(map(type, times)) <= _INT
            and set(map(type, bodies)) <= _BODY
        ):
            raise self._bad_batch(batch, "is malformed")
        return types, subjects, times, bodies

    def _encode(
        self,
        first: int,
        columns: tuple[Sequence[str], Sequence[str], Sequence[int], Sequence[bytes]],
        batch: Sequence[Any] = (),
    ) -> bytes:
        try:
            return encode_records_frame(first, *columns)
        except PayloadError as exc:
            raise JournalUsageError(
                f"journal {self._dir}: {exc}; split the batch into smaller append_many() calls"
            ) from None
        except ValueError as exc:  # a str that is not UTF-8 encodable
            raise self._bad_batch(batch, f"cannot be encoded ({exc})") from None

    # ----------------------------------------------------------------- writing

    def _clear_pending(self) -> None:
        self._p_types = []
        self._p_subjects = []
        self._p_times = []
        self._p_bodies = []
        self._p_bytes = 0

    def _write_pending(self) -> None:
        if not self._p_times:
            return
        times = self._p_times  # append() validated these records
        frame = self._encode(
            self._written, (self._p_types, self._p_subjects, times, self._p_bodies)
        )
        self._write_frame(frame, len(times), min(times), max(times))
        self._clear_pending()

    def _write_frame(self, frame: bytes, count: int, lo: int, hi: int) -> None:
        if (
            self._seg_size > SEGMENT_HEADER.size
            and self._seg_size + len(frame) + SEAL_FRAME_BYTES > self._segment_bytes
        ):
            self._rotate()
        try:
            self._write_all(frame)
        except OSError as exc:
            self._undo_partial_write(exc)
            raise JournalError(
                f"writing {count} records to {self._open_path()} failed ({exc}); nothing of "
                "them was kept — free disk space or fix the file system, then retry"
            ) from exc
        self._seg_size += len(frame)
        self._written += count
        self._seg_lo = lo if self._seg_lo is None else min(self._seg_lo, lo)
        self._seg_hi = hi if self._seg_hi is None else max(self._seg_hi, hi)
        self._dirty = True
        s = self._stats
        self._stats = replace(
            s,
            records=s.records + count,
            frames=s.frames + 1,
            bytes_written=s.bytes_written + len(frame),
        )
        if self._sync.mode == "batch":
            self._fsync()

    def _undo_partial_write(self, exc: OSError) -> None:
        try:
            os.ftruncate(self._fd, self._seg_size)
        except OSError as undo_exc:
            self._failed = (
                f"a write failed ({exc}) and truncating the partial frame failed too ({undo_exc})"
            )

    def _fsync(self) -> None:
        try:
            _fdatasync(self._fd)
        except OSError as exc:
            self._failed = f"fsync of {self._open_path()} failed ({exc})"
            raise JournalError(
                f"fsync of {self._open_path()} failed ({exc}); the kernel may have dropped "
                "the data, so the writer stopped — close it and open a new JournalWriter"
            ) from exc
        self._dirty = False
        self._last_sync_ns = self._monotonic_ns()
        self._stats = replace(self._stats, fsyncs=self._stats.fsyncs + 1)

    def _sync_if_due(self) -> bool:
        if self._sync.mode != "interval":
            return False
        if not (self._dirty or self._p_times):
            return False
        if self._monotonic_ns() - self._last_sync_ns < self._interval_ns:
            return False
        self._write_pending()
        self._fsync()
        return True
