"""benchmarks/remote_opcodes.py still runs (a few round trips) and counts, and the
count has not grown back.

It runs in a subprocess: the script installs its own ``sys.settrace`` tracer,
which must not replace the test runner's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "remote_opcodes.py"
REGRESSION_CEILING_THREADED = 3_800
REGRESSION_CEILING_SHARED_LOOP = 3_650


def _run() -> tuple[dict[str, float], str]:
    """One run of the script: its count per configuration, and its output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--n", "100", "--top", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    counts = {}
    for name in (
        "threaded actors (default)",
        "actors on the link's loop",
        "threaded actors (default), authenticated",
        "actors on the link's loop, authenticated",
    ):
        line = next(
            x
            for x in out.splitlines()
            if x.startswith(f"request/reply round trip, bytecodes, {name}")
        )
        ours, raw = (float(v.replace(",", "")) for v in re.findall(r"(\d[\d,]*\.\d) ", line)[:2])
        counts[name] = ours
        # the raw echo runs a few hundred instructions per round trip; ours, which
        # parses, routes, accounts and dispatches, runs more
        assert 0 < raw < ours
    return counts, out


def test_remote_opcodes_counts_both_configurations_against_the_raw_echo() -> None:
    # The threaded count moves by +-60 between runs with how the threads
    # interleave (docs/performance.md), as much as the guard's margin: the
    # guard reads the median of three runs; the count on the link's loop,
    # which does not move, every run.
    runs = [_run() for _ in range(3)]
    for counts, out in runs:
        assert counts["actors on the link's loop"] <= REGRESSION_CEILING_SHARED_LOOP, out
    threaded = sorted(counts["threaded actors (default)"] for counts, _ in runs)
    counts, out = runs[0]
    assert "lost requests: 0" in out
    assert "by thread and file" in out and "the 3 heaviest lines" in out
    # the split adds up: the file rows are the threaded count's parts
    total = int(re.search(r"both nodes; (\d+) in all", out).group(1))  # type: ignore[union-attr]
    assert abs(total - counts["threaded actors (default)"]) <= 1
    # A guard against regressions, not the budget (the rows report the budget,
    # 2,200 and 2,000, and whether it is met): just above the counts of the
    # direct path (docs/performance.md), with room for the acknowledgement
    # timer's noise.
    assert threaded[1] <= REGRESSION_CEILING_THREADED, (threaded, out)
    # a secret changes the logon only: after it, a round trip runs the same
    # code (within the few per cent a count moves between runs)
    for name in ("threaded actors (default)", "actors on the link's loop"):
        assert abs(counts[f"{name}, authenticated"] - counts[name]) <= 0.05 * counts[name], out
    assert "by layer" in out
