"""Checking each received frame: its shape, its fields, its place in the handshake.

The parser (:mod:`~actorbus.net._parser`) takes the common data frames itself;
every other frame comes here through ``_dispatch``: one handler per frame type
checks the frame and queues its event.  A broken rule raises
:class:`~actorbus.net._framing.Reject`, which the parser turns into the
ProtocolError ``next_event()`` raises.  Handshake frames move the parser's
cursor through the table of :mod:`~actorbus.net._handshake`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..bus.party import Role
from ..bus.subjects import Wildcard
from ..config.schema import node_id_problem
from ..errors import SubjectPatternError
from ._auth import (
    MAX_NONCE,
    MIN_NONCE,
    PROOF_SIZE,
    client_proof,
    new_nonce,
    proofs_match,
    server_proof,
)
from ._events import (
    Advertised,
    AuthenticationFailed,
    CancelReceived,
    FeedStatusReceived,
    GroupChanged,
    GroupNotificationReceived,
    LogoffReceived,
    LogonAccepted,
    LogonComplete,
    LogonRejected,
    LogonRequested,
    PatternSubscribed,
    PatternUnsubscribed,
    ReceiptReceived,
    ReplyReceived,
    RequestAcknowledged,
    RequestReceived,
    Retracted,
    RouteAnnounced,
    RoutedReceived,
    SenderChanged,
    SequenceGap,
    Subscribed,
    Unsubscribed,
)
from ._framing import OverLimit, Reject
from ._handshake import MOVES, SHOWN, Move, Side, Step
from ._protocol_base import (
    MAX_ACTOR_NAME,
    MAX_COUNT,
    MAX_KEY_ID,
    MAX_ROUTE_PATH,
    ProtocolBase,
    Run,
    check_length,
    group_problem,
    kind_of,
    run_id_problem,
    show,
)
from ._routed_frames import routed_frame, with_bodies
from ._wire import (
    ALL_ROLES,
    DIALECTS,
    FEED_STATES,
    INTEREST_ROLES,
    OFFER_ROLES,
    PROTOCOL_VERSION,
    REMOTE_SCOPES,
    REPLY_STATUSES,
    WILDCARDS,
    FrameType,
    WireKey,
    WireValue,
)

__all__ = ["FrameChecks"]

_LOGOFF: Final = int(FrameType.LOGOFF)
_CHALLENGE: Final = int(FrameType.CHALLENGE)
_PROOF: Final = int(FrameType.PROOF)
#: The frames that may arrive before the logon is accepted.
_BEFORE_LOGON: Final = frozenset(
    int(t)
    for t in (
        FrameType.LOGON,
        FrameType.CHALLENGE,
        FrameType.PROOF,
        FrameType.LOGON_ACCEPT,
        FrameType.LOGON_REJECT,
        FrameType.LOGOFF,
    )
)
_HEARTBEAT_REPLY: Final = int(FrameType.HEARTBEAT_REPLY)
_REQUEST_ACK: Final = int(FrameType.REQUEST_ACK)

#: A refused pattern's rule is cut to this many characters in the error.
_RULE_SHOWN: Final = 200

_Frame = tuple[object, ...]


#: frame type -> the name of its handler (FrameChecks._frame_handlers)
_HANDLER_NAMES: Final = {
    int(FrameType.LOGON): "_on_logon",
    int(FrameType.LOGON_ACCEPT): "_on_logon_accept",
    int(FrameType.LOGON_REJECT): "_on_logon_reject",
    int(FrameType.LOGON_COMPLETE): "_on_logon_complete",
    int(FrameType.LOGOFF): "_on_logoff",
    int(FrameType.HEARTBEAT): "_on_heartbeat",
    int(FrameType.HEARTBEAT_REPLY): "_on_heartbeat_reply",
    int(FrameType.KEY_DEF): "_on_key_def",
    int(FrameType.RECEIPT): "_on_receipt",
    _CHALLENGE: "_on_challenge",
    _PROOF: "_on_proof",
    int(FrameType.ADVERTISE): "_on_advertise",
    int(FrameType.RETRACT): "_on_retract",
    int(FrameType.SUBSCRIBE): "_on_subscribe",
    int(FrameType.UNSUBSCRIBE): "_on_unsubscribe",
    int(FrameType.FEED_STATUS): "_on_feed_status",
    int(FrameType.NOTIFY): "_on_notify",
    int(FrameType.REQUEST): "_on_request",
    int(FrameType.REQUEST_ACK): "_on_request_ack",
    int(FrameType.REPLY): "_on_reply",
    int(FrameType.CANCEL): "_on_cancel",
    int(FrameType.NOTIFY_RUN): "_on_notify_run",
    int(FrameType.SUBSCRIBE_PATTERN): "_on_subscribe_pattern",
    int(FrameType.UNSUBSCRIBE_PATTERN): "_on_unsubscribe_pattern",
    int(FrameType.GROUP): "_on_group",
    int(FrameType.GROUP_NOTIFY): "_on_group_notify",
    int(FrameType.SENDER): "_on_sender",
    int(FrameType.ROUTED): "_on_routed",
    int(FrameType.ROUTE): "_on_route",
}


class FrameChecks(ProtocolBase):
    """The handler of every frame type (mixed into LinkProtocol)."""

    def _frame_handlers(self) -> dict[int, Callable[[Any, _Frame], None]]:
        """frame type -> this class's handler, a function of the object and the
        frame (the class's table, made once, copied: an object may change its
        own).  Bound methods would cost every connection an object per frame
        type in the interpreter's small-object arenas, and reference cycles."""
        cls = type(self)
        table = cls.__dict__.get("_handler_table")
        if table is None:
            table = {kind: getattr(cls, name) for kind, name in _HANDLER_NAMES.items()}
            cls._handler_table = table  # type: ignore[attr-defined]
        return dict(table)

    def _dispatch(self, frame: object) -> None:
        if type(frame) is not tuple or not frame:
            raise Reject(
                f"a frame body is a msgpack {kind_of(frame)}, not a non-empty array",
                "malformed frame",
            )
        frame_type = frame[0]
        handler = self._handlers.get(frame_type) if type(frame_type) is int else None
        if handler is None:
            raise Reject(
                f"a frame has type {show(frame_type)}, which is not a frame type of "
                f"protocol version {PROTOCOL_VERSION}",
                "unknown frame type",
            )
        if not self._rx_open and frame_type not in _BEFORE_LOGON:
            raise Reject(
                f"garbage before logon: a {FrameType(frame_type).name} frame arrived "
                f"while the logon is {SHOWN[self._rx].name}; only LOGON, CHALLENGE, PROOF, "
                "LOGON_ACCEPT/REJECT and LOGOFF may come before the logon is accepted",
                "frame before logon was accepted",
            )
        handler(self, frame)

    # ------------------------------------------------------------- fields

    @staticmethod
    def _malformed(frame: _Frame, detail: str) -> Reject:
        name = FrameType(frame[0]).name  # type: ignore[arg-type]
        return Reject(f"malformed {name} frame: {detail}", f"malformed {name} frame")

    def _length(self, frame: _Frame, length: int) -> None:
        if len(frame) != length:
            raise self._malformed(frame, f"{len(frame)} elements, expected {length}")

    def _text(self, frame: _Frame, index: int, what: str) -> str:
        value = frame[index]
        if type(value) is not str:
            raise self._malformed(frame, f"{what} is {show(value)}, expected a str")
        return value

    def _node_id(self, frame: _Frame, index: int) -> str:
        node_id = self._text(frame, index, "node id")
        problem = node_id_problem(node_id)
        if problem is not None:
            raise self._malformed(frame, f"node id {show(node_id)}: {problem}")
        return node_id

    def _run_id(self, frame: _Frame, index: int) -> str:
        """The optional run id at ``index`` ("" when the frame is shorter)."""
        if len(frame) <= index:
            return ""
        run_id = self._text(frame, index, "run id")
        problem = run_id_problem(run_id)
        if problem is not None:
            raise self._malformed(frame, f"run id {show(run_id)}: {problem}")
        return run_id

    def _bin(self, frame: _Frame, index: int, what: str, low: int, high: int) -> bytes:
        value = frame[index]
        if type(value) is not bytes:
            raise self._malformed(frame, f"{what} is {show(value)}, expected bin")
        if not low <= len(value) <= high:
            span = f"{low}" if low == high else f"{low}..{high}"
            raise self._malformed(frame, f"{what} has {len(value)} bytes, expected {span}")
        return value

    def _uint(self, frame: _Frame, index: int, what: str) -> int:
        value = frame[index]
        if type(value) is not int or value < 0:
            raise self._malformed(frame, f"{what} is {show(value)}, expected an int >= 0")
        return value

    def _flag(self, frame: _Frame, index: int, what: str) -> bool:
        value = frame[index]
        if type(value) is not bool:
            raise self._malformed(frame, f"{what} is {show(value)}, expected a bool")
        return value is True

    def _role(self, frame: _Frame, index: int, allowed: dict[int, Role]) -> Role:
        value = frame[index]
        role = allowed.get(value) if type(value) is int else None
        if role is None:
            names = ", ".join(f"{r.name}={code}" for code, r in allowed.items())
            raise self._malformed(frame, f"role is {show(value)}, expected one of {names}")
        return role

    def _group(self, frame: _Frame, index: int) -> str:
        group = self._text(frame, index, "group")
        problem = group_problem(group)
        if problem is not None:
            raise self._malformed(frame, f"group {show(group)}: {problem}")
        return group

    def _wildcard(self, frame: _Frame, index: int) -> Wildcard:
        """The dialect code at ``index`` and the pattern after it, as the bus's
        Wildcard (whose constructor checks the pattern's rules)."""
        value = frame[index]
        build = WILDCARDS.get(value) if type(value) is int else None
        if build is None:
            names = ", ".join(f"{name}={code}" for code, name in DIALECTS.items())
            raise self._malformed(frame, f"dialect is {show(value)}, expected one of {names}")
        text = self._text(frame, index + 1, "pattern")
        self._check_length(text, "pattern")
        try:
            return build(text)
        except SubjectPatternError as exc:
            dialect = DIALECTS[value]  # type: ignore[index]  # (an int: build was found)
            # "<dialect> pattern <text>: <rule>", with the peer's text cut short
            rule = str(exc).removeprefix(f"{dialect} pattern {text!r}: ")
            if len(rule) > _RULE_SHOWN:
                rule = f"{rule[: _RULE_SHOWN - 3]}..."
            raise self._malformed(frame, f"{dialect} pattern {show(text)}: {rule}") from exc

    def _check_length(self, text: str, what: str) -> None:
        """A type name, subject or pattern the peer sent is within max_subject_length."""
        check_length(text, what, self.settings.max_subject_length)

    def _over(self, setting: str, what: str, wire: str) -> OverLimit:
        """The peer went over the ``setting`` limit on what it may hold on one link."""
        most = getattr(self.settings, setting)
        return OverLimit(
            f"the peer went over {setting}={most} {what} on one link; raise {setting} "
            "on this node if the peer is trusted and needs more",
            f"too many {wire}",
        )

    def _hold(self, held: set[Any], item: object, setting: str, what: str) -> None:
        """The peer holds ``item`` (an advertisement, subscription, pattern or
        group) from now on, within the ``setting`` limit."""
        if item not in held:
            if len(held) >= getattr(self.settings, setting):
                raise self._over(setting, what, what)
            held.add(item)

    def _key(self, frame: _Frame, index: int) -> WireKey | None:
        """The key a frame names; None when its type is unknown here."""
        kid = frame[index]
        if type(kid) is int:
            key = self._in_keys.get(kid)
            if key is not None:
                return key
            if kid in self._in_unknown:
                return None
        name = FrameType(frame[0]).name  # type: ignore[arg-type]
        raise Reject(
            f"a {name} frame uses key id {show(kid)}, which the peer never defined with KEY_DEF",
            "undefined key id",
        )

    def _in_sequence(self, frame: _Frame) -> bool:
        """Check ``seq``; False means a duplicate, to be dropped."""
        seq = frame[1]
        if type(seq) is not int or seq < 1:
            raise self._malformed(frame, f"seq is {show(seq)}, expected an int >= 1")
        expected = self._rx_seq + 1
        if seq == expected:
            self._rx_seq = seq
            return True
        if seq < expected:
            self.counters.duplicates += 1
            return False
        self.counters.gaps += 1
        self._events.append(SequenceGap(expected, seq))
        self._rx_seq = seq
        return True

    # --------------------------------------------------------- handshake frames

    def _on_logon(self, frame: _Frame) -> None:
        if self.side is Side.CLIENT:
            raise Reject(
                "the server sent LOGON; only a client logs on", "unexpected LOGON from a server"
            )
        step = MOVES.get((self._rx, Move.PEER_LOGON))
        if step is None:
            raise Reject(
                f"duplicate LOGON: the peer already logged on (logon {SHOWN[self._rx].name})",
                "duplicate LOGON",
            )
        if len(frame) < 3:
            raise self._malformed(frame, f"{len(frame)} elements, expected at least 5")
        version = frame[1]
        if type(version) is not int:
            raise self._malformed(frame, f"version is {show(version)}, expected an int")
        if version != PROTOCOL_VERSION:
            raise Reject(
                f"the peer speaks protocol version {show(version)}, this node speaks "
                f"version {PROTOCOL_VERSION}; run the same actorbus protocol on both nodes",
                f"protocol version {version} is not supported; this node speaks "
                f"version {PROTOCOL_VERSION}",
            )
        if len(frame) < 5:
            raise self._malformed(frame, f"{len(frame)} elements, expected at least 5")
        node_id = self._node_id(frame, 2)
        run_id = self._run_id(frame, 3)
        self._peer_nonce = self._bin(frame, 4, "nonce", MIN_NONCE, MAX_NONCE)
        # Nothing of this node before the client proved its key: the challenge is
        # a random nonce, and the node id it claims takes nothing yet.
        self._claim = (node_id, run_id)
        self._queue((_CHALLENGE, self._nonce), "challenge")
        self._rx_to(step)
        self._to(MOVES[(self._step, Move.PEER_LOGON)])

    def _on_challenge(self, frame: _Frame) -> None:
        if self.side is Side.SERVER:
            raise Reject("the client sent CHALLENGE; only a server challenges", "unexpected frame")
        step = MOVES.get((self._rx, Move.PEER_CHALLENGE))
        if step is None:
            raise Reject(
                f"CHALLENGE arrived while the logon is {self._rx.name}; it answers exactly "
                "one LOGON",
                "unexpected frame",
            )
        self._length(frame, 2)
        nonce = self._peer_nonce = self._bin(frame, 1, "nonce", MIN_NONCE, MAX_NONCE)
        key = self._key_for(self.node_id) or b""
        proof = client_proof(key, self._nonce, nonce, self.node_id, self.run_id)
        self._queue((_PROOF, proof), "proof")
        self._rx_to(step)
        self._to(MOVES[(self._step, Move.PEER_CHALLENGE)])

    def _on_proof(self, frame: _Frame) -> None:
        if self.side is Side.CLIENT:
            raise Reject(
                "the server sent PROOF; only a client answers CHALLENGE", "unexpected frame"
            )
        step = MOVES.get((self._rx, Move.PEER_PROOF))
        if step is None:
            raise Reject(
                f"PROOF arrived while the logon is {self._rx.name}; it answers exactly one "
                "CHALLENGE",
                "unexpected frame",
            )
        self._length(frame, 2)
        proof = self._bin(frame, 1, "proof", PROOF_SIZE, PROOF_SIZE)
        node_id, run_id = self._claim
        key = self._key_for(node_id)
        if key is None:  # no key for that node: check against one nobody holds
            key = new_nonce()
        expected = client_proof(key, self._peer_nonce, self._nonce, node_id, run_id)
        if not proofs_match(expected, proof):
            self._auth_failed(node_id)
            return
        self._link_key = key
        self._rx_to(step)
        self._events.append(LogonRequested(node_id, run_id))

    def _on_logon_accept(self, frame: _Frame) -> None:
        if self.side is Side.CLIENT and self._rx is Step.LOGON_SENT:
            raise Reject(
                "LOGON_ACCEPT arrived before any CHALLENGE: the server did not authenticate "
                f"(it may speak a protocol version before {PROTOCOL_VERSION})",
                "unexpected frame",
            )
        step = self._logon_answer(frame, Move.PEER_ACCEPT)
        self._length(frame, 4)
        node_id = self._node_id(frame, 1)
        run_id = self._run_id(frame, 2)
        proof = self._bin(frame, 3, "proof", PROOF_SIZE, PROOF_SIZE)
        key = self._key_for(self.node_id) or b""
        expected = server_proof(
            key,
            self._nonce,
            self._peer_nonce,
            self.node_id,
            self.run_id,
            server_id=node_id,
            server_run=run_id,
        )
        if not proofs_match(expected, proof):
            self._auth_failed(node_id)
            return
        self._rx_to(step)
        self._events.append(LogonAccepted(node_id, run_id))

    def _auth_failed(self, claimed: str) -> None:
        """The peer's proof does not match: nothing more is parsed; the event closes."""
        self.counters.auth_failures += 1
        self._rx_to(Step.CLOSED)
        self._drop_partial_frame()
        self._events.append(AuthenticationFailed(claimed))

    def _on_logon_reject(self, frame: _Frame) -> None:
        step = self._logon_answer(frame, Move.PEER_REJECT)
        self._length(frame, 2)
        reason = self._text(frame, 1, "reason")
        self._rx_to(step)
        self._events.append(LogonRejected(reason))

    def _logon_answer(self, frame: _Frame, move: Move) -> Step:
        """The parser's next step for a LOGON_ACCEPT / LOGON_REJECT, if it may come."""
        name = FrameType(frame[0]).name  # type: ignore[arg-type]
        if self.side is Side.SERVER:
            raise Reject(f"the client sent {name}; only a server answers LOGON", "unexpected frame")
        step = MOVES.get((self._rx, move))
        if step is None:
            raise Reject(
                f"{name} arrived while the logon is {SHOWN[self._rx].name}; it answers "
                "exactly one LOGON",
                "unexpected frame",
            )
        return step

    def _on_logon_complete(self, frame: _Frame) -> None:
        self._length(frame, 1)
        step = MOVES.get((self._rx, Move.PEER_COMPLETE))
        if step is None:  # (the parser is past acceptance: _dispatch checked)
            raise Reject("duplicate LOGON_COMPLETE", "duplicate LOGON_COMPLETE")
        self._rx_to(step)
        self._events.append(LogonComplete())

    def _on_logoff(self, frame: _Frame) -> None:
        self._length(frame, 2)
        reason = self._text(frame, 1, "reason")
        self._rx_to(Step.CLOSED)
        self._events.append(LogoffReceived(reason))

    def _on_receipt(self, frame: _Frame) -> None:
        self._length(frame, 2)
        received = self._uint(frame, 1, "received count")
        if received > MAX_COUNT:
            raise self._malformed(frame, f"received count {received} is above 2**64-1")
        step = MOVES.get((self._rx, Move.PEER_RECEIPT))
        if step is None:  # (the parser is past acceptance: _dispatch checked)
            if self._rx is Step.COMPLETE_IN:
                raise Reject(
                    "RECEIPT after LOGON_COMPLETE; it belongs to the logon", "RECEIPT after logon"
                )
            raise Reject("duplicate RECEIPT", "duplicate RECEIPT")
        self._rx_to(step)
        self._events.append(ReceiptReceived(received))

    # ------------------------------------------------------------- link frames

    def _on_heartbeat(self, frame: _Frame) -> None:
        self._length(frame, 1)
        self.counters.heartbeats_in += 1
        self._queue((_HEARTBEAT_REPLY,), "heartbeat reply")

    def _on_heartbeat_reply(self, frame: _Frame) -> None:
        self._length(frame, 1)  # receiving it was the point: activity is recorded

    def _on_key_def(self, frame: _Frame) -> None:
        self._length(frame, 4)
        kid = self._uint(frame, 1, "key id")
        if kid > MAX_KEY_ID:
            raise self._malformed(frame, f"key id {kid} is above {MAX_KEY_ID}")
        type_name = self._text(frame, 2, "type name")
        subject = self._text(frame, 3, "subject")
        if not type_name:
            raise self._malformed(frame, "type name is empty")
        self._check_length(type_name, "type name")
        self._check_length(subject, "subject")
        if kid in self._in_keys or kid in self._in_unknown:
            raise Reject(f"the peer defined key id {kid} twice", "duplicate key id")
        if len(self._in_keys) + len(self._in_unknown) >= self.settings.max_keys:
            raise self._over("max_keys", "keys", "keys")
        key = (type_name, subject)
        if self._is_known_type(type_name):
            self._in_keys[kid] = key
        else:
            self._in_unknown[kid] = key

    # -------------------------------------------------------- sequenced frames

    def _on_advertise(self, frame: _Frame) -> None:
        self._length(frame, 6)
        key = self._key(frame, 2)
        role = self._role(frame, 3, OFFER_ROLES)
        value = frame[4]
        scope = REMOTE_SCOPES.get(value) if type(value) is int else None
        if scope is None:
            raise self._malformed(
                frame,
                f"scope is {show(value)}, expected LOCAL_AND_REMOTE=1 or REMOTE_ONLY=2",
            )
        up = self._flag(frame, 5, "feed state")
        if self._in_sequence(frame):
            self._hold(self._in_feeds, (frame[2], role), "max_feeds", "feeds")
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(Advertised(key, role, scope, FEED_STATES[up]))

    def _on_retract(self, frame: _Frame) -> None:
        self._role_frame(frame, OFFER_ROLES, Retracted)

    def _on_subscribe(self, frame: _Frame) -> None:
        self._role_frame(frame, INTEREST_ROLES, Subscribed)

    def _on_unsubscribe(self, frame: _Frame) -> None:
        self._role_frame(frame, INTEREST_ROLES, Unsubscribed)

    def _role_frame(
        self,
        frame: _Frame,
        allowed: dict[int, Role],
        event: type[Retracted | Subscribed | Unsubscribed],
    ) -> None:
        self._length(frame, 4)
        key = self._key(frame, 2)
        role = self._role(frame, 3, allowed)
        if self._in_sequence(frame):
            if event is Subscribed:
                self._hold(self._in_feeds, (frame[2], role), "max_feeds", "feeds")
            else:
                self._in_feeds.discard((frame[2], role))
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(event(key, role))

    def _on_subscribe_pattern(self, frame: _Frame) -> None:
        self._pattern_frame(frame, PatternSubscribed)

    def _on_unsubscribe_pattern(self, frame: _Frame) -> None:
        self._pattern_frame(frame, PatternUnsubscribed)

    def _pattern_frame(
        self, frame: _Frame, event: type[PatternSubscribed | PatternUnsubscribed]
    ) -> None:
        """[type, seq, type_name, dialect, text]: the type is named, not keyed; one
        unknown here is dropped and counted, as a frame on a key of an unknown
        type is."""
        self._length(frame, 5)
        type_name = self._text(frame, 2, "type name")
        if not type_name:
            raise self._malformed(frame, "type name is empty")
        self._check_length(type_name, "type name")
        wildcard = self._wildcard(frame, 3)
        if self._in_sequence(frame):
            pattern = (type_name, frame[3], wildcard.text)
            if event is PatternSubscribed:
                self._hold(self._in_patterns, pattern, "max_patterns", "patterns")
            else:
                self._in_patterns.discard(pattern)
            if self._is_known_type(type_name):
                self._events.append(event(type_name, wildcard))
            else:
                self.counters.unknown_type += 1

    def _on_group(self, frame: _Frame) -> None:
        self._length(frame, 5)
        key = self._key(frame, 2)
        group = self._group(frame, 3)
        members = self._uint(frame, 4, "members")
        if self._in_sequence(frame):
            if members:
                self._hold(self._in_groups, (frame[2], group), "max_groups", "groups")
            else:
                self._in_groups.discard((frame[2], group))
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(GroupChanged(key, group, members))

    def _on_feed_status(self, frame: _Frame) -> None:
        self._length(frame, 5)
        key = self._key(frame, 2)
        role = self._role(frame, 3, ALL_ROLES)
        up = self._flag(frame, 4, "up")
        if self._in_sequence(frame):
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(FeedStatusReceived(key, role, up))

    def _on_notify(self, frame: _Frame) -> None:
        self._length(frame, 4)
        key = self._key(frame, 2)
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._queue_notification(key, frame[3])

    def _on_notify_run(self, frame: _Frame) -> None:
        self._length(frame, 4)
        key = self._key(frame, 2)
        bodies = frame[3]
        if type(bodies) is not tuple or not bodies:
            raise self._malformed(
                frame, f"the bodies are {show(bodies)}, expected a non-empty array"
            )
        seq = frame[1]
        if type(seq) is not int or seq < 1:
            raise self._malformed(frame, f"seq is {show(seq)}, expected an int >= 1")
        # n NOTIFY frames numbered seq .. seq+n-1, as _in_sequence takes each
        count = len(bodies)
        expected = self._rx_seq + 1
        if seq > expected:
            self.counters.gaps += 1
            self._events.append(SequenceGap(expected, seq))
        elif seq < expected:
            old = min(expected - seq, count)
            self.counters.duplicates += old
            bodies = bodies[old:]
        self._rx_seq = max(self._rx_seq, seq + count - 1)
        if bodies:
            self.counters.messages_in += len(bodies)
            if key is None:
                self.counters.unknown_type += len(bodies)
            else:
                for body in bodies:
                    self._queue_notification(key, body)

    def _on_group_notify(self, frame: _Frame) -> None:
        """A data message exactly as NOTIFY is (sequence, counters, unknown types)."""
        self._length(frame, 5)
        key = self._key(frame, 2)
        group = self._group(frame, 3)
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(GroupNotificationReceived(key, group, frame[4]))

    def _on_sender(self, frame: _Frame) -> None:
        node, hops = None, 0
        if len(frame) == 6:  # a forwarded sender: its node and the hops before
            node = self._node_id(frame, 4)
            hops = self._uint(frame, 5, "hops")
        else:
            self._length(frame, 4)
        actor = frame[2]
        if actor is not None and (type(actor) is not str or len(actor) > MAX_ACTOR_NAME):
            raise self._malformed(
                frame,
                f"actor is {show(actor)}, expected nil or a str of at most "
                f"{MAX_ACTOR_NAME} characters",
            )
        feed = self._uint(frame, 3, "feed")
        if self._in_sequence(frame):
            self._events.append(SenderChanged(actor, feed, node, hops))

    def _on_route(self, frame: _Frame) -> None:
        self._length(frame, 7)
        origin = self._node_id(frame, 2) if frame[2] != "" else ""
        seq = self._uint(frame, 3, "seq")
        peers = frame[4]
        if type(peers) is not tuple or len(peers) > MAX_ROUTE_PATH:
            raise self._malformed(
                frame, f"peers is {show(peers)}, expected an array of at most {MAX_ROUTE_PATH}"
            )
        for node in peers:
            problem = node_id_problem(node) if type(node) is str else "not a str"
            if problem is not None:
                raise self._malformed(frame, f"peer node {show(node)}: {problem}")
        hops = self._uint(frame, 5, "hops")
        flags = self._uint(frame, 6, "flags")
        if self._in_sequence(frame):
            self.peer_routes = True
            self._events.append(RouteAnnounced(origin, seq, peers, hops, flags))

    def _on_request(self, frame: _Frame) -> None:
        self._length(frame, 5)
        key = self._key(frame, 2)
        request_id = self._uint(frame, 3, "request id")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            if key is None:
                self.counters.unknown_type += 1
                # Nobody here can take it: say so at once rather than leave the
                # requestor waiting for replies that will never come.
                self._queue_sequenced(
                    _REQUEST_ACK, (request_id, 0), "request ack (unknown type)", data=True
                )
            else:
                self._events.append(RequestReceived(key, request_id, frame[4]))

    def _on_request_ack(self, frame: _Frame) -> None:
        self._length(frame, 4)
        request_id = self._uint(frame, 2, "request id")
        repliers = self._uint(frame, 3, "repliers")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            self._events.append(RequestAcknowledged(request_id, repliers))

    def _on_reply(self, frame: _Frame) -> None:
        if len(frame) != 7:
            self._length(frame, 6)
        key = self._key(frame, 2)
        request_id = self._uint(frame, 3, "request id")
        repliers = self._uint(frame, 6, "repliers") if len(frame) == 7 else None
        value = frame[4]
        status = REPLY_STATUSES.get(value) if type(value) is int else None
        if status is None:
            raise self._malformed(frame, f"status is {show(value)}, expected 0, 1 or 2")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            if key is None:
                # Counted, but delivered: see ReplyReceived.
                self.counters.unknown_type += 1
                key = self._in_unknown[frame[2]]  # type: ignore[index]
            self._events.append(ReplyReceived(request_id, key, status, frame[5], repliers))

    def _on_cancel(self, frame: _Frame) -> None:
        self._length(frame, 3)
        request_id = self._uint(frame, 2, "request id")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            self._events.append(CancelReceived(request_id))

    def _on_routed(self, frame: _Frame) -> None:
        """A data message counted as NOTIFY is; a run of *n* as *n*, numbered as
        NOTIFY_RUN's (checked by _routed_frames)."""
        routed = routed_frame(frame, self._routed_ids, self.settings.max_subject_length)
        bodies = routed.body
        if isinstance(bodies, bytes):
            if self._in_sequence(frame):
                self.counters.messages_in += 1
                self._events.append(RoutedReceived(routed))
            return
        seq, count, expected = frame[1], len(bodies), self._rx_seq + 1
        if type(seq) is not int or seq < 1:
            raise self._malformed(frame, f"seq is {show(seq)}, expected an int >= 1")
        if seq > expected:
            self.counters.gaps += 1
            self._events.append(SequenceGap(expected, seq))
        elif seq < expected:
            self.counters.duplicates += min(expected - seq, count)
            bodies = bodies[expected - seq :]
        self._rx_seq = max(self._rx_seq, seq + count - 1)
        if bodies:
            self.counters.messages_in += len(bodies)
            self._events.append(RoutedReceived(with_bodies(routed, bodies)))

    def _queue_notification(self, key: WireKey, body: WireValue) -> None:
        """Queue a notification: onto the newest run if it is on ``key``."""
        events = self._events
        if events:
            last = events[-1]
            if last.__class__ is Run and last.key is key:
                last.append(body)
                return
        run = Run((body,))
        run.key = key
        events.append(run)
