"""register(spark) checks the Python Spark runs for its workers: one that cannot import
actorbus is a SparkWorkerPythonError naming the interpreter and the setting, before
any query fails with "No module named 'actorbus'" inside an AnalysisException.

The refusals run in a driver process of their own (a SparkContext fixes its workers'
interpreter when it starts, from PYSPARK_PYTHON, else python3 on PATH); the
interpreter without actorbus is a fresh virtual environment of this Python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path
from typing import Any

import pytest
from spark_messages import Reading
from spark_support import BASE_MS, readings_plan, write_journal

from actorbus.spark import SparkUnavailableError, SparkWorkerPythonError, register
from actorbus.spark._workers import worker_python

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent

# One driver, one SparkContext after another: each case sets PYSPARK_PYTHON (or
# leaves it unset), starts a session, calls register and reads a journal.
DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession
    from actorbus.spark import register

    journal, cases = sys.argv[1], json.loads(sys.argv[2])
    for name, python in cases:
        if python is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = python
        spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            register(spark)
            rows = (
                spark.read.format("actorbus").option("path", journal)
                .option("type", "test.spark.Reading").option("module", "spark_messages")
                .load().count()
            )
            result = {"case": name, "rows": rows}
        except Exception as exc:
            result = {
                "case": name,
                "error": type(exc).__name__,
                "message": str(exc),
                "python": getattr(exc, "python", None),
            }
        finally:
            spark.stop()
        print(json.dumps(result), flush=True)
    """
)


def test_register_refuses_a_worker_python_without_actorbus(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(plain)
    plain_python = plain / "bin" / "python3"
    missing = tmp_path / "no" / "such" / "python3"
    journal = tmp_path / "journal"
    write_journal(journal, readings_plan(["/s"], 5, seed=1, start_ms=BASE_MS))
    cases = [
        ("default", None),  # python3 on PATH: the plain environment's
        ("set", str(plain_python)),
        ("missing", str(missing)),
        ("fixed", sys.executable),
    ]
    env = {
        **os.environ,
        "PATH": f"{plain / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(HERE),  # spark_messages; actorbus only where it is installed
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("PYSPARK_PYTHON", None)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(journal), json.dumps(cases)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["case"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(results) == {name for name, _ in cases}, proc.stdout

    default = results["default"]
    assert default["error"] == "SparkWorkerPythonError", default
    assert default["python"] == "python3"
    assert default["message"].startswith(
        f"Spark's Python workers would run python3 ({plain_python}), the default python3 on "
        "PATH, as PYSPARK_PYTHON is not set, and it cannot import actorbus with pyarrow "
        "(ModuleNotFoundError: No module named 'actorbus')"
    ), default["message"]

    for result in (default, results["set"]):
        assert (
            "set PYSPARK_PYTHON to an interpreter that has 'actorbus[spark]'" in (result["message"])
        )
        assert f"(this one: PYSPARK_PYTHON={sys.executable})" in result["message"]
        assert "spark.pyspark.python" in result["message"]

    named = results["set"]
    assert named["error"] == "SparkWorkerPythonError", named
    assert named["python"] == str(plain_python)
    assert named["message"].startswith(
        f"Spark's Python workers would run {plain_python}, set by "
        f"PYSPARK_PYTHON={plain_python}, and it cannot import actorbus with pyarrow "
        "(ModuleNotFoundError: No module named 'actorbus')"
    ), named["message"]

    gone = results["missing"]
    assert gone["error"] == "SparkWorkerPythonError", gone
    assert f"({missing} is not an executable file)" in gone["message"]

    assert results["fixed"] == {"case": "fixed", "rows": 5}


def test_register_accepts_this_python_and_queries_run(spark: Any, journal_dir: Path) -> None:
    # the session fixture points the workers at this interpreter
    assert worker_python(spark) == sys.executable
    register(spark)
    write_journal(journal_dir, readings_plan(["/a", "/b"], 3, seed=2))
    rows = (
        spark.read.format("actorbus")
        .option("path", str(journal_dir))
        .option("type", Reading.__type_name__)
        .option("module", "spark_messages")
        .load()
        .count()
    )
    assert rows == 6


def test_the_error_is_an_unavailable_spark_part() -> None:
    assert issubclass(SparkWorkerPythonError, SparkUnavailableError)
    assert SparkWorkerPythonError("m", python="python3").python == "python3"
