"""The dispatch benchmark script still runs (tiny counts) and returns its rows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "dispatch.py"


def test_dispatch_benchmark_quick_run(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_dispatch", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.main(["--quick"])
    kinds = {r["kind"] for r in rows}
    assert kinds == {"-", "blocking", "spinning", "spin+park", "spin+yield", "asyncio"}
    assert all(r["tasks_per_s"] > 0 and r["slowdown"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert "baseline: SimpleQueue hand-off" in out
    assert "dispatch blocking, 1 actor" in out
