"""Tools for testing code built on actorbus: your actors, messages and transports
(actorbus's own tests use them too).

Waiting and recording:

* :class:`EventLog` — a thread-safe list of events with ``wait_for(predicate,
  timeout)`` that wakes on every append: tests wait on conditions, never sleep.
* :func:`wait_until` — poll a predicate, for state with no event to wait on.
* :class:`Recorder` — an actor that records every feed callback it gets into an
  :class:`EventLog`.
* :func:`capture_logs` — the library's log records while a block runs.

Joining without sockets:

* :class:`InProcessLink` — two buses (or routers) joined as remote peers in
  memory, through the same transport seam a TCP link uses.
* :class:`MemoryPipe` — two link protocols (:class:`~actorbus.net.LinkProtocol`)
  back to back: no sockets, no threads, no clock.  :func:`encode_frame` builds a
  frame by hand (straight from the wire format, not through the protocol) to
  feed a protocol what a correct peer never would; :func:`proof_for_server`,
  :func:`accept_for_client` and :func:`authenticate` play the other side's part
  of the authentication by hand; :func:`all_types_known` is an
  ``is_known_type`` that knows every type.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import msgpack
from loguru import logger

from .actors import Actor
from .bus.feeds import IncomingRequest, PublishFeed, RequestHandle
from .bus.message import Reply
from .bus.party import RemoteParty
from .bus.scope import FeedState
from .bus.sender import Sender
from .config.settings import LinkSettings
from .net._auth import KeyLookup, client_proof, new_nonce, server_proof
from .net._events import Event, LogonAccepted, LogonComplete, LogonRequested
from .net._wire import PROTOCOL_VERSION, FrameType
from .net.protocol import LinkProtocol, ProtocolState, Side

if TYPE_CHECKING:
    from loguru import Record

    from .bus.router import Router

__all__ = [
    "EventLog",
    "InProcessLink",
    "MemoryPipe",
    "Recorder",
    "accept_for_client",
    "all_types_known",
    "authenticate",
    "capture_logs",
    "encode_frame",
    "proof_for_server",
    "wait_until",
]


def wait_until(
    predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.001
) -> bool:
    """Poll ``predicate`` until true or ``timeout``; for state with no event to wait on.

    Prefer :meth:`EventLog.wait_for`, which wakes on change instead of polling."""
    deadline = time.monotonic() + timeout
    event = threading.Event()
    while True:
        if predicate():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        event.wait(min(interval, remaining))


@contextlib.contextmanager
def capture_logs(level: str = "DEBUG") -> Iterator[list[Record]]:
    """``with capture_logs("WARNING") as records:`` — every log record of the
    library at ``level`` and up while the block runs, as loguru record dicts
    (``record["message"]``, ``record["level"].name``, ``record["extra"]``...).

    The library's logging is enabled for the block and disabled again after it
    (the state at import; see :func:`actorbus.enable_logging`)."""
    records: list[Record] = []
    logger.enable("actorbus")
    sink = logger.add(lambda message: records.append(message.record), level=level)
    try:
        yield records
    finally:
        logger.remove(sink)
        logger.disable("actorbus")


class EventLog:
    """A list of events that tests can wait on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: list[Any] = []

    def append(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self._items)

    def clear(self) -> None:
        with self._cond:
            self._items.clear()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = 5.0) -> list[Any]:
        """Wait until ``predicate(events)`` holds; AssertionError with the events if not."""
        with self._cond:
            if self._cond.wait_for(lambda: predicate(self._items), timeout):
                return list(self._items)
            raise AssertionError(f"condition not met within {timeout}s; events: {self._items!r}")

    def wait_count(self, kind: str, count: int, timeout: float = 5.0) -> list[Any]:
        """Wait until ``count`` events whose first element is ``kind`` were logged."""
        return self.wait_for(lambda items: sum(1 for e in items if e[0] == kind) >= count, timeout)

    def of(self, kind: str) -> list[Any]:
        """The events whose first element is ``kind``."""
        with self._cond:
            return [e for e in self._items if e[0] == kind]


