"""The ``"actorbus"`` streaming sink: each output row becomes a notification on a bus node.

Theory of operation
-------------------
``writeStream.format("actorbus")`` plans a :class:`BusStreamWriter` on the
driver, which checks the query's columns against the message class named by
``type`` once (every field without a default needs a column of a compatible
type; no column may be left over).  Each task of each micro-batch then runs
:meth:`BusStreamWriter.write` on an executor:

1. it builds a short-lived :class:`~actorbus.Bus` node and connects it to the
   node at ``host:port`` (which must ``Bus.listen``), waiting for the link to
   log on (``connectTimeout``);
2. for each subject its rows carry it advertises a publish feed and waits up
   to ``subscriberTimeout`` for the feed to come UP — that is, for the
   subscriptions of the remote node to arrive;  rows whose subject has no
   subscriber by then are dropped (pub/sub: nobody listens) and counted;
3. it publishes the rows as notifications, closes the node (which drains the
   link) and returns counts to the driver, which logs them per batch.

**Delivery is at-least-once.**  A task that fails after publishing some rows
is retried and publishes them again; a query restarted from its checkpoint
re-runs the batch it was in when it stopped.  A message class that declares
``batch_id: int`` gets the micro-batch id in it, and a re-run batch carries the
same id and (for a deterministic query over the journal) the same rows, so a
subscriber drops a message whose ``(batch_id, key)`` it has already seen.
"""

from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    FractionalType,
    IntegralType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from .._log import logger
from ..bus import SocketAddress
from ..bus.feeds import PublishFeed
from ..bus.message import Field, FieldSpec, MessageKey, Notification, lookup_type
from ..bus.scope import FeedState
from ..errors import LinkClosedError
from ..node import Bus
from ._errors import SinkDeliveryError, SparkPipelineError
from ._options import BATCH_ID_FIELD, SinkOptions

__all__ = ["BATCH_ID_FIELD", "BusStreamWriter", "RowEncoder", "SinkCommit"]

#: the local property Spark sets on every task of a streaming micro-batch.
_BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"
_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MS: Final = _dt.timedelta(milliseconds=1)
_IP_BASE: Final = ipaddress._BaseAddress

Convert = Callable[[Any], Any]


# ------------------------------------------------------------------ column checks


def _base(ftype: Any) -> Any:
    return ftype.inner if ftype.optional else ftype


def _enum_mode(cls: type[enum.Enum]) -> str:
    from .schema import _enum_mode as mode

    return mode(cls)


def _mismatch(where: str, ftype: Any, dt: DataType, wants: str) -> SparkPipelineError:
    return SparkPipelineError(
        f"column {where} is {dt.simpleString()}, which cannot fill the field of type "
        f"{ftype.display}; it needs {wants} — cast or rename the column"
    )


def _identity(value: Any) -> Any:
    return value


def _column_converter(ftype: Any, dt: DataType, where: str) -> Convert:
    """Check that Spark type ``dt`` can fill field type ``ftype``; return how an
    Arrow Python value of the column becomes the field value."""
    conv = _converter(_base(ftype), dt, where)
    if conv is _identity:
        return conv

    def none_or(value: Any) -> Any:
        return None if value is None else conv(value)

    return none_or


