"""Request timeouts: one timer per bus, not one per request.

Theory of operation
-------------------
Most requests are answered long before their timeout, so arming and cancelling
a timer for each one (a timer object, the timer service's lock twice, its heap
and index) is work done almost always for nothing, and a noticeable share of the
requestor's Python on a cross-process round trip.  :class:`RequestTimeouts` keeps
the deadlines of the outstanding requests in one heap of
``(deadline, request id, timeout)`` and a single timer of the timer service
armed for the earliest deadline it knows of.

* **Making a request** pushes its entry (a C ``heappush`` under a lock taken
  by nobody else on the hot path); the timer is re-armed only when the new
  deadline is earlier than the armed one, which with the usual single timeout
  value is never.
* **Finishing a request** does nothing here.  The router forgets a finished
  request (``Router.requests``); its entry stays in the heap and is dropped
  lazily: each push first pops up to two entries of finished requests off the
  top, so with one timeout value the heap holds about the requests still
  outstanding.  Entries of finished requests buried under a live one (mixed
  timeout values) are bounded: when the heap holds more than four times the
  outstanding requests plus :data:`_SLACK`, it is rebuilt from the live ones
  (amortised O(1) per request).
* **The timer fires** (on the timer thread): every entry due is popped; the
  ones whose request is still outstanding time out exactly as before
  (``RequestHandle._time_out``: the repliers are told to cancel, the requestor
  gets one ERROR reply with ``remaining`` 0), outside the lock; the timer is
  re-armed for the next live deadline.  Timeouts fire no earlier than their
  deadline, and as late as the timer service's accuracy allows (as before).

Only request ids and numbers are kept, never a handle, so a finished request is
freed by reference counting at once and a heap entry outliving its request
costs a small tuple.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from .feeds import RequestHandle

__all__ = ["RequestTimeouts"]

#: heap entries of finished requests tolerated before a rebuild, on top of 4x live
_SLACK = 1024


class RequestTimeouts:
    """Deadlines of the outstanding requests of one router; see the module notes.

    ``call_later(delay_s, fn)`` arms a one-shot timer whose callback runs on the
    timer thread and returns a handle with ``cancel()``; ``requests`` is the
    router's table of outstanding requests (id -> handle)."""

    def __init__(
        self,
        requests: dict[int, RequestHandle[Any]],
        call_later: Callable[..., Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._requests = requests
        self._call_later = call_later
        self._clock = clock
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, float]] = []
        self._timer: Any = None
        self._armed_at = math.inf
        #: timer expiries so far (each handles every entry then due)
        self.fired = 0

    def __len__(self) -> int:
        """Heap entries, including ones of finished requests not dropped yet."""
        return len(self._heap)

    def add(self, handle: RequestHandle[Any], timeout: float) -> None:
        """Time ``handle`` out after ``timeout`` seconds unless it finished by then.

        Raises what ``call_later`` raises when a timer must be armed (the timer
        service is stopped); the entry is not kept then."""
        requests = self._requests
        heap = self._heap
        with self._lock:
            deadline = self._clock() + timeout
            # drop up to two entries of finished requests off the top: with one
            # timeout value the heap then follows the outstanding requests
            if heap and heap[0][1] not in requests:
                heapq.heappop(heap)
                if heap and heap[0][1] not in requests:
                    heapq.heappop(heap)
            heapq.heappush(heap, (deadline, handle.id, timeout))
            if deadline < self._armed_at:
                try:
                    self._arm(deadline)
                except BaseException:
                    heap.remove((deadline, handle.id, timeout))
                    heapq.heapify(heap)
                    raise
            if len(heap) > 4 * len(requests) + _SLACK:
                self._heap = heap = [e for e in heap if e[1] in requests]
                heapq.heapify(heap)

    def _arm(self, deadline: float) -> None:
        """(holding the lock) The timer fires at ``deadline``, earlier than before."""
        timer = self._call_later(max(deadline - self._clock(), 0.0), self._fire)
        old, self._timer, self._armed_at = self._timer, timer, deadline
        if old is not None:
            old.cancel()

    def _fire(self) -> None:
        """(timer thread) Time out every outstanding request that is due; re-arm."""
        requests = self._requests
        due: list[tuple[RequestHandle[Any], float]] = []
        with self._lock:
            self.fired += 1
            self._timer = None
            self._armed_at = math.inf
            heap = self._heap
            now = self._clock()
            while heap:
                deadline, request_id, timeout = heap[0]
                handle = requests.get(request_id)
                if handle is None:
                    heapq.heappop(heap)  # finished: dropped here
                elif deadline <= now:
                    heapq.heappop(heap)
                    due.append((handle, timeout))
                else:
                    try:
                        self._arm(deadline)
                    except UsageError:  # the timer service stopped: the bus is closing
                        pass
                    break
        for handle, timeout in due:
            handle._time_out(timeout)
