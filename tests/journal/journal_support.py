"""Helpers for the journal tests: records whose content follows from their seq.

Imported by the test modules as ``journal_support`` (tests/journal is on sys.path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from actorbus.journal import JournalReader, Record

Rec = tuple[str, str, int, bytes]

BASE_TS = 1_700_000_000_000


def rec(seq: int) -> Rec:
    """The record the tests append as number ``seq``: checkable from the seq alone."""
    return (
        f"demo.Type{seq % 3}",
        f"/demo/{seq % 7}",
        BASE_TS + seq,
        seq.to_bytes(8, "little") * (1 + seq % 5),
    )


def recs(first: int, n: int) -> list[Rec]:
    return [rec(s) for s in range(first, first + n)]


def expected(first: int, n: int) -> list[Record]:
    return [Record(s, *rec(s)) for s in range(first, first + n)]


def read_all(path: Path) -> list[Record]:
    reader = JournalReader(path)
    return list(reader.read(reader.first_seq()))


def segment_names(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".seg"))


def open_segment(path: Path) -> Path:
    (name,) = [n for n in os.listdir(path) if n.endswith("-open.seg")]
    return path / name


def run_python(code: str, *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a real other process); fail on error."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr}"
    return proc
