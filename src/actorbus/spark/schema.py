"""From message classes to Spark schemas, and from journal records to Arrow batches.

Theory of operation
-------------------
A notification class *is* the schema of the rows the ``"actorbus"`` source
yields: :func:`message_schema` gives ``seq`` (bigint), ``subject`` (string),
``timestamp`` (timestamp, from the record's epoch milliseconds) and then one
column per declared field, in declaration order, with the natural Spark type
(the table in docs/spark.md).  The three leading columns are never null; field
columns are always nullable (an optional field may be None, and a value Spark
cannot hold — an int beyond 64 bits, a non-finite Decimal — reads as null).

:class:`BatchDecoder` runs on the executors: it keeps the records of one
message type (and subject), decodes their bodies with the class's generated
codec, converts the few field types Arrow does not take as they are (Enum,
UUID, addresses, structs, Decimal scale), and builds one
``pyarrow.RecordBatch`` whose schema is exactly the one Spark expects.
"""

from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
import uuid
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..bus import SocketAddress
from ..bus.codec import decode
from ..bus.message import Field, FieldSpec, MessageKey, Notification
from ..errors import CodecError
from ._errors import SparkPipelineError

__all__ = [
    "DECIMAL_PRECISION",
    "DECIMAL_SCALE",
    "BatchDecoder",
    "arrow_schema",
    "field_spark_type",
    "message_schema",
]

#: Spark's widest decimal; Python Decimals are held as decimal(38, 18).
DECIMAL_PRECISION: Final = 38
DECIMAL_SCALE: Final = 18
#: the columns every row starts with.
RECORD_COLUMNS: Final = ("seq", "subject", "timestamp")

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_DECIMAL_QUANTUM: Final = Decimal(1).scaleb(-DECIMAL_SCALE)
_DECIMAL_LIMIT: Final = Decimal(10) ** (DECIMAL_PRECISION - DECIMAL_SCALE)
_DECIMAL_CONTEXT: Final = Context(prec=DECIMAL_PRECISION + 40, rounding=ROUND_HALF_EVEN)
_UTC: Final = _dt.UTC
_IP_BASE: Final = ipaddress._BaseAddress  # common base of IPv4Address and IPv6Address

#: a Python value of a field → what pyarrow takes for the column type (None: as is)
Converter = Callable[[Any], Any]


# --------------------------------------------------------------------------- types


def _base(spec_type: Any) -> Any:
    """The field type without its ``| None``."""
    return spec_type.inner if spec_type.optional else spec_type


def _enum_mode(cls: type[enum.Enum]) -> str:
    """'int' when every member's value is a 64-bit int, 'value' when every value is
    a str, else 'name'."""
    values = [m.value for m in cls.__members__.values()]
    if (
        values
        and all(type(v) is int or (isinstance(v, int) and not isinstance(v, bool)) for v in values)
        and all(_INT64_MIN <= int(v) <= _INT64_MAX for v in values)
    ):
        return "int"
    if values and all(isinstance(v, str) for v in values):
        return "value"
    return "name"


def field_spark_type(ftype: Any, where: str = "field") -> DataType:
    """The Spark type of one compiled field type (``FieldSpec.type``)."""
    t = _base(ftype)
    py = t.python_type
    if py is tuple and hasattr(t, "item"):
        return ArrayType(field_spark_type(t.item, f"{where}[]"), containsNull=True)
    if py is bool:
        return BooleanType()
    if py is int:
        return LongType()
    if py is float:
        return DoubleType()
    if py is str:
        return StringType()
    if py is bytes:
        return BinaryType()
    if py is Decimal:
        return DecimalType(DECIMAL_PRECISION, DECIMAL_SCALE)
    if py is _dt.datetime:
        return TimestampType()
    if py is _dt.date:
        return DateType()
    if py is _dt.time:
        return StringType()
    if py is _dt.timedelta:
        return DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)
    if py in (uuid.UUID, ipaddress.IPv4Address, ipaddress.IPv6Address, _IP_BASE):
        return StringType()
    if py is SocketAddress:
        return StructType(
            [StructField("host", StringType(), True), StructField("port", LongType(), True)]
        )
    if py is MessageKey:
        return StructType(
            [StructField("type", StringType(), True), StructField("subject", StringType(), True)]
        )
    if isinstance(py, type) and issubclass(py, enum.Enum):
        return LongType() if _enum_mode(py) == "int" else StringType()
    if isinstance(py, type) and issubclass(py, Field):
        return StructType(
            [
                StructField(f.name, field_spark_type(f.type, f"{where}.{f.name}"), True)
                for f in py.__fields__
            ]
        )
    raise SparkPipelineError(  # pragma: no cover - every declarable type is mapped above
        f"{where}: field type {t.display} has no Spark column type"
    )


