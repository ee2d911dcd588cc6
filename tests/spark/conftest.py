"""One local Spark for the whole test session, and journal helpers.

Spark's Python workers run in separate processes: ``PYSPARK_PYTHON`` points
them at this interpreter and ``PYTHONPATH`` at this directory, so they can
import ``spark_messages`` (the data source's ``module`` option).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A SparkSession on local[2] with the "actorbus" format registered."""
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    paths = [str(HERE), *filter(None, (saved["PYTHONPATH"] or "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    from pyspark.sql import SparkSession

    from actorbus.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("actorbus-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    """A journal directory path that does not exist yet (a writer creates it)."""
    return tmp_path / "journal"
