"""Source routes: a message sent along an explicit list of node ids, and bounces.

A notification or request may name the nodes it must cross, ``route_to``
(``PublishFeed.publish(m, route_to=...)``, ``RequestFeed.request(m,
route_to=...)``, ``Bus.request_all(m, t, route_to=...)``).  It leaves its node
with ``route_from = (this node,)``; every node it reaches takes itself off the
head of ``route_to`` and appends itself to ``route_from``.  The node where
``route_to`` runs out delivers it locally, as a message from a peer (its
subscribers and repliers of the key whose scope takes remote messages; a
local-only delivery at the origin when ``route_to`` is empty).  Any other node
passes it on to the next node of ``route_to`` over its direct link to that node,
**without decoding it**: the codec's bytes of the message travel as they are
(``RoutedFrame.body``); only the type name and subject are read, for the
permissions.

What cannot go on **bounces**: an :class:`~actorbus.bus.system.Undeliverable`
naming the node, the reason, both lists and the original message travels back
along ``route_from`` to the origin, whose node publishes it on the system
subject; a request bounced ends with an ERROR reply that names the node and the
reason.  The reasons (``Undeliverable.code``): no link to the next node
(``unknown-node``), more links than the ``max_hops`` of the links on the way
(``hop-limit``), the permissions of the node refusing the peer the message came
from (``refused``: publish or request on the key, at every hop), a link that does
not forward (``not-forwarding``: a node passes messages on only between links
whose ``forward`` setting is on; its own messages and what it delivers need no
such link), a message type the last node does not know (``unknown-type``).
Replies, cancels and bounces never bounce: one that cannot go is dropped and
counted (``lost``), so nothing circulates.

A request in flight whose route loses a link further on bounces too: each node
that passes a peer's request on keeps it (bounded, :mod:`._routed_inflight`)
until its last reply (``KIND_LAST_REPLY``), bounce or cancel passes, and when
the link it went out on drops, bounces it (``link-lost``) so the origin ends it
with an ERROR reply naming the node and the lost link.

A transport takes part by implementing ``send_routed(frame)`` (the party seam,
:mod:`actorbus.bus.party`) and handing what its peer sent to
``RemoteParty.routed(frame)``; :meth:`SourceRoutes.attach` learns of each such
link when the router attaches its party.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from .._log import shown
from ..errors import CodecError, Error, RequestError, UsageError
from . import codec
from ._routed_inflight import InFlight
from ._stamp import stamped
from .message import MessageKey, Notification, Reply, ReplyStatus, Request, lookup_type
from .permissions import Action
from .requests import IncomingRequest, ReplyFeed, RequestFeed, RequestHandle
from .scope import CAT_REMOTE, Scope
from .sender import Sender
from .system import SYSTEM_SUBJECT, Undeliverable

if TYPE_CHECKING:
    from .party import RemoteParty
    from .router import Router

__all__ = [
    "KINDS",
    "KIND_BOUNCE",
    "KIND_CANCEL",
    "KIND_LAST_REPLY",
    "KIND_NOTIFY",
    "KIND_REPLY",
    "KIND_REQUEST",
    "MAX_ROUTE",
    "RoutedFrame",
    "SourceRoutes",
    "bodies_of",
    "check_route",
    "joins",
    "with_bodies",
]

#: what a routed frame carries (the ``kind`` element of the ROUTED frame)
KIND_NOTIFY = 0
KIND_REQUEST = 1
KIND_REPLY = 2
KIND_BOUNCE = 3
KIND_CANCEL = 4
#: a request's last reply: the nodes on the way forget the request (_routed_inflight.py)
KIND_LAST_REPLY = 5
KINDS = (KIND_NOTIFY, KIND_REQUEST, KIND_REPLY, KIND_BOUNCE, KIND_CANCEL, KIND_LAST_REPLY)
_REPLIES = (KIND_REPLY, KIND_LAST_REPLY)

#: most nodes a route may name (either list); the hop limit is usually far lower
MAX_ROUTE = 255
#: most stand-in replier feeds (one per key and route) a node keeps for its own
#: routed requests; past it the cache starts over
_MAX_STAND_INS = 4_096
_UNDELIVERABLE = Undeliverable.__type_name__


class RoutedFrame(NamedTuple):
    """A source-routed message as it crosses a link (the ROUTED frame)."""

    kind: int
    #: the nodes still ahead, the receiver first
    route_to: tuple[str, ...]
    #: the nodes crossed, the origin first and the sender last
    route_from: tuple[str, ...]
    type_name: str
    subject: str
    #: the origin's id of the request (REQUEST, REPLY, CANCEL, a request's BOUNCE); else 0
    request_id: int
    #: with a REPLY: how many repliers took the request (the acknowledgement), 0: none with it
    repliers: int
    #: the message as the codec encodes it, never decoded on the way; a run of
    #: notifications on one route and key (NOTIFY): a tuple of them, in order
    body: bytes | tuple[bytes, ...]


def bodies_of(frame: RoutedFrame) -> tuple[bytes, ...]:
    """The messages a frame carries: one, or a run's."""
    body = frame.body
    return (body,) if isinstance(body, bytes) else body


