"""Queue groups: each notification goes to exactly one member of a group.

Theory of operation
-------------------
A subscription may name a *queue group* (``queue="workers"`` or a
:class:`QueueGroup` with options).  Plain subscribers of a key get every
notification, as always; the members of a group share them: each notification
published on the key goes to **exactly one** member of each group, wherever on
the bus the members are.

On one node a group is a :class:`_Group` held by the key's router entry.  Its
members are subscribe feeds, counted as subscribers of the key (so publishers
see them and go UP), but never given a route of their own: the entry's route
table holds, per publisher category, one *rotation* of the group instead, and
the publish loop calls its ``deliver`` like any other route.  A rotation holds
the delivery targets of the members that category may reach and hands each
message to the next one:

* a **local member** is reached through its owner's mailbox; its delivery task
  re-offers the message to the group if the member has left in the meantime
  (nothing handed to a member that leaves is lost silently);
* a **remote node** with members appears as one proxy member whose target is
  its link (``send_group_notify``), repeated once per member it reported, so
  a node with two members takes two turns in the rotation.  The node that
  publishes makes the choice for the whole bus; the receiving node hands the
  message to one of *its local* members (its rotation for remote origin,
  which never holds a remote proxy), so a message crosses at most one link and
  is delivered once.

Balancing is **round-robin** by default: members take turns in the order they
joined, remote nodes weighted by their member count.  With
``balance="least_loaded"`` a local member's turn goes to the local member with
the fewest tasks waiting in its mailbox (remote nodes keep their turns: their
load is not visible here).

**Empty group.**  When a group has no member a notification is dropped and
counted (:attr:`_Group.dropped`, and the router's :class:`QueueTotals`), unless
the group was made with ``keep=N``: then up to N notifications wait in the
group and go to the first member that joins; past N each further one is
dropped and counted.  A group lives as long as its key is in use (some feed
uses it), members or not; when the key goes, what the group kept is dropped
and counted.

A member whose link drops gets nothing more: its proxy leaves the rotation
when the link's party detaches.  What the link had in flight to it is the
link's loss accounting (counted as lost, reported on the link).  Queue members
take no ``condition``: a condition that refused would leave the message with
nobody.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from .._log import logger
from ..errors import UsageError
from ._feed import _PLACED
from .scope import MATCH

__all__ = ["BALANCES", "QueueGroup", "QueueTotals"]

#: The balancing policies a group may use.
BALANCES = ("round_robin", "least_loaded")

#: Longest group name accepted (names cross links).
MAX_GROUP_NAME = 256


class QueueGroup:
    """A queue group's name and options, given on a subscription.

    ``keep``: how many notifications published while the group has no member
    wait for the first one (0: none, they are dropped and counted).
    ``balance``: ``"round_robin"`` (default) or ``"least_loaded"``."""

    __slots__ = ("balance", "keep", "name")

    def __init__(self, name: str, *, keep: int = 0, balance: str = "round_robin") -> None:
        check_group_name(name)
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
            raise UsageError(
                f"queue group {name!r}: keep must be an int >= 0 (how many notifications wait "
                f"for a member), found {keep!r}"
            )
        if balance not in BALANCES:
            raise UsageError(
                f"queue group {name!r}: balance must be one of {', '.join(BALANCES)}, "
                f"found {balance!r}"
            )
        self.name = name
        self.keep = keep
        self.balance = balance

    @classmethod
    def of(cls, queue: str | QueueGroup) -> QueueGroup:
        """``queue`` as a QueueGroup (a plain name gets the default options)."""
        if isinstance(queue, QueueGroup):
            return queue
        return cls(queue)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueueGroup) and (self.name, self.keep, self.balance) == (
            other.name,
            other.keep,
            other.balance,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.keep, self.balance))

    def __repr__(self) -> str:
        return f"QueueGroup({self.name!r}, keep={self.keep}, balance={self.balance!r})"


def check_group_name(name: object) -> None:
    """UsageError unless ``name`` is a usable queue group name."""
    if not isinstance(name, str) or not name or len(name) > MAX_GROUP_NAME:
        raise UsageError(
            f"a queue group name must be a non-empty str of at most {MAX_GROUP_NAME} "
            f"characters, found {name!r}"
        )


class _Rotation:
    """The members one publisher category reaches, taking turns (see the module doc)."""

    __slots__ = ("group", "locals", "only_local", "targets", "turn")

    def __init__(self, group: _Group, only_local: bool) -> None:
        self.group = group
        #: one delivery callable per turn (a remote node once per member it has)
        self.targets: tuple[Callable[[Any], object] | _LocalTarget, ...] = ()
        #: least_loaded only: the local members' targets
        self.locals: tuple[_LocalTarget, ...] = ()
        #: the rotation of remote-origin messages, which never cross a link again
        self.only_local = only_local
        self.turn = -1

    def deliver(self, message: Any) -> None:
        """The group's route in the entry's table (publishers call their stamped
        :meth:`deliver_from`)."""
        self.deliver_from(None, message)

    def deliver_except(self, sender: Any, message: Any, transport: Any) -> None:
        """Hand ``message`` to the next member not reached through ``transport``
        (the forwarding party it came from: split horizon)."""
        targets = self.targets
        for _ in range(len(targets)):
            turn = self.turn + 1
            if turn >= len(targets):
                turn = 0
            self.turn = turn
            target = targets[turn]
            if isinstance(target, _LocalTarget):
                target.post(target.run, (sender, message))
                return
            owner = getattr(target, "func", None)
            if getattr(owner, "__self__", None) is not transport:
                target(message)
                return
        self.group.keep_or_drop(self, sender, message)

    def deliver_from(self, sender: Any, message: Any) -> None:
        """Hand ``message`` to the next member."""
        targets = self.targets
        if not targets:
            self.group.keep_or_drop(self, sender, message)
            return
        # Publishers on several threads may race on ``turn``: two messages may
        # then go to the same member, never to none or to two members.
        turn = self.turn + 1
        if turn >= len(targets):
            turn = 0
        self.turn = turn
        target = targets[turn]
        if isinstance(target, _LocalTarget):
            if self.locals:
                target = _least_loaded(target, self.locals)
            target.post(target.run, (sender, message))
        else:
            target(message)  # a remote node: its link carries the node


def _least_loaded(turn: _LocalTarget, targets: tuple[_LocalTarget, ...]) -> _LocalTarget:
    """The local member with the fewest tasks waiting; the one whose turn it is
    on a tie (so members that keep up still take turns)."""
    best, fewest = turn, turn.depth()
    for target in targets:
        depth = target.depth()
        if depth < fewest:
            best, fewest = target, depth
    return best


class _LocalTarget:
    """Delivers to a local member through its owner's poster (a mailbox), for
    one rotation: a member that left hands the message back to that rotation
    (so a re-offer keeps the scope rules of the message's first hand-off)."""

    __slots__ = ("box", "post", "rotation", "target_feed")

    def __init__(self, feed: Any, rotation: _Rotation) -> None:
        #: the member (failure reports name its callback, not this object)
        self.target_feed = feed
        self.rotation = rotation
        self.post = feed.post
        self.box = getattr(self.post, "__self__", None)

    def depth(self) -> int:
        box = self.box
        return box.depth if box is not None else 0

    def run(self, item: tuple[Any, Any]) -> object:
        """The delivery task of ``(sender, message)``, on the member's dispatcher."""
        sender, message = item
        feed = self.target_feed
        if feed.phase is _PLACED:
            feed._from = sender
            return feed._cb_message(message, feed)
        self.rotation.group.reoffer(self.rotation, sender, message)
        return None


class _Group:
    """One queue group on one key, on this node (see the module doc)."""

    __slots__ = (
        "config",
        "delivered_remote",
        "dropped",
        "kept",
        "key",
        "members",
        "name",
        "reoffered",
        "rotations",
        "told",
        "told_to",
        "totals",
    )

    def __init__(self, key: Any, name: str, totals: QueueTotals) -> None:
        self.key = key
        self.name = name
        self.totals = totals
        #: set by the first local member that brings options (proxies bring none)
        self.config: QueueGroup | None = None
        self.members: list[Any] = []
        #: per publisher category 0..4; 3 (remote origin) never holds a proxy;
        #: 4 (forwarded origin) holds the other forwarding parties' (bus/routing.py)
        self.rotations = (
            _Rotation(self, False),
            _Rotation(self, False),
            _Rotation(self, False),
            _Rotation(self, True),
            _Rotation(self, False),
        )
        self.kept: collections.deque[tuple[_Rotation, Any, Any]] = collections.deque()
        #: notifications nobody could take (no member, nothing kept) — counted
        self.dropped = 0
        #: notifications whose member left before taking them, handed on
        self.reoffered = 0
        #: notifications that came from another node for this group
        self.delivered_remote = 0
        #: the remote-capable local member count last told to remote parties
        self.told = 0
        #: the count last told to each forwarding party (bus/routing.py)
        self.told_to: dict[Any, int] = {}

    @property
    def keep(self) -> int:
        return self.config.keep if self.config is not None else 0

    def configure(self, config: QueueGroup) -> None:
        if self.config is None:
            self.config = config
        elif config != self.config:
            raise UsageError(
                f"queue group {self.name!r} on {self.key} already exists as {self.config!r}; "
                f"this subscription asks for {config!r}: give every member the same options "
                f"(or a plain name, which joins with the group's)"
            )

    def rebuild(self) -> None:
        """Recompute every rotation from the member list (under the router lock)."""
        least = self.config is not None and self.config.balance == "least_loaded"
        for c, rotation in enumerate(self.rotations):
            targets: list[Callable[[Any], object] | _LocalTarget] = []
            locals_: list[_LocalTarget] = []
            for m in self.members:
                if not MATCH[c][m.cat]:
                    continue
                if m.remote is not None:
                    if rotation.only_local:
                        continue  # never forward a remote-origin message again
                    targets.extend([m.route] * m.weight)
                else:
                    target = _LocalTarget(m, rotation)
                    targets.append(target)
                    locals_.append(target)
            rotation.targets = tuple(targets)
            rotation.locals = tuple(locals_) if least and len(locals_) > 1 else ()

    def reaches(self, c: int) -> bool:
        """True when category ``c`` publishers should route to this group: a
        member they may reach, or no member at all (then the group keeps or
        drops, and counts)."""
        return bool(self.rotations[c].targets) or not self.members

    def remote_members(self) -> int:
        """Local members a remote node may reach (remote-capable scopes)."""
        return sum(1 for m in self.members if m.remote is None and m.cat in (1, 2))

    def keep_or_drop(self, rotation: _Rotation, sender: Any, message: Any) -> None:
        if len(self.kept) < self.keep:
            self.kept.append((rotation, sender, message))
            return
        self.dropped += 1
        self.totals.dropped += 1
        if self.dropped == 1 or self.dropped % 10_000 == 0:
            logger.warning(
                "queue group {!r} on {} has no member{}: {} notification(s) dropped so far; "
                "subscribe a member, or give the group keep=N to hold some for the next one",
                self.name,
                self.key,
                "" if self.keep == 0 else f" and holds {self.keep} already",
                self.dropped,
            )

    def flush_kept(self) -> None:
        """Hand the kept notifications to members (after a member joined)."""
        while self.kept:
            rotation, sender, message = self.kept[0]
            if not rotation.targets:
                return
            self.kept.popleft()
            rotation.deliver_from(sender, message)

    def reoffer(self, rotation: _Rotation, sender: Any, message: Any) -> None:
        """A member left before taking ``message``: the next member of the
        rotation it came through gets it (or the group keeps or drops it)."""
        self.reoffered += 1
        self.totals.reoffered += 1
        rotation.deliver_from(sender, message)

    def discard(self) -> None:
        """The key is no longer in use: what the group kept is dropped, counted."""
        if self.kept:
            n = len(self.kept)
            self.kept.clear()
            self.dropped += n
            self.totals.dropped += n
            logger.warning(
                "queue group {!r} on {}: its key is no longer in use; {} kept "
                "notification(s) dropped",
                self.name,
                self.key,
                n,
            )


class QueueTotals:
    """Counters of every queue group of a router, groups gone included."""

    __slots__ = ("dropped", "reoffered")

    def __init__(self) -> None:
        #: notifications no member could take (no member, nothing kept)
        self.dropped = 0
        #: notifications a leaving member handed back to its group
        self.reoffered = 0

    def __repr__(self) -> str:
        return f"<QueueTotals dropped={self.dropped} reoffered={self.reoffered}>"
