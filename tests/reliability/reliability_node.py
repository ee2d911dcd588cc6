"""A bus node in its own process for the reliability tests (often inside a
network namespace, under ``ip netns exec``).

Usage: ``python reliability_node.py CONFIG.properties NODE_ID ROLE SUBJECT [TOTAL RATE]``

The bus comes from the properties file (its services listen, its connections
dial).  Roles:

* ``publisher`` — a :class:`CountingPublisher` of ``Seq`` on SUBJECT: TOTAL
  messages at RATE per second, started by the ``start`` command;
* ``victim`` — the same, and an :class:`Echo` replier of ``Hold`` on
  SUBJECT/ask (the memory tests' victim);
* ``subscriber`` — a :class:`SeqSubscriber` of SUBJECT;
* ``holder`` — a replier of ``Hold`` on SUBJECT that never answers;
* ``wildsub`` — a :class:`WildSeqSubscriber` of the pattern SUBJECT, written
  ``DIALECT:TEXT`` (``levels:/fx/*/bid``, ``prefix:fx/eur*``): ``state`` and
  ``msg`` (subject, n) events; commands ``unsubscribe``, ``subscribe`` (each
  answered by ``ok`` with the command's ``id`` once done), ``report``
  (per-subject stats);
* ``pubctl`` — publishers of ``Seq`` driven by commands, each naming its
  ``subject``: ``advertise``, ``up``, ``down``, ``unadvertise``, ``close`` and
  ``publish`` (``count`` more numbers); ``pubstate`` events (with the subject),
  ``published`` (first, last, and how many reached nobody), ``ok`` after
  each command (with its ``cmd``, ``subject`` and ``id``); SUBJECT is not used;
* ``members`` — COUNT members (``m1``, ``m2``, ...) of queue group GROUP on
  ``Seq:SUBJECT``, each an inbox read by a thread: ``got`` events (member and
  the numbers ``ns``) every 100 messages and whenever its inbox is empty, so
  nothing received stays unreported for long.  Usage: ``... members SUBJECT
  GROUP COUNT``.

It writes JSON lines on stdout: ``ready`` (with the bound service ports),
``link`` (logged on/off, with the reason), ``state`` / ``pubstate`` (feed
state), ``held``, ``done``, ``fence``, ``fenced``, ``report``; every line has
``t = time.monotonic()``, a clock all processes on the machine share.
Commands arrive as JSON lines on stdin: ``start``, ``fence``, ``report``.  The
node closes its bus and exits when stdin closes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import threading
import time
from typing import Any

from reliability_support import (
    CountingPublisher,
    Echo,
    Holder,
    Seq,
    SeqSubscriber,
    WildSeqSubscriber,
    publish_fence,
    start_actors,
)

from actorbus import Actor, Bus, FeedState, PublishFeed, Wildcard
from actorbus.bus import SYSTEM_SUBJECT, Inbox, LinkLoggedOff, LinkLoggedOn
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
    if role in _COMMAND_ROLES:
        return _COMMAND_ROLES[role](config, node_id, subject, sys.argv[5:])
    total = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    rate = float(sys.argv[6]) if len(sys.argv) > 6 else 1000.0
    bus = Bus.from_properties(config, node_id=node_id)
    publisher: CountingPublisher | None = None
    subscriber: SeqSubscriber | None = None
    try:
        start_actors(bus, LinkWatcher(name="link-watcher"))
        if role in ("publisher", "victim"):
            if role == "victim":
                start_actors(bus, Echo(subject + "/ask"))
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


# ------------------------------------------------------ wildcards, queue groups


def _ready(bus: Bus) -> None:
    ports = [s.port for s in bus.net.services] if bus.net is not None else []
    emit("ready", node=bus.node_id, ports=ports)


def _commands() -> Any:
    """The commands on stdin, until it closes."""
    for line in sys.stdin:
        yield json.loads(line)


def _run_wildsub(config: str, node_id: str, subject: str, extra: list[str]) -> int:
    dialect, _, text = subject.partition(":")
    pattern = getattr(Wildcard, dialect)(text)
    bus = Bus.from_properties(config, node_id=node_id)
    try:
        start_actors(bus, LinkWatcher(name="link-watcher"))

        def on_event(entry: tuple[Any, ...]) -> None:
            if entry[0] == "state":
                emit("state", up=entry[2] is FeedState.UP)
            else:
                emit("msg", subject=entry[1], n=entry[2])

        subscriber = WildSeqSubscriber(pattern, on_event=on_event)
        start_actors(bus, subscriber)
        _ready(bus)
        for command in _commands():
            name = command.get("cmd")
            if name == "unsubscribe":
                subscriber.post(subscriber.unsubscribe_now)
                subscriber.post(functools.partial(emit, "ok", cmd=name, id=command.get("id")))
            elif name == "subscribe":
                subscriber.post(subscriber.subscribe_now)
                subscriber.post(functools.partial(emit, "ok", cmd=name, id=command.get("id")))
            elif name == "report":
                subscriber.post(_report_wild, subscriber, bus)
    finally:
        bus.close()
    return 0


def _report_wild(subscriber: WildSeqSubscriber, bus: Bus) -> None:
    stats = {k: dataclasses.asdict(v) for k, v in subscriber.stats.items()}
    emit("report", stats=stats, links=link_totals(bus))


class _Published:
    """The pubctl role's publishers, by subject; status events on stdout."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.feeds: dict[str, PublishFeed[Seq]] = {}
        self.next: dict[str, int] = {}

    def _status(self, state: FeedState, feed: PublishFeed[Seq]) -> None:
        emit("pubstate", subject=feed.key.subject, up=state is FeedState.UP)

    def run(self, name: str, subject: str, count: int) -> None:
        feed = self.feeds.get(subject)
        if name == "advertise":
            if feed is None:
                feed = self.feeds[subject] = self.bus.publisher(
                    Seq, subject, on_status=self._status, up=False
                )
            else:
                feed.advertise()
        elif name == "up":
            assert feed is not None
            feed.update_feed_state(FeedState.UP)
        elif name == "down":
            assert feed is not None
            feed.update_feed_state(FeedState.DOWN)
        elif name == "unadvertise":
            assert feed is not None
            feed.unadvertise()
        elif name == "close":
            assert feed is not None
            feed.close()
            del self.feeds[subject]
        elif name == "publish":
            assert feed is not None
            first = self.next.get(subject, 0) + 1
            nobody = 0
            for n in range(first, first + count):
                if not feed.publish(Seq(subject, n=n)):
                    nobody += 1
            self.next[subject] = first + count - 1
            emit("published", subject=subject, first=first, last=first + count - 1, nobody=nobody)
        else:
            raise ValueError(f"unknown pubctl command {name!r}")

    def close(self) -> None:
        for feed in self.feeds.values():
            feed.close()