def _converter(t: Any, dt: DataType, where: str) -> Convert:
    py = t.python_type
    if py is tuple and hasattr(t, "item"):
        if not isinstance(dt, ArrayType):
            raise _mismatch(where, t, dt, "an array")
        item = _column_converter(t.item, dt.elementType, f"{where}[]")
        if item is _identity:
            return _identity
        return lambda seq: [item(v) for v in seq]
    simple: dict[Any, tuple[tuple[type, ...], str, Convert]] = {
        bool: ((BooleanType,), "boolean", _identity),
        int: ((IntegralType,), "an integral type", _identity),
        float: ((FractionalType, IntegralType), "a numeric type", float),
        str: ((StringType,), "string", _identity),
        bytes: ((BinaryType,), "binary", _identity),
        Decimal: ((DecimalType, IntegralType), "decimal or integral", _to_decimal),
        _dt.date: ((DateType,), "date", _identity),
        _dt.time: ((StringType,), "string (ISO time)", _dt.time.fromisoformat),
        _dt.timedelta: ((DayTimeIntervalType,), "interval day to second", _identity),
        uuid.UUID: ((StringType,), "string", uuid.UUID),
        ipaddress.IPv4Address: ((StringType,), "string", ipaddress.IPv4Address),
        ipaddress.IPv6Address: ((StringType,), "string", ipaddress.IPv6Address),
        _IP_BASE: ((StringType,), "string", ipaddress.ip_address),
    }
    if py in simple:
        types, wants, conv = simple[py]
        if not isinstance(dt, types):
            raise _mismatch(where, t, dt, wants)
        if py is float and isinstance(dt, FractionalType) and not isinstance(dt, DecimalType):
            return _identity
        return conv
    if py is _dt.datetime:
        if isinstance(dt, TimestampType):
            return _aware
        if isinstance(dt, TimestampNTZType):
            return _identity
        raise _mismatch(where, t, dt, "timestamp or timestamp_ntz")
    if py is SocketAddress:
        _struct_names(dt, where, t, required=("host", "port"), allowed=("host", "port"))
        return lambda v: SocketAddress(v["host"], v["port"])
    if py is MessageKey:
        _struct_names(dt, where, t, required=("type", "subject"), allowed=("type", "subject"))
        return _message_key
    if isinstance(py, type) and issubclass(py, enum.Enum):
        return _enum_converter(py, t, dt, where)
    if isinstance(py, type) and issubclass(py, Field):
        if not isinstance(dt, StructType):
            raise _mismatch(where, t, dt, f"a struct of the fields of {py.__qualname__}")
        return _struct_converter(py, dt, where)
    raise _mismatch(where, t, dt, "a type this sink does not map")  # pragma: no cover


def _struct_names(
    dt: DataType, where: str, t: Any, *, required: Sequence[str], allowed: Sequence[str]
) -> None:
    if not isinstance(dt, StructType):
        raise _mismatch(where, t, dt, f"struct<{', '.join(allowed)}>")
    names = dt.fieldNames()
    missing = [n for n in required if n not in names]
    extra = [n for n in names if n not in allowed]
    if missing or extra:
        raise _mismatch(where, t, dt, f"struct<{', '.join(allowed)}>")


def _enum_converter(py: type[enum.Enum], t: Any, dt: DataType, where: str) -> Convert:
    mode = _enum_mode(py)
    if mode == "int":
        if not isinstance(dt, IntegralType):
            raise _mismatch(where, t, dt, "an integral type (the members' values)")
        return py
    if not isinstance(dt, StringType):
        raise _mismatch(where, t, dt, "string")
    if mode == "value":
        return py
    return py.__getitem__


def _struct_converter(cls: type[Field], dt: StructType, where: str) -> Convert:
    specs = {f.name: f for f in cls.__fields__}
    extra = [n for n in dt.fieldNames() if n not in specs]
    if extra:
        raise SparkPipelineError(
            f"column {where} has struct fields {extra} that {cls.__qualname__} does not "
            f"declare (its fields: {list(specs)}); drop them"
        )
    given = {f.name: f.dataType for f in dt.fields}
    missing = [f.name for f in cls.__fields__ if f.required and f.name not in given]
    if missing:
        raise SparkPipelineError(
            f"column {where} lacks struct fields {missing} that {cls.__qualname__} requires"
        )
    plan = [
        (name, _column_converter(specs[name].type, sdt, f"{where}.{name}"))
        for name, sdt in given.items()
    ]

    def to_struct(value: dict[str, Any]) -> Any:
        return cls(**{name: conv(value[name]) for name, conv in plan})

    return to_struct


def _to_decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(value)


def _aware(value: _dt.datetime) -> _dt.datetime:
    return value.replace(tzinfo=_dt.UTC) if value.tzinfo is None else value.astimezone(_dt.UTC)


def _message_key(value: dict[str, Any]) -> MessageKey:
    cls = lookup_type(value["type"])
    if cls is None or not isinstance(cls, type) or not issubclass(cls, Notification):
        raise SparkPipelineError(
            f"message key {value!r}: no message class is registered under type "
            f"{value['type']!r}; import its module in the executors (option module)"
        )
    return MessageKey(cls, value["subject"])


def _timestamp_ms(value: Any) -> int:
    if isinstance(value, _dt.datetime):
        return (_aware(value) - _EPOCH) // _MS
    return int(value)


# ---------------------------------------------------------------------- encoder


