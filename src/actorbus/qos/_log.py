"""What a QoS publisher keeps of what it published: the :class:`PublisherLog`
protocol and its in-memory form, :class:`MemoryLog`.  The persistent form is
the journal-backed ``JournalLog``."""

from __future__ import annotations

from collections import deque
from typing import Protocol

__all__ = ["MemoryLog", "PublisherLog"]


# fmt: off
class PublisherLog(Protocol):
    @property
    def next_seq(self) -> int: ...          # seq the next append gets
    @property
    def first_seq(self) -> int: ...         # oldest seq still held (== next_seq when empty)
    def append(self, timestamp: int, body: bytes) -> int: ...   # returns its seq
    def commit(self) -> int: ...            # make appended entries durable (journal: write+sync per policy); returns the last durable seq (memory: last appended)
    def read(self, start: int, max_count: int) -> list[tuple[int, int, bytes]]: ...  # (seq, timestamp, body) from start, at most max_count; entries below first_seq are not returned
    def seq_at_time(self, epoch_ms: int) -> int: ...   # first seq whose timestamp >= epoch_ms (next_seq if none)
    def release(self, through: int) -> None: ...  # every attached consumer acked through this seq (memory log frees them; journal log ignores it: retention rules)
    def close(self) -> None: ...
# fmt: on


class MemoryLog:
    """A :class:`PublisherLog` in memory, from seq ``start`` on.  It holds what
    is not yet released; the publisher bounds it (``held``, ``held_bytes``)."""

    __slots__ = ("_bytes", "_entries", "_first")

    def __init__(self, start: int = 1) -> None:
        self._first = start
        self._entries: deque[tuple[int, bytes]] = deque()
        self._bytes = 0

    @property
    def next_seq(self) -> int:
        return self._first + len(self._entries)

    @property
    def first_seq(self) -> int:
        return self._first

    @property
    def held(self) -> int:
        """Entries held."""
        return len(self._entries)

    @property
    def held_bytes(self) -> int:
        """Bytes of the bodies held."""
        return self._bytes

    def append(self, timestamp: int, body: bytes) -> int:
        self._entries.append((timestamp, body))
        self._bytes += len(body)
        return self._first + len(self._entries) - 1

    def commit(self) -> int:
        return self.next_seq - 1

    def read(self, start: int, max_count: int) -> list[tuple[int, int, bytes]]:
        first = self._first
        start = max(start, first)
        entries = self._entries
        end = min(first + len(entries), start + max_count)
        return [(seq, *entries[seq - first]) for seq in range(start, end)]

    def seq_at_time(self, epoch_ms: int) -> int:
        for i, (timestamp, _) in enumerate(self._entries):
            if timestamp >= epoch_ms:
                return self._first + i
        return self.next_seq

    def release(self, through: int) -> None:
        entries = self._entries
        while entries and self._first <= through:
            self._bytes -= len(entries.popleft()[1])
            self._first += 1

    def close(self) -> None:
        self._entries.clear()
        self._bytes = 0
