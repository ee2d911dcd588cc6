"""The forwarding tree: which forwarding links carry feeds, so nothing loops.

Forwarding (:mod:`.routing`) aggregates per key: a node tells a peer "I have
publishers for this key" without saying where they are.  On a graph with a
cycle that would loop (an advertisement would come back around and keep a
feed UP after its publisher left), so the forwarding links of a network carry
feeds only along one **spanning tree**, elected with a path vector:

* Every node announces to each forwarding peer ``(root, path, active)``:
  the root it follows (the smallest node id it knows of, itself at first), the
  path of node ids from that root to itself, and whether it holds the link
  between them in the tree.
* An announcement whose path holds this node, or is longer than the link's
  ``maxHops``, is dropped (counted: ``loops_refused``, ``hop_limited``).
* A node's best announcement is its own ``(self, [self])`` or a peer's with
  itself appended, the least by (root, path length, peer id); the peer it
  came from is its *parent*.
* A link is **in the tree** at a node when the peer is its parent or it is
  the peer's parent; it **carries feeds** when both ends say so.  A link that
  stops carrying feeds drops everything it carried (feeds DOWN, requests in
  flight ERROR, exactly as a lost link); one that starts is told everything
  anew (each end re-advertises), so nothing is missed.

Why it cannot loop: every node picks one parent whose announced root is no
larger and whose path is one shorter than its own, so following parents
strictly decreases (root, length) and ends at a root; the parent links form a
forest and a forest has no cycle.  A path never holds a repeat (a node drops
announcements that contain it), so announcements are finite and each change
ends after at most ``maxHops`` rounds.  While the tree changes, a link carries
feeds only when both ends agree, and every change of one end is announced to
the other in order on the same link, so an end never keeps using a link the
other has left.

A forwarding party whose peer does not take part (a J.REP session, a node
that does not forward on that link) is a **leaf**: it carries feeds at once,
as it can relay nothing.  A node without forwarding links has no tree.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Error
from .scope import CAT_FORWARD
from .system import SYSTEM_SUBJECT, ForwardingChanged

if TYPE_CHECKING:
    from .party import RemoteParty

__all__ = ["Spanning", "TreeView"]

#: what a suspended link's feeds end with
LEFT_TREE = "it left the forwarding tree (another path took over; docs/routing.md)"


@dataclass(slots=True)
class _Peer:
    #: the peer said anything yet (until then its link carries nothing)
    heard: bool = False
    #: the peer forwards on this link (takes part in the tree)
    forwards: bool = True
    root: str = ""
    path: tuple[str, ...] = ()
    #: the peer holds the link in the tree
    active: bool = False
    #: what was announced to it last
    told: tuple[Any, ...] = ()
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
    #: announcements dropped: path over the link's maxHops / path holding this node
    hop_limited: int = 0
    loops_refused: int = 0
    #: links that started or stopped carrying feeds
    changes: int = 0
    extra: dict[str, int] = field(default_factory=dict)


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
        self._best: tuple[str, tuple[str, ...], RemoteParty | None] = ("", (), None)
        self.hop_limited = 0
        self.loops_refused = 0
        self.changes = 0

    # ------------------------------------------------------------------ inputs
    def join(self, party: RemoteParty) -> bool:
        """A forwarding party was attached: True when it waits for the tree
        (its transport announces), False for a leaf (it carries feeds now)."""
        if getattr(party.transport, "send_route", None) is None:
            return False
        with self._lock:
            self._peers[party] = _Peer()
            self._compute()
        return True

    def gone(self, party: RemoteParty) -> None:
        """``party``'s link is gone."""
        with self._lock:
            if self._peers.pop(party, None) is None:
                return
            self._compute()
        self._settle()

    def heard(
        self, party: RemoteParty, root: str, path: tuple[str, ...], active: bool, forwards: bool
    ) -> None:
        """The peer's announcement (``forwards`` False: it does not forward on
        this link, it is a leaf here).  A non-forwarding party answers once
        that it does not forward, so the peer treats it as a leaf."""
        if party.category != CAT_FORWARD:
            send = getattr(party.transport, "send_route", None)
            if send is not None and forwards and not getattr(party, "route_answered", False):
                party.route_answered = True  # type: ignore[attr-defined]
                send("", (), False, False)
            return
        with self._lock:
            peer = self._peers.get(party)
            if peer is None:
                return
            peer.heard, peer.forwards, peer.active = True, forwards, active
            peer.root, peer.path = root, path
            me = self._router.node_id
            if me in path[:-2]:  # (me as the peer's parent is no loop)
                self.loops_refused += 1
            elif len(path) > party.max_hops:
                self.hop_limited += 1
                party.hop_limited += 1
            self._compute()
        self._settle()

    # ----------------------------------------------------------------- the rule
    def _compute(self) -> None:
        """(under the lock) Elect the best announcement, then tell every
        forwarding peer what changed for it."""
        me = self._router.node_id
        best: tuple[str, tuple[str, ...], RemoteParty | None] = (me, (me,), None)
        rank: tuple[str, int, str] = (me, 1, "")
        for party, peer in self._peers.items():
            if not (peer.heard and peer.forwards and peer.path):
                continue
            if me in peer.path or len(peer.path) > party.max_hops:
                continue  # a loop, or too far from its root
            candidate = (peer.root, len(peer.path) + 1, party.name)
            if candidate < rank:
                rank = candidate
                best = (peer.root, (*peer.path, me), party)
        self._best = best
        root, path, parent = best
        for party, peer in self._peers.items():
            if peer.heard and not peer.forwards:
                continue
            mine = party is parent or (
                len(peer.path) >= 2 and peer.path[-2] == me and peer.root == root
            )
            told = (root, path, mine)
            if told != peer.told:
                peer.told = told
                party.transport.send_route(root, path, mine, True)  # type: ignore[attr-defined]

    def _wanted(self, peer: _Peer) -> bool:
        if not peer.heard:
            return False
        if not peer.forwards:
            return True  # a leaf
        return bool(peer.told and peer.told[2]) and peer.active

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
        root, _, parent = self._best
        try:
            publish(
                ForwardingChanged(
                    SYSTEM_SUBJECT,
                    peer_node=party.name,
                    carrying=carrying,
                    root=root,
                    parent=parent.name if parent is not None else "",
                    forwarded=party.forwarded,
                    hop_limited=party.hop_limited,
                )
            )
        except Error:  # the bus is closing: nobody is listening
            pass

    # ------------------------------------------------------------------ inspect
    def view(self) -> TreeView:
        with self._lock:
            root, path, parent = self._best
            return TreeView(
                root=root or self._router.node_id,
                path=path or (self._router.node_id,),
                parent=parent.name if parent is not None else "",
                carrying=tuple(sorted(p.name for p, v in self._peers.items() if v.carrying)),
                blocked=tuple(sorted(p.name for p, v in self._peers.items() if not v.carrying)),
                hop_limited=self.hop_limited,
                loops_refused=self.loops_refused,
                changes=self.changes,
            )
