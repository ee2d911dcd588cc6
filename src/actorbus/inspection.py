"""Inspection: a snapshot of one node's inside — actors, dispatchers, feeds,
links, outstanding requests and state machines.

Theory of operation
-------------------
A :class:`NodeSnapshot` is an immutable record made of field structs (so it
travels on the bus with the ordinary codec).  :func:`snapshot` assembles it
from what the node already counts, read without stopping anything:

* actors: the runtime's registered actors, each with its mailbox's depth and
  counters (kept per batch by the dispatcher, as its own totals are) and what
  the actor adds itself (:meth:`Actor.inspect_machine
  <actorbus.actors.Actor.inspect_machine>`: a state machine's current state and
  last transitions, which this module never imports);
* dispatchers: :meth:`Dispatcher.stats <actorbus.actors.Dispatcher.stats>`;
* feeds: discovery's rows of this node (:func:`actorbus.bus.discovery.local_topics`);
* links: each TCP link's status and :class:`~actorbus.net.LinkStats`;
* requests: the requests this node's requestors are waiting on, per key.

Nothing is added to a message's path: every figure is one the node keeps
anyway, so two figures of one snapshot may be a few tasks apart.

Over a link, every node advertises a replier for :class:`InspectNode` on the
reserved system subject (next to discovery's, hidden from discovery, scope
REMOTE_ONLY) and answers with one :class:`NodeInspected` reply
(:func:`answer`).  It is a request like any other: the link's authentication
(secret, TLS) lets the asker in, and the link's permissions may refuse it with
a rule on its key (``deny request * actorbus.system actorbus.InspectNode``;
docs/inspect.md).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ._log import logger
from .actors.machine_view import DIAGRAM_FORMATS, MachineView
from .bus.discovery import TopicRow, local_topics
from .bus.message import Field, Reply, ReplyStatus, Request
from .errors import UsageError

if TYPE_CHECKING:
    from .actors import Actor, ActorRuntime
    from .bus.requests import IncomingRequest
    from .bus.router import Router
    from .net.link import Link

__all__ = [
    "ActorInfo",
    "DispatcherInfo",
    "ForwardingInfo",
    "InspectNode",
    "LinkInfo",
    "NodeInspected",
    "NodeSnapshot",
    "RequestCount",
    "answer",
    "snapshot",
]


class ActorInfo(Field, type_name="actorbus.ActorInfo"):
    """One registered actor."""

    name: str
    class_name: str
    """The actor's class, ``module.QualName``."""
    dispatcher: str
    """The dispatcher it is pinned to."""
    started: bool
    """True after its ``startup()`` succeeded and until ``shutdown()`` ran."""
    mailbox: str
    """``"idle"``, ``"runnable"`` (waiting on the run queue) or ``"running"``."""
    depth: int
    """Tasks queued in its mailbox and not yet started."""
    max_depth: int
    """The highest depth seen so far."""
    tasks_run: int
    """Tasks run so far (callbacks, timer expiries, lifecycle), those that raised included."""
    failures: int
    """Tasks that raised (the failure contract reported each)."""
    quantum_overruns: int
    """Times its batch went past the dispatcher's quantum and it went back on the run queue."""
    machine: MachineView | None = None
    """Its state machine (an FSM actor), else None."""


class DispatcherInfo(Field, type_name="actorbus.DispatcherInfo"):
    """One dispatcher."""

    name: str
    kind: str
    """``"blocking"``, ``"spinning"``, ``"spin+park"``, ``"spin+yield"`` or ``"asyncio"``."""
    threads: int
    run_queue: int
    """Mailboxes waiting on its run queue now."""
    actors: int
    """Mailboxes attached to it."""
    tasks_run: int
    failures: int
    quantum_overruns: int


class LinkInfo(Field, type_name="actorbus.LinkInfo"):
    """One TCP link (its counters are summed over every connection it has had)."""

    name: str
    peer_node: str
    """The peer's node id ("" before the first logon)."""
    address: str
    """``host:port`` it dialled, or the peer's address for an accepted link."""
    status: str
    """``"connecting"``, ``"logging on"``, ``"logged on"``, ``"waiting to reconnect"`` or ``"closed"``."""
    initiator: bool
    """True when this node dialled it."""
    messages_in: int
    messages_out: int
    bytes_in: int
    bytes_out: int
    dropped: int
    """Messages that never reached the socket."""
    lost: int
    """Messages written to a connection that broke and never read by the peer."""
    reconnects: int
    logons: int
    auth_failures: int
    authz_refusals: int
    """Actions the link's permissions refused the peer."""
    corrupt_frames: int
    routed_forwarded: int = 0
    """Source-routed messages this node passed on to the peer."""
    routed_bounced: int = 0
    """Source-routed messages from the peer this node bounced."""
    forwarded: int = 0
    """(a forwarding link) Data messages from the peer passed on to other
    forwarding links, one per link (docs/routing.md)."""
    hop_limited: int = 0
    """(a forwarding link) Notifications from the peer dropped past its ``maxHops``."""


