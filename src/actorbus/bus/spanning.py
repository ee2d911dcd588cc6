"""The forwarding tree: which forwarding links carry feeds, so nothing loops.

Forwarding (:mod:`.routing`) aggregates per key: a node tells a peer "I have
publishers for this key" without saying where they are.  On a graph with a
cycle that would loop (an advertisement would come back around and keep a
feed UP after its publisher left), so the forwarding links of a network carry
feeds only along one **spanning tree**, which every node computes from the
same picture of the network (link state):

* Each node describes itself in a **link-state announcement** (LSA): its id,
  a sequence number that only grows (it starts from the clock, so a restarted
  node's are newer), and the forwarding peers it has a link to.  It floods its
  LSA over its forwarding links whenever that list changes; a node passes on
  an LSA newer than the one it holds to every other forwarding peer and drops
  one it holds already (counted ``duplicates``).  A new link starts with both
  ends sending everything they hold.  (LSAs are not cut at ``maxHops``: two
  nodes with views cut short differently could both keep a cycle's links;
  ``maxHops`` bounds the notifications a forwarding link passes on.)
* From its LSAs a node builds the graph of links both ends announce (a node
  that left is still in some LSA, but its peers no longer list it, so it is
  cut off), takes the part it can reach, and runs a breadth-first search from
  the least node id in it, visiting neighbours in id order.  The edges of
  that search are the **tree**: the same tree at every node holding the same
  LSAs.
* A link **carries feeds** when both ends say it is in their tree (each
  ROUTE frame says so for the link it crosses).  A link that stops dropping
  everything it carried (feeds DOWN, requests in flight ERROR, exactly as a
  lost link); one that starts is told everything anew (each end
  re-advertises), so nothing is missed.

Why it cannot loop: a search tree has no cycle, and every node in one part of
the network computes the same tree once it holds the same LSAs; while LSAs
are still on their way two nodes may disagree, and a link carries feeds only
where both of its ends agree.  Why it ends: an LSA is passed on only when it
is newer, so each one crosses each link at most once per direction; a change
costs at most two frames per link per LSA it makes (the nodes whose list
changed), whatever the cycles.

A forwarding party whose peer does not take part (a J.REP session, a node
that does not forward on that link) is a **leaf**: it carries feeds at once,
as it can relay nothing.  A node without forwarding links has no tree.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Error
from .scope import CAT_FORWARD
from .system import SYSTEM_SUBJECT, ForwardingChanged

if TYPE_CHECKING:
    from .party import RemoteParty

__all__ = ["ACTIVE", "FORWARDS", "Spanning", "TreeView"]

#: ROUTE flags: the sender holds the link in its tree / forwards on it
ACTIVE = 1
FORWARDS = 2

#: what a suspended link's feeds end with
LEFT_TREE = "it left the forwarding tree (another path took over; docs/routing.md)"


@dataclass(slots=True)
class _Peer:
    #: the peer said anything yet (until then its link carries nothing)
    heard: bool = False
    #: the peer forwards on this link (takes part in the tree)
    forwards: bool = True
    #: the peer holds the link in its tree
    active: bool = False
    #: what this node last said of the link to it (None: nothing yet)
    told: bool | None = None
    #: the link carries feeds now (the party is attached)
    carrying: bool = False


@dataclass(frozen=True, slots=True)
class TreeView:
    """The forwarding tree as this node sees it (``Bus.inspect()``, tests)."""

    root: str
    #: node ids from the root to this node
    path: tuple[str, ...]
    #: the peer toward the root ("" at the root)
    parent: str
    #: peers whose link carries feeds / waits or is out of the tree
    carrying: tuple[str, ...]
    blocked: tuple[str, ...]
    #: LSAs already held when they came again (over another path)
    duplicates: int = 0
    #: links that started or stopped carrying feeds
    changes: int = 0
    #: nodes this node knows an LSA of
    known: int = 0


class Spanning:
    """One node's share of the forwarding tree (see the module doc).

    The router makes one; forwarding parties whose transport can announce
    (``send_route``) join it; a party's ``route(...)`` inbound call lands in
    :meth:`heard`."""

    def __init__(self, router: Any) -> None:
        self._router = router
        self._lock = threading.Lock()
        #: held while parties are suspended or resumed, so the last decision wins
        self._apply = threading.Lock()
        self._peers: dict[RemoteParty, _Peer] = {}
        #: plain parties that said once they do not forward
        self._answered: weakref.WeakSet[RemoteParty] = weakref.WeakSet()
        #: origin -> (sequence, its forwarding peers, links it crossed to here)
        self._lsdb: dict[str, tuple[int, frozenset[str], int]] = {}
        self._seq = time.time_ns()
        self._tree: tuple[str, tuple[str, ...], frozenset[str]] = ("", (), frozenset())
        self.duplicates = 0
        self.changes = 0

    # ------------------------------------------------------------------ inputs
    def join(self, party: RemoteParty) -> bool:
        """A forwarding party was attached: True when it waits for the tree
        (its transport announces), False for a leaf (it carries feeds now)."""
        if getattr(party.transport, "send_route", None) is None:
            return False
        with self._lock:
            self._peers[party] = _Peer()
            self._send(party, self._mine(), False)
        return True

    def gone(self, party: RemoteParty) -> None:
        """``party``'s link is gone."""
        with self._lock:
            peer = self._peers.pop(party, None)
            if peer is None:
                return
            if peer.heard and peer.forwards:
                self._originate()
            self._compute()
        self._settle()

    def heard(
        self,
        party: RemoteParty,
        origin: str,
        seq: int,
        neighbours: tuple[str, ...],
        *,
        hops: int,
        flags: int,
    ) -> None:
        """A ROUTE from the peer: an LSA (``origin``'s, ``seq``, its
        ``neighbours``, ``hops`` links crossed) and what the peer says of this
        link in ``flags`` (:data:`ACTIVE`: in its tree; without
        :data:`FORWARDS`: it does not forward on this link, a leaf here).  A
        non-forwarding party answers the first once that it does not forward."""
        active, forwards = bool(flags & ACTIVE), bool(flags & FORWARDS)
        if party.category != CAT_FORWARD:
            send = getattr(party.transport, "send_route", None)
            if send is not None and forwards and party not in self._answered:
                self._answered.add(party)
                send("", 0, (), 0, 0)
            return
        with self._lock:
            peer = self._peers.get(party)
            if peer is None:
                return
            first = not peer.heard
            peer.heard, peer.forwards, peer.active = True, forwards, active
            if first and forwards:
                # the link is up both ways: it goes in this node's LSA, and the
                # peer learns everything this node holds
                self._originate()
                for lsa in self._lsdb.items():
                    self._send(party, lsa, bool(peer.told))
            if forwards and origin:
                self._learn(party, origin, seq, frozenset(neighbours), hops)
            self._compute()
        self._settle()

    # ------------------------------------------------------------- link state
    def _mine(self) -> tuple[str, tuple[int, frozenset[str], int]]:
        names = frozenset(p.name for p, v in self._peers.items() if v.heard and v.forwards)
        return self._router.node_id, (self._seq, names, 0)

    def _originate(self) -> None:
        """(under the lock) This node's list of forwarding peers changed: a new
        LSA to every forwarding peer."""
        self._seq = max(self._seq + 1, time.time_ns())
        lsa = self._mine()
        for party, peer in self._peers.items():
            if peer.forwards:
                self._send(party, lsa, bool(peer.told))

    def _learn(
        self, party: RemoteParty, origin: str, seq: int, names: frozenset[str], hops: int
    ) -> None:
        if origin == self._router.node_id:
            if seq >= self._seq:  # a previous run's, still about: outdo it
                self._seq = seq
                self._originate()
            return
        held = self._lsdb.get(origin)
        if held is not None and held[0] >= seq:
            self.duplicates += 1
            return
        # every node floods every LSA (each crosses a link once per direction):
        # a view cut short by a hop limit could differ from a neighbour's and
        # carry a cycle; the hop limit bounds data instead (routing.py)
        self._lsdb[origin] = (seq, names, hops + 1)
        for other, peer in self._peers.items():
            if other is not party and peer.heard and peer.forwards:
                self._send(other, (origin, (seq, names, hops)), bool(peer.told))

    @staticmethod
    def _send(party: RemoteParty, lsa: tuple[str, tuple[int, Any, int]], active: bool) -> None:
        """An LSA to ``party`` (with the links it crossed so far), and whether
        this node holds the link to it in its tree."""
        origin, (seq, names, hops) = lsa
        flags = FORWARDS | (ACTIVE if active else 0)
        party.transport.send_route(  # type: ignore[attr-defined]
            origin, seq, tuple(sorted(names)), hops, flags
        )

    # ----------------------------------------------------------------- the tree
    def _compute(self) -> None:
        """(under the lock) The search tree of the graph this node knows, and
        what it says of each forwarding link when that changed."""
        me, (_, mine, _) = self._mine()
        lists = {origin: names for origin, (_, names, _) in self._lsdb.items()}
        lists[me] = mine

        def linked(u: str) -> list[str]:
            return sorted(v for v in lists.get(u, ()) if u in lists.get(v, ()))

        reach, todo = {me}, [me]
        while todo:
            for v in linked(todo.pop()):
                if v not in reach:
                    reach.add(v)
                    todo.append(v)
        root = min(reach)
        parent: dict[str, str] = {root: ""}
        queue = [root]
        for u in queue:
            for v in linked(u):
                if v not in parent:
                    parent[v] = u
                    queue.append(v)
        path = [me]
        while parent[path[-1]]:
            path.append(parent[path[-1]])
        edges = {parent[me]} | {v for v, u in parent.items() if u == me}
        self._tree = (root, tuple(reversed(path)), frozenset(edges - {""}))
        for party, peer in self._peers.items():
            if not peer.forwards:
                continue
            mine_now = party.name in self._tree[2]
            if peer.told is not mine_now:
                peer.told = mine_now
                self._send(party, self._mine(), mine_now)

    def _wanted(self, peer: _Peer) -> bool:
        if not peer.heard:
            return False
        if not peer.forwards:
            return True  # a leaf
        return bool(peer.told) and peer.active

    def _settle(self) -> None:
        """Suspend or resume the parties whose link should (no longer) carry
        feeds; outside the state lock (a suspension closes feeds)."""
        with self._apply:
            with self._lock:
                todo = [
                    (party, want)
                    for party, peer in self._peers.items()
                    if (want := self._wanted(peer)) != peer.carrying
                ]
                for party, want in todo:
                    self._peers[party].carrying = want
                self.changes += len(todo)
            for party, want in todo:
                if want:
                    party.resume()
                else:
                    party.suspend(LEFT_TREE)
                self._tell(party, want)

    def _tell(self, party: RemoteParty, carrying: bool) -> None:
        """Publish the change on the system subject (when the node installed it)."""
        publish = self._router.system_publish
        if publish is None:
            return
        root, path, _ = self._tree
        try:
            publish(
                ForwardingChanged(
                    SYSTEM_SUBJECT,
                    peer_node=party.name,
                    carrying=carrying,
                    root=root,
                    parent=path[-2] if len(path) >= 2 else "",
                    forwarded=party.forwarded,
                    hop_limited=party.hop_limited,
                )
            )
        except Error:  # the bus is closing: nobody is listening
            pass

    # ------------------------------------------------------------------ inspect
    def view(self) -> TreeView:
        with self._lock:
            root, path, _ = self._tree
            me = self._router.node_id
            return TreeView(
                root=root or me,
                path=path or (me,),
                parent=path[-2] if len(path) >= 2 else "",
                carrying=tuple(sorted(p.name for p, v in self._peers.items() if v.carrying)),
                blocked=tuple(sorted(p.name for p, v in self._peers.items() if not v.carrying)),
                duplicates=self.duplicates,
                changes=self.changes,
                known=len(self._lsdb) + 1,
            )
