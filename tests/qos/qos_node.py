"""A consumer node of the exactly-once crash test (test_qos_crash.py).

``python qos_node.py PORT STATE_DIR EFFECTS``: dials PORT, subscribes to
``Tick`` on ``/crash`` exactly-once as the durable consumer ``x`` with
STATE_DIR, and appends each delivered seq to EFFECTS (one line each, written
before on_message returns: the effect of the callback).  Prints ``up`` once
its session is accepted, then runs until killed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from qos_support import Tick

from actorbus import Actor, Bus, FeedState
from actorbus.qos import Delivery, DeliveryInfo, Qos, QosStatus, qos_subscribe


class Consumer(Actor):
    def __init__(self, state_dir: str, effects: str) -> None:
        super().__init__("consumer")
        self.state_dir = state_dir
        self.effects = open(effects, "a", encoding="ascii")  # noqa: SIM115  (open until killed)
        self.up = threading.Event()

    def startup(self) -> None:
        qos_subscribe(
            self,
            Tick,
            "/crash",
            qos=Qos(Delivery.EXACTLY_ONCE, persistent=True),
            name="x",
            state_dir=self.state_dir,
            on_message=self.take,
            on_status=self.status,
        )

    def take(self, tick: Tick, delivery: DeliveryInfo) -> None:
        self.effects.write(f"{delivery.seq} {tick.n}\n")
        self.effects.flush()

    def status(self, status: QosStatus, sub: Any) -> None:
        if status.state is FeedState.UP:
            self.up.set()


def main() -> None:
    port, state_dir, effects = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with Bus(node_id="qos-crash-consumer") as bus:
        consumer = Consumer(state_dir, effects)
        bus.register(consumer)
        bus.startup([consumer]).wait(10)
        bus.connect("127.0.0.1", port)
        if not consumer.up.wait(30):
            raise SystemExit("the session was not accepted within 30 s")
        print("up", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
