"""The event protocol every stage speaks, and the base of the stages.

A stream is a chain of sinks.  Its source calls the first one's
``data(value)`` for each event, then ``close()`` or ``error(exc)`` at most
once; each stage calls the next one the same way, and ``data`` returns the
back-pressure of everything downstream:

* ``0``: go on;
* ``n > 0``: wait ``n`` milliseconds before the next event;
* negative: the stream is closed; send nothing more.

Every call is made on the stream's executor, one at a time (``_exec``): a
stage keeps plain state and takes no lock.  A stage whose user function
raises sends the exception downstream as the error event and answers ``-1``
upstream, so the source stops.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["EMPTY", "EventKind", "PushEvent", "Sink", "Stage"]

T = TypeVar("T")


class _Empty:
    """The marker a terminal operation resolves to for "no value" when asked
    (``find_first(default=EMPTY)``): unlike ``None``, it is never an event."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"

    def __bool__(self) -> bool:
        return False


#: "no value": pass ``default=EMPTY`` to a terminal operation when ``None`` may be an event
EMPTY: Any = _Empty()


class EventKind(enum.Enum):
    """A push event is data, or one terminal event: close or error."""

    DATA = "data"
    CLOSE = "close"
    ERROR = "error"


class PushEvent(Generic[T]):
    """One event as :meth:`PushStream.for_each_event` sees it."""

    __slots__ = ("data", "error", "kind")

    def __init__(self, kind: EventKind, data: Any = None, error: BaseException | None = None):
        #: DATA, CLOSE or ERROR
        self.kind = kind
        #: the value of a DATA event (None otherwise)
        self.data: T = data
        #: the exception of an ERROR event (None otherwise)
        self.error = error

    @property
    def is_terminal(self) -> bool:
        """True for CLOSE and ERROR: no event follows."""
        return self.kind is not EventKind.DATA

    def __repr__(self) -> str:
        if self.kind is EventKind.DATA:
            return f"PushEvent.data({self.data!r})"
        if self.kind is EventKind.ERROR:
            return f"PushEvent.error({self.error!r})"
        return "PushEvent.close()"


class Sink(Protocol):
    """What an event is pushed into."""

    def data(self, value: Any) -> int: ...

    def close(self) -> None: ...

    def error(self, exc: BaseException) -> None: ...


class Stage:
    """A sink that passes events on to ``down`` once it has done its part.

    ``closed`` is set once the stage has sent (or been told) its end: then it
    answers ``-1`` and sends nothing more.  ``finish()`` runs once before the
    close event goes on (a stage flushes what it holds there); ``ended()`` runs
    once however the stage ends (close, error, or ``-1`` from downstream).
    """

    __slots__ = ("closed", "down")

    def __init__(self, down: Sink) -> None:
        self.down = down
        self.closed = False

    def data(self, value: Any) -> int:
        return self.send(value)

    def send(self, value: Any) -> int:
        """Push ``value`` on; a negative answer ends this stage."""
        if self.closed:
            return -1
        r = self.down.data(value)
        if r < 0:
            self._end()
            return -1
        return r

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.finish()
        except Exception as exc:
            self.error(exc)
            return
        if not self.closed:
            self._end()
            self.down.close()

    def error(self, exc: BaseException) -> None:
        if self.closed:
            return
        self._end()
        self.down.error(exc)

    def fail(self, exc: BaseException) -> int:
        """A user function raised: the error goes on, upstream is told to stop."""
        self.error(exc)
        return -1

    def finish(self) -> None:
        """(override) Flush before the close event goes on."""

    def ended(self) -> None:
        """(override) Runs once when the stage ends, however it ends."""

    def _end(self) -> None:
        if not self.closed:
            self.closed = True
            self.ended()


class HeldEndStage(Stage):
    """A stage that hands events downstream later, in tasks of its own: an end
    from upstream (close or error) is held in ``ending`` until the events before
    it have gone, then :meth:`pass_end` sends it.  A subclass says in
    :meth:`drain_later` how its events get sent, and calls :meth:`pass_end` once
    nothing is left to send."""

    __slots__ = ("ending",)

    def __init__(self, down: Sink) -> None:
        super().__init__(down)
        #: the end that came from upstream, sent once the held events are gone:
        #: (None,) for close, (exc,) for an error
        self.ending: tuple[BaseException | None] | None = None

    def close(self) -> None:
        self._end_with(None)

    def error(self, exc: BaseException) -> None:
        self._end_with(exc)

    def _end_with(self, exc: BaseException | None) -> None:
        if self.closed or self.ending is not None:
            return
        self.ending = (exc,)
        self.drain_later()

    def drain_later(self) -> None:
        """(override) Make sure a task will send what is held, then the end."""
        raise NotImplementedError

    def pass_end(self) -> None:
        """Sends the held end downstream (as :class:`Stage` ends: ``finish()``
        first for a close)."""
        assert self.ending is not None
        exc = self.ending[0]
        if exc is None:
            super().close()
        else:
            super().error(exc)


def call_guarded(stage: Stage, fn: Callable[[Any], Any], value: Any) -> tuple[bool, Any]:
    """``fn(value)``; an exception becomes the stage's error event: (ok, result)."""
    try:
        return True, fn(value)
    except Exception as exc:
        stage.fail(exc)
        return False, None
