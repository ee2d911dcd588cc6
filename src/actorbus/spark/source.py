"""The ``"actorbus"`` PySpark data source: journal reader (batch and streaming) and bus sink.

Theory of operation
-------------------
A recorder actor appends every notification of the feeds it records to a
journal directory; each record has a *seq* that grows by one and never changes
meaning.  That makes seqs ideal Spark offsets: a streaming offset is
``{"seq": n}`` — the first seq **not yet** read — and the records of a
micro-batch are exactly ``[start, end)``, however often Spark asks for them.
Spark writes each batch's offsets to its checkpoint before running it, so a
restarted query re-reads precisely the batch it was in, and with an idempotent
sink (files, Delta, ...) every output row appears once.

Where each piece runs:

* :class:`ActorbusDataSource` — everywhere; it only parses options.
  ``schema()`` (driver, at ``load()``) derives the row schema from the message
  class.
* :class:`JournalStreamReader` — a long-lived Python process on the driver
  answers ``initialOffset`` / ``latestOffset`` / ``partitions`` / ``commit``;
  it lists segment files and reads frame headers, never record bodies.
* ``read(partition)`` — on executors: a fresh :class:`~actorbus.journal.JournalReader`
  reads ``[start, end)`` in bounded column batches and a
  :class:`~actorbus.spark.schema.BatchDecoder` turns them into Arrow batches.
  A partition carries only the directory and two seqs.
* :class:`JournalBatchReader` — ``spark.read.format("actorbus")``: the same
  partitions over ``[startingOffset, endingOffset)``, planned once.

The message class must be defined in every Python process that touches it:
the ``module`` option names a module to import for that (see docs/spark.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .._log import logger
from ..journal import JournalError, JournalReader, RecordsDeletedError
from ._errors import SparkOptionError, SparkPipelineError
from ._options import SinkOptions, SourceOptions
from .schema import BatchDecoder, message_schema

__all__ = [
    "ActorbusDataSource",
    "JournalBatchReader",
    "JournalRange",
    "JournalStreamReader",
    "plan_ranges",
]

FORMAT = "actorbus"


class JournalRange(InputPartition):
    """One partition: the records ``start <= seq < end`` of the journal."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"JournalRange({self.start}, {self.end})"


