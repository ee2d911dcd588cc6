"""JournalLog: the persistent publisher log over the journal (actorbus.qos._journal_log)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actorbus import Notification
from actorbus.bus.codec import decode, encode
from actorbus.journal import (
    JournalLockedError,
    JournalReader,
    JournalUsageError,
    JournalWriter,
    Retention,
    SyncPolicy,
)
from actorbus.qos._journal_log import JournalLog

SRC = str(Path(__file__).resolve().parents[2] / "src")
SUBJECT = "/qos/log"


class Tick(Notification):
    value: int


TYPE = Tick.__type_name__


def _log(path: Path, **kw: object) -> JournalLog:
    return JournalLog(path, type_name=TYPE, subject=SUBJECT, **kw)  # type: ignore[arg-type]


def _tick(i: int, ts: int | None = None) -> tuple[int, bytes]:
    ts = 1_700_000_000_000 + 10 * i if ts is None else ts
    return ts, encode(Tick(subject=SUBJECT, timestamp=ts, value=i))


def _fill(log: JournalLog, lo: int, hi: int, per_commit: int = 1) -> None:
    for i in range(lo, hi):
        log.append(*_tick(i))
        if (i - lo + 1) % per_commit == 0:
            log.commit()
    log.commit()


def _read_syscalls() -> int:
    with open("/proc/self/io", "rb") as f:
        for line in f.read().splitlines():
            if line.startswith(b"syscr:"):
                return int(line.split()[1])
    raise AssertionError("no syscr in /proc/self/io")


def _reads_during(fn: Callable[[], object]) -> int:
    """Read syscalls made by ``fn``, less those of measuring itself."""
    a = _read_syscalls()
    b = _read_syscalls()
    fn()
    c = _read_syscalls()
    return (c - b) - (b - a)


def test_append_commit_read_and_seqs(tmp_path: Path) -> None:
    with_log = _log(tmp_path / "j")
    try:
        assert (with_log.next_seq, with_log.first_seq) == (1, 1)
        assert with_log.append(*_tick(1)) == 1
        assert with_log.append(*_tick(2)) == 2
        assert with_log.next_seq == 3
        assert with_log.read(1, 10) == []  # not committed yet
        assert with_log.commit() == 2
        got = with_log.read(1, 10)
        assert [(s, t) for s, t, _ in got] == [(1, _tick(1)[0]), (2, _tick(2)[0])]
        assert decode(Tick, got[1][2]).value == 2
        assert with_log.read(2, 1) == [got[1]]
        assert with_log.read(3, 10) == []
        assert with_log.read(1, 0) == []
        with_log.release(2)  # nothing: retention decides
        assert with_log.read(1, 10) == got
    finally:
        with_log.close()
    with_log.close()  # idempotent
    with pytest.raises(JournalUsageError, match="closed"):
        with_log.append(*_tick(3))


def test_seqs_continue_after_a_restart_and_history_is_read_from_disk(tmp_path: Path) -> None:
    log = _log(tmp_path / "j")
    _fill(log, 1, 101, per_commit=7)
    log.close()
    log = _log(tmp_path / "j")
    try:
        assert (log.first_seq, log.next_seq) == (1, 101)
        got = log.read(1, 1000)
        assert [s for s, _, _ in got] == list(range(1, 101))
        assert [decode(Tick, b).value for _, _, b in got] == list(range(1, 101))
        assert log.read(95, 3) == got[94:97]
        assert log.append(*_tick(101)) == 101
        assert log.commit() == 101
        assert log.read(100, 10) == [got[99], (101, *_tick(101))]
    finally:
        log.close()


def test_a_killed_publisher_keeps_every_committed_record_and_continues(tmp_path: Path) -> None:
    path = tmp_path / "j"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from actorbus.qos._journal_log import JournalLog\n"
            f"log = JournalLog({str(path)!r}, type_name={TYPE!r}, subject={SUBJECT!r})\n"
            "i = 0\n"
            "while True:\n"
            "    i += 1\n"
            "    log.append(i, i.to_bytes(8, 'little'))\n"
            "    if i % 3 == 0:\n"
            "        print(log.commit(), flush=True)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert child.stdout is not None
    durable = 0
    try:
        while durable < 300:
            durable = int(child.stdout.readline())
    finally:
        child.kill()
        child.communicate(timeout=30)
    log = _log(path)
    try:
        assert log.next_seq > durable
        got = log.read(1, 100_000)
        assert [s for s, _, _ in got] == list(range(1, log.next_seq))
        assert all(int.from_bytes(b, "little") == s == t for s, t, b in got)
        assert log.append(7, b"next") == log.next_seq - 1
    finally:
        log.close()


def test_recent_reads_come_from_memory_older_ones_from_disk(tmp_path: Path) -> None:
    log = _log(tmp_path / "j", tail_records=50)
    try:
        _fill(log, 1, 201, per_commit=10)
        recent: list[object] = []
        old: list[object] = []
        tail_reads = _reads_during(lambda: recent.extend(log.read(160, 30)))
        disk_reads = _reads_during(lambda: old.extend(log.read(100, 30)))
        assert tail_reads == 0
        assert disk_reads > 0
        assert [s for s, _, _ in recent] == list(range(160, 190))  # type: ignore[misc]
        assert [s for s, _, _ in old] == list(range(100, 130))  # type: ignore[misc]
        # a read that starts on disk stops at max_count, whatever the tail holds
        assert [s for s, _, _ in log.read(140, 20)] == list(range(140, 160))
    finally:
        log.close()


def test_tail_is_bounded_by_bytes_too(tmp_path: Path) -> None:
    log = _log(tmp_path / "j", tail_bytes=100)
    try:
        _fill(log, 1, 3001, per_commit=100)
        held, tail = 0, 0
        while held + len(_tick(3000 - tail)[1]) <= 100:
            held += len(_tick(3000 - tail)[1])
            tail += 1
        assert tail > 3
        assert _reads_during(lambda: log.read(3001 - tail, 10)) == 0
        assert _reads_during(lambda: log.read(3000 - tail - 5, 1)) > 0
        assert [s for s, _, _ in log.read(1, 5000)] == list(range(1, 3001))
    finally:
        log.close()


def test_a_journal_reader_reads_exactly_what_the_log_appended(tmp_path: Path) -> None:
    """The Spark source reads a persistent feed's history with a JournalReader."""
    log = _log(tmp_path / "j", segment_bytes=2048)
    sent = [Tick(subject=SUBJECT, timestamp=1_700_000_000_000 + i, value=i) for i in range(500)]
    try:
        for i, msg in enumerate(sent):
            log.append(msg.timestamp, encode(msg))
            if i % 13 == 0:
                log.commit()
        log.commit()
        reader = JournalReader(tmp_path / "j")
        assert (reader.first_seq(), reader.end_seq()) == (1, 501)
        cols = reader.read_columns(reader.first_seq(), reader.end_seq())
        assert cols["seq"] == list(range(1, 501))
        assert set(cols["type_name"]) == {TYPE}
        assert set(cols["subject"]) == {SUBJECT}
        assert cols["timestamp"] == [m.timestamp for m in sent]
        assert [decode(Tick, b) for b in cols["body"]] == sent
        assert len(reader.segments()) > 5
    finally:
        log.close()


