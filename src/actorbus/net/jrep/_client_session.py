"""One session of a client bus: this node federated with another node's J.REP
gateway over one WebSocket.

:class:`FedSession` is the transport of the party this node attaches for the
remote node (``router.attach``): it implements
:class:`~actorbus.bus.party.PartyTransport` by queueing items (any thread) that
its writer turns into J.REP messages on the event loop, and its reader turns
the gateway's messages into the party's inbound calls.  The mapping
(docs/jrep.md, "Federation"):

* the gateway's ``RemoteSubscribe`` (its ``Keys`` at the sync, then one per key
  and per state change) -> ``party.advertise`` of its publishers and
  repliers; ``RemoteUnsubscribe`` -> ``party.retract``; ``RemoteSubscribe``
  with Role ``"subscriber"`` -> ``party.subscribe`` (its subscribers of a key
  this node publishes on);
* this node's subscriptions (``send_subscribe``) -> ``RemoteSubscribe`` of a
  Notification type; its repliers -> ``RemoteSubscribe`` of the Request type;
  its publishers -> ``RemoteSubscribe`` with Role ``"publisher"`` and State;
* notifications both ways as data messages; requests with a ``ReplyTo`` under
  the session's ``ReplyPrefix``; replies with ``Remaining``; cancels.

A session never outlives its WebSocket: when it ends, its party is detached
(the remote feeds go DOWN here, requests in flight end with ERROR) and what
the router still hands it is dropped and counted.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed

from ..._log import logger
from ...bus.message import Message, MessageKey, Notification, Reply, Request, lookup_type
from ...bus.party import RemoteParty, Role
from ...bus.sender import Sender
from ...bus.subjects import Wildcard
from . import _parts as p
from ._idle import IdleTimer
from ._parts import dumps, loads
from ._values import message_from_json, message_to_json

if TYPE_CHECKING:
    from .client import JrepClient

__all__ = ["FedSession"]

#: J.REP messages one outgoing WebSocket message holds at most
_CHUNK = 256
_ROLES = {p.PUBLISHER: Role.PUBLISHER, "replier": Role.REPLIER}


class FedSession:
    """One WebSocket session of a :class:`~.client.JrepClient` (see the module
    docstring)."""

    def __init__(self, client: JrepClient, websocket: Any) -> None:
        self.client = client
        self.ws = websocket
        self.loop: asyncio.AbstractEventLoop = client.selector.loop
        self.party: RemoteParty | None = None
        self._lock = threading.Lock()
        self._out: deque[tuple[Any, ...]] = deque()
        self._scheduled = False
        #: the session ended: nothing more is queued (what comes is dropped)
        self._ended = False
        #: its counters went into the client's totals (:meth:`fold`)
        self._folded = False
        self._wake = asyncio.Event()
        self.prefix = ""
        self.remote_node = ""
        #: notifications the router handed this session, written to the socket,
        #: and dropped (the session had ended, or they were queued when it did)
        self.handed = 0
        self.written = 0
        self.dropped = 0
        #: notifications the writer holds (taken from the queue, being sent)
        self.in_hand = 0
        #: J.REP messages received, errors the gateway reported
        self.received = 0
        self.errors = 0
        #: this node's subscriptions and repliers told to the gateway
        self.subscribed: set[MessageKey] = set()
        self.serving: set[MessageKey] = set()
        #: the gateway's publishers advertised to the party
        self.pubs: set[MessageKey] = set()
        #: our requests: ReplyTo -> [bus request id, request subject, acked]
        self.requests: dict[str, list[Any]] = {}
        self.request_ids: dict[int, str] = {}
        #: the gateway's requests: bus request id -> [ReplyTo, repliers still to answer]
        self.incoming: dict[int, list[Any]] = {}
        self.incoming_ids: dict[str, int] = {}
        self._next_id = 0

    def __repr__(self) -> str:
        return f"<jrep client session {self.client.name}>"

    # ------------------------------------------------ PartyTransport (any thread)

    def _put(self, item: tuple[Any, ...]) -> None:
        notify = item[0] == "notify"
        with self._lock:
            if not self._ended:
                if notify:
                    self.handed += 1
                self._out.append(item)
                if self._scheduled:
                    return
                self._scheduled = True
                late = False
            elif not notify:
                return
            elif not self._folded:
                self.handed += 1
                self.dropped += 1
                return
            else:  # the client holds the totals now
                late = True
        if late:
            self.client.count_late_drop()
            return
        try:
            self.loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop is closed: the session is gone with it
            pass

    def send_advertise(self, key: MessageKey, role: Role, up: bool) -> None:
        self._put(("advertise", key, role, up))

    def send_retract(self, key: MessageKey, role: Role) -> None:
        self._put(("retract", key, role))

    def send_feed_status(self, key: MessageKey, role: Role, up: bool) -> None:
        self._put(("advertise", key, role, up))

    def send_subscribe(self, key: MessageKey) -> None:
        self._put(("subscribe", key, True))

    def send_unsubscribe(self, key: MessageKey) -> None:
        self._put(("subscribe", key, False))

    def send_subscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        """The gateway tells every key it routes: this node's wildcards join them here."""

    def send_unsubscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        """(as send_subscribe_pattern)"""

    def send_group(self, key: MessageKey, group: str, members: int) -> None:
        """Queue groups stay on their node (docs/jrep.md, "Federation")."""

    def send_group_notify(self, group: str, message: Message) -> None:
        """Never chosen: the remote node reports no queue-group members."""

    def send_notify(self, message: Message) -> None:
        self._put(("notify", message))

    def send_notify_from(self, sender: Sender, message: Message) -> None:
        self._put(("notify", message))

    def send_request(self, request_id: int, message: Message) -> None:
        self._put(("request", request_id, message))

    def send_request_from(self, sender: Sender, request_id: int, message: Message) -> None:
        self._put(("request", request_id, message))

    def send_request_ack(self, request_id: int, taken: int) -> None:
        self._put(("ack", request_id, taken))

    def send_reply(self, request_id: int, reply: Reply) -> None:
        self._put(("reply", request_id, reply))

    def send_reply_from(self, sender: Sender, request_id: int, reply: Reply) -> None:
        self._put(("reply", request_id, reply))

    def send_cancel(self, request_id: int) -> None:
        self._put(("cancel", request_id))

    # ------------------------------------------------------------ the session

    async def run(self, sync_timeout: float) -> str:
        """(loop) Connect, sync, serve until the WebSocket ends; returns why it
        ended.  The party is detached before it returns."""
        ws = self.ws
        flags = f"{p.CAPABILITIES},{p.FEDERATION}"
        await ws.send(
            dumps(
                [
                    {p.TO_SUBJECT: p.SERVER_BUS, p.COMMAND_TYPE: p.CONNECT_TO_QUEUE},
                    {
                        p.TO_SUBJECT: p.SERVER_BUS,
                        p.COMMAND_TYPE: p.CAPABILITIES_NOTICE,
                        p.CAPABILITIES_FLAGS: flags,
                    },
                ]
            )
        )
        keys: list[dict[str, Any]] = []
        async with asyncio.timeout(sync_timeout):
            while True:  # the gateway's state sync, up to its FinishStateSync
                batch = loads(await ws.recv())
                done = False
                for m in batch:
                    verb = m.get(p.COMMAND_TYPE)
                    if verb == p.CAPABILITIES_NOTICE:
                        self.prefix = str(m.get(p.REPLY_PREFIX) or "")
                        self.remote_node = str(m.get(p.NODE_ID) or "")
                    elif verb == p.REMOTE_SUBSCRIBE and isinstance(m.get(p.KEYS), list):
                        keys.extend(m[p.KEYS])
                    elif verb == p.FINISH_STATE_SYNC:
                        done = True
                if done:
                    break
        client = self.client
        party = self.party = client.router.attach(client.name, self, client.permissions)
        writer = self.loop.create_task(self._write_loop())
        reason = "the gateway closed the connection"
        try:
            held = party.hold_deliveries()
            try:
                for k in keys:
                    self._remote_key(p.REMOTE_SUBSCRIBE, k)
            finally:
                if held:
                    party.release_deliveries()
            self._put(("finish",))
            client.session_up(self)
            reason = await self._read_loop()
        finally:
            with self._lock:
                self._ended = True
                self.dropped += sum(1 for item in self._out if item[0] == "notify")
                self._out.clear()
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            party.detach(f"jrep session to {client.url_shown} ended: {reason}")
        return reason

    async def _read_loop(self) -> str:
        while True:
            try:
                frame = await self.ws.recv()
            except ConnectionClosed as exc:
                return f"connection closed ({exc})"
            try:
                batch = loads(frame)
            except (ValueError, TypeError, RecursionError):
                self.errors += 1
                continue
            if not isinstance(batch, list):
                continue
            party = self.party
            assert party is not None
            held = party.hold_deliveries()
            try:
                for m in batch:
                    self.received += 1
                    try:
                        why = self._received(m)
                    except Exception as exc:  # what a gateway sends must not end the node
                        self.errors += 1
                        self.client.peer_log.warning(
                            (self.client.name, "bad message"),
                            "jrep client {}: a message from the gateway failed ({}); dropped",
                            self.client.name,
                            exc,
                        )
                        continue
                    if why is not None:
                        return why
            finally:
                if held:
                    party.release_deliveries()

    async def _write_loop(self) -> None:
        wake = self._wake
        ws = self.ws
        loop = asyncio.get_running_loop()
        beat = dumps([{p.TO_SUBJECT: p.SERVER_BUS, p.COMMAND_TYPE: p.HEARTBEAT}])
        beat_due = False

        def due() -> None:  # nothing sent for the heartbeat delay: the gateway's idle timer
            nonlocal beat_due
            beat_due = True
            idle.at = loop.time()  # (and the next one as long after, if still idle)
            wake.set()

        idle = IdleTimer(loop, self.client.heartbeat, due)
        try:
            while True:
                if not wake.is_set():
                    await wake.wait()
                wake.clear()
                if beat_due:
                    beat_due = False
                    if not self._out:  # (else what is queued goes now)
                        await ws.send(beat)
                with self._lock:
                    items = list(self._out)
                    self._out.clear()
                    self._scheduled = False
                out: list[dict[str, Any]] = []
                notes = 0
                for item in items:
                    try:
                        notes += self._item(item, out)
                    except Exception as exc:  # a bug here must not end the node
                        logger.opt(exception=exc).error(
                            "jrep client {}: sending {} failed", self.client.name, item[0]
                        )
                self.in_hand = notes  # being written: possibly lost if the session breaks now
                for start in range(0, len(out), _CHUNK):
                    await ws.send(dumps(out[start : start + _CHUNK]))
                if out:
                    idle.at = loop.time()
                self.written += notes
                self.in_hand = 0
        except ConnectionClosed:
            return
        finally:
            idle.cancel()

    # ------------------------------------------------------------ gateway -> bus

    def _received(self, m: Any) -> str | None:
        if not isinstance(m, dict):
            return None
        subject = m.get(p.TO_SUBJECT)
        party = self.party
        assert party is not None
        if subject == p.CLIENT_BUS:
            verb = m.get(p.COMMAND_TYPE)
            if verb in (p.REMOTE_SUBSCRIBE, p.REMOTE_UNSUBSCRIBE):
                self._remote_key(verb, m)
            elif verb == p.FEED_STATE:
                key = self._key(m)
                if key is not None and (key in self.pubs or m.get(p.STATE) == "UP"):
                    self.pubs.add(key)
                    party.advertise(key, Role.PUBLISHER, m.get(p.STATE) == "UP")
            elif verb == p.CANCEL:
                request_id: int | None = self.incoming_ids.pop(str(m.get(p.SUBJECT)), None)
                if request_id is not None:
                    self.incoming.pop(request_id, None)
                    party.cancel(request_id)
            elif verb in (p.DISCONNECT, p.SESSION_EXPIRED):
                return f"{verb}: {m.get(p.REASON)}"
            return None
        if subject == p.CLIENT_BUS_ERRORS:
            self._error(m)
            return None
        if not isinstance(subject, str):
            return None
        if subject in self.requests:
            self._reply_in(subject, m)
            return None
        cls = lookup_type(str(m.get(p.TYPE)))
        if cls is None or not issubclass(cls, Message):
            raise ValueError(f"unknown Type {m.get(p.TYPE)!r} on {subject!r}")
        message = message_from_json(cls, subject, m.get(p.VALUE))
        reply_to = m.get(p.REPLY_TO)
        if isinstance(reply_to, str) and issubclass(cls, Request):
            self._next_id += 1
            request_id = self._next_id
            self.incoming[request_id] = [reply_to, None]
            self.incoming_ids[reply_to] = request_id
            party.request(request_id, message)
        elif issubclass(cls, Notification):
            party.notify(message, MessageKey(cls, subject))
        return None

    def _key(self, m: dict[str, Any]) -> MessageKey | None:
        cls = lookup_type(str(m.get(p.TYPE)))
        subject = m.get(p.SUBJECT)
        if cls is None or not issubclass(cls, Message) or not isinstance(subject, str):
            return None
        return MessageKey(cls, subject)

    def _remote_key(self, verb: str, m: dict[str, Any]) -> None:
        key = self._key(m)
        if key is None:  # a type this node does not import: it cannot route it
            return
        party = self.party
        assert party is not None
        role = m.get(p.ROLE)
        if role == p.SUBSCRIBER:
            if verb == p.REMOTE_SUBSCRIBE:
                party.subscribe(key)
            else:
                party.unsubscribe(key)
            return
        found = _ROLES.get(str(role))
        if found is None:
            return
        if verb == p.REMOTE_SUBSCRIBE:
            if found is Role.PUBLISHER:
                self.pubs.add(key)
            party.advertise(key, found, m.get(p.STATE) == "UP")
        else:
            self.pubs.discard(key)
            party.retract(key, found)

    def _reply_in(self, reply_to: str, m: dict[str, Any]) -> None:
        party = self.party
        assert party is not None
        entry = self.requests[reply_to]
        request_id, subject, acked = entry
        remaining = m.get(p.REMAINING)
        remaining = remaining if isinstance(remaining, int) else 0
        if m.get(p.ERROR_CODE) == p.NO_REPLIER:
            self._forget_request(reply_to)
            party.request_ack(request_id, 0)
            return
        cls = lookup_type(str(m.get(p.TYPE)))
        if cls is None or not (isinstance(cls, type) and issubclass(cls, Reply)):
            cls = Reply
        reply = message_from_json(cls, subject, m.get(p.VALUE))
        assert isinstance(reply, Reply)
        if remaining <= 0:
            self._forget_request(reply_to)
        if acked:
            party.reply(request_id, reply)
        else:
            entry[2] = True
            party.reply(request_id, reply, remaining + (1 if reply.status.is_final else 0))

    def _forget_request(self, reply_to: str) -> None:
        entry = self.requests.pop(reply_to, None)
        if entry is not None:
            self.request_ids.pop(entry[0], None)

    def _error(self, m: dict[str, Any]) -> None:
        self.errors += 1
        reply_to = m.get(p.REPLY_TO)
        entry = self.requests.get(reply_to) if isinstance(reply_to, str) else None
        if entry is not None and not entry[2]:  # our request was refused: no replier took it
            self._forget_request(str(reply_to))
            party = self.party
            assert party is not None
            party.request_ack(entry[0], 0)
        self.client.peer_log.warning(
            (self.client.name, "error"),
            "jrep client {}: the gateway refused a message: {} {}",
            self.client.name,
            m.get(p.ERROR_CODE),
            m.get(p.ERROR_MESSAGE),
        )

    # ------------------------------------------------------------ bus -> gateway

    def _item(self, item: tuple[Any, ...], out: list[dict[str, Any]]) -> int:
        """Append the J.REP messages of ``item``; returns 1 for a notification."""
        kind = item[0]
        if kind == "notify":
            message = item[1]
            out.append(_data(message.subject, message))
            return 1
        if kind == "request":
            request_id, message = item[1], item[2]
            reply_to = f"{self.prefix}/r{request_id}"
            self.requests[reply_to] = [request_id, message.subject, False]
            self.request_ids[request_id] = reply_to
            data = _data(message.subject, message)
            data[p.REPLY_TO] = reply_to
            out.append(data)
        elif kind == "reply":
            self._reply_out(item[1], item[2], out)
        elif kind == "ack":
            entry = self.incoming.get(item[1])
            if entry is not None:
                if item[2] > 0:
                    entry[1] = item[2]
                else:  # nobody here took it: the gateway's requestor gets an ERROR
                    self._forget_incoming(item[1])
                    out.append(
                        {
                            p.TO_SUBJECT: entry[0],
                            p.ERROR_MESSAGE: f"no replier on node {self.client.node_id} took it",
                        }
                    )
        elif kind == "cancel":
            gone = self.request_ids.pop(item[1], None)
            if gone is not None:
                self.requests.pop(gone, None)
                out.append({p.TO_SUBJECT: p.SERVER_BUS, p.COMMAND_TYPE: p.CANCEL, p.SUBJECT: gone})
        elif kind == "subscribe":
            key, on = item[1], item[2]
            if on != (key in self.subscribed):
                (self.subscribed.add if on else self.subscribed.discard)(key)
                verb = p.REMOTE_SUBSCRIBE if on else p.REMOTE_UNSUBSCRIBE
                out.append(_key_message(verb, key))
        elif kind == "advertise":
            self._advertise_out(item[1], item[2], item[3], out)
        elif kind == "retract":
            self._advertise_out(item[1], item[2], None, out)
        elif kind == "finish":
            out.append({p.TO_SUBJECT: p.SERVER_BUS, p.COMMAND_TYPE: p.FINISH_STATE_SYNC})
        return 0

    def _advertise_out(
        self, key: MessageKey, role: Role, up: bool | None, out: list[dict[str, Any]]
    ) -> None:
        """This node's publishers (repliers) of ``key``: UP, DOWN, or gone (None)."""
        if role is Role.PUBLISHER:
            message = _key_message(p.REMOTE_UNSUBSCRIBE if up is None else p.REMOTE_SUBSCRIBE, key)
            message[p.ROLE] = p.PUBLISHER
            if up is not None:
                message[p.STATE] = "UP" if up else "DOWN"
            out.append(message)
        elif role is Role.REPLIER and bool(up) != (key in self.serving):
            (self.serving.add if up else self.serving.discard)(key)
            out.append(_key_message(p.REMOTE_SUBSCRIBE if up else p.REMOTE_UNSUBSCRIBE, key))

    def _reply_out(self, request_id: int, reply: Reply, out: list[dict[str, Any]]) -> None:
        entry = self.incoming.get(request_id)
        if entry is None:
            return
        reply_to, remaining = entry
        remaining = 1 if remaining is None else remaining
        data = _data(reply_to, reply)
        if reply.status.is_final:
            remaining -= 1
            if remaining > 0:  # the gateway's requestor sees one replier: one final
                data[p.VALUE]["status"] = "OK_CONTINUING"
        entry[1] = remaining
        out.append(data)
        if remaining <= 0:
            self._forget_incoming(request_id)

    def _forget_incoming(self, request_id: int) -> None:
        entry = self.incoming.pop(request_id, None)
        if entry is not None:
            self.incoming_ids.pop(entry[0], None)

    def fold(self) -> dict[str, int]:
        """(once the session ended) Its counters, for the client's totals: what
        was written, or being written, counts as possibly lost."""
        with self._lock:
            self._folded = True
            return {
                "handed": self.handed,
                "possibly_lost": self.written + self.in_hand,
                "dropped": self.dropped,
                "received": self.received,
                "errors": self.errors,
            }

    async def close(self, reason: str) -> None:
        """(loop) Say goodbye (Disconnect) and close the WebSocket."""
        try:
            await self.ws.send(
                dumps(
                    [{p.TO_SUBJECT: p.SERVER_BUS, p.COMMAND_TYPE: p.DISCONNECT, p.REASON: reason}]
                )
            )
        except ConnectionClosed:
            pass
        await self.ws.close()


def _data(subject: str, message: Message) -> dict[str, Any]:
    return {
        p.TO_SUBJECT: subject,
        p.TYPE: type(message).__type_name__,
        p.VALUE: message_to_json(message),
    }


def _key_message(verb: str, key: MessageKey) -> dict[str, Any]:
    return {
        p.TO_SUBJECT: p.SERVER_BUS,
        p.COMMAND_TYPE: verb,
        p.SUBJECT: key.subject,
        p.TYPE: key.type_name,
    }
