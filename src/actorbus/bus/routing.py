"""Forwarding between links: the routing policy of the "forwarded" category.

A link whose settings say ``forward`` (and every J.REP gateway client) joins
the bus as a *forwarding* party: its proxies are of category
:data:`~actorbus.bus.scope.CAT_FORWARD`, which matches the proxies of the
node's other forwarding parties as a local & remote feed would.  So the node
re-advertises what one forwarding peer advertises to the others, subscribes
upstream for what they subscribe to, and passes notifications, requests,
acknowledgements, replies and cancels along; a chain or a star of nodes acts
as one bus (docs/routing.md).

The policy, applied where the router builds routes and aggregates (never per
message):

* **Split horizon.**  Two proxies of the same party never match: what a peer
  advertises is never advertised back to it, its subscription never makes
  this node subscribe to it, its notifications never go back to it, its
  requests never go to its own repliers.
* **Per-party aggregation.**  What a forwarding peer is told for a key is the
  aggregate of this node's remote-capable local feeds and the forwarded
  proxies of its *other* forwarding peers; an ordinary peer is told the local
  aggregate only.  Queue groups are counted the same way: a peer learns the
  members it can reach through this node, its own not counted back, and a
  group notification from one forwarding peer goes to a member here or past
  another forwarding peer, never back.
* **Acknowledgements add up.**  A request forwarded on is acknowledged to the
  requestor's node once every forwarding hop it went to has acknowledged: the
  count is this node's repliers plus what each hop said, so ``remaining``
  holds end to end.  Replies that come before are held until then.

A node without forwarding links computes the local aggregates only (and
never the per-party ones); the publish and request paths test one attribute
of the party (``_acks``, None unless it forwards).  Which forwarding links
carry feeds at all is the forwarding tree's (:mod:`.spanning`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .scope import CAT_FORWARD

if TYPE_CHECKING:
    from ._stamp import Routes
    from .feeds import IncomingRequest, PublishFeed
    from .message import MessageKey, Reply
    from .party import RemoteParty, Role
    from .sender import Sender

__all__ = [
    "AckWaits",
    "forward_fanout",
    "forward_publisher_up",
    "group_members",
    "horizon",
    "local_aggregate",
    "party_aggregate",
    "sync_remote",
    "tell_group",
    "tell_new_party",
]


def horizon(routes: Routes, pub: Any) -> Routes:
    """``routes`` as proxy publisher ``pub`` may use them: without the routes
    back to its own peer (split horizon).  Other categories keep them all."""
    if pub.cat != CAT_FORWARD:
        return routes
    transport = pub.remote.transport
    local, other = routes
    return local, tuple(r for r in other if getattr(r, "__self__", None) is not transport)


#: the names of a transport's notification sends (a route that crosses a link)
_LINK_SENDS = frozenset({"send_notify", "send_notify_from"})


def forward_fanout(other: tuple[Any, ...]) -> int:
    """How many of a forwarded proxy publisher's routes (``other``) go on to
    another link (a transport's ``send_notify``, stamped or not)."""
    n = 0
    for route in other:
        name = getattr(getattr(route, "func", route), "__name__", "")
        if name in _LINK_SENDS:
            n += 1
    return n


def forward_publisher_up(entry: Any, pub: PublishFeed[Any]) -> bool:
    """Whether forwarded proxy publisher ``pub`` has subscribers it should ask
    its peer for (its SUBSCRIBE): plain subscribers that match it, its own
    peer's proxies not counted."""
    party = pub.remote
    counts = entry.xsubs_n
    if counts[1] or counts[2]:
        return True
    if not counts[CAT_FORWARD]:
        return False
    for s in entry.subs:
        if s.cat == CAT_FORWARD and s.remote is not party and s.wild is None and s.group is None:
            return True
    return False


def local_aggregate(feeds: Any) -> tuple[bool, bool]:
    """(advertised, up) of the remote-capable local feeds among ``feeds``."""
    local = [f for f in feeds if f.remote is None and f.scope.remote_capable]
    return bool(local), any(f.declared for f in local)


def party_aggregate(feeds: Any, party: RemoteParty) -> tuple[bool, bool]:
    """(advertised, up) as forwarding ``party`` is told them: the remote-capable
    local feeds and the forwarded proxies of other parties."""
    told = [
        f
        for f in feeds
        if (f.remote is None and f.scope.remote_capable)
        or (f.cat == CAT_FORWARD and f.remote is not party)
    ]
    return bool(told), any(f.declared for f in told)


def sync_forwarding(
    parties: list[RemoteParty],
    told: dict[Any, tuple[bool, bool]],
    feeds: Any,
    key: MessageKey,
    role: Role,
) -> None:
    """(under the router lock) Tell each forwarding party in ``parties`` its
    aggregate of ``feeds`` on change; ``told`` holds what each was told last.
    The reserved (system) subject is never forwarded: its repliers answer for
    their own node, to the peers linked to it."""
    reserved = parties and key.subject == parties[0].router.reserved_subject
    for party in parties:
        if party.category != CAT_FORWARD:
            continue
        now = local_aggregate(feeds) if reserved else party_aggregate(feeds, party)
        before = told.get(party, (False, False))
        if now != before:
            if now == (False, False):
                told.pop(party, None)
            else:
                told[party] = now
            party.tell(key, role, before, now)


def sync_remote(parties: list[RemoteParty], forwarding: int, entry: Any, role: Role) -> None:
    """(under the router lock) After a change of ``entry``'s publishers (or
    repliers, by ``role``): tell the ordinary parties the local aggregate on
    change and, when ``forwarding`` parties exist, each its own aggregate."""
    pub = role.name == "PUBLISHER"
    feeds = entry.pubs if pub else entry.repliers
    now = local_aggregate(feeds)
    before = entry.remote_pub if pub else entry.remote_rep
    if now != before:
        if pub:
            entry.remote_pub = now
        else:
            entry.remote_rep = now
        for party in parties:
            if party.category != CAT_FORWARD:
                party.tell(entry.key, role, before, now)
    if forwarding:
        sync_forwarding(parties, entry.fwd_pub if pub else entry.fwd_rep, feeds, entry.key, role)


def tell_new_party(party: RemoteParty, entries: Any, publisher: Role, replier: Role) -> None:
    """(under the router lock) What a party just attached is told of every
    entry: the local aggregates, or (forwarding) its own aggregates
    (``publisher``/``replier``: the two roles advertised)."""
    t = party.transport
    for entry in entries:
        if party.category == CAT_FORWARD:
            sync_forwarding([party], entry.fwd_pub, entry.pubs, entry.key, publisher)
            sync_forwarding([party], entry.fwd_rep, entry.repliers, entry.key, replier)
        else:
            adv, up = entry.remote_pub
            if adv:
                t.send_advertise(entry.key, publisher, up)
            adv, up = entry.remote_rep
            if adv:
                t.send_advertise(entry.key, replier, up)
        for group in entry.groups.values():
            n = group_members(group, party)
            if party.category == CAT_FORWARD:
                group.told_to[party] = n
            if n:
                t.send_group(entry.key, group.name, n)


def group_members(group: Any, party: RemoteParty) -> int:
    """The members of ``group`` that ``party`` is told of: the remote-capable
    local ones and (a forwarding party) those of the other forwarding parties,
    each proxy with the members it stands for."""
    n: int = group.remote_members()
    if party.category == CAT_FORWARD:
        for m in group.members:
            if m.cat == CAT_FORWARD and m.remote is not party:
                n += m.weight
    return n


def tell_group(parties: list[RemoteParty], key: MessageKey, group: Any) -> None:
    """(under the router lock) After ``group``'s members changed: tell each
    party its count on change."""
    n = group.remote_members()
    local_changed = n != group.told
    group.told = n
    for party in parties:
        if party.category != CAT_FORWARD:
            if local_changed:
                party.transport.send_group(key, group.name, n)
            continue
        mine = group_members(group, party)
        if mine != group.told_to.get(party, 0):
            group.told_to[party] = mine
            party.transport.send_group(key, group.name, mine)


class _Wait:
    """A forwarded request's acknowledgement being added up."""

    __slots__ = ("held", "hops", "seen", "sum")

    def __init__(self, local: int, hops: int) -> None:
        self.sum = local
        self.hops = hops
        #: the hops (their IncomingRequest's id()) that said how many took it
        self.seen: set[int] = set()
        #: replies that came before the acknowledgement could be sent
        self.held: list[tuple[int, Reply, Sender | None]] = []


class AckWaits:
    """A forwarding party's requests whose acknowledgement waits for the hops
    they were forwarded to (see the module doc)."""

    def __init__(self, party: RemoteParty) -> None:
        self._party = party
        self._lock = threading.Lock()
        self._waits: dict[int, _Wait] = {}

    def start(self, peer_id: int, local: int, hops: int) -> None:
        """Request ``peer_id`` went to ``local`` repliers here and ``hops``
        forwarding parties: its acknowledgement waits for theirs."""
        with self._lock:
            self._waits[peer_id] = _Wait(local, hops)

    def acked(self, incoming: IncomingRequest[Any], taken: int) -> None:
        """A hop said ``taken`` of its repliers took the request (a hop taking
        none, or lost before saying, counts one: its one ERROR reply); what a
        hop says after its first word is not counted again."""
        handle = incoming.handle
        with self._lock:
            wait = self._waits.get(handle.peer_id)
            if wait is None or id(incoming) in wait.seen:
                return
            wait.seen.add(id(incoming))
            wait.sum += max(taken, 1)
            wait.hops -= 1
            if wait.hops > 0:
                return
            del self._waits[handle.peer_id]
            # under the lock: a reply that comes now waits until these are sent
            self._party.transport.send_request_ack(handle.peer_id, wait.sum)
            for remaining, reply, sender in wait.held:
                self._party.send_reply_now(handle.peer_id, remaining, reply, sender)

    def hold(self, peer_id: int, remaining: int, reply: Reply, sender: Sender | None) -> bool:
        """True when ``reply`` must wait for the acknowledgement (it is held)."""
        with self._lock:
            wait = self._waits.get(peer_id)
            if wait is None:
                return False
            wait.held.append((remaining, reply, sender))
            return True

    def forget(self, peer_id: int) -> None:
        with self._lock:
            self._waits.pop(peer_id, None)
