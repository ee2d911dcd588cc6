"""Reliable UDP multicast channels (docs/multicast.md).

A channel carries one node's notifications once to every node that joined
the same IPv4 multicast group and port; receivers recover losses with NAKs
from the publisher's retransmit cache.  The wire rules live in modules with
no I/O — :mod:`.datagram` (encoding, limits, the MAC), :mod:`.publisher`
(sequencing, segmentation, the retransmit cache), :mod:`.receiver` (order,
gaps, NAK suppression, reassembly, heartbeats, the nagging monitor) and
:mod:`.channel` (both halves behind one datagram entry point) — and the
socket shell that joins a channel to the bus through its transport seam
lives in :mod:`.transport`.
"""

from __future__ import annotations

from .channel import ChannelProtocol, new_stream

__all__ = ["ChannelProtocol", "new_stream"]
