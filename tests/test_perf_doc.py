"""benchmarks/perf_doc.py rewrites the generated block of docs/performance.md from a
``run_all.py --json`` file and leaves the prose around it alone (no benchmark runs:
a handmade JSON and a temporary copy of the document)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import their _common helper
    try:
        spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


perf_doc = _load("perf_doc")

RUN = {
    "date": "2030-01-02T03:04:05+00:00",
    "machine": {
        "hostname": "bench-host",
        "cpu_model": "Test CPU 9000",
        "cpu_count": 4,
        "python": "3.11.9",
        "os": "Linux 6.1.0",
        "uvloop": True,
        "loadavg_start": [0.5, 0.4, 0.3],
        "loadavg_end": [1.25, 0.6, 0.4],
    },
    "commit": "0123456789abcdef0123456789abcdef01234567",
    "packages": {"pykka": "4.5.0", "pyspark": None},
    "argv": ["--isolate", "--json", "/tmp/perf.json"],
    "scripts": [{"name": "local_bus", "seconds": 61.2, "crashed": False}],
    "rows": [
        {
            "name": "local_bus: pub->sub 1:1",
            "value": 2_500_000.0,
            "unit": "msg/s",
            "baseline_name": "pykka tell",
            "baseline_value": 400_000.0,
            "ratio": 6.25,
            "budget": ">= 4x pykka",
            "ok": True,
            "note": "best of 5 | interleaved",
        },
        {
            "name": "local_bus: request/reply p50",
            "value": 21.0,
            "unit": "us",
            "baseline_name": "pykka ask",
            "baseline_value": 20.0,
            "ratio": 1.05,
            "budget": "<= 1.0x",
            "ok": False,
            "note": "",
        },
        # an old-shape row, as fsm_engine.py returns them
        {"engine": "compiled engine", "transitions_per_s": 3_000_000.0, "us_per_transition": 0.33},
        {
            "name": "spark: import failed",
            "value": None,
            "unit": "",
            "budget": "runs",
            "ok": False,
            "error": "ModuleNotFoundError: No module named 'pyspark'",
        },
    ],
}

PROSE_BEFORE = "# Performance\n\nWhat each benchmark measures, and why budgets are ratios.\n\n"
PROSE_AFTER = "\n## The local bus\n\nHow to read the ratios: higher is better for a rate.\n"


def _doc(middle: str) -> str:
    return f"{PROSE_BEFORE}{perf_doc.BEGIN}\n{middle}{perf_doc.END}\n{PROSE_AFTER}"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "perf.json"
    run.write_text(json.dumps(RUN))
    doc = tmp_path / "performance.md"
    doc.write_text(_doc("| old | table |\n|---|---|\n| 1 us | stale figure |\n"))
    return run, doc


def test_the_block_is_replaced_and_the_prose_kept(files: tuple[Path, Path]) -> None:
    run, doc = files
    assert perf_doc.main([str(run), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith(PROSE_BEFORE + perf_doc.BEGIN + "\n")
    assert text.endswith(perf_doc.END + "\n" + PROSE_AFTER)
    block = text[text.index(perf_doc.BEGIN) : text.index(perf_doc.END)]
    assert "stale figure" not in text
    # headed by the date and the machine
    assert "2030-01-02T03:04:05Z" in block
    for what in ("bench-host", "Test CPU 9000", "4 cores", "Python 3.11.9", "Linux 6.1.0"):
        assert what in block
    assert "uvloop" in block and "`0123456789ab`" in block and "pykka 4.5.0" in block
    assert "not installed: pyspark" in block
    # every row, grouped by script, with its peer, ratio and verdict
    assert "### `local_bus.py` (61 s)" in block
    assert (
        "| pub->sub 1:1 | 2,500,000 | msg/s | pykka tell | 400,000 | 6.25x | >= 4x pykka | met |"
        in block
    )
    assert (
        "| request/reply p50 | 21.00 | us | pykka ask | 20.00 | 1.05x | <= 1.0x | **missed** |"
        in block
    )
    assert "best of 5 \\| interleaved" in block  # a | in a note cannot break the table
    assert "compiled engine" in block and "3,000,000" in block
    assert "**CRASH**" in block and "No module named 'pyspark'" in block
    assert "4 rows from 3 scripts; 2 with a budget: 1 met, 1 missed; 1 script(s) crashed" in block
    assert "`benchmarks/run_all.py --isolate --json /tmp/perf.json`" in block


def test_a_second_run_is_idempotent_and_check_sees_drift(files: tuple[Path, Path]) -> None:
    run, doc = files
    assert perf_doc.main([str(run), "--doc", str(doc)]) == 0
    once = doc.read_text()
    assert perf_doc.main([str(run), "--doc", str(doc), "--check"]) == 0
    assert perf_doc.main([str(run), "--doc", str(doc)]) == 0
    assert doc.read_text() == once
    changed = json.loads(run.read_text())
    changed["rows"][0]["value"] = 1.0
    run.write_text(json.dumps(changed))
    assert perf_doc.main([str(run), "--doc", str(doc), "--check"]) == 1
    assert doc.read_text() == once  # --check writes nothing


@pytest.mark.parametrize(
    "text",
    [
        "no markers at all\n",
        f"{perf_doc.END}\n{perf_doc.BEGIN}\n",  # the wrong way round
        f"{perf_doc.BEGIN}\n{perf_doc.BEGIN}\n{perf_doc.END}\n",  # two beginnings
    ],
)
def test_a_document_without_one_well_formed_block_is_left_alone(
    files: tuple[Path, Path], text: str
) -> None:
    run, doc = files
    doc.write_text(text)
    assert perf_doc.main([str(run), "--doc", str(doc)]) == 2
    assert doc.read_text() == text


def test_the_real_document_has_one_generated_block() -> None:
    text = (ROOT / "docs" / "performance.md").read_text()
    perf_doc.replace_block(text, "")  # raises when the markers are missing or doubled
    block = text[text.index(perf_doc.BEGIN) : text.index(perf_doc.END)]
    assert "Machine:" in block and "Run of " in block
