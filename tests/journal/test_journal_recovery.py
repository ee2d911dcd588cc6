"""Crash safety: torn tails, interrupted rotations, damage, seq continuity."""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import pytest
from journal_support import expected, open_segment, read_all, rec, recs, run_python, segment_names

from actorbus.journal import (
    JournalCorruptError,
    JournalError,
    JournalReader,
    JournalWriter,
    SyncPolicy,
)
from actorbus.journal._format import encode_records_frame, encode_seal_frame


def _frame(first: int, n: int) -> bytes:
    cols = list(zip(*recs(first, n), strict=True))
    return encode_records_frame(first, *cols)


def _write_journal(journal: Path, n: int, **kwargs: object) -> None:
    with JournalWriter(journal, **kwargs) as w:  # type: ignore[arg-type]
        for start in range(1, n + 1, 10):
            w.append_many(recs(start, min(10, n - start + 1)))


def _append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _reopen_and_check(journal: Path, good: int, torn: int, reason: str) -> None:
    """Reopen; the torn tail is cut, seqs continue after ``good``, appends work."""
    with JournalWriter(journal) as w:
        report = w.recovery
        assert not report.clean
        assert report.truncated_bytes == torn
        assert reason in report.reason
        assert report.next_seq == w.next_seq == good + 1
        assert any("truncated" in a for a in report.actions)
        assert w.append_many(recs(good + 1, 5)) == range(good + 1, good + 6)
    assert read_all(journal) == expected(1, good + 5)
    with JournalWriter(journal) as w:
        assert w.recovery.clean


def test_a_partly_written_frame_is_truncated_on_reopen(journal: Path) -> None:
    _write_journal(journal, 30)
    size = open_segment(journal).stat().st_size
    partial = _frame(31, 4)[:57]
    _append_bytes(open_segment(journal), partial)
    # readers ignore the torn tail even before the writer repairs it
    assert read_all(journal) == expected(1, 30)
    assert JournalReader(journal).end_seq() == 31
    _reopen_and_check(journal, 30, len(partial), "incomplete frame")
    assert open_segment(journal).stat().st_size > size


def test_a_torn_frame_header_is_truncated(journal: Path) -> None:
    _write_journal(journal, 12)
    _append_bytes(open_segment(journal), _frame(13, 2)[:10])
    _reopen_and_check(journal, 12, 10, "10 of 24 header bytes")


def test_a_complete_frame_with_a_bad_crc_is_truncated(journal: Path) -> None:
    _write_journal(journal, 20)
    bad = bytearray(_frame(21, 3))
    bad[-5] ^= 0x40
    _append_bytes(open_segment(journal), bytes(bad))
    assert JournalReader(journal).end_seq() == 21
    _reopen_and_check(journal, 20, len(bad), "bad crc32")


def test_zeros_left_by_a_power_loss_are_truncated(journal: Path) -> None:
    _write_journal(journal, 7)
    _append_bytes(open_segment(journal), bytes(4096))
    _reopen_and_check(journal, 7, 4096, "unknown frame kind 0")


def test_damage_in_the_middle_of_the_open_segment_drops_everything_after_it(
    journal: Path,
) -> None:
    _write_journal(journal, 40)  # frames of 10: seqs 1-10, 11-20, 21-30, 31-40
    seg = open_segment(journal)
    data = bytearray(seg.read_bytes())
    offset = 16 + 2 * len(_frame(1, 10))  # the third frame's header (frames are equal size)
    data[offset + 30] ^= 0xFF
    seg.write_bytes(bytes(data))
    assert JournalReader(journal).end_seq() == 21
    _reopen_and_check(journal, 20, len(data) - offset, "bad crc32")


def test_a_crash_after_writing_the_seal_frame_finishes_the_rotation(journal: Path) -> None:
    _write_journal(journal, 25)
    seg = open_segment(journal)
    _append_bytes(seg, encode_seal_frame(26, 0, 10**12))
    reader = JournalReader(journal)
    assert reader.end_seq() == 26  # the seal frame is no record
    with JournalWriter(journal) as w:
        assert any("finished sealing" in a for a in w.recovery.actions)
        assert w.recovery.truncated_bytes == 0
        assert w.next_seq == 26
        w.append_many(recs(26, 3))
    assert segment_names(journal) == [
        "00000000000000000001-00000000000000000025.seg",
        "00000000000000000026-open.seg",
    ]
    assert read_all(journal) == expected(1, 28)


