"""Property: whatever the sequence of appends, flushes, rotations, reopens, torn
tails and retention, a reader returns exactly the flushed records, in order,
seq strictly increasing by 1 — and seqs are never reused."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actorbus.journal import JournalReader, JournalWriter, Retention, SyncPolicy
from actorbus.journal._format import SEGMENT_HEADER, parse_segment_name

Rec = tuple[str, str, int, bytes]

records = st.tuples(
    st.text(max_size=12),
    st.text(max_size=12),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.binary(max_size=300),
)


class JournalMachine(RuleBasedStateMachine):
    """Model: ``flushed`` (records in the files, seq = first + index) and ``pending``."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="journal-prop-"))
        self.retention: Retention | None = None
        self.writer = self._open()
        self.first = 1  # seq of flushed[0]; rises when retention deletes
        self.flushed: list[Rec] = []
        self.pending: list[Rec] = []
        # (open segment name, its size, records flushed) after each write
        self.checkpoints: list[tuple[str, int, int]] = []

    def _open(self) -> JournalWriter:
        return JournalWriter(
            self.dir,
            segment_bytes=1024,
            sync=SyncPolicy.os(),
            buffer_bytes=1 << 30,
            retention=self.retention,
        )

    @property
    def end(self) -> int:
        return self.first + len(self.flushed)

    def _open_segment(self) -> Path:
        (name,) = [n for n in os.listdir(self.dir) if n.endswith("-open.seg")]
        return self.dir / name

    def _wrote(self) -> None:
        self.flushed += self.pending
        self.pending = []
        seg = self._open_segment()
        self.checkpoints.append((seg.name, seg.stat().st_size, self.end))
        self._after_retention()  # a write may rotate, and rotation applies retention

    @rule(record=records)
    def append(self, record: Rec) -> None:
        assert self.writer.append(*record) == self.end + len(self.pending)
        self.pending.append(record)

    @rule(batch=st.lists(records, max_size=20))
    def append_many(self, batch: list[Rec]) -> None:
        start = self.end + len(self.pending)
        assert self.writer.append_many(batch) == range(start, start + len(batch))
        self.pending += batch
        if self.pending:
            self._wrote()

    @rule()
    def flush(self) -> None:
        self.writer.flush()
        if self.pending:
            self._wrote()

    @rule()
    def rotate(self) -> None:
        self.writer.rotate()
        self._wrote()

    @rule()
    def reopen(self) -> None:
        self.writer.close()
        self._wrote()
        self.writer = self._open()
        assert self.writer.recovery.clean
        assert self.writer.next_seq == self.end

    @rule(cut=st.integers(min_value=1, max_value=2000))
    def tear_the_tail(self, cut: int) -> None:
        """Close, then chop bytes off the open segment as a crash would."""
        self.writer.close()
        self._wrote()
        seg = self._open_segment()
        size = seg.stat().st_size
        new_size = max(SEGMENT_HEADER.size, size - cut)
        os.truncate(seg, new_size)
        # survivors: the records of the frames that end at or before the cut
        first_of_segment = parse_segment_name(seg.name)[0]  # type: ignore[index]
        boundary, survivors = max(
            [(at, n) for name, at, n in self.checkpoints if name == seg.name and at <= new_size],
            default=(SEGMENT_HEADER.size, first_of_segment),
        )
        self.flushed = self.flushed[: survivors - self.first]
        self.checkpoints = [c for c in self.checkpoints if c[0] != seg.name or c[1] <= new_size]
        self.writer = self._open()
        report = self.writer.recovery
        assert report.truncated_bytes == new_size - boundary
        assert report.clean == (new_size == boundary)
        assert self.writer.next_seq == self.end

    @rule(max_bytes=st.integers(min_value=1, max_value=6000))
    def retain(self, max_bytes: int) -> None:
        self.writer.close()
        self._wrote()
        self.retention = Retention(max_bytes=max_bytes)
        self.writer = self._open()
        self.writer.apply_retention()
        self._after_retention()

    def _after_retention(self) -> None:
        first = JournalReader(self.dir).first_seq()
        assert first >= self.first
        self.flushed = self.flushed[first - self.first :]
        self.first = first

    @precondition(lambda self: self.flushed)
    @rule(data=st.data())
    def read_a_range(self, data: st.DataObject) -> None:
        start = data.draw(st.integers(self.first, self.end))
        end = data.draw(st.integers(start, self.end + 3))
        got = list(JournalReader(self.dir).read(start, end))
        want = self.flushed[start - self.first : end - self.first]
        assert [r[1:] for r in got] == [(t, s, ts, bytes(b)) for t, s, ts, b in want]
        assert [r.seq for r in got] == list(range(start, start + len(want)))

    @invariant()
    def reader_returns_exactly_the_flushed_records(self) -> None:
        reader = JournalReader(self.dir)
        got = list(reader.read(reader.first_seq()))
        assert reader.first_seq() == self.first
        assert [r.seq for r in got] == list(range(self.first, self.end))
        assert [r[1:] for r in got] == [(t, s, ts, bytes(b)) for t, s, ts, b in self.flushed]
        assert reader.end_seq() == self.end
        assert self.writer.next_seq == self.end + len(self.pending)

    def teardown(self) -> None:
        self.writer.close()
        shutil.rmtree(self.dir)


JournalMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, print_blob=True
)
test_journal_state_machine = JournalMachine.TestCase