def test_read_below_first_seq_starts_at_first_seq(tmp_path: Path) -> None:
    log = _log(tmp_path / "j", segment_bytes=1024, retention=Retention(max_bytes=4096))
    try:
        _fill(log, 1, 401, per_commit=5)
        first = log.first_seq
        assert first > 1
        assert first == JournalReader(tmp_path / "j").first_seq()
        got = log.read(1, 3)
        assert [s for s, _, _ in got] == [first, first + 1, first + 2]
        assert log.seq_at_time(0) == first
        # the in-memory tail still holds seqs retention deleted: never returned
        assert log.seq_at_time(_tick(5)[0]) == first
        assert log.read(5, 1)[0][0] == first
    finally:
        log.close()


def test_seq_at_time_matches_a_scan_and_reads_little(tmp_path: Path) -> None:
    path = tmp_path / "j"
    log = _log(path, segment_bytes=1024, tail_records=10)
    stamps: list[int] = []
    try:
        for i in range(1, 3001):
            ts = 1_000 + 10 * (i // 3)  # runs of equal timestamps
            stamps.append(ts)
            log.append(*_tick(i, ts))
            if i % 5 == 0:
                log.commit()
        log.commit()
        segments = len(JournalReader(path).segments())
        assert segments > 100

        def scan(t: int) -> int:
            return next((i + 1 for i, s in enumerate(stamps) if s >= t), len(stamps) + 1)

        for t in (0, 1_000, 1_001, 1_005, 2_500, 5_000, 9_990, 10_990, 10_991, 99_999):
            assert log.seq_at_time(t) == scan(t), t
        # a search reads a few segments' worth, not every segment
        assert _reads_during(lambda: log.seq_at_time(5_000)) < segments // 2
    finally:
        log.close()
    log = _log(path)  # no tail after a restart: all from disk
    try:
        for t in (0, 1_001, 7_777, 10_990, 10_991):
            assert log.seq_at_time(t) == scan(t), t
        # records appended and not committed yet are found after the committed ones
        log.append(*_tick(3001, 20_000))
        log.append(*_tick(3002, 30_000))
        assert log.seq_at_time(25_000) == 3002
        assert log.seq_at_time(30_001) == 3003 == log.next_seq
    finally:
        log.close()


def test_commit_returns_the_durable_seq_per_policy(tmp_path: Path) -> None:
    now = [0]
    log = _log(tmp_path / "i", sync=SyncPolicy.interval(50), monotonic_ns=lambda: now[0])
    try:
        log.append(*_tick(1))
        assert log.commit() == 0  # written, visible, not fsynced yet
        assert [s for s, _, _ in log.read(1, 5)] == [1]
        now[0] += 49_000_000
        assert log.commit() == 0
        now[0] += 1_000_000
        assert log.commit() == 1  # the interval passed: fsynced
        log.append(*_tick(2))
        assert log.commit() == 1
        now[0] += 50_000_000
        assert log.commit() == 2
    finally:
        log.close()
    for policy in (SyncPolicy.batch(), SyncPolicy.os()):
        log = _log(tmp_path / policy.mode, sync=policy)
        try:
            log.append(*_tick(1))
            log.append(*_tick(2))
            assert log.commit() == 2
        finally:
            log.close()


def test_a_second_writer_in_this_process_is_refused_with_path_pid_and_fix(tmp_path: Path) -> None:
    log = _log(tmp_path / "j")
    try:
        with pytest.raises(JournalLockedError) as info:
            _log(tmp_path / "j")
        text = str(info.value)
        assert str(tmp_path / "j") in text
        assert f"pid {os.getpid()}" in text
        assert "journal= directory" in text
    finally:
        log.close()


def test_a_writer_in_another_process_is_named(tmp_path: Path) -> None:
    path = tmp_path / "j"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from actorbus.journal import JournalWriter\n"
            f"w = JournalWriter({str(path)!r})\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n"
            "w.close()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(JournalLockedError, match=f"pid {child.pid}"):
            _log(path)
    finally:
        child.communicate("", timeout=30)
    assert child.returncode == 0
    _log(path).close()


@pytest.mark.parametrize("foreign_first", [False, True])
@pytest.mark.parametrize(
    ("type_name", "subject"), [("other.Type", SUBJECT), (TYPE, "/other"), ("x.Y", "/z")]
)
def test_a_journal_of_another_feed_is_refused_naming_both(
    tmp_path: Path, type_name: str, subject: str, foreign_first: bool
) -> None:
    records = [(TYPE, SUBJECT, 1, b"x"), (type_name, subject, 2, b"y")]
    with JournalWriter(tmp_path / "j") as w:
        w.append_many(records[::-1] if foreign_first else records)
    with pytest.raises(JournalUsageError) as info:
        _log(tmp_path / "j")
    text = str(info.value)
    assert f"{TYPE}:{SUBJECT!r}" in text
    assert f"{type_name}:{subject!r}" in text
    assert "journal= directory" in text
    with JournalWriter(tmp_path / "j"):  # the refused log released the directory
        pass


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(JournalUsageError, match="type_name"):
        JournalLog(tmp_path / "j", type_name="", subject=SUBJECT)
    with pytest.raises(JournalUsageError, match="sync="):
        JournalLog(tmp_path / "j", type_name=TYPE, subject=SUBJECT, sync="batch")  # type: ignore[arg-type]
    with pytest.raises(JournalUsageError, match="tail_records"):
        _log(tmp_path / "j", tail_records=0)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 120)),
        st.tuples(st.just("append"), st.integers(1, 120)),
        st.tuples(st.just("commit"), st.just(0)),
        st.tuples(st.just("commit"), st.just(0)),
        st.tuples(st.just("read"), st.integers(-5, 400), st.integers(1, 60)),
        st.tuples(st.just("time"), st.integers(0, 5000)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops, tail=st.sampled_from([1, 16, 8192]), retain=st.booleans())
