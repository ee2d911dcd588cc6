"""A durable, append-only journal of feed records, in a directory of segment files.

Theory of operation
-------------------
A journal is a directory.  One :class:`JournalWriter` (guarded by an exclusive
``flock``) appends records ``(seq, type_name, subject, timestamp, body)``; seqs
start at 1 (or a chosen first seq) and grow by exactly 1, across restarts and
crashes.  Any number of :class:`JournalReader` objects, in any process or on any
machine that mounts the directory, read seq ranges from the files alone.

Records are stored in **segment files** named by the seqs they hold —
``00000000000000000001-00000000000000050000.seg`` once sealed, ``…-open.seg`` for
the one being appended to — so a reader finds a range by listing the
directory.  Inside a segment, records travel in **frames** (one per batch),
each with a length and a crc32, so a torn tail left by a crash is detected:
the writer truncates it when it reopens (see :class:`RecoveryReport`), and
readers never return it.  Segments rotate by size; :class:`Retention` deletes
whole sealed segments, oldest first, by total size or record age.
:class:`SyncPolicy` says when the writer fsyncs.

The exact bytes, the crash guarantees of each sync policy and the rules for
readers on shared storage are in docs/journal.md.

Example::

    with JournalWriter("/var/lib/app/journal", sync=SyncPolicy.interval(50)) as w:
        seqs = w.append_many([("demo.DataPoint", "/demo", 1700000000000, b"...")])

    reader = JournalReader("/var/lib/app/journal")
    cols = reader.read_columns(reader.first_seq(), reader.end_seq())
"""

from __future__ import annotations

from ._errors import (
    JournalCorruptError,
    JournalError,
    JournalLockedError,
    JournalUsageError,
    RecordsDeletedError,
)
from ._policy import RecoveryReport, Retention, SyncPolicy, WriterStats
from ._reader import Columns, JournalReader, Record
from ._segments import SegmentInfo
from ._writer import JournalWriter

__all__ = [
    "Columns",
    "JournalCorruptError",
    "JournalError",
    "JournalLockedError",
    "JournalReader",
    "JournalUsageError",
    "JournalWriter",
    "Record",
    "RecordsDeletedError",
    "RecoveryReport",
    "Retention",
    "SegmentInfo",
    "SyncPolicy",
    "WriterStats",
]
