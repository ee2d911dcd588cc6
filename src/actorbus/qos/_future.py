"""DeliveryFuture: the outcome of one notified publish, resolved once."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from loguru import logger

from ._levels import DeliveryFailed, DeliveryReport

if TYPE_CHECKING:
    from ..actors.actor import Actor

__all__ = ["DeliveryFuture", "DurableWaiters", "PendingDelivery", "delivered_to_none"]


class DeliveryFuture:
    """What :meth:`QosPublisher.publish_with_notification` returns: a
    :class:`DeliveryReport` once every consumer attached at publish time
    acknowledged the message, or :class:`DeliveryFailed` naming each one whose
    session ended first (and what :meth:`QosPublisher.publish_durable` returns:
    a report with no consumers once the message is durable).  The same shape as ``actorbus.streams.StreamFuture``:
    block with :meth:`result` (not on the publisher's own actor: it resolves
    there), or be called back with :meth:`add_done_callback`."""

    __slots__ = ("_callbacks", "_error", "_event", "_lock", "_value", "seq")

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._value: DeliveryReport | None = None
        self._error: DeliveryFailed | None = None
        self._callbacks: list[Callable[[DeliveryFuture], object]] = []

    def done(self) -> bool:
        return self._event.is_set()

    def result(self, timeout: float | None = None) -> DeliveryReport:
        """The report; raises :class:`DeliveryFailed`, or :class:`TimeoutError`
        after ``timeout`` seconds."""
        if not self._event.wait(timeout):
            raise TimeoutError(
                f"message {self.seq} was not acknowledged by every consumer within "
                f"{timeout} s; wait longer, or use add_done_callback()"
            )
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def exception(self) -> DeliveryFailed | None:
        return self._error

    def add_done_callback(
        self, fn: Callable[[DeliveryFuture], object], *, actor: Actor | None = None
    ) -> None:
        """Call ``fn(self)`` once done: as a task of ``actor`` when given, else on
        the publisher's dispatcher thread (keep it short)."""
        if actor is not None:
            target, inner = actor, fn

            def fn(future: DeliveryFuture) -> None:
                target.post(inner, future)

        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def _resolve(self, value: DeliveryReport | None, error: DeliveryFailed | None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._value, self._error = value, error
            callbacks, self._callbacks = self._callbacks, []
            self._event.set()
        for fn in callbacks:
            try:
                fn(self)
            except Exception as exc:
                logger.opt(exception=exc).error("a done-callback of {} raised {}", self, exc)

    def __repr__(self) -> str:
        if not self._event.is_set():
            return f"<DeliveryFuture {self.seq} pending>"
        return f"<DeliveryFuture {self.seq} {self._error or self._value!r}>"


class PendingDelivery:
    """One notified publish: the consumers still to acknowledge it."""

    __slots__ = ("delivered", "future", "missing", "waiting")

    def __init__(self, future: DeliveryFuture, consumers: list[str]) -> None:
        self.future = future
        self.waiting = set(consumers)
        self.delivered: list[str] = []
        self.missing: list[tuple[str, str]] = []

    def settle(self, consumer: str, reason: str | None) -> None:
        """``consumer`` acknowledged it (``reason`` None) or cannot (the reason)."""
        if consumer not in self.waiting:
            return
        self.waiting.discard(consumer)
        if reason is None:
            self.delivered.append(consumer)
        else:
            self.missing.append((consumer, reason))
        if not self.waiting:
            seq = self.future.seq
            if self.missing:
                error = DeliveryFailed(seq, tuple(self.delivered), tuple(self.missing))
                self.future._resolve(None, error)
            else:
                self.future._resolve(DeliveryReport(seq, tuple(self.delivered)), None)


def delivered_to_none(seq: int) -> DeliveryFuture:
    """The future of a notified publish made while no consumer was attached:
    resolved at once, with no consumers."""
    future = DeliveryFuture(seq)
    future._resolve(DeliveryReport(seq, ()), None)
    return future


class DurableWaiters:
    """Futures resolved once the log holds their seq durably, in seq order."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: deque[DeliveryFuture] = deque()

    def add(self, future: DeliveryFuture) -> None:
        """(seqs only grow, so the deque stays in order)"""
        self._futures.append(future)

    def settle(self, durable: int) -> None:
        """Resolve every future whose seq is at or below ``durable``."""
        futures = self._futures
        while futures and futures[0].seq <= durable:
            future = futures.popleft()
            future._resolve(DeliveryReport(future.seq, ()), None)

    def fail(self, reason: str) -> None:
        """The publisher closed before they were durable."""
        futures, self._futures = self._futures, deque()
        for future in futures:
            future._resolve(None, DeliveryFailed(future.seq, (), (("journal", reason),)))
