"""The QoS vocabulary: delivery levels, what a feed asks or offers, where a new
consumer starts, a subscriber's status, and the errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..bus.scope import FeedState
from ..errors import Error, UsageError

__all__ = [
    "Delivery",
    "DeliveryFailed",
    "DeliveryReport",
    "OutboxFull",
    "Position",
    "Qos",
    "QosRefused",
    "QosStatus",
]


class Delivery(enum.Enum):
    """How many times a message reaches the consumer's application."""

    AT_MOST_ONCE = 0
    AT_LEAST_ONCE = 1
    EXACTLY_ONCE = 2

    @property
    def text(self) -> str:
        """``"at-least-once"`` and so on."""
        return self.name.lower().replace("_", "-")


@dataclass(frozen=True)
class Qos:
    """A delivery guarantee: what a subscriber asks, or what a publisher offers
    (the most it gives; a subscriber may ask less)."""

    delivery: Delivery = Delivery.AT_LEAST_ONCE
    persistent: bool = False
    ordered: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.delivery, Delivery):
            raise UsageError(
                f"Qos(delivery=...) takes a Delivery, found {self.delivery!r}; "
                f"use Delivery.AT_LEAST_ONCE, AT_MOST_ONCE or EXACTLY_ONCE"
            )

    def __str__(self) -> str:
        parts = [self.delivery.text]
        if self.persistent:
            parts.append("persistent")
        parts.append("in order" if self.ordered else "unordered")
        return ", ".join(parts)


class _Start(enum.IntEnum):
    EARLIEST = 0
    LATEST = 1
    SEQ = 2
    TIME = 3


@dataclass(frozen=True)
class Position:
    """Where a NEW consumer starts; a consumer with saved state resumes after
    what it acknowledged instead.  Anything but :meth:`latest` needs a
    persistent feed."""

    kind: int
    value: int = 0

    @classmethod
    def earliest(cls) -> Position:
        """The oldest message the publisher's journal still holds."""
        return cls(_Start.EARLIEST)

    @classmethod
    def latest(cls) -> Position:
        """What is published after the session is accepted (the default)."""
        return cls(_Start.LATEST)

    @classmethod
    def seq(cls, n: int) -> Position:
        """From sequence number ``n`` (1 is the first ever published)."""
        if n < 1:
            raise UsageError(f"Position.seq(n) takes n >= 1, found {n!r}")
        return cls(_Start.SEQ, n)

    @classmethod
    def time(cls, epoch_ms: int) -> Position:
        """From the first message published at or after ``epoch_ms``."""
        return cls(_Start.TIME, epoch_ms)

    @property
    def is_latest(self) -> bool:
        return self.kind == _Start.LATEST

    def __str__(self) -> str:
        kind = _Start(self.kind)
        if kind in (_Start.EARLIEST, _Start.LATEST):
            return f"Position.{kind.name.lower()}()"
        return f"Position.{kind.name.lower()}({self.value})"


@dataclass(frozen=True)
class QosStatus:
    """A subscriber's state: UP while at least one publisher's session is
    accepted; ``qos`` is what is in force (from the publisher's offer), None
    before; ``refused`` is the refusal's text when a publisher refused it."""

    state: FeedState
    qos: Qos | None = None
    refused: str | None = None


class QosRefused(UsageError):
    """A QoS combination that cannot be given: the text names the key, what was
    asked, what is offered, and the fix."""


class OutboxFull(Error):
    """A publish found the publisher's outbox (its unacknowledged messages) full:
    the text names the slowest consumer and the fix."""


@dataclass(frozen=True)
class DeliveryReport:
    """A notified publish reached every consumer attached when it was published."""

    seq: int
    consumers: tuple[str, ...]


class DeliveryFailed(Error):
    """A notified publish did not reach every consumer attached when it was
    published: ``missing`` pairs each such consumer with the reason."""

    def __init__(
        self, seq: int, delivered: tuple[str, ...], missing: tuple[tuple[str, str], ...]
    ) -> None:
        self.seq = seq
        self.delivered = delivered
        self.missing = missing
        names = "; ".join(f"{name}: {reason}" for name, reason in missing)
        super().__init__(
            f"message {seq} was not acknowledged by {len(missing)} consumer(s) ({names}); "
            f"delivered to {list(delivered)}"
        )
