"""A multicast channel joined to the bus: sockets, a thread, and the seam.

:class:`MulticastChannel` drives one :class:`~.channel.ChannelProtocol` with
two UDP sockets — one bound to the channel's port and joined to its group on
its interface, one that sends to the group with the channel's TTL — and one
thread, ``actorbus-multicast-NAME``, that reads datagrams, runs the timers and
calls the bus.  It meets the bus only through the transport seam
(:mod:`actorbus.bus.party`), as a TCP link does:

* **publishing**: the channel attaches one party, ``multicast:NAME``, standing
  for every receiver of the channel.  The router tells it about this node's
  remote-capable publishers (``send_advertise`` / ``send_feed_status`` /
  ``send_retract``); for a key whose subject the channel's ``subjects`` name,
  the channel subscribes through the party, so the router hands it each
  notification once (``send_notify``), which it sends once on the channel.
  Receivers are told of a key (its state record, the announcements) only
  once the channel's thread has subscribed to it: a receiver that sees a feed
  UP gets what is published on it from then on.
  A multicast publisher does not know its receivers: the key's subscription is
  the channel's, held while the key is advertised — a publisher on such a key
  sees one subscriber whether a hundred nodes receive it or none
  (docs/multicast.md, "Publish status").
* **receiving**: for each publisher stream heard announcing itself, a party
  named ``NODE@multicast:NAME`` stands for that publisher: its announcements
  and state records become ``advertise`` / ``feed_status`` / ``retract``
  (so subscribers see the feed UP and DOWN like any other), its notifications
  ``notify``; the stream gone (timeout or BYE) is ``detach`` — every feed it
  carried goes DOWN.  Receivers never send anything back but NAKs: their
  subscriptions, requests and replies stay on the node.

What a channel carries: runs of notifications and state records
(:mod:`.runs`), one per reliable message.  An announcement's state is
``[[type name, subject, up], ...]`` of the keys the receivers were told of.

Losses for good (:class:`~.receiver.LostRange`) and the nagging monitor's
flag are published as the system notifications
:class:`~actorbus.bus.system.MulticastLoss` and
:class:`~actorbus.bus.system.MulticastNagging`.

Threads: ``send_*`` are called from publishers' threads (sometimes under the
router lock).  A notification is appended to the channel's queue without a
lock (the router calls :meth:`MulticastChannel.send_notify` itself), the
channel's thread woken once per batch; it encodes and sends what is queued
under the channel's lock.  Past ``_MAX_PENDING`` queued the publishing thread
takes the lock and sends them itself (which may block briefly when the
socket's buffer is full: back-pressure on the publisher).  A feed's state
change takes the lock, sends what was queued before it, then its state
record, at once.  Every party call is made on the channel's thread.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ipaddress
import queue
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack

from ..._log import logger, shown
from ...bus import codec
from ...bus.message import Message, MessageKey, Notification, lookup_type
from ...bus.party import RemoteParty, Role
from ...bus.subjects import Wildcard
from ...bus.system import SYSTEM_SUBJECT, MulticastLoss, MulticastNagging
from ...config.settings import MulticastSettings
from ...errors import CodecError, UsageError
from . import datagram as dg
from .channel import ChannelProtocol, new_stream
from .receiver import Announced, Delivered, Gone, Joined, LostRange, Nagging
from .runs import RUN, STATE, Encoder

if TYPE_CHECKING:
    from ...bus.router import Router
    from ...bus.sender import Sender

__all__ = ["MulticastChannel"]

#: notifications queued for the channel's thread at most; the publisher sends past it
_MAX_PENDING = 16_384
#: (type name, subject) pairs whose key a receiving channel remembers
_MAX_KEYS = 4_096


#: the socket option attaching a classic BPF filter (Linux's SO_ATTACH_FILTER)
_SO_ATTACH_FILTER = 26
#: datagrams read per wake-up before the timers run and the bus is told
_READ_BATCH = 256


def _subject_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a subject is one the channel's ``subjects`` setting names."""
    exact: set[str] = set()
    wild: list[Wildcard] = []
    for text in patterns:
        if "*" not in text and not text.endswith("..."):
            exact.add(text)
        elif text.startswith("/") and ("/*" in text or text.endswith("/...")):
            wild.append(Wildcard.levels(text))
        else:
            wild.append(Wildcard.prefix(text))
    return lambda subject: subject in exact or any(w.matches(subject) for w in wild)


