"""The Spark pipeline's exceptions, all under :class:`actorbus.Error`.

* :class:`SparkPipelineError` — root of this package's errors.
* :class:`SparkOptionError` — a data source option is missing, unknown or has
  a bad value (``option`` names it); also a :class:`~actorbus.UsageError`.
  An unknown message type and a missing journal are option errors too: they
  name the option (``type``, ``path``) that points at the wrong thing.
* :class:`SparkUnavailableError` — pyspark or pyarrow is not installed.
* :class:`SparkWorkerPythonError` — the interpreter Spark runs for its Python
  workers cannot import actorbus (a :class:`SparkUnavailableError` there).
* :class:`SinkDeliveryError` — a sink task could not reach or log on to the
  bus node it publishes to; also a :class:`~actorbus.PeerError`.

Inside Spark, an exception raised by the data source in a Python worker reaches
the driver wrapped in a pyspark exception (``AnalysisException``,
``StreamingQueryException``, ``PythonException``) whose text contains ours.
"""

from __future__ import annotations

from ..errors import Error, PeerError, UsageError

__all__ = [
    "SinkDeliveryError",
    "SparkOptionError",
    "SparkPipelineError",
    "SparkUnavailableError",
    "SparkWorkerPythonError",
]


class SparkPipelineError(Error):
    """Something went wrong in the journal-backed Spark source or the bus sink."""


class SparkOptionError(SparkPipelineError, UsageError):
    """A data source option is missing, unknown or holds a bad value.

    ``option`` is the option's name as documented (``maxRecordsPerTrigger``).
    """

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(message)
        self.option = option


class SparkUnavailableError(SparkPipelineError, UsageError):
    """pyspark (and pyarrow) are needed for this part of :mod:`actorbus.spark`."""


class SparkWorkerPythonError(SparkUnavailableError):
    """The Python Spark starts for its workers (``PYSPARK_PYTHON``, else ``python3``)
    cannot import actorbus or pyarrow, so every query on the format would fail.

    ``python`` is the interpreter as Spark names it.
    """

    def __init__(self, message: str, *, python: str) -> None:
        super().__init__(message)
        self.python = python


class SinkDeliveryError(SparkPipelineError, PeerError):
    """A sink task could not connect to, or log on to, the bus node it publishes to."""
