"""The on-disk format: names, header, frames — the bytes docs/journal.md promises."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

import actorbus.journal as journal_pkg
from actorbus import Error, UsageError
from actorbus.journal import JournalCorruptError, JournalReader, JournalUsageError, JournalWriter
from actorbus.journal._format import (
    FRAME_HEADER,
    KIND_RECORDS,
    KIND_SEAL,
    MAGIC,
    SEAL_FRAME_BYTES,
    SEGMENT_HEADER,
    PayloadError,
    _frame,
    decode_payload,
    decode_seal,
    encode_records_frame,
    encode_seal_frame,
    encode_segment_header,
    frame_crc,
    open_segment_name,
    parse_segment_name,
    sealed_segment_name,
)
from actorbus.journal._segments import FrameCursor, Stop


def test_public_api_is_exactly_all() -> None:
    public = {n for n in dir(journal_pkg) if not n.startswith("_")}
    assert set(journal_pkg.__all__) <= public
    for name in journal_pkg.__all__:
        obj = getattr(journal_pkg, name)
        assert obj.__doc__, f"{name} has no docstring"
        assert obj.__module__.startswith("actorbus.journal")
    assert journal_pkg.__doc__ is not None
    assert "Theory of operation" in journal_pkg.__doc__


def test_errors_hang_under_the_package_root() -> None:
    assert issubclass(journal_pkg.JournalError, Error)
    assert issubclass(JournalUsageError, UsageError)
    assert issubclass(journal_pkg.JournalLockedError, JournalUsageError)
    assert issubclass(JournalCorruptError, journal_pkg.JournalError)
    assert issubclass(journal_pkg.RecordsDeletedError, journal_pkg.JournalError)


def test_segment_names_sort_by_seq_and_parse_back() -> None:
    assert open_segment_name(50001) == "00000000000000050001-open.seg"
    assert sealed_segment_name(1, 50000) == "00000000000000000001-00000000000000050000.seg"
    assert parse_segment_name("00000000000000050001-open.seg") == (50001, None)
    assert parse_segment_name("00000000000000000001-00000000000000050000.seg") == (1, 50000)
    big = (1 << 63) - 1
    assert parse_segment_name(sealed_segment_name(big - 5, big)) == (big - 5, big)
    for other in (
        "writer.lock",
        "00000000000000000001-open.seg.tmp",
        "1-2.seg",
        "00000000000000000001-00000000000000000002.seg.bak",
        "x0000000000000000001-open.seg",
    ):
        assert parse_segment_name(other) is None
    names = [sealed_segment_name(f, f + 9) for f in (1, 11, 101, 1001)] + [open_segment_name(1011)]
    assert sorted(names) == names


def test_segment_header_is_magic_then_first_seq() -> None:
    header = encode_segment_header(42)
    assert header == b"ABJRNL\x00\x01" + (42).to_bytes(8, "little")
    assert SEGMENT_HEADER.size == 16
    assert header[:8] == MAGIC


def test_records_frame_layout_is_documented_bytes() -> None:
    frame = encode_records_frame(7, ["T", "U"], ["/a", "/b"], [1, -2], [b"x", b""])
    crc, length, first, count, kind = struct.unpack_from("<IIQII", frame)
    assert FRAME_HEADER.size == 24
    assert (length, first, count, kind) == (len(frame) - 24, 7, 2, KIND_RECORDS)
    assert crc == zlib.crc32(frame[4:])  # crc32 of everything after the crc field
    payload = frame[24:]
    assert msgpack.unpackb(payload) == [["T", "U"], ["/a", "/b"], [1, -2], [b"x", b""]]
    assert decode_payload(payload, 2) == (["T", "U"], ["/a", "/b"], [1, -2], [b"x", b""])


def test_seal_frame_layout() -> None:
    frame = encode_seal_frame(101, -5, 99)
    assert len(frame) == SEAL_FRAME_BYTES == 40
    crc, length, first, count, kind = struct.unpack_from("<IIQII", frame)
    assert (length, first, count, kind) == (16, 101, 0, KIND_SEAL)
    assert crc == frame_crc(frame[:24], frame[24:])
    assert decode_seal(frame[24:]) == (-5, 99)


@pytest.mark.parametrize(
    ("payload", "count"),
    [
        (b"\xc1", 1),  # never-used msgpack byte
        (msgpack.packb([[1], [2], [3]]), 1),  # 3 columns
        (msgpack.packb([["a"], ["b"], [1], [b""]]), 2),  # wrong count
        (msgpack.packb({"a": 1}), 1),
        (msgpack.packb([["a"], ["b"], [1], [b""]]) + b"\x00", 1),  # extra data
    ],
)
def test_decode_payload_rejects_what_no_writer_writes(payload: bytes, count: int) -> None:
    with pytest.raises(PayloadError):
        decode_payload(payload, count)


def _cursor_over(tmp_path: Path, data: bytes, next_seq: int) -> FrameCursor:
    path = tmp_path / "frames.bin"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return FrameCursor(fd, 0, next_seq)


def _walk(cursor: FrameCursor) -> list[tuple[int, int]]:
    out = []
    try:
        while (frame := cursor.next()) is not None:
            out.append((frame.first_seq, frame.count))
    finally:
        os.close(cursor.fd)
    return out


def test_cursor_walks_frames_and_stops_cleanly_at_end(tmp_path: Path) -> None:
    a = encode_records_frame(1, ["T"] * 3, ["/s"] * 3, [1, 2, 3], [b"a", b"b", b"c"])
    b = encode_records_frame(4, ["T"], ["/s"], [4], [b"d"])
    cursor = _cursor_over(tmp_path, a + b + encode_seal_frame(5, 1, 4), 1)
    assert _walk(cursor) == [(1, 3), (4, 1), (5, 0)]
    assert cursor.stop is Stop.END
    assert cursor.next_seq == 5


@given(cut=st.integers(min_value=1, max_value=200))
def test_cursor_reports_any_torn_tail_as_torn(
    tmp_path_factory: pytest.TempPathFactory, cut: int
) -> None:
    tmp = tmp_path_factory.mktemp("torn")
    a = encode_records_frame(1, ["T"], ["/s"], [1], [b"a" * 40])
    b = encode_records_frame(2, ["T"] * 2, ["/s"] * 2, [2, 3], [b"b" * 50, b"c" * 60])
    cut = min(cut, len(b) - 1)
    cursor = _cursor_over(tmp, a + b[:cut], 1)
    assert _walk(cursor) == [(1, 1)]
    assert cursor.stop is Stop.TORN
    assert cursor.offset == len(a)


def test_cursor_rejects_bad_crc_wrong_seq_and_garbage(tmp_path: Path) -> None:
    good = encode_records_frame(1, ["T"], ["/s"], [1], [b"payload"])
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    cursor = _cursor_over(tmp_path, bytes(flipped), 1)
    assert _walk(cursor) == []
    assert cursor.stop is Stop.CRC

    cursor = _cursor_over(tmp_path, good, 2)  # expected seq 2, frame says 1
    assert _walk(cursor) == []
    assert cursor.stop is Stop.INVALID
    assert "seq 1" in cursor.detail

    cursor = _cursor_over(tmp_path, b"\x00" * 64, 1)  # what a power loss can leave
    assert _walk(cursor) == []
    assert cursor.stop is Stop.INVALID


def test_cursor_rejects_an_oversized_length_from_the_prefix(tmp_path: Path) -> None:
    header = struct.pack("<IIQII", 0, (1 << 32) - 1, 1, 1, KIND_RECORDS)
    cursor = _cursor_over(tmp_path, header, 1)
    assert _walk(cursor) == []
    assert cursor.stop is Stop.INVALID
    assert "exceeds" in cursor.detail


def test_cursor_skips_unwanted_frames_without_reading_their_payload(tmp_path: Path) -> None:
    frames = b"".join(
        encode_records_frame(s, ["T"] * 10, ["/s"] * 10, list(range(10)), [b"z" * 100] * 10)
        for s in range(1, 101, 10)
    )
    cursor = _cursor_over(tmp_path, frames, 1)
    seen = []
    try:
        while (frame := cursor.next(wanted_from=55)) is not None:
            seen.append((frame.first_seq, frame.payload is not None))
    finally:
        os.close(cursor.fd)
    assert seen[:5] == [(s, False) for s in (1, 11, 21, 31, 41)]
    assert seen[5:] == [(s, True) for s in (51, 61, 71, 81, 91)]


def test_corrupt_error_carries_the_path() -> None:
    err = JournalCorruptError("broken", path="/x/y.seg")
    assert err.path == "/x/y.seg"
    assert str(err) == "broken"


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (_frame(1, 0, KIND_RECORDS, b"\x94\x90\x90\x90\x90"), "records frame with 0 records"),
        (_frame(1, 0, KIND_SEAL, b"\x00" * 8), "seal frame with count 0 and length 8"),
        (_frame(1, 1, 7, b""), "unknown frame kind 7"),
    ],
)
def test_cursor_rejects_frames_no_writer_makes(tmp_path: Path, frame: bytes, words: str) -> None:
    cursor = _cursor_over(tmp_path, frame, 1)
    assert _walk(cursor) == []
    assert cursor.stop is Stop.INVALID
    assert words in cursor.detail


def test_reader_and_writer_describe_themselves(tmp_path: Path) -> None:
    with JournalWriter(tmp_path) as w:
        assert w.path == tmp_path
        assert repr(w) == f"<JournalWriter {str(tmp_path)!r} next_seq=1 open>"
    reader = JournalReader(tmp_path)
    assert reader.path == tmp_path
    assert repr(reader) == f"<JournalReader {str(tmp_path)!r}>"