class _Outbound:
    """The publishing half's transport: what the router tells the channel's party."""

    def __init__(self, channel: MulticastChannel) -> None:
        self._channel = channel
        # the router's route for a notification is the channel's own method:
        # no hop through here, no partial naming the sender (nothing sends it)
        self.send_notify = channel.send_notify  # type: ignore[method-assign]

    def send_advertise(self, key: MessageKey, role: Role, up: bool) -> None:
        if role is Role.PUBLISHER:
            self._channel.feed_changed(key, up)

    def send_feed_status(self, key: MessageKey, role: Role, up: bool) -> None:
        if role is Role.PUBLISHER:
            self._channel.feed_changed(key, up)

    def send_retract(self, key: MessageKey, role: Role) -> None:
        if role is Role.PUBLISHER:
            self._channel.feed_changed(key, None)

    def send_notify(self, message: Message) -> None:
        self._channel.publish(message)

    def send_notify_from(self, sender: Sender, message: Message) -> None:
        self._channel.publish(message)

    # A channel's receivers subscribe, request and reply on their own nodes only.
    def send_subscribe(self, key: MessageKey) -> None: ...
    def send_unsubscribe(self, key: MessageKey) -> None: ...
    def send_request(self, request_id: int, message: Message) -> None: ...
    def send_request_from(self, sender: Sender, request_id: int, message: Message) -> None: ...
    def send_request_ack(self, request_id: int, taken: int) -> None: ...
    def send_reply(self, request_id: int, reply: Any) -> None: ...
    def send_reply_from(self, sender: Sender, request_id: int, reply: Any) -> None: ...
    def send_cancel(self, request_id: int) -> None: ...
    def send_subscribe_pattern(self, message_class: type[Message], wildcard: Wildcard) -> None: ...
    def send_unsubscribe_pattern(
        self, message_class: type[Message], wildcard: Wildcard
    ) -> None: ...
    def send_group(self, key: MessageKey, group: str, members: int) -> None: ...
    def send_group_notify(self, group: str, message: Message) -> None: ...


class _Inbound(_Outbound):
    """A remote publisher's party's transport: nothing goes back to it."""

    def __init__(self, channel: MulticastChannel) -> None:
        self._channel = channel

    def send_advertise(self, key: MessageKey, role: Role, up: bool) -> None: ...
    def send_feed_status(self, key: MessageKey, role: Role, up: bool) -> None: ...
    def send_retract(self, key: MessageKey, role: Role) -> None: ...
    def send_notify(self, message: Message) -> None: ...
    def send_notify_from(self, sender: Sender, message: Message) -> None: ...


class _Remote:
    """A publisher stream as the receiving node follows it."""

    __slots__ = ("keys", "loss", "name", "next_number", "party", "stream")

    def __init__(self, stream: int, name: str, party: RemoteParty) -> None:
        self.stream = stream
        self.name = name
        self.party = party
        #: the keys it advertised, and whether each is UP
        self.keys: dict[MessageKey, bool] = {}
        #: the number of the next notification expected from it (None: none yet)
        self.next_number: int | None = None
        #: the datagrams lost since the last run, not reported yet: (first, last)
        self.loss: tuple[int, int] | None = None


