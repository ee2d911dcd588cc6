"""What the peer sends over one connection: protocol events into the router's
``RemoteParty``, and input back-pressure.

**Inbound.**  ``buffer_updated`` (:mod:`~actorbus.net._connection`) hands each
read to ``_received``, which feeds the bytes to the protocol and takes its
events (``_take_events``): message bodies are decoded with the codec against
classes already defined in this process (``lookup_type``) and handed to the
party, which enqueues into the subscribers' mailboxes.  Notifications come as
runs (``LinkProtocol.next_batch``): on a key seen before, a run is decoded with
the class's cached decoder and handed to the party in one call.  On an I/O
thread that shares an asyncio dispatcher's loop the read is bracketed by the
dispatcher's ``defer_runs``/``run_deferred``: the mailboxes it made runnable
drain at the end of the read's callback (outside the write lock), and the
connection then writes the read's output together with what those actors sent
(``_flush_received``) — one loop iteration and one write per request/reply
hop.  A frame that breaks the protocol or a body that does not decode closes
this link (logged, counted as corrupt); the node keeps serving its other links.

**Input back-pressure.**  After each batch, the mailboxes (and inboxes) the
batch delivered notifications to are looked at; when one holds more than
``input_backlog`` tasks the connection stops reading the socket until every one
of them is below half the limit, keeping the peer's idle timer quiet with
heartbeats meanwhile (docs/links.md, "Input back-pressure").

Threads: everything here runs on the loop thread, holding the write lock (but
``_flush_received``'s caller takes it anew after the deferred actors ran).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final

from .._log import shown
from ..bus import codec
from ..bus.message import (
    Message,
    MessageKey,
    Notification,
    Reply,
    ReplyStatus,
    Request,
    lookup_type,
)
from ..bus.party import Role
from ..bus.scope import CAT_FORWARD, FeedState
from ..bus.sender import Sender
from ..errors import CodecError, ProtocolError
from ._connection_base import CLOSE, TELL, locked
from ._events import (
    GroupChanged,
    GroupNotificationReceived,
    PatternSubscribed,
    PatternUnsubscribed,
    RouteAnnounced,
    RoutedReceived,
    SenderChanged,
)
from ._outbound import ACK_DELAY, TICK, Outbound
from .protocol import (
    Advertised,
    AuthenticationFailed,
    CancelReceived,
    ConnectionClosed,
    Event,
    FeedStatusReceived,
    HeartbeatTimeout,
    LinkProtocol,
    LogoffReceived,
    LogonAccepted,
    LogonComplete,
    LogonRejected,
    LogonRequested,
    LogonTimeout,
    NotificationReceived,
    ReceiptReceived,
    ReplyReceived,
    RequestAcknowledged,
    RequestReceived,
    Retracted,
    SequenceGap,
    Subscribed,
    Unsubscribed,
    WireKey,
)

__all__ = ["Inbound"]

#: While reading is paused for input back-pressure, the backlog is checked this often (s).
BACKLOG_RECHECK: Final = 0.005

_FAMILY: Final[dict[Role, type[Message]]] = {Role.PUBLISHER: Notification, Role.REPLIER: Request}
_DATA_EVENTS: Final = frozenset(
    {
        NotificationReceived,
        GroupNotificationReceived,
        RequestReceived,
        ReplyReceived,
        RequestAcknowledged,
        CancelReceived,
        RoutedReceived,
    }
)
_UNRESOLVED: Final[Any] = object()
#: A TLS client's first bytes: a handshake record (content type 22) of TLS 1.x
_TLS_HANDSHAKE_RECORD: Final = 0x16
_TLS_MAJOR_VERSION: Final = 0x03

_from_wire = codec.from_wire
#: type names a connection remembers having logged (a peer may define many)
_UNKNOWN_REMEMBERED: Final = 1_024


def _known_message_type(type_name: str) -> bool:
    """The protocol's ``is_known_type``: a message class of that name exists here."""
    cls = lookup_type(type_name)
    return cls is not None and issubclass(cls, Message)


def _family_name(cls: type[Message]) -> str:
    for family in (Notification, Request, Reply):
        if issubclass(cls, family):
            return family.__name__
    return cls.__name__