class ForwardingInfo(Field, type_name="actorbus.ForwardingInfo"):
    """The forwarding tree as this node sees it (docs/routing.md)."""

    root: str
    """The node the tree grows from (the least node id this node knows of)."""
    parent: str
    """The peer toward the root ("" at the root or without forwarding links)."""
    carrying: tuple[str, ...] = ()
    """Forwarding peers whose link carries feeds."""
    blocked: tuple[str, ...] = ()
    """Forwarding peers whose link is out of the tree (or still deciding)."""
    forwarded: int = 0
    """Data messages passed from one forwarding link to another, in all."""
    hop_limited: int = 0
    """Notifications dropped past a link's ``maxHops``."""
    duplicates: int = 0
    """Link-state announcements that came again over another path (dropped)."""
    known: int = 0
    """Nodes of the forwarding network this node knows (itself included)."""
    changes: int = 0
    """Times a link started or stopped carrying feeds."""


class RequestCount(Field, type_name="actorbus.RequestCount"):
    """Requests this node's requestors are waiting on, on one key."""

    message_type: str
    subject: str
    count: int


class NodeSnapshot(Field, type_name="actorbus.NodeSnapshot"):
    """One node's inside at one moment (see the module docstring)."""

    node: str
    """The node id."""
    time: float
    """When it was taken, seconds since the epoch."""
    actors: tuple[ActorInfo, ...] = ()
    dispatchers: tuple[DispatcherInfo, ...] = ()
    feeds: tuple[TopicRow, ...] = ()
    """Discovery's rows of this node (docs/subjects.md, "Discovery"): per message type,
    subject or pattern, role, scope and queue group, how many feeds and how
    many UP."""
    links: tuple[LinkInfo, ...] = ()
    requests_outstanding: int = 0
    """Requests this node's own requestors are waiting on (replies not all in;
    a peer's requests forwarded here are counted on the peer)."""
    requests: tuple[RequestCount, ...] = ()
    """The same, per key."""
    routed_forwarded: int = 0
    """Source-routed messages this node passed on (docs/routing.md)."""
    routed_bounced: int = 0
    """Source-routed messages this node could not pass on and bounced."""
    routed_delivered: int = 0
    """Source-routed messages (replies and bounces included) delivered here."""
    routed_lost: int = 0
    """Source-routed replies, cancels and bounces dropped (they never bounce)."""
    routed_in_flight: int = 0
    """Peers' source-routed requests this node passed on and has not seen end."""
    routed_untracked: int = 0
    """Source-routed requests passed on untracked, that record being full."""
    forwarding: ForwardingInfo | None = None
    """The forwarding tree (None for a node without forwarding links)."""

    def actor(self, name: str) -> ActorInfo | None:
        """The actor called ``name``, or None."""
        for info in self.actors:
            if info.name == name:
                return info
        return None


class NodeInspected(Reply, type_name="actorbus.NodeInspected"):
    """A node's answer to :class:`InspectNode`."""

    snapshot: NodeSnapshot | None = None


class InspectNode(Request, type_name="actorbus.InspectNode", replies=(NodeInspected,)):
    """Asks a linked node for its :class:`NodeSnapshot`; ``diagram`` names an
    actor whose machine diagram (``diagram_format``: ``"mermaid"`` or ``"dot"``)
    the snapshot carries, with its current state highlighted."""

    diagram: str | None = None
    diagram_format: str = "mermaid"


# ------------------------------------------------------------- this node
def _check_format(diagram_format: str) -> None:
    if diagram_format not in DIAGRAM_FORMATS:
        raise UsageError(
            f"diagram format {diagram_format!r} is not one a node renders; use one of "
            f"{', '.join(DIAGRAM_FORMATS)} (an SVG is drawn from 'dot' text with Graphviz)"
        )


def _machine(actor: Actor, diagram: str | None) -> MachineView | None:
    """What ``actor`` shows of its machine; None, logged, when its
    ``inspect_machine()`` raised (the snapshot still shows the rest)."""
    try:
        return actor.inspect_machine(diagram)
    except Exception as exc:
        logger.warning(
            "inspection: {}.inspect_machine() raised {}: {}; its machine is left out",
            actor.name,
            type(exc).__name__,
            exc,
        )
        return None


def _actor_info(actor: Actor, diagram: str | None) -> ActorInfo:
    mailbox = actor.actor_context.mailbox
    cls = type(actor)
    return ActorInfo(
        name=actor.name,
        class_name=f"{cls.__module__}.{cls.__qualname__}",
        dispatcher=mailbox.dispatcher.name if mailbox is not None else "",
        started=actor.is_started,
        mailbox=mailbox.state if mailbox is not None else "idle",
        depth=mailbox.depth if mailbox is not None else 0,
        max_depth=mailbox.max_depth if mailbox is not None else 0,
        tasks_run=mailbox.tasks_run if mailbox is not None else 0,
        failures=mailbox.task_failures if mailbox is not None else 0,
        quantum_overruns=mailbox.quantum_overruns if mailbox is not None else 0,
        machine=_machine(actor, diagram),
    )


