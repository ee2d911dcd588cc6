"""The demo's Spark side: the session, the streaming query and the batch job."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from .messages import DataPoint, WindowAverage

#: the ``actorbus.spark.*`` keys the demo reads itself; every other key is Spark's.
DEMO_KEYS = frozenset({"master", "journal", "checkpoint", "sink.host", "sink.port", "app"})
MODULE = "demos.spark_pipeline.messages"


def build_session(settings: Mapping[str, str]) -> Any:
    """A SparkSession for ``settings`` (the ``actorbus.spark.*`` keys): master
    ``master`` (default ``local[2]``), and each other key ``K`` as ``spark.K``;
    the ``"actorbus"`` format is registered."""
    from pyspark.sql import SparkSession

    from actorbus.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(settings.get("master", "local[2]")).appName(
        settings.get("app", "actorbus-spark-demo")
    )
    for key, value in settings.items():
        if key not in DEMO_KEYS:
            builder = builder.config(f"spark.{key}", value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def data_points(spark: Any, journal: str, *, stream: bool = True) -> Any:
    """The journal's DataPoints as a streaming (or batch) DataFrame."""
    reader = spark.readStream if stream else spark.read
    return (
        reader.format("actorbus")
        .option("path", journal)
        .option("type", DataPoint.__type_name__)
        .option("module", MODULE)
        .load()
    )


def windowed_averages(points: Any, *, window: str, watermark: str) -> Any:
    """Per-subject averages over tumbling event-time windows; a window is final (and
    emitted, in append mode) once the watermark passes its end."""
    from pyspark.sql import functions as F

    return (
        points.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window), "subject")
        .agg(F.avg("value").alias("average"), F.count("*").alias("points"))
        .select(
            "subject",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "average",
            "points",
        )
    )


def publish_to_bus(
    averages: Any, *, host: str, port: int, checkpoint: str, trigger: str = "1 second"
) -> Any:
    """Start the query whose sink publishes each row as a WindowAverage to the bus
    node at ``host:port``, on the subject of the row."""
    return (
        averages.writeStream.format("actorbus")
        .option("host", host)
        .option("port", str(port))
        .option("type", WindowAverage.__type_name__)
        .option("module", MODULE)
        .option("subjectColumn", "subject")
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(processingTime=trigger)
        .queryName("actorbus_window_averages")
        .start()
    )


def subject_statistics(spark: Any, journal: str) -> list[dict[str, Any]]:
    """The batch job: per-subject count, mean, spread and time range of the whole
    journal, ordered by subject."""
    from pyspark.sql import functions as F

    stats = (
        data_points(spark, journal, stream=False)
        .groupBy("subject")
        .agg(
            F.count("*").alias("points"),
            F.avg("value").alias("mean"),
            F.stddev("value").alias("stddev"),
            F.min("value").alias("min"),
            F.max("value").alias("max"),
            F.min("timestamp").alias("first"),
            F.max("timestamp").alias("last"),
        )
        .orderBy("subject")
    )
    rows: list[dict[str, Any]] = stats.toArrow().to_pylist()
    return rows
