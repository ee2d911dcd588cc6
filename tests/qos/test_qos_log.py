"""MemoryLog, the in-memory PublisherLog: seqs, reads, release, time positions."""

from __future__ import annotations

from actorbus.qos import MemoryLog, PublisherLog


def test_seqs_reads_and_release() -> None:
    log = MemoryLog()
    assert isinstance(log, MemoryLog)
    typed: PublisherLog = log
    assert (typed.first_seq, typed.next_seq) == (1, 1)
    for i in range(10):
        assert log.append(1000 + i, bytes([i]) * 3) == i + 1
    assert log.commit() == 10
    assert (log.held, log.held_bytes) == (10, 30)
    assert log.read(4, 3) == [
        (4, 1003, b"\x03" * 3),
        (5, 1004, b"\x04" * 3),
        (6, 1005, b"\x05" * 3),
    ]
    assert log.read(9, 100) == [(9, 1008, b"\x08" * 3), (10, 1009, b"\x09" * 3)]
    assert log.read(11, 5) == []
    log.release(4)
    assert (log.first_seq, log.next_seq, log.held, log.held_bytes) == (5, 11, 6, 18)
    assert log.read(1, 2) == [(5, 1004, b"\x04" * 3), (6, 1005, b"\x05" * 3)]
    log.release(3)  # below what is held: nothing
    assert log.first_seq == 5
    assert log.seq_at_time(1006) == 7
    assert log.seq_at_time(0) == 5
    assert log.seq_at_time(5000) == 11
    log.release(100)
    assert (log.first_seq, log.next_seq, log.held, log.held_bytes) == (11, 11, 0, 0)
    assert log.append(2000, b"x") == 11


def test_released_entries_are_cut_off_in_bulk_and_seqs_stay_right() -> None:
    log = MemoryLog(start=7)
    total = 0
    for round_ in range(5):
        for i in range(5000):
            log.append(round_ * 5000 + i, b"ab")
            total += 1
        log.release(log.next_seq - 100)
        assert log.held == 99 or log.held == 100 - 1
        assert log.read(log.first_seq, 1)[0][0] == log.first_seq
    assert log.next_seq == 7 + total
    last = log.read(log.next_seq - 1, 5)
    assert last == [(log.next_seq - 1, 24_999, b"ab")]
    assert log.held_bytes == 2 * log.held
