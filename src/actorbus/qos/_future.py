"""DeliveryFuture: the outcome of one notified publish, resolved once."""

from __future__ import annotations

from collections import deque

from ..actors._once import OnceFuture
from ._levels import DeliveryFailed, DeliveryReport

__all__ = ["DeliveryFuture", "DurableWaiters", "PendingDelivery", "delivered_to_none"]


class DeliveryFuture(OnceFuture[DeliveryReport]):
    """What :meth:`QosPublisher.publish_with_notification` returns: a
    :class:`DeliveryReport` once every consumer attached at publish time
    acknowledged the message, or :class:`DeliveryFailed` naming each one whose
    session ended first (and what :meth:`QosPublisher.publish_durable` returns:
    a report with no consumers once the message is durable).  Block with
    :meth:`result` (not on the publisher's own actor: it resolves there), or be
    called back with :meth:`add_done_callback` (``actor=``: as a task of that
    actor)."""

    def __init__(self, seq: int) -> None:
        super().__init__()
        self.seq = seq

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
        report: DeliveryReport = self._value
        return report

    def _resolve(self, value: DeliveryReport | None, error: DeliveryFailed | None) -> None:
        self._settle(value, error)

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