class RowEncoder:
    """Arrow batches of the query's rows → notifications of one class.

    Built on the driver to check the columns (raising :class:`SparkPipelineError`
    with the column and what it needs), and again on each executor to convert.
    """

    def __init__(self, cls: type[Notification], schema: StructType, opts: SinkOptions) -> None:
        self.cls = cls
        name = cls.__qualname__
        columns = {f.name: f.dataType for f in schema.fields}
        index = {f.name: i for i, f in enumerate(schema.fields)}
        specs: tuple[FieldSpec, ...] = cls.__fields__
        used: set[str] = set()
        # subject
        self.subject: str | None = opts.subject
        self.subject_index: int | None = None
        if opts.subject_column is not None:
            sdt = columns.get(opts.subject_column)
            if sdt is None:
                raise SparkPipelineError(
                    f"option subjectColumn={opts.subject_column!r}: the query has no such "
                    f"column; its columns are {list(columns)}"
                )
            if not isinstance(sdt, StringType):
                raise SparkPipelineError(
                    f"option subjectColumn={opts.subject_column!r}: the column is "
                    f"{sdt.simpleString()}; it must be a string"
                )
            self.subject_index = index[opts.subject_column]
            used.add(opts.subject_column)
        # timestamp
        self.timestamp_index: int | None = None
        tdt = columns.get("timestamp")
        if tdt is not None:
            if not isinstance(tdt, (TimestampType, TimestampNTZType, IntegralType)):
                raise SparkPipelineError(
                    f"column timestamp is {tdt.simpleString()}; the message timestamp needs "
                    "a timestamp or an integral number of epoch milliseconds"
                )
            self.timestamp_index = index["timestamp"]
            used.add("timestamp")
        # fields: (column index or None, converter, default, filled with the batch id)
        self.has_batch_id = False
        self.plan: list[tuple[int | None, Convert, Any, bool]] = []
        for spec in specs[2:]:
            if spec.name == BATCH_ID_FIELD and _base(spec.type).python_type is int:
                if spec.name in columns:
                    raise SparkPipelineError(
                        f"column {BATCH_ID_FIELD}: {name} declares {BATCH_ID_FIELD}: int, "
                        "which the sink fills with the micro-batch id; drop the column"
                    )
                self.has_batch_id = True
                self.plan.append((None, _identity, None, True))
            elif spec.name in columns:
                conv = _column_converter(spec.type, columns[spec.name], spec.name)
                self.plan.append((index[spec.name], conv, None, False))
                used.add(spec.name)
            elif spec.required:
                raise SparkPipelineError(
                    f"{name}.{spec.name} ({spec.type.display}) has no default and the query "
                    f"has no column {spec.name!r}; its columns are {list(columns)} — add or "
                    "rename a column (select(... .alias(...)))"
                )
            else:
                self.plan.append((None, _identity, spec.default, False))
        extra = [c for c in columns if c not in used]
        if extra:
            raise SparkPipelineError(
                f"columns {extra} are not fields of {name} (fields: "
                f"{[s.name for s in specs[2:]]}); select only the fields (a subject column is "
                "named by option subjectColumn, the message time by a column 'timestamp')"
            )

    def messages(self, batch: pa.RecordBatch, batch_id: int) -> list[Notification]:
        """The batch's rows as messages (raises SparkPipelineError naming a bad row)."""
        n = batch.num_rows
        if n == 0:
            return []
        cols = [c.to_pylist() for c in batch.columns]
        try:
            return self._build(cols, 0, n, batch_id)
        except _ROW_ERRORS:
            for r in range(n):
                try:
                    self._build(cols, r, r + 1, batch_id)
                except _ROW_ERRORS as bad:
                    raise SparkPipelineError(
                        f"row {r} of a batch of {n} does not make a {self.cls.__qualname__}: "
                        f"{type(bad).__name__}: {bad}; filter or fill such rows in the query "
                        "(a null in a required field or in the subject column, a bad value)"
                    ) from bad
            raise  # pragma: no cover - the loop finds the row

    def _build(self, cols: list[list[Any]], lo: int, hi: int, batch_id: int) -> list[Notification]:
        n = hi - lo
        subjects: Sequence[Any] = (
            [self.subject] * n if self.subject_index is None else cols[self.subject_index][lo:hi]
        )
        stamps: Sequence[Any] = (
            [None] * n
            if self.timestamp_index is None
            else [
                None if v is None else _timestamp_ms(v) for v in cols[self.timestamp_index][lo:hi]
            ]
        )
        values: list[Sequence[Any]] = [subjects, stamps]
        for index, conv, default, is_batch_id in self.plan:
            if is_batch_id:
                values.append([batch_id] * n)
            elif index is None:
                values.append([default] * n)
            elif conv is _identity:
                values.append(cols[index][lo:hi] if n != len(cols[index]) else cols[index])
            else:
                values.append([conv(v) for v in cols[index][lo:hi]])
        cls = self.cls
        return [cls(*row) for row in zip(*values, strict=True)]