def _link_info(link: Link) -> LinkInfo:
    c = link.counters
    return LinkInfo(
        name=link.name,
        peer_node=link.peer_node or "",
        address=link.address,
        status=link.status.value,
        initiator=link.initiator,
        messages_in=c.messages_in,
        messages_out=c.messages_out,
        bytes_in=c.bytes_in,
        bytes_out=c.bytes_out,
        dropped=c.dropped,
        lost=c.lost,
        reconnects=c.reconnects,
        logons=c.logons,
        auth_failures=c.auth_failures,
        authz_refusals=c.authz_refusals,
        corrupt_frames=c.corrupt_frames,
        routed_forwarded=c.routed_forwarded,
        routed_bounced=c.routed_bounced,
        forwarded=c.forwarded,
        hop_limited=c.hop_limited,
    )


def _forwarding(router: Router, links: tuple[LinkInfo, ...]) -> ForwardingInfo | None:
    view = router.spanning.view()
    if not view.carrying and not view.blocked:
        return None
    return ForwardingInfo(
        root=view.root,
        parent=view.parent,
        carrying=view.carrying,
        blocked=view.blocked,
        forwarded=sum(x.forwarded for x in links),
        hop_limited=sum(x.hop_limited for x in links),
        duplicates=view.duplicates,
        known=view.known,
        changes=view.changes,
    )


def _requests(router: Router) -> tuple[int, tuple[RequestCount, ...]]:
    # this node's own requestors (a peer's requests forwarded here are the peer's)
    with router.lock:
        keys = [h.feed.key for h in router.requests.values() if h.feed.remote is None]
    per_key = Counter((k.message_class.__type_name__, k.subject) for k in keys)
    return len(keys), tuple(
        RequestCount(message_type=t, subject=s, count=n) for (t, s), n in sorted(per_key.items())
    )


def snapshot(
    node_id: str,
    router: Router,
    runtime: ActorRuntime,
    links: Iterable[Link] = (),
    *,
    diagram: str | None = None,
    diagram_format: str = "mermaid",
) -> NodeSnapshot:
    """The snapshot of the node whose router, runtime and links these are
    (``Bus.inspect()`` calls it with its own).  ``diagram``: the name of an
    actor whose machine diagram the snapshot carries (in ``diagram_format``,
    ``"mermaid"`` or ``"dot"``); an actor of that name without a machine, or
    none, carries none.

    Raises :class:`~actorbus.UsageError` for a diagram format it cannot render."""
    _check_format(diagram_format)
    actors = tuple(
        _actor_info(a, diagram_format if a.name == diagram else None) for a in runtime.actors
    )
    dispatchers = tuple(
        DispatcherInfo(
            name=s.name,
            kind=s.kind.value,
            threads=s.thread_count,
            run_queue=s.run_queue_length,
            actors=len(s.mailboxes),
            tasks_run=s.tasks_run,
            failures=s.task_failures,
            quantum_overruns=s.quantum_overruns,
        )
        for s in runtime.stats().values()
    )
    feeds = tuple(
        TopicRow(
            node=t.node,
            message_type=t.message_type,
            subject=t.subject,
            role=t.role,
            scope=t.scope,
            count=t.count,
            up=t.up,
            wildcard=t.wildcard,
            queue=t.queue,
        )
        for t in local_topics(router, node_id)
    )
    outstanding, per_key = _requests(router)
    routes = router.source_routes
    link_infos = tuple(_link_info(link) for link in links)
    return NodeSnapshot(
        node=node_id,
        time=time.time(),
        actors=actors,
        dispatchers=dispatchers,
        feeds=feeds,
        links=link_infos,
        requests_outstanding=outstanding,
        requests=per_key,
        routed_forwarded=routes.forwarded,
        routed_bounced=routes.bounced,
        routed_delivered=routes.delivered,
        routed_lost=routes.lost,
        routed_in_flight=len(routes.in_flight),
        routed_untracked=routes.in_flight.untracked,
        forwarding=_forwarding(router, link_infos),
    )


def answer(
    incoming: IncomingRequest[InspectNode], take: Callable[[str | None, str], NodeSnapshot]
) -> None:
    """(the inspection replier's request callback) Answer ``incoming`` with one
    :class:`NodeInspected` reply carrying ``take(diagram, diagram_format)``, the
    node's snapshot.  Never raises (it runs on whichever thread brought the
    request, a link's I/O thread included): a failure is an ERROR reply naming
    what went wrong, never a traceback."""
    request = incoming.request
    try:
        found = take(request.diagram, request.diagram_format)
        incoming.reply(NodeInspected(request.subject, snapshot=found))
    except Exception as exc:
        logger.warning("inspection: {}: {}", type(exc).__name__, exc)
        # a misuse is the asker's to read; anything else stays in this node's log
        reason = (
            str(exc)
            if isinstance(exc, UsageError)
            else "the node could not take its snapshot; its log says why"
        )
        if incoming.is_active:
            incoming.reply(Reply(request.subject, status=ReplyStatus.ERROR, reason=reason))
