"""A QoS publisher or subscriber node in its own process, for
tests/qos/test_qos_processes.py.

Usage: ``python qos_process_node.py CONFIG_JSON``; the config's ``role`` is ``pub`` or
``sub``, the rest is described at :func:`main`.  The node writes JSON lines on
stdout (``{"ev": NAME, ...}``) and reads commands as JSON lines on stdin; it
closes its bus and exits when stdin closes.

``pub`` — a :class:`Numbers` actor with a ``qos_publisher`` of :class:`Num`:
on the ``start`` command it publishes the numbers ``last_seq + 1 .. total``
(a persistent publisher restarted from its journal resumes after the last
number the journal holds), ``chunk`` of them every ``interval`` seconds; a full
outbox (``OutboxFull``) is waited out.  Events: ``ready`` (port, origin,
last_seq), ``published`` (the last number, after each chunk), ``done``.

``sub`` — an :class:`App` actor with a ``qos_subscribe`` of :class:`Num`,
acknowledging by hand: what it got is written out as ``got`` events (items
``[seq, number, redelivered]``), and only then acknowledged, so every number
it acknowledged was reported first (its "effect" committed with its ack).
Events: ``ready`` (port), ``resume`` (what its saved state says it
acknowledged of ``origin``, when the config names the origin), ``status``,
``got``, ``acked`` (on the ``report`` command, which names an origin:
``acked(origin)``).

With ``app_state`` in the config the application instead keeps its effect in
the subscriber's ``app_state`` (acknowledged automatically, saved with the
watermark in one write): a tally ``[count, sum, last, out_of_turn]`` of the
numbers it applied, where ``out_of_turn`` counts numbers that were not
``last + 1`` (a duplicate or a gap).  ``resume`` then carries the tally found
at startup, and ``report`` adds the tally (``tally``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from actorbus import Actor, Bus, Notification
from actorbus.config import ConnectionSettings
from actorbus.qos import Delivery, OutboxFull, Position, Qos, qos_publisher, qos_subscribe

SUBJECT = "/qos/numbers"
_out_lock = threading.Lock()


def emit(ev: str, **fields: Any) -> None:
    line = json.dumps({"ev": ev, "t": time.monotonic(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Num(Notification, type_name="tests.qos.Num"):
    n: int


def _qos(config: dict[str, Any]) -> Qos:
    return Qos(delivery=Delivery[config["delivery"]], persistent=bool(config.get("persistent")))


class Numbers(Actor):
    """Publishes its numbers in chunks on a timer (see the module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(name="numbers")
        self.config = config
        self.total = int(config["total"])
        self.chunk = int(config.get("chunk", 200))
        self.interval = float(config.get("interval", 0.005))
        self.next = 0

    def startup(self) -> None:
        journal = self.config.get("journal")
        self.pub = qos_publisher(self, Num, SUBJECT, offer=_qos(self.config), journal=journal)
        self.next = self.pub.last_seq + 1

    def start(self) -> None:
        self.pump()

    def pump(self) -> None:
        end = min(self.next + self.chunk, self.total + 1)
        try:
            while self.next < end:
                seq = self.pub.publish(Num(SUBJECT, n=self.next))
                if seq != self.next:
                    emit("error", text=f"published {self.next} as seq {seq}")
                    return
                self.next += 1
        except OutboxFull:
            pass  # the rest waits for acks
        emit("published", last=self.next - 1)
        if self.next > self.total:
            emit("done")
        else:
            self.schedule(self.interval, self.pump)


class App(Actor):
    """Reports what it gets, then acknowledges it (see the module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(name="app")
        self.config = config
        self.pending: list[Any] = []
        self.items: list[list[int]] = []
        self.flush_timer: Any = None

    def startup(self) -> None:
        state_dir = self.config.get("state_dir")
        tallying = bool(self.config.get("app_state"))
        self.sub = qos_subscribe(
            self,
            Num,
            SUBJECT,
            qos=_qos(self.config),
            on_message=self.tally if tallying else self.got,
            name=self.config.get("name"),
            state_dir=state_dir,
            start=Position.earliest() if self.config.get("persistent") else Position.latest(),
            ack="auto" if tallying else "manual",
            on_status=self.status,
        )
        saved = self.sub.app_state
        self.counts: list[int] = json.loads(saved) if saved is not None else [0, 0, 0, 0]
        origin = self.config.get("origin")
        if origin:
            emit("resume", through=self.sub.acked(origin), tally=self.counts)

    def status(self, status: Any, sub: Any) -> None:
        emit(
            "status",
            state=status.state.name,
            qos=None if status.qos is None else str(status.qos),
            refused=status.refused,
        )

    def got(self, message: Num, delivery: Any) -> None:
        self.pending.append(delivery)
        self.items.append([delivery.seq, message.n, int(delivery.redelivered)])
        if len(self.items) >= 200:
            self.flush()
        elif self.flush_timer is None:
            self.flush_timer = self.schedule(0.005, self.flush)

    def tally(self, message: Num, delivery: Any) -> None:
        """Apply the number to the tally kept in app_state (saved with the
        watermark); also report it, as an effect outside the state."""
        count, total, last, out_of_turn = self.counts
        if message.n != last + 1:
            out_of_turn += 1
        self.counts = [count + 1, total + message.n, message.n, out_of_turn]
        self.sub.app_state = json.dumps(self.counts).encode()
        self.items.append([delivery.seq, message.n, int(delivery.redelivered)])
        if len(self.items) >= 200:
            self.flush()
        elif self.flush_timer is None:
            self.flush_timer = self.schedule(0.005, self.flush)

    def flush(self) -> None:
        """Report what arrived, then acknowledge it: nothing is acknowledged
        before it was reported."""
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        if self.items:
            emit("got", items=self.items)
            self.items = []
        for delivery in self.pending:
            delivery.ack()
        self.pending = []

    def report(self, origin: str) -> None:
        if self.items:
            emit("got", items=self.items)
            self.items = []
        emit("acked", through=self.sub.acked(origin), tally=self.counts)


def main() -> None:
    config = json.loads(sys.argv[1])
    with Bus(node_id=config["node_id"]) as bus:
        actor: Numbers | App = Numbers(config) if config["role"] == "pub" else App(config)
        port = bus.listen(0).port if config.get("listen") else None
        bus.register(actor)
        bus.startup(actor).wait(10)
        if config.get("connect"):
            settings = ConnectionSettings(reconnect=True, reconnect_delay=0.05)
            bus.connect("127.0.0.1", int(config["connect"]), settings=settings)
        if isinstance(actor, Numbers):
            emit("ready", port=port, origin=actor.pub.origin, last_seq=actor.pub.last_seq)
        else:
            emit("ready", port=port)
        for line in sys.stdin:
            message = json.loads(line)
            command = message["cmd"]
            if command == "start" and isinstance(actor, Numbers):
                actor.post(actor.start)
            elif command == "report" and isinstance(actor, App):
                actor.post(actor.report, message["origin"])
            else:
                emit("error", text=f"unknown command {command!r}")


if __name__ == "__main__":
    main()
