"""Retention: whole sealed segments, oldest first, by size or by record age."""

from __future__ import annotations

from pathlib import Path

import pytest
from journal_support import BASE_TS, expected, rec, recs, segment_names

from actorbus.journal import (
    JournalCorruptError,
    JournalReader,
    JournalUsageError,
    JournalWriter,
    RecordsDeletedError,
    Retention,
)


def _total_size(journal: Path) -> int:
    return sum((journal / n).stat().st_size for n in segment_names(journal))


def test_size_retention_keeps_the_journal_under_the_limit(journal: Path) -> None:
    limit = 6000
    with JournalWriter(journal, segment_bytes=2048, retention=Retention(max_bytes=limit)) as w:
        for start in range(1, 2001, 10):
            w.append_many(recs(start, 10))
            sealed = [n for n in segment_names(journal) if not n.endswith("-open.seg")]
            assert _total_size(journal) <= limit + 2048 or not sealed
        deleted = w.stats.segments_deleted
    assert deleted > 10
    reader = JournalReader(journal)
    first = reader.first_seq()
    assert first > 1
    assert list(reader.read(first)) == expected(first, 2001 - first)
    assert reader.segments()[0].first_seq == first
    with pytest.raises(RecordsDeletedError) as info:
        list(reader.read(1, 5))
    assert info.value.first_seq == first
    assert info.value.requested == 1
    assert f"the journal now starts at seq {first}" in str(info.value)
    with pytest.raises(RecordsDeletedError):
        reader.read_columns(first - 1)


def test_size_retention_never_deletes_the_open_segment(journal: Path) -> None:
    with JournalWriter(journal, segment_bytes=1024, retention=Retention(max_bytes=1)) as w:
        w.append_many(recs(1, 40))
        w.rotate()
        w.append_many(recs(41, 3))
        assert w.apply_retention() == []  # only the open segment is left
    assert segment_names(journal) == ["00000000000000000041-open.seg"]
    assert list(JournalReader(journal).read(41)) == expected(41, 3)


def _segments_with_timestamps(
    journal: Path, stamps: list[list[int]], **kw: object
) -> JournalWriter:
    """A writer whose sealed segments hold records with the given timestamps."""
    w = JournalWriter(journal, **kw)  # type: ignore[arg-type]
    for group in stamps:
        w.append_many([("T", "/s", ts, b"x" * 10) for ts in group])
        w.rotate()
    return w


def test_age_retention_uses_the_newest_record_timestamp(journal: Path) -> None:
    now = BASE_TS + 100_000
    w = _segments_with_timestamps(
        journal,
        [[now - 90_000, now - 80_000], [now - 70_000, now - 20_000], [now - 5_000]],
        retention=Retention(max_age_ms=30_000),
        epoch_ms=lambda: 0,  # rotation-time retention sees nothing as old
    )
    with w:
        assert w.stats.segments_deleted == 0
        deleted = w.apply_retention(now_ms=now)
        # segment 1 is wholly older than 30 s; segment 2 holds a record 20 s old
        assert [(d.first_seq, d.last_seq) for d in deleted] == [(1, 2)]
        assert not deleted[0].path.exists()
        assert JournalReader(journal).first_seq() == 3
        assert [(d.first_seq, d.last_seq) for d in w.apply_retention(now_ms=now + 60_000)] == [
            (3, 4),
            (5, 5),
        ]


def test_age_retention_stops_at_a_young_segment(journal: Path) -> None:
    now = 10_000_000
    w = _segments_with_timestamps(
        journal,
        [[now - 9_000], [now], [now - 9_000]],  # timestamps need not be monotonic
        retention=Retention(max_age_ms=1_000),
        epoch_ms=lambda: now,
    )
    with w:
        # rotation already deleted segment 1; segment 2 is young and shields segment 3
        assert w.stats.segments_deleted == 1
        assert w.apply_retention() == []
    assert JournalReader(journal).first_seq() == 2


def test_age_retention_reads_timestamps_of_segments_sealed_before_opening(
    journal: Path,
) -> None:
    now = 5_000_000
    _segments_with_timestamps(journal, [[now - 5_000], [now - 4_000], [now]]).close()
    with JournalWriter(journal, retention=Retention(max_age_ms=4_500)) as w:
        deleted = w.apply_retention(now_ms=now)
    assert [d.first_seq for d in deleted] == [1]


def test_seqs_continue_after_retention_deleted_every_record(journal: Path) -> None:
    with JournalWriter(journal, retention=Retention(max_bytes=1)) as w:
        w.append_many(recs(1, 50))
        w.rotate()
        assert w.stats.segments_deleted == 1
    reader = JournalReader(journal)
    assert (reader.first_seq(), reader.last_seq()) == (51, 50)
    assert list(reader.read(51)) == []
    with pytest.raises(RecordsDeletedError):
        list(reader.read(50))
    with JournalWriter(journal) as w:  # no metadata file: the open segment's name is enough
        assert w.next_seq == 51
        assert w.append(*rec(51)) == 51
    assert list(JournalReader(journal).read(51)) == expected(51, 1)


def test_a_reader_keeps_reading_a_segment_retention_deletes_under_it(journal: Path) -> None:
    with JournalWriter(journal, retention=Retention(max_bytes=1)) as w:
        w.append_many(recs(1, 30))
        w.append_many(recs(31, 30))
        reader = JournalReader(journal)
        records = reader.read(1)
        first = next(records)  # the segment file is open in the reader now
        w.rotate()  # seals it and retention deletes it at once
        assert segment_names(journal) == ["00000000000000000061-open.seg"]
        assert [first, *records] == expected(1, 60)


def test_without_retention_apply_retention_does_nothing(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 5))
        w.rotate()
        assert w.apply_retention(now_ms=1 << 62) == []
    assert JournalReader(journal).first_seq() == 1


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "neither max_bytes nor max_age_ms"),
        ({"max_bytes": 0}, "max_bytes=0: expected an integer >= 1"),
        ({"max_age_ms": -1}, "max_age_ms=-1: expected an integer >= 0"),
        ({"max_bytes": 1.5}, "max_bytes=1.5"),
    ],
)
def test_retention_rules_are_checked(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(JournalUsageError, match=words):
        Retention(**kwargs)  # type: ignore[arg-type]


def test_a_segment_deleted_by_hand_is_skipped_by_retention(journal: Path) -> None:
    with JournalWriter(journal, retention=Retention(max_bytes=1500)) as w:
        assert w.apply_retention() == []  # nothing sealed yet
        for start in (1, 6):
            w.append_many(recs(start, 5))
            w.rotate()
        assert w.stats.segments_deleted == 0
        assert _total_size(journal) < 1500
        (journal / "00000000000000000001-00000000000000000005.seg").unlink()
        w.append_many(recs(11, 40))  # the open segment alone passes the limit
        deleted = w.apply_retention()
    assert [(d.first_seq, d.last_seq) for d in deleted] == [(1, 5), (6, 10)]
    assert JournalReader(journal).first_seq() == 11


def test_age_retention_reports_a_sealed_segment_without_its_seal(journal: Path) -> None:
    _segments_with_timestamps(journal, [[1], [2]]).close()
    sealed = journal / "00000000000000000001-00000000000000000001.seg"
    sealed.write_bytes(sealed.read_bytes()[:-40])  # the seal frame is gone
    w = JournalWriter(journal, retention=Retention(max_age_ms=1))
    with w, pytest.raises(JournalCorruptError, match="not a seal frame|too short"):
        w.apply_retention(now_ms=10**9)
