"""Appending and reading back: ranges, segments, rotation, validation."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from journal_support import expected, read_all, rec, recs, segment_names

from actorbus.journal import (
    JournalError,
    JournalReader,
    JournalUsageError,
    JournalWriter,
    Record,
    SyncPolicy,
)
from actorbus.journal._format import MAX_SEQ, parse_segment_name


def test_append_returns_consecutive_seqs_from_one(journal: Path) -> None:
    with JournalWriter(journal) as w:
        assert w.recovery.clean
        assert (w.next_seq, w.last_seq) == (1, 0)
        assert [w.append(*rec(s)) for s in range(1, 4)] == [1, 2, 3]
        assert w.append_many(recs(4, 5)) == range(4, 9)
        assert w.append_many([]) == range(9, 9)
        assert (w.next_seq, w.last_seq) == (9, 8)
    assert read_all(journal) == expected(1, 8)


def test_appended_records_are_visible_after_flush_not_before(journal: Path) -> None:
    with JournalWriter(journal) as w:
        reader = JournalReader(journal)
        w.append(*rec(1))
        w.append(*rec(2))
        assert w.pending == 2
        assert list(reader.read(1)) == []
        assert reader.end_seq() == 1
        w.flush()
        assert w.pending == 0
        assert list(reader.read(1)) == expected(1, 2)
        w.append(*rec(3))
        # append_many carries what append() buffered in the same frame
        w.append_many(recs(4, 2))
        assert w.stats.frames == 2
        assert list(reader.read(1)) == expected(1, 5)


def test_append_writes_by_itself_when_the_buffer_is_full(journal: Path) -> None:
    with JournalWriter(journal, buffer_bytes=200) as w:
        reader = JournalReader(journal)
        seq = 0
        while reader.end_seq() == 1:
            seq = w.append(*rec(seq + 1))
            assert seq < 50
        # the full buffer was written before the last record was taken
        assert w.pending == 1
        assert list(reader.read(1)) == expected(1, seq - 1)


def test_first_seq_starts_a_new_journal_and_is_ignored_by_an_existing_one(journal: Path) -> None:
    with JournalWriter(journal, first_seq=1000) as w:
        assert w.append(*rec(1000)) == 1000
    assert segment_names(journal) == ["00000000000000001000-open.seg"]
    with JournalWriter(journal, first_seq=5) as w:
        assert w.next_seq == 1001
    reader = JournalReader(journal)
    assert (reader.first_seq(), reader.last_seq()) == (1000, 1000)


def test_an_empty_journal_reads_as_empty(journal: Path) -> None:
    JournalWriter(journal, first_seq=7).close()
    reader = JournalReader(journal)
    assert (reader.first_seq(), reader.last_seq(), reader.end_seq()) == (7, 6, 7)
    assert list(reader.read(7)) == []
    assert reader.read_columns(7, 100)["seq"] == []
    assert list(reader.iter_columns(7)) == []
    (seg,) = reader.segments()
    assert (seg.first_seq, seg.last_seq, seg.count, seg.sealed) == (7, 6, 0, False)


def _fill(journal: Path, n: int, *, segment_bytes: int, batch: int, seed: int) -> None:
    """Append records 1..n in batches of random size up to ``batch``, some with append()."""
    rng = random.Random(seed)
    with JournalWriter(journal, segment_bytes=segment_bytes, sync=SyncPolicy.os()) as w:
        seq = 1
        while seq <= n:
            k = min(rng.randint(1, batch), n - seq + 1)
            if rng.random() < 0.3:
                for s in range(seq, seq + k):
                    w.append(*rec(s))
                w.flush()
            else:
                w.append_many(recs(seq, k))
            seq += k


def test_rotation_seals_segments_with_names_that_match_their_records(journal: Path) -> None:
    seed = 20240601
    print(f"seed={seed}")
    _fill(journal, 3000, segment_bytes=8192, batch=40, seed=seed)
    names = segment_names(journal)
    assert len(names) > 10
    assert names[-1].endswith("-open.seg")
    reader = JournalReader(journal)
    infos = reader.segments()
    assert [i.path.name for i in infos] == names
    expect_first = 1
    for info in infos:
        first, last = parse_segment_name(info.path.name)  # type: ignore[misc]
        assert first == info.first_seq == expect_first
        if info.sealed:
            assert last == info.last_seq
            assert info.size == os.path.getsize(info.path)
            assert info.size <= 8192  # no single frame is larger here
        else:
            assert last is None
        assert list(reader.read(info.first_seq, info.last_seq + 1)) == expected(
            info.first_seq, info.count
        )
        expect_first = info.last_seq + 1
    assert expect_first == 3001


def test_a_frame_larger_than_a_segment_gets_a_segment_of_its_own(journal: Path) -> None:
    big = [("T", "/big", 1, bytes(3000)) for _ in range(4)]
    with JournalWriter(journal, segment_bytes=4096) as w:
        w.append_many(recs(1, 3))
        w.append_many(big)
        w.append_many(recs(8, 3))
    infos = JournalReader(journal).segments()
    assert [(i.first_seq, i.last_seq, i.sealed) for i in infos] == [
        (1, 3, True),
        (4, 7, True),
        (8, 10, False),
    ]
    assert infos[1].size > 4096


def test_ranges_within_and_across_segments_and_frames(journal: Path) -> None:
    seed = 77
    print(f"seed={seed}")
    n = 2000
    _fill(journal, n, segment_bytes=4096, batch=25, seed=seed)
    reader = JournalReader(journal)
    rng = random.Random(seed)
    cases = [(1, n + 1), (1, 2), (n, n + 1), (n + 1, n + 5), (500, 500), (1, None), (1999, None)]
    cases += [(a, a + rng.randint(0, 300)) for a in (rng.randint(1, n) for _ in range(60))]
    for start, end in cases:
        stop = min(n + 1, end if end is not None else n + 1)
        want = expected(start, max(0, stop - start))
        assert list(reader.read(start, end)) == want, (start, end)
        cols = reader.read_columns(start, end)
        assert cols["seq"] == [r.seq for r in want]
        assert cols["type_name"] == [r.type_name for r in want]
        assert cols["subject"] == [r.subject for r in want]
        assert cols["timestamp"] == [r.timestamp for r in want]
        assert cols["body"] == [r.body for r in want]
        batches = list(reader.iter_columns(start, end, max_records=37))
        assert all(0 < len(b["seq"]) <= 37 for b in batches)
        assert [s for b in batches for s in b["seq"]] == cols["seq"]
        assert [x for b in batches for x in b["body"]] == cols["body"]


def test_a_fresh_reader_per_range_needs_no_shared_state(journal: Path) -> None:
    _fill(journal, 600, segment_bytes=2048, batch=10, seed=5)
    got: list[Record] = []
    for start in range(1, 601, 97):
        got += JournalReader(journal).read(start, start + 97)
    assert got == expected(1, 600)


def test_large_bodies_read_back_from_the_middle(journal: Path) -> None:
    big = [("T", "/big", s, bytes([s % 251]) * (1_500_000 + s)) for s in range(1, 7)]
    with JournalWriter(journal, segment_bytes=64 << 20) as w:
        w.append_many(big[:3])
        w.append_many(big[3:])
    reader = JournalReader(journal)
    assert [r.body for r in reader.read(5, 7)] == [b[3] for b in big[4:]]
    assert [r.seq for r in reader.read(2, 5)] == [2, 3, 4]


def test_non_ascii_strings_and_bytearray_bodies_round_trip(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append("Größe", "/été/✓", -1, b"")
        w.append_many([("ünï", "", 0, bytearray(b"\x00\xff"))])  # type: ignore[list-item]
    assert [r[1:] for r in read_all(journal)] == [
        ("Größe", "/été/✓", -1, b""),
        ("ünï", "", 0, b"\x00\xff"),
    ]


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ((b"T", "/s", 1, b""), "type_name is bytes, expected str"),
        (("T", 5, 1, b""), "subject is int, expected str"),
        (("T", "/s", 1.5, b""), "timestamp is float, expected int"),
        (("T", "/s", True, b""), "timestamp is bool, expected int"),
        (("T", "/s", 1 << 63, b""), "does not fit in 64 signed bits"),
        (("T", "/s", 1, "text"), "body is str, expected bytes"),
        (("T\ud800", "/s", 1, b""), "cannot be encoded as UTF-8"),
        (("T", "/s", 1), "has 3 items, expected 4"),
        (None, "is a NoneType, expected a 4-tuple"),
    ],
)
def test_bad_records_are_rejected_and_nothing_is_appended(
    journal: Path, record: object, words: str
) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 2))
        with pytest.raises(JournalUsageError) as info:
            w.append_many([rec(3), rec(4), record])  # type: ignore[list-item]
        assert "record #2 of the batch " in str(info.value)
        assert words in str(info.value)
        assert "nothing was appended" in str(info.value)
        if isinstance(record, tuple) and len(record) == 4:
            with pytest.raises(JournalUsageError, match=words):
                w.append(*record)
        assert w.next_seq == 3
        assert w.append(*rec(3)) == 3
    assert read_all(journal) == expected(1, 3)


def test_append_many_accepts_any_iterable(journal: Path) -> None:
    with JournalWriter(journal) as w:
        assert w.append_many(rec(s) for s in range(1, 6)) == range(1, 6)
        assert w.append_many(tuple(recs(6, 2))) == range(6, 8)
    assert read_all(journal) == expected(1, 7)


def test_seqs_stop_at_the_largest_and_say_so(journal: Path) -> None:
    with JournalWriter(journal, first_seq=MAX_SEQ - 1) as w:
        assert w.append_many(recs(1, 2)) == range(MAX_SEQ - 1, MAX_SEQ + 1)
        with pytest.raises(JournalUsageError, match="start a new journal directory"):
            w.append(*rec(1))
        with pytest.raises(JournalUsageError, match="largest seq"):
            w.append_many(recs(1, 1))
    reader = JournalReader(journal)
    assert [r.seq for r in reader.read(MAX_SEQ - 1)] == [MAX_SEQ - 1, MAX_SEQ]
    assert reader.end_seq() == MAX_SEQ + 1


def test_a_closed_writer_refuses_work_and_close_is_idempotent(journal: Path) -> None:
    w = JournalWriter(journal)
    w.append(*rec(1))
    w.close()
    w.close()
    assert w.closed
    assert "closed" in repr(w)
    for call in (lambda: w.append(*rec(2)), w.flush, w.sync, w.rotate, lambda: w.append_many([])):
        with pytest.raises(JournalUsageError, match="is closed; open a new JournalWriter"):
            call()
    assert read_all(journal) == expected(1, 1)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"segment_bytes": 100}, "segment_bytes=100: expected an integer >= 512"),
        ({"sync": "batch"}, "expected a SyncPolicy"),
        ({"retention": 5}, "expected a Retention or None"),
        ({"first_seq": 0}, "first_seq=0: expected an integer in 1.."),
        ({"buffer_bytes": 0}, "buffer_bytes=0: expected an integer >= 1"),
    ],
)
def test_writer_arguments_are_checked(journal: Path, kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(JournalUsageError, match=words):
        JournalWriter(journal, **kwargs)  # type: ignore[arg-type]
    assert not journal.exists()  # checked before anything touches the disk


def test_writer_on_a_file_path_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(JournalUsageError, match="is a file, not a directory"):
        JournalWriter(path)
    with pytest.raises(JournalUsageError, match="is a file, not a directory"):
        JournalReader(path).first_seq()


def test_reader_without_a_journal_says_so(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no journal at .*does not exist"):
        JournalReader(tmp_path / "missing").end_seq()
    with pytest.raises(JournalError, match="holds no segment files"):
        list(JournalReader(tmp_path).read(1))


@pytest.mark.parametrize(
    ("start", "end", "words"),
    [
        (0, None, "start=0: expected an integer seq"),
        ("1", None, "start='1'"),
        (5, 4, "end=4 with start=5"),
        (1, 2.0, "end=2.0"),
    ],
)
def test_read_arguments_are_checked(journal: Path, start: object, end: object, words: str) -> None:
    JournalWriter(journal).close()
    reader = JournalReader(journal)
    with pytest.raises(JournalUsageError, match=words):
        reader.read(start, end)  # type: ignore[arg-type]
    with pytest.raises(JournalUsageError, match=words):
        reader.read_columns(start, end)  # type: ignore[arg-type]
    with pytest.raises(JournalUsageError, match="max_records=0"):
        reader.iter_columns(1, max_records=0)


def test_unrelated_files_in_the_directory_are_ignored(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 3))
    (journal / "README.txt").write_text("notes")
    (journal / "00000000000000000001-open.seg.bak").write_bytes(b"junk")
    assert read_all(journal) == expected(1, 3)
    with JournalWriter(journal) as w:
        assert w.recovery.clean
        assert w.next_seq == 4
