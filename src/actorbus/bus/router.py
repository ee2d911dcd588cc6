"""The bus core: per-key feed tables, feed state, scope matching, request fan-out.

Theory of operation
-------------------
The router keeps one :class:`_Entry` per message key (exact keys, O(1) dict
lookup).  An entry lists the placed feeds of the four roles and, per feed
*category* (local-only, local-and-remote, remote-only, from-remote; see
:mod:`.scope`), three counters:

* ``up_pubs[c]``   advertised publishers of category c that declared UP;
* ``subs_n[c]``    subscribed subscribers of category c;
* ``up_reps[c]``   advertised repliers of category c that declared UP.

A feed's state is a function of those counters and the MATCH table: a
subscriber of category c is UP when ``up_pubs[m] > 0`` for some m matching c, a
publisher when ``subs_n[m] > 0``, a requestor when ``up_reps[m] > 0``.  Every
change (advertise, subscribe, declare, retract, close, a link dropping) updates
the counters under the router lock and re-evaluates the feeds on the *other*
side; a feed whose state differs from what it last reported gets a status task
posted to its owner's mailbox — so callbacks fire only on change, in the order
the changes happened, and never under the owner's feet.

Publishing takes no lock: ``entry.routes[c]`` is an immutable pair of tuples
``(local, other)`` for the subscribers matching category c, replaced (copy on
write, under the lock) whenever a subscriber comes or goes, so a publisher
reads it with one atomic load.  ``local`` holds, per subscriber whose poster is
an actor's mailbox, ``(put, claim, schedule, mailbox, deliver)``: the publish
loop inlines ``Mailbox.post`` with them, which saves a Python call per
delivery.  ``other`` holds the delivery callables of the rest (inboxes, remote
proxies).  Subscribers keep their placement order in both.

Remote peers
------------
A link appears to the router as a :class:`RemoteParty`: the link calls its
*inbound* methods (``advertise``, ``notify``, ``request``, ...) as frames arrive,
and the router calls the link's *outbound* :class:`PartyTransport` methods to
send.  Inside, a party is made of ordinary feeds of the "from remote" category
(proxies) whose callbacks are transport calls, so feed state, scope matching,
conditions and the request accounting are the same code for local and remote
feeds.  Per key, a node tells each peer one aggregated advertisement per role:
"I have remote-capable publishers (repliers) for this key, and at least one is
UP / none is".  The peer answers ``subscribe(key)`` when it has subscribers that
match the proxy.  A transport is anything implementing the protocol — TCP links
today; the JSON federation gateway, multicast and multi-hop routing
plug in here without changing the router.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .._log import logger
from ..errors import RequestError, UsageError
from ._timeouts import RequestTimeouts
from .feeds import (
    Feed,
    IncomingRequest,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    SubscribeFeed,
    _direct,
)
from .message import Message, MessageKey, Reply
from .scope import CAT_REMOTE, MATCH, MATCHING, FeedState, Scope

__all__ = ["PartyTransport", "RemoteParty", "Role", "Router"]

Schedule = Callable[..., Any]


class Role(enum.Enum):
    """Which side of a key a remote advertisement or subscription stands for."""

    PUBLISHER = "publisher"
    REPLIER = "replier"
    SUBSCRIBER = "subscriber"
    REQUESTOR = "requestor"


#: per category: (inlined mailbox posts, other delivery callables); see the module doc.
_Routes = tuple[tuple[tuple[Any, ...], ...], tuple[Callable[[Any], object], ...]]
_NO_ROUTES: _Routes = ((), ())


class _Entry:
    __slots__ = (
        "key",
        "pubs",
        "remote_pub",
        "remote_rep",
        "repliers",
        "requestors",
        "routes",
        "subs",
        "subs_n",
        "up_pubs",
        "up_reps",
    )

    def __init__(self, key: MessageKey) -> None:
        self.key = key
        self.pubs: list[PublishFeed[Any]] = []
        self.subs: list[SubscribeFeed[Any]] = []
        self.repliers: tuple[ReplyFeed[Any], ...] = ()
        self.requestors: list[RequestFeed[Any]] = []
        self.routes: list[_Routes] = [_NO_ROUTES] * 4
        self.up_pubs = [0, 0, 0, 0]
        self.subs_n = [0, 0, 0, 0]
        self.up_reps = [0, 0, 0, 0]
        #: (advertised, up) last told to remote parties, per role
        self.remote_pub = (False, False)
        self.remote_rep = (False, False)

    def empty(self) -> bool:
        return not (self.pubs or self.subs or self.repliers or self.requestors)


def _any(counts: list[int], cats: tuple[int, ...]) -> bool:
    for c in cats:
        if counts[c]:
            return True
    return False


class Router:
    """Routes messages by key between feeds; computes and reports feed state."""

    def __init__(self, schedule: Schedule | None = None) -> None:
        self._lock = threading.RLock()
        self._entries: dict[MessageKey, _Entry] = {}
        self._parties: list[RemoteParty] = []
        self._requests: dict[int, RequestHandle[Any]] = {}
        #: request timeouts (one timer for all; see _timeouts.py), None without a timer
        self._timeouts = RequestTimeouts(self._requests, schedule) if schedule is not None else None
        #: a subject only ``reserved_owner`` may advertise on (system notifications)
        self.reserved_subject: str | None = None
        self.reserved_owner: object = None

    # ------------------------------------------------------------------ entries
    def _entry(self, key: MessageKey) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    entry = _Entry(key)
                    self._entries[key] = entry
        return entry

    def _forget(self, feed: Feed) -> None:
        """Drop an entry that no feed uses any more (keeps memory flat)."""
        with self._lock:
            entry = self._entries.get(feed._key)
            if entry is not None and entry is feed._entry and entry.empty():
                del self._entries[feed._key]

    @property
    def key_count(self) -> int:
        return len(self._entries)

    # ---------------------------------------------------------------- publishers
    def _check_reserved(self, feed: Feed) -> None:
        if feed._key.subject == self.reserved_subject and feed._owner is not self.reserved_owner:
            raise UsageError(
                f"cannot advertise on {feed._key}: the subject {self.reserved_subject!r} is "
                f"reserved for system notifications; subscribe to it, or use another subject"
            )

    def _place_publisher(self, feed: PublishFeed[Any]) -> None:
        self._check_reserved(feed)
        with self._lock:
            entry = self._live_entry(feed)
            entry.pubs.append(feed)
            feed._reported = False
            self._report(feed, _any(entry.subs_n, MATCHING[feed._cat]))
            self._sync_remote_pub(entry)

    def _retract_publisher(self, feed: PublishFeed[Any]) -> None:
        with self._lock:
            entry = feed._entry
            entry.pubs.remove(feed)
            feed._reported = False
            if feed._declared:
                feed._declared = False
                entry.up_pubs[feed._cat] -= 1
                self._refresh_subscribers(entry)
            self._sync_remote_pub(entry)

    def _publisher_state(self, feed: PublishFeed[Any]) -> None:
        with self._lock:
            entry = feed._entry
            entry.up_pubs[feed._cat] += 1 if feed._declared else -1
            self._refresh_subscribers(entry)
            self._sync_remote_pub(entry)

    # --------------------------------------------------------------- subscribers
    def _place_subscriber(self, feed: SubscribeFeed[Any]) -> None:
        with self._lock:
            entry = self._live_entry(feed)
            entry.subs.append(feed)
            entry.subs_n[feed._cat] += 1
            self._add_route(entry, feed)
            feed._reported = False
            self._report(feed, _any(entry.up_pubs, MATCHING[feed._cat]))
            self._refresh_publishers(entry)

    def _retract_subscriber(self, feed: SubscribeFeed[Any]) -> None:
        with self._lock:
            entry = feed._entry
            entry.subs.remove(feed)
            entry.subs_n[feed._cat] -= 1
            feed._reported = False
            self._drop_route(entry, feed)
            self._refresh_publishers(entry)

    # Route tables are replaced, never changed in place (publishers read them
    # without the lock).  Appending keeps placement order, as a rebuild would.
    @staticmethod
    def _add_route(entry: _Entry, feed: SubscribeFeed[Any]) -> None:
        routes = list(entry.routes)
        inline, route, cat = feed._inline, feed._route, feed._cat
        for c in range(4):
            if MATCH[c][cat]:
                local, other = routes[c]
                if inline is not None:
                    routes[c] = ((*local, inline), other)
                elif route is not None:
                    routes[c] = (local, (*other, route))
        entry.routes = routes

    @staticmethod
    def _drop_route(entry: _Entry, feed: SubscribeFeed[Any]) -> None:
        routes = list(entry.routes)
        inline, cat = feed._inline, feed._cat
        for c in range(4):
            if MATCH[c][cat]:
                local, other = routes[c]
                if inline is not None:
                    kept = list(local)
                    kept.remove(
                        inline
                    )  # no two feeds' tuples are equal (their ``deliver`` differs)
                    routes[c] = (tuple(kept), other)
                else:
                    route = feed._route
                    routes[c] = (local, tuple(r for r in other if r is not route))
        entry.routes = routes

    # ------------------------------------------------------------------ repliers
    def _place_replier(self, feed: ReplyFeed[Any]) -> None:
        self._check_reserved(feed)
        with self._lock:
            entry = self._live_entry(feed)
            entry.repliers = (*entry.repliers, feed)
            self._sync_remote_rep(entry)

    def _retract_replier(self, feed: ReplyFeed[Any]) -> None:
        with self._lock:
            entry = feed._entry
            entry.repliers = tuple(r for r in entry.repliers if r is not feed)
            if feed._declared:
                feed._declared = False
                entry.up_reps[feed._cat] -= 1
                self._refresh_requestors(entry)
            self._sync_remote_rep(entry)

    def _replier_state(self, feed: ReplyFeed[Any]) -> None:
        with self._lock:
            entry = feed._entry
            entry.up_reps[feed._cat] += 1 if feed._declared else -1
            self._refresh_requestors(entry)
            self._sync_remote_rep(entry)

    # ---------------------------------------------------------------- requestors
    def _place_requestor(self, feed: RequestFeed[Any]) -> None:
        with self._lock:
            entry = self._live_entry(feed)
            entry.requestors.append(feed)
            feed._reported = False
            self._report(feed, _any(entry.up_reps, MATCHING[feed._cat]))

    def _retract_requestor(self, feed: RequestFeed[Any]) -> None:
        with self._lock:
            feed._entry.requestors.remove(feed)
            feed._reported = False
            mine = [h for h in self._requests.values() if h.feed is feed]
        for handle in mine:
            handle.cancel()

    # --------------------------------------------------------------- state push
    def _live_entry(self, feed: Feed) -> _Entry:
        entry = self._entries.get(feed._key)
        if entry is None or entry is not feed._entry:
            # the entry was forgotten while the feed was retracted: re-attach
            entry = self._entries.setdefault(feed._key, feed._entry)
            feed._entry = entry
        return entry

    @staticmethod
    def _report(feed: Any, up: bool) -> None:
        if up != feed._reported:
            feed._reported = up
            feed._post(feed._fire_status, up)

    def _refresh_subscribers(self, entry: _Entry) -> None:
        counts = entry.up_pubs
        for s in entry.subs:
            self._report(s, _any(counts, MATCHING[s._cat]))

    def _refresh_publishers(self, entry: _Entry) -> None:
        counts = entry.subs_n
        for p in entry.pubs:
            self._report(p, _any(counts, MATCHING[p._cat]))

    def _refresh_requestors(self, entry: _Entry) -> None:
        counts = entry.up_reps
        for r in entry.requestors:
            self._report(r, _any(counts, MATCHING[r._cat]))

    # ------------------------------------------------------------ request/reply
    def _choose(self, feed: RequestFeed[Any], message: Message) -> list[ReplyFeed[Any]]:
        match = MATCH[feed._cat]
        # a loop, not a comprehension: no function call (Python 3.11) for the
        # one or two repliers a key usually has
        chosen = []
        for r in feed._entry.repliers:
            if r._declared and match[r._cat] and (r._condition is None or r._accepts(message)):
                chosen.append(r)
        return chosen

    def _request(
        self, feed: RequestFeed[Any], message: Message, timeout: float | None
    ) -> RequestHandle[Any]:
        match = MATCH[feed._cat]  # _choose(), inline
        chosen = []
        for r in feed._entry.repliers:
            if r._declared and match[r._cat] and (r._condition is None or r._accepts(message)):
                chosen.append(r)
        if not chosen:
            raise RequestError(
                f"request() on feed {feed._key}: no replier is up for this key in scope "
                f"{feed._scope.name} (or every replier's condition refused the request); "
                f"wait for the request feed's status to report UP"
            )
        return self._dispatch(feed, message, chosen, timeout)

    def _dispatch(
        self,
        feed: RequestFeed[Any],
        message: Message,
        chosen: list[ReplyFeed[Any]],
        timeout: float | None,
        *,
        party: RemoteParty | None = None,
        peer_id: int = 0,
    ) -> RequestHandle[Any]:
        """Make the handle and post the request to ``chosen``.  With ``party``, the
        request is the peer's ``peer_id``: the party learns the handle before any
        replier can answer (repliers may answer on other threads before this
        returns)."""
        handle: RequestHandle[Any] = RequestHandle(feed, message)
        incomings = []  # a loop, not a comprehension (see _choose)
        for r in chosen:
            incomings.append(IncomingRequest(handle, r, message))
        handle._active = incomings
        handle._remaining = len(incomings)
        self._requests[handle.id] = handle
        if party is not None:
            party._in[peer_id] = handle
            party._in_ids[handle.id] = peer_id
        if timeout is not None:
            timeouts = self._timeouts
            if timeouts is None:
                raise UsageError("request timeouts need a bus with a timer service")
            timeouts.add(handle, timeout)
        for incoming in incomings:
            incoming.feed._send_request(incoming)
        return handle

    @property
    def outstanding_requests(self) -> int:
        return len(self._requests)

    # ------------------------------------------------------------ remote parties
    def attach(self, name: str, transport: PartyTransport) -> RemoteParty:
        """Add a remote peer; it is told every remote-capable advertisement now and
        every change from then on."""
        party = RemoteParty(self, name, transport)
        with self._lock:
            self._parties.append(party)
            for entry in self._entries.values():
                adv, up = entry.remote_pub
                if adv:
                    transport.send_advertise(entry.key, Role.PUBLISHER, up)
                adv, up = entry.remote_rep
                if adv:
                    transport.send_advertise(entry.key, Role.REPLIER, up)
        return party

    def _sync_remote_pub(self, entry: _Entry) -> None:
        local = [p for p in entry.pubs if p._remote is None and p._scope.remote_capable]
        now = (bool(local), any(p._declared for p in local))
        if now != entry.remote_pub:
            before, entry.remote_pub = entry.remote_pub, now
            for party in self._parties:
                party._tell(entry.key, Role.PUBLISHER, before, now)

    def _sync_remote_rep(self, entry: _Entry) -> None:
        local = [r for r in entry.repliers if r._remote is None and r._scope.remote_capable]
        now = (bool(local), any(r._declared for r in local))
        if now != entry.remote_rep:
            before, entry.remote_rep = entry.remote_rep, now
            for party in self._parties:
                party._tell(entry.key, Role.REPLIER, before, now)

    def _detach(self, party: RemoteParty) -> None:
        with self._lock:
            if party in self._parties:
                self._parties.remove(party)

    # ------------------------------------------------------------------ inspect
    def feeds(self, key: MessageKey) -> dict[str, int]:
        """How many feeds of each role are placed for ``key`` (for tests and tools)."""
        entry = self._entries.get(key)
        if entry is None:
            return {"publishers": 0, "subscribers": 0, "repliers": 0, "requestors": 0}
        return {
            "publishers": len(entry.pubs),
            "subscribers": len(entry.subs),
            "repliers": len(entry.repliers),
            "requestors": len(entry.requestors),
        }


# ======================================================================== parties


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
    def send_request(self, request_id: int, message: Message) -> None: ...
    def send_request_ack(self, request_id: int, taken: int) -> None: ...
    def send_reply(self, request_id: int, reply: Reply) -> None: ...
    def send_cancel(self, request_id: int) -> None: ...


class RemoteParty:
    """A remote peer as the router sees it (inbound side, called by the link).

    Made of proxy feeds of the "from remote" category: a proxy publisher/replier
    per key the peer advertised, a proxy subscriber per key the peer subscribed
    to, and a proxy requestor per key the peer sent requests on."""

    def __init__(self, router: Router, name: str, transport: PartyTransport) -> None:
        self.router = router
        self.name = name
        self.transport = transport
        self._pubs: dict[MessageKey, PublishFeed[Any]] = {}
        self._reps: dict[MessageKey, ReplyFeed[Any]] = {}
        self._subs: dict[MessageKey, SubscribeFeed[Any]] = {}
        #: keyed by MessageKey; looked up with an equal plain (class, subject) tuple
        self._reqs: dict[tuple[type[Message], str], RequestFeed[Any]] = {}
        #: requests we forwarded to the peer: our handle id -> the proxy's incoming
        self._out: dict[int, IncomingRequest[Any]] = {}
        #: requests the peer sent us: peer's id -> our handle, and back
        self._in: dict[int, RequestHandle[Any]] = {}
        self._in_ids: dict[int, int] = {}
        self._attached = True
        #: notifications/requests from the peer on keys it never advertised, dropped
        self.unexpected = 0
        self._logged: set[MessageKey] = set()

    def __repr__(self) -> str:
        return f"<RemoteParty {self.name}>"

    def __str__(self) -> str:
        return self.name

    # --------------------------------------------------- outbound (router -> peer)
    def _tell(
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
        self.transport.send_request(incoming.id, incoming.request)

    def _proxy_cancel(self, incoming: IncomingRequest[Any]) -> None:
        if self._out.pop(incoming.id, None) is not None:
            self.transport.send_cancel(incoming.id)

    def _proxy_reply(self, remaining: int, reply: Reply, handle: RequestHandle[Any]) -> None:
        peer_id = self._in_ids.get(handle.id)
        if peer_id is None:
            return
        self.transport.send_reply(peer_id, reply)
        if remaining == 0:
            self._in.pop(peer_id, None)
            self._in_ids.pop(handle.id, None)

    # ---------------------------------------------------- inbound (peer -> router)
    def advertise(self, key: MessageKey, role: Role, up: bool) -> None:
        """The peer has remote-capable publishers (or repliers) for ``key``."""
        router = self.router
        with router._lock:
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
                    router, None, key, Scope.LOCAL_AND_REMOTE, remote=self, post=_direct
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
        with self.router._lock:
            table: dict[MessageKey, Any] = self._pubs if role is Role.PUBLISHER else self._reps
            feed = table.pop(key, None)
        if feed is not None:
            if isinstance(feed, ReplyFeed):
                self._fail_forwarded(feed, f"remote node {self.name} retracted its repliers")
            feed.close()

    def feed_status(self, key: MessageKey, role: Role, up: bool) -> None:
        """The peer's aggregated publisher (replier) state for ``key`` changed."""
        with self.router._lock:
            table: dict[MessageKey, Any] = self._pubs if role is Role.PUBLISHER else self._reps
            feed = table.get(key)
            if feed is not None:
                feed.update_feed_state(FeedState.UP if up else FeedState.DOWN)

    def subscribe(self, key: MessageKey) -> None:
        """The peer has subscribers matching our publishers of ``key``."""
        router = self.router
        with router._lock:
            if not self._attached or key in self._subs:
                return
            sub: SubscribeFeed[Any] = SubscribeFeed(
                router, None, key, Scope.LOCAL_AND_REMOTE, remote=self, post=_direct
            )
            sub.message_callback(_ignore_message)
            sub._route = self.transport.send_notify
            sub.subscribe()
            self._subs[key] = sub

    def unsubscribe(self, key: MessageKey) -> None:
        with self.router._lock:
            sub = self._subs.pop(key, None)
        if sub is not None:
            sub.close()

    def notify(self, message: Message, key: MessageKey | None = None) -> None:
        """A notification from the peer: deliver to our subscribers that match it.

        ``key`` is ``MessageKey.of(message)`` when the caller has it already (the
        link caches it per wire key); None makes it here."""
        if key is None:
            key = MessageKey.of(message)
        pub = self._pubs.get(key)
        if pub is None or not pub._declared:
            self._unexpected(
                key,
                "sent a notification on {key} without advertising it (or while its feed "
                "is DOWN); dropped and counted (unexpected)",
            )
            return
        local, other = pub._entry.routes[CAT_REMOTE]
        for put, claim, schedule, mailbox, deliver in local:
            put((deliver, message))
            if claim(0, False):
                schedule(mailbox)
        for route in other:
            route(message)

    def notify_run(self, messages: list[Message], key: MessageKey) -> None:
        """Notifications from the peer, all on ``key`` and in arrival order: the same
        as ``notify(m, key)`` for each, with the lookups done once and the run's
        tasks queued into each subscriber's mailbox in one go
        (``Mailbox.post_each``), which is woken once."""
        pub = self._pubs.get(key)
        if pub is None or not pub._declared:
            for message in messages:
                self.notify(message, key)
            return
        local, other = pub._entry.routes[CAT_REMOTE]
        for _put, _claim, _schedule, mailbox, deliver in local:
            mailbox.post_each(deliver, messages)
        for route in other:
            for message in messages:
                route(message)

    def request(self, request_id: int, message: Message) -> None:
        """A request from the peer: ack how many of our repliers took it, then post."""
        router = self.router
        # a plain tuple equals (and hashes as) MessageKey.of(message)
        feed = self._reqs.get((message.__class__, message.subject)) if self._attached else None
        if feed is None:
            key = MessageKey.of(message)
            with router._lock:
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
        chosen = router._choose(feed, message)
        self.transport.send_request_ack(request_id, len(chosen))
        if chosen:
            # the party learns the handle before any replier runs: a reply may
            # come back before _dispatch returns
            router._dispatch(feed, message, chosen, None, party=self, peer_id=request_id)

    def request_ack(self, request_id: int, taken: int) -> None:
        incoming = self._out.get(request_id)
        if incoming is not None:
            incoming.handle._remote_ack(incoming, taken)
            if incoming._final or incoming.cancelled:  # not incoming.is_active
                self._out.pop(request_id, None)

    def reply(self, request_id: int, reply: Reply, repliers: int | None = None) -> None:
        """A reply from the peer to our request; ``repliers`` (not None) is the
        request's acknowledgement, which came with it: handled first, exactly as
        ``request_ack(request_id, repliers)``."""
        incoming = self._out.get(request_id)
        if incoming is not None and repliers is not None:
            incoming.handle._remote_ack(incoming, repliers)
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
            logger.warning(
                "remote node {} answered {} with a {} it does not allow; dropped",
                self.name,
                request_cls.__qualname__,
                type(reply).__qualname__,
            )
            return
        incoming.handle._reply_from(incoming, reply)
        if incoming._final or incoming.cancelled:  # not incoming.is_active
            self._out.pop(request_id, None)

    def cancel(self, request_id: int) -> None:
        handle = self._in.pop(request_id, None)
        if handle is not None:
            self._in_ids.pop(handle.id, None)
            handle.cancel()

    def _unexpected(self, key: MessageKey, text: str) -> None:
        """Count something the peer should not have sent; log it once per key."""
        self.unexpected += 1
        if key not in self._logged:
            self._logged.add(key)
            logger.warning("remote node {}: " + text.replace("{key}", "{}"), self.name, key)

    def _ab_noop(self, event: threading.Event) -> None:
        """Used by in-process test links to flush: sets ``event`` in order."""
        event.set()

    def detach(self, reason: str) -> None:
        """The link is gone: every feed it carried goes away (subscribers see DOWN,
        requests forwarded to the peer end with ERROR, the peer's requests are
        cancelled)."""
        router = self.router
        with router._lock:
            if not self._attached:
                return
            self._attached = False
            pubs, self._pubs = list(self._pubs.values()), {}
            reps, self._reps = list(self._reps.values()), {}
            subs, self._subs = list(self._subs.values()), {}
            reqs, self._reqs = list(self._reqs.values()), {}
            inbound, self._in = list(self._in.values()), {}
            self._in_ids.clear()
        router._detach(self)
        text = f"link to remote node {self.name} lost: {reason}"
        for rep in reps:
            self._fail_forwarded(rep, text)
        for feed in (*pubs, *reps, *subs, *reqs):
            feed.close()
        for handle in inbound:
            handle.cancel()

    def _fail_forwarded(self, rep: ReplyFeed[Any], reason: str) -> None:
        for incoming in [i for i in self._out.values() if i.feed is rep]:
            self._out.pop(incoming.id, None)
            if incoming.is_active:
                incoming.handle._fail_remote(incoming, reason)


def _ignore_message(message: Any, feed: Any) -> None:
    """Proxy subscribers route straight to the transport; this is never reached."""
