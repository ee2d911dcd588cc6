"""The Spark pipeline's parts without a JVM: options, partition planning, the schema
mapping of every field type, journal records → Arrow batches, rows → messages, and
the lazy import."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_messages import (
    AllTypes,
    Other,
    Point,
    Reading,
    Summary,
    WindowAvg,
)
from spark_support import BASE_MS, all_types, readings_plan, write_journal

from actorbus.journal import JournalReader
from actorbus.spark import SparkOptionError, SparkPipelineError, message_schema
from actorbus.spark._options import SinkOptions, SourceOptions, resolve_message_class
from actorbus.spark.schema import BatchDecoder
from actorbus.spark.sink import RowEncoder
from actorbus.spark.source import plan_ranges

pytestmark = pytest.mark.spark

SOURCE = {"path": "/tmp/j", "type": "test.spark.Reading", "module": "spark_messages"}
SINK = {
    "host": "127.0.0.1",
    "port": "7000",
    "type": "test.spark.WindowAvg",
    "module": "spark_messages",
    "subjectColumn": "subject",
}


# ------------------------------------------------------------------------ options


def test_source_options_defaults_and_values() -> None:
    opts = SourceOptions.parse({**SOURCE, "maxrecordspertrigger": "50_000", "NUMPARTITIONS": "3"})
    assert opts.max_records_per_trigger == 50_000
    assert opts.num_partitions == 3
    assert opts.starting_offset == "earliest"
    assert opts.fail_on_data_loss is True
    assert opts.message_class() is Reading
    assert SourceOptions.parse({**SOURCE, "startingOffset": "17"}).starting_offset == 17


@pytest.mark.parametrize(
    ("options", "option", "text"),
    [
        ({"type": "x"}, "path", "needs option 'path'"),
        ({"path": "/j"}, "type", "needs option 'type'"),
        ({**SOURCE, "maxRecordsPerTrigger": "lots"}, "maxRecordsPerTrigger", "expected an integer"),
        ({**SOURCE, "maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger", "in 1.."),
        ({**SOURCE, "startingOffset": "first"}, "startingOffset", "earliest or latest"),
        ({**SOURCE, "failOnDataLoss": "maybe"}, "failOnDataLoss", "true or false"),
        ({**SOURCE, "maxRecordPerTrigger": "5"}, "maxRecordPerTrigger", "did you mean"),
    ],
)
def test_source_option_errors_name_the_option(
    options: dict[str, str], option: str, text: str
) -> None:
    with pytest.raises(SparkOptionError, match=text) as err:
        SourceOptions.parse(options)
    assert err.value.option == option
    assert option in str(err.value)


def test_sink_options_need_exactly_one_subject_source() -> None:
    opts = SinkOptions.parse(SINK)
    assert (opts.port, opts.subject_column, opts.subject) == (7000, "subject", None)
    with pytest.raises(SparkOptionError, match="found both"):
        SinkOptions.parse({**SINK, "subject": "/x"})
    no_subject = {k: v for k, v in SINK.items() if k != "subjectColumn"}
    with pytest.raises(SparkOptionError, match="found neither"):
        SinkOptions.parse(no_subject)
    with pytest.raises(SparkOptionError, match=r"port='99999'.*1\.\.65535"):
        SinkOptions.parse({**SINK, "port": "99999"})
    with pytest.raises(SparkOptionError, match="connectTimeout"):
        SinkOptions.parse({**SINK, "connectTimeout": "-1"})


def test_unknown_message_type_and_module_are_clear_errors() -> None:
    with pytest.raises(SparkOptionError, match=r"type='test.spark.Readin'.*close names") as err:
        resolve_message_class("test.spark.Readin", "spark_messages")
    assert err.value.option == "type"
    assert "set option module" in str(err.value)
    with pytest.raises(SparkOptionError, match="cannot import it") as err:
        resolve_message_class("test.spark.Reading", "no_such_module_here")
    assert err.value.option == "module"
    with pytest.raises(SparkOptionError, match="not a Notification"):
        resolve_message_class("test.spark.Point", "spark_messages")


def test_default_type_names_import_their_module() -> None:
    code = textwrap.dedent(
        """
        from actorbus.spark._options import resolve_message_class
        cls = resolve_message_class("spark_defaults.Plain", None)
        print(cls.__module__, cls.__qualname__)
        """
    )
    mod = Path(__file__).with_name("spark_defaults.py")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=mod.parent,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["spark_defaults", "Plain"]


# ------------------------------------------------------------------ partitioning


def test_plan_ranges_are_contiguous_and_about_core_count() -> None:
    ranges = plan_ranges(1, 100_001, 2, 10_000)
    assert [(r.start, r.end) for r in ranges] == [(1, 50_001), (50_001, 100_001)]
    assert len(plan_ranges(1, 1_000_001, 8, 10_000)) == 8
    # small batches are not split below min_records
    assert [(r.start, r.end) for r in plan_ranges(5, 9_005, 8, 10_000)] == [(5, 9_005)]
    assert len(plan_ranges(1, 25_001, 8, 10_000)) == 2
    assert plan_ranges(7, 7, 4, 1) == []
    for parts in (1, 3, 7):
        got = plan_ranges(10, 1_010, parts, 1)
        assert got[0].start == 10
        assert got[-1].end == 1_010
        assert all(a.end == b.start for a, b in zip(got, got[1:], strict=False))
        assert len(got) == parts


# ------------------------------------------------------------------ schema mapping


def test_schema_maps_every_field_type() -> None:
    schema = message_schema(AllTypes)
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    assert types == {
        "seq": "bigint",
        "subject": "string",
        "timestamp": "timestamp",
        "flag": "boolean",
        "count": "bigint",
        "ratio": "double",
        "name": "string",
        "blob": "binary",
        "amount": "decimal(38,18)",
        "at": "timestamp",
        "day": "date",
        "clock": "string",
        "span": "interval day to second",
        "color": "string",
        "level": "bigint",
        "mixed": "string",
        "ident": "string",
        "ip4": "string",
        "ip6": "string",
        "ip": "string",
        "address": "struct<host:string,port:bigint>",
        "key": "struct<type:string,subject:string>",
        "point": "struct<x:bigint,y:double,label:string>",
        "points": "array<struct<x:bigint,y:double,label:string>>",
        "numbers": "array<bigint>",
        "words": "array<string>",
        "maybe": "bigint",
    }
    nullable = {f.name: f.nullable for f in schema.fields}
    assert not nullable["seq"]
    assert not nullable["subject"]
    assert not nullable["timestamp"]
    assert all(nullable[name] for name in list(types)[3:])


def _decode_journal(path: Path, cls: type, subject: str | None = None) -> pa.RecordBatch:
    cols = JournalReader(path).read_columns(1)
    decoder = BatchDecoder(cls, message_schema(cls), subject)
    batch = decoder.decode(
        cols["seq"], cols["type_name"], cols["subject"], cols["timestamp"], cols["body"]
    )
    assert batch is not None
    return batch


def test_decoder_converts_every_field_type(journal_dir: Path) -> None:
    write_journal(journal_dir, [all_types(0), all_types(1, maybe=7, name="second")])
    rows = _decode_journal(journal_dir, AllTypes).to_pylist()
    assert len(rows) == 2
    row = rows[0]
    assert row["seq"] == 1
    assert row["subject"] == "/all"
    assert row["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)
    assert row["flag"] is True
    assert row["count"] == -(2**62)
    assert row["ratio"] == 0.25
    assert row["name"] == "naïve ✓"
    assert row["blob"] == b"\x00\xff"
    assert row["amount"] == Decimal("12345.678901234567890123").quantize(Decimal("1e-18"))
    assert row["at"] == dt.datetime(2024, 5, 6, 5, 8, 9, 123456, tzinfo=dt.UTC)
    assert row["day"] == dt.date(2024, 2, 29)
    assert row["clock"] == "23:59:58.000007"
    assert row["span"] == dt.timedelta(days=2, seconds=3, microseconds=4)
    assert (row["color"], row["level"], row["mixed"]) == ("green", 2, "TWO")
    assert row["ident"] == str(uuid.UUID(int=12345678901234567890))
    assert (row["ip4"], row["ip6"], row["ip"]) == ("10.1.2.3", "::1", "192.168.0.1")
    assert row["address"] == {"host": "example.org", "port": 443}
    assert row["key"] == {"type": "test.spark.Reading", "subject": "/k"}
    # a subclass instance where the base struct is declared keeps the declared fields
    assert row["point"] == {"x": 1, "y": 2.5, "label": "p"}
    assert row["points"] == [
        {"x": 3, "y": 4.0, "label": None},
        {"x": 5, "y": 6.0, "label": "q"},
    ]
    assert row["numbers"] == [1, 2, 3]
    assert row["words"] == ["a", "b"]
    assert row["maybe"] is None
    assert (rows[1]["maybe"], rows[1]["name"], rows[1]["seq"]) == (7, "second", 2)


def test_values_spark_cannot_hold_read_as_null(journal_dir: Path) -> None:
    msgs = [
        all_types(0, count=2**70, amount=Decimal("NaN"), numbers=[1, 2**64]),
        all_types(1, amount=Decimal("1e25")),
        all_types(2, amount=Decimal("-0.0000000000000000005")),  # 19 places: rounded
    ]
    write_journal(journal_dir, msgs)
    rows = _decode_journal(journal_dir, AllTypes).to_pylist()
    assert rows[0]["count"] is None
    assert rows[0]["amount"] is None
    assert rows[0]["numbers"] == [1, None]
    assert rows[1]["amount"] is None
    assert rows[2]["amount"] == Decimal("0E-18")


def test_decoder_keeps_only_its_type_and_subject(journal_dir: Path) -> None:
    msgs = [
        Reading("/a", timestamp=BASE_MS, value=1.0, seq_no=1),
        Other("/a", timestamp=BASE_MS, text="skip me"),
        Reading("/b", timestamp=BASE_MS + 1, value=2.0, seq_no=2),
        Reading("/a", timestamp=BASE_MS + 2, value=3.0, seq_no=3),
    ]
    write_journal(journal_dir, msgs)
    assert _decode_journal(journal_dir, Reading).column("seq").to_pylist() == [1, 3, 4]
    assert _decode_journal(journal_dir, Reading, "/a").column("value").to_pylist() == [1.0, 3.0]
    cols = JournalReader(journal_dir).read_columns(2, 3)
    decoder = BatchDecoder(Reading, message_schema(Reading))
    assert decoder.decode(*cols.values()) is None  # type: ignore[call-arg]


def test_undecodable_record_names_its_seq(journal_dir: Path) -> None:
    write_journal(journal_dir, [Other("/x", timestamp=BASE_MS, text="hello")])
    cols = JournalReader(journal_dir).read_columns(1)
    cols["type_name"] = [Reading.__type_name__]  # the record claims to be a Reading
    decoder = BatchDecoder(Reading, message_schema(Reading))
    with pytest.raises(SparkPipelineError, match=r"seq 1 .* does not decode as Reading"):
        decoder.decode(
            cols["seq"], cols["type_name"], cols["subject"], cols["timestamp"], cols["body"]
        )


# ------------------------------------------------------------------ rows → messages


def ddl(text: str) -> object:
    """A flat StructType from ``"name type, ..."`` (no JVM needed)."""
    from pyspark.sql import types as T

    simple = {
        "string": T.StringType(),
        "timestamp": T.TimestampType(),
        "double": T.DoubleType(),
        "long": T.LongType(),
        "int": T.IntegerType(),
        "date": T.DateType(),
    }
    pairs = [part.split() for part in text.split(",")]
    return T.StructType([T.StructField(name, simple[kind]) for name, kind in pairs])


def _arrow_batch(schema: object, rows: list[dict[str, object]]) -> pa.RecordBatch:
    from actorbus.spark.schema import arrow_schema

    return pa.RecordBatch.from_pylist(rows, schema=arrow_schema(schema))  # type: ignore[arg-type]


def test_row_encoder_builds_typed_messages_with_batch_id() -> None:
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType(
        [
            StructField("subject", StringType()),
            StructField("window_start", TimestampType()),
            StructField("average", DoubleType()),
            StructField("n", LongType()),
        ]
    )
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    batch = _arrow_batch(
        schema,
        [
            {"subject": "/a", "window_start": start, "average": 1.5, "n": 2},
            {"subject": "/b", "window_start": start, "average": 2.5, "n": 4},
        ],
    )
    enc = RowEncoder(WindowAvg, schema, SinkOptions.parse(SINK))
    msgs = enc.messages(batch, 17)
    assert [(m.subject, m.window_start, m.average, m.n, m.batch_id) for m in msgs] == [
        ("/a", start, 1.5, 2, 17),
        ("/b", start, 2.5, 4, 17),
    ]
    assert all(type(m) is WindowAvg for m in msgs)


def test_row_encoder_nested_struct_list_and_constant_subject() -> None:
    from pyspark.sql.types import ArrayType, DoubleType, StringType, StructType

    schema = (
        StructType()
        .add("total", DoubleType())
        .add("where", message_schema(AllTypes)["point"].dataType)
        .add("tags", ArrayType(StringType()))
        .add("timestamp", "long")
    )
    batch = _arrow_batch(
        schema,
        [{"total": 3.0, "where": {"x": 1, "y": 2.0, "label": None}, "tags": ["t"], "timestamp": 5}],
    )
    options = {**SINK, "type": "test.spark.Summary", "subject": "/sum"}
    del options["subjectColumn"]
    opts = SinkOptions.parse(options)
    (msg,) = RowEncoder(Summary, schema, opts).messages(batch, 0)
    assert msg == Summary("/sum", timestamp=5, total=3.0, where=Point(1, 2.0), tags=["t"])


@pytest.mark.parametrize(
    ("columns", "text"),
    [
        (
            "subject string, window_start timestamp, average string, n long",
            "column average is string",
        ),
        ("subject string, window_start timestamp, n long", "WindowAvg.average .* no column"),
        (
            "subject string, window_start timestamp, average double, n long, extra int",
            r"\['extra'\] are not fields",
        ),
        ("subject long, window_start timestamp, average double, n long", "must be a string"),
        (
            "subject string, window_start timestamp, average double, n long, batch_id long",
            "fills with the micro-batch id",
        ),
        ("subject string, window_start date, average double, n long", "timestamp or timestamp_ntz"),
    ],
)
def test_row_encoder_rejects_columns_that_do_not_fit(columns: str, text: str) -> None:
    schema = ddl(columns)
    with pytest.raises(SparkPipelineError, match=text):
        RowEncoder(WindowAvg, schema, SinkOptions.parse(SINK))


def test_row_encoder_names_a_bad_row() -> None:
    schema = ddl("subject string, window_start timestamp, average double, n long")
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    batch = _arrow_batch(
        schema,
        [
            {"subject": "/a", "window_start": start, "average": 1.0, "n": 1},
            {"subject": None, "window_start": start, "average": 1.0, "n": 1},
        ],
    )
    with pytest.raises(SparkPipelineError, match=r"row 1 of a batch of 2 .*subject"):
        RowEncoder(WindowAvg, schema, SinkOptions.parse(SINK)).messages(batch, 0)


# ------------------------------------------------------------------ lazy import


def test_import_without_pyspark_fails_only_when_used() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pyspark"] = None   # as if pyspark were not installed
        import actorbus.spark as s
        assert s.Recorder.__name__ == "Recorder"
        try:
            s.ActorbusDataSource
        except s.SparkUnavailableError as exc:
            print("ok:", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "ok:" in out.stdout
    assert "pip install 'actorbus[spark]'" in out.stdout


# ------------------------------------------------------------------ the stream reader's offsets


def _stream_reader(path: Path, **options: str) -> Any:
    from actorbus.spark.source import JournalStreamReader

    opts = SourceOptions.parse({**SOURCE, "path": str(path), **options})
    return JournalStreamReader(opts, message_schema(Reading))


def test_offsets_read_limits_and_available_now(journal_dir: Path) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    write_journal(journal_dir, readings_plan(["/a"], 100, seed=1))
    reader = _stream_reader(journal_dir, maxRecordsPerTrigger="30")
    assert reader.initialOffset() == {"seq": 1}
    assert reader.getDefaultReadLimit() == ReadMaxRows(30)
    assert reader.latestOffset({"seq": 1}, ReadMaxRows(30)) == {"seq": 31}
    assert reader.latestOffset({"seq": 91}, ReadMaxRows(30)) == {"seq": 101}
    assert reader.latestOffset({"seq": 1}, ReadAllAvailable()) == {"seq": 101}
    assert reader.latestOffset({"seq": 101}, ReadAllAvailable()) == {"seq": 101}
    assert reader.reportLatestOffset() == {"seq": 101}
    assert _stream_reader(journal_dir).getDefaultReadLimit() == ReadAllAvailable()
    assert _stream_reader(journal_dir, startingOffset="latest").initialOffset() == {"seq": 101}

    # availableNow: the end is fixed when the query starts; later records wait
    reader.prepareForTriggerAvailableNow()
    write_journal(journal_dir, readings_plan(["/a"], 10, seed=2))
    assert reader.latestOffset({"seq": 91}, ReadMaxRows(30)) == {"seq": 101}
    assert reader.latestOffset({"seq": 101}, ReadMaxRows(30)) == {"seq": 101}
    assert _stream_reader(journal_dir).latestOffset({"seq": 101}, ReadAllAvailable()) == {
        "seq": 111
    }
    parts = reader.partitions({"seq": 1}, {"seq": 111})
    assert [(p.start, p.end) for p in parts] == [(1, 111)]
    assert pa.Table.from_batches(list(reader.read(parts[0]))).num_rows == 110


def test_offsets_from_elsewhere_and_replaced_journals_are_refused(journal_dir: Path) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    write_journal(journal_dir, readings_plan(["/a"], 10, seed=1))
    reader = _stream_reader(journal_dir)
    with pytest.raises(SparkPipelineError, match="not an actorbus journal offset"):
        reader.latestOffset({"offset": 5}, ReadAllAvailable())
    with pytest.raises(SparkPipelineError, match=r"seq 500 but journal .* ends at seq 10"):
        reader.latestOffset({"seq": 500}, ReadAllAvailable())


def test_records_lost_to_retention_fail_or_are_skipped(journal_dir: Path) -> None:
    from actorbus.journal import Retention
    from actorbus.spark.source import JournalRange

    plan = readings_plan(["/a"], 2_000, seed=3)
    write_journal(
        journal_dir, plan, frame=50, segment_bytes=4096, retention=Retention(max_bytes=40_000)
    )
    first = JournalReader(journal_dir).first_seq()
    assert first > 1
    strict = _stream_reader(journal_dir)
    with pytest.raises(SparkPipelineError, match=rf"records 1\.\.{first - 1} .* are gone"):
        list(strict.read(JournalRange(1, 2_001)))
    lenient = _stream_reader(journal_dir, failOnDataLoss="false")
    rows = pa.Table.from_batches(list(lenient.read(JournalRange(1, 2_001))))
    assert rows.column("seq").to_pylist() == list(range(first, 2_001))


def test_public_names_resolve() -> None:
    import actorbus.spark as spark_pkg

    assert sorted(spark_pkg.__all__) == sorted(dir(spark_pkg))
    for name in spark_pkg.__all__:
        assert getattr(spark_pkg, name) is not None, name
    assert spark_pkg.ActorbusDataSource.name() == spark_pkg.FORMAT == "actorbus"
    assert spark_pkg.message_schema is message_schema
