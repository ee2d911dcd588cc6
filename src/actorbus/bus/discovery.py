"""Discovery: the topics and queue groups in use, on this node and bus-wide.

A :class:`Topic` is one row of the answer: the feeds of one role on one key
(or one wildcard pattern) with one scope and, for queue members, one group —
how many there are and how many of them are UP.  :func:`local_topics` lists
this node's own feeds; the bus-wide view goes through the bus itself:

* every node advertises a replier for :class:`DiscoverTopics` on the reserved
  system subject, owned by the node's system owner (so the reserved-subject
  check lets it in) and hidden from discovery itself.  Its scope is
  REMOTE_ONLY: it answers the node's peers;
* it answers with its :func:`local_topics` (:func:`answer`), in
  :class:`TopicsFound` replies of at most :data:`ROWS_PER_REPLY` rows;
* ``Bus.topics()`` reads its own node's :func:`local_topics`, sends one
  REMOTE_ONLY request (it reaches each linked node's replier, not its own) and
  merges the rows (:func:`merge`).

So a hidden key stays hidden where it is opened (the node leaves it out of its
own answer), and nothing new crosses the wire: a request and its replies, as
any application's.

What is listed: every placed feed of this node's own (a remote peer's proxies
are that peer's to list) except those opened with ``discoverable=False``, those
on a private subject (``.``-prefixed, :func:`~actorbus.bus.subjects.is_private`)
whatever the option, and the node's system feeds on the reserved subject.  A
wildcard subscription is one row under its pattern (``wildcard`` names its
dialect), not one per key it joined; the members of a queue group are one row
with the group's name.

"UP" is what the role's state means: a publisher or replier that declared
itself UP (it publishes, it takes requests), a subscriber or requestor that was
told UP (some in-scope publisher or replier is there).

The router's tables are read under its lock and copied; the bus core shares its
private names on purpose (see :mod:`actorbus.bus._feed`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._log import logger
from ..errors import UsageError
from .message import Field, Reply, ReplyStatus, Request
from .scope import Scope
from .subjects import is_private

if TYPE_CHECKING:
    from .requests import IncomingRequest
    from .router import Router

__all__ = [
    "ROLES",
    "ROWS_PER_REPLY",
    "DiscoverTopics",
    "Topic",
    "TopicRow",
    "TopicsFound",
    "answer",
    "local_topics",
    "merge",
]

#: the roles of a :class:`Topic`, in the order a listing shows them for one key.
ROLES = ("publisher", "subscriber", "requestor", "replier")

#: at most this many rows per :class:`TopicsFound` reply: a node with many
#: topics answers with a stream of replies, each well under a link's frame limit.
ROWS_PER_REPLY = 500


@dataclass(frozen=True, slots=True)
class Topic:
    """One row of discovery: the feeds of one role on one key, scope and group
    (immutable, compared and hashed by value; lists sort by :meth:`sort_key`)."""

    node: str
    """The node id of the node whose feeds these are."""
    message_type: str
    """The message class's type name, as on the wire (``type_name=``)."""
    subject: str
    """The subject, or a wildcard subscription's pattern text."""
    wildcard: str | None
    """None for an exact subject, else the pattern's dialect: ``"levels"`` or ``"prefix"``."""
    role: str
    """``"publisher"``, ``"subscriber"``, ``"requestor"`` or ``"replier"``."""
    scope: str
    """The feeds' :class:`~actorbus.Scope` name (``"LOCAL_AND_REMOTE"``, ...)."""
    queue: str | None
    """The queue group's name for its members, else None."""
    count: int
    """How many feeds the row stands for."""
    up: int
    """How many of them are UP: publishers and repliers that declared UP,
    subscribers and requestors that were told UP."""

    def sort_key(self) -> tuple[str, str, str, str, int, str, str]:
        """Node, type, subject, dialect, role (in :data:`ROLES` order), scope, group."""
        return (
            self.node,
            self.message_type,
            self.subject,
            self.wildcard or "",
            ROLES.index(self.role) if self.role in ROLES else len(ROLES),
            self.scope,
            self.queue or "",
        )


# ------------------------------------------------------------- on the wire
class TopicRow(Field, type_name="actorbus.TopicRow"):
    """A :class:`Topic` as it travels in a :class:`TopicsFound` reply."""

    node: str
    message_type: str
    subject: str
    role: str
    scope: str
    count: int
    up: int
    wildcard: str | None = None
    queue: str | None = None


class TopicsFound(Reply, type_name="actorbus.TopicsFound"):
    """A node's answer to :class:`DiscoverTopics`: some or all of its rows (a
    node with more than :data:`ROWS_PER_REPLY` rows streams them)."""

    rows: tuple[TopicRow, ...] = ()


class DiscoverTopics(Request, type_name="actorbus.DiscoverTopics", replies=(TopicsFound,)):
    """Asks every node's discovery replier for its topics; ``scope`` (a
    :class:`~actorbus.Scope` name) keeps only the feeds of that scope."""

    scope: str | None = None


# ------------------------------------------------------------- this node
def _check_scope(scope: object) -> Scope | None:
    if scope is None or isinstance(scope, Scope):
        return scope
    raise UsageError(
        f"scope must be a Scope or None, found {scope!r}; pass Scope.LOCAL_ONLY, "
        f"Scope.LOCAL_AND_REMOTE or Scope.REMOTE_ONLY, or None for every scope"
    )


