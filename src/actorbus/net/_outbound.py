"""What the router sends over one connection: the pending queue, the flush,
direct writes from other threads, and the output queue limit.

**Outbound.**  The connection is the router's ``PartyTransport``.  Its ``send_*``
methods are called from any thread (often a dispatcher thread, sometimes under
the router lock): each appends one item to the connection's ``pending`` deque
and, if no flush is scheduled yet, schedules one with ``call_soon_threadsafe``
— one hand-off per batch, not per message.  A send made on the loop's own
thread (by an actor on an asyncio dispatcher whose loop the I/O thread shares)
schedules it with ``call_soon``: no wake-up, no hand-off.  ``_flush`` (on the
loop) clears the flag first, then turns every pending item into a protocol
command and writes ``data_to_send()`` once.  A notification is queued as the
message object itself (no wrapper); other items are plain tuples ``(op, ...)``.
While the connection handles received bytes the flag is held set, so replies
and acknowledgements made by the router during that time are written in one
go at the end of the batch.

**Direct writes.**  A request or reply is written at once when the link is
idle, in one frame straight from the protocol (``request_now``/``reply_now``):
on the loop's own thread (an actor on an asyncio dispatcher that shares it)
through the transport, as a flush would; on any other thread (a requestor or
replier on a threaded dispatcher) by that thread itself.  For the other threads,
idle means: nothing is paused or left over, at most a few items are pending
(they are written first, in order), and the transport has nothing buffered
(uvloop's ``get_write_buffer_size()`` counts libuv's write queue too, so the
socket is ours alone).  The thread encodes into the protocol and calls
``os.write`` on a ``dup`` of the socket's descriptor (the transport's own may
be closed and reused on the loop at any moment; the dup is opened on the loop
at the flush after the connection's first request or reply, so a connection
that carries none holds one descriptor, and closed when the connection ends,
before the transport closes).  Whatever the socket does not take at once goes
to ``tail``, which the loop writes before anything else.
On a TLS link only the transport may write (it makes the TLS records, on the
loop): another thread still encodes its frame at once, but hands the bytes to
the loop as ``tail`` (``_write_via_loop``) instead of writing them itself.
Mutual exclusion is the connection's write lock
(:mod:`~actorbus.net._connection_base`): the loop holds it in every callback
that touches the protocol or writes, a sending thread only *tries* it (and
queues as above when it is busy).  A round trip so skips the hand-off to the
I/O thread on each node.

**Flow control and the queue limit.**  When the socket cannot keep up the
transport calls ``pause_writing``; the connection then keeps encoding into the
protocol without writing (a few items at a time, measuring as it goes).  What
waits there is the *output queue*: past ``message_queue_size`` data messages
(notify, group notify, request, request ack, reply, cancel) or past
``message_queue_bytes`` bytes (every frame, heartbeat replies and feed
management included, with what the transport holds, and the items not yet
encoded at the average size of those that were) the connection is
aborted (a TCP reset), the waiting messages are dropped and counted, and a
client link reconnects if configured.  At each check the frames encoded since
the last one are joined into one ``bytes`` (``compact_output``): what waits
then takes about its wire size in memory, so the byte limit bounds the
process's memory too, not only the bytes it would write (a heartbeat reply
is 6 bytes on the wire, ~50 as an object of its own).  One congestion rule
holds for both limits: past either high-water mark (``message_queue_high_water``
bytes, measured the same way, or half of ``message_queue_size`` data
messages), whichever comes first, the party is told ``congested(True)``
before that limit is reached, and ``congested(False)`` when
``resume_writing`` finds less than half of each mark waiting (publisher
back-pressure, :mod:`actorbus.bus.party`).

**Acknowledgements ride on replies.**  After a read whose requests our repliers
took, their acknowledgements wait (``ACK_DELAY``, up to a tick more) for the
first reply, whose frame carries them: the peer saves a frame and a wake-up
per request.  A push of anything else flushes them at once.

Threads: ``send_*`` and ``_write_at_once`` run on any thread (the latter holding
the write lock); ``_write_now`` / ``_write_direct`` on a sending thread other
than the loop's, holding it; everything else here on the loop thread, holding it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from threading import get_ident
from typing import Any, Final

from ..bus.message import Message, MessageKey, Reply
from ..bus.party import Role
from ..bus.routed import RoutedFrame
from ..bus.sender import Sender
from ..bus.subjects import Wildcard
from ..errors import CodecError, UsageError
from ._connection_base import (
    ABORT,
    DATA_OPS,
    OP_ADVERTISE,
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
    OP_UNSUBSCRIBE_PATTERN,
    locked,
)
from ._item_encoding import ItemEncoding
from ._routed_frames import join_pending
from .protocol import LinkProtocol, WireKey

__all__ = ["ACK_DELAY", "TICK", "Outbound"]

_Sender = Sender


def _is_data(item: Any) -> bool:
    """Whether a pending item is a data message (a notification is the message
    itself; a Sender item only names the next one's publisher)."""
    cls = item.__class__
    if cls is tuple:
        return item[0] in DATA_OPS
    return cls is not _Sender


#: Most pending items encoded per write; more wait for the next turn of the loop.
_MAX_BATCH: Final = 512
#: Items encoded between two checks of the output queue limits while the
#: socket cannot keep up.
_PAUSED_BATCH: Final = 16
#: How long a request acknowledgement waits for a reply to share its write (s).
ACK_DELAY: Final = 0.001
#: The event loop's timer tick (s): libuv keeps time and timers in whole
#: milliseconds, so a timer asked for ``d`` fires anywhere from ``d - 1 ms`` on,
#: and one asked for less than half a tick runs on the next turn of the loop.
#: The acknowledgement timer asks for a tick more than it needs.
TICK: Final = 0.001
#: A request or reply is written by the sending thread itself only when at most
#: this many items wait before it (they are written with it).
_DIRECT_MAX_PENDING: Final = 8


class Outbound(ItemEncoding):
    """The sending side of a connection (mixed into ``_Connection``)."""

    # ------------------------------------------------ PartyTransport (any thread)

    def send_notify(self, message: Message) -> None:
        # The hot path: the message itself is the pending item.
        if self.open:
            self.pending.append(message)
            if not self.scheduled:
                self.scheduled = True
                try:
                    self._schedule_flush()
                except RuntimeError:  # the loop is closed: the node is gone
                    self.link.count_dropped(1)
        else:
            self.link.count_dropped(1)

    def send_notify_from(self, sender: Sender, message: Message) -> None:
        """``send_notify`` naming the publisher: the sender goes in as an item of
        its own right before the message, in one ``extend`` (atomic: no other
        thread's item can come between them); ``_drain`` writes a SENDER frame when
        it differs from the last one written (``_extend``'s body inlined: a hot path)."""
        if self.open:
            self.pending.extend((sender, message))
            if not self.scheduled:
                self.scheduled = True
                try:
                    self._schedule_flush()
                except RuntimeError:  # the loop is closed: the node is gone
                    self.link.count_dropped(1)
        else:
            self.link.count_dropped(1)

    def _push(self, item: tuple[Any, ...], data: bool) -> None:
        self._extend((item,), data)

    def _extend(self, items: tuple[Any, ...], data: bool) -> None:
        """Queue ``items`` (one item, or a Sender and the data item it names) in
        one atomic ``extend``; ``data``: they are one data message, counted
        dropped if it cannot go."""
        if self.open:
            self.pending.extend(items)
            if not self.scheduled:
                self.scheduled = True
                try:
                    self._schedule_flush()
                except RuntimeError:
                    if data:
                        self.link.count_dropped(1)
        elif data:
            self.link.count_dropped(1)

    def _schedule_flush(self) -> None:
        """Run ``_flush`` on the loop soon: without a wake-up when called on the
        loop's own thread (an actor on a dispatcher sharing the loop).  Raises
        RuntimeError when the loop is closed."""
        if get_ident() == self._loop_ident:
            self._call_soon(self._flush)
        else:
            self._call_soon_threadsafe(self._flush)

    def send_advertise(self, key: MessageKey, role: Role, up: bool) -> None:
        self._push((OP_ADVERTISE, key, role, up), False)

    def send_retract(self, key: MessageKey, role: Role) -> None:
        self._push((OP_RETRACT, key, role), False)

    def send_feed_status(self, key: MessageKey, role: Role, up: bool) -> None:
        self._push((OP_FEED_STATUS, key, role, up), False)

    def send_subscribe(self, key: MessageKey) -> None:
        self._push((OP_SUBSCRIBE, key), False)

    def send_unsubscribe(self, key: MessageKey) -> None:
        self._push((OP_UNSUBSCRIBE, key), False)

    def send_request(self, request_id: int, message: Message) -> None:
        if self.wfd >= 0:
            if self._write_at_once(OP_REQUEST, request_id, message, None):
                return
        elif self.direct_ok:
            self.want_wfd = True  # the flush opens it: the next ones may go directly
        self._push((OP_REQUEST, request_id, message), True)

    def send_request_from(self, sender: Sender, request_id: int, message: Message) -> None:
        """``send_request`` naming the requestor (as ``send_notify_from``)."""
        if self.wfd >= 0:
            if self._write_at_once(OP_REQUEST, request_id, message, sender):
                return
        elif self.direct_ok:
            self.want_wfd = True  # the flush opens it: the next ones may go directly
        self._extend((sender, (OP_REQUEST, request_id, message)), True)

    def send_request_ack(self, request_id: int, taken: int) -> None:
        self._push((OP_REQUEST_ACK, request_id, taken), True)

    def send_reply(self, request_id: int, reply: Reply) -> None:
        if self.wfd >= 0:
            if self._write_at_once(OP_REPLY, request_id, reply, None):
                return
        elif self.direct_ok:
            self.want_wfd = True
        self._push((OP_REPLY, request_id, reply), True)

    def send_reply_from(self, sender: Sender, request_id: int, reply: Reply) -> None:
        """``send_reply`` naming the replier (as ``send_notify_from``)."""
        if self.wfd >= 0:
            if self._write_at_once(OP_REPLY, request_id, reply, sender):
                return
        elif self.direct_ok:
            self.want_wfd = True  # the flush opens it: the next ones may go directly
        self._extend((sender, (OP_REPLY, request_id, reply)), True)

    def send_cancel(self, request_id: int) -> None:
        self._push((OP_CANCEL, request_id), True)

    def send_subscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        self._push((OP_SUBSCRIBE_PATTERN, message_class, wildcard), False)

    def send_unsubscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None:
        self._push((OP_UNSUBSCRIBE_PATTERN, message_class, wildcard), False)

    def send_group(self, key: MessageKey, group: str, members: int) -> None:
        self._push((OP_GROUP, key, group, members), False)

    def send_route(
        self, origin: str, seq: int, peers: tuple[str, ...], hops: int, flags: int
    ) -> None:
        self._push((OP_ROUTE, origin, seq, peers, hops, flags), False)

    def send_group_notify(self, group: str, message: Message) -> None:
        # a data message: counted by the queue limit and, if it cannot go, dropped
        self._push((OP_GROUP_NOTIFY, group, message), True)

    def send_routed(self, frame: RoutedFrame) -> None:
        """A source-routed message (bus/routed.py), queued as it is: its body is
        the codec's bytes already, a forwarder's never decoded."""
        self._push((OP_ROUTED, frame), True)

    # ------------------------------------------- direct writes (a sending thread)

    def _write_at_once(
        self, op: int, request_id: int, message: Message, sender: Sender | None
    ) -> bool:
        """(any thread) Write a request (``op`` OP_REQUEST) or a reply (OP_REPLY)
        to the socket now when the link is idle: the usual case — nothing
        pending, or for a reply only its request's acknowledgement, which it
        carries — in one frame straight from the protocol (``request_now`` /
        ``reply_now``): on the loop's thread through the transport, on any other
        with ``os.write``.  Anything else is ``_write_now``'s (not on the loop's
        thread).  False: the caller queues it."""
        wlock = self.wlock
        if not wlock.acquire(blocking=False):
            return False
        try:
            # (under the lock, wfd >= 0 means proto and transport are set)
            proto, transport = self.proto, self.transport
            if (
                self.wfd < 0
                or not self.open
                or self.paused
                or self.tail
                or transport.is_closing()  # type: ignore[union-attr]
                or transport.get_write_buffer_size()  # type: ignore[union-attr]
            ):
                return False
            on_loop = get_ident() == self._loop_ident
            if sender is not None and sender is not self.sent_from:
                # a sender the peer was not told last: its SENDER frame first
                return not on_loop and self._write_now((op, request_id, message), sender)
            pending = self.pending
            repliers = None
            if pending:
                ack = pending[0]
                if (
                    op != OP_REPLY
                    or len(pending) != 1
                    or ack.__class__ is not tuple
                    or ack[0] != OP_REQUEST_ACK
                    or ack[1] != request_id
                ):
                    return not on_loop and self._write_now((op, request_id, message), sender)
                repliers = ack[2]
            cls = message.__class__
            enc = cls.__wire_encode__
            key = (cls.__type_name__, message.subject)
            try:
                body = message if enc is None else enc(message)
                data = (
                    proto.request_now(key, request_id, body)  # type: ignore[union-attr]
                    if op == OP_REQUEST
                    else proto.reply_now(  # type: ignore[union-attr]
                        request_id,
                        key,
                        message.status,  # type: ignore[attr-defined]  # (a Reply)
                        body,
                        repliers,
                    )
                )
            except (CodecError, UsageError):
                data = None  # _write_now says why, and handles it
            if data is None:
                return not on_loop and self._write_now((op, request_id, message), sender)
            if repliers is not None:
                pending.popleft()  # its acknowledgement went with it
                self.acks_since = None
            if on_loop:
                transport.write(data)  # type: ignore[union-attr]
            else:
                self._write_direct(data)
                self.direct_writes += 1
            return True
        finally:
            wlock.release()

    def _write_now(self, item: tuple[Any, ...], sender: Sender | None) -> bool:
        """(a thread other than the loop's, holding the write lock, the link idle:
        ``_write_at_once`` checked) Encode ``item`` — after the few items pending
        before it — through the protocol's commands, and write it all on this
        thread; False (the caller queues it) when sending is not allowed or too
        much waits before it."""
        proto = self.proto
        pending = self.pending
        if proto is None or not proto.can_send or len(pending) > _DIRECT_MAX_PENDING:
            return False
        if not pending:
            first = item  # nothing waits before it
        elif (
            len(pending) == 1
            and item[0] == OP_REPLY
            and (ack := pending[0]).__class__ is tuple
            and ack[0] == OP_REQUEST_ACK
            and ack[1] == item[1]
        ):
            # a reply whose own acknowledgement waits: it goes with it
            pending.popleft()
            self.acks_since = None
            first = (OP_REPLY_ACKED, item[1], item[2], ack[2])
        else:
            first = None
        if first is not None:  # _drain's work for one item, without its loop
            if sender is not None and sender is not self.sent_from:
                self.sent_from = sender
                proto.sender(sender.actor, sender.feed, sender.node, sender.hops)
            try:
                self._command(proto, first)
            except (CodecError, UsageError) as exc:
                self._unsendable(first, exc)  # queues a stand-in reply, if one
        else:
            # what waited before it may name other senders: its own goes with it
            pending.extend((item,) if sender is None else (sender, item))
            self._drain(proto)  # what waited before it, then the item
        if pending:  # a stand-in for a reply that could not be encoded
            self._drain(proto)
        data = proto.data_to_send()
        if data:
            self._write_direct(data)
        self.direct_writes += 1
        return True

    def _write_direct(self, data: bytes) -> None:
        """(holding wlock, not on the loop) Write ``data`` to the socket; what the
        socket does not take now goes to ``tail`` and the loop writes it."""
        try:
            n = os.write(self.wfd, data)
        except OSError:  # full (EAGAIN) or broken: the loop's transport takes over
            n = 0
        if n < len(data):
            self.direct_partial += 1
            self.tail = data[n:] if n else data
            self.scheduled = True
            try:
                self._call_soon_threadsafe(self._flush)
            except RuntimeError:  # the loop is closed: the node is gone
                self.tail = b""

    def _write_via_loop(self, data: bytes) -> None:
        """(holding wlock, not on the loop) ``_write_direct`` of a TLS connection:
        only its transport makes TLS records, so ``data`` goes to ``tail`` and the
        loop writes it (before anything else)."""
        self.tail += data
        self.scheduled = True
        try:
            self._call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: the node is gone
            self.tail = b""

    def _take_tail(self, data: bytes) -> bytes:
        """(loop, holding wlock) ``data`` behind what a direct write left over."""
        tail = self.tail
        if tail:
            self.tail = b""
            return tail + data
        return data

    def _open_wfd(self) -> None:
        """(loop, holding wlock) Open the descriptor direct writes use: a ``dup``
        of the socket's (the transport's own may be closed and reused on the
        loop at any time, while a sending thread writes).  Opened on the loop,
        where the transport's descriptor cannot be closed meanwhile, once a
        request or reply asked for it: a connection that carries none (or has
        not logged on) holds one descriptor, not two."""
        self.want_wfd = False
        transport = self.transport
        if self.wfd >= 0 or self.ended or self.lost or transport is None:
            return
        if transport.is_closing():
            return
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.fileno() >= 0:
            self.wfd = os.dup(sock.fileno())

    def _close_wfd(self) -> None:
        """(holding wlock) No more direct writes: close the descriptor's dup."""
        self.direct_ok = False
        fd, self.wfd = self.wfd, -1
        if fd >= 0:
            os.close(fd)

    # --------------------------------------------------------- the flush (loop)

    @locked
    def _flush(self) -> None:
        """(loop) Turn pending items into frames and write them in one go."""
        self._flush_locked()

    def _flush_locked(self) -> None:
        """(loop, holding wlock) :meth:`_flush`."""
        self.scheduled = False
        if self.ack_timer is not None:
            self.ack_timer.cancel()
            self.ack_timer = None
        if self.ended:
            self._drop_pending()  # sends that raced with the end
            return
        proto = self.proto
        if proto is None or not proto.can_send:
            # nothing is attached before logon; what the protocol answered by
            # itself (the authentication's CHALLENGE and PROOF) goes out
            if proto is not None and proto.has_output:
                self._write()
            return
        if self.want_wfd:
            self._open_wfd()
        if self.paused:
            # The socket cannot keep up: everything waits here, encoded (a few
            # items at a time, so what waits is measured as it grows), and the
            # queue limits apply to it.
            while True:
                if self._over_queue_limit(proto) or not self.pending:
                    return  # resume_writing() flushes
                self._drain(proto, _PAUSED_BATCH)
        self._drain(proto, _MAX_BATCH)
        data = proto.data_to_send()
        if self.tail:
            data = self._take_tail(data)
        if data:
            assert self.transport is not None
            self.transport.write(data)
            if self.paused and self._over_queue_limit(proto):
                return  # (the write paused it: one batch over the buffer)
        if self.pending and not self.scheduled and not self.ended:
            # More is waiting: write this batch now so the peer can work on it
            # while the next one is encoded (bounded batches pipeline better).
            self.scheduled = True
            self.loop.call_soon(self._flush)

    def _over_queue_limit(self, proto: LinkProtocol) -> bool:
        """(loop, paused) Close the connection when what waits for the socket is
        over ``message_queue_size`` data messages or ``message_queue_bytes``
        bytes (every frame: data, feed management, heartbeat replies); True if
        it did."""
        settings = self.link.settings
        limit = settings.message_queue_size
        if limit:
            count = self._waiting(proto, limit)
            mark = self.high_water_messages
            if mark and count > mark and not self.congested:
                # (told first, whichever limit is nearer: see _connection._congest)
                self._congest(
                    True, f"{count} data messages, over half of message_queue_size={limit}"
                )
            if count > limit:
                self.limit_closes += 1
                self._end(
                    f"output queue limit: {self._waiting(proto, limit)} data messages wait "
                    f"for a socket that cannot keep up, over message_queue_size={limit}; "
                    "the peer does not read fast enough",
                    ABORT,
                )
                return True
        most = settings.message_queue_bytes
        high = self.high_water
        if not (most or high):
            return False
        frames, size = self.queued
        now, more = proto.output_size(frames)
        if now < frames:  # (handed over since: count afresh)
            frames = 0
            now, more = proto.output_size(0)
            size = 0
        size += more
        # what waits is held as one bytes object per check, not one per frame:
        # the limit then bounds the memory it takes, not only its wire size
        self.queued = (proto.compact_output(frames), size)
        data = proto.data_queued
        if data and self.popped:
            # bytes per data message, times data messages per pending item (a
            # notification naming its publisher is two items)
            self.item_bytes = size // data * proto.last_seq_sent // self.popped
        transport = self.transport
        # the items still pending count too, at the size the encoded ones have:
        # a publisher faster than the loop's encoding must be told before they
        # are encoded over the limit
        waiting = size + len(self.tail) + len(self.pending) * self.item_bytes
        if transport is not None:
            waiting += transport.get_write_buffer_size()
        if high and waiting > high and not self.congested:
            self._congest(True, f"{waiting} bytes, over message_queue_high_water={high}")
        if not most or waiting <= most:
            return False
        self.limit_closes += 1
        self._end(
            f"output queue limit: {waiting} bytes wait for a socket that cannot keep up, "
            f"over message_queue_bytes={most} (the {self._waiting(proto, 0)} data messages "
            "among them are dropped); the peer does not read fast enough",
            ABORT,
        )
        return True

    def _waiting(self, proto: LinkProtocol, limit: int) -> int:
        """Data messages waiting: encoded in the protocol, and still pending."""
        queued = proto.data_queued
        pending = self.pending
        if queued + len(pending) <= limit:
            return queued + len(pending)  # cheap bound: system items counted too
        return queued + sum(1 for item in list(pending) if _is_data(item))

    def _drain(self, proto: LinkProtocol, most: int | None = None) -> None:
        """Encode the items pending now (at most ``most``).  Items that producers
        add meanwhile wait for the flush they schedule: a busy publisher cannot
        keep the loop here.  Consecutive notifications on one key are encoded
        as a run (``LinkProtocol.notify_many``): the key and the class's encoder
        are looked up once per run, not per message."""
        pending = self.pending
        popleft = pending.popleft
        count = len(pending) if most is None else min(len(pending), most)
        self.popped += count  # (one more when the last is a Sender: see the end)
        bodies: list[Any] = []
        add = bodies.append
        run_cls: type | None = None
        run_subject: str | None = None
        key: WireKey = ("", "")
        enc: Callable[[Any], Any] | None = None
        while count > 0:
            count -= 1
            item = popleft()
            cls = item.__class__
            if cls is _Sender:  # who sends the data item right behind it
                if item is not self.sent_from:
                    if bodies:
                        self._notify_run(proto, key, bodies)
                        bodies = []
                        add = bodies.append
                    run_cls = None
                    self.sent_from = item
                    proto.sender(item.actor, item.feed, item.node, item.hops)
                # its item came in the same extend(): it is next, and only
                # this drain pops
                item = popleft()
                count -= 1
                cls = item.__class__
            if cls is not tuple:  # a notification: the message itself
                if cls is not run_cls or item.subject != run_subject:
                    if bodies:
                        self._notify_run(proto, key, bodies)
                        bodies = []
                        add = bodies.append
                    run_cls = cls
                    run_subject = item.subject
                    key = (cls.__type_name__, run_subject)
                    enc = cls.__wire_encode__
                if enc is None:
                    add(item)  # the message is its own wire form
                else:
                    try:
                        add(enc(item))
                    except (CodecError, UsageError) as exc:
                        self._unsendable(item, exc)
                continue
            if bodies:
                self._notify_run(proto, key, bodies)
                bodies = []
                add = bodies.append
            run_cls = None
            if item[0] == OP_REQUEST_ACK and pending:
                # The reply to the same request right behind its acknowledgement
                # (a replier answered at once): one frame carries both.  Only this
                # drain pops, so the head of the deque is stable here.
                following = pending[0]
                if (
                    following.__class__ is tuple
                    and following[0] == OP_REPLY
                    and following[1] == item[1]
                ):
                    popleft()
                    count -= 1
                    item = (OP_REPLY_ACKED, item[1], following[2], item[2])
            elif item[0] == OP_ROUTED and pending:  # routed notifications: one run
                item, taken = join_pending(item, pending, count)
                count -= taken
            try:
                self._command(proto, item)
            except (CodecError, UsageError) as exc:
                # MessageTooLargeError is a CodecError; a value msgpack cannot
                # encode is a UsageError: one message is lost, not the link.
                self._unsendable(item, exc)
        if bodies:
            self._notify_run(proto, key, bodies)
        self.popped -= count  # (count is -1 when the last Sender's item was popped too)
        if not pending:
            self.acks_since = None  # whatever acknowledgement waited has gone

    def _write(self) -> None:
        proto, transport = self.proto, self.transport
        if proto is None or transport is None or self.paused or transport.is_closing():
            return
        data = self._take_tail(proto.data_to_send())
        if data:
            transport.write(data)

    # ------------------------------------------ acknowledgements waiting (loop)

    @locked
    def _acks_due(self) -> None:
        """(loop) The acknowledgement timer: acknowledgements that waited
        ``ACK_DELAY`` for a reply go alone; younger ones wait on.  (The timer is
        armed once for many requests, since the threads that write the replies
        cannot cancel it; without this check it would cut the wait of whichever
        acknowledgement happened to be pending when it fired.)  Both arming
        points ask for ``TICK`` more than the wait: asked for exactly the wait,
        libuv's millisecond timers may fire up to a tick early, find the
        acknowledgement younger than ``ACK_DELAY`` and re-arm for less than half
        a tick, which runs on the next turn of the loop: one more turn of the
        I/O thread's loop per request answered at once."""
        self.ack_timer = None
        if not self.pending or self.ended:
            return  # the replies took them
        since = self.acks_since
        if since is not None and self._only_acks_pending():
            wait = since + ACK_DELAY - self.loop.time()
            if wait > 0:
                self.ack_timer = self.loop.call_later(wait + TICK, self._acks_due)
                return
        self._flush_locked()

    def _only_acks_pending(self) -> bool:
        """Only acknowledgements of requests some replier took are pending (few)."""
        pending = self.pending
        if not pending or len(pending) > 8:
            return False
        for item in pending:
            if item.__class__ is not tuple or item[0] != OP_REQUEST_ACK or item[2] == 0:
                return False
        return True
