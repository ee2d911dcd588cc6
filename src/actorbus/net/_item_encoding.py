"""Turning a connection's queued items into the protocol's commands, and what
happens to an item that cannot be encoded (a message whose codec refuses it):
it is dropped and counted, a request's requestor gets its ERROR reply at once,
a reply is replaced by a small stand-in so the requestor's count stays right;
and what was still pending when the connection ended, counted as dropped.

Threads: the loop thread, or a sending thread holding the write lock
(:mod:`actorbus.net._outbound`, direct writes).
"""

from __future__ import annotations

from typing import Any

from ..bus.message import MessageKey, Reply, ReplyStatus
from ..bus.party import Role
from ..bus.routed import bodies_of
from ..bus.scope import FeedState, Scope
from ..bus.sender import Sender
from ..errors import CodecError, UsageError
from ._connection_base import (
    DATA_OPS,
    OP_ADVERTISE,
    OP_BODIES,
    OP_CANCEL,
    OP_FEED_STATUS,
    OP_GROUP,
    OP_GROUP_NOTIFY,
    OP_REPLY,
    OP_REPLY_ACKED,
    OP_REQUEST,
    OP_REQUEST_ACK,
    OP_RETRACT,
    OP_ROUTE,
    OP_ROUTED,
    OP_SUBSCRIBE,
    OP_SUBSCRIBE_PATTERN,
    OP_UNSUBSCRIBE,
    ConnectionBase,
)
from .protocol import LinkProtocol, WireKey

__all__ = ["ItemEncoding", "wire_key"]


def wire_key(key: MessageKey) -> WireKey:
    """The (type name, subject) pair the protocol names ``key`` by."""
    return (key.message_class.__type_name__, key.subject)


class ItemEncoding(ConnectionBase):
    """``_command``, ``_unsendable`` and ``_drop_pending`` (mixed into ``Outbound``)."""

    def _notify_run(self, proto: LinkProtocol, key: WireKey, bodies: list[Any]) -> None:
        """Encode notifications on one key; one that cannot be sent is lost, not the
        link (nor the ones after it)."""
        while bodies:
            before = proto.last_seq_sent
            try:
                proto.notify_many(key, bodies)
                return
            except (CodecError, UsageError) as exc:
                self._unsendable(None, exc)
                bodies = bodies[proto.last_seq_sent - before + 1 :]

    def _command(self, proto: LinkProtocol, item: tuple[Any, ...]) -> None:
        op = item[0]
        # codec.to_wire(m), inline: the class's encoder, or the message itself
        if op == OP_REPLY_ACKED:
            reply = item[2]
            cls = reply.__class__
            enc = cls.__wire_encode__
            body = reply if enc is None else enc(reply)
            proto.reply(item[1], (cls.__type_name__, reply.subject), reply.status, body, item[3])
        elif op == OP_REPLY:
            reply = item[2]
            cls = reply.__class__
            enc = cls.__wire_encode__
            body = reply if enc is None else enc(reply)
            proto.reply(item[1], (cls.__type_name__, reply.subject), reply.status, body)
        elif op == OP_REQUEST:
            message = item[2]
            cls = message.__class__
            enc = cls.__wire_encode__
            body = message if enc is None else enc(message)
            proto.request((cls.__type_name__, message.subject), item[1], body)
        elif op == OP_REQUEST_ACK:
            proto.request_ack(item[1], item[2])
        elif op == OP_CANCEL:
            proto.cancel(item[1])
        elif op == OP_ADVERTISE:
            state = FeedState.UP if item[3] else FeedState.DOWN
            proto.advertise(wire_key(item[1]), item[2], Scope.LOCAL_AND_REMOTE, state)
        elif op == OP_RETRACT:
            proto.retract(wire_key(item[1]), item[2])
        elif op == OP_FEED_STATUS:
            proto.feed_status(wire_key(item[1]), item[2], bool(item[3]))
        elif op == OP_SUBSCRIBE:
            proto.subscribe(wire_key(item[1]), Role.SUBSCRIBER)
        elif op == OP_UNSUBSCRIBE:
            proto.unsubscribe(wire_key(item[1]), Role.SUBSCRIBER)
        elif op == OP_GROUP_NOTIFY:
            message = item[2]
            cls = message.__class__
            enc = cls.__wire_encode__
            body = message if enc is None else enc(message)
            proto.group_notify((cls.__type_name__, message.subject), item[1], body)
        elif op == OP_GROUP:
            proto.group(wire_key(item[1]), item[2], item[3])
        elif op == OP_BODIES:  # a forwarder's pass-through (net/_passthrough.py)
            self._notify_run(proto, item[1], item[2])
        elif op == OP_ROUTED:
            proto.routed(item[1])
        elif op == OP_ROUTE:
            proto.route(*item[1:])
        elif op == OP_SUBSCRIBE_PATTERN:
            wildcard = item[2]
            proto.subscribe_pattern(item[1].__type_name__, wildcard.dialect, wildcard.text)
        else:
            wildcard = item[2]
            proto.unsubscribe_pattern(item[1].__type_name__, wildcard.dialect, wildcard.text)

    def _unsendable(self, item: Any, exc: Exception) -> None:
        if item.__class__ is tuple and item[0] == OP_REPLY_ACKED:
            # the reply cannot go, its acknowledgement can (it holds only ints)
            if self.proto is not None:
                self.proto.request_ack(item[1], item[3])
            item = (OP_REPLY, item[1], item[2])
        routed = item[1] if item.__class__ is tuple and item[0] == OP_ROUTED else None
        self.link.count_dropped(len(bodies_of(routed)) if routed is not None else 1)
        self._log.warning("link {}: a message is dropped, it cannot be sent: {}", self.name, exc)
        party = self.party
        op = item[0] if item.__class__ is tuple else None
        if party is None:
            return
        if op == OP_REQUEST:
            # Nobody over there will see it: the requestor gets its ERROR reply now.
            party.request_ack(item[1], 0)
        elif op == OP_REPLY:
            # Keep the requestor's count right with a small reply in its place.
            reply: Reply = item[2]
            final = reply.status is not ReplyStatus.OK_CONTINUING
            stand_in = Reply(
                reply.subject,
                status=ReplyStatus.ERROR if final else ReplyStatus.OK_CONTINUING,
                reason=f"a {type(reply).__name__} reply could not be sent over the link",
            )
            self.pending.appendleft((OP_REPLY, item[1], stand_in))

    def _drop_pending(self) -> None:
        """(the connection ended) Count what was still pending as dropped: a
        passed-through run one per notification, other data messages one each."""
        pending = self.pending
        n = 0
        while pending:
            item = pending.popleft()
            if item.__class__ is tuple:
                n += len(item[2]) if item[0] == OP_BODIES else item[0] in DATA_OPS
            elif item.__class__ is not Sender:
                n += 1
        self.link.count_dropped(n)
