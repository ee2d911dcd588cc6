"""Parsing and checking the ``"actorbus"`` data source options (no pyspark needed).

Spark hands a data source its options as a case-insensitive mapping of strings.
:class:`SourceOptions` and :class:`SinkOptions` turn them into frozen, picklable
values once, with an error naming the option for anything missing, unknown or
malformed; :func:`resolve_message_class` turns the ``type`` (and ``module``)
options into the message class, in whichever process needs it.
"""

from __future__ import annotations

import difflib
import importlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ..bus.message import Notification, lookup_type, registered_types
from ._errors import SparkOptionError

__all__ = [
    "BATCH_ID_FIELD",
    "SINK_OPTIONS",
    "SOURCE_OPTIONS",
    "SinkOptions",
    "SourceOptions",
    "resolve_message_class",
]

#: a message class that declares ``batch_id: int`` gets the micro-batch id there.
BATCH_ID_FIELD: Final = "batch_id"
#: the source's options, as documented (matched case-insensitively).
SOURCE_OPTIONS: Final = (
    "path",
    "type",
    "module",
    "subject",
    "maxRecordsPerTrigger",
    "startingOffset",
    "endingOffset",
    "numPartitions",
    "minPartitionRecords",
    "batchRecords",
    "failOnDataLoss",
)
#: the sink's options, as documented (matched case-insensitively).
SINK_OPTIONS: Final = (
    "host",
    "port",
    "type",
    "module",
    "subject",
    "subjectColumn",
    "connectTimeout",
    "subscriberTimeout",
)
#: options Spark itself may put into a data source's option map; ignored.
_SPARK_OWNED: Final = frozenset({"checkpointlocation", "queryname", "path"})

DEFAULT_MIN_PARTITION_RECORDS: Final = 10_000
DEFAULT_BATCH_RECORDS: Final = 10_000
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
DEFAULT_SUBSCRIBER_TIMEOUT: Final = 5.0


