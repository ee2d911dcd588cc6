"""Routes stamped with their publisher's :class:`~actorbus.bus.sender.Sender`.

Each publisher keeps its own copy of its category's routes (``PublishFeed.routes``),
every delivery in it bound to the publisher's Sender, remade whenever the key's
routes change (:func:`restamp`, under the router lock).  So a subscriber learns
who sent each message at no cost to the publish loop, which reads one attribute
instead of indexing the entry's table:

* a subscriber's delivery becomes a :class:`~actorbus.bus.feeds.Stamped`'s
  bound method (cheaper to call than a ``functools.partial``);
* a queue group's rotation gets ``partial(rotation.deliver_from, sender)``;
* a link's ``send_notify`` becomes ``partial(transport.send_notify_from,
  sender)`` when the transport has it, so the link can name the publisher to
  its peer (a SENDER frame when it changes);
* anything else is kept as it is.

A remote party stamps the routes of its proxy publishers the same way, once per
(key, sender) the peer names (:func:`stamped`, cached by the party).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .feeds import Stamped, SubscribeFeed
from .queues import _Rotation
from .routing import horizon
from .sender import Sender

__all__ = ["Routes", "restamp", "stamped"]

#: (inlined mailbox posts, other delivery callables): one category's routes.
Routes = tuple[tuple[tuple[Any, ...], ...], tuple[Callable[[Any], object], ...]]


def restamp(entry: Any) -> None:
    """(under the router lock) Remake every publisher's stamped routes of ``entry``."""
    routes = entry.routes
    for p in entry.pubs:
        p.routes = stamped(horizon(routes[p.cat], p), p.stamp)


def stamped(routes: Routes, sender: Sender) -> Routes:
    """``routes`` with every delivery bound to ``sender``."""
    local, other = routes
    return (
        tuple(
            (put, claim, schedule, box, _stamp(deliver, sender))
            for put, claim, schedule, box, deliver in local
        ),
        tuple(_stamp_route(route, sender) for route in other),
    )


def _stamp(deliver: Any, sender: Sender) -> Callable[[Any], object]:
    """A subscriber's ``_deliver``/``_deliver_if``, stamped with ``sender``."""
    stamp = Stamped(deliver.__self__, sender)
    if deliver.__func__ is SubscribeFeed._deliver:
        return stamp.deliver
    return stamp.deliver_if


def _stamp_route(route: Any, sender: Sender) -> Callable[[Any], object]:
    owner = getattr(route, "__self__", None)
    if isinstance(owner, SubscribeFeed):  # a feed without a mailbox: its delivery
        return _stamp(route, sender)
    if isinstance(owner, _Rotation):  # a queue group
        return functools.partial(owner.deliver_from, sender)
    if isinstance(route, functools.partial) and len(route.args) == 1:
        inner = route.args[0]  # partial(post, delivery): another poster
        if isinstance(getattr(inner, "__self__", None), SubscribeFeed):
            return functools.partial(route.func, _stamp(inner, sender))
    if getattr(route, "__name__", None) == "send_notify":  # a link
        send_from = getattr(owner, "send_notify_from", None)
        if send_from is not None:
            return functools.partial(send_from, sender)
    return route  # type: ignore[no-any-return]
