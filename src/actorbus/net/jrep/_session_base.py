"""What every part of a J.REP session shares: its state, its queue to the client,
and how anything (any thread) hands the session's writer something to send.

A session is one WebSocket client.  Its parts are one class built up in three
files, each one side of it (as a link's connection is):

* this one: the state and the outbound queue;
* :mod:`._inbound`: the client's J.REP messages -> the party's inbound calls;
* :mod:`._session`: the transport the router calls (``PartyTransport``), the
  reader and writer coroutines, timers and closing.

Threads: the router calls the transport's ``send_*`` from any thread; they only
append to the queue (under a lock) and wake the writer on the event loop.
Everything else runs on the gateway's event loop: the reader, the writer, and
every call into the party, so the party's inbound methods are called by one
thread at a time, in the order the client sent.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from ...bus.message import Message, MessageKey
from ...bus.party import RemoteParty, Role
from ._parts import JrepFault, error_object

if TYPE_CHECKING:
    from .gateway import Gateway

__all__ = ["SessionBase"]


class SessionBase:
    """The state of one client session (see the module docstring)."""

    def __init__(self, gateway: Gateway, websocket: Any, number: int) -> None:
        self.gateway = gateway
        self.websocket = websocket
        self.settings = gateway.settings
        #: the party's name: the gateway's name and the session's number
        self.name = f"{gateway.name}#{number}"
        self.number = number
        #: the session's private subjects all start with it (ReplyPrefix)
        self.reply_prefix = gateway.new_prefix(self)
        self.loop: asyncio.AbstractEventLoop = gateway.selector.loop
        self._loop_thread = gateway.selector.ident
        self.party: RemoteParty | None = None
        # --- the queue to the client (any thread, under _lock)
        self._lock = threading.Lock()
        self._out: deque[tuple[Any, ...]] = deque()
        #: data items (messages for the client) queued now
        self._queued = 0
        self._scheduled = False
        #: the queue went over its limit: nothing more is queued, the session closes
        self.overflowed = False
        self._wake = asyncio.Event()
        # --- the protocol's state (loop thread)
        #: the client's ConnectToQueue arrived
        self.connected = False
        #: the client sent FinishStateSync
        self.client_synced = False
        #: this side sent FinishStateSync
        self.server_synced = False
        #: the client is another node's client bus (CapabilitiesFlags holds
        #: "Federation"): it is told the bus's subscribers and every state change
        self.federated = False
        #: (code, reason) once the session is closing
        self.closing: tuple[int, str] | None = None
        #: the bus's advertisements: (key, role) -> UP
        self.adverts: dict[tuple[MessageKey, Role], bool] = {}
        #: queue groups the bus has members of: key -> {group: members}
        self.groups: dict[MessageKey, dict[str, int]] = {}
        #: keys the client subscribed to (notifications), publishes on, replies on
        self.subscribed: set[MessageKey] = set()
        self.published: set[MessageKey] = set()
        self.serving: set[MessageKey] = set()
        #: the client's requests: id -> [ReplyTo, repliers still to answer (None: not acked)]
        self.requests: dict[int, list[Any]] = {}
        self.by_reply_to: dict[str, int] = {}
        self._next_request = 0
        #: requests the bus sent the client: our ReplyTo -> (bus request id, request
        #: class, its subject)
        self.incoming: dict[str, tuple[int, type[Message], str]] = {}
        self.incoming_ids: dict[int, str] = {}
        # --- counters
        #: J.REP messages received (array items), sent, and errors sent
        self.messages_in = 0
        self.messages_out = 0
        self.errors = 0

    def __repr__(self) -> str:
        return f"<jrep session {self.name}>"

    @property
    def active(self) -> bool:
        """Both sides sent FinishStateSync: the federation is active."""
        return self.client_synced and self.server_synced

    @property
    def keys_used(self) -> int:
        """What counts against ``max_subscriptions``."""
        return len(self.subscribed) + len(self.published) + len(self.serving)

    # ------------------------------------------------------------ the queue

    def put(self, item: tuple[Any, ...], data: bool = True) -> None:
        """(any thread) Queue ``item`` for the writer.  ``data``: it becomes a message
        for the client and counts against ``message_queue_size`` (state items, the
        bus's advertisements, do not: they are bounded by the bus's keys)."""
        with self._lock:
            if self.overflowed:
                return
            if data:
                self._queued += 1
                if self._queued > self.settings.message_queue_size:
                    self.overflowed = True
                    self._out.clear()
            self._out.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
            return
        try:
            self.loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop is closed: the session is gone with it
            pass

    def take(self) -> list[tuple[Any, ...]]:
        """(loop) Everything queued, in order."""
        with self._lock:
            items = list(self._out)
            self._out.clear()
            self._queued = 0
            self._scheduled = False
        return items

    def emit(self, message: dict[str, Any]) -> None:
        """(loop) Send ``message`` (a J.REP message object) after what is queued."""
        self.put(("json", message))

    def fault(self, fault: JrepFault, about: dict[str, Any] | None = None) -> None:
        """(loop) Report ``fault`` to the client on ClientBusErrors."""
        self.errors += 1
        self.emit(error_object(fault, about))

    def request_id(self) -> int:
        self._next_request += 1
        return self._next_request
