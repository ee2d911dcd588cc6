"""The two nodes of the unthrottled load test, each in its own process.

Usage: ``python flood_node.py CONFIG.properties NODE_ID slow SUBJECT`` or
``python flood_node.py CONFIG.properties NODE_ID flood SUBJECT SECONDS MODE PAD``.

* ``slow`` — a subscriber of ``Seq`` on SUBJECT whose callback takes 50 µs per
  message (a busy wait, as work would); ``report`` answers with ``report``
  (``delivered`` and its links' counters), with ``until`` once that many were
  delivered (or after ``timeout`` s).
* ``flood`` — on ``start``, a thread publishes ``Seq`` (``pad`` bytes of
  padding) on SUBJECT as fast as it can for SECONDS; MODE ``ignore`` publishes
  regardless, ``wait`` waits while its feed is congested
  (``feed.wait_ready``).  Meanwhile VmRSS (from /proc) is sampled every 0.1 s.
  Then ``done``: ``published`` (publishes a subscriber took), ``unrouted``,
  ``waits``, ``told`` (congestion callbacks), the RSS samples, the link's
  counters.  ``report`` answers with the link's counters again (``lost`` is
  learnt at a logon).

Both write ``ready`` (with the service ports) and ``link`` events; every line
is JSON with ``t = time.monotonic()``.  A node exits when stdin closes.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from reliability_node import LinkWatcher, emit, link_totals
from reliability_support import Seq, start_actors

from actorbus import Actor, Bus

#: the slow subscriber's work per message (s)
WORK = 50e-6


def rss() -> int:
    """This process's resident set size (bytes), from /proc."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Slow(Actor):
    def __init__(self, subject: str) -> None:
        super().__init__(name="slow")
        self.subject = subject
        self.delivered = 0
        #: set when ``delivered`` reaches ``target``
        self.target = -1
        self.reached = threading.Event()

    def startup(self) -> None:
        self.subscribe(Seq, self.subject, on_message=self._take)

    def _take(self, message: Seq, feed: Any) -> None:
        until = time.perf_counter() + WORK
        while time.perf_counter() < until:
            pass
        self.delivered += 1
        if self.delivered == self.target:
            self.reached.set()


def _commands() -> Any:
    for line in sys.stdin:
        yield json.loads(line)


def run_slow(bus: Bus, subject: str) -> None:
    slow = Slow(subject)
    start_actors(bus, LinkWatcher(name="watcher"), slow)
    emit("ready", ports=[s.port for s in bus.net.services] if bus.net is not None else [])
    for command in _commands():
        if command["cmd"] == "report":
            until = command.get("until")
            if until is not None:  # once that many were delivered (or the timeout)
                slow.reached.clear()
                slow.target = until
                if slow.delivered < until:
                    slow.reached.wait(command.get("timeout", 60))
            emit("report", delivered=slow.delivered, links=link_totals(bus))


def run_flood(bus: Bus, subject: str, seconds: float, mode: str, pad: int) -> None:
    start_actors(bus, LinkWatcher(name="watcher"))
    told: list[bool] = []
    feed = bus.publisher(Seq, subject, on_congestion=lambda state, f: told.append(state))
    samples: list[tuple[float, int]] = [(0.0, rss())]
    emit("ready", ports=[], rss=samples[0][1])
    stop = threading.Event()

    def sample(t0: float) -> None:
        while not stop.wait(0.1):
            samples.append((round(time.monotonic() - t0, 2), rss()))

    def flood() -> None:
        padding = b"p" * pad
        published = unrouted = waits = n = 0
        t0 = time.monotonic()
        sampler = threading.Thread(target=sample, args=(t0,), name="rss")
        sampler.start()
        end = t0 + seconds
        publish = feed.publish
        while True:
            # (the clock is read every 256 messages: the loop is the publisher)
            if not n & 255 and time.monotonic() >= end:
                break
            if mode == "wait" and feed.congested:
                waits += 1
                feed.wait_ready(1.0)
                continue
            n += 1
            if publish(Seq(subject, n=n, pad=padding)):
                published += 1
            else:
                unrouted += 1
        stop.set()
        sampler.join()
        emit(
            "done",
            published=published,
            unrouted=unrouted,
            waits=waits,
            told=told,
            seconds=round(time.monotonic() - t0, 2),
            rss=samples,
            links=link_totals(bus),
        )

    thread: threading.Thread | None = None
    try:
        for command in _commands():
            if command["cmd"] == "start" and thread is None:
                thread = threading.Thread(target=flood, name="flood")
                thread.start()
            elif command["cmd"] == "report":
                emit("report", links=link_totals(bus))
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        feed.close()


def main() -> int:
    config, node_id, role, subject = sys.argv[1:5]
    bus = Bus.from_properties(config, node_id=node_id)
    try:
        if role == "slow":
            run_slow(bus, subject)
        else:
            seconds, mode, pad = float(sys.argv[5]), sys.argv[6], int(sys.argv[7])
            run_flood(bus, subject, seconds, mode, pad)
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
