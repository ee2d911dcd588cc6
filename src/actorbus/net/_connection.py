"""One TCP connection of a link: the asyncio protocol object, the logon, timers, ending.

:class:`_Connection` is what asyncio drives (a ``BufferedProtocol``): one socket,
one :class:`~actorbus.net.protocol.LinkProtocol`, one
:class:`~actorbus.bus.party.RemoteParty` in the router once logged on.  It is
assembled from the parts in :mod:`~actorbus.net._outbound` (what the router
sends) and :mod:`~actorbus.net._inbound` (what the peer sends); this module
adds the asyncio callbacks, the logon, the timers and the end.

**Logon.**  When the peer's logon names it (``LogonRequested`` on the
accepting side, ``LogonAccepted`` on the dialling side) the connection claims
the peer for the one-link rule (:meth:`~actorbus.net.node.NodeNet.claim`),
settles the receipt accounts, sends its RECEIPT, attaches to the router (which
queues every advertisement), sends them and LOGON_COMPLETE; it is logged on
once the peer's LOGON_COMPLETE is in too.

**Timers.**  The protocol says when it next needs ``tick()``
(``next_deadline()``); one ``call_at`` timer is kept per connection and only
moved earlier, never re-armed per received batch.

**Ending.**  See :mod:`actorbus.net.link`: everything goes through ``_end``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from typing import TYPE_CHECKING, Final, cast

from .._log import shown
from ..bus import codec
from ..bus.system import SYSTEM_SUBJECT, LinkLoggedOff, LinkLoggedOn
from ._address import endpoint
from ._connection_base import ABORT, CLOSE, ORDERLY, TELL, locked
from ._inbound import BACKLOG_RECHECK
from ._link_stats import LinkStats
from ._passthrough import PassThrough
from ._tls import handshake_failure
from .protocol import LinkProtocol, ProtocolState, Side

if TYPE_CHECKING:
    from .link import Link
    from .node import NodeNet

__all__ = ["_Connection"]

#: Smallest read buffer, whatever ``input_buffer_size`` says.
_MIN_READ_BUFFER: Final = 4_096
#: How long an orderly close waits for the socket to drain before aborting it.
_CLOSE_GRACE: Final = 1.0
#: Connection events (logged on, closed) of one origin shown in full per log
#: period while it is quiet; a flood of them is summed up once per period.
CONNECTION_BURST: Final = 8
#: Characters of a node id a peer claims that a log line or a reason shows.
NODE_ID_SHOWN: Final = 80


#: SO_LINGER on, zero seconds: close() resets the connection.
_LINGER_RESET: Final = struct.pack("ii", 1, 0)


def _reset(transport: asyncio.Transport) -> None:
    """Abort ``transport`` with a TCP reset.  A plain abort closes the socket,
    and the kernel then still sends what it holds, FIN last: to a peer that
    does not read, nothing at all — it would go on holding its end of the link
    (and this kernel the bytes) until it reads again.  A reset reaches it at
    once, and its kernel says so even while it does not read."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        except OSError:
            pass  # (already closed: nothing to reset)
    transport.abort()


