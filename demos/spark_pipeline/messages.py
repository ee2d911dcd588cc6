"""The demo's two message types (the Spark executors import this module too)."""

from __future__ import annotations

import datetime as dt

from actorbus.bus.message import Notification


class DataPoint(Notification, type_name="demo.spark.DataPoint"):
    """One measurement of the subject's sensor."""

    value: float


class WindowAverage(Notification, type_name="demo.spark.WindowAverage"):
    """The average of one subject's points in one event-time window, from Spark.

    ``batch_id`` is filled by the sink with the Spark micro-batch id: a batch
    re-run after a restart sends the same rows with the same id, which is how
    the printer drops duplicates."""

    window_start: dt.datetime
    window_end: dt.datetime
    average: float
    points: int
    batch_id: int = -1