class Recorder(Actor):
    """An actor that logs every callback as a tuple ``(kind, ...)`` in ``self.log``:

    ``("publish_status", key, state)``, ``("feed_status", key, state)``,
    ``("message", msg)``, ``("request", incoming)``, ``("cancel", incoming)``,
    ``("reply", remaining, reply)``.  Set ``auto_reply`` to a function
    ``incoming -> Reply | None`` to answer requests automatically."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name=name)
        self.log = EventLog()
        self.auto_reply: Callable[[IncomingRequest[Any]], Reply | None] | None = None
        self.handles: list[RequestHandle[Any]] = []

    def on_publish_status(self, state: FeedState, feed: PublishFeed[Any]) -> None:
        self.log.append(("publish_status", feed.key, state))

    def on_feed_status(self, state: FeedState, feed: Any) -> None:
        self.log.append(("feed_status", feed.key, state))

    def on_message(self, message: Any, feed: Any) -> None:
        self.log.append(("message", message))

    def on_request(self, request: IncomingRequest[Any]) -> None:
        self.log.append(("request", request))
        if self.auto_reply is not None:
            reply = self.auto_reply(request)
            if reply is not None:
                request.reply(reply)

    def on_cancel(self, request: IncomingRequest[Any]) -> None:
        self.log.append(("cancel", request))

    def on_reply(self, remaining: int, reply: Reply, request: RequestHandle[Any]) -> None:
        self.log.append(("reply", remaining, reply))

    def states(self, kind: str = "feed_status") -> list[FeedState]:
        """The sequence of states reported by callbacks of ``kind``."""
        return [e[2] for e in self.log.of(kind)]


class InProcessLink:
    """Joins two routers as remote peers without sockets: an in-memory transport
    built on the transport seam alone (:mod:`actorbus.bus.party`), as a TCP link
    is.  It implements :class:`~actorbus.bus.party.PartyTransport`, gets a
    :class:`~actorbus.bus.party.RemoteParty` from ``router.attach`` and calls
    nothing else of the bus.

    Each direction has its own delivery thread and FIFO queue (as a link has an
    I/O thread), so neither router is ever called under the other's lock.  Used
    to test the remote half of scope matching and feed state in the bus core;
    the TCP link tests prove the real transport."""

    def __init__(
        self,
        a: Any,
        b: Any,
        name_a: str = "A",
        name_b: str = "B",
        *,
        permissions_a: Any = None,
        permissions_b: Any = None,
        forward_a: bool = False,
        forward_b: bool = False,
        max_hops: int = 8,
    ) -> None:
        """``permissions_a``: what B may do at A (a ``Permissions``, None: all);
        ``permissions_b`` likewise at B: handed to ``router.attach`` as a TCP
        link hands its own.  ``forward_a``: A forwards between this link and
        its other forwarding links (the link setting ``forward``); ``forward_b``
        likewise at B; ``max_hops`` both ends' ``maxHops``."""
        import queue

        router_a: Router = a.router if hasattr(a, "router") else a
        router_b: Router = b.router if hasattr(b, "router") else b
        self._queues: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue(), queue.SimpleQueue()]
        self._threads: list[threading.Thread] = []
        self._idle = [threading.Event(), threading.Event()]
        # transport i sends into queue i, which the other side's party consumes
        self.transport_a = _QueueTransport(self._queues[0], name_a)
        self.transport_b = _QueueTransport(self._queues[1], name_b)
        self.party_b_on_a = router_a.attach(
            name_b, self.transport_a, permissions_a, forward=forward_a, max_hops=max_hops
        )
        self.party_a_on_b = router_b.attach(
            name_a, self.transport_b, permissions_b, forward=forward_b, max_hops=max_hops
        )
        for i, party in enumerate((self.party_a_on_b, self.party_b_on_a)):
            t = threading.Thread(
                target=self._pump,
                args=(self._queues[i], party),
                name=f"actorbus-inproc-{i}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)

    @staticmethod
    def _pump(q: Any, party: RemoteParty) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            method, args = item
            if method is None:  # flush(): everything before it was delivered
                args.set()
                continue
            held = party.hold_deliveries()
            try:
                getattr(party, method)(*args)
            finally:
                if held:
                    party.release_deliveries()

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything sent so far was delivered (both directions, twice,
        so replies to what was delivered are delivered too)."""
        for _ in range(3):
            events = []
            for q in self._queues:
                ev = threading.Event()
                q.put((None, ev))
                events.append(ev)
            for ev in events:
                if not ev.wait(timeout):
                    raise AssertionError("in-process link did not drain")

    def congest(self, side: str, congested: bool = True) -> None:
        """Say that what ``side`` (``"a"`` or ``"b"``) sends to the other is
        congested, or no longer: the seam's ``RemoteParty.congested``, which a
        TCP link calls at its output queue's high-water mark (this link's queues
        never fill by themselves)."""
        if side not in ("a", "b"):
            raise ValueError(f"side must be 'a' or 'b', found {side!r}")
        (self.party_b_on_a if side == "a" else self.party_a_on_b).congested(congested)

    def close(self, reason: str = "closed") -> None:
        """Drop the link: both sides see every feed it carried go away."""
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join(5)
        self.party_b_on_a.detach(reason)
        self.party_a_on_b.detach(reason)


class _QueueTransport:
    """PartyTransport that queues each call for the peer's inbound party method."""

    def __init__(self, q: Any, node: str) -> None:
        self._q = q
        #: the name of the side that sends through this transport
        self.node = node

    def send_advertise(self, key: Any, role: Any, up: bool) -> None:
        self._q.put(("advertise", (key, role, up)))

    def send_retract(self, key: Any, role: Any) -> None:
        self._q.put(("retract", (key, role)))

    def send_feed_status(self, key: Any, role: Any, up: bool) -> None:
        self._q.put(("feed_status", (key, role, up)))

    def send_subscribe(self, key: Any) -> None:
        self._q.put(("subscribe", (key,)))

    def send_unsubscribe(self, key: Any) -> None:
        self._q.put(("unsubscribe", (key,)))

    def send_notify(self, message: Any) -> None:
        self._q.put(("notify", (message,)))

    def send_notify_from(self, sender: Any, message: Any) -> None:
        self._q.put(("notify", (message, None, self._seen_from(sender))))

    def send_request(self, request_id: int, message: Any) -> None:
        self._q.put(("request", (request_id, message)))

    def send_request_from(self, sender: Any, request_id: int, message: Any) -> None:
        self._q.put(("request", (request_id, message, self._seen_from(sender))))

    def send_reply_from(self, sender: Any, request_id: int, reply: Any) -> None:
        self._q.put(("reply", (request_id, reply, None, self._seen_from(sender))))

    def _seen_from(self, sender: Any) -> Sender:
        """``sender`` as the peer sees it: one hop further, from this side's node
        (or the node it was forwarded from)."""
        node = sender.node if sender.hops else self.node
        return Sender(node, sender.actor, sender.feed, sender.hops + 1)

    def send_request_ack(self, request_id: int, taken: int) -> None:
        self._q.put(("request_ack", (request_id, taken)))

    def send_route(self, *announcement: Any) -> None:
        self._q.put(("route", announcement))

    def send_reply(self, request_id: int, reply: Any) -> None:
        self._q.put(("reply", (request_id, reply)))

    def send_cancel(self, request_id: int) -> None:
        self._q.put(("cancel", (request_id,)))

    def send_subscribe_pattern(self, message_class: Any, wildcard: Any) -> None:
        self._q.put(("subscribe_pattern", (message_class, wildcard)))

    def send_unsubscribe_pattern(self, message_class: Any, wildcard: Any) -> None:
        self._q.put(("unsubscribe_pattern", (message_class, wildcard)))

    def send_group(self, key: Any, group: str, members: int) -> None:
        self._q.put(("group", (key, group, members)))

    def send_group_notify(self, group: str, message: Any) -> None:
        self._q.put(("group_notify", (group, message)))