def message_schema(cls: type[Notification]) -> StructType:
    """The row schema of ``cls``: seq, subject, timestamp, then its fields."""
    fields = [
        StructField("seq", LongType(), False),
        StructField("subject", StringType(), False),
        StructField("timestamp", TimestampType(), False),
    ]
    for spec in cls.__fields__[2:]:
        if spec.name in RECORD_COLUMNS:  # pragma: no cover - message.py forbids subject/timestamp
            raise SparkPipelineError(
                f"{cls.__qualname__}.{spec.name}: clashes with the source's {spec.name!r} "
                "column; rename the field"
            )
        where = f"{cls.__qualname__}.{spec.name}"
        fields.append(StructField(spec.name, field_spark_type(spec.type, where), True))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks Python data source batches against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


# ---------------------------------------------------------------------- converters


def _int_or_none(value: int) -> int | None:
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _decimal(value: Decimal) -> Decimal | None:
    if not value.is_finite():
        return None
    try:
        q = value.quantize(_DECIMAL_QUANTUM, context=_DECIMAL_CONTEXT)
    except InvalidOperation:
        return None
    return q if abs(q) < _DECIMAL_LIMIT else None


def _datetime(value: _dt.datetime) -> _dt.datetime:
    return value.replace(tzinfo=_UTC) if value.tzinfo is None else value


def _optional(convert: Converter) -> Converter:
    def none_or(value: Any) -> Any:
        return None if value is None else convert(value)

    return none_or


def converter(ftype: Any) -> Converter | None:
    """How a field's Python value becomes the Arrow input value; None when the
    value goes in as it is.  ``ftype`` is a compiled field type."""
    t = _base(ftype)
    conv = _converter(t)
    if conv is None or not ftype.optional:
        return conv
    return _optional(conv)


def _converter(t: Any) -> Converter | None:
    py = t.python_type
    if py is tuple and hasattr(t, "item"):
        item = converter(t.item)
        if item is None:
            if t.item.python_type is int:
                return lambda seq: [_int_or_none(v) for v in seq]
            return None
        return lambda seq: [item(v) for v in seq]
    if py in (bool, float, str, bytes, _dt.date, _dt.timedelta):
        return None
    if py is int:
        return None  # whole columns are checked at once; see _column
    if py is Decimal:
        return _decimal
    if py is _dt.datetime:
        return _datetime
    if py is _dt.time:
        return _dt.time.isoformat
    if py in (uuid.UUID, ipaddress.IPv4Address, ipaddress.IPv6Address, _IP_BASE):
        return str
    if py is SocketAddress:
        return lambda v: {"host": v[0], "port": v[1]}
    if py is MessageKey:
        return lambda v: {"type": v[0].__type_name__, "subject": v[1]}
    if isinstance(py, type) and issubclass(py, enum.Enum):
        mode = _enum_mode(py)
        if mode == "int":
            return lambda v: int(v.value)
        if mode == "value":
            return lambda v: str(v.value)
        return lambda v: v.name
    if isinstance(py, type) and issubclass(py, Field):
        return _struct_converter(py.__fields__)
    raise SparkPipelineError(  # pragma: no cover - mirrors field_spark_type
        f"field type {t.display} has no Arrow conversion"
    )


