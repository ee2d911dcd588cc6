"""Which Python Spark's workers run, and whether it can import actorbus.

pyspark fixes the workers' interpreter when the SparkContext starts:
``PYSPARK_PYTHON`` from the driver's environment, else ``python3`` found on
``PATH`` (``SparkContext.pythonExec``; ``spark-submit`` turns its
``spark.pyspark.python`` setting into that variable for the driver, while a
``.config("spark.pyspark.python", ...)`` on a session builder is not read).
Every Python data source process runs it: the planner on the driver's machine
and the readers and writers on the executors.  When it cannot import actorbus,
every query on the ``"actorbus"`` format fails with ``No module named
'actorbus'`` deep inside an ``AnalysisException``, so :func:`check_worker_python`
runs ``<interpreter> -c "import actorbus, pyarrow"`` once, at
:func:`actorbus.spark.register`, and raises :class:`SparkWorkerPythonError`
naming the interpreter and the setting to change.

The check runs on the driver's machine with the driver's environment (the
workers inherit its ``PYTHONPATH``); executors elsewhere need the same
interpreter path with the same packages (docs/spark.md, "Running on a cluster").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

from ._errors import SparkWorkerPythonError

__all__ = ["check_worker_python", "worker_python"]

#: what a worker imports to run the data source: actorbus.spark.source needs both
_PROBE = "import actorbus, pyarrow"
#: seconds the probe may take (an interpreter that hangs at start-up is a failure too)
_PROBE_TIMEOUT = 60.0

#: (interpreter, PYTHONPATH) pairs that passed; failures are checked again next time
_passed: set[tuple[str, str]] = set()


def worker_python(spark: Any) -> str | None:
    """The interpreter Spark starts for ``spark``'s Python workers, as pyspark will
    name it to the JVM; None for a Spark Connect session (its workers are the server's)."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect sessions raise here: they have no SparkContext
        return None
    python = getattr(context, "pythonExec", None)
    return python if isinstance(python, str) else None


def _setting(python: str) -> str:
    configured = os.environ.get("PYSPARK_PYTHON")
    if configured == python:
        return f"set by PYSPARK_PYTHON={python}"
    if configured is None and python == "python3":
        return "the default python3 on PATH, as PYSPARK_PYTHON is not set"
    return "as PYSPARK_PYTHON was when the SparkContext started"


def _problem(python: str) -> tuple[str | None, str | None]:
    """(the executable ``python`` resolves to, why it cannot import actorbus or None)."""
    path = shutil.which(python)
    if path is None:
        where = "is not an executable file" if os.sep in python else "is not found on PATH"
        return None, f"{python} {where}"
    try:
        done = subprocess.run(
            [path, "-c", _PROBE],
            check=False,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return path, f"`{path} -c '{_PROBE}'` did not finish within {_PROBE_TIMEOUT:g} s"
    except OSError as exc:
        return path, f"{path} does not start: {exc}"
    if done.returncode == 0:
        return path, None
    lines = done.stderr.strip().splitlines()
    return path, lines[-1] if lines else f"`{path} -c '{_PROBE}'` exited {done.returncode}"


def check_worker_python(spark: Any) -> None:
    """Raise :class:`SparkWorkerPythonError` if ``spark``'s workers would run an
    interpreter that cannot import actorbus and pyarrow.  Runs the interpreter once
    per (interpreter, ``PYTHONPATH``); a Spark Connect session is not checked."""
    python = worker_python(spark)
    if python is None:
        return
    key = (python, os.environ.get("PYTHONPATH", ""))
    if key in _passed:
        return
    path, problem = _problem(python)
    if problem is None:
        _passed.add(key)
        return
    shown = python if path in (None, python) else f"{python} ({path})"
    raise SparkWorkerPythonError(
        f"Spark's Python workers would run {shown}, {_setting(python)}, and it cannot import "
        f"actorbus with pyarrow ({problem}), so every query on the 'actorbus' format would "
        f"fail; set PYSPARK_PYTHON to an interpreter that has 'actorbus[spark]' installed "
        f"(this one: PYSPARK_PYTHON={sys.executable}) before the SparkSession starts, or "
        f"with spark-submit --conf spark.pyspark.python=...; or install 'actorbus[spark]' "
        f"into {path or python}",
        python=python,
    )