def test_a_crash_after_sealing_before_the_next_segment_exists(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 9))
        w.rotate()
    open_segment(journal).unlink()
    assert JournalReader(journal).end_seq() == 10
    with JournalWriter(journal) as w:
        assert any("only sealed segments" in a for a in w.recovery.actions)
        assert w.next_seq == 10
        w.append(*rec(10))
    assert read_all(journal) == expected(1, 10)


def test_a_segment_that_never_got_its_name_is_removed(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 3))
    stray = journal / "00000000000000000004-open.seg.tmp"
    stray.write_bytes(b"ABJ")
    assert read_all(journal) == expected(1, 3)
    with JournalWriter(journal) as w:
        assert w.recovery.clean
    assert not stray.exists()


def test_seqs_continue_across_many_restarts(journal: Path) -> None:
    seq = 1
    for round_ in range(8):
        with JournalWriter(journal, segment_bytes=1024, sync=SyncPolicy.os()) as w:
            assert w.next_seq == seq
            for s in range(seq, seq + round_ + 3):
                w.append(*rec(s))
            seq += round_ + 3
    assert read_all(journal) == expected(1, seq - 1)


def test_a_process_crash_keeps_everything_flushed(journal: Path) -> None:
    """A real process appends, flushes, buffers more, and dies without closing."""
    run_python(
        f"""
        import os
        from actorbus.journal import JournalWriter, SyncPolicy
        w = JournalWriter({str(journal)!r}, sync=SyncPolicy.os(), segment_bytes=2048)
        for s in range(1, 101):
            w.append("T", "/s", s, s.to_bytes(4, "little"))
            if s % 7 == 0:
                w.flush()
        os._exit(0)  # no close, no flush: the last 2 records exist only in memory
        """
    )
    with JournalWriter(journal) as w:
        assert w.recovery.clean
        assert w.next_seq == 99
    got = read_all(journal)
    assert [r.seq for r in got] == list(range(1, 99))
    assert [r.body for r in got] == [s.to_bytes(4, "little") for s in range(1, 99)]


def test_a_failed_write_keeps_the_segment_clean(journal: Path) -> None:
    """The file size limit (RLIMIT_FSIZE) makes a real write fail half-way."""
    proc = run_python(
        f"""
        import resource, signal
        from actorbus.journal import JournalError, JournalWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        w = JournalWriter({str(journal)!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))
        ok = 0
        try:
            for s in range(1, 1000, 10):
                w.append_many([("T", "/s", t, bytes(100)) for t in range(s, s + 10)])
                ok = s + 9
        except JournalError as exc:
            print(ok, w.next_seq, "nothing of them was kept" in str(exc))
        w.close()
        """
    )
    ok, next_seq, said = proc.stdout.split()
    assert said == "True"
    assert int(next_seq) == int(ok) + 1
    with JournalWriter(journal) as w:
        assert w.recovery.clean  # the partial frame was truncated at once
        assert w.next_seq == int(ok) + 1
    assert [r.seq for r in read_all(journal)] == list(range(1, int(ok) + 1))


def test_damage_in_a_sealed_segment_is_reported_not_skipped(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 10))
        w.rotate()
        w.append_many(recs(11, 10))
        w.rotate()
        w.append_many(recs(21, 10))
    sealed = journal / "00000000000000000011-00000000000000000020.seg"
    data = bytearray(sealed.read_bytes())
    data[100] ^= 0xFF
    sealed.write_bytes(bytes(data))
    reader = JournalReader(journal)
    with pytest.raises(JournalCorruptError, match="inside a sealed segment") as info:
        list(reader.read(1))
    assert info.value.path == str(sealed)
    assert "restore it from a backup" in str(info.value)
    assert list(reader.read(1, 11)) == expected(1, 10)
    assert list(reader.read(21)) == expected(21, 10)


def test_a_truncated_sealed_segment_is_damage(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 10))
        w.append_many(recs(11, 10))
        w.rotate()
    sealed = journal / "00000000000000000001-00000000000000000020.seg"
    os.truncate(sealed, sealed.stat().st_size - 60)
    with pytest.raises(JournalCorruptError, match="sealed segment"):
        list(JournalReader(journal).read(15))


def test_a_missing_middle_segment_is_reported(journal: Path) -> None:
    with JournalWriter(journal) as w:
        for start in (1, 11, 21):
            w.append_many(recs(start, 10))
            w.rotate()
    (journal / "00000000000000000011-00000000000000000020.seg").unlink()
    with pytest.raises(JournalCorruptError, match="starts at seq 21 but .* ends at seq 10"):
        JournalReader(journal).first_seq()
    with pytest.raises(JournalCorruptError, match="move the stray segment files out"):
        JournalWriter(journal)