def _check_known(options: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    by_lower = {name.lower(): name for name in known}
    for key in options:
        low = key.lower()
        if low in by_lower or low in _SPARK_OWNED:
            continue
        near = difflib.get_close_matches(low, list(by_lower), n=1, cutoff=0.7)
        hint = f"; did you mean {by_lower[near[0]]!r}?" if near else ""
        raise SparkOptionError(
            f"the actorbus {what} has no option {key!r}{hint} Its options are: "
            f"{', '.join(known)} (see docs/spark.md)",
            option=key,
        )


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is None:
        # a plain dict (tests, direct use) may carry another spelling
        for key, val in options.items():
            if key.lower() == name.lower():
                return val
    return value


def _required(options: Mapping[str, str], name: str, what: str, example: str) -> str:
    value = _get(options, name)
    if value is None or not value.strip():
        raise SparkOptionError(
            f"the actorbus {what} needs option {name!r} ({what} options: "
            f'.option("{name}", {example}))',
            option=name,
        )
    return value.strip()


def _int_option(
    options: Mapping[str, str], name: str, default: int | None, minimum: int, maximum: int
) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        raise SparkOptionError(
            f"option {name}={raw!r}: expected an integer in {minimum}..{maximum}", option=name
        )
    return value


def _float_option(options: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= minimum):
        raise SparkOptionError(
            f"option {name}={raw!r}: expected a number of seconds >= {minimum:g}", option=name
        )
    return value


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise SparkOptionError(f"option {name}={raw!r}: expected true or false", option=name)


def _offset_option(
    options: Mapping[str, str], name: str, default: str, words: tuple[str, ...]
) -> int | str:
    raw = _get(options, name)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in words:
        return text
    try:
        seq = int(text)
    except ValueError:
        seq = 0
    if seq < 1:
        raise SparkOptionError(
            f"option {name}={raw!r}: expected {' or '.join(words)}, or a journal seq >= 1",
            option=name,
        )
    return seq


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The checked options of ``spark.read(Stream).format("actorbus")``."""

    path: str
    type_name: str
    module: str | None
    subject: str | None
    max_records_per_trigger: int | None
    starting_offset: int | str
    ending_offset: int | str
    num_partitions: int
    min_partition_records: int
    batch_records: int
    fail_on_data_loss: bool

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Check ``options``; raises :class:`SparkOptionError` naming the bad one."""
        _check_known(options, SOURCE_OPTIONS, "source")
        path = _required(options, "path", "source", '"/data/journal"')
        type_name = _required(options, "type", "source", '"demo.spark.DataPoint"')
        module = _get(options, "module")
        limit = _int_option(options, "maxRecordsPerTrigger", None, 1, 1 << 62)
        parts = _int_option(options, "numPartitions", os.cpu_count() or 1, 1, 100_000)
        min_records = _int_option(
            options, "minPartitionRecords", DEFAULT_MIN_PARTITION_RECORDS, 1, 1 << 62
        )
        batch = _int_option(options, "batchRecords", DEFAULT_BATCH_RECORDS, 1, 1 << 24)
        assert parts is not None
        assert min_records is not None
        assert batch is not None
        return cls(
            path=os.path.abspath(os.path.expanduser(path)),
            type_name=type_name,
            module=module.strip() if module and module.strip() else None,
            subject=_get(options, "subject"),
            max_records_per_trigger=limit,
            starting_offset=_offset_option(
                options, "startingOffset", "earliest", ("earliest", "latest")
            ),
            ending_offset=_offset_option(options, "endingOffset", "latest", ("latest",)),
            num_partitions=parts,
            min_partition_records=min_records,
            batch_records=batch,
            fail_on_data_loss=_bool_option(options, "failOnDataLoss", True),
        )

    def message_class(self) -> type[Notification]:
        """The class the ``type`` option names (importing ``module`` first)."""
        return resolve_message_class(self.type_name, self.module)


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The checked options of ``writeStream.format("actorbus")``."""

    host: str
    port: int
    type_name: str
    module: str | None
    subject: str | None
    subject_column: str | None
    connect_timeout: float
    subscriber_timeout: float

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Check ``options``; raises :class:`SparkOptionError` naming the bad one."""
        _check_known(options, SINK_OPTIONS, "sink")
        host = _required(options, "host", "sink", '"127.0.0.1"')
        _required(options, "port", "sink", "7420")
        port = _int_option(options, "port", None, 1, 65535)
        assert port is not None
        type_name = _required(options, "type", "sink", '"demo.spark.WindowAverage"')
        module = _get(options, "module")
        subject = _get(options, "subject")
        subject_column = _get(options, "subjectColumn")
        if (subject is None) == (subject_column is None):
            raise SparkOptionError(
                "the actorbus sink needs exactly one of option 'subject' (one subject for "
                "every row) or 'subjectColumn' (the string column holding each row's "
                f"subject); found {'both' if subject is not None else 'neither'}",
                option="subject",
            )
        return cls(
            host=host,
            port=port,
            type_name=type_name,
            module=module.strip() if module and module.strip() else None,
            subject=subject,
            subject_column=subject_column.strip() if subject_column is not None else None,
            connect_timeout=_float_option(
                options, "connectTimeout", DEFAULT_CONNECT_TIMEOUT, 0.001
            ),
            subscriber_timeout=_float_option(
                options, "subscriberTimeout", DEFAULT_SUBSCRIBER_TIMEOUT, 0.0
            ),
        )

    def message_class(self) -> type[Notification]:
        """The class the ``type`` option names (importing ``module`` first)."""
        return resolve_message_class(self.type_name, self.module)


def resolve_message_class(type_name: str, module: str | None) -> type[Notification]:
    """The notification class registered under ``type_name``.

    ``module`` is imported first so that a fresh process (a Spark executor)
    defines and registers the class; without it, the dotted prefixes of
    ``type_name`` are tried as modules (a default type name is
    ``module.QualName``).  Raises :class:`SparkOptionError` naming ``module``
    or ``type``."""
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise SparkOptionError(
                f"option module={module!r}: cannot import it ({type(exc).__name__}: {exc}); "
                "name a module importable on the driver and on every executor (ship it "
                "with --py-files or SparkContext.addPyFile on a cluster)",
                option="module",
            ) from exc
    found = lookup_type(type_name)
    if found is None and module is None:
        parts = type_name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            found = lookup_type(type_name)
            if found is not None:
                break
    if found is None:
        known = sorted(
            name for name, cls in registered_types().items() if issubclass(cls, Notification)
        )
        near = difflib.get_close_matches(type_name, known, n=3, cutoff=0.6)
        where = f"after importing module {module!r}" if module else "(no option module given)"
        hint = f"; close names: {near}" if near else ""
        raise SparkOptionError(
            f"option type={type_name!r}: no message class is registered under that type "
            f"name {where}{hint}; set option module to the module that defines the class "
            '(e.g. .option("module", "demos.spark_pipeline.messages")) and check the '
            "class's type_name",
            option="type",
        )
    if not (isinstance(found, type) and issubclass(found, Notification)):
        raise SparkOptionError(
            f"option type={type_name!r} names {found.__qualname__}, which is not a "
            "Notification class; the journal records and the sink publishes notifications",
            option="type",
        )
    return found