def _listed(feed: Any, router: Router, scope: Scope | None) -> bool:
    """True when discovery lists ``feed`` (see the module docstring)."""
    if feed.remote is not None or not feed.discoverable:
        return False
    if scope is not None and feed.scope is not scope:
        return False
    subject = feed.key.subject
    if subject == router.reserved_subject and feed.owner is router.reserved_owner:
        return False
    return not is_private(subject)


# (message type, subject, wildcard dialect, role, scope, queue) -> [count, up]
_Rows = dict[tuple[str, str, str | None, str, str, str | None], list[int]]


def _count(rows: _Rows, feed: Any, role: str, up: bool, wildcard: str | None = None) -> None:
    key = feed.key
    group: str | None = getattr(feed, "group", None)
    cell = rows.setdefault(
        (key.message_class.__type_name__, key.subject, wildcard, role, feed.scope.name, group),
        [0, 0],
    )
    cell[0] += 1
    cell[1] += up


def local_topics(router: Router, node_id: str, *, scope: Scope | None = None) -> list[Topic]:
    """This node's topics: its own placed feeds (not a peer's proxies), grouped by
    (message type, subject or pattern, role, scope, queue group) and sorted; with
    ``scope``, only the feeds of that scope.  Hidden feeds, private subjects and
    the system subject's own feeds are left out (see the module docstring).

    Raises :class:`~actorbus.UsageError` when ``scope`` is not a Scope or None."""
    wanted = _check_scope(scope)
    rows: _Rows = {}
    with router.lock:
        for entry in router.entries.values():
            for pub in entry.pubs:
                if _listed(pub, router, wanted):
                    _count(rows, pub, "publisher", pub.declared)
            for sub in entry.subs:
                # a wildcard subscription joined to this key is listed once, below
                if sub.wild is None and _listed(sub, router, wanted):
                    _count(rows, sub, "subscriber", sub.reported)
            for req in entry.requestors:
                if _listed(req, router, wanted):
                    _count(rows, req, "requestor", req.reported)
            for rep in entry.repliers:
                if _listed(rep, router, wanted):
                    _count(rows, rep, "replier", rep.declared)
        for index in router.wild.values():
            for wild, bucket in index._buckets.items():
                for _, value in bucket:
                    # a remote party's pattern is a PatternWatch, not a feed
                    if getattr(value, "wild", None) is wild and _listed(value, router, wanted):
                        _count(rows, value, "subscriber", value.reported, wild.dialect)
    topics = [
        Topic(node_id, mtype, subject, wildcard, role, scope_name, queue, count, up)
        for (mtype, subject, wildcard, role, scope_name, queue), (count, up) in rows.items()
    ]
    topics.sort(key=Topic.sort_key)
    return topics


# ------------------------------------------------------------- bus-wide
def _to_row(topic: Topic) -> TopicRow:
    return TopicRow(
        node=topic.node,
        message_type=topic.message_type,
        subject=topic.subject,
        role=topic.role,
        scope=topic.scope,
        count=topic.count,
        up=topic.up,
        wildcard=topic.wildcard,
        queue=topic.queue,
    )


def _chunks(topics: list[Topic]) -> Iterator[tuple[TopicRow, ...]]:
    it = iter(topics)
    while chunk := tuple(_to_row(t) for t in itertools.islice(it, ROWS_PER_REPLY)):
        yield chunk


def answer(incoming: IncomingRequest[DiscoverTopics], router: Router, node_id: str) -> None:
    """(the discovery replier's request callback) Answer ``incoming`` with this
    node's :func:`local_topics`: one :class:`TopicsFound` reply per
    :data:`ROWS_PER_REPLY` rows, the last one final.  Never raises (it runs on
    whichever thread brought the request, a link's I/O thread included): a
    failure is an ERROR reply naming it."""
    request = incoming.request
    subject = request.subject
    try:
        if request.scope is not None and request.scope not in Scope.__members__:
            raise UsageError(
                f"unknown scope {request.scope!r}; expected one of "
                f"{', '.join(Scope.__members__)} or none"
            )
        scope = Scope[request.scope] if request.scope is not None else None
        chunks = list(_chunks(local_topics(router, node_id, scope=scope)))
        for chunk in chunks[:-1]:
            incoming.reply(TopicsFound(subject, status=ReplyStatus.OK_CONTINUING, rows=chunk))
        incoming.reply(TopicsFound(subject, rows=chunks[-1] if chunks else ()))
    except Exception as exc:
        logger.warning("discovery on node {}: {}", node_id, exc)
        if incoming.is_active:
            incoming.reply(
                Reply(
                    subject,
                    status=ReplyStatus.ERROR,
                    reason=f"node {node_id}: {type(exc).__name__}: {exc}",
                )
            )


def merge(replies: Iterable[Reply], local: Iterable[Topic] = ()) -> list[Topic]:
    """``local`` and the rows of every :class:`TopicsFound` among ``replies``,
    sorted; other replies (a node's ERROR answer, a timeout's) are left out."""
    topics = list(local)
    topics += [
        Topic(
            row.node,
            row.message_type,
            row.subject,
            row.wildcard,
            row.role,
            row.scope,
            row.queue,
            row.count,
            row.up,
        )
        for reply in replies
        if isinstance(reply, TopicsFound)
        for row in reply.rows
    ]
    topics.sort(key=Topic.sort_key)
    return topics
