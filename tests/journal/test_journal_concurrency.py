"""One writer per directory; readers alongside, in threads and other processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from pathlib import Path

import pytest
from journal_support import expected, open_segment, rec, recs, run_python

from actorbus.journal import (
    JournalLockedError,
    JournalReader,
    JournalUsageError,
    JournalWriter,
    SyncPolicy,
)
from actorbus.journal._format import encode_records_frame


def test_a_second_writer_in_the_same_process_is_rejected(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 3))
        with pytest.raises(JournalLockedError) as info:
            JournalWriter(journal)
        message = str(info.value)
        assert "already has a writer" in message
        assert "close that JournalWriter first" in message
        assert isinstance(info.value, JournalUsageError)
        w.append_many(recs(4, 1))  # the first writer is unharmed
    with JournalWriter(journal) as w:  # free again once closed
        assert w.next_seq == 5


def test_a_writer_in_another_process_holds_the_lock_until_it_dies(journal: Path) -> None:
    code = f"""
        import sys
        from actorbus.journal import JournalWriter
        w = JournalWriter({str(journal)!r})
        for s in range(1, 11):
            w.append("T", "/s", s, b"x")
        w.flush()
        w.append("T", "/s", 11, b"lost")  # buffered only
        print("ready", flush=True)
        sys.stdin.readline()
        """
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(JournalLockedError, match=f"by pid {child.pid}"):
            JournalWriter(journal)
        assert [r.seq for r in JournalReader(journal).read(1)] == list(range(1, 11))
    finally:
        child.kill()
        child.communicate(timeout=30)
    with JournalWriter(journal) as w:  # the kernel released the lock with the process
        assert w.recovery.clean
        assert w.next_seq == 11


def test_a_reader_in_another_process_reads_from_the_directory_alone(journal: Path) -> None:
    with JournalWriter(journal, segment_bytes=4096) as w:
        for start in range(1, 501, 20):
            w.append_many(recs(start, 20))
        w.append(*rec(501))  # buffered: no reader may see it
        proc = run_python(
            f"""
            import json, zlib
            from actorbus.journal import JournalReader
            r = JournalReader({str(journal)!r})
            cols = r.read_columns(r.first_seq(), r.end_seq())
            print(json.dumps({{
                "first": r.first_seq(), "last": r.last_seq(),
                "seqs": cols["seq"] == list(range(1, 501)),
                "crc": zlib.crc32(b"".join(cols["body"])),
                "segments": len(r.segments()),
            }}))
            """
        )
        segments = len(JournalReader(journal).segments())
    assert segments > 5
    assert json.loads(proc.stdout) == {
        "first": 1,
        "last": 500,
        "seqs": True,
        "crc": zlib.crc32(b"".join(r[3] for r in recs(1, 500))),
        "segments": segments,
    }


def test_a_reader_sees_a_frame_only_once_it_is_complete(journal: Path) -> None:
    with JournalWriter(journal) as w:
        w.append_many(recs(1, 5))
    reader = JournalReader(journal)
    assert reader.end_seq() == 6
    cols = list(zip(*recs(6, 4), strict=True))
    frame = encode_records_frame(6, *cols)
    seg = open_segment(journal)
    committed = seg.stat().st_size
    with open(seg, "ab", buffering=0) as f:  # play a writer caught mid-write
        for cut in (1, 23, 24, 25, len(frame) - 1):
            f.write(frame[:cut])
            assert reader.end_seq() == 6, cut
            assert list(reader.read(1)) == expected(1, 5)
            assert reader.read_columns(6)["seq"] == []
            f.truncate(committed)
        f.write(frame)
    assert reader.end_seq() == 10
    assert list(reader.read(4)) == expected(4, 6)


def test_a_reader_concurrent_with_a_writer_thread_sees_only_complete_records(
    journal: Path,
) -> None:
    total, batch = 30_000, 300
    writer = JournalWriter(journal, segment_bytes=128 << 10, sync=SyncPolicy.os())
    failures: list[BaseException] = []
    finished = threading.Event()

    def write() -> None:
        try:
            seq = 1
            while seq <= total:
                if seq % 7 == 1:
                    for s in range(seq, seq + 50):
                        writer.append(*rec(s))
                    writer.flush()
                    seq += 50
                else:
                    writer.append_many(recs(seq, batch))
                    seq += batch
        except BaseException as exc:
            failures.append(exc)
        finally:
            writer.close()
            finished.set()

    thread = threading.Thread(target=write, name="journal-test-writer")
    thread.start()
    try:
        reader = JournalReader(journal)
        next_seq, reads = 1, 0
        deadline = time.monotonic() + 60
        while next_seq <= total and not failures:
            assert time.monotonic() < deadline, f"reader stuck at seq {next_seq}"
            cols = reader.read_columns(next_seq)
            n = len(cols["seq"])
            if n == 0:
                finished.wait(0.001)
                continue
            reads += 1
            assert cols["seq"] == list(range(next_seq, next_seq + n))
            assert list(
                zip(cols["type_name"], cols["subject"], cols["timestamp"], cols["body"])
            ) == [rec(s) for s in cols["seq"]]
            assert reader.end_seq() >= next_seq + n
            next_seq += n
    finally:
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert not failures, failures
    assert next_seq >= total + 1
    assert reads >= 1
    print(f"reader caught up in {reads} reads")
