"""A message class with the default type name (``spark_defaults.Plain``): the source
finds it without a ``module`` option by importing the type name's prefix."""

from __future__ import annotations

from actorbus import Notification


class Plain(Notification):
    value: int
