"""A node of the source-route tests (``test_link_source_routes.py``), in a process
of its own.

Usage: ``python route_node.py SPEC_JSON``, the spec::

    {"node": "C",
     "services": [{"port": 7001, "forward": true, "maxHops": 8,
                   "permissions": ["deny publish * /secret", "allow * * *"]}],
     "connect": [{"port": 7002, "forward": true}]}

Every node subscribes to ``Counter`` on ``/routed`` and ``/secret`` (an actor
keeps each message with its sender), to ``Undeliverable`` on the system subject
(an inbox), and answers ``Ask`` on ``/routed`` with ``Answer(q * 2)``, the reply's ``reason`` naming this node and
the request's sender path.  It prints ``{"ready": NODE}`` once its connections
logged on, then answers one JSON line per command line read on stdin:

* ``{"cmd": "publish", "subject": S, "n": N, "count": C, "route": [...]}`` ->
  ``{"sent": k}``: Counter(N), Counter(N + 1) ... C of them (default 1), as fast
  as publish() returns
* ``{"cmd": "request", "subject": S, "q": Q, "route": [...], "timeout": T}`` -> ``{"replies":
  [{"status", "reason", "value"}, ...]}`` (or ``{"raised": text}``)
* ``{"cmd": "received", "subject": S, "timeout": T}`` -> the next Counter there:
  ``{"n", "sender": [node, actor, feed, hops, path]}`` (``{"none": true}``
  after the timeout)
* ``{"cmd": "bounce", "timeout": T}`` -> the next Undeliverable's fields and
  ``original_n`` (its original message decoded)
* ``{"cmd": "held"}`` -> ``{"held", "cancelled"}``: the Asks with ``hold`` kept
  unanswered, and the cancels told of them
* ``{"cmd": "drop", "peer": P}`` -> ``{"dropped": k}``: closes this node's links
  to node P (both stay up)
* ``{"cmd": "stats"}`` -> ``{"links": {peer: {"routed_forwarded",
  "routed_bounced"}}, "routes": {"forwarded", "bounced", "delivered", "lost", "in_flight",
  "untracked"}}``

It closes its bus and exits when stdin closes.
"""

from __future__ import annotations

import json
import queue
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actorbus import Actor, Bus, IncomingRequest, PublishFeed  # noqa: E402
from actorbus.bus import SYSTEM_SUBJECT, Inbox, Permissions, Sender, Undeliverable  # noqa: E402
from actorbus.config import ConnectionSettings, ServiceSettings  # noqa: E402
from nodes.messages import Answer, Ask, Counter  # noqa: E402


class Doubler(Actor):
    """Answers Ask(q) on /routed with Answer(2q), naming this node and the path;
    keeps an Ask with ``hold`` unanswered, and counts the cancels it is told."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.held = 0
        self.cancelled = 0

    def startup(self) -> None:
        self.replier(Ask, "/routed", on_request=self.answer, on_cancel=self.cancel)

    def cancel(self, request: IncomingRequest[Ask]) -> None:
        self.cancelled += 1

    def answer(self, request: IncomingRequest[Ask]) -> None:
        if request.request.hold:
            self.held += 1
            return
        sender = request.sender
        request.reply(
            Answer(
                "/routed",
                value=request.request.q * 2,
                reason=f"answered by {self.runtime_node} for {sender.node} via "
                f"{'>'.join(sender.path)}",
            )
        )

    runtime_node = ""


class Collector(Actor):
    """Takes Counter on /routed and /secret: each with its feed's sender."""

    def __init__(self) -> None:
        super().__init__(name="collector")
        self.got: dict[str, queue.SimpleQueue[tuple[Counter, Sender]]] = {
            subject: queue.SimpleQueue() for subject in ("/routed", "/secret")
        }

    def startup(self) -> None:
        for subject in self.got:
            self.subscribe(Counter, subject, on_message=self.take)

    def take(self, message: Counter, feed: Any) -> None:
        self.got[message.subject].put((message, feed.sender))