@example(  # the tail still holds seqs retention deleted
    ops=[("append", 120), ("commit", 0)] * 3 + [("time", 100), ("read", 3, 5)],
    tail=8192,
    retain=True,
)
def test_reads_and_time_positions_agree_with_a_model(
    ops: list[tuple[object, ...]], tail: int, retain: bool
) -> None:
    """Whatever mix of appends, commits, reopens: a read returns the committed
    records from max(start, first_seq), in memory or from disk alike."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j"
        kw: dict[str, object] = {"segment_bytes": 1024, "tail_records": tail}
        if retain:
            kw["retention"] = Retention(max_bytes=3000)
        model: list[tuple[int, bytes]] = []  # committed, index = seq - 1
        pending: list[tuple[int, bytes]] = []
        log = _log(path, **kw)
        try:
            for op in ops:
                if op[0] == "append":
                    for _ in range(int(op[1])):  # type: ignore[call-overload]
                        rec = _tick(len(model) + len(pending) + 1, 10 * (len(model) + len(pending)))
                        assert log.append(*rec) == len(model) + len(pending) + 1
                        pending.append(rec)
                elif op[0] == "commit":
                    assert log.commit() == len(model) + len(pending)
                    model += pending
                    pending = []
                elif op[0] == "reopen":
                    log.close()  # close writes what was appended
                    model += pending
                    pending = []
                    log = _log(path, **kw)
                first = log.first_seq
                assert first == JournalReader(path).first_seq()
                if op[0] == "read":
                    start, count = int(op[1]), int(op[2])  # type: ignore[call-overload]
                    lo = max(start, first)
                    want = [(s, *model[s - 1]) for s in range(lo, min(lo + count, len(model) + 1))]
                    assert log.read(start, count) == want
                elif op[0] == "time":
                    t = int(op[1])  # type: ignore[call-overload]
                    held = [
                        (i + 1, ts) for i, (ts, _) in enumerate(model + pending) if i + 1 >= first
                    ]
                    want_seq = next((s for s, ts in held if ts >= t), len(model) + len(pending) + 1)
                    assert log.seq_at_time(t) == want_seq
        finally:
            log.close()