class MulticastChannel:
    """One node on one reliable multicast channel (see the module docstring).

    Made by the node (``Bus.join_multicast`` or ``multicast.NAME.*`` keys);
    :meth:`close` leaves the group (a BYE first: receivers see this node's
    feeds go DOWN at once)."""

    def __init__(
        self,
        router: Router,
        *,
        node_id: str,
        name: str,
        settings: MulticastSettings,
        secret: bytes | None = None,
        publish_system: Callable[[Notification], object] | None = None,
    ) -> None:
        self.name = name
        self.node_id = node_id
        self.settings = settings
        self._router = router
        self._publish_system = publish_system
        key = None if secret is None else dg.channel_key(secret, settings.group, settings.port)
        self._clock = time.monotonic
        # a node with no subjects to publish only receives: no heartbeats, no announcements
        self.protocol = ChannelProtocol(
            settings,
            name=node_id,
            stream=new_stream(),
            key=key,
            now=self._clock(),
            publish=bool(settings.subjects),
        )
        self._matches = _subject_matcher(settings.subjects)
        self._lock = threading.Lock()
        #: keys this node publishes on the channel -> UP (None: retracted)
        self._feeds: dict[MessageKey, bool] = {}
        #: those of them the receivers were told of (after the channel subscribed)
        self._told: set[MessageKey] = set()
        #: party calls for the channel's thread: (method name, key)
        self._calls: queue.SimpleQueue[tuple[str, MessageKey]] = queue.SimpleQueue()
        #: notifications published, not yet handed to the protocol (appended
        #: by publishers' threads without a lock; popped under it)
        self._pending: collections.deque[Message] = collections.deque()
        #: a wake-up for what is pending is on its way
        self._scheduled = False
        self._encoder = Encoder()
        #: notifications numbered so far (the next run's first number)
        self._numbered = 0
        publisher = self.protocol.publisher
        self._run_limit = publisher.segment_size if publisher is not None else 0
        self._keys: dict[tuple[str, str], MessageKey | None] = {}
        self._remotes: dict[int, _Remote] = {}
        #: notifications decoded on one key from one publisher, not yet handed on
        self._run_party: RemoteParty | None = None
        self._run_key: MessageKey | None = None
        self._run_messages: list[Message] = []
        self._party: RemoteParty | None = None
        self._recv: socket.socket | None = None
        self._send: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._thread: threading.Thread | None = None
        self._stop = False
        self._resume = False
        self.counters: dict[str, int] = {
            "notifications_sent": 0,
            "state_records_sent": 0,
            "lost_notifications": 0,
            "unencodable": 0,
            "announce_too_large": 0,
            "too_large": 0,
            "unknown_type": 0,
            "undecodable": 0,
            "send_errors": 0,
        }

    def __repr__(self) -> str:
        s = self.settings
        return f"<MulticastChannel {self.name} {s.group}:{s.port} stream={self.stream:016x}>"

    @property
    def stream(self) -> int:
        """This node's stream on the channel (a random number per run)."""
        return self.protocol.stream

    # ------------------------------------------------------------ open, close

    def open(self) -> None:
        """Bind, join the group, attach to the bus and start the channel's thread."""
        s = self.settings
        try:
            self._recv, self._send = _sockets(s)
            _ignore_own(self._recv, self.stream)
        except BaseException:
            self._wake_r.close()
            self._wake_w.close()
            raise
        self._party = self._router.attach(f"multicast:{self.name}", _Outbound(self))
        self._thread = threading.Thread(
            target=self._run, name=f"actorbus-multicast-{self.name}", daemon=True
        )
        self._thread.start()
        logger.info(
            "node {}: multicast channel {} on {}:{} (ttl {}, stream {:016x})",
            self.node_id,
            self.name,
            s.group,
            s.port,
            s.ttl,
            self.stream,
        )

    def close(self, timeout: float = 5.0) -> None:
        """Send what was published, say BYE, leave the group, detach every
        party.  Idempotent."""
        with self._lock:
            if self._stop:
                return
            self._stop = True
            if self.protocol.publisher is not None:
                self._send_pending_locked(self._clock())
            self.protocol.close()
            self._flush_locked()
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        for sock in (self._recv, self._send, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    def resume(self) -> None:
        """After a :class:`~actorbus.bus.system.MulticastNagging`: what was missed
        while flagged is reported lost, the monitor's window emptied, and the
        channel asks for retransmissions and delivers data again."""
        self._resume = True
        self._wake()

    def stats(self) -> dict[str, int]:
        """The channel's counters: the protocol's halves, the decoder's refusals, this shell's."""
        with self._lock:
            out = dict(self.protocol.counters)
            out.update(self.protocol.receiver.counters)
            if self.protocol.publisher is not None:
                out.update({f"pub_{k}": v for k, v in self.protocol.publisher.counters.items()})
            out.update(self.counters)
            # (counted when the channel's thread takes them: those queued count too)
            out["notifications_sent"] += len(self._pending)
        return out

    # ------------------------------------------------------------ publishing (any thread)

    def feed_changed(self, key: MessageKey, up: bool | None) -> None:
        """A local publisher's key advertised, UP/DOWN, or retracted (None).

        A new key is told to the receivers by the channel's thread, once it has
        subscribed to it through the party: a receiver that sees the feed UP
        knows that what is published from then on goes on the channel."""
        if not self._matches(key.subject):
            return
        with self._lock:
            before = self._feeds.get(key)
            if up is None:
                if key not in self._feeds:
                    return
                del self._feeds[key]
                self._calls.put(("unsubscribe", key))
            else:
                self._feeds[key] = up
                if before is None:
                    self._calls.put(("subscribe", key))
            if self._stop:
                return
            if key in self._told:  # (else the channel's thread tells the state it finds)
                if up is None:
                    self._told.discard(key)
                self._state_record_locked(key, up)
        self._wake()

    def _state_record_locked(self, key: MessageKey, up: bool | None) -> None:
        now = self._clock()
        self._send_pending_locked(now)  # what was published before the change goes first
        record = msgpack.packb([STATE, key.type_name, key.subject, up])
        self.protocol.send(record, now)
        self.counters["state_records_sent"] += 1
        if self.protocol.publisher is not None:
            try:
                self.protocol.publisher.announce(self._state_locked(), now)
            except ValueError as exc:  # receivers joining later miss the state
                self.counters["announce_too_large"] += 1
                logger.warning("multicast channel {}: {}", self.name, exc)
        self._flush_locked()

    def send_notify(self, message: Message) -> None:
        """Queue one notification for the channel (the router calls this as the
        party's route: the hot path, no lock).  The channel's thread encodes and
        sends what is queued when it wakes, the notifications queued meanwhile
        packed into as few datagrams as fit; one wake-up per batch, not per
        message.  One it cannot encode, or larger than ``maxMessageSize``, is
        dropped there, counted (``unencodable``, ``too_large``) and logged."""
        if self._stop:
            return
        pending = self._pending
        pending.append(message)
        if len(pending) >= _MAX_PENDING:
            # the channel's thread is behind: this thread sends them itself
            # (what waits stays bounded; the publisher slows down to the socket)
            with self._lock:
                if not self._stop:
                    self._send_pending_locked(self._clock())
                    self._flush_locked()
            return
        if not self._scheduled:
            self._scheduled = True
            self._wake()

    publish = send_notify

    def _send_pending_locked(self, now: float) -> None:
        """Encode what is queued now and hand it to the protocol as runs
        (:meth:`.runs.Encoder.pack`).  The flag is cleared first: a notification
        queued after the count was taken wakes the thread again."""
        self._scheduled = False
        pending = self._pending
        count = len(pending)
        if not count:
            return
        popleft = pending.popleft
        batch = [popleft() for _ in range(count)]
        self.counters["notifications_sent"] += count
        records, self._numbered = self._encoder.pack(
            batch,
            self._numbered,
            self._run_limit,
            self.settings.max_message_size,
            self._dropped,
        )
        send = self.protocol.send
        for record in records:
            send(record, now)

    def _dropped(self, counter: str, message: Message, why: str) -> None:
        self.counters[counter] += 1
        logger.warning(
            "multicast channel {}: a {} on {!r} not sent: {} (fix the value, or raise the "
            "channel's maxMessageSize on every node)",
            self.name,
            type(message).__qualname__,
            message.subject,
            why,
        )

    def _state_locked(self) -> bytes:
        told = self._told
        state: bytes = msgpack.packb(
            [[k.type_name, k.subject, up] for k, up in self._feeds.items() if k in told]
        )
        return state

    def _flush_locked(self) -> None:
        sock = self._send
        if sock is None:
            self.protocol.datagrams_to_send()
            return
        to = (self.settings.group, self.settings.port)
        for datagram in self.protocol.datagrams_to_send():
            try:
                sock.sendto(datagram, to)
            except OSError as exc:
                # the datagram stays in the retransmit cache: receivers NAK it
                self.counters["send_errors"] += 1
                logger.debug("multicast {}: send failed: {}", self.name, exc)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    # ------------------------------------------------------------ the channel's thread

    def _run(self) -> None:
        recv = self._recv
        assert recv is not None
        try:
            while not self._stop:
                with self._lock:
                    due = self.protocol.next_deadline()
                wait = max(0.0, min(due - self._clock(), 1.0))
                if self._calls.empty():
                    readable, _, _ = select.select([recv, self._wake_r], [], [], wait)
                else:
                    readable = [recv, self._wake_r]
                if self._wake_r in readable:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                self._party_calls()
                batch = self._read(recv)
                with self._lock:
                    now = self._clock()
                    self._send_pending_locked(now)
                    if self._resume:
                        self._resume = False
                        self.protocol.receiver.resume(now)
                    for datagram in batch:
                        self.protocol.receive(datagram, now)
                    self.protocol.tick(now)
                    self._flush_locked()
                    events = []
                    while (event := self.protocol.next_event()) is not None:
                        events.append(event)
                self._handle(events)
        except Exception:  # the channel's thread must say why it stopped
            logger.exception("multicast channel {} stopped", self.name)
        finally:
            self._detach_all("multicast channel closed")

    def _read(self, recv: socket.socket) -> list[bytes]:
        batch = []
        size = self.settings.datagram_size + 64
        for _ in range(_READ_BATCH):
            try:
                batch.append(recv.recv(size))
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
        return batch

    def _party_calls(self) -> None:
        party = self._party
        while True:
            try:
                method, key = self._calls.get_nowait()
            except queue.Empty:
                return
            if party is not None:
                getattr(party, method)(key)
            if method == "subscribe":
                with self._lock:  # now the receivers may learn of it
                    up = self._feeds.get(key)
                    if up is not None and not self._stop and key not in self._told:
                        self._told.add(key)
                        self._state_record_locked(key, up)

    def _handle(self, events: list[Any]) -> None:
        remotes = self._remotes
        held: list[RemoteParty] = []
        try:
            for event in events:
                kind = type(event)
                if kind is Delivered:
                    remote = remotes.get(event.stream)
                    if remote is not None:
                        if remote.party not in held and remote.party.hold_deliveries():
                            held.append(remote.party)
                        self._delivered(remote, event.payload)
                    continue
                self._flush_run()  # what came before goes first
                if kind is Joined:
                    name = shown(event.name)  # the sender's text, in party names and logs
                    party = self._router.attach(
                        f"{name}@multicast:{self.name}/{event.stream:016x}", _Inbound(self)
                    )
                    remotes[event.stream] = _Remote(event.stream, name, party)
                elif kind is Announced:
                    remote = remotes.get(event.stream)
                    if remote is not None:
                        self._announced(remote, event.state)
                elif kind is Gone:
                    remote = remotes.pop(event.stream, None)
                    if remote is not None:
                        self._report_loss(remote, -1)
                        remote.party.detach(f"multicast publisher {remote.name} {event.reason}")
                elif kind is LostRange:
                    remote = remotes.get(event.stream)
                    if remote is not None:
                        last = event.first + event.length - 1
                        first = event.first if remote.loss is None else remote.loss[0]
                        remote.loss = (first, last)
                elif kind is Nagging:
                    logger.warning(
                        "multicast channel {}: {} retransmissions requested within {} s "
                        "(more than {}): it stops asking and delivering until resume()",
                        self.name,
                        event.requested,
                        event.window,
                        event.limit,
                    )
                    self._system(
                        MulticastNagging(
                            SYSTEM_SUBJECT,
                            channel=self.name,
                            requested=event.requested,
                            limit=event.limit,
                            window=event.window,
                        )
                    )
        finally:
            self._flush_run()
            for party in held:
                party.release_deliveries()

    def _report_loss(self, remote: _Remote, messages: int) -> None:
        """Publish the loss held for ``remote``, now that ``messages`` is known
        (-1: the stream ended before a later notification said)."""
        if remote.loss is None:
            return
        first, last = remote.loss
        remote.loss = None
        self.counters["lost_notifications"] += max(messages, 0)
        self._system(
            MulticastLoss(
                SYSTEM_SUBJECT,
                channel=self.name,
                publisher=remote.name,
                stream=f"{remote.stream:016x}",
                first=first,
                last=last,
                messages=messages,
            )
        )

    def _system(self, message: Notification) -> None:
        if self._publish_system is not None:
            self._publish_system(message)

    def _key(self, type_name: Any, subject: Any) -> MessageKey | None:
        try:
            key = self._keys[type_name, subject]
        except (KeyError, TypeError):
            cls = lookup_type(type_name) if isinstance(type_name, str) else None
            if cls is None or not issubclass(cls, Message) or not isinstance(subject, str):
                key = None
            else:
                key = MessageKey(cls, subject)
                if len(self._keys) >= _MAX_KEYS:
                    self._keys.clear()
                self._keys[type_name, subject] = key
        if key is None:
            self.counters["unknown_type"] += 1
        return key

    def _delivered(self, remote: _Remote, payload: bytes) -> None:
        try:
            record = msgpack.unpackb(
                payload, use_list=False, raw=False, ext_hook=codec.ext_hook, strict_map_key=True
            )
            kind = record[0]
            if kind == RUN:
                _, number, groups = record
                expected = remote.next_number
                if expected is not None and number != expected:
                    self._flush_run()
                    self._report_loss(remote, number - expected)
                elif remote.loss is not None:
                    self._flush_run()
                    self._report_loss(remote, 0)  # only state records were lost
                remote.next_number = number + self._notify_run(remote, groups)
            elif kind == STATE:
                self._flush_run()
                _, type_name, subject, up = record
                key = self._key(type_name, subject)
                if key is not None:
                    self._state(remote, key, up if up is None else bool(up))
        except (ValueError, TypeError, IndexError, msgpack.UnpackException):
            self.counters["undecodable"] += 1

    def _flush_run(self) -> None:
        """Hand the notifications gathered on one key to its party, in one call."""
        run = self._run_messages
        if run:
            self._run_messages = []
            self._run_party.notify_run(run, self._run_key)  # type: ignore[union-attr,arg-type]

    def _notify_run(self, remote: _Remote, groups: Any) -> int:
        """A run's groups to the party: consecutive notifications on one key from
        one publisher are gathered, across the datagrams of a wake-up, and go in
        one ``notify_run`` (:meth:`_flush_run`: at a change of key or publisher,
        before anything else is handled, and at the end of the wake-up's
        events); returns how many notifications the run numbers."""
        party = remote.party
        numbered = 0
        for type_name, subject, bodies in groups:
            numbered += len(bodies)
            key = self._key(type_name, subject)
            if key is None:
                continue
            # (codec.from_wire, without its call: the run's hot loop)
            decode = key.message_class.__wire_decode__
            try:
                messages = [decode(body) for body in bodies]
            except CodecError:  # a body this node's class cannot read: count it, go on
                messages = []
                for body in bodies:
                    try:
                        messages.append(decode(body))
                    except CodecError:
                        self.counters["undecodable"] += 1
            if messages:
                if key is self._run_key and party is self._run_party:
                    self._run_messages += messages
                else:
                    self._flush_run()
                    self._run_party, self._run_key, self._run_messages = party, key, messages
        return numbered

    def _state(self, remote: _Remote, key: MessageKey, up: bool | None) -> None:
        before = remote.keys.get(key)
        if up is None:
            if before is not None:
                del remote.keys[key]
                remote.party.retract(key, Role.PUBLISHER)
        elif before is None:
            remote.keys[key] = up
            remote.party.advertise(key, Role.PUBLISHER, up)
        elif before != up:
            remote.keys[key] = up
            remote.party.feed_status(key, Role.PUBLISHER, up)

    def _announced(self, remote: _Remote, state: bytes) -> None:
        try:
            entries = msgpack.unpackb(state, use_list=False, raw=False) if state else ()
            seen: dict[MessageKey, bool] = {}
            for type_name, subject, up in entries:
                key = self._key(type_name, subject)
                if key is not None:
                    seen[key] = bool(up)
        except (ValueError, TypeError, msgpack.UnpackException):
            self.counters["undecodable"] += 1
            return
        for key in [k for k in remote.keys if k not in seen]:
            self._state(remote, key, None)
        for key, up in seen.items():
            self._state(remote, key, up)

    def _detach_all(self, reason: str) -> None:
        for remote in self._remotes.values():
            remote.party.detach(reason)
        self._remotes.clear()
        if self._party is not None:
            self._party.detach(reason)
            self._party = None


def _ignore_own(sock: socket.socket, stream: int) -> None:
    """On Linux, a socket filter drops the datagrams of ``stream`` (this node's,
    looped back by multicast) before the socket queues them: the channel's
    thread does not read what it sent.  The filter sees the UDP header first
    (8 bytes), then the datagram, whose bytes 8 to 16 are its stream; shorter
    ones pass, for the decoder to count.  Elsewhere, or if the kernel refuses
    it, the protocol drops them by the same bytes (``own``)."""
    if not sys.platform.startswith("linux"):
        return
    at = 8 + 8
    program = [
        (0x80, 0, 0, 0),  # A = length (UDP header included)
        (0x35, 0, 5, at + 8),  # A >= at + 8 ? go on : accept
        (0x20, 0, 0, at),  # A = the stream's high 32 bits
        (0x15, 0, 3, stream >> 32),
        (0x20, 0, 0, at + 4),  # A = its low 32 bits
        (0x15, 0, 1, stream & 0xFFFFFFFF),
        (0x06, 0, 0, 0),  # this node's own: dropped
        (0x06, 0, 0, 0xFFFFFFFF),  # accepted whole
    ]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
    with contextlib.suppress(OSError):  # (the kernel copies the program)
        sock.setsockopt(
            socket.SOL_SOCKET,
            _SO_ATTACH_FILTER,
            struct.pack("HL", len(program), ctypes.addressof(code)),
        )


def _sockets(s: MulticastSettings) -> tuple[socket.socket, socket.socket]:
    """The receiving socket (bound to the port, joined to the group) and the sending one."""
    if s.interface:
        try:
            ipaddress.IPv4Address(s.interface)
        except ValueError:
            raise UsageError(
                f"multicast interface {s.interface!r}: expected the IPv4 address of a local "
                f"interface (ip -4 addr shows them)"
            ) from None
    group = socket.inet_aton(s.group)
    interface = socket.inet_aton(s.interface) if s.interface else struct.pack("!I", 0)
    recv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    send = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        recv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            recv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        with contextlib.suppress(OSError):
            recv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        recv.bind((s.group, s.port))
        recv.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group + interface)
        recv.setblocking(False)
        send.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, s.ttl)
        send.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1 if s.loopback else 0)
        if s.interface:
            send.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, interface)
        with contextlib.suppress(OSError):
            send.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    except OSError as exc:
        recv.close()
        send.close()
        raise UsageError(
            f"multicast group {s.group}:{s.port}"
            + (f" on {s.interface}" if s.interface else "")
            + f" cannot be joined: {exc}; check the interface has multicast and a route "
            "for 224.0.0.0/4 (docs/multicast.md, 'On a LAN')"
        ) from exc
    return recv, send