class _Connection(PassThrough):
    """One TCP connection of a link: protocol object, socket, remote party.

    Threads:

    * any thread: the ``send_*`` methods (the router's ``PartyTransport``) and
      :meth:`stats`;
    * a requestor's or replier's thread: ``_write_at_once`` (from
      ``send_request`` / ``send_reply``), only while it holds the write lock,
      which it only tries to take (on the loop's own thread it is uncontended);
    * the link's loop thread, holding the write lock: every other method — the
      asyncio callbacks (``connection_made``, ``buffer_updated``,
      ``eof_received``, ``connection_lost``, ``pause_writing``,
      ``resume_writing``), the timers, the flush, :meth:`logoff`, :meth:`abort`
      and ``_end`` (``get_buffer`` runs there without the lock; it only hands
      out the read buffer).
    """

    def __init__(self, link: Link, net: NodeNet) -> None:
        self._init_state(link, net)
        # Until the peer has logged on it sends handshake frames only (4 KiB at
        # most): a small read buffer, so a connection that never logs on costs
        # little.  The configured one replaces it at logon.
        self.view = memoryview(bytearray(_MIN_READ_BUFFER))
        # on a loop shared with the actors' dispatcher a paused connection looks
        # again right after the mailbox runs this loop has scheduled (they drain
        # on this very thread)
        self._recheck_delay = 0.0 if self.shared is not None else BACKLOG_RECHECK

    def stats(self) -> LinkStats:
        """Counters of this connection (any thread)."""
        proto = self.proto
        if proto is None:
            return LinkStats()
        c = proto.counters
        party = self._unexpected_party
        return LinkStats(
            messages_out=c.messages_out,
            messages_in=c.messages_in,
            bytes_out=c.bytes_out,
            bytes_in=c.bytes_in,
            frames_out=c.frames_out,
            frames_in=c.frames_in,
            corrupt_frames=c.corrupt_frames + self.corrupt,
            unknown_types=c.unknown_type + self.unknown,
            unexpected=party.unexpected if party is not None else 0,
            authz_refusals=party.refused if party is not None else 0,
            routed_forwarded=party.routed_forwarded if party is not None else 0,
            routed_bounced=party.routed_bounced if party is not None else 0,
            forwarded=party.forwarded if party is not None else 0,
            hop_limited=party.hop_limited if party is not None else 0,
            passed_through=getattr(party, "passed", 0),
            gaps=c.gaps,
            duplicates=c.duplicates,
            heartbeats_out=c.heartbeats_out,
            heartbeats_in=c.heartbeats_in,
            refused_logons=self.refused_logons,
            auth_failures=c.auth_failures,
            input_pauses=self.input_pauses,
            over_limit=c.over_limit + self.limit_closes,
            congestions=self.congestions,
        )

    # ------------------------------------------------------------ asyncio side

    @locked
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        link = self.link
        settings = link.settings
        transport.set_write_buffer_limits(high=settings.output_buffer_size)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # Small frames must leave at once (Nagle + delayed ACK = 40 ms stalls).
            # uvloop sets it; asyncio skips sockets that accept() made.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Requests and replies made on other threads may be written from there
            # (when the link is idle) through a descriptor of our own, opened
            # on the link's first one (_open_wfd): one descriptor per connection
            # until then.
            self.direct_ok = True
            if link.tls is not None:
                # TLS records are the transport's to make, on the loop: another
                # thread encodes its frame and hands the bytes over (_outbound.py)
                self._write_direct = self._write_via_loop  # type: ignore[method-assign]
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple) and len(peername) >= 2:
            self.address = endpoint(peername[0], peername[1])
        side = Side.CLIENT if link.initiator else Side.SERVER
        self.proto = LinkProtocol(
            side,
            self.net.node_id,
            self.loop.time(),
            is_known_type=self._known_type,
            settings=settings,
            # nested structs of a subclass travel as ext values the codec reads;
            # one that does not is a corrupt frame (the link closes, it is counted)
            ext_hook=codec.ext_hook,
            # ints beyond 64 bits travel in the codec's wire form (bytes), as in
            # the journal: the receiving codec turns them back into ints
            pack_default=codec.pack_default,
            run_id=self.net.run_id,
            # the link's secret (a service's: the key for the client's node id)
            secret=link.key(),
        )
        self.proto.deliver_data_to(self._take_request, self._take_reply, self._take_ack)
        link.connection_started(self, self.address)
        if link.closing or self.net.closing:
            self.proto.logoff("the link is closing")
            self._end("the link was closed while connecting", TELL)
            return
        if side is Side.CLIENT:
            self.proto.logon()
            self._write()
        self._arm()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self.link.selector.active = True  # activity, for a polling I/O thread (_io_thread.py)
        shared = self.shared
        if shared is None:
            # The actors' workers are woken once this read is handled, when this
            # thread is about to give up the GIL (the bus's delivery batching,
            # bus/party.py; actors/dispatcher.py, "Held wake-ups"): a worker woken
            # earlier would find the GIL taken and sleep again until it is
            # released, a second wake-up per hop.
            held = self.hold_deliveries()
            try:
                with self.wlock:  # see locked
                    self._received(nbytes)
            finally:
                if held:
                    self.release_deliveries()
            return
        # On a loop shared with the actors' dispatcher the actors this batch made
        # runnable run right here, once the protocol work is done and the connection
        # lock is released (actors/dispatcher.py, "defer_runs"), and what they sent
        # (replies, the next request) leaves with this batch's own output in one
        # write: one loop iteration per read, as a hand-written protocol would have.
        opened = shared.defer_runs()
        try:
            with self.wlock:
                flush = self._received(nbytes)
        finally:
            if opened:
                shared.run_deferred()
        if flush:
            with self.wlock:
                self._flush_received()

    @locked
    def eof_received(self) -> bool:
        proto = self.proto
        if proto is not None and not self.ended:
            proto.receive_data(b"", self.loop.time())
            self._take_events()
        return False  # let the transport close itself

    @locked
    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._close_wfd()
        if not self.ended:
            link = self.link
            if isinstance(exc, ssl.SSLError) and not self.logged_on:
                # an alert right after the handshake: with TLS 1.3 a client learns
                # only now that the service refused its certificate (or had none)
                reason = handshake_failure(exc, link.initiator)
                link.tls_failed(reason)
            elif exc is not None:
                reason = f"connection lost: {exc}"
            else:
                reason = self._peer_closed()
            self._end(reason, CLOSE)
        self._closed()

    @locked
    def pause_writing(self) -> None:
        self.paused = True
        self.queued = (0, 0)  # the protocol's output was handed over: count afresh

    @locked
    def resume_writing(self) -> None:
        self.paused = False
        if not self.ended:
            self._write()
            if self.congested:
                transport = self.transport
                waiting = len(self.tail) + len(self.pending) * self.item_bytes
                if transport is not None:
                    waiting += transport.get_write_buffer_size()
                proto = self.proto
                count = len(self.pending) + (proto.data_queued if proto is not None else 0)
                if waiting <= self.high_water // 2 and count <= self.high_water_messages // 2:
                    self._congest(False, f"{waiting} bytes, {count} data messages")
            if self.pending and not self.scheduled:
                self.scheduled = True
                self.loop.call_soon(self._flush)

    def _congest(self, congested: bool, waiting: str) -> None:
        """(loop, holding wlock) Tell the party (the publishers sending to the
        peer) that the output queue went over a high-water mark, or drained
        below half of both.  One rule for both limits: the byte mark
        (``message_queue_high_water``) and the count mark (half of
        ``message_queue_size``), whichever is passed first, so a publisher is
        told before either limit resets the link; ``waiting`` says what waits."""
        self.congested = congested
        self.congestions += congested
        if congested:
            self.net.peer_log.info(
                (self._origin(), "congested"),
                "link {}: {} wait for node {}; the publishers sending there are told "
                "(PublishFeed.congested) until what waits is below half of each "
                "high-water mark",
                self.name,
                waiting,
                self.peer,
            )
        party = self.party
        if party is not None:
            party.congested(congested)

    # ------------------------------------------------------------------- logon

    def _logon(self, peer: str, run_id: str) -> bool:
        proto = self.proto
        assert proto is not None
        self.peer = peer
        link = self.link
        refusal = self.net.claim(self, peer, run_id)
        if refusal is not None:
            self.refused_logons += 1
            self.net.peer_log.info(
                (self._origin(), "refused logon"),
                "link {} ({}): refusing node {}: {}",
                self.name,
                self.address,
                peer,
                refusal,
            )
            proto.reject_logon(refusal)
            self._end(f"logon rejected here: {refusal}", TELL)
            return False
        if proto.side is Side.SERVER:
            proto.accept_logon()
        self.peer_run_id = run_id
        received, lost = self.net.receipts.logon(peer, run_id)
        if lost:
            link.count_lost(lost)
            self.net.peer_log.warning(
                (self._origin(), "restarted"),
                "link {}: node {} restarted (new run id {}); {} data messages written to "
                "its previous run were never acknowledged and are counted as lost",
                self.name,
                peer,
                run_id,
                lost,
            )
        proto.receipt(received)
        size = max(link.settings.input_buffer_size, _MIN_READ_BUFFER)
        if size > len(self.view):
            # (the read being handled holds a slice of the small buffer, not this)
            self.view = memoryview(bytearray(size))
        # queues every advertisement now; the party checks the link's permissions
        settings = link.settings
        party = self.net.router.attach(
            peer, self, link.permissions, forward=settings.forward, max_hops=settings.max_hops
        )
        party.carry_routes(self.send_routed, forward=settings.forward, max_hops=settings.max_hops)
        self.party = self._unexpected_party = party
        self._drain(proto)
        proto.complete_logon()
        self._write()
        self._maybe_logged_on()
        self._arm_if_earlier()
        return True

    def _auth_failed(self, claimed: str) -> None:
        """The peer did not prove this link's secret: refused before it learnt
        anything of this node (the protocol queued "authentication failed" for
        it and counted it)."""
        link = self.link
        node = repr(claimed) if len(claimed) <= NODE_ID_SHOWN else shown(claimed, NODE_ID_SHOWN)
        if link.initiator:
            what = (
                f"the node at {self.address} (claiming to be node {node}) did not prove "
                "this link's secret"
            )
        else:
            what = f"a peer at {self.address} claiming to be node {node} did not prove the secret"
        self.net.peer_log.warning(
            (self._origin(), "auth"),
            "link {}: authentication failed: {}; refused, nothing of this node was sent "
            "to it. Both nodes must hold the same secret (a node without one proves its "
            "user's secret, or none with auth=none); failures from unknown hosts may be "
            "an attack (auth_failures counts them; docs/security.md)",
            self.name,
            what,
        )
        self._end(f"authentication failed: {what}", TELL)

    def _origin(self) -> str:
        """What a peer's log lines are rate-limited by: the service that accepted
        the connection (a stranger reconnecting is one origin), else the link."""
        service = self.link.service
        return f"service {service.name}" if service is not None else f"link {self.name}"

    def _receipt(self, received: int) -> None:
        """The peer's RECEIPT: count what the earlier connections lost in flight."""
        peer, run_id = self.peer, self.peer_run_id
        if peer is None or run_id is None:
            return
        lost = self.net.receipts.receipt(peer, run_id, received)
        if lost:
            self.link.count_lost(lost)
            self.net.peer_log.warning(
                (self._origin(), "receipt"),
                "link {}: node {} read {} data messages from this node in total; {} written "
                "to a connection that broke never arrived and are counted as lost (nothing is resent)",
                self.name,
                peer,
                received,
                lost,
            )

    def _maybe_logged_on(self) -> None:
        proto = self.proto
        if self.logged_on or proto is None or proto.state is not ProtocolState.CONNECTED:
            return
        self.logged_on = True
        peer = self.peer
        assert peer is not None
        link = self.link
        how = "dialled" if link.initiator else "accepted"
        # a stranger at a service decides how often (one key per service)
        self.net.peer_log.info(
            (self._origin(), "logged on"),
            "link {}: logged on with node {} at {} ({})",
            self.name,
            peer,
            self.address,
            how,
            burst=CONNECTION_BURST,
        )
        link.connection_logged_on(peer)
        self.net.publish(
            LinkLoggedOn(
                SYSTEM_SUBJECT, peer_node=peer, address=self.address, initiator=link.initiator
            )
        )

    # ------------------------------------------------------------------ timers

    def _arm(self, now: float | None = None) -> None:
        """Arm the timer for the protocol's next deadline; given ``now`` (the timer
        just ran), no later than one heartbeat delay from it.  Data moves no
        deadline earlier by itself (the read path does not re-arm), so while a
        HEARTBEAT waits its reply window (longer than the delay) the answer
        would otherwise leave the next HEARTBEAT until that window ends: the
        cap keeps the idle link probed every heartbeat delay, so a peer that
        freezes is found within delay + reply window of its last byte."""
        proto = self.proto
        if proto is None or self.ended:
            return
        deadline = proto.next_deadline()
        if deadline is None:
            return
        delay = self.link.settings.heartbeat_delay
        if now is not None and delay > 0 and now + delay < deadline:
            deadline = now + delay
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = deadline
        self.timer = self.loop.call_at(deadline, self._on_timer)

    def _arm_if_earlier(self) -> None:
        proto = self.proto
        if proto is None or self.ended:
            return
        deadline = proto.next_deadline()
        if deadline is not None and (self.timer_at is None or deadline < self.timer_at):
            self._arm()

    @locked
    def _on_timer(self) -> None:
        self.timer = None
        self.timer_at = None
        proto = self.proto
        if proto is None or self.ended or self.reading_paused:
            return  # while paused the silence is ours; resuming re-arms the timer
        now = self.loop.time()
        proto.tick(now)
        if self._take_events():
            self._write()
            self._arm(now)

    # ------------------------------------------------------------------ ending

    @locked
    def logoff(self, reason: str) -> None:
        """(loop) Orderly close by this node: send what is pending, then LOGOFF."""
        if self.ended:
            return
        proto = self.proto
        if proto is not None:
            if proto.can_send:
                self._drain(proto)
            proto.logoff(reason)
        self._end(f"logged off here: {reason}", ORDERLY)

    @locked
    def abort(self) -> None:
        """(loop) Reset the socket now (the node is closing and time is up)."""
        if not self.ended:
            self._end("aborted: the node is closing", ABORT)
        transport = self.transport
        if transport is not None and not self.lost:
            _reset(transport)

    @locked
    def _end(self, reason: str, how: str) -> None:
        """(loop) The connection is over: close the socket, count, detach, tell."""
        if self.ended:
            return
        self.ended = True
        self.open = False
        self.scheduled = True  # a straggler's flush is scheduled by _flush below, not by sends
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.ack_timer is not None:
            self.ack_timer.cancel()
            self.ack_timer = None
        if self.backlog_timer is not None:
            self.backlog_timer.cancel()
            self.backlog_timer = None
        self._close_wfd()  # before the transport closes: the socket must not outlive it
        proto, transport = self.proto, self.transport
        if transport is not None and not transport.is_closing():
            if how in (ORDERLY, TELL) and not (how == TELL and self.paused):
                if proto is not None:
                    data = self._take_tail(proto.data_to_send())
                    if data:
                        transport.write(data)
                self._close_transport(transport)
            else:
                if proto is not None:
                    self.link.count_dropped(proto.data_queued)
                    proto.discard_output()
                self.tail = b""
                if how == CLOSE:
                    self._close_transport(transport)
                else:
                    _reset(transport)
        self._drop_pending()
        self.scheduled = False
        link = self.link
        net = self.net
        # a peer decides how often its connections end, and part of the reason
        self.net.peer_log.log(
            "INFO" if how in (ORDERLY, CLOSE) else "WARNING",
            (self._origin(), "closed"),
            "link {} ({}, peer {}): closed: {}",
            self.name,
            self.address,
            self.peer,
            reason,
            burst=CONNECTION_BURST,
        )
        party, self.party = self.party, None
        if party is not None:
            party.detach(reason)
        if self.peer is not None and self.peer_run_id is not None and proto is not None:
            # before the claim goes: the next connection's receipts count this one
            counters = proto.counters
            net.receipts.ended(
                self.peer, self.peer_run_id, counters.messages_out, counters.messages_in
            )
        net.release(self)
        if transport is not None:  # every connection that was made says how it ended
            net.publish(
                LinkLoggedOff(
                    SYSTEM_SUBJECT, peer_node=self.peer or "", address=self.address, reason=reason
                )
            )
        link.connection_over(self, reason)
        if transport is None:
            self._closed()

    @locked
    def _close_transport(self, transport: asyncio.Transport) -> None:
        """(loop) Close the socket once what is written left; reset it after
        the grace if the peer does not take that.  A plain socket with nothing
        left to write closes at once: it needs no timer (a burst of connections
        that end together would otherwise make one each, which the event loop
        keeps for reuse long after)."""
        transport.close()
        if self.link.tls is not None or transport.get_write_buffer_size():
            self.grace_timer = self.loop.call_later(_CLOSE_GRACE, self._abort_if_open)

    def _abort_if_open(self) -> None:
        transport = self.transport
        if transport is not None and not self.lost:
            _reset(transport)

    def _closed(self) -> None:
        if self.grace_timer is not None:
            # the socket is closed: nothing to abort, and the timer would hold
            # this object (and its buffers) for the rest of the grace
            self.grace_timer.cancel()
            self.grace_timer = None
        proto = self.proto
        if proto is not None:
            # its handlers refer back to it and to this object: without them
            # both go when their last user lets go, not at a cyclic collection
            proto.release()
        callbacks, self.on_closed = self.on_closed, []
        for callback in callbacks:
            callback()
