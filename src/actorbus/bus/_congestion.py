"""Publisher back-pressure in the router: which publishers' routes reach a
congested transport (bus/party.py, ``congested``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .party import RemoteParty

__all__ = ["Congestion"]


class Congestion:
    """The router's congestion marks (a part of :class:`~actorbus.bus.router.Router`)."""

    lock: threading.RLock
    entries: dict[Any, Any]
    _congested: dict[int, Any]
    _congested_pubs: int

    def set_congestion(self, party: RemoteParty, congested: bool) -> None:
        """(the transport's thread) ``party``'s output queue went over its high-water
        mark (``congested``) or back under its low-water mark: every publisher
        whose routes reach that transport (the party's proxy subscribers) is
        marked, and told on change (``PublishFeed.congestion_changed``).  The
        publish loop is untouched: the mark is made here, when routes or
        congestion change, never per message."""
        with self.lock:
            if not party._attached:
                return
            transport = party.transport
            if congested:
                self._congested[id(transport)] = transport
            else:
                self._congested.pop(id(transport), None)
            for key in list(party._subs):
                entry = self.entries.get(key)
                if entry is not None:
                    self._recongest(entry)

    def _recongest(self, entry: Any) -> None:
        """(under the lock) Mark each publisher of ``entry`` congested when a route
        of its category reaches a congested transport (a proxy subscriber's
        route is its transport's ``send_notify``)."""
        congested = self._congested
        routes = entry.routes
        for p in entry.pubs:
            now = bool(congested) and any(
                id(getattr(r, "__self__", None)) in congested for r in routes[p.cat][1]
            )
            if now is not p._congested:
                self._congested_pubs += 1 if now else -1
                p.congestion_changed(now)
