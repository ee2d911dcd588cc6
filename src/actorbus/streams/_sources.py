"""Where events come from: an iterable, or any code that pushes them.

A source is started with ``open(sink, executor)`` and returns its stop
function.  It calls ``sink`` only on ``executor``, and obeys the
back-pressure ``sink.data`` answers: it waits that many milliseconds (a timer
on the executor, never a sleep) before the next event, and stops for good on
a negative answer.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import UsageError
from ._exec import Executor
from ._stage import Sink

__all__ = ["EventSource", "IterSource"]

#: events an iterable source pushes per task, so a long iterable on an actor
#: lets the actor's other tasks run in between
_PER_TASK = 256


class IterSource:
    """Pushes an iterable's items, then the close (an exception while
    iterating becomes the error event)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items

    def open(self, sink: Sink, executor: Executor) -> Callable[[], None]:
        it: Iterator[Any] = iter(self.items)
        state = {"stopped": False}

        def step() -> None:
            if state["stopped"]:
                return
            data = sink.data
            for _ in range(_PER_TASK):
                try:
                    value = next(it)
                except StopIteration:
                    state["stopped"] = True
                    sink.close()
                    return
                except Exception as exc:
                    state["stopped"] = True
                    sink.error(exc)
                    return
                r = data(value)
                if r < 0:
                    state["stopped"] = True
                    return
                if r > 0:
                    executor.call_later(r / 1000.0, step)
                    return
            executor.post(step)

        def stop() -> None:
            if not state["stopped"]:
                state["stopped"] = True
                executor.post(sink.close)

        executor.post(step)
        return stop


class EventSource:
    """A source other code pushes into, from any thread: :meth:`publish`,
    then :meth:`end_of_stream` or :meth:`error` (OSGi's
    SimplePushEventSource).  Each event is handed to the stream on its
    executor; events published before a stream started wait for it, up to
    ``capacity`` (then :meth:`publish` raises).

    :attr:`back_pressure` is the last back-pressure the stream answered (ms):
    a producer that can wait should wait that long before its next event."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._held: deque[tuple[int, Any]] = deque()
        self._sink: Sink | None = None
        self._executor: Executor | None = None
        self._ended = False
        self._stopped = False
        #: the back-pressure the stream last answered, in milliseconds
        self.back_pressure = 0

    def open(self, sink: Sink, executor: Executor) -> Callable[[], None]:
        with self._lock:
            if self._sink is not None:
                raise UsageError("this EventSource already feeds a stream; make one per stream")
            self._sink, self._executor = sink, executor
            held, self._held = self._held, deque()
        for kind, value in held:
            executor.post(functools.partial(self._deliver, kind, value))

        def stop() -> None:
            if not self._stopped:
                self._stopped = True
                executor.post(sink.close)

        return stop

    def publish(self, value: Any) -> int:
        """Push ``value``; returns the last back-pressure the stream answered
        (a negative number once it has closed: stop publishing)."""
        self._hand(0, value)
        return -1 if self._stopped else self.back_pressure

    def end_of_stream(self) -> None:
        """No more events: the stream gets its close event."""
        self._hand(1, None)

    def error(self, exc: BaseException) -> None:
        """The stream ends with ``exc`` as its error event."""
        self._hand(2, exc)

    def _hand(self, kind: int, value: Any) -> None:
        with self._lock:
            if self._ended:
                raise UsageError("EventSource: nothing may follow end_of_stream() or error()")
            if kind:
                self._ended = True
            executor = self._executor
            if executor is None:
                if len(self._held) >= self.capacity:
                    raise UsageError(
                        f"EventSource: {self.capacity} events wait for a stream to start; "
                        "start the stream (a terminal operation) before publishing more"
                    )
                self._held.append((kind, value))
                return
        executor.post(functools.partial(self._deliver, kind, value))

    def _deliver(self, kind: int, value: Any) -> None:
        sink = self._sink
        if sink is None or self._stopped:
            return
        if kind == 0:
            r = sink.data(value)
            self.back_pressure = r
            if r < 0:
                self._stopped = True
        elif kind == 1:
            self._stopped = True
            sink.close()
        else:
            self._stopped = True
            sink.error(value)