# ============================================================ link protocols in memory


def encode_frame(*fields: object, byte_order: Literal["big", "little"] = "big") -> bytes:
    """One frame: the 4-byte length prefix and the msgpack array ``fields``."""
    body: bytes = msgpack.packb(fields, use_bin_type=True)
    return struct.pack(">I" if byte_order == "big" else "<I", len(body)) + body


def proof_for_server(
    server: LinkProtocol,
    node_id: str,
    *,
    run_id: str = "",
    secret: bytes = b"",
    now: float = 0.0,
    nonce: bytes | None = None,
) -> bytes:
    """Log on to ``server`` as client ``node_id`` by hand: feed it a LOGON, take
    its CHALLENGE (its output is drained), and return the PROOF frame made with
    ``secret``, for the caller to feed to it (alone or with more frames)."""
    client_nonce = new_nonce() if nonce is None else nonce
    server.receive_data(
        encode_frame(int(FrameType.LOGON), PROTOCOL_VERSION, node_id, run_id, client_nonce), now
    )
    server.data_to_send()
    proof = client_proof(secret, client_nonce, server._nonce, node_id, run_id)
    return encode_frame(int(FrameType.PROOF), proof)


def accept_for_client(
    client: LinkProtocol,
    node_id: str,
    *,
    run_id: str = "",
    secret: bytes = b"",
    now: float = 0.0,
) -> bytes:
    """Answer ``client`` (it has called ``logon()``) as server ``node_id`` by
    hand: feed it a CHALLENGE, take its PROOF (its output is drained), and
    return the LOGON_ACCEPT frame with the server's proof made with ``secret``,
    for the caller to feed to it (alone or with more frames)."""
    server_nonce = new_nonce()
    client.receive_data(encode_frame(int(FrameType.CHALLENGE), server_nonce), now)
    client.data_to_send()
    proof = server_proof(
        secret,
        client._nonce,
        server_nonce,
        client.node_id,
        client.run_id,
        server_id=node_id,
        server_run=run_id,
    )
    return encode_frame(int(FrameType.LOGON_ACCEPT), node_id, run_id, proof)