def joins(frame: RoutedFrame, other: RoutedFrame) -> bool:
    """Whether ``other`` may follow ``frame`` in one run: notifications both,
    along the same route, on the same key."""
    return (
        frame.kind == KIND_NOTIFY
        and other.kind == KIND_NOTIFY
        and frame.subject == other.subject
        and frame.route_to == other.route_to
        and frame.route_from == other.route_from
        and frame.type_name == other.type_name
    )


def with_bodies(frame: RoutedFrame, bodies: tuple[bytes, ...]) -> RoutedFrame:
    """``frame`` carrying ``bodies`` (a run when more than one)."""
    return RoutedFrame(
        frame.kind,
        frame.route_to,
        frame.route_from,
        frame.type_name,
        frame.subject,
        frame.request_id,
        frame.repliers,
        bodies if len(bodies) > 1 else bodies[0],
    )


class _Hop:
    """A direct link to a node, as routes see it."""

    __slots__ = ("forward", "max_hops", "party", "send")

    def __init__(
        self, party: RemoteParty, send: Callable[[RoutedFrame], None], forward: bool, max_hops: int
    ) -> None:
        self.party = party
        self.send = send
        self.forward = forward
        self.max_hops = max_hops


class _NamedKey(NamedTuple):
    """A key by its type name alone (a forwarder need not know the class): what
    the permissions read of a key."""

    type_name: str
    subject: str

    def __str__(self) -> str:  # as MessageKey's
        return f"{self.type_name}:{json.dumps(self.subject, ensure_ascii=False)}"


def check_route(route_to: Iterable[str], what: str) -> tuple[str, ...]:
    """``route_to`` as a tuple of node ids; a UsageError naming the fix otherwise."""
    if isinstance(route_to, str):
        raise UsageError(
            f"{what}: route_to must be a list of node ids, found the str {route_to!r}; "
            f"write route_to=[{route_to!r}]"
        )
    route = tuple(route_to)
    for node in route:
        if type(node) is not str or not node or len(node.encode()) > 255:
            raise UsageError(
                f"{what}: route_to holds {node!r}; each entry must be a node id "
                f"(1..255 UTF-8 bytes of text)"
            )
    if len(route) > MAX_ROUTE:
        raise UsageError(f"{what}: route_to names {len(route)} nodes, at most {MAX_ROUTE}")
    return route


