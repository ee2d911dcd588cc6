"""Helpers for the Spark tests: real actors that publish and collect, journals, and a
plain-Python recomputation of what the Spark queries compute.

Imported by the test modules as ``spark_support`` (tests/spark is on sys.path).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import random
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from spark_messages import AllTypes, Color, Level, Mixed, Point, Point3, Reading

from actorbus import Actor, Bus, FeedState, MessageKey, Notification
from actorbus.bus import SocketAddress
from actorbus.bus.codec import decode, encode
from actorbus.journal import JournalReader, JournalWriter
from actorbus.spark import Recorder

#: event time of the first reading: 2023-11-14T22:13:20Z.
BASE_MS = 1_700_000_000_000
WINDOW_MS = 10_000
#: the subject of the one late reading that pushes the watermark past every window.
FLUSH_SUBJECT = "/flush"
FLUSH_AHEAD_MS = 3_600_000

QUERY_TIMEOUT = 240.0
SEED = 20_240_601
SUBJECTS = [f"/sensor/{i:02d}" for i in range(8)]


def all_types(i: int = 0, **changes: object) -> AllTypes:
    values: dict[str, object] = {
        "flag": True,
        "count": -(2**62) + i,
        "ratio": 0.25,
        "name": "naïve ✓",
        "blob": b"\x00\xff",
        "amount": Decimal("12345.678901234567890123"),
        "at": dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "day": dt.date(2024, 2, 29),
        "clock": dt.time(23, 59, 58, 7),
        "span": dt.timedelta(days=2, seconds=3, microseconds=4),
        "color": Color.GREEN,
        "level": Level.HIGH,
        "mixed": Mixed.TWO,
        "ident": uuid.UUID(int=12345678901234567890),
        "ip4": ipaddress.IPv4Address("10.1.2.3"),
        "ip6": ipaddress.IPv6Address("::1"),
        "ip": ipaddress.IPv4Address("192.168.0.1"),
        "address": SocketAddress("example.org", 443),
        "key": MessageKey(Reading, "/k"),
        "point": Point3(1, 2.5, "p", z=9.0),
        "points": [Point(3, 4.0), Point(5, 6.0, "q")],
        "numbers": [1, 2, 3],
        "words": ("a", "b"),
        "maybe": None,
    }
    values.update(changes)
    return AllTypes("/all", timestamp=BASE_MS + i, **values)


def reading(subject: str, ts: int, value: float, seq_no: int) -> Reading:
    return Reading(subject, timestamp=ts, value=value, seq_no=seq_no)


def readings_plan(
    subjects: Sequence[str], points: int, *, seed: int, start_ms: int = BASE_MS, step_ms: int = 100
) -> list[Reading]:
    """``points`` readings per subject, interleaved in time order, values seeded."""
    rng = random.Random(seed)
    out = []
    for i in range(points):
        for s in subjects:
            out.append(reading(s, start_ms + i * step_ms, round(rng.uniform(0, 100), 3), i))
    return out


def flush_reading(after_ms: int) -> Reading:
    return reading(FLUSH_SUBJECT, after_ms + FLUSH_AHEAD_MS, 0.0, 0)


def write_journal(
    path: Path, messages: Iterable[Notification], frame: int = 1000, **writer_args: Any
) -> int:
    """Append ``messages`` straight to a journal (no bus), ``frame`` records per
    append; returns the end seq."""
    with JournalWriter(path, **writer_args) as w:
        batch = [(type(m).__type_name__, m.subject, m.timestamp, encode(m)) for m in messages]
        for i in range(0, len(batch), frame):
            w.append_many(batch[i : i + frame])
        return w.next_seq


def journal_readings(path: Path) -> list[tuple[int, Reading]]:
    """Every Reading in the journal with its seq, decoded without Spark."""
    out = []
    for rec in JournalReader(path).read(1):
        if rec.type_name == Reading.__type_name__:
            out.append((rec.seq, decode(Reading, rec.body)))
    return out


def window_averages(
    readings: Iterable[Reading], window_ms: int = WINDOW_MS, skip: str = FLUSH_SUBJECT
) -> dict[tuple[str, dt.datetime], tuple[float, int]]:
    """(subject, window start) -> (average, count): the tumbling-window averages."""
    sums: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in readings:
        if r.subject != skip:
            sums[(r.subject, r.timestamp - r.timestamp % window_ms)].append(r.value)
    return {
        (s, dt.datetime.fromtimestamp(start / 1000, dt.UTC)): (sum(v) / len(v), len(v))
        for (s, start), v in sums.items()
    }


class Sensors(Actor):
    """Publishes a planned list of readings when asked (a burst, from its own dispatcher)."""

    def __init__(self, plan: Sequence[Reading], name: str = "sensors") -> None:
        super().__init__(name)
        self.plan = plan
        self.subjects = sorted({r.subject for r in plan})
        self.done = threading.Event()
        self.sent = 0

    def startup(self) -> None:
        self.feeds = {s: self.publisher(Reading, s, up=True) for s in self.subjects}

    def on_publish_status(self, state: FeedState, feed: Any) -> None:
        """Subscribers come and go; the burst publishes regardless."""

    def burst(self) -> None:
        feeds = self.feeds
        for r in self.plan:
            feeds[r.subject].publish(r)
            self.sent += 1
        self.done.set()

    def shutdown(self) -> None:
        for feed in self.feeds.values():
            feed.close()


class Collector(Actor):
    """Subscribes to ``cls`` on ``subjects`` and keeps what arrives."""

    def __init__(self, cls: type[Notification], subjects: Iterable[str], name: str = "collector"):
        super().__init__(name)
        self.cls = cls
        self.subjects = list(subjects)
        self.received: list[Any] = []
        self.states: list[tuple[str, FeedState]] = []
        self._cond = threading.Condition()

    def startup(self) -> None:
        self.feeds = [
            self.subscribe(self.cls, s, on_message=self._got, on_status=self._status)
            for s in self.subjects
        ]

    def _got(self, msg: Any, feed: Any) -> None:
        with self._cond:
            self.received.append(msg)
            self._cond.notify_all()

    def _status(self, state: FeedState, feed: Any) -> None:
        self.states.append((feed.key.subject, state))

    def wait_for(self, count: int, timeout: float) -> list[Any]:
        """Block until ``count`` messages arrived (or ``timeout``); a copy of them."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)

    def shutdown(self) -> None:
        for feed in self.feeds:
            feed.close()


