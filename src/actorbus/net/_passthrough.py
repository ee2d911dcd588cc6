"""A forwarder's pass-through on the sending side: a run of notifications
queued as the wire bodies another link received.

``ForwardingParty.pass_run`` (:mod:`actorbus.bus._forwarding_party`) hands
the bodies of a run that only other forwarding links need to each such link's
``send_bodies_from``; the run is queued as one item (``OP_BODIES``) behind the
Sender it names, as ``send_notify_from`` queues a message, and ``_drain``
encodes it into NOTIFY_RUN frames (``LinkProtocol.notify_many``) with no
message object made or encoded on the way.  Until it is encoded the run counts
as one data message against ``message_queue_size`` (once encoded, one per
notification; ``message_queue_bytes`` counts its bytes either way, at the
measured bytes per pending item); a run dropped when the connection ends is
counted per notification.

Threads: the receiving link's loop thread (any thread would do, as for every
``send_*``).
"""

from __future__ import annotations

from typing import Any

from ..bus.sender import Sender
from ._connection_base import OP_BODIES
from ._inbound import Inbound
from .protocol import WireKey

__all__ = ["PassThrough"]


class PassThrough(Inbound):
    """``send_bodies_from`` (mixed into ``_Connection``)."""

    def send_bodies_from(self, sender: Sender, wire_key: WireKey, bodies: list[Any]) -> None:
        """Queue notifications on ``wire_key`` as their wire ``bodies`` (read, never
        changed: other links may hold the same list), published by ``sender``."""
        if self.open:
            self.pending.extend((sender, (OP_BODIES, wire_key, bodies)))
            if not self.scheduled:
                self.scheduled = True
                try:
                    self._schedule_flush()
                except RuntimeError:  # the loop is closed: the node is gone
                    self.link.count_dropped(len(bodies))
        else:
            self.link.count_dropped(len(bodies))
