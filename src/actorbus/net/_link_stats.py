"""The counters of a link (:attr:`~actorbus.net.link.Link.counters`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["LinkStats"]


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Counters of one link, summed over every connection it has had.

    Read them at any time with :attr:`Link.counters`; the numbers of the
    connection in progress are read without stopping it, so two fields may be
    a few messages apart."""

    #: Data messages (notify, group notify, request, request ack, reply, cancel)
    #: handed to / parsed from the socket.
    messages_out: int = 0
    messages_in: int = 0
    #: Bytes written to / read from the socket.
    bytes_out: int = 0
    bytes_in: int = 0
    #: Frames of every kind written / read.
    frames_out: int = 0
    frames_in: int = 0
    #: Data messages that never reached the socket: queued when the link died,
    #: over the queue limit, too large to send, or sent to a link already gone.
    dropped: int = 0
    #: Data messages written to a connection that broke and never read by the
    #: peer, learnt from the peer's RECEIPT at the next logon (a peer that
    #: restarted: everything its last receipt did not cover).
    lost: int = 0
    #: Frames that broke the protocol, or message bodies that did not decode.
    corrupt_frames: int = 0
    #: Frames about a message type this node does not define (dropped).
    unknown_types: int = 0
    #: Messages from the peer on keys it never advertised (dropped by the router).
    unexpected: int = 0
    #: Actions the link's permissions refused the peer (advertisements,
    #: subscriptions, group joins, requests; a pattern narrowed once).
    authz_refusals: int = 0
    #: Sequence-number gaps and duplicates seen in what the peer sent.
    gaps: int = 0
    duplicates: int = 0
    #: Heartbeats sent / answered.
    heartbeats_out: int = 0
    heartbeats_in: int = 0
    #: TCP connections made (dialled or accepted), and logons completed.
    connections: int = 0
    logons: int = 0
    #: Logons this node refused (one link per pair of nodes, or its own node id).
    refused_logons: int = 0
    #: Logons refused because the peer did not prove this link's secret (a wrong
    #: secret, none, or a stranger claiming a node's id); nothing of this node's
    #: identity or feeds was sent to it.
    auth_failures: int = 0
    #: TLS handshakes that failed: a certificate refused (either way), a peer
    #: that does not speak TLS to a node that does, or one that closed the
    #: connection during the handshake.
    tls_failures: int = 0
    #: Dial attempts after the first (a client link that lost or never got its
    #: connection and tried again).
    reconnects: int = 0
    #: Times the link stopped reading because a mailbox or inbox it feeds was over
    #: ``input_backlog`` (input back-pressure).
    input_pauses: int = 0
    #: Connections closed because the peer went over a limit: keys, subject
    #: length, feeds, patterns or groups it may hold, a frame not whole within
    #: ``frame_timeout``, or an output queue over ``message_queue_size`` /
    #: ``message_queue_bytes``.
    over_limit: int = 0
    #: Times the output queue went over ``message_queue_high_water`` and the
    #: publishers sending to the peer were told the link is congested.
    congestions: int = 0
    #: Source-routed messages this node passed on to the peer (docs/routing.md,
    #: "Source routes and bounces").
    routed_forwarded: int = 0
    #: Source-routed messages from the peer this node could not pass on and
    #: bounced back to their sender (unknown next node, hop limit, refused by
    #: its permissions, a link that does not forward).
    routed_bounced: int = 0
    #: (a forwarding link, docs/routing.md) data messages from the peer passed on
    #: to other forwarding links, one per link; notifications from it dropped
    #: past the link's ``maxHops``
    forwarded: int = 0
    hop_limited: int = 0
    #: (a forwarding link) notifications from the peer passed on to other
    #: forwarding links as the wire bodies received, not decoded here (each
    #: counted once; docs/routing.md, "Pass-through")
    passed_through: int = 0

    def __add__(self, other: LinkStats) -> LinkStats:
        return LinkStats(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))
