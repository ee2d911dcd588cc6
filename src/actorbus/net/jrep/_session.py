"""One J.REP session: the transport the router calls, the reader and the writer.

:class:`Session` implements :class:`~actorbus.bus.party.PartyTransport`: each
``send_*`` queues an item (:mod:`._session_base`), and the writer coroutine
turns the items into J.REP messages on the event loop — feed state into
``RemoteSubscribe`` / ``RemoteUnsubscribe`` / ``FeedState``, notifications and
requests into messages on their subjects, replies into messages on the
client's ``ReplyTo`` with ``Remaining`` — and sends what it has in one JSON
array per WebSocket message (docs/jrep.md).

The reader coroutine (the WebSocket handler) reads frames, hands them to
:meth:`~._inbound.ClientSide.received`, keeps the rate limit (reading pauses
while the client is over it), and ends the session on the handshake and idle
timeouts.  Whatever ends a session — the client's close or ``Disconnect``, a
timeout, an overflowing queue, the node closing — detaches its party: the
client's publishers and repliers go DOWN on the bus, its requests are
cancelled, and the bus's requests to it end with ERROR.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from websockets.exceptions import ConnectionClosed

from ..._log import logger
from ...bus.message import Message, MessageKey, Reply, ReplyStatus
from ...bus.party import Role
from ...bus.sender import Sender
from ...bus.subjects import Wildcard
from . import _parts as p
from ._idle import IdleTimer
from ._inbound import ClientSide
from ._parts import dumps
from ._values import message_to_json

__all__ = ["Session"]

#: J.REP messages one outgoing WebSocket message holds at most
_CHUNK = 256
#: WebSocket close codes the gateway uses (docs/jrep.md, "Closing")
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_EXPIRED = 4000


class Session(ClientSide):
    """One client (see the module docstring)."""

    # ------------------------------------------------ PartyTransport (any thread)

    def send_advertise(self, key: MessageKey, role: Role, up: bool) -> None:
        self.put(("advertise", key, role, up), data=False)

    def send_retract(self, key: MessageKey, role: Role) -> None:
        self.put(("retract", key, role), data=False)

    def send_feed_status(self, key: MessageKey, role: Role, up: bool) -> None:
        self.put(("advertise", key, role, up), data=False)

    def send_subscribe(self, key: MessageKey) -> None:
        """A bus subscriber matches the client's publisher: a browser publishes
        regardless; a client bus is told (RemoteSubscribe, Role "subscriber")."""
        if self.federated:
            self.put(("interest", key, True), data=False)

    def send_unsubscribe(self, key: MessageKey) -> None:
        """(as send_subscribe: RemoteUnsubscribe, Role "subscriber")"""
        if self.federated:
            self.put(("interest", key, False), data=False)

    def send_subscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        """The bus's wildcard subscribers join the client's keys on the bus side."""

    def send_unsubscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        """(as send_subscribe_pattern)"""

    def send_notify(self, message: Message) -> None:
        self.put(("notify", message, None))

    def send_notify_from(self, sender: Sender, message: Message) -> None:
        self.put(("notify", message, sender))

    def send_group(self, key: MessageKey, group: str, members: int) -> None:
        self.put(("group", key, group, members), data=False)

    def send_group_notify(self, group: str, message: Message) -> None:
        """Never chosen: a client has no queue-group members."""

    def send_request(self, request_id: int, message: Message) -> None:
        self.put(("request", request_id, message, None))

    def send_request_from(self, sender: Sender, request_id: int, message: Message) -> None:
        self.put(("request", request_id, message, sender))

    def send_request_ack(self, request_id: int, taken: int) -> None:
        if taken > 0 and threading.get_ident() == self._loop_thread:
            # (the request came in on this loop just now: nothing of it is
            # queued yet, and an ack that repliers took it sends nothing)
            entry = self.requests.get(request_id)
            if entry is not None:
                entry[1] = taken
            return
        self.put(("ack", request_id, taken))

    def send_reply(self, request_id: int, reply: Reply) -> None:
        self.put(("reply", request_id, reply, None))

    def send_reply_from(self, sender: Sender, request_id: int, reply: Reply) -> None:
        self.put(("reply", request_id, reply, sender))

    def send_cancel(self, request_id: int) -> None:
        self.put(("cancel", request_id))

    # ------------------------------------------------------------ the session

    async def run(self) -> None:
        """(loop) The WebSocket handler: serve the client until the session ends."""
        gateway = self.gateway
        # a client's session forwards (docs/routing.md): what one client
        # publishes reaches the others and the node's forwarding links
        self.party = gateway.router.attach(
            self.name, self, gateway.session_permissions, forward=True
        )
        writer = self.loop.create_task(self._write_loop())
        reason = "the client closed the connection"
        try:
            reason = await self._read_loop()
        finally:
            if self.closing is not None and not writer.done():
                await asyncio.wait([writer], timeout=gateway.close_timeout)
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            self.party.detach(f"jrep session {self.name} ended: {reason}")
            gateway.forget(self)

    def close_session(self, code: int, reason: str) -> None:
        """(loop) Close once what is queued was sent."""
        if self.closing is None:
            self.closing = (code, reason)
            self._wake.set()

    def shutdown(self, reason: str) -> None:
        """(loop) The node closes: tell the client, then close (1001)."""
        if self.closing is None:
            self.emit({p.TO_SUBJECT: p.CLIENT_BUS, p.COMMAND_TYPE: p.DISCONNECT, p.REASON: reason})
            self.close_session(CLOSE_GOING_AWAY, reason)

    async def _read_loop(self) -> str:
        """Read until the client goes or the session closes; returns why it ended."""
        ws = self.websocket
        loop = self.loop
        settings = self.settings
        rate = settings.message_rate
        burst = settings.burst
        tokens, last = burst, loop.time()
        task = asyncio.current_task()
        assert task is not None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        # until ConnectToQueue the handshake timeout runs from the opening, then
        # the idle timeout from the last frame received
        timer = IdleTimer(loop, settings.handshake_timeout, expire)
        connected = False
        try:
            while self.closing is None:
                try:
                    frame = await ws.recv()
                except ConnectionClosed as exc:
                    return f"connection closed ({exc})"
                count = self.received(frame)
                if connected:
                    timer.at = loop.time()
                elif self.connected:
                    connected = True
                    timer.at = loop.time()
                    timer.delay = settings.idle_timeout
                    timer.arm()
                if rate:
                    now = loop.time()
                    tokens = min(burst, tokens + (now - last) * rate) - max(count, 1)
                    last = now
                    if tokens < 0:  # over the rate: stop reading until back under it
                        await asyncio.sleep(-tokens / rate)
            return self.closing[1]
        except asyncio.CancelledError:
            if not expired:
                raise
            task.uncancel()
        finally:
            timer.cancel()
        self.gateway.count_expired()
        if not connected:
            why = f"no ConnectToQueue within {settings.handshake_timeout:g} s"
            self.close_session(CLOSE_POLICY, why)
            return why
        why = f"idle for {settings.idle_timeout:g} s (nothing received)"
        self.emit({p.TO_SUBJECT: p.CLIENT_BUS, p.COMMAND_TYPE: p.SESSION_EXPIRED, p.REASON: why})
        self.close_session(CLOSE_EXPIRED, "session expired")
        return why

    async def _write_loop(self) -> None:
        ws = self.websocket
        loop = self.loop
        wake = self._wake

        def beat() -> None:  # nothing sent for heartbeat_delay: a Heartbeat
            if self.connected:
                self.emit({p.TO_SUBJECT: p.CLIENT_BUS, p.COMMAND_TYPE: p.HEARTBEAT})
            idle.at = loop.time()  # (and the next one as long after, if still idle)

        idle = IdleTimer(loop, self.settings.heartbeat_delay, beat)
        try:
            while True:
                if not wake.is_set():
                    await wake.wait()
                wake.clear()
                if self.overflowed and self.closing is None:
                    self._overflow()
                out = self._translate(self.take())
                for start in range(0, len(out), _CHUNK):
                    chunk = out[start : start + _CHUNK]
                    await ws.send(dumps(chunk))
                    self.messages_out += len(chunk)
                idle.at = loop.time()
                if self.closing is not None and not wake.is_set():
                    await ws.close(*self.closing)
                    return
        except ConnectionClosed:
            return
        finally:
            idle.cancel()

    def _overflow(self) -> None:
        limit = self.settings.message_queue_size
        self.gateway.count_overflow()
        self.gateway.peer_log.warning(
            (self.gateway.name, "overflow"),
            "jrep gateway {}: session {} closed: its client reads slower than the bus sends "
            "({} messages queued, message_queue_size); it may subscribe to less or read faster",
            self.gateway.name,
            self.name,
            limit,
        )
        self.close_session(CLOSE_POLICY, f"more than {limit} messages queued for this client")

    # ------------------------------------------------------------ bus -> client

    def _translate(self, items: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        party = self.party
        assert party is not None
        held = party.hold_deliveries()
        try:
            for item in items:
                try:
                    self._item(item, out)
                except Exception as exc:  # a bug here must not end the node
                    logger.opt(exception=exc).error(
                        "jrep session {}: sending {} failed", self.name, item[0]
                    )
        finally:
            if held:
                party.release_deliveries()
        return out

    def _item(self, item: tuple[Any, ...], out: list[dict[str, Any]]) -> None:
        kind = item[0]
        if kind == "json":
            out.append(item[1])
        elif kind == "notify":
            message, sender = item[1], item[2]
            if MessageKey.of(message) in self.subscribed:
                out.append(_data(message.subject, message, sender))
        elif kind == "reply":
            self._reply_out(item[1], item[2], item[3], out)
        elif kind == "ack":
            self._ack_out(item[1], item[2], out)
        elif kind == "request":
            self._request_out(item[1], item[2], item[3], out)
        elif kind == "cancel":
            reply_to = self.incoming_ids.pop(item[1], None)
            if reply_to is not None:
                self.incoming.pop(reply_to, None)
                out.append(
                    {p.TO_SUBJECT: p.CLIENT_BUS, p.COMMAND_TYPE: p.CANCEL, p.SUBJECT: reply_to}
                )
        elif kind == "advertise":
            self._advert_out(item[1], item[2], item[3], out)
        elif kind == "retract":
            key, role = item[1], item[2]
            was = self.adverts.pop((key, role), None)
            if was is not None and self.server_synced:
                out.append(_key_message(p.REMOTE_UNSUBSCRIBE, key, role))
            if was and role is Role.PUBLISHER and key in self.subscribed:
                out.append(_feed_state(key, False))
        elif kind == "state":
            out.append(_feed_state(item[1], self.adverts.get((item[1], Role.PUBLISHER), False)))
        elif kind == "group":
            key, group, members = item[1], item[2], item[3]
            groups = self.groups.setdefault(key, {})
            if members > 0:
                groups[group] = members
            else:
                groups.pop(group, None)
                if not groups:
                    del self.groups[key]
        elif kind == "sync":
            out.extend(self._state_sync())
        elif kind == "interest":
            verb = p.REMOTE_SUBSCRIBE if item[2] else p.REMOTE_UNSUBSCRIBE
            message = _key_message(verb, item[1], Role.PUBLISHER)
            message[p.ROLE] = p.SUBSCRIBER
            out.append(message)

    def _state_sync(self) -> list[dict[str, Any]]:
        """The answer to ConnectToQueue: capabilities, what the bus can route to,
        FinishStateSync."""
        self.server_synced = True
        keys = [
            {
                p.SUBJECT: key.subject,
                p.TYPE: key.type_name,
                p.ROLE: role.value,
                p.STATE: "UP" if up else "DOWN",
            }
            for (key, role), up in self.adverts.items()
        ]
        subjects = sorted({k[p.SUBJECT] for k in keys})
        return [
            {
                p.TO_SUBJECT: p.CLIENT_BUS,
                p.COMMAND_TYPE: p.CAPABILITIES_NOTICE,
                p.CAPABILITIES_FLAGS: p.CAPABILITIES,
                p.REPLY_PREFIX: self.reply_prefix,
                p.SESSION_ID: self.name,
                p.NODE_ID: self.gateway.node_id,
                p.HEARTBEAT_DELAY: round(self.settings.heartbeat_delay * 1000),
                p.IDLE_TIMEOUT: round(self.settings.idle_timeout * 1000),
            },
            {
                p.TO_SUBJECT: p.CLIENT_BUS,
                p.COMMAND_TYPE: p.REMOTE_SUBSCRIBE,
                p.SUBJECTS_LIST: subjects,
                p.KEYS: keys,
            },
            {p.TO_SUBJECT: p.CLIENT_BUS, p.COMMAND_TYPE: p.FINISH_STATE_SYNC},
        ]

    def _advert_out(self, key: MessageKey, role: Role, up: bool, out: list[dict[str, Any]]) -> None:
        was = self.adverts.get((key, role))
        self.adverts[key, role] = up
        changed = was is not None and was != up and self.federated
        if (was is None or changed) and self.server_synced:
            message = _key_message(p.REMOTE_SUBSCRIBE, key, role)
            message[p.STATE] = "UP" if up else "DOWN"
            out.append(message)
        if role is Role.PUBLISHER and key in self.subscribed and bool(was) != up:
            out.append(_feed_state(key, up))

    def _request_out(
        self, request_id: int, message: Message, sender: Sender | None, out: list[dict[str, Any]]
    ) -> None:
        party = self.party
        assert party is not None
        key = MessageKey.of(message)
        if key not in self.serving or len(self.incoming) >= self.settings.max_requests:
            party.request_ack(request_id, 0)  # nobody here takes it
            return
        reply_to = f"{self.reply_prefix}/in/{request_id}"
        self.incoming[reply_to] = (request_id, type(message), message.subject)
        self.incoming_ids[request_id] = reply_to
        data = _data(message.subject, message, sender)
        data[p.REPLY_TO] = reply_to
        out.append(data)
        party.request_ack(request_id, 1)

    def _ack_out(self, request_id: int, taken: int, out: list[dict[str, Any]]) -> None:
        entry = self.requests.get(request_id)
        if entry is None:
            return
        if taken > 0:
            entry[1] = taken
            return
        self._end_request(request_id, entry[0])
        out.append(
            {
                p.TO_SUBJECT: entry[0],
                p.REMAINING: 0,
                p.ERROR_CODE: p.NO_REPLIER,
                p.ERROR_MESSAGE: "no replier took the request (none is UP on its key, or the "
                "permissions refuse it); subscribe to its key's FeedState to know when one is",
            }
        )

    def _reply_out(
        self, request_id: int, reply: Reply, sender: Sender | None, out: list[dict[str, Any]]
    ) -> None:
        entry = self.requests.get(request_id)
        if entry is None:
            return
        reply_to, remaining = entry
        if remaining is None:  # (the ack always comes first; be safe)
            remaining = 1
        if reply.status.is_final:
            remaining -= 1
        entry[1] = remaining
        message = _data(reply_to, reply, sender)
        message[p.REMAINING] = max(remaining, 0)
        if reply.status is ReplyStatus.ERROR:
            message[p.ERROR_MESSAGE] = reply.reason or "the replier failed the request"
        out.append(message)
        if remaining <= 0:
            self._end_request(request_id, reply_to)

    def _end_request(self, request_id: int, reply_to: str) -> None:
        self.requests.pop(request_id, None)
        self.by_reply_to.pop(reply_to, None)


def _data(subject: str, message: Message, sender: Sender | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        p.TO_SUBJECT: subject,
        p.TYPE: type(message).__type_name__,
        p.VALUE: message_to_json(message),
    }
    if sender is not None:
        data[p.SENDER] = {
            "Node": sender.node,
            "Actor": sender.actor,
            "Feed": sender.feed,
            "Hops": sender.hops,
        }
    return data


def _key_message(verb: str, key: MessageKey, role: Role) -> dict[str, Any]:
    return {
        p.TO_SUBJECT: p.CLIENT_BUS,
        p.COMMAND_TYPE: verb,
        p.SUBJECT: key.subject,
        p.TYPE: key.type_name,
        p.ROLE: role.value,
    }


def _feed_state(key: MessageKey, up: bool) -> dict[str, Any]:
    return {
        p.TO_SUBJECT: p.CLIENT_BUS,
        p.COMMAND_TYPE: p.FEED_STATE,
        p.SUBJECT: key.subject,
        p.TYPE: key.type_name,
        p.STATE: "UP" if up else "DOWN",
    }
