"""The journal writer's hold on its directory: lock, recovery, sealing, retention.

:class:`_JournalDirectory` is the base class of :class:`~._writer.JournalWriter`
holding everything the writer does to segment *files* rather than to records:

* opening takes an exclusive ``flock`` on ``writer.lock`` (a second writer gets
  :class:`JournalLockedError`), then recovers: the open segment is scanned frame by
  frame, a torn tail is truncated, and an open segment that already ends with a SEAL
  frame (a crash during rotation) is renamed to its sealed name;
* rotation appends a SEAL frame, fsyncs, renames ``F-open.seg`` to ``F-L.seg``,
  creates the next open segment via temp file and rename and fsyncs the directory;
* retention deletes the oldest sealed segments the :class:`Retention` rules expire.

It is separate from the append path (:mod:`._writer`: buffering records, writing
frames, fsync policies) because it changes which files exist, and each of its steps
must leave a state that recovery understands.  Its state is the writer's own
attributes (declared below, set by ``JournalWriter.__init__``), so the append path
reaches them without an indirection.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from .._files import HeldBy, lock_with_pid
from .._log import logger
from ._errors import JournalCorruptError, JournalError, JournalLockedError
from ._format import (
    KIND_SEAL,
    SEAL_FRAME_BYTES,
    SEGMENT_HEADER,
    PayloadError,
    decode_payload,
    encode_seal_frame,
    encode_segment_header,
    open_segment_name,
    sealed_segment_name,
)
from ._policy import RecoveryReport, Retention, WriterStats
from ._segments import (
    FrameCursor,
    SegmentInfo,
    check_segment_header,
    fsync_directory,
    list_segments,
    read_seal,
)

#: the writer's lock file inside the journal directory.
LOCK_FILE_NAME: Final = "writer.lock"

_fdatasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


@dataclass(slots=True)
class _Sealed:
    first: int
    last: int
    path: Path
    size: int
    newest_ts: int | None


class _JournalDirectory:
    """The segment files of one :class:`~._writer.JournalWriter` (its base class)."""

    _dir: Path
    _retention: Retention | None
    _epoch_ms: Callable[[], int]
    _closed: bool
    #: why the writer stopped ("" while it works); see ``JournalWriter._check_usable``.
    _failed: str
    _fd: int
    _lock_fd: int
    _sealed: list[_Sealed]
    # the open segment
    _seg_first: int
    _seg_size: int
    _seg_lo: int | None
    _seg_hi: int | None
    _next_seq: int
    #: the seq of the first record no frame holds yet
    _written: int
    _dirty: bool
    _stats: WriterStats

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

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
        try:
            self._lock_fd = lock_with_pid(lock_path, 0o644)
        except HeldBy as held:
            raise JournalLockedError(
                f"journal {self._dir} already has a writer (lock {lock_path} is held, "
                f"by pid {held.holder}); close that JournalWriter first — use a JournalReader "
                "to read while it writes"
            ) from None
        except OSError as exc:
            raise JournalError(f"cannot lock {lock_path} ({exc})") from exc

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
