"""A bus node in its own process for the reliability tests (often inside a
network namespace, under ``ip netns exec``).

Usage: ``python reliability_node.py CONFIG.properties NODE_ID ROLE SUBJECT [TOTAL RATE]``

The bus comes from the properties file (its services listen, its connections
dial).  Roles:

* ``publisher`` — a :class:`CountingPublisher` of ``Seq`` on SUBJECT: TOTAL
  messages at RATE per second, started by the ``start`` command;
* ``subscriber`` — a :class:`SeqSubscriber` of SUBJECT;
* ``holder`` — a replier of ``Hold`` on SUBJECT that never answers.

It writes JSON lines on stdout: ``ready`` (with the bound service ports),
``link`` (logged on/off, with the reason), ``state`` / ``pubstate`` (feed
state), ``held``, ``done``, ``fence``, ``fenced``, ``report``; every line has
``t = time.monotonic()``, a clock all processes on the machine share.
Commands arrive as JSON lines on stdin: ``start``, ``fence``, ``report``.  The
node closes its bus and exits when stdin closes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from typing import Any

from reliability_support import (
    CountingPublisher,
    Holder,
    SeqSubscriber,
    publish_fence,
    start_actors,
)

from actorbus import SYSTEM_SUBJECT, Actor, Bus, FeedState, LinkLoggedOff, LinkLoggedOn
from actorbus.net import LinkStats

_out_lock = threading.Lock()


def emit(ev: str, **fields: Any) -> None:
    line = json.dumps({"ev": ev, "t": time.monotonic(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def link_totals(bus: Bus) -> dict[str, int]:
    """Counters of every link this node had: accepted ones through their services
    (closed ones included), dialled ones through their link (all reconnects)."""
    total = LinkStats()
    net = bus.net
    if net is not None:
        for service in net.services:
            total = total + service.counters.links
        for link in net.links:
            if link.initiator:
                total = total + link.counters
    return dataclasses.asdict(total)


class LinkWatcher(Actor):
    """Reports the node's link system notifications on stdout."""

    def startup(self) -> None:
        self.subscribe(LinkLoggedOn, SYSTEM_SUBJECT, on_message=self._on)
        self.subscribe(LinkLoggedOff, SYSTEM_SUBJECT, on_message=self._off)

    def _on(self, message: LinkLoggedOn, feed: Any) -> None:
        emit("link", on=True, peer=message.peer_node, reason="")

    def _off(self, message: LinkLoggedOff, feed: Any) -> None:
        emit("link", on=False, peer=message.peer_node, reason=message.reason)


def _subscriber_event(stats: Any) -> Any:
    def on_event(entry: tuple[Any, ...]) -> None:
        if entry[0] == "state":
            emit("state", up=entry[2] is FeedState.UP)
        else:
            emit("fence", delivered=stats.delivered)

    return on_event


def main() -> int:
    config, node_id, role, subject = sys.argv[1:5]
    total = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    rate = float(sys.argv[6]) if len(sys.argv) > 6 else 1000.0
    bus = Bus.from_properties(config, node_id=node_id)
    publisher: CountingPublisher | None = None
    subscriber: SeqSubscriber | None = None
    try:
        start_actors(bus, LinkWatcher(name="link-watcher"))
        if role == "publisher":
            publisher = CountingPublisher(
                bus,
                subject,
                total=total,
                rate=rate,
                on_state=lambda state: emit("pubstate", up=state is FeedState.UP),
            )
        elif role == "subscriber":
            subscriber = SeqSubscriber(subject)
            subscriber.on_event = _subscriber_event(subscriber.stats)
            start_actors(bus, subscriber)
        elif role == "holder":
            start_actors(bus, Holder(subject, on_count=_held))
        else:
            print(f"unknown role {role!r}", file=sys.stderr)
            return 2
        ports = [s.port for s in bus.net.services] if bus.net is not None else []
        emit("ready", node=bus.node_id, ports=ports)
        for line in sys.stdin:
            command = json.loads(line)
            name = command.get("cmd")
            if name == "start" and publisher is not None:
                publisher.start()
                threading.Thread(
                    target=_announce_done, args=(publisher,), name="node-done", daemon=True
                ).start()
            elif name == "fence":
                publish_fence(bus, subject, timeout=float(command.get("timeout", 30)))
                emit("fenced")
            elif name == "report":
                fields: dict[str, Any] = {"links": link_totals(bus)}
                if publisher is not None:
                    fields.update(
                        sent=publisher.sent,
                        refused=publisher.refused,
                        unrouted=publisher.unrouted,
                    )
                if subscriber is not None:
                    fields.update(dataclasses.asdict(subscriber.stats))
                emit("report", **fields)
    finally:
        if publisher is not None:
            publisher.close()
        bus.close()
    return 0


def _held(count: int) -> None:
    if count % 100 == 0:
        emit("held", count=count)


def _announce_done(publisher: CountingPublisher) -> None:
    publisher.wait_done(3600)
    emit("done", sent=publisher.sent)


if __name__ == "__main__":
    sys.exit(main())
