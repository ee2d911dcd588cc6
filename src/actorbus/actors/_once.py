"""OnceFuture: a value or an error, set once from any thread, waited for or
called back — the common part of a stream's and a notified publish's future."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from loguru import logger

if TYPE_CHECKING:
    from .actor import Actor

__all__ = ["OnceFuture"]

R = TypeVar("R")


class OnceFuture(Generic[R]):
    """Resolved once (the first :meth:`_settle` wins); :meth:`add_done_callback`
    callables run then, on the resolving thread or as a task of an actor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Self], object]] = []

    def done(self) -> bool:
        """True once resolved (with a value or an error)."""
        return self._event.is_set()

    def exception(self) -> BaseException | None:
        """The error once resolved with one, else None."""
        return self._error

    def add_done_callback(
        self, fn: Callable[[Self], object], *, actor: Actor | None = None
    ) -> None:
        """Call ``fn(self)`` once done: as a task of ``actor`` when given, else on
        the thread that resolves it (keep it short); at once if already done."""
        if actor is not None:
            target, inner = actor, fn

            def fn(future: Self) -> None:
                target.post(inner, future)

        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def _settle(self: Self, value: Any, error: BaseException | None) -> bool:
        """Resolve; False (and nothing changes) when it already was."""
        with self._lock:
            if self._event.is_set():
                return False
            self._value, self._error = value, error
            callbacks, self._callbacks = self._callbacks, []
            self._event.set()
        for fn in callbacks:
            try:
                fn(self)
            except Exception as exc:
                logger.opt(exception=exc).error("a done-callback of {} raised {}", self, exc)
        return True
