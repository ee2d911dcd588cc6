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
about each change of a key's aggregated remote-capable advertisement; a
forwarding party (:mod:`actorbus.bus.routing`) its own aggregate.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from .._log import RateLimitedLog
from ..errors import RequestError, UsageError
from ._congestion import Congestion
from ._forwarding_party import ForwardingParty
from ._stamp import restamp as _restamp
from ._stamp import stamped as _stamped
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
from .history import RequestLatencies
from .message import Message, MessageKey, Notification
from .party import PartyTransport, PatternWatch, RemoteParty, Role
from .permissions import Permissions
from .queues import QueueTotals, _Group
from .routed import SourceRoutes
from .routing import forward_publisher_up, horizon, sync_remote, tell_group, tell_new_party
from .scope import CAT_FORWARD, CAT_REMOTE, CATEGORIES, MATCH, MATCHING
from .sender import Sender
from .spanning import Spanning
from .subjects import Wildcard, WildcardIndex

#: Lines a remote peer can make the bus log go out at most once per this many
#: seconds per peer and kind (the rest are counted and said with the next).
PEER_LOG_PERIOD = 10.0

__all__ = ["PartyTransport", "RemoteParty", "Role", "Router"]

Schedule = Callable[..., Any]


#: per category: (inlined mailbox posts, other delivery callables); see the module doc.
_Routes = tuple[tuple[tuple[Any, ...], ...], tuple[Callable[[Any], object], ...]]
_NO_ROUTES: _Routes = ((), ())


class _Entry:
    __slots__ = (
        "fwd_pub",
        "fwd_rep",
        "groups",
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
        "xsubs_n",
    )

    def __init__(self, key: MessageKey) -> None:
        self.key = key
        self.pubs: list[PublishFeed[Any]] = []
        self.subs: list[SubscribeFeed[Any]] = []
        self.repliers: tuple[ReplyFeed[Any], ...] = ()
        self.requestors: list[RequestFeed[Any]] = []
        self.routes: list[_Routes] = [_NO_ROUTES] * CATEGORIES
        self.up_pubs = [0] * CATEGORIES
        self.subs_n = [0] * CATEGORIES
        #: plain subscribers only (no wildcard, no queue member): what a proxy
        #: publisher tells its peer with SUBSCRIBE (wildcards and groups cross as
        #: patterns and group counts instead)
        self.xsubs_n = [0] * CATEGORIES
        self.up_reps = [0] * CATEGORIES
        #: queue groups on this key, by name (:mod:`actorbus.bus.queues`)
        self.groups: dict[str, _Group] = {}
        #: (advertised, up) last told to remote parties, per role
        self.remote_pub = (False, False)
        self.remote_rep = (False, False)
        #: the same, per forwarding party (bus/routing.py), when not (False, False)
        self.fwd_pub: dict[RemoteParty, tuple[bool, bool]] = {}
        self.fwd_rep: dict[RemoteParty, tuple[bool, bool]] = {}

    def empty(self) -> bool:
        """No feed needs the entry: what is left only follows patterns (a
        wildcard subscription, a peer's proxy made for its patterns alone) and
        comes back by itself if the key is used again.  Queue members are
        subscribers; a group with none does not keep its key."""
        if self.pubs or self.repliers or self.requestors:
            return False
        return all(_loose(s) for s in self.subs)


def _loose(sub: SubscribeFeed[Any]) -> bool:
    """True for a subscriber that only follows patterns (see _Entry.empty)."""
    if sub.wild is not None:
        return True
    party = sub.remote
    return isinstance(party, RemoteParty) and sub.group is None and party._pattern_only(sub.key)


def _any(counts: list[int], cats: tuple[int, ...]) -> bool:
    for c in cats:
        if counts[c]:
            return True
    return False


