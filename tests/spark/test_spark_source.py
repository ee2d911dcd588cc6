"""The "actorbus" source on a real local Spark: streaming and batch reads of journals
filled by real bus actors, compared with a plain-Python recomputation."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from spark_messages import AllTypes, Other, Reading
from spark_support import (
    BASE_MS,
    FLUSH_SUBJECT,
    QUERY_TIMEOUT,
    SEED,
    SUBJECTS,
    all_types,
    assert_same_averages,
    flush_reading,
    journal_readings,
    memory_rows,
    readings_plan,
    record_with_actors,
    source,
    to_map,
    window_averages,
    windowed,
    write_journal,
)

from actorbus.journal import JournalReader

pytestmark = pytest.mark.spark


def test_stream_from_actor_journal_matches_python_recomputation(
    spark: Any, journal_dir: Path
) -> None:
    print(f"seed {SEED}")
    plan = readings_plan(SUBJECTS, 300, seed=SEED)
    plan.append(flush_reading(plan[-1].timestamp))
    last = record_with_actors(journal_dir, plan)
    assert last == len(plan)

    name = f"win_{uuid.uuid4().hex[:8]}"
    query = (
        windowed(source(spark, journal_dir, maxRecordsPerTrigger=1000))
        .writeStream.format("memory")
        .queryName(name)
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT)
        assert query.exception() is None
        progress = query.recentProgress
    finally:
        query.stop()
    read = [p["numInputRows"] for p in progress]
    assert sum(read) == len(plan)
    assert max(read) <= 1000
    assert len([n for n in read if n]) == -(-len(plan) // 1000)

    expected = window_averages(r for _, r in journal_readings(journal_dir))
    assert expected == window_averages(plan)
    assert len(expected) == len(SUBJECTS) * 3
    assert_same_averages(to_map(memory_rows(spark, name)), expected)


def test_live_query_sees_records_as_the_recorder_flushes(spark: Any, journal_dir: Path) -> None:
    from pyspark.sql import functions as F

    first = readings_plan(SUBJECTS[:2], 50, seed=SEED)
    record_with_actors(journal_dir, first)
    name = f"live_{uuid.uuid4().hex[:8]}"
    query = (
        source(spark, journal_dir)
        .groupBy("subject")
        .agg(F.count("*").alias("n"), F.sum("seq_no").alias("total"))
        .writeStream.format("memory")
        .queryName(name)
        .outputMode("complete")
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        assert {r["subject"]: r["n"] for r in memory_rows(spark, name)} == {
            SUBJECTS[0]: 50,
            SUBJECTS[1]: 50,
        }
        more = readings_plan(SUBJECTS[:3], 20, seed=SEED + 1, start_ms=BASE_MS + 60_000)
        record_with_actors(journal_dir, more)  # a new recorder continues the journal
        query.processAllAvailable()
        rows = {r["subject"]: (r["n"], r["total"]) for r in memory_rows(spark, name)}
    finally:
        query.stop()
    assert rows == {
        SUBJECTS[0]: (70, sum(range(50)) + sum(range(20))),
        SUBJECTS[1]: (70, sum(range(50)) + sum(range(20))),
        SUBJECTS[2]: (20, sum(range(20))),
    }


def test_many_small_segments_make_core_count_partitions(spark: Any, journal_dir: Path) -> None:
    from pyspark.sql import functions as F

    plan = readings_plan(SUBJECTS, 1_500, seed=SEED)
    write_journal(journal_dir, plan, frame=50, segment_bytes=4096)
    segments = JournalReader(journal_dir).segments()
    assert len(segments) > 100

    df = source(spark, journal_dir, stream=False, numPartitions=2, minPartitionRecords=1000)
    assert df.rdd.getNumPartitions() == 2
    per_partition = df.groupBy(F.spark_partition_id().alias("p")).count().toArrow().to_pylist()
    assert sorted(r["count"] for r in per_partition) == [6_000, 6_000]

    seen: list[int] = []

    def count_partitions(batch: Any, batch_id: int) -> None:
        seen.append(batch.rdd.getNumPartitions())

    query = (
        source(spark, journal_dir, numPartitions=2, minPartitionRecords=1000)
        .writeStream.foreachBatch(count_partitions)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT)
        assert query.exception() is None
    finally:
        query.stop()
    assert seen == [2]

    totals = df.agg(F.count("*").alias("n"), F.sum("seq").alias("s")).collect()[0]
    assert (totals["n"], totals["s"]) == (len(plan), sum(range(1, len(plan) + 1)))


def test_batch_read_statistics_subject_filter_and_ranges(spark: Any, journal_dir: Path) -> None:
    from pyspark.sql import functions as F

    plan = readings_plan(SUBJECTS[:4], 250, seed=SEED)
    mixed: list[Any] = []
    for i, r in enumerate(plan):
        mixed.append(r)
        if i % 10 == 0:
            mixed.append(Other(r.subject, timestamp=r.timestamp, text="noise"))
    write_journal(journal_dir, mixed)

    stats = (
        source(spark, journal_dir, stream=False)
        .groupBy("subject")
        .agg(F.count("*").alias("n"), F.avg("value").alias("avg"), F.max("value").alias("max"))
        .toArrow()
        .to_pylist()
    )
    for row in stats:
        values = [r.value for r in plan if r.subject == row["subject"]]
        assert row["n"] == len(values) == 250
        assert row["avg"] == pytest.approx(sum(values) / len(values), rel=1e-12)
        assert row["max"] == max(values)

    only = source(spark, journal_dir, stream=False, subject=SUBJECTS[1])
    assert {r["subject"] for r in only.select("subject").distinct().collect()} == {SUBJECTS[1]}
    assert only.count() == 250

    ranged = source(spark, journal_dir, stream=False, startingOffset=11, endingOffset=21)
    seqs = sorted(r["seq"] for r in ranged.select("seq").collect())
    expected = [seq for seq, _ in journal_readings(journal_dir) if 11 <= seq < 21]
    assert seqs == expected


def test_every_field_type_survives_spark(spark: Any, journal_dir: Path, capsys: Any) -> None:
    import datetime as dt
    from decimal import Decimal

    write_journal(journal_dir, [all_types(0), all_types(1, maybe=3)])
    df = (
        spark.read.format("actorbus")
        .option("path", str(journal_dir))
        .option("type", AllTypes.__type_name__)
        .option("module", "spark_messages")
        .load()
    )
    df.printSchema()
    printed = capsys.readouterr().out
    assert " |-- seq: long (nullable = false)" in printed
    assert " |-- amount: decimal(38,18) (nullable = true)" in printed
    assert " |    |-- element: struct (containsNull = true)" in printed

    rows = df.orderBy("seq").toArrow().to_pylist()
    assert [r["maybe"] for r in rows] == [None, 3]
    row = rows[0]
    assert row["at"] == dt.datetime(2024, 5, 6, 5, 8, 9, 123456, tzinfo=dt.UTC)
    assert row["amount"] == Decimal("12345.678901234567890123").quantize(Decimal("1e-18"))
    assert row["span"] == dt.timedelta(days=2, seconds=3, microseconds=4)
    assert row["point"] == {"x": 1, "y": 2.5, "label": "p"}
    assert row["points"][1] == {"x": 5, "y": 6.0, "label": "q"}
    assert row["key"] == {"type": "test.spark.Reading", "subject": "/k"}
    assert (row["color"], row["level"], row["ip"]) == ("green", 2, "192.168.0.1")
    by_sql = df.selectExpr("point.x + numbers[2] as v", "size(words) as w").collect()
    assert [(r["v"], r["w"]) for r in by_sql] == [(4, 2), (4, 2)]


def _error_text(call: Any) -> str:
    with pytest.raises(Exception) as err:  # noqa: PT011 - pyspark wraps our error
        call()
    return str(err.value)


def test_clear_errors_for_missing_journal_unknown_type_and_bad_options(
    spark: Any, tmp_path: Path, journal_dir: Path
) -> None:
    missing = tmp_path / "nowhere"
    text = _error_text(lambda: source(spark, missing))
    assert f"option path='{missing}'" in text
    assert "does not exist" in text

    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no segment files" in _error_text(lambda: source(spark, empty, stream=False))

    write_journal(journal_dir, [Reading("/a", timestamp=BASE_MS, value=1.0, seq_no=1)])
    unknown = (
        spark.readStream.format("actorbus")
        .option("path", str(journal_dir))
        .option("type", "test.spark.Nope")
        .option("module", "spark_messages")
    )
    text = _error_text(unknown.load)
    assert "option type='test.spark.Nope'" in text
    assert "no message class is registered" in text

    text = _error_text(lambda: source(spark, journal_dir, maxRecordsPerTrigger="many"))
    assert "option maxRecordsPerTrigger='many': expected an integer" in text
    text = _error_text(lambda: source(spark, journal_dir, maxRowsPerTrigger=5))
    assert "no option 'maxrowspertrigger'" in text.lower()
    text = _error_text(spark.readStream.format("actorbus").option("type", "x").load)
    assert "needs option 'path'" in text


def test_subject_filter_in_streaming(spark: Any, journal_dir: Path) -> None:
    plan = readings_plan(SUBJECTS[:3], 40, seed=SEED)
    write_journal(journal_dir, plan)
    name = f"flt_{uuid.uuid4().hex[:8]}"
    query = (
        source(spark, journal_dir, subject=SUBJECTS[2])
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT)
    finally:
        query.stop()
    rows = memory_rows(spark, name)
    assert sorted(r["seq_no"] for r in rows) == list(range(40))
    assert {r["subject"] for r in rows} == {SUBJECTS[2]}
    assert FLUSH_SUBJECT not in {r["subject"] for r in rows}
