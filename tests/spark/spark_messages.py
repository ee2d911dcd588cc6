"""Message classes the Spark tests journal, read and publish.

Spark's Python workers import this module (option ``module="spark_messages"``);
tests/spark/conftest.py puts this directory on their PYTHONPATH.
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import uuid
from decimal import Decimal

from actorbus import Field, MessageKey, Notification
from actorbus.bus import SocketAddress


class Reading(Notification, type_name="test.spark.Reading"):
    """One data point of a sensor (the subject)."""

    value: float
    seq_no: int


class Other(Notification, type_name="test.spark.Other"):
    """Another type in the same journal, which a Reading query must skip."""

    text: str


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    ONE = 1
    TWO = "two"


class Point(Field, type_name="test.spark.Point"):
    x: int
    y: float
    label: str | None = None


class Point3(Point, type_name="test.spark.Point3"):
    z: float = 0.0


class AllTypes(Notification, type_name="test.spark.AllTypes"):
    """One field of every supported type."""

    flag: bool
    count: int  # type: ignore[assignment]
    ratio: float
    name: str
    blob: bytes
    amount: Decimal
    at: dt.datetime
    day: dt.date
    clock: dt.time
    span: dt.timedelta
    color: Color
    level: Level
    mixed: Mixed
    ident: uuid.UUID
    ip4: ipaddress.IPv4Address
    ip6: ipaddress.IPv6Address
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    address: SocketAddress
    key: MessageKey
    point: Point
    points: list[Point]
    numbers: list[int]
    words: tuple[str, ...]
    maybe: int | None = None


class WindowAvg(Notification, type_name="test.spark.WindowAvg"):
    """What the sink tests publish: one window's average of one subject."""

    window_start: dt.datetime
    average: float
    n: int
    batch_id: int = -1


class Summary(Notification, type_name="test.spark.Summary"):
    """A sink target without batch_id, with a nested struct and a list."""

    total: float
    where: Point
    tags: list[str]
