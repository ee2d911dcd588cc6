"""What a node keeps for its inspect page and its metrics beyond its counters:
each key's last UP/DOWN changes (:class:`FeedHistory`) and, while metrics are
served, its requests' durations (:class:`RequestLatencies`).

**Feed history.**
The router calls :meth:`FeedHistory.record` (its ``feed_changed``, handed in
by the node) after each change of a key's publishers' states, local or remote,
saying whether the key has an UP publisher; a change is kept when the key gained
its first UP publisher or lost its last one.  It runs on the state-change path,
under the router's lock, never per message.  The history is bounded twice: ``per_key`` changes per key (the oldest
go first) and ``keys`` keys (the key changed longest ago goes first), so a node
whose keys come and go keeps a fixed amount of it.

**Request latencies.**  A request is timed only while the router's
``request_latencies`` is set (the node sets it when a gateway serves metrics):
the handle of a request of this node's own requestors (a peer's request
forwarded here is timed on the peer) is stamped with ``perf_counter()`` when
made, and its end (the last final reply, a cancel, a timeout, a lost link) adds
the duration to one of :data:`LATENCY_BUCKETS`.  Unset, a request pays one ``is None`` test when made
and one truth test when it ends, and reads no clock.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Final, NamedTuple

from ..errors import UsageError
from .message import MessageKey

__all__ = ["LATENCY_BUCKETS", "FeedChange", "FeedHistory", "RequestLatencies"]

#: changes kept per key, and keys kept, unless told otherwise
PER_KEY: Final = 8
KEYS: Final = 1_000
#: the upper bounds of the request duration buckets, seconds (and +Inf)
LATENCY_BUCKETS: Final = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class FeedChange(NamedTuple):
    """One change of a key's state."""

    #: when, seconds since the epoch
    time: float
    #: True: the key got an UP publisher; False: it lost its last one
    up: bool


class FeedHistory:
    """The last changes of each key's state (see the module docstring)."""

    def __init__(
        self,
        *,
        per_key: int = PER_KEY,
        keys: int = KEYS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, n in (("per_key", per_key), ("keys", keys)):
            if type(n) is not int or n < 1:
                raise UsageError(f"FeedHistory({name}={n!r}): expected an integer >= 1")
        self.per_key = per_key
        self.keys = keys
        self._clock = clock
        self._lock = threading.Lock()
        self._changes: OrderedDict[MessageKey, deque[FeedChange]] = OrderedDict()

    def record(self, key: MessageKey, up: bool) -> None:
        """(the router, under its lock, after a change of ``key``'s publishers)
        ``key`` has an UP publisher (``up``) or none: kept when that differs from
        the key's last change kept."""
        with self._lock:
            changes = self._changes.get(key)
            if changes is not None and changes[-1].up is up:
                return
            change = FeedChange(self._clock(), up)
            if changes is None:
                if len(self._changes) >= self.keys:
                    self._changes.popitem(last=False)
                changes = self._changes[key] = deque(maxlen=self.per_key)
            else:
                self._changes.move_to_end(key)
            changes.append(change)

    def changes(self) -> dict[MessageKey, tuple[FeedChange, ...]]:
        """Every key's changes kept, oldest first; the keys changed last come last."""
        with self._lock:
            return {key: tuple(changes) for key, changes in self._changes.items()}


class RequestLatencies:
    """Durations of the requests that ended, in :data:`LATENCY_BUCKETS` (see the
    module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: per bucket (the last: over the largest bound), not cumulative
        self._counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        """(any thread) A request ended after ``seconds``."""
        i = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            self._counts[i] += 1
            self._sum += seconds

    def read(self) -> tuple[tuple[tuple[float, int], ...], int, float]:
        """``(((bound, cumulative count), ...), count, sum)``: each bucket's requests
        at or under its bound (the last bound is ``inf``), how many ended, their
        total seconds."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        buckets = []
        seen = 0
        for bound, n in zip((*LATENCY_BUCKETS, float("inf")), counts, strict=True):
            seen += n
            buckets.append((bound, seen))
        return tuple(buckets), seen, total
