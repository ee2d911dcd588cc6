"""Sync policies: when the writer fsyncs (counted in its stats), with a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from journal_support import expected, rec, recs

from actorbus.journal import JournalReader, JournalUsageError, JournalWriter, SyncPolicy


class FakeClock:
    """A monotonic nanosecond clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms * 1_000_000


def test_batch_policy_fsyncs_every_frame_and_nothing_else(journal: Path) -> None:
    with JournalWriter(journal, sync=SyncPolicy.batch()) as w:
        w.append_many(recs(1, 10))
        assert w.stats.fsyncs == 1
        w.append(*rec(11))
        w.append(*rec(12))
        assert w.stats.fsyncs == 1  # buffered, not written
        w.flush()
        assert (w.stats.frames, w.stats.fsyncs) == (2, 2)
        w.flush()  # nothing pending: no frame, no fsync
        w.sync()  # nothing unsynced
        assert w.stats.fsyncs == 2
    assert w.stats.fsyncs == 2  # close had nothing left to sync


def test_default_policy_is_batch(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 2))
        assert w.stats.fsyncs == 1


def test_os_policy_never_fsyncs_records_but_seals_durably(journal: Path) -> None:
    with JournalWriter(journal, sync=SyncPolicy.os(), segment_bytes=1024) as w:
        for start in range(1, 201, 5):
            w.append_many(recs(start, 5))
        w.flush()
        assert w.stats.rotations > 3
        assert w.stats.fsyncs == w.stats.rotations  # one per sealed segment
        rotations = w.stats.rotations
    assert w.stats.fsyncs == rotations  # close does not fsync either
    assert list(JournalReader(journal).read(1)) == expected(1, 200)


def test_sync_forces_an_fsync_under_any_policy(journal: Path) -> None:
    with JournalWriter(journal, sync=SyncPolicy.os()) as w:
        w.append(*rec(1))
        w.sync()
        assert (w.stats.frames, w.stats.fsyncs) == (1, 1)
        w.sync()
        assert w.stats.fsyncs == 1


def test_interval_policy_syncs_when_due_on_the_next_call(journal: Path) -> None:
    clock = FakeClock()
    with JournalWriter(journal, sync=SyncPolicy.interval(50), monotonic_ns=clock) as w:
        reader = JournalReader(journal)
        w.append_many(recs(1, 5))
        assert w.stats.fsyncs == 0
        clock.advance_ms(49)
        w.append(*rec(6))
        assert (w.stats.fsyncs, w.pending) == (0, 1)
        clock.advance_ms(1)
        w.append(*rec(7))  # due: what was there is written and fsynced, then 7 is taken
        assert (w.stats.fsyncs, w.pending) == (1, 1)
        assert list(reader.read(1)) == expected(1, 6)
        clock.advance_ms(10)
        w.append_many(recs(8, 3))
        assert w.stats.fsyncs == 1
        clock.advance_ms(40)
        w.flush()  # a flush with nothing buffered still syncs when due
        assert w.stats.fsyncs == 2
        clock.advance_ms(1000)
        w.flush()  # nothing written since: nothing to sync
        assert w.stats.fsyncs == 2


def test_sync_if_due_bounds_the_window_while_appends_pause(journal: Path) -> None:
    clock = FakeClock()
    with JournalWriter(journal, sync=SyncPolicy.interval(20), monotonic_ns=clock) as w:
        reader = JournalReader(journal)
        w.append(*rec(1))
        assert w.sync_if_due() is False
        clock.advance_ms(25)
        assert w.sync_if_due() is True  # what a recorder's timer calls
        assert list(reader.read(1)) == expected(1, 1)
        assert w.stats.fsyncs == 1
        clock.advance_ms(25)
        assert w.sync_if_due() is False  # nothing new


def test_interval_close_syncs_what_is_left(journal: Path) -> None:
    clock = FakeClock()
    w = JournalWriter(journal, sync=SyncPolicy.interval(1000), monotonic_ns=clock)
    w.append_many(recs(1, 3))
    w.append(*rec(4))
    assert w.stats.fsyncs == 0
    w.close()
    assert w.stats.fsyncs == 1
    assert list(JournalReader(journal).read(1)) == expected(1, 4)


def test_sync_if_due_does_nothing_under_other_policies(journal: Path) -> None:
    for policy in (SyncPolicy.batch(), SyncPolicy.os()):
        with JournalWriter(journal, sync=policy) as w:
            w.append(*rec(w.next_seq))
            assert w.sync_if_due() is False
            assert w.pending == 1


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: SyncPolicy.interval(-1), "interval_ms=-1: expected an integer >= 0"),
        (lambda: SyncPolicy("sometimes"), "mode 'sometimes' is unknown"),  # type: ignore[arg-type]
    ],
)
def test_sync_policies_are_checked(make: object, words: str) -> None:
    with pytest.raises(JournalUsageError, match=words):
        make()  # type: ignore[operator]
