"""A bus node in its own process, for the link tests.

Usage: ``python node.py CONFIG.properties NODE_ID ROLE[,ROLE...] SUBJECT``

The bus comes from the properties file (its connections dial the test's
service).  Roles:

* ``counter`` — publishes ``Counter(n)`` on SUBJECT every 2 ms while a
  subscriber is there, from an actor timer;
* ``replier`` — answers ``Ask`` on SUBJECT with ``Answer(q * 2)``; an ``Ask``
  with ``hold`` is kept unanswered (a request in flight).

Prints ``READY <node id>`` once every link has logged on, then runs until its
stdin closes (or it is killed).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actorbus import Actor, Bus, FeedState, IncomingRequest, PublishFeed  # noqa: E402
from nodes.messages import Answer, Ask, Counter  # noqa: E402

PERIOD_S = 0.002


class CounterSource(Actor):
    """Publishes a rising counter while its feed has subscribers."""

    def __init__(self, subject: str) -> None:
        super().__init__(name="counter")
        self.subject = subject
        self.n = 0
        self.timer: Any = None
        self.feed: PublishFeed[Counter] | None = None

    def startup(self) -> None:
        self.feed = self.publisher(Counter, self.subject, on_status=self.status, up=False)

    def status(self, state: FeedState, feed: PublishFeed[Counter]) -> None:
        if state is FeedState.UP:
            feed.update_feed_state(FeedState.UP)
            if self.timer is None:
                self.timer = self.schedule_every(PERIOD_S, self.tick)
        else:
            feed.update_feed_state(FeedState.DOWN)
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

    def tick(self) -> None:
        if self.feed is not None and self.feed.is_feed_up():
            self.n += 1
            self.feed.publish(Counter(self.subject, n=self.n))


class Doubler(Actor):
    """Answers Ask(q) with Answer(2q); holds the ones marked ``hold``."""

    def __init__(self, subject: str) -> None:
        super().__init__(name="doubler")
        self.subject = subject
        self.held: list[IncomingRequest[Ask]] = []

    def startup(self) -> None:
        self.replier(Ask, self.subject, on_request=self.answer)

    def answer(self, request: IncomingRequest[Ask]) -> None:
        ask = request.request
        if ask.hold:
            self.held.append(request)
            return
        request.reply(Answer(self.subject, value=ask.q * 2))


def main() -> int:
    config, node_id, roles, subject = sys.argv[1:5]
    bus = Bus.from_properties(config, node_id=node_id)
    try:
        actors: list[Actor] = []
        for role in roles.split(","):
            if role == "counter":
                actors.append(CounterSource(subject))
            elif role == "replier":
                actors.append(Doubler(subject))
            else:
                print(f"unknown role {role!r}", file=sys.stderr)
                return 2
        for actor in actors:
            bus.register(actor)
        bus.startup(actors).wait(10)
        for link in bus.links:
            link.wait_logged_on(10)
        print(f"READY {bus.node_id}", flush=True)
        sys.stdin.read()
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
