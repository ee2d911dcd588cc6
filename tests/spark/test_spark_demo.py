"""The Spark pipeline demo end to end on the shared local Spark: actors → recorder →
journal → streaming windowed averages → sink → printer, then the batch job."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from spark_support import QUERY_TIMEOUT

from actorbus.bus.codec import decode
from actorbus.journal import JournalReader

pytestmark = pytest.mark.spark


def test_demo_runs_the_whole_pipeline(spark: Any, tmp_path: Path) -> None:
    from demos.spark_pipeline.messages import DataPoint
    from demos.spark_pipeline.run import run

    wanted = 12  # averages printed before the test stops the demo
    stop = threading.Event()
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if sum(" average " in text for text in lines) >= wanted:
            stop.set()

    journal = tmp_path / "journal"
    summary = run(
        duration=QUERY_TIMEOUT,
        stop=stop,
        subject_count=6,
        period_ms=50,
        window="1 second",
        watermark="500 milliseconds",
        trigger="200 milliseconds",
        journal=journal,
        checkpoint=tmp_path / "checkpoint",
        seed=7,
        spark=spark,
        out=out,
    )
    assert stop.is_set(), "the demo ran out of time before printing averages"
    assert summary["sent"] == summary["recorded"] > 0
    assert summary["journal_end"] == summary["recorded"] + 1
    assert summary["averages"] >= wanted
    assert summary["duplicates"] == 0

    # every average that came back is the mean of its window in the journal
    points: dict[tuple[str, int], list[float]] = {}
    for rec in JournalReader(journal).read(1):
        p = decode(DataPoint, rec.body)
        points.setdefault((p.subject, p.timestamp // 1000), []).append(p.value)
    for avg in summary["received"]:
        values = points[(avg.subject, int(avg.window_start.timestamp()))]
        assert avg.points == len(values)
        assert avg.average == pytest.approx(sum(values) / len(values), rel=1e-12)
        assert avg.batch_id >= 0

    stats = {row["subject"]: row for row in summary["statistics"]}
    assert len(stats) == 6
    assert sum(row["points"] for row in stats.values()) == summary["recorded"]
    assert any(line.startswith("batch job over the whole journal: 6 subjects") for line in lines)
    assert "points sent" in lines[-1]