class Inbound(Outbound):
    """The receiving side of a connection (mixed into ``_Connection``)."""

    def _received(self, nbytes: int) -> bool:
        """(loop, holding wlock) Handle a read of ``nbytes`` into ``view``.  True:
        the connection is up and ``scheduled`` is held for the caller to
        :meth:`_flush_received`."""
        proto = self.proto
        if proto is None or self.ended:
            return False
        self.scheduled = True  # sends made while this batch is handled wait for its end
        now = self.loop.time()
        # requests, replies and acknowledgements in order go straight to the
        # party (the protocol's data sinks, _take_request ...); the rest is events
        proto.receive_data(self.view[:nbytes], now)
        if proto.has_events:
            if not self._take_events():
                return False
            if self.touched and self.party is not None and self.link.settings.input_backlog:
                self._check_backlog()
            # _arm_if_earlier(), inline (the connection is up: _take_events said
            # so).  Only an event moves a deadline earlier: data alone moves the
            # heartbeat's later, and the armed timer, finding nothing due, re-arms.
            deadline = proto.next_deadline()
            if deadline is not None and (self.timer_at is None or deadline < self.timer_at):
                self._arm()
        if self.shared is not None:
            return True
        if self.pending and self._only_acks_pending():
            # Our repliers took the peer's requests and usually answer at once:
            # the acknowledgements wait (ACK_DELAY, up to a tick more) to go in the first
            # reply's frame, which saves the peer a frame and a wake-up per
            # request.  A push of anything else flushes them at once.
            self.scheduled = False
            if self.acks_since is None:
                self.acks_since = now
            if self.ack_timer is None:
                self.ack_timer = self.loop.call_later(ACK_DELAY + TICK, self._acks_due)
        else:
            # cleared first: a send racing with the check below schedules a flush
            self.scheduled = False
            if self.pending or proto.has_output:
                self._flush_locked()
        return False

    def _flush_received(self) -> None:
        """(loop, holding wlock) After a read on a shared loop and the actors it
        ran: write it all."""
        self.scheduled = False  # cleared first: a racing send schedules its own flush
        proto = self.proto
        if self.pending or (proto is not None and proto.has_output):
            self._flush_locked()

    # ---------------------------------------------------------------- events

    def _take_events(self) -> bool:
        """(loop) Handle every event the protocol has; False once the connection ended."""
        proto = self.proto
        assert proto is not None
        next_batch = proto.next_batch
        notified = self.notified
        touched_add = self.touched.add
        # The hot path: the protocol hands over notifications that arrived one
        # after the other on one key as a run, (wire key, bodies); on a key seen
        # before they are decoded with the cached decoder and go to the party in
        # one call (arrival order is kept: the run comes before anything later).
        try:
            while proto.has_events:  # (then next_batch() is not None)
                event = next_batch()
                if event is None:  # pragma: no cover - events was not empty
                    return True
                if event.__class__ is not tuple:
                    if not self._event(event):  # type: ignore[arg-type]
                        return False
                    continue
                wire_key, bodies = event
                party = self.party
                known = notified.get(wire_key) if party is not None else None
                if known is None:
                    # first use of the key (or no party yet): one at a time, until
                    # the key's decoder is cached
                    while bodies:
                        if not self._notification(wire_key, bodies.popleft(), len(bodies)):
                            return False
                        party = self.party
                        known = notified.get(wire_key) if party is not None else None
                        if known is not None:
                            break
                    if not bodies:
                        continue
                decode, key = known  # type: ignore[misc]
                # a forwarding party (every one is a ForwardingParty): a run only
                # other forwarding links need goes on undecoded (bus/_forwarding_party.py)
                if party.category == CAT_FORWARD and party.pass_run(  # type: ignore[union-attr]
                    key, wire_key, bodies, self.sent_by
                ):
                    touched_add(key)
                    continue
                try:
                    messages = [decode(body) for body in bodies]
                except CodecError:
                    return self._corrupt_run(key, decode, bodies)
                party.notify_run(messages, key, self.sent_by)  # type: ignore[union-attr]
                touched_add(key)
            return True
        except ProtocolError as exc:
            self._protocol_error(exc)
            # the protocol keeps it (``error``); its traceback's frames refer to
            # this object: a cycle that would hold the connection and all it
            # refers to until a cyclic collection, not until it ends
            exc.__traceback__ = None
            return False

    def _protocol_error(self, exc: ProtocolError) -> None:
        """The peer broke the protocol: say so and close.  A peer whose first
        bytes are a TLS handshake record dialled this plain service with TLS:
        that is said, and counted in ``tls_failures``, rather than garbage."""
        proto = self.proto
        link = self.link
        if (
            link.tls is None
            and not link.initiator
            and proto is not None
            and not proto.counters.frames_in
            and self.view[0] == _TLS_HANDSHAKE_RECORD
            and self.view[1] == _TLS_MAJOR_VERSION
        ):
            reason = (
                "TLS failed: the client speaks TLS to this service, which does not; give "
                "the service tlsCertFile and tlsKeyFile (listen(tls=...)), or dial it "
                "without TLS"
            )
            link.tls_failed(reason)
            self._end(reason, TELL)
            return
        self.net.peer_log.warning(
            (self._origin(), "protocol"), "link {} ({}): {}", self.name, self.address, exc
        )
        self._end(f"protocol error: {exc}", TELL)

    def _peer_closed(self) -> str:
        """Why the connection ended when the peer closed it without a logoff.  A
        service that closes a dialled connection before answering its logon at
        all most likely refused it at the TLS level: a plain dialler met a TLS
        service, or (TLS 1.3, where the client's handshake ends before the
        service checks its certificate) a TLS service refused this node's
        certificate, which is counted in ``tls_failures``."""
        reason = "the peer closed the connection without logging off"
        link = self.link
        proto = self.proto
        if not link.initiator or self.logged_on or proto is None or proto.counters.bytes_in:
            return reason
        if link.tls is None:
            return reason + (
                " (it closed before answering the logon: a service that speaks TLS closes "
                "plain connections so; if it does, give this connection tlsCaFile (tls=))"
            )
        reason = (
            "TLS failed: the service closed the connection right after the TLS handshake, "
            "before answering the logon: it most likely refused this node's certificate "
            "(it requires one signed by a CA it trusts: give this connection tlsCertFile and "
            "tlsKeyFile; the service's log says why)"
        )
        link.tls_failed(reason)
        return reason

    # -------------------------------------------- the protocol's data sinks

    def _take_request(self, wire_key: WireKey, request_id: int, body: Any) -> bool:
        """(protocol sink) A request on a key the event path resolved before:
        decoded with its cached decoder and handed to the party.  False (nothing
        done) leaves it to the event path: a key seen for the first time, no
        party yet, or a body that does not decode (the event path closes)."""
        decode = self.request_decoders.get(wire_key)
        party = self.party
        if decode is None or party is None:
            return False
        try:
            message = decode(body)
        except CodecError:
            return False
        party.request(request_id, message, self.sent_by)
        return True

    def _take_reply(
        self,
        request_id: int,
        wire_key: WireKey,
        status: ReplyStatus,
        body: Any,
        repliers: int | None,
    ) -> bool:
        """(protocol sink) A reply (with the request's acknowledgement when
        ``repliers`` is not None), as :meth:`_take_request`."""
        decode = self.reply_decoders.get(wire_key)
        party = self.party
        if decode is None or party is None:
            return False
        try:
            reply = decode(body)
        except CodecError:
            return False
        party.reply(request_id, reply, repliers, self.sent_by)
        return True

    def _take_ack(self, request_id: int, repliers: int) -> bool:
        """(protocol sink) A request's acknowledgement."""
        party = self.party
        if party is None:
            return False
        party.request_ack(request_id, repliers)
        return True

    def _corrupt_run(
        self, key: MessageKey, decode: Callable[[Any], Any], bodies: deque[Any]
    ) -> bool:
        """A body of the run does not decode: the messages before it are delivered,
        the ones after it dropped, and the link closes."""
        good: list[Message] = []
        for i, body in enumerate(bodies):
            try:
                good.append(decode(body))
            except CodecError as exc:
                if good and self.party is not None:
                    self.party.notify_run(good, key, self.sent_by)
                self._corrupt_body(key, exc, len(bodies) - i - 1)
                return False
        raise AssertionError("a body failed to decode once, then decoded")  # pragma: no cover

    def _event(self, event: Event) -> bool:
        """(loop) Every event but the common notification; False once ended."""
        party = self.party
        if type(event) is NotificationReceived:
            return self._notification(event.key, event.body)
        elif type(event) is RequestReceived:
            key = self._key_of(event.key, Request)
            if key is not None and party is not None:
                try:
                    message = _from_wire(key.message_class, event.body)
                except CodecError as exc:
                    self._corrupt_body(key, exc)
                    return False
                # decoded once, so the class's decoder is compiled: the sink's now
                self.request_decoders[event.key] = key.message_class.__wire_decode__
                party.request(event.request_id, message, self.sent_by)
        elif type(event) is ReplyReceived:
            if party is not None:
                key = self._key_of(event.key, Reply)
                if key is None:
                    reply: Reply = self._stand_in_reply(event)
                else:
                    try:
                        reply = _from_wire(key.message_class, event.body)  # type: ignore[assignment]
                    except CodecError as exc:
                        self._corrupt_body(key, exc)
                        return False
                    self.reply_decoders[event.key] = key.message_class.__wire_decode__
                # with the acknowledgement when it came in the same frame
                party.reply(event.request_id, reply, event.repliers, self.sent_by)
        elif type(event) is RequestAcknowledged:
            if party is not None:
                party.request_ack(event.request_id, event.repliers)
        elif type(event) is CancelReceived:
            if party is not None:
                party.cancel(event.request_id)
        elif type(event) is RoutedReceived:
            if party is not None:
                party.routed(event.frame)
        elif type(event) is Advertised:
            key = self._key_of(event.key, _FAMILY[event.role])
            if key is not None and party is not None:
                party.advertise(key, event.role, event.feed_state is FeedState.UP)
        elif type(event) is FeedStatusReceived:
            family = _FAMILY.get(event.role)
            if family is not None:  # subscriber/requestor presence is not used here
                key = self._key_of(event.key, family)
                if key is not None and party is not None:
                    party.feed_status(key, event.role, event.up)
        elif type(event) is Retracted:
            key = self._key_of(event.key, _FAMILY[event.role])
            if key is not None and party is not None:
                party.retract(key, event.role)
        elif type(event) is Subscribed:
            # Requestors need no subscription: a request names its key itself.
            if event.role is Role.SUBSCRIBER:
                key = self._key_of(event.key, Notification)
                if key is not None and party is not None:
                    party.subscribe(key)
        elif type(event) is Unsubscribed:
            if event.role is Role.SUBSCRIBER:
                key = self._key_of(event.key, Notification)
                if key is not None and party is not None:
                    party.unsubscribe(key)
        elif type(event) is GroupNotificationReceived:
            return self._group_notification(event)
        elif type(event) is SenderChanged:
            # what the peer's node says of its own publisher (the node is this
            # link's authenticated peer, one hop away) or of one it forwards
            node = event.node or self.peer or "?"
            self.sent_by = Sender(node, event.actor, event.feed, event.hops + 1)
        elif type(event) is RouteAnnounced:
            if party is not None:
                party.route(event.origin, event.seq, event.peers, event.hops, event.flags)
        elif type(event) is GroupChanged:
            key = self._key_of(event.key, Notification)
            if key is not None and party is not None:
                party.group(key, event.group, event.members)
        elif type(event) is PatternSubscribed or type(event) is PatternUnsubscribed:
            cls = self._class_of(event.type_name, Notification)
            if cls is not None and party is not None:
                if type(event) is PatternSubscribed:
                    party.subscribe_pattern(cls, event.wildcard)
                else:
                    party.unsubscribe_pattern(cls, event.wildcard)
        elif type(event) is SequenceGap:
            self.net.peer_log.warning(
                (self._origin(), "gap"),
                "link {}: frames {}..{} from node {} never arrived",
                self.name,
                event.expected,
                event.got - 1,
                self.peer,
            )
        elif type(event) is LogonRequested or type(event) is LogonAccepted:
            return self._logon(event.peer_node_id, event.peer_run_id)
        elif type(event) is ReceiptReceived:
            self._receipt(event.received)
        elif type(event) is LogonComplete:
            self._maybe_logged_on()
        elif type(event) is LogoffReceived:
            hint = ""
            if event.reason.endswith("unknown frame type") and self.link.settings.forward:
                hint = (
                    "; this link forwards and the peer may not know the ROUTE frame of "
                    "forwarding nodes: set forward only toward nodes that do (docs/routing.md)"
                )
            self._end(f"logged off by the peer: {shown(event.reason)}{hint}", CLOSE)
            return False
        elif type(event) is LogonRejected:
            hint = ""
            if event.reason == "authentication failed":
                hint = (
                    "; this link's secret is not the peer's: give both the same secret (a "
                    "node without one proves its user's secret, or none with auth=none; "
                    "docs/security.md)"
                )
            self._end(f"logon rejected by the peer: {shown(event.reason)}{hint}", CLOSE)
            return False
        elif type(event) is AuthenticationFailed:
            self._auth_failed(event.claimed_node_id)
            return False
        elif type(event) is ConnectionClosed:
            self._end(self._peer_closed(), CLOSE)
            return False
        elif type(event) is HeartbeatTimeout:
            self._end(f"heartbeat timeout: nothing received for {event.silent_for:.3f} s", TELL)
            return False
        elif type(event) is LogonTimeout:
            self._end(f"logon timeout: not logged on after {event.waited:.3f} s", TELL)
            return False
        return True

    def _notification(self, wire_key: WireKey, body: Any, dropped: int = 0) -> bool:
        """A notification on a key not cached in ``notified`` yet: resolve the key,
        decode, cache, deliver; False once ended (``dropped``: as ``_corrupt_body``)."""
        party = self.party
        key = self._key_of(wire_key, Notification)
        if key is not None and party is not None:
            try:
                message = _from_wire(key.message_class, body)
            except CodecError as exc:
                self._corrupt_body(key, exc, dropped)
                return False
            # decoded once, so the class's decoder is compiled: cache it with the key
            self.notified[wire_key] = (key.message_class.__wire_decode__, key)
            party.notify(message, key, self.sent_by)
            self.touched.add(key)
        return True

    def _group_notification(self, event: GroupNotificationReceived) -> bool:
        """A notification for one member of a queue group here: resolved and
        decoded as a notification is; False once ended."""
        party = self.party
        key = self._key_of(event.key, Notification)
        if key is not None and party is not None:
            try:
                message = _from_wire(key.message_class, event.body)
            except CodecError as exc:
                self._corrupt_body(key, exc)
                return False
            party.group_notify(event.group, message, key, self.sent_by)
            self.touched.add(key)
        return True

    def _stand_in_reply(self, event: ReplyReceived) -> Reply:
        """A reply of a type unknown here still counts: a base Reply takes its place
        (ERROR when it was final, so the requestor's count stays right)."""
        continuing = event.status is ReplyStatus.OK_CONTINUING
        return Reply(
            event.key[1],
            status=ReplyStatus.OK_CONTINUING if continuing else ReplyStatus.ERROR,
            reason=f"the remote node replied with a {event.key[0]!r} reply, a type not "
            "defined at this node",
        )

    # ------------------------------------------------------- keys and bodies

    def _known_type(self, type_name: str) -> bool:
        """The protocol's ``is_known_type``, asked once per key the peer defines."""
        if _known_message_type(type_name):
            return True
        self._unknown_type(type_name, "a type this node does not define")
        return False

    def _unknown_type(self, type_name: str, why: str) -> None:
        """Say why a type's frames are dropped: once per link and type name, and
        at most once per period for the peer (a peer may define thousands)."""
        unknown = self._unknown_logged
        if unknown is None:
            unknown = self._unknown_logged = set()
        elif type_name in unknown:
            return
        if len(unknown) < _UNKNOWN_REMEMBERED:
            unknown.add(type_name)
        self.net.peer_log.warning(
            (self._origin(), "unknown type", self.peer),
            "link {}: node {} sends {} messages, {}; they are dropped and counted (unknown_types)",
            self.name,
            self.peer,
            type_name,
            why,
        )

    def _resolve(self, wire_key: WireKey) -> MessageKey | None:
        cls = lookup_type(wire_key[0])
        key = None
        if cls is not None and issubclass(cls, Message):
            key = MessageKey(cls, wire_key[1])
        self.keys[wire_key] = key
        return key

    def _key_of(self, wire_key: WireKey, family: type[Message]) -> MessageKey | None:
        key: MessageKey | None = self.keys.get(wire_key, _UNRESOLVED)
        if key is _UNRESOLVED:
            key = self._resolve(wire_key)
        if key is None or not issubclass(key.message_class, family):
            self.unknown += 1
            if key is not None:
                self._unknown_type(
                    wire_key[0],
                    f"used as {family.__name__} messages, but here the type is a "
                    f"{_family_name(key.message_class)}",
                )
            return None
        return key

    def _class_of(self, type_name: str, family: type[Message]) -> type[Message] | None:
        """The message class a pattern frame names, as ``_key_of`` resolves a key's
        (the protocol already dropped the type names unknown here)."""
        cls = lookup_type(type_name)
        if cls is None or not issubclass(cls, family):
            self.unknown += 1
            if cls is not None and issubclass(cls, Message):
                self._unknown_type(
                    type_name,
                    f"used as {family.__name__} messages, but here the type is a "
                    f"{_family_name(cls)}",
                )
            return None
        return cls

    def _corrupt_body(self, key: MessageKey, exc: Exception, dropped: int = 0) -> None:
        """Close the link for a body that does not decode; ``dropped`` messages read
        after it, and no longer in the protocol, are dropped with it."""
        self.corrupt += 1
        self.net.peer_log.warning(
            (self._origin(), "corrupt"),
            "link {} ({}, peer {}): a {} body does not decode ({}); closing the link",
            self.name,
            self.address,
            self.peer,
            key,
            exc,
        )
        proto = self.proto
        assert proto is not None
        self.link.count_dropped(self._discard_events(proto) + dropped)
        proto.logoff("a message body did not decode")
        self._end(f"corrupt {key} message body: {exc}", TELL)

    @staticmethod
    def _discard_events(proto: LinkProtocol) -> int:
        """Take the events still waiting (the link is closing); the data messages
        among them were read but are not delivered: their count."""
        dropped = 0
        try:
            while (event := proto.next_event()) is not None:
                if event.__class__ in _DATA_EVENTS:
                    dropped += 1
        except ProtocolError:
            pass  # a later frame is broken too: the link closes either way
        return dropped

    # --------------------------------------------------- input back-pressure

    def _mailboxes(self, keys: set[MessageKey]) -> list[Any]:
        """The mailboxes (and inboxes) the peer's notifications on ``keys`` are
        delivered to: anything with a ``depth``."""
        party = self.party
        return party.backlogs(keys) if party is not None else []

    def _check_backlog(self) -> None:
        """(loop, after each inbound batch) Stop reading while a mailbox is over the
        limit.  Only the mailboxes this batch delivered to are looked at (a mailbox
        can only cross the limit in a batch that delivers to it): the cost follows
        the batch, not the number of feeds the link carries."""
        touched = self.touched
        transport = self.transport
        if self.reading_paused or transport is None or self.ended or not touched:
            touched.clear()
            return
        boxes = self._mailboxes(touched)
        touched.clear()
        limit = self.link.settings.input_backlog
        backlog = max((box.depth for box in boxes), default=0)
        if backlog <= limit:
            return
        self.watched = boxes
        transport.pause_reading()
        self.reading_paused = True
        self.input_pauses += 1
        self._keepalive_at = self.loop.time()
        log = self._log.info if self.input_pauses == 1 else self._log.debug
        log(
            "link {}: stopped reading from node {}: a subscriber's mailbox (or inbox) holds {} "
            "messages, above input_backlog={}; reading resumes below {} (TCP pushes back on the peer; "
            "raise input_backlog or speed up the subscriber if this repeats)",
            self.name,
            self.peer,
            backlog,
            limit,
            limit // 2,
        )
        self.backlog_timer = self.loop.call_later(self._recheck_delay, self._recheck_backlog)

    @locked
    def _recheck_backlog(self) -> None:
        """(loop, while paused) Read again below half the limit; meanwhile keep the
        peer from taking our silence for a dead link."""
        self.backlog_timer = None
        proto, transport = self.proto, self.transport
        if self.ended or not self.reading_paused or proto is None or transport is None:
            return
        if self.socket_reset():
            # (a reset is not reported to a transport that does not read)
            self._end(
                "connection lost: the peer reset the connection while this node was not "
                "reading it (input back-pressure); the peer's output queue was probably "
                "over its limit",
                CLOSE,
            )
            return
        now = self.loop.time()
        if max((box.depth for box in self.watched), default=0) <= (
            self.link.settings.input_backlog // 2
        ):
            self.watched = []
            self.reading_paused = False
            proto.reading_resumed(now)  # the silence was ours: restart the idle timer
            transport.resume_reading()
            self._arm()
            return
        delay = self.link.settings.heartbeat_delay
        if delay and now - self._keepalive_at >= delay / 2 and proto.can_send:
            self._keepalive_at = now
            proto.keepalive()
            self._write()
        self.backlog_timer = self.loop.call_later(self._recheck_delay, self._recheck_backlog)
