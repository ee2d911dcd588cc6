"""A forwarding bus node in its own process, for the routing tests.

Usage: ``python node.py SPEC_JSON``; the spec says::

    {"id": "B", "listen": [port, ...], "connect": [port, ...],
     "roles": ["pub", "replier", "member"], "heartbeat": 0.5}

Every service and connection forwards (``forward``); connections dial again
after a loss.  Roles: ``pub`` publishes ``Counter`` on ``/net/count`` when told
(stdin ``burst N``: N as fast as the feed allows, then ``SENT N``; ``stream``:
one every millisecond until ``stop``); ``replier`` answers ``Ask`` on ``/net/ask``
(a ``hold`` one is kept: a request in flight); ``member`` joins queue group
``workers`` on ``/net/jobs`` and prints ``JOB n`` for each.  ``stats`` prints
``STATS {json}``: the tree as this node sees it and its links' counters.

Prints ``READY <id>`` once it runs; runs until stdin closes or it is killed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "net"))

from nodes.messages import Answer, Ask, Counter  # noqa: E402

from actorbus import Actor, Bus, FeedState, IncomingRequest, PublishFeed  # noqa: E402
from actorbus.config import ConnectionSettings, ServiceSettings  # noqa: E402

COUNT, ASK, JOBS = "/net/count", "/net/ask", "/net/jobs"


class Pub(Actor):
    def __init__(self) -> None:
        super().__init__(name="pub")
        self.feed: PublishFeed[Counter] | None = None
        self.n = 0
        self.timer: Any = None

    def startup(self) -> None:
        self.feed = self.publisher(Counter, COUNT, up=True, on_status=self.status)

    def status(self, state: FeedState, feed: PublishFeed[Counter]) -> None:
        print(f"PUB {state.name}", flush=True)

    def burst(self, count: int) -> None:
        """Publish ``count`` as fast as it goes, once the feed has a subscriber
        (until then, look again in 10 ms)."""
        feed = self.feed
        assert feed is not None
        if not feed.is_feed_up():
            self.schedule(0.01, lambda: self.burst(count))
            return
        for _ in range(count):
            self.n += 1
            feed.publish(Counter(COUNT, n=self.n))
        print(f"SENT {count}", flush=True)

    def stream(self) -> None:
        self.timer = self.schedule_every(0.001, lambda: self.burst_quiet(1))

    def burst_quiet(self, count: int) -> None:
        feed = self.feed
        if feed is not None and feed.is_feed_up():
            self.n += 1
            feed.publish(Counter(COUNT, n=self.n))

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        print(f"STOPPED {self.n}", flush=True)


class Doubler(Actor):
    def __init__(self) -> None:
        super().__init__(name="doubler")
        self.held: list[IncomingRequest[Ask]] = []

    def startup(self) -> None:
        self.replier(Ask, ASK, on_request=self.answer, on_cancel=self.cancelled)

    def cancelled(self, request: IncomingRequest[Ask]) -> None:
        print("CANCELLED", flush=True)

    def answer(self, request: IncomingRequest[Ask]) -> None:
        if request.request.hold:
            self.held.append(request)
            print("HELD", flush=True)
            return
        request.reply(Answer(ASK, value=request.request.q * 2))


class Member(Actor):
    def startup(self) -> None:
        self.subscribe(Counter, JOBS, queue="workers", on_message=self.job)

    def job(self, message: Counter, feed: Any) -> None:
        print(f"JOB {message.n}", flush=True)


def stats(bus: Bus) -> dict[str, Any]:
    view = bus.router.spanning.view()
    return {
        "tree": {
            "root": view.root,
            "parent": view.parent,
            "carrying": list(view.carrying),
            "blocked": list(view.blocked),
        },
        "links": {
            link.peer_node or link.name: dataclasses.asdict(link.counters) for link in bus.links
        },
    }


def main() -> int:
    spec = json.loads(sys.argv[1])
    beat = float(spec.get("heartbeat", 0.5))
    bus = Bus(node_id=spec["id"])
    try:
        timers = {"heartbeat_delay": beat, "heartbeat_reply_delay": beat}
        for port in spec.get("listen", []):
            bus.listen(port, settings=ServiceSettings(forward=True, **timers))
        for port in spec.get("connect", []):
            settings = ConnectionSettings(
                forward=True, reconnect=True, reconnect_delay=0.2, **timers
            )
            bus.connect("127.0.0.1", port, settings=settings)
        actors: dict[str, Actor] = {}
        for role in spec.get("roles", []):
            actor = {"pub": Pub, "replier": Doubler, "member": lambda: Member(name="member")}[
                role
            ]()
            actors[role] = actor
            bus.register(actor)
        bus.startup(list(actors.values())).wait(10)
        print(f"READY {bus.node_id}", flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            pub = actors.get("pub")
            if words[0] == "burst" and isinstance(pub, Pub):
                count = int(words[1])
                pub.post(pub.burst, count)
            elif words[0] == "stream" and isinstance(pub, Pub):
                pub.post(pub.stream)
            elif words[0] == "stop" and isinstance(pub, Pub):
                pub.post(pub.stop)
            elif words[0] == "stats":
                print("STATS " + json.dumps(stats(bus)), flush=True)
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "routing-node"
    sys.exit(main())