def plan_ranges(start: int, end: int, partitions: int, min_records: int) -> list[JournalRange]:
    """Split ``[start, end)`` into at most ``partitions`` contiguous ranges of about
    equal size and at least ``min_records`` seqs each (the last may be shorter).

    Segment files play no part: a range may span many small segments and a
    reader hops over the frames before its start, so a micro-batch has about as
    many tasks as the cluster has cores, never one per file."""
    total = end - start
    if total <= 0:
        return []
    count = max(1, min(partitions, total // min_records if min_records > 0 else total))
    size = math.ceil(total / count)
    return [JournalRange(s, min(s + size, end)) for s in range(start, end, size)]


def _offset(value: Any, what: str) -> int:
    """The seq of an offset dict ``{"seq": n}``."""
    seq = value.get("seq") if isinstance(value, Mapping) else None
    if type(seq) is not int or seq < 1:
        raise SparkPipelineError(
            f"{what} offset {value!r} is not an actorbus journal offset {{'seq': n}}; was the "
            "checkpoint written by another source? Use a new checkpointLocation"
        )
    return seq


def _open_journal(opts: SourceOptions) -> JournalReader:
    reader = JournalReader(opts.path)
    try:
        reader.first_seq()
    except JournalError as exc:
        raise SparkOptionError(
            f"option path={opts.path!r}: {exc}. The path must be a journal directory "
            "written by a Recorder (or JournalWriter), readable by the driver and every "
            "executor",
            option="path",
        ) from exc
    return reader


class _JournalReading:
    """What the batch and the stream reader share: options, schema, ``read``."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._journal: JournalReader | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_journal"] = None  # caches of this process stay here
        return state

    @property
    def journal(self) -> JournalReader:
        if self._journal is None:
            self._journal = _open_journal(self.opts)
        return self._journal

    def start_seq(self) -> int:
        start = self.opts.starting_offset
        if start == "earliest":
            return self.journal.first_seq()
        if start == "latest":
            return self.journal.end_seq()
        assert isinstance(start, int)
        return start

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of ``[partition.start, partition.end)`` as Arrow batches (executors)."""
        assert isinstance(partition, JournalRange)
        decoder = BatchDecoder(self.opts.message_class(), self.schema, self.opts.subject)
        start, end = partition.start, partition.end
        reader = JournalReader(self.opts.path)
        expected = start
        try:
            batches = reader.iter_columns(start, end, max_records=self.opts.batch_records)
            for cols in batches:
                seqs = cols["seq"]
                if seqs[0] != expected:
                    self._lost(expected, seqs[0], start, end)
                expected = seqs[-1] + 1
                batch = decoder.decode(
                    seqs, cols["type_name"], cols["subject"], cols["timestamp"], cols["body"]
                )
                if batch is not None:
                    yield batch
        except RecordsDeletedError as exc:
            self._lost(expected, exc.first_seq, start, end, exc)
            if exc.first_seq < end:
                yield from self.read(JournalRange(exc.first_seq, end))
            return
        if expected < end:
            self._lost(expected, end, start, end)

    def _lost(
        self, first: int, upto: int, start: int, end: int, cause: Exception | None = None
    ) -> None:
        text = (
            f"journal {self.opts.path}: records {first}..{upto - 1} of the range [{start}, "
            f"{end}) are gone (deleted by retention, or lost with the journal's unsynced "
            "tail)"
        )
        if self.opts.fail_on_data_loss:
            raise SparkPipelineError(
                f"{text}; the query cannot produce exact results. Size the journal's "
                "Retention to outlast the query's lag, or set option failOnDataLoss=false "
                "to skip missing records"
            ) from cause
        logger.warning("{}; skipped (failOnDataLoss=false)", text)


class JournalStreamReader(_JournalReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over journal seqs; offsets are ``{"seq": next seq to read}``."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        super().__init__(opts, schema)
        #: with Trigger.AvailableNow: the end seq fixed when the query started.
        self._target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        return {"seq": self.start_seq()}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.opts.max_records_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        begin = _offset(start, "start")
        committed = self.journal.end_seq()
        if begin > committed:
            raise SparkPipelineError(
                f"the query's offset is seq {begin} but journal {self.opts.path} ends at seq "
                f"{committed - 1}: the journal was replaced (or lost its unsynced tail) after "
                "the checkpoint was written, so its seqs no longer mean what the checkpoint "
                "saw; start the query with a new checkpointLocation"
            )
        end = committed if self._target is None else self._target
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        return {"seq": max(begin, end)}

    def reportLatestOffset(self) -> dict[str, int]:
        return {"seq": self.journal.end_seq()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.journal.end_seq()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return plan_ranges(
            _offset(start, "start"),
            _offset(end, "end"),
            self.opts.num_partitions,
            self.opts.min_partition_records,
        )

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the journal keeps records by size and age, not by
        consumer position (size its Retention to outlast the query's lag)."""


class JournalBatchReader(_JournalReading, DataSourceReader):
    """``spark.read.format("actorbus")``: ``[startingOffset, endingOffset)`` planned once."""

    def partitions(self) -> Sequence[InputPartition]:
        start = self.start_seq()
        last = self.opts.ending_offset
        end = self.journal.end_seq() if last == "latest" else last
        assert isinstance(end, int)
        ranges = plan_ranges(start, end, self.opts.num_partitions, self.opts.min_partition_records)
        return ranges or [JournalRange(start, start)]


class ActorbusDataSource(DataSource):
    """The ``"actorbus"`` format: read a feed journal, publish rows onto a bus.

    Register once per session with ``spark.dataSource.register(ActorbusDataSource)``
    (or :func:`actorbus.spark.register`).  Options are in docs/spark.md.
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _source(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    def schema(self) -> StructType:
        opts = self._source()
        _open_journal(opts)
        return message_schema(opts.message_class())

    def _checked(self, schema: StructType) -> SourceOptions:
        opts = self._source()
        _open_journal(opts)
        cls = opts.message_class()
        natural = message_schema(cls)
        if schema != natural:
            raise SparkOptionError(
                f"the actorbus source's schema comes from the message class "
                f"{cls.__qualname__}: {natural.simpleString()}; a user schema "
                f"({schema.simpleString()}) cannot be applied — drop .schema(...) and select "
                "or cast columns after load()",
                option="schema",
            )
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        return JournalBatchReader(self._checked(schema), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JournalStreamReader(self._checked(schema), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import BusStreamWriter

        return BusStreamWriter(SinkOptions.parse(self.options), schema)
