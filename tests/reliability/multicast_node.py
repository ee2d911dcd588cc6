"""A node on a reliable multicast channel, in its own process (and network namespace).

Usage: ``python multicast_node.py ROLE NODE_ID GROUP PORT INTERFACE [SETTING=VALUE ...]``
with ROLE ``pub`` or ``sub``; each SETTING is a :class:`MulticastSettings`
attribute (``cache_bytes=100000``, ``nak_delay=0.02``).

* ``sub`` — subscribes to ``Seq`` on ``/mc/seq`` and to the ``MulticastLoss``
  system notifications; checks the numbers (delivered, duplicates, reordered,
  gaps and the numbers they skipped) and logs the feed's states.  ``report``
  answers with ``report`` (those figures, the lost ranges reported, the
  channel's counters), once ``until`` numbers were delivered or accounted
  lost, or ``timeout`` s passed; ``wait_state`` answers ``state`` once the
  feed's last state is ``state`` (``UP``: the publisher's announcement was
  heard), or after ``timeout`` s; ``wait_nagging`` answers ``nagging`` once a
  ``MulticastNagging`` came (or after ``timeout`` s), ``resume`` resumes the
  channel.
* ``pub`` — on ``start`` (``rate`` messages/s for ``seconds``, ``pad`` bytes
  each), a thread publishes ``Seq`` 1, 2, 3 ... on ``/mc/seq`` paced per
  millisecond; then ``done`` (``published``, ``seconds``, the channel's
  counters).

Both write ``ready`` once the channel is open; every line is JSON.  A node
exits when stdin closes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from typing import Any

from reliability_node import emit
from reliability_support import Seq, SeqStats, start_actors

from actorbus import Actor, Bus
from actorbus.bus.system import SYSTEM_SUBJECT, MulticastLoss, MulticastNagging
from actorbus.config.settings import MulticastSettings

SUBJECT = "/mc/seq"


class Watcher(Actor):
    def __init__(self) -> None:
        super().__init__(name="mc-watcher")
        self.stats = SeqStats()
        self.states: list[str] = []
        #: (first datagram, last datagram, notifications) of each loss reported
        self.lost: list[tuple[int, int, int]] = []
        self.nagging: list[int] = []
        self.changed = threading.Condition()

    def startup(self) -> None:
        self.subscribe(Seq, SUBJECT, on_message=self._message, on_status=self._state)
        self.subscribe(MulticastLoss, SYSTEM_SUBJECT, on_message=self._lost)
        self.subscribe(MulticastNagging, SYSTEM_SUBJECT, on_message=self._nagging)

    def _nagging(self, message: MulticastNagging, feed: Any) -> None:
        with self.changed:
            self.nagging.append(message.requested)
            self.changed.notify_all()

    def _message(self, message: Seq, feed: Any) -> None:
        with self.changed:
            self.stats.take(message.n)
            self.changed.notify_all()

    def _state(self, state: Any, feed: Any) -> None:
        with self.changed:
            self.states.append(state.name)
            self.changed.notify_all()

    def _lost(self, message: MulticastLoss, feed: Any) -> None:
        with self.changed:
            self.lost.append((message.first, message.last, message.messages))
            self.changed.notify_all()

    def accounted(self) -> int:
        return self.stats.delivered + sum(max(m, 0) for _, _, m in self.lost)


def _settings(group: str, port: int, interface: str, extra: list[str]) -> MulticastSettings:
    fields = {f.name: f.type for f in dataclasses.fields(MulticastSettings)}
    values: dict[str, Any] = {}
    for item in extra:
        name, _, text = item.partition("=")
        kind = fields[name]
        values[name] = (
            tuple(text.split(","))
            if "tuple" in str(kind)
            else float(text)
            if "float" in str(kind)
            else int(text)
        )
    return MulticastSettings(group=group, port=port, interface=interface, **values)


def _commands() -> Any:
    for line in sys.stdin:
        yield json.loads(line)


def main() -> None:
    role, node_id, group, port, interface, *extra = sys.argv[1:]
    settings = _settings(group, int(port), interface, extra)
    if role == "pub":
        settings = dataclasses.replace(settings, subjects=(SUBJECT,))
    bus = Bus(node_id=node_id)
    try:
        channel = bus.join_multicast("mc", settings)
        if role == "sub":
            run_sub(bus, channel)
        else:
            run_pub(bus, channel)
    finally:
        bus.close()


def run_sub(bus: Bus, channel: Any) -> None:
    watcher = Watcher()
    start_actors(bus, watcher)
    emit("ready", stream=f"{channel.stream:016x}")
    for command in _commands():
        if command["cmd"] == "wait_state":
            want = command["state"]
            with watcher.changed:
                watcher.changed.wait_for(lambda: watcher.states[-1:] == [want], command["timeout"])
            emit("state", states=watcher.states)
        elif command["cmd"] == "wait_nagging":
            with watcher.changed:
                watcher.changed.wait_for(lambda: bool(watcher.nagging), command["timeout"])
            emit("nagging", nagging=watcher.nagging, channel=channel.stats())
        elif command["cmd"] == "resume":
            channel.resume()
            emit("resumed")
        elif command["cmd"] == "report":
            until, deadline = command.get("until", 0), time.monotonic() + command.get("timeout", 0)
            with watcher.changed:
                while watcher.accounted() < until and time.monotonic() < deadline:
                    watcher.changed.wait(deadline - time.monotonic())
                s = watcher.stats
                emit(
                    "report",
                    delivered=s.delivered,
                    last=s.last,
                    duplicates=s.duplicates,
                    reordered=s.reordered,
                    gaps=s.gaps,
                    missing=s.missing,
                    states=watcher.states,
                    lost=watcher.lost,
                    nagging=watcher.nagging,
                    channel=channel.stats(),
                )


def run_pub(bus: Bus, channel: Any) -> None:
    feed = bus.publisher(Seq, SUBJECT)
    emit("ready", stream=f"{channel.stream:016x}")
    thread: threading.Thread | None = None

    def publish(rate: float, seconds: float, pad: int) -> None:
        padding = b"p" * pad
        n = 0
        t0 = time.monotonic()
        total = int(rate * seconds)
        while n < total:
            due = min(total, int((time.monotonic() - t0) * rate) + 1)
            while n < due:
                n += 1
                feed.publish(Seq(SUBJECT, n=n, pad=padding))
            time.sleep(0.001)
        emit("done", published=n, seconds=round(time.monotonic() - t0, 3), channel=channel.stats())

    try:
        for command in _commands():
            if command["cmd"] == "start" and thread is None:
                args = (command["rate"], command["seconds"], command.get("pad", 0))
                thread = threading.Thread(target=publish, args=args, name="mc-publish")
                thread.start()
            elif command["cmd"] == "report":
                emit("report", channel=channel.stats())
    finally:
        if thread is not None:
            thread.join()
        feed.close()


if __name__ == "__main__":
    main()