def _run(
    bus: Bus,
    command: dict[str, Any],
    collector: Collector,
    doubler: Doubler,
    bounces: Inbox[Undeliverable],
    publishers: dict[str, PublishFeed[Counter]],
) -> dict[str, Any]:
    cmd = command["cmd"]
    if cmd == "publish":
        subject = command.get("subject", "/routed")
        publish = publishers[subject].publish
        sent = 0
        for n in range(command["n"], command["n"] + command.get("count", 1)):  # a burst
            sent += publish(Counter(subject, n=n), route_to=command["route"])
        return {"sent": sent}
    if cmd == "request":
        try:
            replies = bus.request_all(
                Ask(
                    command.get("subject", "/routed"),
                    q=command["q"],
                    hold=command.get("hold", False),
                ),
                command["timeout"],
                route_to=command["route"],
            )
        except Exception as exc:  # the test reads what was raised
            return {"raised": f"{type(exc).__name__}: {exc}"}
        return {
            "replies": [
                {
                    "status": reply.status.name,
                    "reason": reply.reason,
                    "value": getattr(reply, "value", None),
                }
                for reply in replies
            ]
        }
    if cmd == "received":
        try:
            message, sender = collector.got[command.get("subject", "/routed")].get(
                timeout=command["timeout"]
            )
        except queue.Empty:
            return {"none": True}
        path = list(sender.path)
        return {"n": message.n, "sender": [*sender[:4], path]}
    if cmd == "bounce":
        try:
            bounce = bounces.receive(command["timeout"])
        except queue.Empty:
            return {"none": True}
        if bounce is None:
            return {"none": True}
        original = bounce.original()
        return {
            "node": bounce.node,
            "code": bounce.code,
            "reason": bounce.reason,
            "route_to": list(bounce.route_to),
            "route_from": list(bounce.route_from),
            "type_name": bounce.type_name,
            "original_subject": bounce.original_subject,
            "request": bounce.request,
            "original_n": getattr(original, "n", None),
            "original_q": getattr(original, "q", None),
        }
    if cmd == "held":  # read by the actor itself, on its own thread
        counts: queue.SimpleQueue[dict[str, int]] = queue.SimpleQueue()
        doubler.post(lambda: counts.put({"held": doubler.held, "cancelled": doubler.cancelled}))
        return counts.get(timeout=10)
    if cmd == "drop":  # this node closes its links to the peer (the peer stays up)
        dropped = [link for link in bus.links if link.peer_node == command["peer"]]
        for link in dropped:
            link.close("dropped for the test")
        return {"dropped": len(dropped)}
    if cmd == "stats":  # what bus.inspect() shows of this node and its links
        snap = bus.inspect()
        counters = {link.peer_node: link.counters for link in bus.links}
        return {
            "frames": {  # data messages and frames written, per link (Link.counters)
                peer: [c.messages_out, c.frames_out] for peer, c in counters.items()
            },
            "links": {
                link.peer_node: {
                    "routed_forwarded": link.routed_forwarded,
                    "routed_bounced": link.routed_bounced,
                }
                for link in snap.links
            },
            "routes": {
                "forwarded": snap.routed_forwarded,
                "bounced": snap.routed_bounced,
                "delivered": snap.routed_delivered,
                "lost": snap.routed_lost,
                "in_flight": snap.routed_in_flight,
                "untracked": snap.routed_untracked,
            },
        }
    return {"error": f"unknown command {cmd!r}"}


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    node = spec["node"]
    bus = Bus(node_id=node)
    try:
        for service in spec.get("services", ()):
            rules = service.get("permissions")
            bus.listen(
                service["port"],
                settings=ServiceSettings(
                    forward=service.get("forward", False), max_hops=service.get("maxHops", 8)
                ),
                permissions=Permissions(rules) if rules else None,
            )
        for dial in spec.get("connect", ()):
            bus.connect(
                "127.0.0.1",
                dial["port"],
                settings=ConnectionSettings(
                    forward=dial.get("forward", False),
                    max_hops=dial.get("maxHops", 8),
                    reconnect=True,
                    reconnect_delay=0.05,
                ),
            )
        bounces = bus.inbox(Undeliverable, SYSTEM_SUBJECT)
        publishers = {
            subject: bus.publisher(Counter, subject) for subject in ("/routed", "/secret")
        }
        doubler = Doubler(name="doubler")
        doubler.runtime_node = node
        collector = Collector()
        bus.register(doubler)
        bus.register(collector)
        bus.startup([doubler, collector]).wait(10)
        for link in bus.links:
            if not link.wait_logged_on(30):
                print(json.dumps({"failed": f"{link} never logged on"}), flush=True)
                return 1
        print(json.dumps({"ready": node}), flush=True)
        for line in sys.stdin:
            print(
                json.dumps(_run(bus, json.loads(line), collector, doubler, bounces, publishers)),
                flush=True,
            )
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
