"""StreamFuture: the result of a terminal operation, resolved once."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, TypeVar

from ..actors._once import OnceFuture
from ..errors import UsageError

if TYPE_CHECKING:
    from ._exec import Executor

__all__ = ["StreamFuture"]

R = TypeVar("R")
_PENDING = object()


class StreamFuture(OnceFuture[R]):
    """What a terminal operation returns: its result, or the stream's error.

    Block with :meth:`result` (not on the stream's own dispatcher thread: that
    would deadlock it, and raises :class:`~actorbus.UsageError`), ``await`` it
    from an asyncio actor, or be called back with :meth:`add_done_callback`,
    in an actor's mailbox when ``actor=`` is given.
    """

    def __init__(self, executor: Executor | None = None) -> None:
        super().__init__()
        self._value = _PENDING
        self._executor = executor

    def result(self, timeout: float | None = None) -> R:
        """The result; raises the stream's error, or :class:`TimeoutError` after
        ``timeout`` seconds."""
        if not self._event.is_set():
            executor = self._executor
            self._check_deadlock("blocked on with result()")
            if executor is not None:
                executor.drive()
            if not self._event.wait(timeout):
                raise TimeoutError(
                    f"the stream did not end within {timeout} s; wait longer, or close it"
                )
        if self._error is not None:
            raise self._error
        value: R = self._value
        return value

    def _check_deadlock(self, how: str) -> None:
        executor = self._executor
        if executor is not None and executor.would_deadlock():
            raise UsageError(
                f"a stream's future {how} by the actor or thread that runs the stream "
                f"({executor!r}): it would wait for itself forever; run the stream on "
                "another actor (on=...), or use add_done_callback(fn, actor=...)"
            )

    def __await__(self) -> Generator[Any, None, R]:
        if not self._event.is_set() and self._executor is not None:
            if self._executor.in_own_task():
                self._check_deadlock("awaited")
            self._executor.drive()
        if not self._event.is_set():
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake(_: StreamFuture[R]) -> None:
                try:
                    loop.call_soon_threadsafe(_resolve, waiter)
                except RuntimeError:  # the awaiting loop is closed
                    pass

            self.add_done_callback(wake)
            yield from waiter.__await__()
        return self.result()

    def resolve(self, value: Any, error: BaseException | None = None) -> bool:
        """Resolve with ``value``, or fail with ``error`` (a terminal sink calls
        it; the first call wins, later ones return False)."""
        return self._settle(value, error)

    def __repr__(self) -> str:
        if not self._event.is_set():
            return "<StreamFuture pending>"
        if self._error is not None:
            return f"<StreamFuture error={self._error!r}>"
        return f"<StreamFuture result={self._value!r}>"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