# ------------------------------------------------------------------ Spark helpers


def source(spark: Any, path: Path, *, stream: bool = True, **options: object) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = (
        reader.format("actorbus")
        .option("path", str(path))
        .option("type", Reading.__type_name__)
        .option("module", "spark_messages")
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def windowed(df: Any, watermark: str = "5 seconds") -> Any:
    from pyspark.sql import functions as F

    return (
        df.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", "10 seconds"), "subject")
        .agg(F.avg("value").alias("average"), F.count("*").alias("n"))
        .select("subject", F.col("window.start").alias("window_start"), "average", "n")
    )


def to_map(rows: list[Any]) -> dict[tuple[str, Any], tuple[float, int]]:
    import datetime as dt

    out = {}
    for r in rows:
        start = r["window_start"]
        if start.tzinfo is None:  # collect() gives naive local time; toArrow() UTC
            start = start.astimezone(dt.UTC)
        key = (r["subject"], start)
        assert key not in out, f"window {key} twice"
        out[key] = (r["average"], r["n"])
    return out


def assert_same_averages(got: dict[Any, Any], expected: dict[Any, Any]) -> None:
    assert set(got) == set(expected)
    for key, (avg, n) in expected.items():
        assert got[key][1] == n, key
        assert got[key][0] == pytest.approx(avg, rel=1e-12), key


def memory_rows(spark: Any, name: str) -> list[dict[str, Any]]:
    return spark.sql(f"select * from {name}").toArrow().to_pylist()


def record_with_actors(path: Path, plan: list[Reading]) -> int:
    """Real actors: Sensors publish ``plan`` on the bus, a Recorder journals it."""
    subjects = sorted({r.subject for r in plan})
    with Bus() as bus:
        recorder = Recorder(path, [MessageKey(Reading, s) for s in subjects], flush_records=500)
        sensors = Sensors(plan)
        bus.register(recorder)
        bus.register(sensors)
        bus.startup(recorder).wait(10)
        bus.startup(sensors).wait(10)
        sensors.post(sensors.burst)
        assert sensors.done.wait(30)
        last = recorder.flush_and_wait()
        assert recorder.recorded == len(plan)
        bus.shutdown_all().wait(10)
    return last


def forget_last_commit(checkpoint: Path) -> int:
    """Delete the newest entry of a checkpoint's commit log (and its checksum), as
    if the driver died after the batch's output was written but before Spark
    recorded it as done; returns that batch id, which a restart runs again."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    crc = commits / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    return last
