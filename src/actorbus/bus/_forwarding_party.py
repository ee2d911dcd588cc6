"""Feed forwarding without decoding: a forwarding party passes a run of
notifications on as the encoded bodies it received.

A notification that arrives on a forwarding link and matches only proxies of
other forwarding links (no subscriber on this node needs the message object)
goes on to those links as the wire bodies the peer sent: the link does not
decode each body into its class and the next link does not encode it back
(:meth:`ForwardingParty.pass_run`).  Anything else — a subscriber here, a feed
without a mailbox, a queue group, a transport that cannot take bodies (a J.REP
session) — takes the ordinary path (:meth:`RemoteParty.notify_run`), so a
local subscriber on a forwarder still receives decoded messages.

What a forwarder so no longer checks: that each body decodes into its class.
The frame was parsed (it is well-formed msgpack on a key the peer defined and
advertised, in sequence), the hop limit and the peer's permissions apply as
before; a body that does not decode is caught by the first node that decodes
it, the one with a subscriber, which closes *its* link to the forwarder as for
any corrupt body (docs/routing.md, "Pass-through").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .message import MessageKey, Reply
from .party import RemoteParty
from .sender import Sender

if TYPE_CHECKING:
    from .requests import RequestHandle

__all__ = ["ForwardingParty"]

#: (a transport's ``send_bodies_from``, the Sender it names): one link a run goes to
_Target = tuple[Callable[[Sender, Any, Any], None], Sender]

_NO_PLAN: tuple[Any, tuple[_Target, ...] | None] = (None, None)


def _plan(other: tuple[Any, ...]) -> tuple[_Target, ...] | None:
    """The links the routes ``other`` go to, when every one of them is a link's
    stamped ``send_notify_from`` whose transport takes bodies; else None."""
    targets: list[_Target] = []
    for route in other:
        if not isinstance(route, functools.partial) or len(route.args) != 1:
            return None
        func = route.func
        if getattr(func, "__name__", None) != "send_notify_from":
            return None
        send = getattr(getattr(func, "__self__", None), "send_bodies_from", None)
        if send is None:
            return None
        targets.append((send, route.args[0]))
    return tuple(targets)


class ForwardingParty(RemoteParty):
    """The party of a forwarding link (``attach(..., forward=True)``): a
    :class:`RemoteParty` that can pass notification runs on undecoded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (the routes a plan was made of, the plan): the last one made
        self._last_plan = _NO_PLAN
        #: runs / notifications passed on undecoded (each counted once however
        #: many links it went to)
        self.passed_runs = 0
        self.passed = 0

    def _proxy_reply(
        self,
        remaining: int,
        reply: Reply,
        handle: RequestHandle[Any],
        sender: Sender | None = None,
    ) -> None:
        """:meth:`RemoteParty._proxy_reply`, once the acknowledgements of the
        hops the request went on to are added up (a reply may wait for them)."""
        peer_id = handle.peer_id
        if self._in.get(peer_id) is not handle:
            return
        acks = self._acks
        assert acks is not None  # (every forwarding party adds them up)
        if acks.hold(peer_id, remaining, reply, sender):
            return
        super()._proxy_reply(remaining, reply, handle, sender)

    def pass_run(self, key: MessageKey, wire_key: Any, bodies: Any, sender: Sender | None) -> bool:
        """(the link's loop) Notifications from the peer on ``key`` as their wire
        bodies (``wire_key``: the key as the wire names it): passed on to every
        forwarding link they match, when only such links match, and True; False
        (nothing done) when they must be decoded (``notify_run``).  ``bodies`` is
        the caller's no more: a transport may hold it until written."""
        pub = self._pubs.get(key)
        if pub is None or not pub.declared:
            return False  # notify_run counts or drops them
        local, other = pub.routes if sender is None else self._routes_as(pub, sender)
        if local or not other:
            return False
        last = self._last_plan
        if last[0] is other:
            plan = last[1]
        else:
            plan = _plan(other)
            self._last_plan = (other, plan)
        if plan is None:
            return False
        bodies = list(bodies)  # one list, read by every link it goes to
        n = len(bodies)
        if self._passes(pub, sender, n):
            self.passed_runs += 1
            self.passed += n
            for send, stamp in plan:
                send(stamp, wire_key, bodies)
        return True