def authenticate(client: LinkProtocol, server: LinkProtocol, now: float = 0.0) -> None:
    """Move the client's LOGON (it has called ``logon()``), the server's CHALLENGE
    and the client's PROOF across: the server holds ``LogonRequested`` next (or
    ``AuthenticationFailed``)."""
    server.receive_data(client.data_to_send(), now)
    client.receive_data(server.data_to_send(), now)
    server.receive_data(client.data_to_send(), now)


def all_types_known(type_name: str) -> bool:
    """An ``is_known_type`` that knows every type name."""
    return True


class MemoryPipe:
    """A client and a server protocol wired to each other."""

    def __init__(
        self,
        *,
        now: float = 0.0,
        client_id: str = "client-node",
        server_id: str = "server-node",
        settings: LinkSettings | None = None,
        client_knows: Callable[[str], bool] = all_types_known,
        server_knows: Callable[[str], bool] = all_types_known,
        client_secret: bytes = b"",
        server_secret: bytes | KeyLookup = b"",
    ) -> None:
        self.client = LinkProtocol(
            Side.CLIENT,
            client_id,
            now,
            is_known_type=client_knows,
            settings=settings,
            secret=client_secret,
        )
        self.server = LinkProtocol(
            Side.SERVER,
            server_id,
            now,
            is_known_type=server_knows,
            settings=settings,
            secret=server_secret,
        )

    def transfer(self, now: float = 0.0) -> int:
        """Move queued bytes both ways once; return how many bytes moved."""
        to_server = self.client.data_to_send()
        to_client = self.server.data_to_send()
        if to_server:
            self.server.receive_data(to_server, now)
        if to_client:
            self.client.receive_data(to_client, now)
        return len(to_server) + len(to_client)

    def logon(self, now: float = 0.0) -> tuple[list[Event], list[Event]]:
        """Run the whole handshake (accepting); return the events each side saw.

        Both ends are CONNECTED afterwards.
        """
        client_seen: list[Event] = []
        server_seen: list[Event] = []
        self.client.logon()
        self.transfer(now)  # LOGON; the server answers CHALLENGE by itself
        self.transfer(now)  # CHALLENGE; the client answers PROOF by itself
        self.transfer(now)  # PROOF
        for event in self.server.events():
            server_seen.append(event)
            if isinstance(event, LogonRequested):
                self.server.accept_logon()
                self.server.complete_logon()
        self.transfer(now)
        for event in self.client.events():
            client_seen.append(event)
            if isinstance(event, LogonAccepted):
                self.client.complete_logon()
        self.transfer(now)
        server_seen.extend(self.server.events())
        if not (
            self.client.state is ProtocolState.CONNECTED
            and self.server.state is ProtocolState.CONNECTED
            and any(isinstance(e, LogonComplete) for e in client_seen)
        ):
            raise AssertionError(
                f"handshake did not connect: {self.client!r} {self.server!r} "
                f"client saw {client_seen} server saw {server_seen}"
            )
        return client_seen, server_seen
