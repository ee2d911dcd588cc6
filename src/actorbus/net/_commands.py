"""The feed and data commands of :class:`~actorbus.net.protocol.LinkProtocol`.

Each command checks its arguments, encodes one frame (plus a KEY_DEF the first
time a key is used on the link) and queues it for ``data_to_send()``; a command
refused for its arguments queues nothing.  Roles, scopes, feed states and reply
statuses are the bus's enums (their wire codes as plain ints are taken too).
``notify``, ``notify_many``, ``request``, ``request_ack`` and ``reply`` are on
every message's path: each makes its checks once, inline, and calls out only
to explain a refusal.  ``subscribe_pattern`` / ``unsubscribe_pattern`` check a
pattern with the bus's own :class:`~actorbus.bus.subjects.Wildcard` constructor,
as the peer will; ``group_notify`` is a data command counted exactly as
``notify``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..bus.message import ReplyStatus
from ..bus.party import Role
from ..bus.routed import RoutedFrame, with_bodies
from ..bus.scope import FeedState, Scope
from ..errors import MessageTooLargeError, SubjectPatternError, UsageError
from ._framing import ENCODE_ERRORS
from ._protocol_base import MAX_ACTOR_NAME, MAX_COUNT, ProtocolBase, group_problem, show
from ._wire import (
    ALL_ROLES,
    DIALECT_CODES,
    FEED_STATE_CODES,
    INTEREST_ROLES,
    OFFER_ROLES,
    REMOTE_SCOPES,
    REPLY_STATUS_CODES,
    ROLE_CODES,
    SCOPE_CODES,
    WILDCARDS,
    FrameType,
    WireKey,
)

__all__ = ["RUN_MAX", "Commands"]

#: Most notifications ``notify_many`` puts in one NOTIFY_RUN frame (more: several).
RUN_MAX: Final = 1024

_ADVERTISE: Final = int(FrameType.ADVERTISE)
_RETRACT: Final = int(FrameType.RETRACT)
_SUBSCRIBE: Final = int(FrameType.SUBSCRIBE)
_UNSUBSCRIBE: Final = int(FrameType.UNSUBSCRIBE)
_FEED_STATUS: Final = int(FrameType.FEED_STATUS)
_NOTIFY: Final = int(FrameType.NOTIFY)
_REQUEST: Final = int(FrameType.REQUEST)
_REQUEST_ACK: Final = int(FrameType.REQUEST_ACK)
_REPLY: Final = int(FrameType.REPLY)
_CANCEL: Final = int(FrameType.CANCEL)
_NOTIFY_RUN: Final = int(FrameType.NOTIFY_RUN)
_SUBSCRIBE_PATTERN: Final = int(FrameType.SUBSCRIBE_PATTERN)
_UNSUBSCRIBE_PATTERN: Final = int(FrameType.UNSUBSCRIBE_PATTERN)
_GROUP: Final = int(FrameType.GROUP)
_GROUP_NOTIFY: Final = int(FrameType.GROUP_NOTIFY)
_SENDER: Final = int(FrameType.SENDER)
_ROUTED: Final = int(FrameType.ROUTED)
_ROUTE: Final = int(FrameType.ROUTE)


class Commands(ProtocolBase):
    """Feed and data commands (mixed into LinkProtocol)."""

    def advertise(self, key: WireKey, role: Role, scope: Scope, feed_state: FeedState) -> None:
        """Tell the peer this node has a publisher/replier on ``key`` in ``feed_state``."""
        what = "advertise"
        self._check_sending(what)
        role_code = self._check_role(role, OFFER_ROLES, what)
        given: object = scope
        scope_code = (
            SCOPE_CODES.get(given)
            if isinstance(given, Scope)
            else (given if type(given) is int else None)
        )
        if scope_code not in REMOTE_SCOPES:
            raise UsageError(
                f"advertise({key!r}) with scope={scope!r}: only LOCAL_AND_REMOTE and "
                "REMOTE_ONLY feeds are advertised to a peer"
            )
        up = self._check_feed_state(feed_state, what)
        kid = self._key_id(key, what)
        self._queue_sequenced(
            _ADVERTISE, (kid, role_code, scope_code, up), what, data=False, key=key
        )

    def retract(self, key: WireKey, role: Role) -> None:
        """Withdraw a publisher/replier advertisement of ``key``."""
        self._send_role_frame(_RETRACT, key, role, OFFER_ROLES, "retract")

    def subscribe(self, key: WireKey, role: Role) -> None:
        """Tell the peer this node has a subscriber/requestor on ``key``."""
        self._send_role_frame(_SUBSCRIBE, key, role, INTEREST_ROLES, "subscribe")

    def unsubscribe(self, key: WireKey, role: Role) -> None:
        """Tell the peer this node's last subscriber/requestor on ``key`` left."""
        self._send_role_frame(_UNSUBSCRIBE, key, role, INTEREST_ROLES, "unsubscribe")

    def feed_status(self, key: WireKey, role: Role, up: bool) -> None:
        """Send the feed state of ``key`` for ``role`` across the link."""
        what = "feed_status"
        self._check_sending(what)
        role_code = self._check_role(role, ALL_ROLES, what)
        if type(up) is not bool:
            raise UsageError(f"feed_status({key!r}) with up={up!r}: expected a bool")
        kid = self._key_id(key, what)
        self._queue_sequenced(_FEED_STATUS, (kid, role_code, up), what, data=False, key=key)

    def subscribe_pattern(self, type_name: str, dialect: str, text: str) -> None:
        """Tell the peer this node has a subscriber of ``type_name`` notifications
        on every subject the pattern ``text`` of ``dialect`` (a
        ``Wildcard.dialect``, "levels" or "prefix", or its wire code) matches."""
        self._send_pattern_frame(_SUBSCRIBE_PATTERN, type_name, dialect, text, "subscribe_pattern")

    def unsubscribe_pattern(self, type_name: str, dialect: str, text: str) -> None:
        """Tell the peer this node's last subscriber of ``type_name`` on the
        pattern left."""
        self._send_pattern_frame(
            _UNSUBSCRIBE_PATTERN, type_name, dialect, text, "unsubscribe_pattern"
        )

    def group(self, key: WireKey, group: str, members: int) -> None:
        """Tell the peer this node has ``members`` subscribers in queue group
        ``group`` on ``key`` (0: none left)."""
        what = "group"
        self._check_sending(what)
        self._check_group(group, what)
        self._check_uint(members, "members", what)
        kid = self._key_id(key, what)
        self._queue_sequenced(_GROUP, (kid, group, members), what, data=False, key=key)

    def group_notify(self, key: WireKey, group: str, body: object) -> None:
        """Queue a notification for exactly one member of the peer's queue group
        ``group``; a data message counted as ``notify()``'s is, raising what it
        raises."""
        what = "group_notify"
        self._check_sending(what)
        self._check_group(group, what)
        kid = self._key_id(key, what)
        self._queue_sequenced(_GROUP_NOTIFY, (kid, group, body), what, data=True, key=key)

    def routed(self, frame: RoutedFrame) -> None:
        """Queue a source-routed message (ROUTED, bus/routed.py), a data message
        counted as ``notify()``'s is; its body goes as the bytes it is.  A run of
        *n* notifications (a tuple of bodies) counts and is numbered as *n*, as
        ``notify_many``'s; one too large for a frame goes in halves."""
        what = "routed"
        self._check_sending(what)
        body = frame.body
        if not frame.route_from or not (
            type(body) is bytes
            or (type(body) is tuple and body and all(type(b) is bytes for b in body))
        ):
            raise UsageError(
                f"routed() takes a RoutedFrame with a bytes body (or a tuple of them) and "
                f"a route_from of at least the sender, found {frame!r}"
            )
        if isinstance(body, bytes):
            self._queue_sequenced(_ROUTED, tuple(frame), what, data=True)
            return
        n = len(body)
        seq = self._tx_seq + 1
        try:
            if n > RUN_MAX:
                raise MessageTooLargeError("more bodies than a run holds")
            packed = self._encode((_ROUTED, seq, *frame), what)
        except MessageTooLargeError:
            if n == 1:
                raise
            half = n // 2
            self.routed(with_bodies(frame, body[:half]))
            self.routed(with_bodies(frame, body[half:]))
            return
        self._out.append(packed)
        self._tx_seq = seq + n - 1
        self._data_queued += n

    def sender(self, actor: str | None, feed: int, node: str | None = None, hops: int = 0) -> None:
        """Name the publisher of the notifications queued after this (until the
        next call): its actor (None: a feed without an actor) and feed id; a
        forwarded one's ``node`` and the ``hops`` it crossed before this node
        too, when the peer knows the forwarding frames (``peer_routes``).  A
        call naming the same as the last one on this connection sends nothing."""
        what = "sender"
        if not hops or not self.peer_routes:
            node, hops = None, 0
        if (actor, feed, node, hops) == self._sent_by:
            return
        self._check_sending(what)
        if actor is not None and (type(actor) is not str or len(actor) > MAX_ACTOR_NAME):
            raise UsageError(
                f"sender() actor must be a str of at most {MAX_ACTOR_NAME} characters or "
                f"None, found {actor!r}"
            )
        self._check_uint(feed, "feed", what)
        fields = (actor, feed) if node is None else (actor, feed, node, hops)
        self._queue_sequenced(_SENDER, fields, what, data=False)
        self._sent_by = (actor, feed, node, hops)

    def route(self, origin: str, seq: int, peers: tuple[str, ...], hops: int, flags: int) -> None:
        """Send a link-state announcement of the forwarding tree (ROUTE;
        bus/spanning.py): ``origin``'s ``seq``-th list of forwarding ``peers``,
        ``hops`` links crossed so far, and ``flags``: bit 0, this node holds the
        link in its tree; bit 1, it forwards on it."""
        what = "route"
        self._check_sending(what)
        self._check_uint(seq, "seq", what)
        self._check_uint(hops, "hops", what)
        self._check_uint(flags, "flags", what)
        fields = (origin, seq, list(peers), hops, flags)
        self._queue_sequenced(_ROUTE, fields, what, data=False)

    def notify(self, key: WireKey, body: object) -> None:
        """Queue a notification; ``body`` is the codec's msgpack-able wire value.

        Raises MessageTooLargeError when the frame would exceed ``max_frame_size``,
        UsageError before logon is accepted, LinkClosedError once closed."""
        if not self._can_send:
            self._check_sending("notify")
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            kid = None  # unhashable: _key_id explains
        new_key = kid is None
        if kid is None:
            kid = self._key_id(key, "notify")
        seq = self._tx_seq + 1
        try:
            packed = self._pack((_NOTIFY, seq, kid, body))
        except ENCODE_ERRORS as exc:
            raise self._unencodable("notify", key, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large("notify", key, size)
        if new_key:
            self._define(key, kid, "notify")
        self._out.append(self._prefix(size) + packed)
        self._tx_seq = seq
        self._data_queued += 1

    def notify_many(self, key: WireKey, bodies: Iterable[object]) -> None:
        """``notify(key, body)`` for each of ``bodies`` in order, in one NOTIFY_RUN
        frame when there are two or more (see "Runs on the wire" in
        :mod:`actorbus.net.protocol`): the same sequence numbers, counters and
        events at the peer as one NOTIFY per body, for one frame's encoding and
        parsing.

        Raises what ``notify()`` raises, for the first body that cannot be sent:
        the bodies before it stay queued and the ones after it are not taken
        (``last_seq_sent`` moved by one per body queued)."""
        if not self._can_send:
            self._check_sending("notify")
        if type(bodies) is not list:
            bodies = list(bodies)
        n = len(bodies)
        if n < 2:
            if n:
                self.notify(key, bodies[0])
            return
        if n > RUN_MAX:
            for i in range(0, n, RUN_MAX):
                self.notify_many(key, bodies[i : i + RUN_MAX])
            return
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            kid = None  # unhashable: _key_id explains
        new_key = kid is None
        if kid is None:
            kid = self._key_id(key, "notify")
        seq = self._tx_seq + 1
        try:
            packed = self._pack((_NOTIFY_RUN, seq, kid, bodies))
        except ENCODE_ERRORS:
            packed = None  # a body msgpack cannot encode: the halves find which
        if packed is None or len(packed) > self._max_frame:
            # Halves until every piece fits (a single body goes as NOTIFY, which
            # raises for the one that cannot be sent, the pieces before it queued).
            half = n // 2
            self.notify_many(key, bodies[:half])
            self.notify_many(key, bodies[half:])
            return
        if new_key:
            self._define(key, kid, "notify")
        self._out.append(self._prefix(len(packed)) + packed)
        self._tx_seq = seq + n - 1
        self._data_queued += n

    def request(self, key: WireKey, request_id: int, body: object) -> None:
        """Queue a request; the peer answers with request_ack() and reply() frames."""
        # The checks of _check_sending / _check_uint / _key_id, each made once
        # and inline (this and reply() are on every round trip's path).
        if not self._can_send:
            self._check_sending("request")
        if type(request_id) is not int or not 0 <= request_id <= MAX_COUNT:
            self._check_uint(request_id, "request_id", "request")
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            kid = None  # unhashable: _key_id explains
        new_key = kid is None
        if kid is None:
            kid = self._key_id(key, "request")
        frame = self._request_frame(kid, request_id, body)
        if new_key:
            self._define(key, kid, "request")
        self._out.append(frame)
        self._data_queued += 1

    def request_ack(self, request_id: int, repliers: int) -> None:
        """Tell the requestor how many local repliers took request ``request_id``."""
        if not self._can_send:
            self._check_sending("request_ack")
        if type(request_id) is not int or not 0 <= request_id <= MAX_COUNT:
            self._check_uint(request_id, "request_id", "request_ack")
        if type(repliers) is not int or not 0 <= repliers <= MAX_COUNT:
            self._check_uint(repliers, "repliers", "request_ack")
        seq = self._tx_seq + 1
        # Four ints below 2**64: always encodable, and far below any max_frame_size.
        packed = self._pack((_REQUEST_ACK, seq, request_id, repliers))
        self._out.append(self._prefix(len(packed)) + packed)
        self._tx_seq = seq
        self._data_queued += 1

    def reply(
        self,
        request_id: int,
        key: WireKey,
        status: ReplyStatus,
        body: object,
        repliers: int | None = None,
    ) -> None:
        """Queue a reply to the peer's request ``request_id``; ``key`` names the reply class.

        ``repliers`` (not None) carries the request's acknowledgement in the same
        frame: the peer takes it exactly as a ``request_ack(request_id,
        repliers)`` queued just before the reply, for one frame less each way
        when the replier answers while the acknowledgement is still unsent."""
        if not self._can_send:
            self._check_sending("reply")
        if type(request_id) is not int or not 0 <= request_id <= MAX_COUNT:
            self._check_uint(request_id, "request_id", "reply")
        if repliers is not None and (type(repliers) is not int or not 0 <= repliers <= MAX_COUNT):
            self._check_uint(repliers, "repliers", "reply")
        # a ReplyStatus, or its code as a plain int (ReplyStatus is an IntEnum, so
        # the code finds its member's entry); never a bool (True == 1)
        given: object = status
        wire_status = (
            REPLY_STATUS_CODES.get(given)  # type: ignore[call-overload]
            if isinstance(given, int) and given.__class__ is not bool
            else None
        )
        if wire_status is None:
            raise UsageError(f"reply() with status={status!r}: expected a ReplyStatus")
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            kid = None  # unhashable: _key_id explains
        new_key = kid is None
        if kid is None:
            kid = self._key_id(key, "reply")
        frame = self._reply_frame(kid, request_id, wire_status, body, repliers)
        if new_key:
            self._define(key, kid, "reply")
        self._out.append(frame)
        self._data_queued += 1

    # ------------------------------------------------- a frame at once (shortcuts)

    def request_now(self, key: WireKey, request_id: int, body: object) -> bytes | None:
        """``request(key, request_id, body)`` then ``data_to_send()``: the frame's
        bytes, counted as handed over; None, having done nothing, when frames are
        queued, sending is not allowed or ``key`` is not defined on this link yet.
        For a shell passing the bus's own values: ``request_id`` must be an int
        from 0 to 2**64-1 (not checked here; ``request()`` checks it).  Raises
        what ``request()`` raises for the body."""
        if self._out or not self._can_send:
            return None
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            return None
        if kid is None:
            return None
        frame = self._request_frame(kid, request_id, body)
        counters = self.counters  # counted as data_to_send() counts
        counters.frames_out += 1
        counters.bytes_out += len(frame)
        counters.messages_out += 1
        return frame

    def reply_now(
        self,
        request_id: int,
        key: WireKey,
        status: ReplyStatus,
        body: object,
        repliers: int | None = None,
    ) -> bytes | None:
        """``reply(...)`` then ``data_to_send()``, as :meth:`request_now`:
        ``request_id`` and ``repliers`` (None or an int) from 0 to 2**64-1 are the
        caller's to guarantee; a ``status`` that is not a ReplyStatus gives None."""
        if self._out or not self._can_send:
            return None
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            return None
        wire_status = REPLY_STATUS_CODES.get(status) if status.__class__ is ReplyStatus else None
        if kid is None or wire_status is None:
            return None
        frame = self._reply_frame(kid, request_id, wire_status, body, repliers)
        counters = self.counters  # counted as data_to_send() counts
        counters.frames_out += 1
        counters.bytes_out += len(frame)
        counters.messages_out += 1
        return frame

    def _request_frame(self, kid: int, request_id: int, body: object) -> bytes:
        """The next REQUEST frame, prefixed; raises (numbering nothing) when the
        body cannot be encoded or the frame is above ``max_frame_size``."""
        seq = self._tx_seq + 1
        try:
            packed = self._pack((_REQUEST, seq, kid, request_id, body))
        except ENCODE_ERRORS as exc:
            raise self._unencodable("request", None, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large("request", None, size)
        self._tx_seq = seq
        return self._prefix(size) + packed

    def _reply_frame(
        self, kid: int, request_id: int, wire_status: int, body: object, repliers: int | None
    ) -> bytes:
        """The next REPLY frame, prefixed (as :meth:`_request_frame`)."""
        seq = self._tx_seq + 1
        try:
            packed = self._pack(
                (_REPLY, seq, kid, request_id, wire_status, body)
                if repliers is None
                else (_REPLY, seq, kid, request_id, wire_status, body, repliers)
            )
        except ENCODE_ERRORS as exc:
            raise self._unencodable("reply", None, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large("reply", None, size)
        self._tx_seq = seq
        return self._prefix(size) + packed

    def cancel(self, request_id: int) -> None:
        """Tell the peer our request ``request_id`` is cancelled."""
        what = "cancel"
        self._check_sending(what)
        self._check_uint(request_id, "request_id", what)
        self._queue_sequenced(_CANCEL, (request_id,), what, data=True)

    # ------------------------------------------------------------------ checks

    @staticmethod
    def _check_reason(reason: str, what: str) -> None:
        if type(reason) is not str:
            raise UsageError(f"{what}() with reason={reason!r}: expected a str for the peer")

    @staticmethod
    def _check_role(role: Role, allowed: dict[int, Role], what: str) -> int:
        """The wire code of ``role`` (a bus Role, or its code), if ``allowed``."""
        given: object = role
        code = (
            ROLE_CODES.get(given)
            if isinstance(given, Role)
            else (given if type(given) is int else None)
        )
        if code in allowed:
            return code  # (an int: it is in allowed)
        names = " or ".join(f"Role.{r.name}" for r in allowed.values())
        raise UsageError(f"{what}() with role={role!r}: expected {names}")

    @staticmethod
    def _check_feed_state(feed_state: FeedState, what: str) -> bool:
        """``up`` on the wire for ``feed_state`` (a bus FeedState, or 0 / 1)."""
        given: object = feed_state
        if isinstance(given, FeedState):
            return FEED_STATE_CODES[given]
        if type(given) is int and given in (0, 1):
            return given == 1
        raise UsageError(
            f"{what}() with feed_state={feed_state!r}: expected FeedState.UP or FeedState.DOWN"
        )

    @staticmethod
    def _check_group(group: str, what: str) -> None:
        problem = group_problem(group) if type(group) is str else "expected a str"
        if problem is not None:
            raise UsageError(f"{what}() with group={show(group)}: {problem}")

    @staticmethod
    def _check_uint(value: int, name: str, what: str) -> None:
        if type(value) is not int or not 0 <= value < 1 << 64:
            raise UsageError(f"{what}() with {name}={value!r}: expected an int from 0 to 2**64-1")

    def _key_id(self, key: WireKey, what: str) -> int:
        """This side's id for ``key`` (the next free one on first use).

        A new key is defined by ``_define()`` once the frame using it has been
        encoded, so a command refused for its body queues nothing."""
        if (
            type(key) is not tuple
            or len(key) != 2
            or type(key[0]) is not str
            or not key[0]
            or type(key[1]) is not str
        ):
            raise UsageError(
                f"{what}() with key={show(key)}: expected a (type_name, subject) tuple "
                "of str with a non-empty type name"
            )
        kid = self._out_keys.get(key)
        return len(self._out_keys) if kid is None else kid

    def _send_role_frame(
        self, frame_type: int, key: WireKey, role: Role, allowed: dict[int, Role], what: str
    ) -> None:
        self._check_sending(what)
        role_code = self._check_role(role, allowed, what)
        kid = self._key_id(key, what)
        self._queue_sequenced(frame_type, (kid, role_code), what, data=False, key=key)

    def _send_pattern_frame(
        self, frame_type: int, type_name: str, dialect: str, text: str, what: str
    ) -> None:
        self._check_sending(what)
        if type(type_name) is not str or not type_name:
            raise UsageError(f"{what}() with type_name={show(type_name)}: expected a non-empty str")
        given: object = dialect
        code = DIALECT_CODES.get(given) if type(given) is str else given
        build = WILDCARDS.get(code) if type(code) is int else None
        if build is None:
            names = " or ".join(repr(name) for name in DIALECT_CODES)
            raise UsageError(f"{what}() with dialect={dialect!r}: expected {names}")
        try:
            build(text)
        except SubjectPatternError as exc:
            raise SubjectPatternError(f"{what}(): {exc}") from exc
        self._queue_sequenced(frame_type, (type_name, code, text), what, data=False)
