"""The demo's two message types."""

from __future__ import annotations

from actorbus.bus.message import Notification


class DataPoint(Notification, type_name="demo.calculator.DataPoint"):
    """One integer data point from the source."""

    value: int


class MovingAverage(Notification, type_name="demo.calculator.MovingAverage"):
    """The moving average over the last ``count`` points."""

    average: float
    count: int