#: what a bad row raises while converted (ValidationError is a TypeError).
_ROW_ERRORS: Final = (TypeError, ValueError, KeyError, ArithmeticError, SparkPipelineError)


# ---------------------------------------------------------------------- publishing


class _Feeds:
    """Publish feeds by subject, each waited for until UP (a subscriber is there)."""

    def __init__(self, bus: Bus, cls: type[Notification], timeout: float) -> None:
        self._bus = bus
        self._cls = cls
        self._timeout = timeout
        self._cond = threading.Condition()
        self.up: dict[str, PublishFeed[Any]] = {}
        self.down: set[str] = set()

    def _changed(self, state: FeedState, feed: PublishFeed[Any]) -> None:
        with self._cond:
            self._cond.notify_all()

    def ensure(self, subjects: Iterable[str]) -> None:
        new = {s for s in subjects if s not in self.up and s not in self.down}
        if not new:
            return
        opened = {s: self._bus.publisher(self._cls, s, on_status=self._changed) for s in new}
        with self._cond:
            self._cond.wait_for(lambda: all(f.is_feed_up() for f in opened.values()), self._timeout)
        for subject, feed in opened.items():
            if feed.is_feed_up():
                self.up[subject] = feed
            else:
                feed.close()
                self.down.add(subject)

    def close(self) -> None:
        for feed in self.up.values():
            feed.close()


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one sink task did, sent back to the driver."""

    partition: int
    attempt: int
    rows: int = 0
    published: int = 0
    dropped: int = 0
    #: up to 10 subjects whose feed never came UP (their rows were dropped).
    no_subscriber: list[str] = field(default_factory=list)


class BusStreamWriter(DataSourceStreamArrowWriter):
    """Publishes each micro-batch's rows to the bus node at ``host:port``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        RowEncoder(opts.message_class(), schema, opts)  # check the columns now, on the driver

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        prop = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
        batch_id = int(prop) if prop is not None else -1
        partition = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        encoder = RowEncoder(self.opts.message_class(), self.schema, self.opts)
        done = SinkCommit(partition, attempt)
        node = f"spark-sink-b{batch_id}-p{partition}-a{attempt}-{uuid.uuid4().hex[:8]}"
        with Bus(node_id=node) as bus:
            address = f"{self.opts.host}:{self.opts.port}"
            started = time.monotonic()
            link = bus.connect(self.opts.host, self.opts.port)
            try:
                link.wait_logged_on(self.opts.connect_timeout)
            except (TimeoutError, LinkClosedError) as exc:
                raise SinkDeliveryError(
                    f"sink task (batch {batch_id}, partition {partition}) could not log on to "
                    f"the bus node at {address} within {self.opts.connect_timeout:g} s: {exc}; "
                    "is the node listening (Bus.listen) and reachable from the executors? "
                    "(options host, port, connectTimeout)"
                ) from exc
            feeds = _Feeds(bus, encoder.cls, self.opts.subscriber_timeout)
            try:
                for batch in iterator:
                    messages = encoder.messages(batch, batch_id)
                    done.rows += len(messages)
                    feeds.ensure({m.subject for m in messages})
                    up = feeds.up
                    for message in messages:
                        feed = up.get(message.subject)
                        if feed is None:
                            done.dropped += 1
                        else:
                            feed.publish(message)
                            done.published += 1
            finally:
                feeds.close()
            done.no_subscriber = sorted(feeds.down)[:10]
            logger.debug(
                "sink task batch {} partition {}: {} rows, {} published, {} dropped in {:.3f} s",
                batch_id,
                partition,
                done.rows,
                done.published,
                done.dropped,
                time.monotonic() - started,
            )
        return done

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, SinkCommit)]
        rows = sum(m.rows for m in done)
        dropped = sum(m.dropped for m in done)
        logger.info(
            "actorbus sink batch {}: {} rows, {} published to {}:{}",
            batchId,
            rows,
            rows - dropped,
            self.opts.host,
            self.opts.port,
        )
        if dropped:
            lonely = sorted({s for m in done for s in m.no_subscriber})
            logger.warning(
                "actorbus sink batch {}: {} rows dropped, no subscriber within {:g} s for "
                "subjects such as {}",
                batchId,
                dropped,
                self.opts.subscriber_timeout,
                lonely[:10],
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, SinkCommit)]
        logger.warning(
            "actorbus sink batch {} aborted after {} rows were published by the tasks that "
            "finished; Spark retries the batch, so subscribers may see them again "
            "(deduplicate by batch_id)",
            batchId,
            sum(m.published for m in done),
        )
