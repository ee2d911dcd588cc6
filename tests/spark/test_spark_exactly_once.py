"""Journal offsets + Spark's checkpoint + an idempotent sink = every window exactly once,
across a stop, new data, a restart, and a batch re-run after a simulated crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import (
    QUERY_TIMEOUT,
    SEED,
    SUBJECTS,
    assert_same_averages,
    flush_reading,
    forget_last_commit,
    journal_readings,
    readings_plan,
    source,
    to_map,
    window_averages,
    windowed,
    write_journal,
)

pytestmark = pytest.mark.spark


def run_to_parquet(spark: Any, journal: Path, out: Path, checkpoint: Path) -> list[dict[str, Any]]:
    query = (
        windowed(source(spark, journal, maxRecordsPerTrigger=600))
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT)
        assert query.exception() is None
        return list(query.recentProgress)
    finally:
        query.stop()


def test_restarted_query_writes_every_window_exactly_once(
    spark: Any, tmp_path: Path, journal_dir: Path
) -> None:
    print(f"seed {SEED}")
    plan = readings_plan(SUBJECTS[:4], 400, seed=SEED)  # 40 s: 4 windows per subject
    half = len(plan) // 2
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    write_journal(journal_dir, plan[:half])
    first = run_to_parquet(spark, journal_dir, out, checkpoint)
    assert sum(p["numInputRows"] for p in first) == half
    early = to_map(spark.read.parquet(str(out)).toArrow().to_pylist())
    assert early  # windows the watermark already closed are out after the first run

    # a crash after the sink wrote the last batch but before Spark committed it
    replayed = forget_last_commit(checkpoint)
    write_journal(journal_dir, [*plan[half:], flush_reading(plan[-1].timestamp)])
    second = run_to_parquet(spark, journal_dir, out, checkpoint)

    assert second[0]["batchId"] == replayed
    last_of_first = next(p for p in first if p["batchId"] == replayed)
    assert second[0]["sources"][0]["startOffset"] == last_of_first["sources"][0]["startOffset"]
    assert second[0]["sources"][0]["endOffset"] == last_of_first["sources"][0]["endOffset"]
    read = sum(p["numInputRows"] for p in second if p["batchId"] != replayed)
    assert read == len(plan) - half + 1

    rows = spark.read.parquet(str(out)).toArrow().to_pylist()
    got = to_map(rows)  # fails on a window written twice
    expected = window_averages(r for _, r in journal_readings(journal_dir))
    assert len(expected) == 4 * 4
    assert_same_averages(got, expected)
    assert len(rows) == len(expected)
    for key, value in early.items():
        assert got[key] == value
