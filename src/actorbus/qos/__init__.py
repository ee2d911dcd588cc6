"""Delivery guarantees for a feed: at-least-once, exactly-once, in order,
persistent.

A :class:`QosPublisher` (:func:`qos_publisher`) keeps what it publishes and
streams it to each consumer's session; a :class:`QosSubscriber`
(:func:`qos_subscribe`) acknowledges what its application took.  Both are
built on the bus's request/reply (no link frames of their own), so a session
crosses links and forwarding hops end to end, and the bus's liveness signals
tell a consumer that is gone (its session was cancelled: link lost, actor
closed) from one that is slow (its session is open: it is waited for).
docs/qos.md is the guide.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from ..bus.message import Notification
from ..errors import UsageError
from ..journal import Retention, SyncPolicy
from ._future import DeliveryFuture
from ._journal_log import JournalLog
from ._levels import (
    Delivery,
    DeliveryFailed,
    DeliveryReport,
    OutboxFull,
    Position,
    Qos,
    QosRefused,
    QosStatus,
)
from ._log import MemoryLog, PublisherLog
from ._negotiate import check_publisher, check_subscriber
from ._publisher import QosPublisher, QosPublisherCounters
from ._subscriber import DeliveryInfo, QosSubscriber, QosSubscriberCounters
from ._wire import DeadLetter

if TYPE_CHECKING:
    from ..actors.actor import Actor

__all__ = [
    "DeadLetter",
    "Delivery",
    "DeliveryFailed",
    "DeliveryFuture",
    "DeliveryInfo",
    "DeliveryReport",
    "MemoryLog",
    "OutboxFull",
    "Position",
    "PublisherLog",
    "Qos",
    "QosPublisher",
    "QosPublisherCounters",
    "QosRefused",
    "QosStatus",
    "QosSubscriber",
    "QosSubscriberCounters",
    "qos_publisher",
    "qos_subscribe",
]

N = TypeVar("N", bound=Notification)

MiB = 1024 * 1024


def _positive(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or value <= 0:
        raise UsageError(f"{name} must be > 0, found {value!r}")


def qos_publisher(
    actor: Actor,
    message_class: type[N],
    subject: str,
    *,
    offer: Qos = Qos(),  # noqa: B008  (frozen)
    journal: str | Path | None = None,
    sync: SyncPolicy | None = None,
    retention: Retention | None = None,
    segment_bytes: int = 64 * MiB,
    ack_wait: float = 1.0,
    max_wait: float = 30.0,
    max_attempts: int = 5,
    window: int = 1024,
    outbox_messages: int = 100_000,
    outbox_bytes: int = 64 * MiB,
    forget_after: float = 300.0,
    on_congestion: Callable[[bool, QosPublisher[N]], object] | None = None,
) -> QosPublisher[N]:
    """A publisher of ``message_class`` on ``subject`` owned by ``actor`` that
    offers ``offer`` (the most it gives: a subscriber may ask less).

    ``ack_wait``: seconds before an unacknowledged message is sent again,
    doubling per attempt up to ``max_wait``; after ``max_attempts`` it is given
    up (a :class:`DeadLetter`).  ``window``: unacknowledged messages in flight
    per consumer at most.  ``outbox_messages`` / ``outbox_bytes``: what the
    in-memory log holds at most before :class:`OutboxFull` (``on_congestion``
    is told at half).  ``forget_after``: seconds a consumer without a name is
    kept after its session ended.  A persistent offer needs ``journal=`` (a
    journal directory the publisher owns: its seqs continue after a restart),
    written and synced per ``sync`` (default ``SyncPolicy.batch()``) and kept per
    ``retention`` (default: everything) in segments of ``segment_bytes`` (what
    retention deletes at a time); a message is sent to consumers only once it
    is durable."""
    check_publisher(message_class, subject, offer, journal, window)
    for name, value in (
        ("ack_wait", ack_wait),
        ("max_wait", max_wait),
        ("max_attempts", max_attempts),
        ("outbox_messages", outbox_messages),
        ("outbox_bytes", outbox_bytes),
        ("forget_after", forget_after),
    ):
        _positive(name, value)
    log: PublisherLog
    if journal is not None:
        log = JournalLog(
            journal,
            type_name=message_class.__type_name__,
            subject=subject,
            sync=sync if sync is not None else SyncPolicy.batch(),
            retention=retention,
            segment_bytes=segment_bytes,
        )
    else:
        log = MemoryLog()
    return QosPublisher(
        actor,
        message_class,
        subject,
        offer=offer,
        log=log,
        ack_wait=ack_wait,
        max_wait=max_wait,
        max_attempts=max_attempts,
        window=window,
        outbox_messages=outbox_messages,
        outbox_bytes=outbox_bytes,
        forget_after=forget_after,
        on_congestion=on_congestion,
    )


def qos_subscribe(
    actor: Actor,
    message_class: type[N],
    subject: str,
    *,
    on_message: Callable[[N, DeliveryInfo], object],
    qos: Qos = Qos(),  # noqa: B008  (frozen)
    name: str | None = None,
    state_dir: str | Path | None = None,
    start: Position = Position.latest(),  # noqa: B008  (frozen)
    ack: Literal["auto", "manual"] = "auto",
    window: int = 1024,
    on_status: Callable[[QosStatus, QosSubscriber[N]], object] | None = None,
) -> QosSubscriber[N]:
    """A subscriber of ``message_class`` on ``subject`` owned by ``actor`` that
    asks ``qos`` of the subject's QoS publishers.

    ``name``: a durable consumer name (a publisher keeps its state while it is
    away; without one, a fresh name is made and forgotten after it closed).
    ``state_dir``: where its acknowledged watermarks are saved (exactly-once
    needs it).  ``start``: where a new consumer starts (not latest: persistent
    only).  ``ack="manual"``: the application calls ``delivery.ack()``;
    ``"auto"``: returning from ``on_message`` acknowledges, raising does not
    (the message is delivered again)."""
    key = check_subscriber(message_class, subject, qos, name, state_dir, start, window)
    if ack not in ("auto", "manual"):
        raise UsageError(f"qos_subscribe(ack=...) takes 'auto' or 'manual', found {ack!r}")
    return QosSubscriber(
        actor,
        message_class,
        subject,
        key=key,
        qos=qos,
        on_message=on_message,
        name=name,
        state_dir=state_dir,
        start=start,
        manual=ack == "manual",
        window=window,
        on_status=on_status,
    )
