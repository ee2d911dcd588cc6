"""Value objects that configure a writer and describe what it did."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._errors import JournalUsageError

__all__ = ["RecoveryReport", "Retention", "SyncPolicy", "WriterStats"]

SyncMode = Literal["batch", "interval", "os"]


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    """When a :class:`JournalWriter` calls ``fsync`` on the open segment.

    Build one with :meth:`batch`, :meth:`interval` or :meth:`os`.  Whatever the
    policy, sealing a segment always fsyncs it and the directory, so a file's
    name never promises records a power loss took away; and :meth:`JournalWriter.sync`
    always fsyncs.
    """

    mode: SyncMode
    interval_ms: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("batch", "interval", "os"):
            raise JournalUsageError(
                f"SyncPolicy mode {self.mode!r} is unknown; use SyncPolicy.batch(), "
                "SyncPolicy.interval(ms) or SyncPolicy.os()"
            )
        if type(self.interval_ms) is not int or self.interval_ms < 0:
            raise JournalUsageError(
                f"SyncPolicy interval_ms={self.interval_ms!r}: expected an integer >= 0"
            )

    @classmethod
    def batch(cls) -> SyncPolicy:
        """fsync after every frame written (each ``append_many``, ``flush``).
        A record is durable when the call that wrote it returns."""
        return cls("batch")

    @classmethod
    def interval(cls, ms: int) -> SyncPolicy:
        """fsync when at least ``ms`` milliseconds passed since the last fsync,
        checked on every writer call (no background thread).  Call
        :meth:`JournalWriter.sync_if_due` from a timer to bound the loss window
        when appends pause."""
        return cls("interval", ms)

    @classmethod
    def os(cls) -> SyncPolicy:
        """Never fsync records explicitly; the kernel writes them back when it
        likes.  A process crash loses nothing written; a power loss may."""
        return cls("os")


@dataclass(frozen=True, slots=True)
class Retention:
    """Which sealed segments a writer deletes, oldest first.

    * ``max_bytes`` — delete while all segments together (open one included)
      are larger than this.
    * ``max_age_ms`` — delete a segment when its *newest record timestamp* is
      more than this many milliseconds before now (epoch ms).

    Only whole sealed segments are deleted, never the open one, and only from
    the oldest end, so the journal stays one contiguous range of seqs: a young
    segment stops the age rule even if a later one is older.
    """

    max_bytes: int | None = None
    max_age_ms: int | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is None and self.max_age_ms is None:
            raise JournalUsageError(
                "Retention() with neither max_bytes nor max_age_ms keeps everything; "
                "give one of them, or pass retention=None"
            )
        for name, value, low in (
            ("max_bytes", self.max_bytes, 1),
            ("max_age_ms", self.max_age_ms, 0),
        ):
            if value is not None and (type(value) is not int or value < low):
                raise JournalUsageError(
                    f"Retention {name}={value!r}: expected an integer >= {low} or None"
                )


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What a :class:`JournalWriter` found and repaired when it opened a directory.

    ``clean`` is true when nothing needed repair (a fresh journal, or one
    closed properly).  Otherwise ``actions`` lists, in words, what was done;
    a torn tail also sets ``truncated_at`` (file offset), ``truncated_bytes``
    and ``reason``.
    """

    segment: Path
    next_seq: int
    truncated_at: int | None = None
    truncated_bytes: int = 0
    reason: str = ""
    actions: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """True when opening needed no repair."""
        return not self.actions


@dataclass(frozen=True, slots=True)
class WriterStats:
    """Counters of one :class:`JournalWriter` since it was opened."""

    records: int = 0
    frames: int = 0
    bytes_written: int = 0
    fsyncs: int = 0
    rotations: int = 0
    segments_deleted: int = 0