def test_a_foreign_file_with_a_segment_name_is_reported(journal: Path) -> None:
    journal.mkdir()
    (journal / "00000000000000000001-open.seg").write_bytes(b"not a journal segment at all")
    with pytest.raises(JournalCorruptError, match="not the journal magic"):
        JournalWriter(journal)
    with pytest.raises(JournalCorruptError, match="not the journal magic"):
        JournalReader(journal).end_seq()
    # the failed open released the lock: a later writer is not locked out
    (journal / "00000000000000000001-open.seg").unlink()
    JournalWriter(journal).close()


def test_a_renamed_segment_is_reported(journal: Path) -> None:
    _write_journal(journal, 5)
    open_segment(journal).rename(journal / "00000000000000000002-open.seg")
    with pytest.raises(JournalCorruptError, match="header says first seq 1"):
        JournalWriter(journal)


def test_a_short_segment_header_is_reported(journal: Path) -> None:
    journal.mkdir()
    (journal / "00000000000000000001-open.seg").write_bytes(b"ABJRNL")
    with pytest.raises(JournalCorruptError, match="only 6 of the 16 header bytes"):
        JournalWriter(journal)


def test_opening_reports_os_errors_as_journal_errors(journal: Path) -> None:
    _write_journal(journal, 3)
    seg = open_segment(journal)
    seg.chmod(0)
    try:
        if os.access(seg, os.R_OK):  # running as root: permissions do not apply
            seg.chmod(0o644)
            seg.rename(journal / "x")
            seg.mkdir()  # a directory with a segment's name cannot be opened for writing
        with pytest.raises(JournalError, match="cannot open journal .* for writing"):
            JournalWriter(journal)
    finally:
        if seg.is_dir():
            seg.rmdir()
            (journal / "x").rename(seg)
        seg.chmod(0o644)
    with JournalWriter(journal) as w:
        assert w.next_seq == 4


def _bad_payload_frame(first: int) -> bytes:
    """A frame with a good crc32 whose payload is not four columns: no torn
    write makes this, only a bug."""
    from actorbus.journal._format import KIND_RECORDS, _frame

    return _frame(first, 1, KIND_RECORDS, msgpack.packb([1, 2, 3]))


def test_a_frame_with_a_good_crc_that_does_not_decode_is_damage(journal: Path) -> None:
    _write_journal(journal, 4)
    _append_bytes(open_segment(journal), _bad_payload_frame(5))
    with pytest.raises(JournalCorruptError, match="has a good crc32 but payload is not 4 columns"):
        list(JournalReader(journal).read(5))
    assert list(JournalReader(journal).read(1, 5)) == expected(1, 4)
    with pytest.raises(JournalCorruptError, match="this is not a torn write"):
        JournalWriter(journal)


def test_an_empty_segment_that_ends_in_a_seal_frame_is_damage(journal: Path) -> None:
    JournalWriter(journal).close()
    _append_bytes(open_segment(journal), encode_seal_frame(1, 0, 0))
    with pytest.raises(JournalCorruptError, match="holds no record"):
        JournalWriter(journal)


@pytest.mark.parametrize(
    ("names", "words"),
    [
        (
            ["00000000000000000001-open.seg", "00000000000000000005-00000000000000000009.seg"],
            "open segment 00000000000000000001-open.seg is followed by",
        ),
        (["00000000000000000005-00000000000000000004.seg"], "ends before it starts"),
        (
            [
                "00000000000000000001-00000000000000000004.seg",
                "00000000000000000001-00000000000000000006.seg",
            ],
            "two sealed segments start at seq 1",
        ),
    ],
)
def test_segment_names_that_cannot_form_a_journal_are_reported(
    journal: Path, names: list[str], words: str
) -> None:
    journal.mkdir()
    for name in names:
        (journal / name).write_bytes(b"")
    with pytest.raises(JournalCorruptError, match=words):
        JournalReader(journal).segments()


def test_a_rotation_of_an_empty_segment_does_nothing(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.rotate()
        w.append_many(recs(1, 2))
        w.rotate()
        w.rotate()
        assert w.stats.rotations == 1
    assert segment_names(journal) == [
        "00000000000000000001-00000000000000000002.seg",
        "00000000000000000003-open.seg",
    ]
