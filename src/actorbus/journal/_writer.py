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

The writer is not thread-safe: one thread (or one actor) uses it at a time.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from .._log import logger
from ._errors import (
    JournalCorruptError,
    JournalError,
    JournalLockedError,
    JournalUsageError,
)
from ._format import (
    KIND_SEAL,
    MAX_SEQ,
    SEAL_FRAME_BYTES,
    SEGMENT_HEADER,
    PayloadError,
    decode_payload,
    encode_records_frame,
    encode_seal_frame,
    encode_segment_header,
    open_segment_name,
    sealed_segment_name,
)
from ._policy import RecoveryReport, Retention, SyncPolicy, WriterStats
from ._segments import (
    FrameCursor,
    SegmentInfo,
    check_segment_header,
    fsync_directory,
    list_segments,
    read_seal,
)

__all__ = ["LOCK_FILE_NAME", "MIN_SEGMENT_BYTES", "JournalWriter"]

#: the writer's lock file inside the journal directory.
LOCK_FILE_NAME: Final = "writer.lock"
#: the smallest ``segment_bytes`` accepted.
MIN_SEGMENT_BYTES: Final = 512

_TS_MIN: Final = -(1 << 63)
_TS_MAX: Final = (1 << 63) - 1
_STR: Final = frozenset({str})
_INT: Final = frozenset({int})
_BODY: Final = frozenset({bytes, bytearray})
#: bookkeeping bytes counted per buffered record besides its strings and body.
_RECORD_OVERHEAD: Final = 16

_fdatasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


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


@dataclass(slots=True)
class _Sealed:
    first: int
    last: int
    path: Path
    size: int
    newest_ts: int | None


