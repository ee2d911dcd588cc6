"""Who sent a message: :class:`Sender`, given with every delivery.

A subscriber's message callback reads ``feed.sender``; a replier reads
``request.sender`` (an :class:`~actorbus.IncomingRequest`); a requestor's reply
callback reads ``handle.sender`` (a :class:`~actorbus.RequestHandle`).  Each is
the sender of the message being delivered, valid during that callback (an
actor's callbacks never overlap, so it is not overwritten while one runs).

A message sent on this node names its sender exactly: this node's id, the
sending actor's name (None for a feed without an actor) and the feed's id
(unique per bus).  A message that came over a link names the node it came from
(the link's authenticated peer), with ``hops`` 1, and the actor and feed the
peer's node said sent it (a transport that does not say gives None and 0).
A source-routed message (docs/routing.md, "Source routes and bounces") names
its origin node, the links it crossed as ``hops`` and the nodes it crossed as
``path`` (its route-from list: the origin first, this node last); every other
message has an empty ``path``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Sender"]


class Sender(NamedTuple):
    """The node, actor and feed a delivered message came from."""

    #: the id of the node the message was published (or requested, replied) on
    node: str
    #: the name of the actor that owns the sending feed; None without an actor
    actor: str | None
    #: the sending feed's id (unique on its node's bus; 0 when not known)
    feed: int
    #: links crossed: 0 for this node's own feeds
    hops: int
    #: the nodes a source-routed message crossed, origin first and this node
    #: last (its route-from list); empty for every other message
    path: tuple[str, ...] = ()


def sender_of(node: str, owner: object, feed_id: int, remote: object | None) -> Sender:
    """The :class:`Sender` a feed stamps on what it sends: its own node and
    actor, or (a proxy of a peer's feed) the peer's node one hop away."""
    if remote is not None:
        return Sender(str(remote), None, 0, 1)
    name = getattr(owner, "name", None)
    return Sender(node, name if isinstance(name, str) else None, feed_id, 0)
