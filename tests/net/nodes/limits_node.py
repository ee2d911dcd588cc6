"""The attacked node of ``test_link_limits.py``, in a process of its own so that
its memory (VmRSS) and descriptors are its own.

Usage: ``python limits_node.py SECRET_HEX SETTINGS_JSON``

It listens on 127.0.0.1 (any free port) with ``Bus.listen(secret=...,
**settings)``; a subscriber takes ``Counter`` notifications on ``/healthy``
and checks they come 1, 2, 3, ... (``n == 0`` is a fence); a replier answers
``Fetch(size)`` with a ``Blob`` of ``size`` bytes.  It writes JSON lines on
stdout: ``{"ready": port}`` first, then one answer per command read on stdin:
``stats`` (after a full garbage collection: ``rss_kib``, ``fds``, the
subscriber's ``delivered``, ``duplicates``, ``reordered``, ``missing``,
``fences``, ``states``, the service's counters and ``receipts``).  It closes its
bus and exits when stdin closes.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from messages import Blob, Counter, Fetch

from actorbus import Actor, Bus, FeedState, IncomingRequest
from actorbus.config import ServiceSettings


class Victim(Actor):
    """Checks the healthy link's numbers 1, 2, 3, ... on ``/healthy``; answers
    ``Fetch(size)`` with ``size`` bytes on ``/fetch``."""

    def __init__(self) -> None:
        super().__init__(name="victim")
        self.lock = threading.Lock()
        self.last = 0
        self.delivered = 0
        self.duplicates = 0
        self.reordered = 0
        self.missing = 0
        self.fences = 0
        self.states: list[str] = []

    def startup(self) -> None:
        self.subscribe(Counter, "/healthy", on_message=self._message, on_status=self._state)
        self.replier(Fetch, "/fetch", on_request=self._fetch)

    def _message(self, message: Counter, feed: Any) -> None:
        with self.lock:
            n = message.n
            if n == 0:
                self.fences += 1
            elif n == self.last:
                self.duplicates += 1
            elif n < self.last:
                self.reordered += 1
            else:
                self.missing += n - self.last - 1
                self.last = n
                self.delivered += 1

    def _state(self, state: FeedState, feed: Any) -> None:
        with self.lock:
            self.states.append(state.name)

    def _fetch(self, incoming: IncomingRequest[Fetch]) -> None:
        incoming.reply(Blob("/fetch", data=b"x" * incoming.request.size))


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def main() -> None:
    secret = bytes.fromhex(sys.argv[1])
    settings = json.loads(sys.argv[2])
    victim = Victim()
    with Bus(node_id="victim") as bus:
        service = bus.listen(0, secret=secret, settings=ServiceSettings(**settings))
        bus.register(victim)
        bus.startup([victim]).wait(5)
        print(json.dumps({"ready": service.port}), flush=True)
        for line in sys.stdin:
            if line.strip() != "stats":
                continue
            gc.collect()
            with victim.lock:
                seen = {
                    "delivered": victim.delivered,
                    "duplicates": victim.duplicates,
                    "reordered": victim.reordered,
                    "missing": victim.missing,
                    "fences": victim.fences,
                    "states": list(victim.states),
                }
            counters = service.counters
            stats = {
                "rss_kib": rss_kib(),
                "fds": len(os.listdir("/proc/self/fd")),
                "service": {
                    **dataclasses.asdict(counters.links),
                    "accepted": counters.accepted,
                    "connections_over_limit": counters.over_limit,
                    "open_links": counters.open_links,
                },
                "receipts": len(bus.net.receipts) if bus.net is not None else 0,
                **seen,
            }
            print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
