"""Running a snippet of Python against benchmarks/ in a fresh interpreter, for
the tests that check a benchmark still runs (a subprocess: a benchmark may
install its own ``sys.settrace`` tracer or start processes of its own).

Imported as ``benchmark_code`` (tests/ is on sys.path: tests/conftest.py's
directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def run_benchmark_code(code: str, timeout: float = 300) -> Any:
    """Runs ``code`` (which gets benchmarks/'s path as ``sys.argv[1]``) with this
    checkout's src/ importable: the JSON value on its last line of output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(BENCHMARKS)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
