"""Reliability tests: fault injection, network namespaces, fuzzing, bad input.

The figures each test records (faults injected; messages sent, delivered,
dropped and reported, duplicated, reordered; fuzz executions per second) are
printed in a "reliability figures" section at the end of the run, also under
``pytest -q``.
"""

from __future__ import annotations

from typing import Any

import pytest
from reliability_support import FIGURES, SEED

_TOTALS = (
    "faults",
    "sent",
    "delivered",
    "dropped_reported",
    "duplicates",
    "reordered",
    "requests",
    "requests_ended",
    "fuzz_execs",
    "fuzz_crashes",
)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not FIGURES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability figures")
    write(f"seed: ACTORBUS_SEED={SEED}")
    for test, values in FIGURES:
        shown = " ".join(f"{k}={v}" for k, v in values.items())
        write(f"{test}: {shown}")
    totals = {k: sum(v.get(k, 0) for _, v in FIGURES) for k in _TOTALS}
    write(
        "TOTAL: "
        + " ".join(f"{k}={v}" for k, v in totals.items() if v or k in ("duplicates", "reordered"))
    )