class SourceRoutes:
    """A node's source routing: its direct links by peer node id, its own routed
    requests in flight, and the peers' requests its repliers answer.

    Counters (read any time): ``forwarded`` (messages passed on to another node),
    ``bounced`` (messages this node could not pass on and sent back),
    ``delivered`` (routed messages delivered here), ``lost`` (replies, cancels
    and bounces that could not go on, dropped)."""

    def __init__(self, router: Router) -> None:
        self._router = router
        self._lock = threading.Lock()
        self._hops: dict[str, _Hop] = {}
        self._stand_ins: dict[tuple[MessageKey, tuple[str, ...]], ReplyFeed[Any]] = {}
        #: peers' routed requests here: local id -> handle (``router.dispatch`` fills it)
        self._in: dict[int, RequestHandle[Any]] = {}
        #: local id -> [route back, origin's request id, repliers not told yet, origin node]
        self._back: dict[int, list[Any]] = {}
        #: (origin node, origin's request id) -> local id
        self._by_origin: dict[tuple[str, int], int] = {}
        self._reqs: dict[MessageKey, RequestFeed[Any]] = {}
        self._ids = itertools.count(1)
        #: the routes last stamped for a delivery here: (the entry's routes, the sender, stamped)
        self._last_stamped: tuple[Any, Sender | None, Any] = (None, None, None)
        self.forwarded = 0
        self.bounced = 0
        self.delivered = 0
        self.lost = 0
        #: the peers' routed requests this node passed on, until they end
        self.in_flight = InFlight()

    def __str__(self) -> str:
        return "a source route"

    # ---------------------------------------------------------------- links
    def attach(
        self,
        party: RemoteParty,
        send: Callable[[RoutedFrame], None],
        *,
        forward: bool,
        max_hops: int,
    ) -> None:
        """A link to ``party`` (its node id is its name) carries routed frames."""
        with self._lock:
            self._hops[party.name] = _Hop(party, send, forward, max_hops)

    def detach(self, party: RemoteParty, reason: str = "") -> None:
        """The link to ``party`` is gone (the party fails this node's routed
        requests that left over it, as its other requests): the peers' requests
        this node passed on over it bounce, those that came in over it are
        cancelled on, and those its repliers hold for a route back over it are
        cancelled here."""
        with self._lock:
            hop = self._hops.get(party.name)
            if hop is not None and hop.party is party:
                del self._hops[party.name]
            held = [local for local, info in self._back.items() if info[0][:1] == (party.name,)]
            handles = []
            for local in held:
                _back, origin_id, _repliers, origin = self._back.pop(local)
                self._by_origin.pop((origin, origin_id), None)
                handles.append(self._in.pop(local, None))
        for handle in handles:
            if handle is not None:
                handle.cancel()
        lost, orphaned = self.in_flight.dropped(party)
        me = self._router.node_id
        why = f": {reason}" if reason else ""
        for frame, came_party in lost:
            came = self._hops.get(came_party.name)
            self._bounce(
                frame,
                came if came is not None and came.party is came_party else None,
                "link-lost",
                f"node {me} lost its link to node {party.name}, the next one on the route, "
                f"with the request passed on over it{why}",
            )
        for frame, out_party in orphaned:  # nobody left to answer: cancelled on
            out = self._hops.get(out_party.name)
            if out is not None and out.party is out_party:
                cancel = RoutedFrame(KIND_CANCEL, *frame[1:5], frame.request_id, 0, b"")
                try:
                    out.send(cancel)
                except Error:  # that link is closing too
                    pass

    # --------------------------------------------------------- the origin
    def publish(self, sender: Sender, message: Notification, route_to: Iterable[str]) -> int:
        """Send ``message`` along ``route_to`` (checked); 1 when it left this node
        (a bounce comes back later), 0 when it bounced here; with an empty
        route, the local subscribers that took it."""
        route_to = check_route(route_to, "publish()")
        me = self._router.node_id
        if not route_to:
            here = Sender(sender.node, sender.actor, sender.feed, 0, (me,))
            return self._deliver(MessageKey.of(message), [message], here, int(Scope.LOCAL_ONLY))
        frame = RoutedFrame(
            KIND_NOTIFY,
            route_to,
            (me,),
            message.__type_name__,
            message.subject,
            0,
            0,
            codec.encode(message),
        )
        return 1 if self._pass_on(frame, None) else 0

    def request(
        self,
        feed: RequestFeed[Any],
        message: Request,
        route_to: Iterable[str],
        timeout: float | None,
    ) -> RequestHandle[Any]:
        """Send the request along ``route_to``: its replies come back the same way;
        a bounce ends it with an ERROR reply naming the node and the reason.  What
        cannot leave this node raises :class:`~actorbus.RequestError` at once, as
        a request no replier is up for does."""
        route_to = check_route(route_to, "request()")
        router = self._router
        key = MessageKey.of(message)
        if not route_to:  # the last node of the route is this one
            chosen = [r for r in router.choose(feed, message) if r.remote is None]
            if not chosen:
                raise RequestError(
                    f"request() on feed {key} with an empty route_to: no replier on this "
                    f"node is up for the key; name the replier's node in route_to"
                )
            return router.dispatch(feed, message, chosen, timeout)
        hop = self._hops.get(route_to[0])
        why = None
        if hop is None:
            why = f"node {router.node_id} has no link to node {route_to[0]!r}"
        elif len(route_to) > hop.max_hops:
            why = (
                f"the route crosses {len(route_to)} links, over the hop limit of "
                f"{hop.max_hops} (maxHops of the link to {route_to[0]})"
            )
        if why is not None:
            raise RequestError(
                f"request() on feed {key} along route {list(route_to)!r} is undeliverable: {why}"
            )
        with self._lock:
            stand_in = self._stand_ins.get((key, route_to))
            if stand_in is None:
                if len(self._stand_ins) >= _MAX_STAND_INS:
                    self._stand_ins.clear()
                # never advertised (no local requestor sees it): its requests
                # take its route, and its post carries only their cancels
                stand_in = ReplyFeed(
                    router,
                    None,
                    key,
                    Scope.LOCAL_AND_REMOTE,
                    remote=route_to[-1],
                    route=functools.partial(self._send_request, route_to),
                    post=functools.partial(self._send_cancel, route_to),
                    discoverable=False,
                )
                self._stand_ins[key, route_to] = stand_in
        return router.dispatch(feed, message, [stand_in], timeout)

    def _send_request(self, route_to: tuple[str, ...], incoming: IncomingRequest[Any]) -> None:
        message = incoming.request
        frame = self._outgoing(KIND_REQUEST, route_to, incoming, codec.encode(message))
        hop = self._hops.get(route_to[0])
        if hop is not None:
            hop.party.send_routed_request(incoming, frame)
        else:  # the link went down since request() looked
            incoming.reply(
                Reply(
                    message.subject,
                    status=ReplyStatus.ERROR,
                    reason=f"undeliverable at node {self._router.node_id}: it has no link to "
                    f"node {route_to[0]!r}",
                )
            )

    def _send_cancel(
        self, route_to: tuple[str, ...], _deliver: object, incoming: IncomingRequest[Any]
    ) -> None:
        """(a stand-in's post, given its ``_deliver_cancel``) The request was
        cancelled or timed out: a cancel goes along its route."""
        hop = self._hops.get(route_to[0])
        if hop is None or not hop.party.routed_cancelled(incoming):
            return
        self._pass_on(self._outgoing(KIND_CANCEL, route_to, incoming, b""), None)

    def _outgoing(
        self, kind: int, route_to: tuple[str, ...], incoming: IncomingRequest[Any], body: bytes
    ) -> RoutedFrame:
        """The frame that starts ``incoming`` (a request or its cancel) from this
        node along ``route_to``."""
        message = incoming.request
        return RoutedFrame(
            kind,
            route_to,
            (self._router.node_id,),
            message.__type_name__,
            message.subject,
            incoming.id,
            0,
            body,
        )

    # ------------------------------------------------------- passing on
    def _pass_on(self, frame: RoutedFrame, came: _Hop | None) -> bool:
        """Send ``frame`` to the head of its ``route_to``; bounce it (or drop it,
        a reply, cancel or bounce) when that cannot be.  ``came``: the link it
        arrived on (None: it starts here)."""
        me = self._router.node_id
        target = frame.route_to[0]
        hop = self._hops.get(target)
        if hop is None:
            self._bounce(
                frame,
                came,
                "unknown-node",
                f"node {me} has no link to node {target!r}, the next one on the route",
            )
            return False
        if came is not None and not (came.forward and hop.forward):
            off = [node for node, h in ((came.party.name, came), (target, hop)) if not h.forward]
            self._bounce(
                frame,
                came,
                "not-forwarding",
                f"node {me} does not forward between node {came.party.name} and node "
                f"{target}: its link to {' and '.join(off)} has forward off (set forward=true "
                f"on both links to pass messages on)",
            )
            return False
        limit = hop.max_hops if came is None else min(hop.max_hops, came.max_hops)
        crossed = len(frame.route_from)  # links crossed once it reaches target
        if crossed > limit and frame.kind in (KIND_NOTIFY, KIND_REQUEST):
            self._bounce(
                frame,
                came,
                "hop-limit",
                f"node {me} would pass it to node {target} as its link #{crossed}, over the "
                f"hop limit of {limit} (maxHops of the links on the way)",
            )
            return False
        try:
            hop.send(frame)
        except Error as exc:  # the link is closing: as if it were gone
            self._bounce(frame, came, "unknown-node", f"node {me} lost its link to {target}: {exc}")
            return False
        if came is not None:
            if frame.kind == KIND_REQUEST:
                self.in_flight.passed(frame, came.party, hop.party)
            n = 1 if isinstance(frame.body, bytes) else len(frame.body)
            with self._lock:
                self.forwarded += n
            hop.party.routed_forwarded += n
        return True

    def _bounce(self, frame: RoutedFrame, came: _Hop | None, code: str, reason: str) -> None:
        router = self._router
        me = router.node_id
        if frame.kind not in (KIND_NOTIFY, KIND_REQUEST):
            with self._lock:
                self.lost += 1
            router.peer_log.warning(
                (me, "routed lost"),
                "a source-routed {} from node {} is dropped (a reply, cancel or bounce "
                "never bounces): {}",
                ("", "", "reply", "bounce", "cancel", "reply")[frame.kind],
                frame.route_from[0],
                reason,
            )
            return
        if not isinstance(frame.body, bytes):  # a run: each message bounces
            for body in frame.body:
                self._bounce(with_bodies(frame, (body,)), came, code, reason)
            return
        with self._lock:
            self.bounced += 1
        if came is not None:
            came.party.routed_bounced += 1
        bounce = Undeliverable(
            SYSTEM_SUBJECT,
            node=me,
            reason=reason,
            code=code,
            route_to=list(frame.route_to),
            route_from=list(frame.route_from),
            type_name=frame.type_name,
            original_subject=frame.subject,
            body=frame.body,
            request=frame.kind == KIND_REQUEST,
        )
        back = tuple(reversed(frame.route_from[:-1]))
        out = RoutedFrame(
            KIND_BOUNCE,
            back,
            (me,),
            _UNDELIVERABLE,
            SYSTEM_SUBJECT,
            frame.request_id,
            0,
            codec.encode(bounce),
        )
        if back:
            self._pass_on(out, None)
        else:
            self._bounced_here(bounce, frame.request_id)

    # -------------------------------------------------------- arriving
    def received(self, party: RemoteParty, frame: RoutedFrame) -> None:
        """(the link's thread) A routed frame from ``party``: deliver it here, pass
        it on, or bounce it."""
        me = self._router.node_id
        came = self._hops.get(party.name)
        if came is not None and came.party is not party:
            came = None
        if not frame.route_to or frame.route_to[0] != me:
            party.unexpected += 1
            self._router.peer_log.warning(
                (party.name, "unexpected"),
                "remote node {}: sent a source-routed message on {} addressed to {}, not "
                "to this node; dropped and counted (unexpected)",
                party.name,
                _NamedKey(frame.type_name, frame.subject),
                shown(repr(list(frame.route_to))),
            )
            return
        frame = RoutedFrame(
            frame.kind,
            frame.route_to[1:],
            (*frame.route_from, me),
            frame.type_name,
            frame.subject,
            frame.request_id,
            frame.repliers,
            frame.body,
        )
        if frame.kind in (KIND_NOTIFY, KIND_REQUEST):
            action = Action.PUBLISH if frame.kind == KIND_NOTIFY else Action.REQUEST
            why = party.refusal(action, cast(Any, _NamedKey(frame.type_name, frame.subject)))
            if why is not None:
                self._bounce(
                    frame,
                    came,
                    "refused",
                    f"node {me} refuses node {party.name} to {action.value} "
                    f"{_NamedKey(frame.type_name, frame.subject)}: {why}",
                )
                return
        if frame.route_to:
            kind = frame.kind
            if kind > KIND_REPLY and frame.request_id:  # a request ends on the way
                if kind == KIND_CANCEL:
                    out, origin = frame.route_to[0], frame.route_from[0]
                else:  # its last reply or its bounce, back from where it went
                    out, origin = party.name, frame.route_to[-1]
                self.in_flight.ended(out, origin, frame.request_id)
            if came is None:
                came = _Hop(party, _no_send, False, 0)  # a transport that cannot forward
            self._pass_on(frame, came)
            return
        self._arrive(frame, came)

    def _arrive(self, frame: RoutedFrame, came: _Hop | None) -> None:
        """The route ends here: deliver."""
        path = frame.route_from
        sender = Sender(path[0], None, 0, len(path) - 1, path)
        kind = frame.kind
        if kind == KIND_CANCEL:
            with self._lock:
                local = self._by_origin.pop((path[0], frame.request_id), None)
                handle = self._in.pop(local, None) if local is not None else None
                self._back.pop(local, None)  # type: ignore[arg-type]
            if handle is not None:
                handle.cancel()
            return
        cls = lookup_type(frame.type_name)
        family = (Notification, Request, Reply, Undeliverable, None, Reply)[kind]
        assert family is not None
        if cls is None or not issubclass(cls, family):
            if kind in (KIND_NOTIFY, KIND_REQUEST):
                self._bounce(
                    frame,
                    came,
                    "unknown-type",
                    f"node {self._router.node_id} does not know the {family.__name__} type "
                    f"{frame.type_name!r}",
                )
            else:
                self._dropped(frame, f"unknown reply type {frame.type_name!r}")
            return
        try:
            messages = [codec.decode(cls, body) for body in bodies_of(frame)]
        except CodecError as exc:
            self._dropped(frame, f"its body does not decode: {exc}")
            return
        message: Any = messages[0]
        if any(m.subject != frame.subject for m in messages):
            self._dropped(frame, "its body's subject is not the frame's")
            return
        with self._lock:
            self.delivered += len(messages)
        if kind == KIND_NOTIFY:
            self._deliver(MessageKey.of(message), messages, sender, CAT_REMOTE)
        elif kind == KIND_REQUEST:
            self._arrive_request(message, frame, sender)
        elif kind in _REPLIES:
            if came is not None:  # (it came back over the link the request left on)
                came.party.reply(frame.request_id, message, frame.repliers or None, sender)
        else:
            self._bounced_here(message, frame.request_id, came)

    def _dropped(self, frame: RoutedFrame, why: str) -> None:
        with self._lock:
            self.lost += 1
        self._router.peer_log.warning(
            (frame.route_from[0], "routed corrupt"),
            "a source-routed message from node {} on {} is dropped: {}",
            frame.route_from[0],
            _NamedKey(frame.type_name, frame.subject),
            why,
        )

    def _deliver(self, key: MessageKey, messages: list[Any], sender: Sender, cat: int) -> int:
        """To this node's subscribers of ``key`` that category ``cat`` matches, in
        order (a run's tasks queued into each mailbox in one go)."""
        entry = self._router.entries.get(key)
        if entry is None:
            return 0
        source = entry.routes[cat]
        last = self._last_stamped  # a run from one origin along one route: the same
        if last[0] is source and last[1] == sender:
            local, other = last[2]
        else:
            local, other = routes = stamped(source, sender)
            self._last_stamped = (source, sender, routes)
        if len(messages) == 1:
            message = messages[0]
            for put, claim, schedule, mailbox, deliver in local:
                put((deliver, message))
                if claim(0, False):
                    schedule(mailbox)
        else:
            for _put, _claim, _schedule, mailbox, deliver in local:
                mailbox.post_each(deliver, messages)
        for route in other:
            for message in messages:
                route(message)
        return len(local) + len(other)

    def _arrive_request(self, message: Request, frame: RoutedFrame, sender: Sender) -> None:
        router = self._router
        key = MessageKey.of(message)
        with router.lock:
            feed = self._reqs.get(key)
            if feed is None:
                feed = RequestFeed(
                    router, None, key, Scope.LOCAL_AND_REMOTE, remote=self, discoverable=False
                )
                feed.reply_callback(_no_reply)
                feed.subscribe()
                self._reqs[key] = feed
        chosen = router.choose(feed, message)
        back = tuple(reversed(frame.route_from[:-1]))
        if not chosen:
            reply = Reply(
                message.subject,
                status=ReplyStatus.ERROR,
                reason=f"no replier of {key} is up at node {router.node_id}",
            )
            self._send_reply(back, frame.request_id, 1, reply, last=True)
            return
        local = next(self._ids)
        with self._lock:
            self._back[local] = [back, frame.request_id, len(chosen), sender.node]
            self._by_origin[sender.node, frame.request_id] = local
        router.dispatch(
            feed, message, chosen, None, party=cast(Any, self), peer_id=local, origin=sender
        )

    def _proxy_reply(
        self,
        remaining: int,
        reply: Reply,
        handle: RequestHandle[Any],
        sender: Sender | None = None,
    ) -> None:
        """(the destination) A local replier answered a routed request: back along
        its route (the first reply carries how many repliers took it)."""
        local = handle.peer_id
        with self._lock:
            info = self._back.get(local)
            if info is None:
                return
            back, origin_id, repliers, origin = info
            info[2] = 0
            if remaining == 0:
                del self._back[local]
                self._by_origin.pop((origin, origin_id), None)
                self._in.pop(local, None)
        self._send_reply(back, origin_id, repliers, reply, last=remaining == 0)

    def _send_reply(
        self, back: tuple[str, ...], request_id: int, repliers: int, reply: Reply, *, last: bool
    ) -> None:
        frame = RoutedFrame(
            KIND_LAST_REPLY if last else KIND_REPLY,
            back,
            (self._router.node_id,),
            reply.__type_name__,
            reply.subject,
            request_id,
            repliers,
            codec.encode(reply),
        )
        self._pass_on(frame, None)

    def _bounced_here(
        self, bounce: Undeliverable, request_id: int, came: _Hop | None = None
    ) -> None:
        """A bounce reached its origin: published on the system subject; a
        request's ends with an ERROR reply naming the node and the reason."""
        if bounce.request and came is not None:
            # it came back over the link the request left on: one ERROR ends
            # the request's part there, however many repliers took it
            came.party.routed_lost(
                request_id, f"undeliverable at node {bounce.node}: {bounce.reason}"
            )
        publish = self._router.system_publish
        if publish is not None:
            try:
                publish(bounce)
            except Error:  # the bus is closing: nobody is listening
                pass


def _no_send(frame: RoutedFrame) -> None:  # pragma: no cover - never a next hop
    raise UsageError("not a link")


def _no_reply(remaining: int, reply: Reply, handle: RequestHandle[Any]) -> None:
    """A routed request's proxy requestor: replies go back by ``_proxy_reply``."""
