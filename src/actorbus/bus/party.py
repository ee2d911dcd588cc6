"""The transport seam: how a transport joins the bus.

A transport (TCP links today; anything that carries feeds to another node
tomorrow) meets the bus in exactly two objects, both defined here:

* :class:`PartyTransport` is what the **transport implements**: the ``send_*``
  methods the router calls to tell the peer about this node's feeds (keys,
  wildcard patterns, queue groups) and to send it notifications, requests,
  acknowledgements, replies and cancels (the ``*_from`` ones naming their
  sender).
* :class:`RemoteParty` is what the **transport calls**: ``router.attach(name, transport)``
  returns one per peer; the transport calls its inbound methods (``advertise``, ``retract``,
  ``feed_status``, ``subscribe``, ``unsubscribe``, ``subscribe_pattern``,
  ``unsubscribe_pattern``, ``group``, ``group_notify``, ``notify``, ``notify_run``,
  ``request``, ``request_ack``, ``reply``, ``cancel``; ``routed`` for source routes, after
  ``carry_routes``) as the peer's frames arrive, and ``detach(reason)`` when the peer is gone.
  ``backlogs(keys)`` tells it what holds the peer's undelivered notifications (for input
  back-pressure); ``congested(True/False)`` is how it says its output queue to the peer went
  over its high-water mark or drained (publisher back-pressure: the publishers sending there
  learn it). ``router.attach(name, transport, permissions)`` may hand over the link's
  :class:`~actorbus.bus.permissions.Permissions`: the party checks them itself (below), so
  every transport gets the same authorization. Around a batch of inbound calls made on one
  thread it may call the party's ``hold_deliveries()`` / ``release_deliveries()``, so the
  actors the batch makes runnable are woken once it is done rather than one by one.

Nothing else of the bus is a transport's business: no router internals, no
feeds, no mailboxes, no dispatcher.  Inside, a party is made of ordinary feeds
of the "from remote" category (proxies) whose callbacks are transport calls, so
feed state, scope matching, conditions and the request accounting are the same
code for local and remote feeds.  Per key, a node tells each peer one
aggregated advertisement per role: "I have remote-capable publishers (repliers)
for this key, and at least one is UP / none is".  The peer answers
``subscribe(key)`` when it has subscribers that match the proxy.

Threads: the transport's ``send_*`` methods are called from any thread (publishers',
repliers', the timer thread), sometimes under the router lock, so they must be thread-safe and
must not block. The inbound methods of one party are called by one thread at a time, in the
order the peer sent the frames (the link's I/O thread); they never run actor code, they post
to mailboxes.

**Authorization** (:mod:`actorbus.bus._authorize`): permissions asked once per decision, each
refusal counted, logged and reported; a transport asks the same rule with ``refusal``.

**Logs.**  What the peer can make this module say goes through ``router.peer_log`` (a
:class:`~actorbus._log.RateLimitedLog`: one line per peer and kind per period), text escaped.

``tests/bus`` joins routers through :class:`actorbus.testing.InProcessLink`.  A transport with
``send_route`` takes part in the forwarding tree (bus/spanning.py): it carries ``route(...)``.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UsageError
from ._authorize import Authorization
from ._stamp import Routes, stamped
from ._watch import PatternWatch
from .feeds import (
    IncomingRequest,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    SubscribeFeed,
    _direct,
)
from .message import Message, MessageKey, Reply, ReplyStatus
from .permissions import Action, Permissions
from .routing import AckWaits, forward_fanout, horizon
from .scope import CAT_FORWARD, CAT_REMOTE, FeedState, Scope
from .sender import Sender
from .spanning import LEFT_TREE
from .subjects import Wildcard

if TYPE_CHECKING:
    from .routed import RoutedFrame
    from .router import Router

__all__ = [
    "PartyTransport",
    "PatternWatch",
    "RemoteParty",
    "Role",
]


#: most (key, sender) stamped route tables a party keeps
_MAX_STAMPED = 4096


class Role(enum.Enum):
    """Which side of a key a remote advertisement or subscription stands for."""

    PUBLISHER = "publisher"
    REPLIER = "replier"
    SUBSCRIBER = "subscriber"
    REQUESTOR = "requestor"


class PartyTransport(Protocol):
    """What the router needs from a link to a remote peer (outbound side).

    Every method must be thread-safe and must not block: it is called from
    publishers' threads and sometimes under the router lock.  A link queues the
    frame for its I/O thread (and counts/drops it if the link is down or its
    queue is over its limit)."""

    def send_advertise(self, key: MessageKey, role: Role, up: bool) -> None: ...
    def send_retract(self, key: MessageKey, role: Role) -> None: ...
    def send_feed_status(self, key: MessageKey, role: Role, up: bool) -> None: ...
    def send_subscribe(self, key: MessageKey) -> None: ...
    def send_unsubscribe(self, key: MessageKey) -> None: ...
    def send_notify(self, message: Message) -> None: ...
    def send_notify_from(self, sender: Sender, message: Message) -> None: ...
    def send_request(self, request_id: int, message: Message) -> None: ...
    def send_request_from(self, sender: Sender, request_id: int, message: Message) -> None: ...
    def send_request_ack(self, request_id: int, taken: int) -> None: ...
    def send_reply(self, request_id: int, reply: Reply) -> None: ...
    def send_reply_from(self, sender: Sender, request_id: int, reply: Reply) -> None: ...
    def send_cancel(self, request_id: int) -> None: ...
    def send_subscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None: ...
    def send_unsubscribe_pattern(
        self, message_class: type[Message], wildcard: Wildcard
    ) -> None: ...
    def send_group(self, key: MessageKey, group: str, members: int) -> None: ...
    def send_group_notify(self, group: str, message: Message) -> None: ...


class RemoteParty(Authorization):
    """A remote peer as the router sees it (inbound side, called by the link).

    Made of proxy feeds of the "from remote" category: a proxy publisher/replier
    per key the peer advertised, a proxy subscriber per key the peer subscribed
    to, and a proxy requestor per key the peer sent requests on."""

    def __init__(
        self,
        router: Router,
        name: str,
        transport: PartyTransport,
        permissions: Permissions | None = None,
        *,
        forward: bool = False,
        max_hops: int = 8,
    ) -> None:
        self.router = router
        #: the link's ``maxHops``: the most links a notification from it has crossed
        self.max_hops = max_hops
        #: the category of its proxies: forwarded (bus/routing.py) or from remote
        self.category = CAT_FORWARD if forward else CAT_REMOTE
        #: forwarded requests' acknowledgements being added up (forwarding only)
        self._acks = AckWaits(self) if forward else None
        if forward:
            router.forwarding = True
        #: (forwarding) data messages from the peer passed on to other forwarding
        #: peers (one per peer it went to); notifications from it dropped past
        #: ``max_hops``
        self.forwarded = 0
        self.hop_limited = 0
        self.name = name
        self.transport = transport
        self._pubs: dict[MessageKey, PublishFeed[Any]] = {}
        self._reps: dict[MessageKey, ReplyFeed[Any]] = {}
        self._subs: dict[MessageKey, SubscribeFeed[Any]] = {}
        #: why each proxy subscriber exists: the peer's SUBSCRIBE (a key in
        #: ``_exact``) and each of its patterns that matches the key; the proxy
        #: goes when the last reason does (so a key a pattern and a SUBSCRIBE both
        #: name is sent once)
        self._sub_refs: dict[MessageKey, int] = {}
        self._exact: set[MessageKey] = set()
        self._patterns: dict[tuple[type[Message], Wildcard], PatternWatch] = {}
        #: the peer's queue-group members: a proxy member per (key, group)
        self._members: dict[tuple[MessageKey, str], SubscribeFeed[Any]] = {}
        #: proxy publishers' routes stamped per (key, sender) the peer named
        self._stamped: dict[tuple[MessageKey, Sender], tuple[Any, Routes]] = {}
        self._last_stamped: tuple[Any, ...] = (None, None, None, None)
        #: keyed by MessageKey; looked up with an equal plain (class, subject) tuple
        self._reqs: dict[tuple[type[Message], str], RequestFeed[Any]] = {}
        #: requests we forwarded to the peer: our handle id -> the proxy's incoming
        self._out: dict[int, IncomingRequest[Any]] = {}
        #: requests the peer sent us: the peer's id -> our handle (whose
        #: ``peer_id`` is that id)
        self._in: dict[int, RequestHandle[Any]] = {}
        self._attached = True
        #: ``hold_deliveries() -> bool`` before a batch of inbound calls on one
        #: thread: the actors it makes runnable are woken by
        #: ``release_deliveries()`` (call it in a ``finally`` when hold returned
        #: True; False means an outer caller holds already and releases).
        self.hold_deliveries = router.hold_deliveries
        self.release_deliveries = router.release_deliveries
        #: notifications/requests from the peer on keys it never advertised, dropped
        self.unexpected = 0
        #: the link's rules for this peer; None: the peer may do everything
        self._perm = permissions.for_peer(name) if permissions is not None else None
        #: actions the permissions refused the peer
        self.refused = 0
        #: (action, key text) already reported with AccessRefused
        self._told: set[tuple[Action, str]] = set()
        #: source-routed messages passed on to the peer, and ones from it bounced
        self.routed_forwarded = self.routed_bounced = 0
        self._send_routed: Callable[[RoutedFrame], None] | None = None

    def __repr__(self) -> str:
        return f"<RemoteParty {self.name}>"

    def __str__(self) -> str:
        return self.name

    # --------------------------------------------------- outbound (router -> peer)
    def tell(
        self, key: MessageKey, role: Role, before: tuple[bool, bool], now: tuple[bool, bool]
    ) -> None:
        t = self.transport
        if now[0] and not before[0]:
            t.send_advertise(key, role, now[1])
        elif before[0] and not now[0]:
            t.send_retract(key, role)
        elif now[1] != before[1]:
            t.send_feed_status(key, role, now[1])

    def _proxy_pub_status(self, state: Any, feed: PublishFeed[Any]) -> None:
        # a local subscriber now matches the peer's publisher (or the last left)
        if state:
            self.transport.send_subscribe(feed._key)
        else:
            self.transport.send_unsubscribe(feed._key)

    def _proxy_request(self, incoming: IncomingRequest[Any]) -> None:
        self._out[incoming.id] = incoming
        self.transport.send_request_from(incoming.handle.feed.stamp, incoming.id, incoming.request)

    def _proxy_cancel(self, incoming: IncomingRequest[Any]) -> None:
        if self._out.pop(incoming.id, None) is not None:
            self.transport.send_cancel(incoming.id)

    def _proxy_reply(
        self,
        remaining: int,
        reply: Reply,
        handle: RequestHandle[Any],
        sender: Sender | None = None,
    ) -> None:
        """A reply to the peer's request (called by the handle, see
        ``RequestHandle._pass_on``): nothing once the peer cancelled it or the
        link dropped (it is no longer in ``_in``)."""
        peer_id = handle.peer_id
        if self._in.get(peer_id) is not handle:
            return
        # (a forwarding party first adds up its hops' acknowledgements: its override)
        # (send_reply_now, inline: this runs once per reply)
        if sender is None:
            self.transport.send_reply(peer_id, reply)
        else:
            self.transport.send_reply_from(sender, peer_id, reply)
        if remaining == 0:
            del self._in[peer_id]

    def send_reply_now(
        self, peer_id: int, remaining: int, reply: Reply, sender: Sender | None
    ) -> None:
        if sender is None:
            self.transport.send_reply(peer_id, reply)
        else:
            self.transport.send_reply_from(sender, peer_id, reply)
        if remaining == 0:
            self._in.pop(peer_id, None)

    # ---------------------------------------------------- inbound (peer -> router)
    def advertise(self, key: MessageKey, role: Role, up: bool) -> None:
        """The peer has remote-capable publishers (or repliers) for ``key``."""
        router = self.router
        # (the peer's discovery replier, on the reserved subject, answers only
        # our own questions: it needs no permission)
        if (
            self._perm is not None
            and key.subject != router.reserved_subject
            and not self._permits(Action.PUBLISH if role is Role.PUBLISHER else Action.REPLY, key)
        ):
            return
        with router.lock:
            if not self._attached:
                return
            if role is Role.PUBLISHER:
                if key in self._pubs:
                    self.feed_status(key, role, up)
                    return
                pub: PublishFeed[Any] = PublishFeed(
                    router, None, key, Scope.LOCAL_AND_REMOTE, remote=self, post=_direct
                )
                pub.status_callback(self._proxy_pub_status)
                pub.advertise()
                self._pubs[key] = pub
                if up:
                    pub.update_feed_state(FeedState.UP)
            elif role is Role.REPLIER:
                if key in self._reps:
                    self.feed_status(key, role, up)
                    return
                rep: ReplyFeed[Any] = ReplyFeed(
                    router,
                    None,
                    key,
                    Scope.LOCAL_AND_REMOTE,
                    remote=self,
                    post=_direct,
                    route=self._proxy_request,
                )
                rep.request_callback(self._proxy_request)
                rep.cancel_callback(self._proxy_cancel)
                rep.advertise()
                self._reps[key] = rep
                if up:
                    rep.update_feed_state(FeedState.UP)
            else:
                raise UsageError(f"advertise() takes PUBLISHER or REPLIER, found {role}")

    def retract(self, key: MessageKey, role: Role) -> None:
        """The peer no longer advertises ``key`` for ``role``."""
        with self.router.lock:
            table: dict[MessageKey, Any] = self._pubs if role is Role.PUBLISHER else self._reps
            feed = table.pop(key, None)
        if feed is not None:
            if isinstance(feed, ReplyFeed):
                self._fail_forwarded(feed, f"remote node {self.name} retracted its repliers")
            feed.close()

    def feed_status(self, key: MessageKey, role: Role, up: bool) -> None:
        """The peer's aggregated publisher (replier) state for ``key`` changed."""
        with self.router.lock:
            table: dict[MessageKey, Any] = self._pubs if role is Role.PUBLISHER else self._reps
            feed = table.get(key)
            if feed is not None:
                feed.update_feed_state(FeedState.UP if up else FeedState.DOWN)

    def subscribe(self, key: MessageKey) -> None:
        """The peer has subscribers matching our publishers of ``key``."""
        if self._perm is not None and not self._permits(Action.SUBSCRIBE, key):
            return
        with self.router.lock:
            if not self._attached or key in self._exact:
                return
            self._exact.add(key)
            self._ref_sub(key)

    def unsubscribe(self, key: MessageKey) -> None:
        with self.router.lock:
            if key not in self._exact:
                return
            self._exact.discard(key)
            sub = self._unref_sub(key)
        if sub is not None:
            sub.close()

    def _ref_sub(self, key: MessageKey) -> None:
        """(under the lock) One more reason for a proxy subscriber of ``key``."""
        n = self._sub_refs.get(key, 0)
        self._sub_refs[key] = n + 1
        if n:
            return
        # the proxy's route is the transport itself: a publisher here sends
        # straight to the peer, no callback in between
        sub: SubscribeFeed[Any] = SubscribeFeed(
            self.router,
            None,
            key,
            Scope.LOCAL_AND_REMOTE,
            remote=self,
            post=_direct,
            route=self.transport.send_notify,
        )
        sub.message_callback(_ignore_message)
        sub.subscribe()
        self._subs[key] = sub

    def _unref_sub(self, key: MessageKey) -> SubscribeFeed[Any] | None:
        """(under the lock) One reason fewer; the proxy to close when none is left."""
        n = self._sub_refs.get(key, 0) - 1
        if n > 0:
            self._sub_refs[key] = n
            return None
        self._sub_refs.pop(key, None)
        return self._subs.pop(key, None)

    def _pattern_only(self, key: MessageKey) -> bool:
        """True when our proxy subscriber of ``key`` exists for the peer's
        patterns alone (no SUBSCRIBE of the peer names the key)."""
        return key not in self._exact

    def _release(self, key: MessageKey) -> None:
        """(under the lock) The router drops ``key``'s entry, which only our
        patterns' proxy kept: forget it; a pattern makes it again with the key."""
        for watch in self._patterns.values():
            watch.keys.discard(key)
        self._sub_refs.pop(key, None)
        self._subs.pop(key, None)

    def subscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        """The peer has wildcard subscribers: every key of ``message_class`` the
        pattern matches, now or later, is sent to the peer (once, however many
        of its patterns and subscriptions name it)."""
        with self.router.lock:
            if not self._attached or (message_class, wildcard) in self._patterns:
                return
            watch = PatternWatch(self, message_class, wildcard)
            self._patterns[message_class, wildcard] = watch
            self.router.watch(message_class, wildcard, watch)

    def unsubscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        closing = []
        with self.router.lock:
            watch = self._patterns.pop((message_class, wildcard), None)
            if watch is None:
                return
            self.router.unwatch(message_class, wildcard, watch)
            for key in watch.keys:
                sub = self._unref_sub(key)
                if sub is not None:
                    closing.append(sub)
        for sub in closing:
            sub.close()

    def group(self, key: MessageKey, group: str, members: int) -> None:
        """The peer has ``members`` members of queue group ``group`` on ``key``
        (0: none left).  Each stands for one turn in the group's rotation here."""
        router = self.router
        if members > 0 and self._perm is not None and not self._permits(Action.SUBSCRIBE, key):
            return
        old = None
        with router.lock:
            if not self._attached:
                return
            old = self._members.pop((key, group), None)
            if members > 0:
                member: SubscribeFeed[Any] = SubscribeFeed(
                    router,
                    None,
                    key,
                    Scope.LOCAL_AND_REMOTE,
                    remote=self,
                    post=_direct,
                    route=functools.partial(self.transport.send_group_notify, group),
                    queue=group,
                    weight=members,
                )
                member.message_callback(_ignore_message)
                member.subscribe()
                self._members[key, group] = member
            if old is not None:
                old.close()

    def group_notify(
        self,
        group: str,
        message: Message,
        key: MessageKey | None = None,
        sender: Sender | None = None,
    ) -> None:
        """A notification the peer's publisher chose this node's ``group`` for:
        one local member of the group gets it (``sender`` as for notify)."""
        if key is None:
            key = MessageKey.of(message)
        pub = self._advertised(key, "a queue-group notification")
        if pub is None:
            return
        if not self.router.group_notify(key, group, message, sender or pub.stamp, self):
            self._unexpected(
                key,
                f"sent a notification on {{key}} for queue group {group!r}, which has no "
                f"member here; dropped and counted (unexpected)",
            )

    def _advertised(self, key: MessageKey, what: str) -> PublishFeed[Any] | None:
        """The peer's proxy publisher of ``key`` if it advertised the key and its
        feed is UP; else None, and ``what`` it sent is counted unexpected."""
        pub = self._pubs.get(key)
        if pub is None or not pub.declared:
            self._unexpected(
                key,
                f"sent {what} on {{key}} without advertising it (or while its feed is "
                f"DOWN); dropped and counted (unexpected)",
            )
            return None
        return pub

    def notify(
        self, message: Message, key: MessageKey | None = None, sender: Sender | None = None
    ) -> None:
        """A notification from the peer: deliver to our subscribers that match it.

        ``key`` is ``MessageKey.of(message)`` when the caller has it already (the
        link caches it per wire key); None makes it here.  ``sender``: who
        published it on the peer, when the transport says (else the subscribers
        see the peer's node, one hop away)."""
        if key is None:
            key = MessageKey.of(message)
        pub = self._advertised(key, "a notification")
        if pub is None or (self._acks is not None and not self._passes(pub, sender, 1)):
            return
        if sender is None:
            pub.publish(message)  # the proxy publisher: the bus's one publish loop
            return
        local, other = self._routes_as(pub, sender)  # the same loop, stamped
        for put, claim, schedule, mailbox, deliver in local:
            put((deliver, message))
            if claim(0, False):
                schedule(mailbox)
        for route in other:
            route(message)

    def _routes_as(self, pub: PublishFeed[Any], sender: Sender) -> Routes:
        """The proxy publisher's routes stamped with ``sender`` (cached per key
        and sender until the key's routes change; the cache is bounded, a peer
        naming ever new senders only makes it start over)."""
        source = pub.entry.routes
        last = self._last_stamped  # the run before was most likely the same
        if last[0] is pub and last[1] is sender and last[2] is source:
            return last[3]  # type: ignore[no-any-return]
        cached = self._stamped.get((pub._key, sender))
        if cached is not None and cached[0] is source:
            self._last_stamped = (pub, sender, source, cached[1])
            return cached[1]
        routes = stamped(horizon(source[pub.cat], pub), sender)
        if len(self._stamped) >= _MAX_STAMPED:
            self._stamped.clear()
        self._stamped[pub._key, sender] = (source, routes)
        self._last_stamped = (pub, sender, source, routes)
        return routes

    def notify_run(
        self, messages: list[Message], key: MessageKey, sender: Sender | None = None
    ) -> None:
        """Notifications from the peer, all on ``key`` and in arrival order: the same
        as ``notify(m, key, sender)`` for each, with the lookups done once and the
        run's tasks queued into each subscriber's mailbox in one go
        (``Mailbox.post_each``), which is woken once."""
        pub = self._pubs.get(key)
        if pub is None or not pub.declared:
            for message in messages:
                self.notify(message, key)
            return
        if self._acks is not None and not self._passes(pub, sender, len(messages)):
            return
        local, other = pub.routes if sender is None else self._routes_as(pub, sender)
        for _put, _claim, _schedule, mailbox, deliver in local:
            mailbox.post_each(deliver, messages)
        for route in other:
            for message in messages:
                route(message)

    def _passes(self, pub: PublishFeed[Any], sender: Sender | None, n: int) -> bool:
        """(a forwarding party) False for ``n`` notifications past the link's
        ``max_hops`` (dropped, counted); else counts those passed on."""
        if sender is not None and sender.hops > self.max_hops:
            self.hop_limited += n
            return False
        self.forwarded += n * forward_fanout(pub.routes[1])
        return True

    def congested(self, congested: bool) -> None:
        """The transport's output queue to the peer went over its high-water mark
        (True) or drained below its low-water mark (False): the publishers whose
        notifications go to the peer learn it (``PublishFeed.congested``,
        ``on_congestion``).  Call it on change only, from any one thread."""
        self.router.set_congestion(self, congested)

    def backlogs(self, keys: set[MessageKey]) -> list[Any]:
        """What holds the peer's undelivered notifications on ``keys`` here: the
        mailboxes (and inboxes) of the subscribers they go to — anything with a
        ``depth`` — for a transport's input back-pressure."""
        boxes: list[Any] = []
        for key in tuple(keys):
            feed = self._pubs.get(key)
            if feed is None:
                continue
            local, other = horizon(feed.entry.routes[feed.cat], feed)
            boxes.extend(route[3] for route in local)
            for route in other:  # feeds of no actor: an Inbox's is watched too
                backlog = getattr(getattr(route, "__self__", None), "_backlog", None)
                if backlog is not None:
                    boxes.append(backlog)
        return boxes

    def request(self, request_id: int, message: Message, sender: Sender | None = None) -> None:
        """A request from the peer: ack how many of our repliers took it, then post
        (``sender``: its requestor on the peer, when the transport says)."""
        router = self.router
        # a plain tuple equals (and hashes as) MessageKey.of(message)
        feed = self._reqs.get((message.__class__, message.subject)) if self._attached else None
        if feed is None:
            key = MessageKey.of(message)
            if self._perm is not None and not self._permits(Action.REQUEST, key):
                self.transport.send_request_ack(request_id, 0)  # no replier took it
                return
            with router.lock:
                if not self._attached:
                    return
                feed = self._reqs.get(key)
                if feed is None:
                    feed = RequestFeed(
                        router, None, key, Scope.LOCAL_AND_REMOTE, remote=self, post=_direct
                    )
                    feed.reply_callback(self._proxy_reply)
                    feed.subscribe()
                    self._reqs[key] = feed
        chosen = router.choose(feed, message)
        if self._acks is None or not self._hops_ack(request_id, chosen):
            self.transport.send_request_ack(request_id, len(chosen))
        if chosen:
            # the party learns the handle before any replier runs: a reply may
            # come back before dispatch returns
            router.dispatch(
                feed, message, chosen, None, party=self, peer_id=request_id, origin=sender
            )

    def _hops_ack(self, request_id: int, chosen: Any) -> bool:
        """(forwarding) True when the request went on to hops whose acks add up first."""
        hops = sum(1 for r in chosen if r.cat == CAT_FORWARD)
        if hops:
            self.forwarded += hops
            self._acks.start(request_id, len(chosen) - hops, hops)  # type: ignore[union-attr]
        return bool(hops)

    def request_ack(self, request_id: int, taken: int) -> None:
        incoming = self._out.get(request_id)
        if incoming is not None:
            if self.router.forwarding:
                _hop_acked(incoming, taken)
            incoming.handle._remote_ack(incoming, taken)
            if incoming._final or incoming.cancelled:  # not incoming.is_active
                self._out.pop(request_id, None)

    def reply(
        self,
        request_id: int,
        reply: Reply,
        repliers: int | None = None,
        sender: Sender | None = None,
    ) -> None:
        """A reply from the peer to our request; ``repliers`` (not None) is the
        request's acknowledgement, which came with it: handled first, exactly as
        ``request_ack(request_id, repliers)``.  ``sender``: its replier on the
        peer, when the transport says."""
        incoming = self._out.get(request_id)
        if incoming is None:
            self._unexpected(
                MessageKey.of(reply),
                "sent a reply {key} for request #"
                f"{request_id}, which is not outstanding (finished, cancelled or never "
                "sent); dropped and counted (unexpected)",
            )
            return
        request_cls = type(incoming.request)
        if type(reply) is not Reply and not request_cls.allows_reply(type(reply)):
            self.unexpected += 1
            self.router.peer_log.warning(
                (self.name, "reply type"),
                "remote node {} answered {} with a {} it does not allow; dropped and "
                "counted (unexpected)",
                self.name,
                request_cls.__qualname__,
                type(reply).__qualname__,
            )
            if repliers is not None:
                if self.router.forwarding:
                    _hop_acked(incoming, repliers)
                incoming.handle._remote_ack(incoming, repliers)
            return
        if repliers is None:
            incoming.handle._reply_from(incoming, reply, sender)
        else:
            if self.router.forwarding:
                _hop_acked(incoming, repliers)
            incoming.handle._remote_reply(incoming, reply, repliers, sender)
        if incoming._final or incoming.cancelled:  # not incoming.is_active
            self._out.pop(request_id, None)

    def cancel(self, request_id: int) -> None:
        if self._acks is not None:
            self._acks.forget(request_id)
        handle = self._in.pop(request_id, None)
        if handle is not None:
            handle.cancel()

    # ------------------------------------------------------------ source routes
    def carry_routes(self, send: Callable[[RoutedFrame], None], **link: Any) -> None:
        """The transport carries source routes with ``send`` (bus/routed.py;
        ``link``: its ``forward`` and ``max_hops`` settings)."""
        self._send_routed = send
        self.router.source_routes.attach(self, send, **link)

    def routed(self, frame: RoutedFrame) -> None:
        """A source-routed frame from the peer: delivered here, passed on or bounced."""
        self.router.source_routes.received(self, frame)

    def send_routed_request(self, incoming: IncomingRequest[Any], frame: RoutedFrame) -> None:
        """This node's routed request leaves over this link: its replies and its
        bounce come back here (:meth:`reply`), and it fails if the link drops."""
        self._out[incoming.id] = incoming
        send = self._send_routed
        if send is not None:
            send(frame)
        else:
            why = f"link to remote node {self.name} lost before the request left"
            self.reply(incoming.id, Reply(frame.subject, status=ReplyStatus.ERROR, reason=why), 1)

    def routed_cancelled(self, incoming: IncomingRequest[Any]) -> bool:
        """(bus/routed.py) Forget a cancelled or timed-out routed request; True if outstanding."""
        return self._out.pop(incoming.id, None) is not None

    def routed_lost(self, request_id: int, reason: str) -> None:
        """(bus/routed.py) A routed request that left here bounced: one ERROR ends it."""
        incoming = self._out.pop(request_id, None)
        if incoming is not None and incoming.is_active:
            incoming.handle._fail_remote(incoming, reason)

    def _unexpected(self, key: MessageKey, text: str) -> None:
        """Count something the peer should not have sent; log it at most once per
        period for this peer (with how many more like it)."""
        self.unexpected += 1
        self.router.peer_log.warning(
            (self.name, "unexpected"),
            "remote node {}: " + text.replace("{key}", "{}"),
            self.name,
            key,
        )

    def route(self, origin: str, seq: int, peers: Any, hops: int, flags: int) -> None:
        """A link-state announcement of the forwarding tree (bus/spanning.py)."""
        self.router.spanning.heard(self, origin, seq, tuple(peers), hops=hops, flags=flags)

    def resume(self) -> None:
        """(the forwarding tree) The link carries feeds again: told all anew."""
        self._attached = True
        self.router.reattach(self)

    def detach(self, reason: str) -> None:
        """The link is gone: every feed it carried goes away (subscribers see DOWN,
        requests forwarded to the peer end with ERROR, the peer's requests are
        cancelled)."""
        self.router.spanning.gone(self)
        text = f"link to remote node {self.name} lost: {reason}"
        self.suspend(text)
        # source routes go over the link itself, tree or not: they end with it
        self._send_routed = None
        self.router.source_routes.detach(self, reason)
        self._fail_forwarded(None, text)  # source-routed requests that left here

    def suspend(self, reason: str) -> None:
        """The link stops carrying feeds, as :meth:`detach` says (``reason``:
        the text requests end with); the forwarding tree's, or the link's end."""
        router = self.router
        with router.lock:
            if not self._attached:
                return
            self._attached = False
            pubs, self._pubs = list(self._pubs.values()), {}
            reps, self._reps = list(self._reps.values()), {}
            subs, self._subs = list(self._subs.values()), {}
            subs.extend(self._members.values())
            self._members = {}
            self._sub_refs, self._exact = {}, set()
            for (cls, wild), watch in self._patterns.items():
                router.unwatch(cls, wild, watch)
            self._patterns = {}
            reqs, self._reqs = list(self._reqs.values()), {}
            inbound, self._in = list(self._in.values()), {}
        router.detach(self)
        if reason == LEFT_TREE:
            reason = f"the link to remote node {self.name} {reason}"
        for rep in reps:
            self._fail_forwarded(rep, reason)
        for feed in (*pubs, *reps, *subs, *reqs):
            feed.close()
        for handle in inbound:
            handle.cancel()

    def _fail_forwarded(self, rep: ReplyFeed[Any] | None, reason: str) -> None:  # None: all
        for incoming in [i for i in self._out.values() if rep is None or i.feed is rep]:
            self._out.pop(incoming.id, None)
            _hop_acked(incoming, 1)  # its one ERROR
            if incoming.is_active:
                incoming.handle._fail_remote(incoming, reason)


def _hop_acked(incoming: IncomingRequest[Any], taken: int) -> None:
    """A forwarding hop acknowledged a request forwarded here from another
    forwarding party: that party adds it to its own acknowledgement."""
    down = incoming.handle.feed.remote
    if isinstance(down, RemoteParty) and down._acks is not None:
        down._acks.acked(incoming, taken)


def _ignore_message(message: Any, feed: Any) -> None:
    """Proxy subscribers route straight to the transport; this is never reached."""
