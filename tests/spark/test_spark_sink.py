"""The "actorbus" sink on a real local Spark: rows of a streaming query arrive on a bus
node's subscribers as typed notifications, carrying the batch id that lets them drop
the duplicates a restarted query sends."""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_messages import WindowAvg
from spark_support import (
    QUERY_TIMEOUT,
    SEED,
    SUBJECTS,
    Collector,
    flush_reading,
    forget_last_commit,
    readings_plan,
    source,
    window_averages,
    windowed,
    write_journal,
)

from actorbus import Bus

pytestmark = pytest.mark.spark

LISTENED = SUBJECTS[:3]
#: a subject with data but no subscriber: its rows are dropped after subscriberTimeout.
UNHEARD = SUBJECTS[3]


@pytest.fixture
def node() -> Iterator[tuple[Bus, int, Collector]]:
    """A bus node listening on loopback with a collector of WindowAvg notifications."""
    with Bus(node_id="spark-sink-target") as bus:
        service = bus.listen(0, "127.0.0.1")
        collector = Collector(WindowAvg, LISTENED)
        bus.register(collector)
        bus.startup(collector).wait(10)
        try:
            yield bus, service.port, collector
        finally:
            bus.shutdown_all().wait(10)


def to_bus(df: Any, port: int, checkpoint: Path, **options: str) -> Any:
    writer = (
        df.writeStream.format("actorbus")
        .option("host", "127.0.0.1")
        .option("port", str(port))
        .option("type", WindowAvg.__type_name__)
        .option("module", "spark_messages")
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(availableNow=True)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.start()


def finish(query: Any) -> list[dict[str, Any]]:
    try:
        assert query.awaitTermination(QUERY_TIMEOUT)
        assert query.exception() is None
        return list(query.recentProgress)
    finally:
        query.stop()


def test_rows_arrive_as_typed_notifications_and_replays_carry_the_batch_id(
    spark: Any, tmp_path: Path, journal_dir: Path, node: tuple[Bus, int, Collector]
) -> None:
    _bus, port, collector = node
    plan = readings_plan([*LISTENED, UNHEARD], 200, seed=SEED)  # 20 s: 2 windows each
    write_journal(journal_dir, [*plan, flush_reading(plan[-1].timestamp)])
    expected = {key: value for key, value in window_averages(plan).items() if key[0] in LISTENED}
    assert len(expected) == 6
    checkpoint = tmp_path / "checkpoint"

    finish(
        to_bus(
            windowed(source(spark, journal_dir)),
            port,
            checkpoint,
            subjectColumn="subject",
            subscriberTimeout="1",
        )
    )
    first = collector.wait_for(len(expected), 30)
    assert len(first) == len(expected)
    assert all(type(m) is WindowAvg for m in first)
    got = {(m.subject, m.window_start): (m.average, m.n) for m in first}
    assert set(got) == set(expected)
    for key, (avg, n) in expected.items():
        assert got[key] == (pytest.approx(avg, rel=1e-12), n)
    assert all(m.window_start.tzinfo is dt.UTC for m in first)
    batch_ids = {m.batch_id for m in first}
    assert len(batch_ids) == 1

    # a restart that re-runs the last batch publishes its rows again, same batch id
    replayed = forget_last_commit(checkpoint)
    assert batch_ids == {replayed}
    finish(
        to_bus(
            windowed(source(spark, journal_dir)),
            port,
            checkpoint,
            subjectColumn="subject",
            subscriberTimeout="1",
        )
    )
    both = collector.wait_for(2 * len(expected), 30)
    assert len(both) == 2 * len(expected)
    again = both[len(expected) :]

    def content(messages: list[WindowAvg]) -> set[tuple[Any, ...]]:
        return {(m.subject, m.window_start, m.average, m.n, m.batch_id) for m in messages}

    assert content(again) == content(first)
    deduplicated = {(m.batch_id, m.subject, m.window_start) for m in both}
    assert len(deduplicated) == len(expected)


def _failure(start: Any) -> str:
    """The error text of a query that fails when started or while it runs."""
    try:
        query = start()
    except Exception as exc:  # noqa: BLE001 - pyspark wraps our error
        return str(exc)
    try:
        with pytest.raises(Exception) as err:  # noqa: PT011 - pyspark wraps our error
            query.awaitTermination(QUERY_TIMEOUT)
    finally:
        query.stop()
    return str(err.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sink_errors_say_what_is_wrong(spark: Any, tmp_path: Path, journal_dir: Path) -> None:
    from pyspark.sql import functions as F

    write_journal(journal_dir, readings_plan(LISTENED, 5, seed=SEED))
    # rows shaped like WindowAvg without an aggregation: errors come sooner
    averages = source(spark, journal_dir).select(
        "subject",
        F.col("timestamp").alias("window_start"),
        F.col("value").alias("average"),
        F.col("seq_no").alias("n"),
    )

    # nobody listens at the port: the task cannot log on
    port = _free_port()
    text = _failure(
        lambda: to_bus(averages, port, tmp_path / "c1", subjectColumn="subject", connectTimeout="5")
    )
    assert f"could not log on to the bus node at 127.0.0.1:{port}" in text

    # a column the message class does not have, and a field without a column
    extra = averages.withColumn("extra", F.lit(1))
    text = _failure(lambda: to_bus(extra, port, tmp_path / "c2", subjectColumn="subject"))
    assert "['extra'] are not fields of WindowAvg" in text
    short = averages.drop("n")
    text = _failure(lambda: to_bus(short, port, tmp_path / "c3", subjectColumn="subject"))
    assert "WindowAvg.n (int) has no default" in text

    # a sink option that does not exist
    text = _failure(lambda: to_bus(averages, port, tmp_path / "c4", subjectColum="subject"))
    assert "did you mean 'subjectColumn'" in text
