"""The persistent publisher log: a QoS feed's messages in a journal directory.

Theory of operation
-------------------
A persistent :class:`~actorbus.qos.QosPublisher` keeps what it published in a
:class:`JournalLog`: one :class:`~actorbus.journal.JournalWriter` and one
:class:`~actorbus.journal.JournalReader` on the same directory.  Each message
is one journal record ``(type_name, subject, timestamp, body)`` with ``body``
the message encoded by :func:`actorbus.bus.codec.encode` — exactly what the
:class:`~actorbus.spark.Recorder` writes, so the Spark source reads a
persistent feed's history as it reads a recording.  The journal's seq is the
feed's seq, so it continues after a restart, and retention (not the
consumers) decides what is kept: :meth:`JournalLog.release` does nothing.

**Committed.**  :meth:`~JournalLog.append` buffers; :meth:`~JournalLog.commit`
writes what was buffered as one frame and fsyncs per the
:class:`~actorbus.journal.SyncPolicy`.  :meth:`~JournalLog.read` returns only
committed records, and returns them from a bounded in-memory **tail** of the
most recently committed ones when the range starts there, so sessions that
keep up never touch the disk; older ranges are read through the reader.

**Durable.**  ``commit()`` returns the last seq that survives what the policy
promises: with ``batch`` (the default) and ``os``, everything it wrote
(``os`` promises only a process crash); with ``interval(ms)``, everything up
to the last fsync — a later ``commit()`` (call it from a timer of about the
interval) advances it.

**Owning the directory.**  A persistent feed owns its journal: opening one
whose records are of another type or subject (checked on the first and the
last record) is refused, as is a directory another writer holds.

**Time positions.**  :meth:`~JournalLog.seq_at_time` finds the first record at
or after a time without reading the journal through: the sealed segments'
SEAL frames carry each segment's newest timestamp (see docs/journal.md, *The
bytes*), so a binary search over the segments picks one, and a binary search
over its seqs (one record read per probe) finds the record.  Timestamps are
the publisher's clock at publish; the search assumes they do not go back (a
clock stepped back makes it return a seq near the step).

The log is used from its publisher actor's dispatcher only, one callback at a
time, so it needs no lock (the writer is not thread-safe either).
"""

from __future__ import annotations

import bisect
import os
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ..journal import (
    JournalLockedError,
    JournalReader,
    JournalUsageError,
    JournalWriter,
    RecordsDeletedError,
    Retention,
    SegmentInfo,
    SyncPolicy,
)

__all__ = ["JournalLog"]

#: the most recently committed records kept in memory for :meth:`JournalLog.read`.
DEFAULT_TAIL_RECORDS: Final = 8192
#: ... and at most this many body bytes of them.
DEFAULT_TAIL_BYTES: Final = 8 << 20
#: how often, at most, ``commit`` applies an age retention while records age.
_RETENTION_EVERY_NS: Final = 10_000_000_000

# The SEAL frame ending a sealed segment (docs/journal.md, "The bytes"): a
# 24-byte frame header (crc32, length 16, first seq = last + 1, count 0,
# kind 2), then the oldest and newest record timestamps.
_SEAL_HEADER: Final = struct.Struct("<IIQII")
_SEAL_PAYLOAD: Final = struct.Struct("<qq")
_SEAL_BYTES: Final = _SEAL_HEADER.size + _SEAL_PAYLOAD.size
_KIND_SEAL: Final = 2


