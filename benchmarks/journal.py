"""Journal throughput: append and read rates, each next to a raw baseline measured
in the same run on the same disk.

    .venv/bin/python benchmarks/journal.py [--records N] [--repeat R]

Records carry 100-byte bodies and are appended in batches of 1000.  Baselines:

* appending — the very bytes the journal writes (frames pre-encoded before the
  clock starts), written with one ``write`` per batch (plus ``fdatasync`` per
  batch for the synced case): the I/O floor, so the ratio shows what
  validation, msgpack encoding, crc32 and bookkeeping cost on top;
* reading — the segment files read whole and each frame payload decoded with
  one ``msgpack.unpackb`` (no crc32, no seq ranges, no records built); for the
  columnar cases the decoded columns are also gathered into lists, as
  ``read_columns`` does, since materialising 200k records costs the same
  allocation in both.

The input records are built before timing and then ``gc.freeze()``-d, so the
collector does not rescan the benchmark's own 200k input tuples on every run;
what is measured is the journal's own work.

Budgets: append >= 200k records/s; a fresh reader reading a 50k-record range
(what one Spark partition does per micro-batch) >= 50k records/s.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgpack

from actorbus.journal import JournalReader, JournalWriter, SyncPolicy
from actorbus.journal._format import encode_records_frame

BATCH = 1000
BODY = 100
SEGMENT_BYTES = 16 << 20
APPEND_BUDGET = 200_000
READ_BUDGET = 50_000

Rec = tuple[str, str, int, bytes]


def _records(n: int) -> list[Rec]:
    rnd = os.urandom(BODY + n % 251 + 251)
    base = 1_700_000_000_000
    return [
        ("demo.DataPoint", f"/demo/{i % 16}", base + i, rnd[i % 251 : i % 251 + BODY])
        for i in range(n)
    ]


def _batches(records: list[Rec]) -> list[list[Rec]]:
    return [records[i : i + BATCH] for i in range(0, len(records), BATCH)]


def _best(repeat: int, run: Callable[[Path], float]) -> float:
    """Best wall time of ``repeat`` runs, each in a fresh directory."""
    best = float("inf")
    for _ in range(repeat):
        tmp = Path(tempfile.mkdtemp(prefix="journal-bench-"))
        try:
            best = min(best, run(tmp))
        finally:
            shutil.rmtree(tmp)
    return best


def _append_many(batches: list[list[Rec]], sync: SyncPolicy) -> Callable[[Path], float]:
    def run(tmp: Path) -> float:
        t0 = time.perf_counter()
        with JournalWriter(tmp / "j", segment_bytes=SEGMENT_BYTES, sync=sync) as w:
            for b in batches:
                w.append_many(b)
        return time.perf_counter() - t0

    return run


def _append_one_by_one(batches: list[list[Rec]]) -> Callable[[Path], float]:
    def run(tmp: Path) -> float:
        t0 = time.perf_counter()
        with JournalWriter(tmp / "j", segment_bytes=SEGMENT_BYTES, sync=SyncPolicy.os()) as w:
            append = w.append
            for b in batches:
                for r in b:
                    append(*r)
                w.flush()
        return time.perf_counter() - t0

    return run


def _packb_write(batches: list[list[Rec]]) -> Callable[[Path], float]:
    """The least a msgpack journal can do: one packb and one write per batch."""

    def run(tmp: Path) -> float:
        t0 = time.perf_counter()
        fd = os.open(tmp / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for b in batches:
                os.write(fd, msgpack.packb(b))
        finally:
            os.close(fd)
        return time.perf_counter() - t0

    return run


def _raw_write(frames: list[bytes], *, sync: bool) -> Callable[[Path], float]:
    def run(tmp: Path) -> float:
        t0 = time.perf_counter()
        fd = os.open(tmp / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for f in frames:
                os.write(fd, f)
                if sync:
                    os.fdatasync(fd)
        finally:
            os.close(fd)
        return time.perf_counter() - t0

    return run


def _raw_read(path: Path, *, gather: bool) -> float:
    """Read the segment files whole and unpack every frame payload; with
    ``gather``, also collect the columns into four lists."""
    t0 = time.perf_counter()
    out: list[list[object]] = [[], [], [], []]
    head = struct.Struct("<IIQII")
    for seg in sorted(path.glob("*.seg")):
        data = seg.read_bytes()
        pos = 16
        while pos + 24 <= len(data):
            _, length, _, _, kind = head.unpack_from(data, pos)
            if kind == 1:
                cols = msgpack.unpackb(memoryview(data)[pos + 24 : pos + 24 + length])
                if gather:
                    for o, c in zip(out, cols, strict=True):
                        o.extend(c)
            pos += 24 + length
    seconds = time.perf_counter() - t0
    del out
    return seconds


def _row(
    case: str, n: int, seconds: float, nbytes: int, baseline: str, base_seconds: float
) -> dict[str, object]:
    rate = n / seconds
    base_rate = n / base_seconds
    return {
        "case": case,
        "records": n,
        "seconds": round(seconds, 4),
        "records_per_s": round(rate),
        "mb_per_s": round(nbytes / seconds / 1e6, 1),
        "baseline": baseline,
        "baseline_records_per_s": round(base_rate),
        "ratio": round(rate / base_rate, 2),
    }


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    """Run every case, print a table, return the rows.  ``argv`` holds the
    command-line options; ``main()`` from another script uses the defaults."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args([] if argv is None else argv)
    n, repeat = args.records - args.records % BATCH, args.repeat

    records = _records(n)
    batches = _batches(records)
    frames = []
    seq = 1
    for b in batches:
        frames.append(encode_records_frame(seq, *zip(*b, strict=True)))  # type: ignore[arg-type]
        seq += len(b)
    nbytes = sum(map(len, frames))
    synced_batches = batches[: max(1, len(batches) // 4)]
    synced_n = sum(map(len, synced_batches))
    synced_bytes = sum(map(len, frames[: len(synced_batches)]))
    gc.collect()
    gc.freeze()

    rows: list[dict[str, object]] = []
    raw = _best(repeat, _raw_write(frames, sync=False))
    append_os = _best(repeat, _append_many(batches, SyncPolicy.os()))
    rows.append(_row("append_many, sync=os", n, append_os, nbytes, "raw write/batch", raw))
    rows.append(
        _row(
            "append_many, sync=os",
            n,
            append_os,
            nbytes,
            "packb+write/batch",
            _best(repeat, _packb_write(batches)),
        )
    )
    rows.append(
        _row(
            "append()+flush/1000, sync=os",
            n,
            _best(repeat, _append_one_by_one(batches)),
            nbytes,
            "raw write/batch",
            raw,
        )
    )
    rows.append(
        _row(
            "append_many, sync=batch",
            synced_n,
            _best(repeat, _append_many(synced_batches, SyncPolicy.batch())),
            synced_bytes,
            "raw write+fdatasync/batch",
            _best(repeat, _raw_write(frames[: len(synced_batches)], sync=True)),
        )
    )

    tmp = Path(tempfile.mkdtemp(prefix="journal-bench-"))
    try:
        path = tmp / "j"
        _append_many(batches, SyncPolicy.os())(tmp)
        raw_read = min(_raw_read(path, gather=False) for _ in range(repeat))
        raw_gather = min(_raw_read(path, gather=True) for _ in range(repeat))

        def timed(fn: Callable[[], int]) -> float:
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                got = fn()
                best = min(best, time.perf_counter() - t0)
                assert got == n, got
            return best

        rows.append(
            _row(
                "read() -> Record",
                n,
                timed(lambda: sum(1 for _ in JournalReader(path).read(1))),
                nbytes,
                "read file+unpackb",
                raw_read,
            )
        )
        rows.append(
            _row(
                "read_columns()",
                n,
                timed(lambda: len(JournalReader(path).read_columns(1)["seq"])),
                nbytes,
                "read file+unpackb+lists",
                raw_gather,
            )
        )
        part = min(50_000, n // 2)
        start = n // 2 - part // 2 + 1

        t = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            got = len(JournalReader(path).read_columns(start, start + part)["seq"])
            t = min(t, time.perf_counter() - t0)
            assert got == part
        rows.append(
            _row(
                f"fresh reader, {part} from the middle",
                part,
                t,
                nbytes * part // n,
                "read file+unpackb+lists",
                raw_gather * part / n,
            )
        )
    finally:
        shutil.rmtree(tmp)
        gc.unfreeze()

    _print(rows)
    append_rate = int(rows[0]["records_per_s"])  # type: ignore[call-overload]
    part_rate = int(rows[-1]["records_per_s"])  # type: ignore[call-overload]
    print(
        f"\nbudgets: append {append_rate:,}/s vs {APPEND_BUDGET:,}/s "
        f"{'OK' if append_rate >= APPEND_BUDGET else 'MISSED'}; "
        f"partition read {part_rate:,}/s vs {READ_BUDGET:,}/s "
        f"{'OK' if part_rate >= READ_BUDGET else 'MISSED'}"
    )
    return rows


def _print(rows: list[dict[str, object]]) -> None:
    cols = [
        "case",
        "records",
        "records_per_s",
        "mb_per_s",
        "baseline",
        "baseline_records_per_s",
        "ratio",
    ]
    heads = ["case", "records", "rec/s", "MB/s", "baseline", "baseline rec/s", "ratio"]
    table = [heads] + [
        [f"{r[c]:,}" if isinstance(r[c], int) else str(r[c]) for c in cols] for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
    print(
        f"journal benchmark — {BODY}-byte bodies, batches of {BATCH}, python {sys.version.split()[0]}"
    )
    for i, line in enumerate(table):
        print(
            "  ".join(
                cell.ljust(w) if j in (0, 4) else cell.rjust(w)
                for j, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main(sys.argv[1:])
