"""Push streams with back-pressure (OSGi RFC 214): pipelines over feeds.

A :class:`PushStream` is made from a subscription (:func:`subscribe`), an
:class:`EventSource`, or an iterable (:meth:`PushStream.of`), goes through
operations (``filter``, ``map``, ``window``, ``coalesce``, ``buffer``...) and
ends in one terminal operation, which returns a :class:`StreamFuture`.  A
consumer answers back-pressure (milliseconds to wait; negative closes), and it
reaches the real source: a publisher taking part (:func:`watch_pressure`,
``to_publisher``) is told to wait by a :class:`Pressure` notification, local or
across a link.  docs/streams.md is the guide.
"""

from __future__ import annotations

from ._buffer import BufferFullError, BufferStats, PushbackPolicy, QueuePolicy
from ._core import PushStream
from ._exec import ActorExecutor, Executor, InlineExecutor
from ._future import StreamFuture
from ._pressure import Pressure, PressureWatch, watch_pressure
from ._sources import EventSource
from ._stage import EMPTY, EventKind, PushEvent
from ._subscription import SubscriptionSource, subscribe

__all__ = [
    "EMPTY",
    "ActorExecutor",
    "BufferFullError",
    "BufferStats",
    "EventKind",
    "EventSource",
    "Executor",
    "InlineExecutor",
    "Pressure",
    "PressureWatch",
    "PushEvent",
    "PushStream",
    "PushbackPolicy",
    "QueuePolicy",
    "StreamFuture",
    "SubscriptionSource",
    "subscribe",
    "watch_pressure",
]