class JournalWriter:
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
            # list comprehensions beat zip(*batch) several times over here
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

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

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

    # --------------------------------------------------------------- segments

    def _open_path(self) -> Path:
        return self._dir / open_segment_name(self._seg_first)

    def _create_open_segment(self, first: int) -> None:
        name = open_segment_name(first)
        tmp = self._dir / f"{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, encode_segment_header(first))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self._dir / name)
        fsync_directory(self._dir)
        self._fd = os.open(self._dir / name, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        self._seg_first = first
        self._seg_size = SEGMENT_HEADER.size
        self._seg_lo = self._seg_hi = None
        self._dirty = False

    def _seal_open_segment(self, lo: int, hi: int, *, write_seal: bool) -> None:
        """Seal the open segment, whose last record is ``_written - 1``."""
        first, last = self._seg_first, self._written - 1
        if write_seal:
            self._write_all(encode_seal_frame(last + 1, lo, hi))
            self._seg_size += SEAL_FRAME_BYTES
        _fdatasync(self._fd)
        self._stats = replace(self._stats, fsyncs=self._stats.fsyncs + 1)
        os.close(self._fd)
        self._fd = -1
        sealed = self._dir / sealed_segment_name(first, last)
        os.rename(self._open_path(), sealed)
        self._sealed.append(_Sealed(first, last, sealed, self._seg_size, hi))
        self._create_open_segment(last + 1)

    def _rotate(self) -> None:
        if self._seg_lo is None or self._seg_hi is None:
            return  # nothing to seal
        try:
            self._seal_open_segment(self._seg_lo, self._seg_hi, write_seal=True)
        except OSError as exc:
            self._failed = f"sealing {self._open_path()} failed ({exc})"
            raise JournalError(
                f"sealing segment {self._open_path()} failed ({exc}); the writer stopped — "
                "close it and open a new JournalWriter, which finishes or undoes the seal"
            ) from exc
        self._stats = replace(self._stats, rotations=self._stats.rotations + 1)
        if self._retention is not None:
            self._apply_retention(self._epoch_ms())

    def _apply_retention(self, now_ms: int) -> list[SegmentInfo]:
        rules = self._retention
        assert rules is not None
        total = sum(s.size for s in self._sealed) + self._seg_size
        deleted: list[SegmentInfo] = []
        while self._sealed:
            oldest = self._sealed[0]
            too_big = rules.max_bytes is not None and total > rules.max_bytes
            too_old = False
            if not too_big and rules.max_age_ms is not None:
                too_old = self._newest_ts(oldest) < now_ms - rules.max_age_ms
            if not (too_big or too_old):
                break
            try:
                os.unlink(oldest.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise JournalError(
                    f"retention could not delete {oldest.path} ({exc}); fix the directory's "
                    "permissions, then call apply_retention() again"
                ) from exc
            del self._sealed[0]
            total -= oldest.size
            deleted.append(SegmentInfo(oldest.first, oldest.last, oldest.path, oldest.size, True))
        if deleted:
            fsync_directory(self._dir)
            self._stats = replace(
                self._stats, segments_deleted=self._stats.segments_deleted + len(deleted)
            )
            logger.info(
                "journal {}: retention deleted {} segment(s), seqs {}..{}; journal starts at {}",
                self._dir,
                len(deleted),
                deleted[0].first_seq,
                deleted[-1].last_seq,
                deleted[-1].last_seq + 1,
            )
        return deleted

    def _newest_ts(self, seg: _Sealed) -> int:
        if seg.newest_ts is None:
            fd = os.open(seg.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                seg.newest_ts = read_seal(fd, seg.path, os.fstat(fd).st_size, seg.last)[1]
            finally:
                os.close(fd)
        return seg.newest_ts

    # ------------------------------------------------------- lock and recovery

    def _lock(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        lock_path = self._dir / LOCK_FILE_NAME
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise JournalLockedError(
                    f"journal {self._dir} already has a writer (lock {lock_path} is held, "
                    f"by pid {holder}); close that JournalWriter first — use a JournalReader "
                    "to read while it writes"
                ) from None
            raise JournalError(f"cannot lock {lock_path} ({exc})") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock_fd = fd

    def _release(self) -> None:
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = -1

    def _recover(self, first_seq: int) -> RecoveryReport:
        for name in os.listdir(self._dir):
            if name.endswith("-open.seg.tmp"):
                os.unlink(self._dir / name)  # a new segment that never got its name
        listed = list_segments(self._dir)
        for seg in listed:
            if seg.last is not None:
                size = os.stat(seg.path).st_size
                self._sealed.append(_Sealed(seg.first, seg.last, seg.path, size, None))
        actions: list[str] = []
        if not listed or listed[-1].last is not None:
            nxt = self._sealed[-1].last + 1 if self._sealed else first_seq
            self._create_open_segment(nxt)
            self._next_seq = self._written = nxt
            if listed:
                actions.append(
                    f"created {self._open_path().name}: only sealed segments were found "
                    "(a crash right after sealing)"
                )
            else:
                logger.info("journal {}: created, first seq {}", self._dir, nxt)
            return self._report(actions)

        seg = listed[-1]
        fd = os.open(seg.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        self._fd = fd
        self._seg_first = seg.first
        check_segment_header(fd, seg.path, seg.first)
        cursor = FrameCursor(fd, SEGMENT_HEADER.size, seg.first)
        sealed_by_crash = False
        while (frame := cursor.next()) is not None:
            assert frame.payload is not None
            if frame.kind == KIND_SEAL:
                sealed_by_crash = True
                break
            try:
                times = decode_payload(frame.payload, frame.count)[2]
            except PayloadError as exc:
                raise JournalCorruptError(
                    f"journal segment {seg.path}: frame at offset {frame.offset} (seq "
                    f"{frame.first_seq}) has a good crc32 but {exc}; this is not a torn write — "
                    "keep the file for a bug report and move it out of the directory",
                    path=str(seg.path),
                ) from exc
            lo, hi = min(times), max(times)
            self._seg_lo = lo if self._seg_lo is None else min(self._seg_lo, lo)
            self._seg_hi = hi if self._seg_hi is None else max(self._seg_hi, hi)
        good_end = cursor.offset
        self._seg_size = good_end
        self._next_seq = self._written = cursor.next_seq
        size = os.fstat(fd).st_size
        truncated_at: int | None = None
        reason = ""
        if size > good_end:
            reason = "bytes after the seal frame" if sealed_by_crash else cursor.detail
            os.ftruncate(fd, good_end)
            _fdatasync(fd)
            truncated_at = good_end
            actions.append(
                f"truncated {size - good_end} bytes of torn tail from {seg.path.name} at "
                f"offset {good_end} ({reason})"
            )
            logger.warning(
                "journal {}: truncated a torn tail of {} bytes at offset {} ({}); "
                "seq continues at {}",
                seg.path,
                size - good_end,
                good_end,
                reason,
                self._next_seq,
            )
        if sealed_by_crash:
            if self._seg_lo is None or self._seg_hi is None:
                raise JournalCorruptError(
                    f"journal segment {seg.path}: ends with a seal frame but holds no record; "
                    "the writer never seals an empty segment — move the file out of the directory",
                    path=str(seg.path),
                )
            old_name = seg.path.name
            self._seal_open_segment(self._seg_lo, self._seg_hi, write_seal=False)
            actions.append(
                f"finished sealing {old_name} as {self._sealed[-1].path.name} and created "
                f"{self._open_path().name} (a crash during rotation)"
            )
            logger.warning("journal {}: {}", self._dir, actions[-1])
        return self._report(actions, truncated_at, size - good_end, reason)

    def _report(
        self,
        actions: list[str],
        truncated_at: int | None = None,
        truncated_bytes: int = 0,
        reason: str = "",
    ) -> RecoveryReport:
        return RecoveryReport(
            segment=self._open_path(),
            next_seq=self._next_seq,
            truncated_at=truncated_at,
            truncated_bytes=truncated_bytes if truncated_at is not None else 0,
            reason=reason,
            actions=tuple(actions),
        )
