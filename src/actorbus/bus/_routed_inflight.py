"""Routed requests a node passed on and has not seen end: what it needs to
bounce them when a link drops (bus/routed.py, docs/routing.md "When a link on
the route drops").

A node that passes a source-routed REQUEST on keeps it here, keyed by the link
it went out on, the origin and the origin's request id, until the request's
last reply (a ``KIND_LAST_REPLY`` frame) or its bounce passes back, or its
cancel passes on.  When the outgoing link drops, the node bounces every request
kept for it back along ``route_from``, so the origin ends it with an ERROR reply
naming this node and the lost link instead of waiting for its timeout; when
the incoming link drops, nobody is left to answer, so the node sends the
request's cancel on.

The record is bounded (``MAX_IN_FLIGHT`` requests per node, whatever the
peers send): past it a request is passed on untracked, counted in
``untracked``, and ends at its timeout if a link after this node drops.  It
keeps the frame as passed on without its body (``b""``): the forwarder never
holds the bodies it passed on, and the origin still has its request.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .party import RemoteParty
    from .routed import RoutedFrame

__all__ = ["MAX_IN_FLIGHT", "InFlight"]

#: most routed requests a node keeps as passed on and not ended
MAX_IN_FLIGHT: Final = 4_096

#: (node id of the link it went out on, origin node, origin's request id)
_Key = tuple[str, str, int]


class InFlight:
    """The routed requests this node passed on and has not seen end."""

    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        #: key -> (the frame as passed on, body emptied; in link's party; out link's party)
        self._kept: dict[_Key, tuple[RoutedFrame, RemoteParty, RemoteParty]] = {}
        #: requests passed on without a record, the record being full
        self.untracked = 0

    def __len__(self) -> int:
        return len(self._kept)

    def passed(self, frame: RoutedFrame, came: RemoteParty, out: RemoteParty) -> bool:
        """``frame`` (a REQUEST, ``route_from`` ending with this node) went out
        to ``out``, having come from ``came``; False when the record is full."""
        key = (out.name, frame.route_from[0], frame.request_id)
        with self._lock:
            if len(self._kept) >= self._limit and key not in self._kept:
                self.untracked += 1
                return False
            self._kept[key] = (type(frame)(*frame[:7], b""), came, out)
        return True

    def ended(self, out_node: str, origin: str, request_id: int) -> None:
        """The request ``request_id`` of ``origin`` that went out to ``out_node``
        ended (its last reply or bounce came back, or its cancel went on)."""
        with self._lock:
            self._kept.pop((out_node, origin, request_id), None)

    def dropped(
        self, party: RemoteParty
    ) -> tuple[list[tuple[RoutedFrame, RemoteParty]], list[tuple[RoutedFrame, RemoteParty]]]:
        """The link to ``party`` is gone: the requests that went out on it (each
        with the party it came from) and those that came in on it (each with the
        party it went out to), forgotten."""
        lost: list[tuple[RoutedFrame, RemoteParty]] = []
        orphaned: list[tuple[RoutedFrame, RemoteParty]] = []
        with self._lock:
            for key, (frame, came, out) in list(self._kept.items()):
                if out is party:
                    lost.append((frame, came))
                elif came is party:
                    orphaned.append((frame, out))
                else:
                    continue
                del self._kept[key]
        return lost, orphaned
