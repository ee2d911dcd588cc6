"""Actors and helpers the QoS tests share: a publisher actor that publishes
``Tick(n)`` on its own dispatcher, and a subscriber actor that records every
delivery (and can fail chosen ones)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from actorbus import Actor, Bus, Notification
from actorbus.qos import (
    DeliveryFuture,
    DeliveryInfo,
    QosPublisher,
    QosStatus,
    QosSubscriber,
    qos_publisher,
    qos_subscribe,
)

WAIT = 20.0


class Tick(Notification, type_name="tests.qos.Tick"):
    n: int


class Tock(Notification, type_name="tests.qos.Tock"):
    n: int


def start(bus: Bus, *actors: Actor) -> None:
    for actor in actors:
        bus.register(actor)
    bus.startup(list(actors)).wait(10)


def on_actor(actor: Actor, fn: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Run ``fn()`` as a task of ``actor`` and return its result."""
    done = threading.Event()
    box: list[Any] = []

    def task() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)
        done.set()

    actor.post(task)
    assert done.wait(timeout), f"{actor!r} did not run the task within {timeout} s"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


class Pub(Actor):
    """Owns a QosPublisher of Tick on ``subject``, made at startup with ``options``."""

    def __init__(self, subject: str, name: str = "pub", **options: Any) -> None:
        super().__init__(name=name)
        self.subject = subject
        self.options = options
        self.qos: QosPublisher[Tick] | None = None
        self.sent = 0

    def startup(self) -> None:
        self.qos = qos_publisher(self, Tick, self.subject, **self.options)

    def shutdown(self) -> None:
        if self.qos is not None:
            self.qos.close()

    @property
    def qp(self) -> QosPublisher[Tick]:
        assert self.qos is not None
        return self.qos

    def publish(self, count: int) -> list[int]:
        """Publish the next ``count`` ticks (on the actor); their seqs."""

        def run() -> list[int]:
            seqs = []
            for _ in range(count):
                self.sent += 1
                seqs.append(self.qp.publish(Tick(self.subject, n=self.sent)))
            return seqs

        result: list[int] = on_actor(self, run)
        return result

    def stream(self, total: int, per_tick: int, period: float) -> None:
        """Publish ``per_tick`` ticks every ``period`` seconds (an actor timer)
        until ``total`` are sent."""

        def tick() -> None:
            for _ in range(min(per_tick, total - self.sent)):
                self.sent += 1
                self.qp.publish(Tick(self.subject, n=self.sent))
            if self.sent >= total:
                handle.cancel()

        handle = on_actor(self, lambda: self.schedule_every(period, tick))

    def notify(self) -> DeliveryFuture:
        def run() -> DeliveryFuture:
            self.sent += 1
            return self.qp.publish_with_notification(Tick(self.subject, n=self.sent))

        future: DeliveryFuture = on_actor(self, run)
        return future

    def read(self, fn: Callable[[QosPublisher[Tick]], Any]) -> Any:
        return on_actor(self, lambda: fn(self.qp))


class Sub(Actor):
    """Owns a QosSubscriber of Tick on ``subject``; records each delivery as
    (origin, seq, n, attempt, redelivered).  ``fail`` maps n to how many times
    its callback raises before it succeeds."""

    def __init__(
        self,
        subject: str,
        *,
        actor_name: str | None = None,
        fail: dict[int, int] | None = None,
        message_class: type[Notification] = Tick,
        **options: Any,
    ) -> None:
        super().__init__(name=actor_name or f"sub-{options.get('name') or 'anon'}")
        self.subject = subject
        self.options = options
        self.message_class = message_class
        self.fail = dict(fail or {})
        self.qos: QosSubscriber[Any] | None = None
        self.got: list[tuple[str, int, int, int, bool]] = []
        self.infos: list[DeliveryInfo] = []
        self.statuses: list[QosStatus] = []
        self.cond = threading.Condition()

    def startup(self) -> None:
        self.qos = qos_subscribe(
            self,
            self.message_class,
            self.subject,
            on_message=self.take,
            on_status=self.status,
            **self.options,
        )

    def shutdown(self) -> None:
        if self.qos is not None:
            self.qos.close()

    @property
    def qs(self) -> QosSubscriber[Any]:
        assert self.qos is not None
        return self.qos

    def take(self, msg: Any, info: DeliveryInfo) -> None:
        left = self.fail.get(msg.n, 0)
        if left:
            self.fail[msg.n] = left - 1
            with self.cond:
                self.got.append((info.origin, info.seq, -msg.n, info.attempt, info.redelivered))
                self.cond.notify_all()
            raise RuntimeError(f"tests: tick {msg.n} fails on purpose")
        with self.cond:
            self.got.append((info.origin, info.seq, msg.n, info.attempt, info.redelivered))
            self.infos.append(info)
            self.cond.notify_all()

    def status(self, status: QosStatus, sub: Any) -> None:
        with self.cond:
            self.statuses.append(status)
            self.cond.notify_all()

    def wait(self, predicate: Callable[[Sub], bool], timeout: float = WAIT) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self), timeout)

    def taken(self) -> list[int]:
        """The n of each successful delivery, in order."""
        with self.cond:
            return [g[2] for g in self.got if g[2] > 0]

    def read(self, fn: Callable[[QosSubscriber[Any]], Any]) -> Any:
        return on_actor(self, lambda: fn(self.qs))