def _run_pubctl(config: str, node_id: str, subject: str, extra: list[str]) -> int:
    bus = Bus.from_properties(config, node_id=node_id)
    published = _Published(bus)
    try:
        start_actors(bus, LinkWatcher(name="link-watcher"))
        _ready(bus)
        for command in _commands():
            name = command["cmd"]
            published.run(name, command["subject"], int(command.get("count", 0)))
            emit("ok", cmd=name, subject=command["subject"], id=command.get("id"))
    finally:
        published.close()
        bus.close()
    return 0


#: a member reports what it received at least every this many messages
REPORT_EVERY = 100


def _read_member(name: str, inbox: Inbox[Seq], stop: threading.Event) -> None:
    """Read ``inbox`` until ``stop``: ``got`` events every REPORT_EVERY messages
    and whenever the inbox is empty (so the last ones are reported too)."""
    numbers: list[int] = []
    while not stop.is_set():
        message = inbox.receive(0.05)
        if message is not None:
            numbers.append(message.n)
        if numbers and (len(numbers) >= REPORT_EVERY or inbox.depth == 0):
            emit("got", member=name, ns=numbers)
            numbers = []


def _run_members(config: str, node_id: str, subject: str, extra: list[str]) -> int:
    group, count = extra[0], int(extra[1])
    bus = Bus.from_properties(config, node_id=node_id)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    inboxes: list[Inbox[Seq]] = []
    try:
        start_actors(bus, LinkWatcher(name="link-watcher"))
        for i in range(1, count + 1):
            inbox = bus.inbox(Seq, subject, queue=group)
            inboxes.append(inbox)
            thread = threading.Thread(
                target=_read_member, args=(f"m{i}", inbox, stop), name=f"member-m{i}", daemon=True
            )
            thread.start()
            threads.append(thread)
        _ready(bus)
        for command in _commands():
            if command.get("cmd") == "report":
                emit("report", links=link_totals(bus))
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for inbox in inboxes:
            inbox.close()
        bus.close()
    return 0


#: the roles that take their own arguments and are driven by commands
_COMMAND_ROLES = {"wildsub": _run_wildsub, "pubctl": _run_pubctl, "members": _run_members}


if __name__ == "__main__":
    sys.exit(main())
