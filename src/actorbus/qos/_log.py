"""What a QoS publisher keeps of what it published: the :class:`PublisherLog`
protocol and its in-memory form, :class:`MemoryLog`.  The persistent form is
the journal-backed ``JournalLog``."""

from __future__ import annotations

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
    is not yet released; the publisher bounds it (``held``, ``held_bytes``).
    Entries are a list from ``_head`` on (released ones are cut off in bulk),
    so reading any range is a slice."""

    __slots__ = ("_bytes", "_entries", "_first", "_head")

    def __init__(self, start: int = 1) -> None:
        #: the seq of ``_entries[_head]``
        self._first = start
        self._entries: list[tuple[int, int, bytes]] = []
        self._head = 0
        self._bytes = 0

    @property
    def next_seq(self) -> int:
        return self._first + len(self._entries) - self._head

    @property
    def first_seq(self) -> int:
        return self._first

    @property
    def held(self) -> int:
        """Entries held."""
        return len(self._entries) - self._head

    @property
    def held_bytes(self) -> int:
        """Bytes of the bodies held."""
        return self._bytes

    def append(self, timestamp: int, body: bytes) -> int:
        seq = self._first + len(self._entries) - self._head
        self._entries.append((seq, timestamp, body))
        self._bytes += len(body)
        return seq

    def commit(self) -> int:
        return self.next_seq - 1

    def read(self, start: int, max_count: int) -> list[tuple[int, int, bytes]]:
        first = self._first
        start = max(start, first)
        at = self._head + start - first
        return self._entries[at : at + max_count]

    def seq_at_time(self, epoch_ms: int) -> int:
        entries = self._entries
        for i in range(self._head, len(entries)):
            if entries[i][1] >= epoch_ms:
                return entries[i][0]
        return self.next_seq

    def release(self, through: int) -> None:
        first = self._first
        if through < first:
            return
        entries, head = self._entries, self._head
        end = min(head + through - first + 1, len(entries))
        self._bytes -= sum(len(entry[2]) for entry in entries[head:end])
        self._first = first + end - head
        if end > 4096 and end * 2 > len(entries):
            del entries[:end]
            end = 0
        self._head = end

    def close(self) -> None:
        self._entries.clear()
        self._head = 0
        self._bytes = 0