class Router(Congestion):
    """Routes messages by key between feeds; computes and reports feed state.

    **Shared within the bus core** (its internal interface, named without a
    leading underscore; users meet the router only through a ``Bus``): state
    written only here, under ``lock`` (an RLock) — ``entries`` (key -> its
    ``_Entry``), ``requests`` (id -> outstanding handle; the timeouts read it),
    ``wild`` (class -> wildcard index) — and ``feed_ids`` (the feeds draw ids,
    lock-free); the feeds' calls (``place_*`` / ``retract_*`` per role,
    ``publisher_state``, ``replier_state``, ``entry_for``, ``loose_entry``,
    ``forget``, ``request`` / ``choose`` / ``dispatch``); a party's calls
    (``detach``, ``watch`` / ``unwatch``, ``group_notify``, ``set_congestion``).
    """

    def __init__(
        self,
        schedule: Schedule | None = None,
        *,
        hold_deliveries: Callable[[], bool] = lambda: False,
        release_deliveries: Callable[[], None] = lambda: None,
        feed_changed: Callable[[MessageKey, bool], object] = lambda key, up: None,
    ) -> None:
        """``schedule``: runs request timeouts (None: requests never time out).
        ``hold_deliveries() -> bool`` / ``release_deliveries()``: how a batch of a
        transport's inbound calls holds the wake-ups of the actors it makes
        runnable, handed in by whoever assembles the bus (the node gives the
        actors layer's ``hold_wakes`` / ``release_wakes``; the bus core does not
        know dispatchers).  Every party, and a transport before it has one,
        reads them here.  ``feed_changed(key, up)``: told, under the lock, whether
        a key has an UP publisher after each change of its publishers (bus/history.py)."""
        self.hold_deliveries = hold_deliveries
        self.feed_changed = feed_changed
        #: set: requests are timed from their handle's making to their end (bus/history.py)
        self.request_latencies: RequestLatencies | None = None
        self.release_deliveries = release_deliveries
        self.lock = threading.RLock()
        self.entries: dict[MessageKey, _Entry] = {}
        self._parties: list[RemoteParty] = []
        #: how many of them forward (bus/routing.py)
        self._forwarding = 0
        #: True once a forwarding party was attached: replies look for hops to add up
        self.forwarding = False
        #: this node's share of the forwarding tree (bus/spanning.py)
        self.spanning = Spanning(self)
        self.requests: dict[int, RequestHandle[Any]] = {}
        #: request timeouts (one timer for all; see _timeouts.py), None without a timer
        self._timeouts = RequestTimeouts(self.requests, schedule) if schedule is not None else None
        #: a subject only ``reserved_owner`` may advertise on (system notifications)
        self.reserved_subject: str | None = None
        self.reserved_owner: object = None
        #: wildcard subscriptions and remote parties' patterns, per message class
        #: (values: a wildcard SubscribeFeed, or a party's :class:`PatternWatch`)
        self.wild: dict[type[Message], WildcardIndex[Any]] = {}
        #: remote-capable local wildcard subscriptions per (class, pattern): what
        #: remote parties are told with send_subscribe_pattern
        self._patterns: dict[tuple[type[Message], Wildcard], int] = {}
        #: every queue group's drop and re-offer counts
        self.queue_totals = QueueTotals()
        #: what remote peers can make the bus log (bus/party.py), rate-limited per peer
        self.peer_log = RateLimitedLog(PEER_LOG_PERIOD)
        #: publishes a system notification (AccessRefused); the node installs it
        self.system_publish: Callable[[Notification], object] | None = None
        #: this node's id, named by the Sender of every message sent here (node sets it)
        self.node_id = ""
        #: feed ids, unique per bus
        self.feed_ids = itertools.count(1)
        #: transports whose parties said their output queue is congested (by id: a
        #: transport need not be hashable), and how many publishers are marked
        self._congested: dict[int, Any] = {}
        self._congested_pubs = 0
        #: routed messages this node sends, passes on or delivers (bus/routed.py)
        self.source_routes = SourceRoutes(self)

    # ------------------------------------------------------------------ entries
    def entry_for(self, key: MessageKey) -> _Entry:
        entry = self.entries.get(key)
        if entry is None:
            with self.lock:
                entry = self.entries.get(key)
                if entry is None:
                    entry = self._register(_Entry(key))
        return entry

    def _register(self, entry: _Entry) -> _Entry:
        """Put ``entry`` in the table and join the wildcards that match its key
        (under the lock).  Matching costs a trie walk, paid once per new key:
        the publish path never looks at wildcards."""
        key = entry.key
        self.entries[key] = entry
        index = self.wild.get(key.message_class)
        if index:
            for value in index.match(key.subject):
                if isinstance(value, SubscribeFeed):
                    self._join(entry, value)
                else:
                    value.matched(key)
        return entry

    @staticmethod
    def loose_entry(key: MessageKey) -> _Entry:
        """An entry no key leads to (a wildcard subscription's own)."""
        return _Entry(key)

    def forget(self, feed: Feed) -> None:
        """Drop an entry that no feed uses any more (keeps memory flat)."""
        with self.lock:
            entry = self.entries.get(feed.key)
            if entry is not None and entry is feed.entry and entry.empty():
                self._drop_entry(entry)

    def _drop_entry(self, entry: _Entry) -> None:
        del self.entries[entry.key]
        for group in entry.groups.values():
            group.discard()
        for s in list(entry.subs):  # loose ones only (the entry is empty)
            if s.wild is not None:
                self._unjoin(entry, s)
            else:  # a peer's proxy for its patterns: made again with the key
                party = s.remote
                assert isinstance(party, RemoteParty)
                party._release(entry.key)
                s.close()

    @property
    def key_count(self) -> int:
        return len(self.entries)

    # ---------------------------------------------------------------- publishers
    def _check_reserved(self, feed: Feed) -> None:
        # A peer's replier there is its node's own (its discovery replier): that
        # node's router refused any other owner.  A peer's publishers are refused:
        # system notifications never cross a link.
        if feed.key.subject == self.reserved_subject and feed.owner is not self.reserved_owner:
            if feed.remote is not None and isinstance(feed, ReplyFeed):
                return
            raise UsageError(
                f"cannot advertise on {feed.key}: the subject {self.reserved_subject!r} is "
                f"reserved for system notifications; subscribe to it, or use another subject"
            )

    def place_publisher(self, feed: PublishFeed[Any]) -> None:
        self._check_reserved(feed)
        with self.lock:
            entry = self._live_entry(feed)
            entry.pubs.append(feed)
            feed.routes = _stamped(horizon(entry.routes[feed.cat], feed), feed.stamp)
            feed.reported = False
            if self._congested:
                self._recongest(entry)
            self._report(feed, self._publisher_up(entry, feed))
            sync_remote(self._parties, self._forwarding, entry, Role.PUBLISHER)

    def retract_publisher(self, feed: PublishFeed[Any]) -> None:
        with self.lock:
            entry = feed.entry
            entry.pubs.remove(feed)
            feed.routes = _NO_ROUTES
            feed.reported = False
            if feed._congested:
                self._congested_pubs -= 1
                feed.congestion_changed(False)
            if feed.declared:
                feed.declared = False
                entry.up_pubs[feed.cat] -= 1
                self._refresh_subscribers(entry)
            sync_remote(self._parties, self._forwarding, entry, Role.PUBLISHER)

    def publisher_state(self, feed: PublishFeed[Any]) -> None:
        with self.lock:
            entry = feed.entry
            entry.up_pubs[feed.cat] += 1 if feed.declared else -1
            self._refresh_subscribers(entry)
            sync_remote(self._parties, self._forwarding, entry, Role.PUBLISHER)

    # --------------------------------------------------------------- subscribers
    def place_subscriber(self, feed: SubscribeFeed[Any]) -> None:
        if feed.wild is not None:
            self._place_wildcard(feed)
            return
        if feed.group is not None:
            self._place_member(feed)
            return
        with self.lock:
            entry = self._live_entry(feed)
            entry.subs.append(feed)
            entry.subs_n[feed.cat] += 1
            entry.xsubs_n[feed.cat] += 1
            self._add_route(entry, feed)
            feed.reported = False
            self._report(feed, _any(entry.up_pubs, MATCHING[feed.cat]))
            self._refresh_publishers(entry)

    def retract_subscriber(self, feed: SubscribeFeed[Any]) -> None:
        if feed.wild is not None:
            self._retract_wildcard(feed)
            return
        if feed.group is not None:
            self._retract_member(feed)
            return
        with self.lock:
            entry = feed.entry
            entry.subs.remove(feed)
            entry.subs_n[feed.cat] -= 1
            entry.xsubs_n[feed.cat] -= 1
            feed.reported = False
            self._drop_route(entry, feed)
            self._refresh_publishers(entry)

    # ---------------------------------------------------------------- wildcards
    # A wildcard subscription joins the entry of every key it matches, as a
    # subscriber of that key (routes, counts, publisher state): so publishing is
    # the same single lookup with or without wildcards.  Its own state is UP
    # while at least one joined entry has a matching publisher UP.
    def _place_wildcard(self, feed: SubscribeFeed[Any]) -> None:
        wild = feed.wild
        assert wild is not None
        cls = feed.key.message_class
        with self.lock:
            index = self.wild.get(cls)
            if index is None:
                index = self.wild[cls] = WildcardIndex()
            index.add(wild, feed)
            feed._joined = {}
            feed._ups = 0
            feed.reported = False
            for entry in [e for k, e in self.entries.items() if k.message_class is cls]:
                if wild.matches(entry.key.subject):
                    self._join(entry, feed)
            if feed.cat in (1, 2):
                self._count_pattern(cls, wild, 1)

    def _retract_wildcard(self, feed: SubscribeFeed[Any]) -> None:
        wild = feed.wild
        assert wild is not None
        cls = feed.key.message_class
        with self.lock:
            index = self.wild[cls]
            index.remove(wild, feed)
            if not index:
                del self.wild[cls]
            joined: list[_Entry] = list(feed._joined)
            for entry in joined:
                self._unjoin(entry, feed, report=False)
                self._refresh_publishers(entry)
                if entry.empty() and self.entries.get(entry.key) is entry:
                    self._drop_entry(entry)
            feed.reported = False
            if feed.cat in (1, 2):
                self._count_pattern(cls, wild, -1)

    def _join(self, entry: _Entry, feed: SubscribeFeed[Any]) -> None:
        cat = feed.cat
        entry.subs.append(feed)
        entry.subs_n[cat] += 1
        self._add_route(entry, feed)
        up = _any(entry.up_pubs, MATCHING[cat])
        feed._joined[entry] = up
        if up:
            feed._ups += 1
            self._report(feed, True)
        self._refresh_publishers(entry)

    def _unjoin(self, entry: _Entry, feed: SubscribeFeed[Any], *, report: bool = True) -> None:
        entry.subs.remove(feed)
        entry.subs_n[feed.cat] -= 1
        self._drop_route(entry, feed)
        if feed._joined.pop(entry, False):
            feed._ups -= 1
            if report:
                self._report(feed, feed._ups > 0)

    def _count_pattern(self, cls: type[Message], wild: Wildcard, delta: int) -> None:
        key = (cls, wild)
        n = self._patterns.get(key, 0) + delta
        if n:
            self._patterns[key] = n
        else:
            del self._patterns[key]
        if n == 1 and delta == 1:
            for party in self._parties:
                party.transport.send_subscribe_pattern(cls, wild)
        elif n == 0:
            for party in self._parties:
                party.transport.send_unsubscribe_pattern(cls, wild)

    def watch(self, cls: type[Message], wild: Wildcard, watch: PatternWatch) -> None:
        """(a party, under the lock) Call ``watch.matched(key)`` for every key of
        ``cls`` that ``wild`` matches, now and as new ones appear."""
        index = self.wild.get(cls)
        if index is None:
            index = self.wild[cls] = WildcardIndex()
        index.add(wild, watch)
        for key in [k for k in self.entries if k.message_class is cls]:
            if wild.matches(key.subject):
                watch.matched(key)

    def unwatch(self, cls: type[Message], wild: Wildcard, watch: PatternWatch) -> None:
        index = self.wild.get(cls)
        if index is not None:
            index.remove(wild, watch)
            if not index:
                del self.wild[cls]

    # ------------------------------------------------------------- queue groups
    def _place_member(self, feed: SubscribeFeed[Any]) -> None:
        name = feed.group
        assert name is not None
        with self.lock:
            entry = self._live_entry(feed)
            group = entry.groups.get(name)
            if group is None:
                group = entry.groups[name] = _Group(entry.key, name, self.queue_totals)
            if feed._group_config is not None:
                group.configure(feed._group_config)
            entry.subs.append(feed)
            entry.subs_n[feed.cat] += 1
            group.members.append(feed)
            self._regroup(entry, group)
            feed.reported = False
            self._report(feed, _any(entry.up_pubs, MATCHING[feed.cat]))
            self._refresh_publishers(entry)
            group.flush_kept()

    def _retract_member(self, feed: SubscribeFeed[Any]) -> None:
        name = feed.group
        assert name is not None
        with self.lock:
            entry = feed.entry
            group = entry.groups[name]
            entry.subs.remove(feed)
            entry.subs_n[feed.cat] -= 1
            group.members.remove(feed)
            feed.reported = False
            self._regroup(entry, group)
            self._refresh_publishers(entry)

    def _regroup(self, entry: _Entry, group: _Group) -> None:
        """Rebuild the group's rotations and put them in (or take them out of)
        the entry's routes; tell remote parties the new member count."""
        group.rebuild()
        routes = list(entry.routes)
        for c in range(3):  # remote-origin messages reach groups by GROUP_NOTIFY only
            deliver = group.rotations[c].deliver
            local, other = routes[c]
            there = deliver in other
            if group.reaches(c) and not there:
                routes[c] = (local, (*other, deliver))
            elif there and not group.reaches(c):
                routes[c] = (local, tuple(r for r in other if r != deliver))
        entry.routes = routes
        _restamp(entry)
        if self._congested or self._congested_pubs:
            self._recongest(entry)
        tell_group(self._parties, entry.key, group)

    def group_notify(
        self, key: MessageKey, name: str, message: Message, sender: Sender, party: Any = None
    ) -> bool:
        """(a party) A notification another node chose this node's group for:
        one local member gets it (or, from forwarding ``party``, one member
        past another forwarding party).  False when no such group is here."""
        entry = self.entries.get(key)
        group = entry.groups.get(name) if entry is not None else None
        if group is None:
            return False
        group.delivered_remote += 1
        if party is not None and party.category == CAT_FORWARD:
            group.rotations[CAT_FORWARD].deliver_except(sender, message, party.transport)
        else:
            group.rotations[CAT_REMOTE].deliver_from(sender, message)
        return True

    # Route tables are replaced, never changed in place (publishers read them
    # without the lock).  Appending keeps placement order, as a rebuild would.
    def _add_route(self, entry: _Entry, feed: SubscribeFeed[Any]) -> None:
        routes = list(entry.routes)
        inline, route, cat = feed._inline, feed.route, feed.cat
        for c in range(CATEGORIES):
            if MATCH[c][cat]:
                local, other = routes[c]
                if inline is not None:
                    routes[c] = ((*local, inline), other)
                elif route is not None:
                    routes[c] = (local, (*other, route))
        entry.routes = routes
        _restamp(entry)
        if self._congested or self._congested_pubs:
            self._recongest(entry)

    def _drop_route(self, entry: _Entry, feed: SubscribeFeed[Any]) -> None:
        routes = list(entry.routes)
        inline, cat = feed._inline, feed.cat
        for c in range(CATEGORIES):
            if MATCH[c][cat]:
                local, other = routes[c]
                if inline is not None:
                    kept = list(local)
                    kept.remove(
                        inline
                    )  # no two feeds' tuples are equal (their ``deliver`` differs)
                    routes[c] = (tuple(kept), other)
                else:
                    route = feed.route
                    routes[c] = (local, tuple(r for r in other if r is not route))
        entry.routes = routes
        _restamp(entry)
        if self._congested or self._congested_pubs:
            self._recongest(entry)

    # ------------------------------------------------------------------ repliers
    def place_replier(self, feed: ReplyFeed[Any]) -> None:
        self._check_reserved(feed)
        with self.lock:
            entry = self._live_entry(feed)
            entry.repliers = (*entry.repliers, feed)
            sync_remote(self._parties, self._forwarding, entry, Role.REPLIER)

    def retract_replier(self, feed: ReplyFeed[Any]) -> None:
        with self.lock:
            entry = feed.entry
            entry.repliers = tuple(r for r in entry.repliers if r is not feed)
            if feed.declared:
                feed.declared = False
                entry.up_reps[feed.cat] -= 1
                self._refresh_requestors(entry)
            sync_remote(self._parties, self._forwarding, entry, Role.REPLIER)

    def replier_state(self, feed: ReplyFeed[Any]) -> None:
        with self.lock:
            entry = feed.entry
            entry.up_reps[feed.cat] += 1 if feed.declared else -1
            self._refresh_requestors(entry)
            sync_remote(self._parties, self._forwarding, entry, Role.REPLIER)

    # ---------------------------------------------------------------- requestors
    def place_requestor(self, feed: RequestFeed[Any]) -> None:
        with self.lock:
            entry = self._live_entry(feed)
            entry.requestors.append(feed)
            feed.reported = False
            self._report(feed, _any(entry.up_reps, MATCHING[feed.cat]))

    def retract_requestor(self, feed: RequestFeed[Any]) -> None:
        with self.lock:
            feed.entry.requestors.remove(feed)
            feed.reported = False
            mine = [h for h in self.requests.values() if h.feed is feed]
        for handle in mine:
            handle.cancel()

    # --------------------------------------------------------------- state push
    def _live_entry(self, feed: Feed) -> _Entry:
        entry = self.entries.get(feed.key)
        if entry is None or entry is not feed.entry:
            # the entry was forgotten while the feed was retracted: re-attach
            if entry is None:
                entry = self._register(feed.entry)
            feed.entry = entry
        return entry

    @staticmethod
    def _report(feed: Any, up: bool) -> None:
        if up != feed.reported:
            feed.reported = up
            feed.post(feed._fire_status, up)

    def _refresh_subscribers(self, entry: _Entry) -> None:
        counts = entry.up_pubs
        self.feed_changed(entry.key, any(counts))
        for s in entry.subs:
            up = _any(counts, MATCHING[s.cat])
            if s.wild is None:
                self._report(s, up)
            elif s._joined.get(entry) is not up:
                s._joined[entry] = up
                s._ups += 1 if up else -1
                self._report(s, s._ups > 0)

    def _refresh_publishers(self, entry: _Entry) -> None:
        for p in entry.pubs:
            self._report(p, self._publisher_up(entry, p))

    @staticmethod
    def _publisher_up(entry: _Entry, p: PublishFeed[Any]) -> bool:
        # a proxy publisher's state is what it tells its peer as SUBSCRIBE:
        # plain subscribers only (see _Entry.xsubs_n), its own peer's never
        if p.cat < CAT_REMOTE:
            return _any(entry.subs_n, MATCHING[p.cat])
        if p.cat == CAT_REMOTE:
            return _any(entry.xsubs_n, MATCHING[CAT_REMOTE])
        return forward_publisher_up(entry, p)

    def _refresh_requestors(self, entry: _Entry) -> None:
        counts = entry.up_reps
        for r in entry.requestors:
            self._report(r, _any(counts, MATCHING[r.cat]))

    # ------------------------------------------------------------ request/reply
    def choose(self, feed: RequestFeed[Any], message: Message) -> list[ReplyFeed[Any]]:
        match = MATCH[feed.cat]
        # a loop, not a comprehension: no function call (Python 3.11) for the
        # one or two repliers a key usually has
        chosen = []
        for r in feed.entry.repliers:
            if r.declared and match[r.cat] and (r.condition is None or r._accepts(message)):
                chosen.append(r)
        if feed.cat == CAT_FORWARD:  # split horizon: never back to the requestor's peer
            return [r for r in chosen if r.remote is not feed.remote]
        return chosen

    def request(
        self, feed: RequestFeed[Any], message: Message, timeout: float | None
    ) -> RequestHandle[Any]:
        match = MATCH[feed.cat]  # choose(), inline
        chosen = []
        for r in feed.entry.repliers:
            if r.declared and match[r.cat] and (r.condition is None or r._accepts(message)):
                chosen.append(r)
        if not chosen:
            raise RequestError(
                f"request() on feed {feed.key}: no replier is up for this key in scope "
                f"{feed.scope.name} (or every replier's condition refused the request); "
                f"wait for the request feed's status to report UP"
            )
        return self.dispatch(feed, message, chosen, timeout)

    def dispatch(
        self,
        feed: RequestFeed[Any],
        message: Message,
        chosen: list[ReplyFeed[Any]],
        timeout: float | None,
        *,
        party: RemoteParty | None = None,
        peer_id: int = 0,
        origin: Sender | None = None,
    ) -> RequestHandle[Any]:
        """Make the handle and post the request to ``chosen``.  With ``party``, the
        request is the peer's ``peer_id``: the party learns the handle before any
        replier can answer (repliers may answer on other threads before this
        returns)."""
        handle: RequestHandle[Any] = RequestHandle(feed, message, self.request_latencies)
        incomings = []  # a loop, not a comprehension (see choose)
        for r in chosen:
            incomings.append(IncomingRequest(handle, r, message))
        # a copy: a replier that answers final before this loop is done (on
        # this thread, or a fast remote one) leaves handle._active at once
        handle._active = incomings[:]
        handle._remaining = len(incomings)
        self.requests[handle.id] = handle
        if party is not None:
            handle.peer_id = peer_id
            handle.origin = origin
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
        return len(self.requests)

    # ------------------------------------------------------------ remote parties
    def attach(
        self,
        name: str,
        transport: PartyTransport,
        permissions: Permissions | None = None,
        *,
        forward: bool = False,
        max_hops: int = 8,
    ) -> RemoteParty:
        """Add a remote peer; it is told every remote-capable advertisement now and
        every change from then on.  ``permissions``: what the peer may publish,
        subscribe to, request and reply on (None: everything); the party checks
        them (bus/_authorize.py).  ``forward``: the peer's feeds are
        forwarded to and from the other forwarding peers (bus/routing.py), once
        the forwarding tree lets the link carry feeds (bus/spanning.py)."""
        cls = ForwardingParty if forward else RemoteParty
        party = cls(self, name, transport, permissions, forward=forward, max_hops=max_hops)
        if forward and self.spanning.join(party):
            return party
        self.reattach(party)
        return party

    def reattach(self, party: RemoteParty) -> None:
        """(attach; a party the forwarding tree resumes) Tell it everything."""
        transport = party.transport
        with self.lock:
            self._parties.append(party)
            if party.category == CAT_FORWARD:
                self._forwarding += 1
            tell_new_party(party, self.entries.values(), Role.PUBLISHER, Role.REPLIER)
            for cls, wild in self._patterns:
                transport.send_subscribe_pattern(cls, wild)

    def detach(self, party: RemoteParty) -> None:
        with self.lock:
            if party in self._parties:
                self._parties.remove(party)
                if party.category == CAT_FORWARD:
                    self._forwarding -= 1
                    for entry in self.entries.values():
                        entry.fwd_pub.pop(party, None)
                        entry.fwd_rep.pop(party, None)
            # (its proxies' routes go next, and the publishers they held congested
            # are recomputed then: _congested_pubs)
            self._congested.pop(id(party.transport), None)

    # ------------------------------------------------------------------ inspect
    def repliers(self, key: MessageKey) -> tuple[ReplyFeed[Any], ...]:
        """The reply feeds advertised for ``key`` here, UP or not (local ones and
        the proxies of remote ones)."""
        with self.lock:
            entry = self.entries.get(key)
            return tuple(entry.repliers) if entry is not None else ()

    def feeds(self, key: MessageKey) -> dict[str, int]:
        """How many feeds of each role are placed for ``key`` (for tests and tools)."""
        e = self.entries.get(key) or _Entry(key)
        n = (len(e.pubs), len(e.subs), len(e.repliers), len(e.requestors))
        return dict(zip(("publishers", "subscribers", "repliers", "requestors"), n, strict=True))