def _newest_from_seal(info: SegmentInfo) -> int | None:
    """The newest record timestamp from a sealed segment's SEAL frame, or None
    if the file does not end with a good one."""
    try:
        fd = os.open(info.path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        raw = os.pread(fd, _SEAL_BYTES, size - _SEAL_BYTES) if size >= _SEAL_BYTES else b""
    finally:
        os.close(fd)
    if len(raw) != _SEAL_BYTES:
        return None
    crc, length, first, count, kind = _SEAL_HEADER.unpack_from(raw)
    if (
        kind != _KIND_SEAL
        or count != 0
        or length != _SEAL_PAYLOAD.size
        or first != info.last_seq + 1
        or zlib.crc32(raw[4:]) != crc
    ):
        return None
    return int(_SEAL_PAYLOAD.unpack_from(raw, _SEAL_HEADER.size)[1])


class JournalLog:
    """The publisher log of a persistent QoS feed, in journal directory ``path``.

    Records are ``(type_name, subject, timestamp, body)``; ``sync`` and
    ``retention`` go to the :class:`~actorbus.journal.JournalWriter`, as do
    ``segment_bytes``.  ``tail_records`` and ``tail_bytes`` bound the
    in-memory tail of recently committed records that :meth:`read` serves from.

    Raises :class:`~actorbus.journal.JournalLockedError` if another writer
    holds the directory and :class:`~actorbus.journal.JournalUsageError` if it
    holds another feed's records.  Call :meth:`close` when done.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        type_name: str,
        subject: str,
        sync: SyncPolicy = SyncPolicy.batch(),  # noqa: B008 - a frozen value
        retention: Retention | None = None,
        segment_bytes: int = 64 << 20,
        tail_records: int = DEFAULT_TAIL_RECORDS,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if type(type_name) is not str or not type_name:
            raise JournalUsageError(
                f"JournalLog type_name={type_name!r}: expected the message type's name"
            )
        if type(subject) is not str or not subject:
            raise JournalUsageError(f"JournalLog subject={subject!r}: expected the feed's subject")
        for name, value in (("tail_records", tail_records), ("tail_bytes", tail_bytes)):
            if type(value) is not int or value < 1:
                raise JournalUsageError(f"JournalLog {name}={value!r}: expected an integer >= 1")
        self._path = Path(path)
        self._type_name = type_name
        self._subject = subject
        if not isinstance(sync, SyncPolicy):
            raise JournalUsageError(
                f"JournalLog sync={sync!r}: expected a SyncPolicy, e.g. SyncPolicy.batch()"
            )
        self._sync = sync
        self._interval_ns = sync.interval_ms * 1_000_000
        self._retention = retention
        self._monotonic_ns = monotonic_ns
        self._tail_records = tail_records
        self._tail_bytes = tail_bytes
        try:
            self._writer = JournalWriter(
                path,
                segment_bytes=segment_bytes,
                sync=self._sync,
                retention=retention,
                monotonic_ns=monotonic_ns,
            )
        except JournalLockedError as exc:
            raise JournalLockedError(
                f"persistent feed {type_name}:{subject!r}: its journal {self._path} is held by "
                f"another writer (pid {self._lock_holder()}): another publisher or recorder of "
                "this directory is running — close it, or give each persistent publisher its "
                "own journal= directory"
            ) from exc
        self._reader = JournalReader(path)
        try:
            self._check_owner()
        except BaseException:
            self._writer.close()
            raise
        committed = self._writer.next_seq - 1
        #: the last seq commit() wrote (read() returns nothing past it)
        self._committed = committed
        #: the last seq known durable per the sync policy
        self._durable = committed
        # appended, not yet committed: their timestamps and bodies
        self._p_ts: list[int] = []
        self._p_bodies: list[bytes] = []
        # the tail: seqs _t_first + _t_drop ... _committed, in lists whose first
        # _t_drop items are already dropped (removed in chunks)
        self._t_first = committed + 1
        self._t_drop = 0
        self._t_ts: list[int] = []
        self._t_bodies: list[bytes] = []
        self._t_bytes = 0
        self._first_seq = self._reader.first_seq()
        self._deleted_seen = self._writer.stats.segments_deleted
        self._last_retention_ns = self._last_sync_ns = monotonic_ns()
        # sealed segment (first, last) -> newest timestamp
        self._seal_times: dict[tuple[int, int], int] = {}

    # ---------------------------------------------------------------- protocol

    @property
    def path(self) -> Path:
        """The journal directory."""
        return self._path

    @property
    def next_seq(self) -> int:
        """The seq the next :meth:`append` gets (after a restart, the journal's next seq)."""
        return self._writer.next_seq

    @property
    def first_seq(self) -> int:
        """The oldest seq the journal still holds (:attr:`next_seq` when it holds none)."""
        deleted = self._writer.stats.segments_deleted
        if deleted != self._deleted_seen:
            self._deleted_seen = deleted
            self._first_seq = self._reader.first_seq()
        return min(self._first_seq, self._writer.next_seq)

    @property
    def committed_seq(self) -> int:
        """The last seq :meth:`commit` wrote: what :meth:`read` can return."""
        return self._committed

    def append(self, timestamp: int, body: bytes) -> int:
        """Buffer one record (``timestamp`` in epoch ms, ``body`` the encoded
        message) and return its seq; :meth:`commit` writes it."""
        seq = self._writer.append(self._type_name, self._subject, timestamp, body)
        self._p_ts.append(timestamp)
        self._p_bodies.append(body)
        return seq

    def commit(self) -> int:
        """Write what was appended as one frame, fsync per the sync policy, and
        return the last durable seq (see the module docstring)."""
        writer = self._writer
        before = writer.stats
        writer.flush()
        after = writer.stats
        written = writer.next_seq - 1
        if self._sync.mode != "interval":
            self._durable = written  # batch: fsynced by flush(); os: written is the promise
        elif after.fsyncs - before.fsyncs > after.rotations - before.rotations:
            self._durable = written  # flush() fsynced the open segment after writing
            self._last_sync_ns = self._monotonic_ns()
        elif self._durable < written:
            now = self._monotonic_ns()
            if now - self._last_sync_ns >= self._interval_ns:
                writer.sync()  # fsyncs unless the last write was already fsynced
                self._durable = written
                self._last_sync_ns = now
        if self._p_ts:
            self._to_tail()
        self._committed = written
        if (
            self._retention is not None
            and self._retention.max_age_ms is not None
            and self._monotonic_ns() - self._last_retention_ns >= _RETENTION_EVERY_NS
        ):
            self._last_retention_ns = self._monotonic_ns()
            writer.apply_retention()
        return self._durable

    def read(self, start: int, max_count: int) -> list[tuple[int, int, bytes]]:
        """Up to ``max_count`` committed records ``(seq, timestamp, body)`` from
        seq ``start`` on (from :attr:`first_seq` when ``start`` is older)."""
        if max_count < 1:
            return []
        start = max(start, self.first_seq)
        end = self._committed + 1
        if start >= end:
            return []
        if start >= self._t_first + self._t_drop:
            i = start - self._t_first
            j = min(i + max_count, end - self._t_first)
            return list(
                zip(
                    range(start, start + j - i),
                    self._t_ts[i:j],
                    self._t_bodies[i:j],
                    strict=True,
                )
            )
        while True:
            try:
                for cols in self._reader.iter_columns(
                    start, min(end, start + max_count), max_records=max_count
                ):
                    return list(zip(cols["seq"], cols["timestamp"], cols["body"], strict=True))
                return []
            except RecordsDeletedError as exc:
                if exc.first_seq >= end:
                    return []
                start = exc.first_seq  # retention overtook the read

    def seq_at_time(self, epoch_ms: int) -> int:
        """The first seq whose timestamp is at or after ``epoch_ms`` (committed
        records first, then those appended since); :attr:`next_seq` when there
        is none."""
        first_tail = self._t_first + self._t_drop
        found: int | None
        if first_tail <= self._committed and self._t_ts[self._t_drop] < epoch_ms:
            i = bisect.bisect_left(self._t_ts, epoch_ms, lo=self._t_drop)
            found = self._t_first + i if i < len(self._t_ts) else None
        else:
            while True:
                try:
                    found = self._seq_at_time_on_disk(epoch_ms)
                    break
                except RecordsDeletedError:
                    continue  # retention deleted a segment being probed: search again
        if found is not None:
            return max(found, self.first_seq)  # the tail may hold seqs retention deleted
        i = bisect.bisect_left(self._p_ts, epoch_ms)
        return self._committed + 1 + i

    def release(self, through: int) -> None:
        """Nothing: the journal keeps records by its retention, not by acks."""

    def close(self) -> None:
        """Commit what is buffered and close the journal.  Idempotent."""
        if self._writer.closed:
            return
        try:
            self._writer.close()
        finally:
            self._p_ts = []
            self._p_bodies = []

    # --------------------------------------------------------------- internals

    def _lock_holder(self) -> str:
        try:
            raw = (self._path / "writer.lock").read_bytes()[:64]
        except OSError:
            return "unknown"
        return raw.decode("ascii", "replace").strip() or "unknown"

    def _check_owner(self) -> None:
        """Refuse a journal holding records of another type or subject."""
        first, end = self._reader.first_seq(), self._reader.end_seq()
        if first >= end:
            return
        for seq in (first, end - 1):
            try:
                rec = next(iter(self._reader.read(seq, seq + 1)), None)
            except RecordsDeletedError:
                continue
            if rec is None:
                continue
            if rec.type_name != self._type_name or rec.subject != self._subject:
                raise JournalUsageError(
                    f"persistent feed {self._type_name}:{self._subject!r}: journal "
                    f"{self._path} holds records of {rec.type_name}:{rec.subject!r} (seq "
                    f"{rec.seq}); a persistent feed owns its journal directory — give this "
                    "publisher another journal= directory"
                )

    def _to_tail(self) -> None:
        ts, bodies = self._p_ts, self._p_bodies
        self._p_ts, self._p_bodies = [], []
        self._t_ts.extend(ts)
        self._t_bodies.extend(bodies)
        self._t_bytes += sum(map(len, bodies))
        n = len(self._t_ts)
        drop = self._t_drop
        while drop < n and (n - drop > self._tail_records or self._t_bytes > self._tail_bytes):
            self._t_bytes -= len(self._t_bodies[drop])
            drop += 1
        if drop > 1024 and 2 * drop > n:  # drop in chunks: a list shifts once per chunk
            del self._t_ts[:drop]
            del self._t_bodies[:drop]
            self._t_first += drop
            drop = 0
        self._t_drop = drop

    def _seq_at_time_on_disk(self, epoch_ms: int) -> int | None:
        segments = [s for s in self._reader.segments() if s.count > 0]
        sealed = [s for s in segments if s.sealed]
        # the first sealed segment whose newest record is at or after epoch_ms
        lo, hi = 0, len(sealed)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._newest(sealed[mid]) < epoch_ms:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(sealed):
            seg = sealed[lo]
            first, last = seg.first_seq, seg.last_seq
        elif segments and not segments[-1].sealed:
            first, last = segments[-1].first_seq, min(segments[-1].last_seq, self._committed)
        else:
            return None
        # the first seq in [first, last] at or after epoch_ms, if any
        lo, hi = first, last + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._timestamp(mid) < epoch_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo <= last else None

    def _newest(self, seg: SegmentInfo) -> int:
        key = (seg.first_seq, seg.last_seq)
        newest = self._seal_times.get(key)
        if newest is None:
            found = _newest_from_seal(seg)
            newest = self._timestamp(seg.last_seq) if found is None else found
            self._seal_times[key] = newest
        return newest

    def _timestamp(self, seq: int) -> int:
        for rec in self._reader.read(seq, seq + 1):
            return rec.timestamp
        raise RecordsDeletedError(
            f"journal {self._path}: seq {seq} is no longer readable",
            requested=seq,
            first_seq=self._reader.first_seq(),
        )