def _struct_converter(fields: Sequence[FieldSpec]) -> Converter:
    plan: list[tuple[str, int, Converter | None]] = []
    for f in fields:
        conv = converter(f.type)
        if conv is None and _base(f.type).python_type is int:
            conv = _optional(_int_or_none) if f.type.optional else _int_or_none
        plan.append((f.name, f.position, conv))

    def to_dict(value: Any) -> dict[str, Any]:
        # a subclass instance keeps only the declared (base class) fields
        return {name: value[pos] if conv is None else conv(value[pos]) for name, pos, conv in plan}

    return to_dict


# ---------------------------------------------------------------------- the decoder


class BatchDecoder:
    """Journal columns → Arrow record batches of one message class (executor side)."""

    def __init__(
        self, cls: type[Notification], schema: StructType, subject: str | None = None
    ) -> None:
        self.cls = cls
        self.type_name = cls.__type_name__
        self.subject = subject
        self.arrow_schema = arrow_schema(schema)
        self._types = [f.type for f in self.arrow_schema]
        self._fields = cls.__fields__[2:]
        self._convert = [converter(f.type) for f in self._fields]
        self._int_column = [
            conv is None and _base(f.type).python_type is int
            for f, conv in zip(self._fields, self._convert, strict=True)
        ]
        self._ts_type = pa.timestamp("us", tz="UTC")

    def empty(self) -> pa.RecordBatch:
        """A batch with no rows."""
        return pa.RecordBatch.from_arrays(
            [pa.array([], type=t) for t in self._types], schema=self.arrow_schema
        )

    def decode(
        self,
        seqs: Sequence[int],
        type_names: Sequence[str],
        subjects: Sequence[str],
        timestamps: Sequence[int],
        bodies: Sequence[bytes],
    ) -> pa.RecordBatch | None:
        """The rows of the records of this class (and subject), or None if none match."""
        type_name, subject = self.type_name, self.subject
        n = len(seqs)
        if type_names.count(type_name) == n and (subject is None or subjects.count(subject) == n):
            keep = None
        else:
            keep = [
                i
                for i in range(n)
                if type_names[i] == type_name and (subject is None or subjects[i] == subject)
            ]
            if not keep:
                return None
            seqs = [seqs[i] for i in keep]
            subjects = [subjects[i] for i in keep]
            timestamps = [timestamps[i] for i in keep]
            bodies = [bodies[i] for i in keep]
        cls = self.cls
        try:
            messages = [decode(cls, body) for body in bodies]
        except CodecError:
            for seq, body in zip(seqs, bodies, strict=True):
                try:
                    decode(cls, body)
                except CodecError as exc:
                    raise SparkPipelineError(
                        f"journal record seq {seq} (type {type_name!r}) does not decode as "
                        f"{cls.__qualname__}: {exc}; the class was changed incompatibly "
                        "since the record was written — read it with the class as it was, "
                        "or start after it (option startingOffset)"
                    ) from exc
            raise  # pragma: no cover - the loop above finds the record
        columns = list(zip(*messages, strict=True)) if messages else []
        micros = pc.multiply(pa.array(timestamps, pa.int64()), 1000)
        arrays = [
            pa.array(seqs, pa.int64()),
            pa.array(subjects, pa.string()),
            micros.cast(self._ts_type),
        ]
        for i, conv in enumerate(self._convert):
            values: Sequence[Any] = columns[i + 2]
            atype = self._types[i + 3]
            if conv is not None:
                values = [conv(v) for v in values]
            if self._int_column[i]:
                arrays.append(_int_array(values, atype))
            else:
                arrays.append(pa.array(values, type=atype))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


def _int_array(values: Sequence[Any], atype: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, type=atype)
    except (OverflowError, pa.ArrowInvalid):
        return pa.array([None if v is None else _int_or_none(v) for v in values], type=atype)
