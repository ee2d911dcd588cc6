"""Feed data into Apache Spark and results back onto the bus.

* :class:`Recorder` — an actor that appends every notification of chosen keys
  to a durable journal directory (needs no Spark).
* The ``"actorbus"`` PySpark data source (:class:`ActorbusDataSource`, register
  it with :func:`register`): ``spark.readStream.format("actorbus")`` streams a
  journal by sequence offsets (replayable, so exactly-once output with an
  idempotent sink); ``spark.read.format("actorbus")`` reads it as a batch;
  ``writeStream.format("actorbus")`` publishes each output row as a
  notification to a running bus node over a remote link (at-least-once).
* :func:`message_schema` — the Spark schema of a message class.

pyspark (>= 4.2) and pyarrow are optional (``pip install 'actorbus[spark]'``):
importing this package works without them; using a Spark part raises
:class:`SparkUnavailableError` saying what to install.  :func:`register` also
checks that the Python Spark runs for its workers imports actorbus
(:class:`SparkWorkerPythonError` names the interpreter and the setting).
Options, the type mapping, offsets and delivery semantics are in docs/spark.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import (
    SinkDeliveryError,
    SparkOptionError,
    SparkPipelineError,
    SparkUnavailableError,
    SparkWorkerPythonError,
)
from ._options import BATCH_ID_FIELD
from .recorder import Recorder

if TYPE_CHECKING:
    from .schema import message_schema
    from .source import ActorbusDataSource

__all__ = [
    "BATCH_ID_FIELD",
    "FORMAT",
    "ActorbusDataSource",
    "Recorder",
    "SinkDeliveryError",
    "SparkOptionError",
    "SparkPipelineError",
    "SparkUnavailableError",
    "SparkWorkerPythonError",
    "message_schema",
    "register",
]

#: the data source's format name: ``spark.readStream.format(FORMAT)``.
FORMAT = "actorbus"

_LAZY = {"ActorbusDataSource": ".source", "message_schema": ".schema"}


def _spark_module(name: str) -> Any:
    try:
        return importlib.import_module(name, __name__)
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("pyspark", "pyarrow", "py4j"):
            raise
        raise SparkUnavailableError(
            f"actorbus.spark needs pyspark >= 4.2 and pyarrow for the Spark data source "
            f"({type(exc).__name__}: {exc}); install them with: pip install 'actorbus[spark]'"
        ) from exc


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_spark_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def register(spark: Any) -> None:
    """Register the ``"actorbus"`` format with SparkSession ``spark``.

    Raises :class:`SparkWorkerPythonError` when the interpreter Spark runs for its
    Python workers (``PYSPARK_PYTHON``, else ``python3`` on PATH) cannot import
    actorbus and pyarrow: checked once per interpreter, by running it."""
    source = _spark_module(".source")
    from ._workers import check_worker_python

    check_worker_python(spark)
    spark.dataSource.register(source.ActorbusDataSource)
