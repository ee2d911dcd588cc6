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

The record is bounded, whatever the peers send: ``MAX_IN_FLIGHT`` requests
per node, past which a request is passed on untracked (counted in
``untracked``; it ends at its timeout if a link after this node drops), and
``MAX_IN_FLIGHT_BYTES`` of request bodies, past which a request is kept
without its body (its bounce then carries an empty ``body``; the origin still
has its request).  The bodies kept are the bytes that were passed on, never
decoded or copied.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .party import RemoteParty
    from .routed import RoutedFrame

__all__ = ["MAX_IN_FLIGHT", "MAX_IN_FLIGHT_BYTES", "InFlight"]

#: most routed requests a node keeps as passed on and not ended
MAX_IN_FLIGHT: Final = 4_096
#: most bytes of their bodies it keeps (for their bounces' ``body``)
MAX_IN_FLIGHT_BYTES: Final = 4 << 20

#: (node id of the link it went out on, origin node, origin's request id)
_Key = tuple[str, str, int]


class InFlight:
    """The routed requests this node passed on and has not seen end."""

    def __init__(self, limit: int = MAX_IN_FLIGHT, limit_bytes: int = MAX_IN_FLIGHT_BYTES) -> None:
        self._lock = threading.Lock()
        #: the bounds (``MAX_IN_FLIGHT``, ``MAX_IN_FLIGHT_BYTES``), read at each request
        self.limit = limit
        self.limit_bytes = limit_bytes
        self._bytes = 0
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
            old = self._kept.get(key)
            if old is not None:  # the same request passed twice (a route through here twice)
                self._bytes -= len(old[0].body)
            elif len(self._kept) >= self.limit:
                self.untracked += 1
                return False
            if self._bytes + len(frame.body) > self.limit_bytes:
                frame = type(frame)(*frame[:7], b"")
            self._bytes += len(frame.body)
            self._kept[key] = (frame, came, out)
        return True

    def ended(self, out_node: str, origin: str, request_id: int) -> None:
        """The request ``request_id`` of ``origin`` that went out to ``out_node``
        ended (its last reply or bounce came back, or its cancel went on)."""
        with self._lock:
            old = self._kept.pop((out_node, origin, request_id), None)
            if old is not None:
                self._bytes -= len(old[0].body)

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
                self._bytes -= len(frame.body)
        return lost, orphaned
