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
loop runs the mailbox's post with them inline (``Mailbox.post_parts``), which
saves a Python call per delivery.  ``other`` holds the delivery callables of the rest (inboxes, remote
proxies).  Subscribers keep their placement order in both.

Remote peers
------------
A peer appears to the router as a :class:`~actorbus.bus.party.RemoteParty`,
made by :meth:`Router.attach` for a transport: the seam every transport joins
the bus through (:mod:`actorbus.bus.party`).  The router tells the parties
about each change of a key's aggregated remote-capable advertisement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

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
)
from .message import Message, MessageKey
from .party import PartyTransport, RemoteParty, Role
from .scope import MATCH, MATCHING

__all__ = ["PartyTransport", "RemoteParty", "Role", "Router"]

Schedule = Callable[..., Any]


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
            handle.peer_id = peer_id
            party._in[peer_id] = handle
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
