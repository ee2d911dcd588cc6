"""The link protocol between two nodes, with no I/O (sans-IO).

Theory of operation
-------------------

A :class:`LinkProtocol` is one end of one link.  It holds every wire rule —
framing, size limits, the logon handshake, per-link key ids, sequence numbers,
heartbeats — and nothing else: no sockets, no ``await``, no clock.  A shell (the
asyncio link) drives it with four kinds of calls:

* **bytes in** — ``receive_data(data, now)`` parses every complete frame in
  ``data`` at once and queues one event per meaningful frame; ``b""`` means EOF.
* **events out** — ``next_event()`` / ``events()`` hand the events over in the
  order the bytes arrived.  A peer that breaks a rule makes ``next_event()``
  raise :class:`~actorbus.errors.ProtocolError` exactly once, after the events
  of the frames that came before the bad one.  Notifications are queued with
  no object per message: consecutive ones on one key as one *run* of bodies.
  ``next_item()`` hands one out as a plain ``(key, body)`` tuple,
  ``next_batch()`` a whole run as ``(key, bodies)``; ``next_event()`` wraps each
  in a :class:`NotificationReceived`.  The three may be mixed; ``has_events``
  says whether anything waits.
* **commands in** — ``logon()``, ``accept_logon()``, ``receipt()``, ``advertise()``,
  ``notify()``, ... each queue one frame (plus a KEY_DEF the first time a key is
  used on this link); ``notify_many(key, bodies)`` queues a run of
  notifications on one key as one NOTIFY_RUN frame (below).  ``can_send`` says
  whether feed and data commands are allowed (the logon is accepted).
* **bytes out** — ``data_to_send()`` returns everything queued as one ``bytes``
  (one socket write per batch); ``has_output`` says whether anything is
  queued.  ``tick(now)`` runs the timers; ``next_deadline()`` says when to call
  it next.

Two shortcuts serve a shell's hot paths, with the same rules and counts as the
calls they stand for:

* **data straight out of the parser** — after ``deliver_data_to(request, reply,
  request_ack)``, in-order REQUEST, REPLY and REQUEST_ACK frames on known keys
  go to those callables while ``receive_data`` parses them, with the fields of
  their events, instead of being queued — but only while no event waits before
  them, so the order the application sees is the order of the bytes.  A
  callable that returns False did not take the frame (it did nothing), and the
  frame is queued as its event.
* **a frame at once** — ``request_now(...)`` / ``reply_now(...)`` are
  ``request(...)`` / ``reply(...)`` followed by ``data_to_send()``, for a shell
  that writes the frame itself at once: they return its bytes (counted as
  handed over), or None, having done nothing, when other frames are queued or
  the key has not been defined on this link yet (then use the plain command).

Roles, scopes, feed states and reply statuses are the bus's own enums
(``actorbus.bus.party.Role``, ``actorbus.bus.scope.Scope`` and ``FeedState``,
``actorbus.bus.message.ReplyStatus``): commands take them, events carry them.
Their wire codes live in :mod:`actorbus.net._wire` only.

Threads
-------
A ``LinkProtocol`` is not thread-safe: one thread at a time drives it (calls
any method, reads any property but ``counters``).  The asyncio shell holds the
connection's write lock whenever it calls into the protocol — its event-loop
thread in every callback — and commands may come from a sending thread (a
requestor or replier writing its own request or reply) only while that thread
holds the same lock.  ``counters`` may be read from any thread (plain ints; two
fields may be a few messages apart).

The handshake
-------------
The state moves only when you call a command, or when ``next_event()`` hands you
the event that reports the move (so ``state`` always agrees with what the
application has seen); :mod:`actorbus.net._handshake` holds every move in one
table::

    client: IDLE --logon()--> LOGON_SENT --LogonAccepted--> SYNCING
    server: IDLE --LogonRequested--> LOGON_RECEIVED --accept_logon()--> SYNCING
    SYNCING --(complete_logon() sent and LogonComplete taken)--> CONNECTED
    any --logoff(), reject_logon(), LogonRejected, LogoffReceived, ConnectionClosed,
          HeartbeatTimeout, LogonTimeout, AuthenticationFailed, ProtocolError--> CLOSED

Authentication: before either side learns anything of the other but the
client's node id, they prove to each other that they hold the same key
(``secret``; :mod:`actorbus.net._auth`): the server answers LOGON with
CHALLENGE (a random nonce), the client answers with PROOF (an HMAC of both
nonces, the version and its ids), and only a PROOF that matches makes
``LogonRequested``; the server's LOGON_ACCEPT carries its own proof, and only a
matching one makes ``LogonAccepted``.  The protocol sends CHALLENGE and PROOF by
itself (no event, no command).  A proof that does not match is
:class:`AuthenticationFailed`: counted (``counters.auth_failures``), and taking
it closes the link with "authentication failed" for the peer.  The server's
node id, run id and feeds cross only after the client proved its key; the
client's node id crosses in LOGON (the server needs it to choose the key).

After LOGON is accepted both sides may send anything: advertisements first, then
LOGON_COMPLETE (the peer's ``LogonComplete`` event says its table is complete),
then subscriptions, feed status and data in any order.  The parser keeps its
own view of the handshake (which frames are legal next) so that it can check a
whole batch of bytes before the application has looked at any of it.

Closing: a command that closes the link (``logoff``, ``reject_logon``) discards
events not yet taken — the application has decided.  Every other close is
reported by an event queued after the ones already waiting; when the
application takes it, the state becomes CLOSED and, for timeouts and protocol
errors, a LOGOFF (or LOGON_REJECT, before acceptance) with a short reason is
queued so the peer learns why.  Once closed, received bytes are ignored,
``next_event()`` returns None, ``tick()`` does nothing, ``logoff()`` is a no-op
and every other command raises :class:`~actorbus.errors.LinkClosedError`.  The
shell flushes ``data_to_send()`` one last time and closes the transport.

Key ids: each side numbers the keys it sends (0, 1, 2, ... in first-use order)
and announces each with KEY_DEF before the first frame that uses it.  A frame
naming a key id the peer never defined is a protocol error.  Keys whose type
name the local node does not know (``is_known_type``) are recorded, and frames
on them are counted in ``counters.unknown_type`` and dropped — except replies,
which are always delivered, and requests, which the protocol itself answers
with ``REQUEST_ACK(request_id, 0)`` so the requestor is not left waiting.

Sequence numbers: every sequenced frame (ADVERTISE and above) carries ``seq``,
1, 2, 3, ... per direction.  A duplicate (``seq`` not above the last one) is
dropped and counted; a jump is counted and reported as :class:`SequenceGap`
before the frame's own event.  Over TCP neither happens with a correct peer;
the numbers are the basis of later loss-free transports.

Runs on the wire: a NOTIFY_RUN frame ``[26, seq, key_id, [body, ...]]`` carries
*n* >= 1 notifications on one key, numbered ``seq`` .. ``seq+n-1``: for the
sequence numbers, the data counts (``messages_in``/``messages_out``, receipts,
an output-queue limit) and the events the peer sees it is exactly *n* NOTIFY
frames, but it is packed, length-prefixed and parsed once.  The length prefix
and a frame header of some ten bytes cost as much to handle in Python as a small
body does, so a busy publisher's runs cost the receiving thread less per
message (docs/performance.md).  ``notify_many`` sends runs of two or more this
way (at most ``RUN_MAX`` bodies a frame, and halves a run whose frame would
exceed ``max_frame_size``); a single body goes as NOTIFY.  A run frame whose
first numbers the peer already had drops those as duplicates, and one that
jumps is a gap, as for *n* NOTIFY frames.

Wildcards and queue groups (version 5): ``subscribe_pattern(type_name,
dialect, text)`` / ``unsubscribe_pattern(...)`` carry a subscriber's subject
pattern, checked on both ends by the bus's own ``Wildcard`` constructor (a
pattern it refuses is a UsageError here, a protocol error from the peer).  The
frame names its type rather than a key; a type unknown here is counted in
``counters.unknown_type`` and dropped, as frames on such a key are.
``group(key, group, members)`` tells how many members of a queue group this
node has on a key (0: none left); ``group_notify(key, group, body)`` is a
notification for one member of the peer's group: a data message, numbered and
counted exactly as ``notify()``'s (but never part of a run).  Their events are
:class:`~actorbus.net._events.PatternSubscribed`, ``PatternUnsubscribed``,
``GroupChanged`` and ``GroupNotificationReceived``.

Receipts: a node that wants to learn what a broken connection lost sends, once
per link after acceptance and before its LOGON_COMPLETE, ``receipt(n)``: the
data frames it received from the peer's run (the ``run_id`` of its LOGON /
LOGON_ACCEPT) over earlier connections.  The peer gets :class:`ReceiptReceived`
before its :class:`LogonComplete`; the bookkeeping across connections belongs
to the shell.

Wire format: ``docs/protocol.md`` is the reference.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from operator import attrgetter, methodcaller, truth
from typing import TYPE_CHECKING, Final

from ..bus.message import ReplyStatus
from ..config.schema import node_id_problem
from ..config.settings import LinkSettings
from ..errors import UsageError
from ._auth import KeyLookup, key_lookup, new_nonce, server_proof
from ._commands import RUN_MAX, Commands
from ._events import (
    Advertised,
    AuthenticationFailed,
    CancelReceived,
    ConnectionClosed,
    Event,
    FeedStatusReceived,
    HeartbeatTimeout,
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
)
from ._framing import (
    DEFAULT_MAX_FRAME_SIZE,
    LOGON_FRAME_LIMIT,
    PREFIX,
    length_packer,
    length_reader,
    length_reader_from,
    new_packer,
    new_unpackb,
)
from ._handshake import MOVES, SHOWN, Move, ProtocolState, Side, Step
from ._parser import Parser
from ._protocol_base import UNSTARTED, Failure, QueueItem, Run, run_id_problem, show, wire_text
from ._settings import ProtocolSettings, WireCounters
from ._wire import DATA_FRAME_TYPES, PROTOCOL_VERSION, FrameType, WireKey, WireValue

__all__ = [
    "DATA_FRAME_TYPES",
    "DEFAULT_MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "RUN_MAX",
    "Advertised",
    "AuthenticationFailed",
    "CancelReceived",
    "ConnectionClosed",
    "Event",
    "FeedStatusReceived",
    "FrameType",
    "HeartbeatTimeout",
    "LinkProtocol",
    "LogoffReceived",
    "LogonAccepted",
    "LogonComplete",
    "LogonRejected",
    "LogonRequested",
    "LogonTimeout",
    "NotificationReceived",
    "ProtocolSettings",
    "ProtocolState",
    "ReceiptReceived",
    "ReplyReceived",
    "RequestAcknowledged",
    "RequestReceived",
    "Retracted",
    "SequenceGap",
    "Side",
    "Subscribed",
    "Unsubscribed",
    "WireCounters",
    "WireKey",
    "WireValue",
]

_LOGON: Final = int(FrameType.LOGON)
_LOGON_ACCEPT: Final = int(FrameType.LOGON_ACCEPT)
_LOGON_REJECT: Final = int(FrameType.LOGON_REJECT)
_LOGON_COMPLETE: Final = int(FrameType.LOGON_COMPLETE)
_LOGOFF: Final = int(FrameType.LOGOFF)
_HEARTBEAT: Final = int(FrameType.HEARTBEAT)
_RECEIPT: Final = int(FrameType.RECEIPT)

#: Events whose taking moves the state (checked on every ``next_event()``).
_STATEFUL: Final = frozenset(
    {
        LogonRequested,
        LogonAccepted,
        LogonRejected,
        LogonComplete,
        LogoffReceived,
        ConnectionClosed,
        HeartbeatTimeout,
        LogonTimeout,
        AuthenticationFailed,
        Failure,
    }
)


class LinkProtocol(Parser, Commands):
    """One end of a link, as a pure state machine (see the module docstring).

    ``side`` says whether this end dialled (CLIENT) or accepted (SERVER);
    ``node_id`` is this node's unique id, sent in LOGON / LOGON_ACCEPT; ``now``
    starts the logon timer; ``is_known_type(type_name)`` tells whether a
    message type the peer names can be decoded here; it must not raise.

    ``ext_hook`` is handed to msgpack to turn extension values in received
    frames into objects; if it raises :class:`~actorbus.errors.CodecError` or
    ``ValueError`` the frame is corrupt and the link closes.  Leave it None to
    receive ``msgpack.ExtType`` values in bodies and decode them in the codec,
    so that one bad message costs one message rather than the link.

    ``pack_default`` is msgpack's ``default`` hook for values in bodies it cannot
    pack natively (the codec's ``pack_default`` turns ints beyond 64 bits into
    their wire form, so such messages cross); without it such a value makes the
    command raise :class:`~actorbus.errors.UsageError` and nothing is queued.

    ``run_id`` names this run of the node (a short random id made once per
    process, "" for none); it is sent in LOGON / LOGON_ACCEPT, so a peer tells a
    restarted node from the run before it.

    ``secret`` is the key both ends must hold (see "Authentication" in the
    module notes): bytes, or (typically on a server with a key per node) a
    callable from the client's node id to its key, None for a node that has
    none (its logon then fails).  The key of a link is the one of its client
    node: a client calls it with its own node id.  ``b""`` (the default) is no
    secret: two ends without one link; an end with a secret never links with
    one without.  It is kept private: no repr, log or error shows it.
    """

    def __init__(
        self,
        side: Side,
        node_id: str,
        now: float,
        *,
        is_known_type: Callable[[str], bool],
        settings: LinkSettings | None = None,
        ext_hook: Callable[[int, bytes], object] | None = None,
        pack_default: Callable[[object], object] | None = None,
        run_id: str = "",
        secret: bytes | KeyLookup = b"",
    ) -> None:
        if not isinstance(side, Side):
            raise UsageError(f"LinkProtocol side={side!r}: expected Side.CLIENT or Side.SERVER")
        problem = node_id_problem(node_id) if type(node_id) is str else "expected a str"
        if problem is not None:
            raise UsageError(
                f"LinkProtocol node_id={show(node_id)}: {problem}; use a short id "
                "unique to this node"
            )
        problem = run_id_problem(run_id) if type(run_id) is str else "expected a str"
        if problem is not None:
            raise UsageError(
                f"LinkProtocol run_id={show(run_id)}: {problem}; use a short random "
                "id made once per process (or '' for none)"
            )
        if not (callable(secret) or type(secret) in (bytes, bytearray)):
            raise UsageError(
                f"LinkProtocol secret: expected bytes or a callable (node id -> bytes or "
                f"None), got a {type(secret).__name__}"
            )
        self._key_for = key_lookup(secret)
        self._nonce = new_nonce()
        self._peer_nonce = b""
        self._claim = ("", "")
        self._link_key = b""
        self.side = side
        self.node_id = node_id
        #: This run of the node, sent in LOGON / LOGON_ACCEPT.
        self.run_id = run_id
        #: The peer's run id, once its LogonRequested / LogonAccepted was taken.
        self.peer_run_id = None
        self.settings = settings if settings is not None else LinkSettings()
        #: the timers, read once (0: off; a reply delay of 0 is the heartbeat delay)
        self._hb_delay = float(self.settings.heartbeat_delay)
        self._hb_reply = float(self.settings.heartbeat_reply_delay or self._hb_delay)
        self.counters = WireCounters()
        #: The peer's node id, once its LogonRequested / LogonAccepted was taken.
        self.peer_node_id = None
        #: Why the link closed (for logs and the link-down notification), once CLOSED.
        self.close_reason = None
        #: The ProtocolError raised by ``next_event()``, if the peer broke a rule.
        self.error = None

        self._to(Step.IDLE)
        self._rx_to(Step.IDLE)
        self._is_known_type = is_known_type
        self._created = now

        # -- output
        self._out = []
        self._joined = 0
        self._has_output = partial(truth, self._out)  # (see has_output)
        self._data_queued = 0
        self._tx_seq = 0
        self._out_keys = {}
        self._pack = new_packer(pack_default)
        self._prefix = length_packer(self.settings.byte_order)
        self._max_frame = self.settings.max_frame_size

        # -- input
        self._rx_seq = 0
        self._in_keys = {}  # known types only
        self._in_unknown = {}
        self._events = deque()
        self._has_events = partial(truth, self._events)  # (see has_events)
        self._buffer_limit = self._max_frame + PREFIX
        # frames before the logon is accepted are handshake frames, all small
        self._max_in = min(self._max_frame, LOGON_FRAME_LIMIT)
        self._unpacker, self._ext_hook = UNSTARTED, ext_hook  # (Parser._stream makes it)
        self._partial_since = None  # when the first bytes of a frame not whole yet arrived
        self._hold_nothing_yet()
        self._buffered = 0  # bytes fed to the unpacker and not consumed yet
        self._frame_len = -1  # body length of the frame being read; -1 = reading a prefix
        self._read_len = length_reader(self.settings.byte_order)
        self._read_len_from = length_reader_from(self.settings.byte_order)
        self._unpackb = new_unpackb(ext_hook)
        self._handlers = self._frame_handlers()
        self._sinks = (None, None, None)  # see deliver_data_to
        self._sent_by = None
        self.peer_routes = False

        # -- timers
        self._idle_since = now  # last time something arrived (or an unanswerable probe left)
        self._last_rx = now
        self._hb_sent_at = None  # a HEARTBEAT awaits any answer

    def __repr__(self) -> str:
        peer = f" peer={self.peer_node_id!r}" if self.peer_node_id else ""
        return (
            f"<LinkProtocol {self.side.value} node={self.node_id!r}{peer} state={self.state.name}>"
        )

    # ------------------------------------------------------------ read-only views

    @property
    def state(self) -> ProtocolState:
        """Where the link is; moves on commands and on taking events."""
        return SHOWN[self._step]

    # has_events, has_output and can_send are read on a shell's hot paths: their
    # getters are C functions (attrgetter, or methodcaller on a partial of
    # operator.truth bound to the queue), so reading them runs no Python frame.
    if TYPE_CHECKING:

        @property
        def has_events(self) -> bool:
            """Events are waiting for ``next_event()`` / ``next_item()`` / ``next_batch()``."""
            ...

        @property
        def has_output(self) -> bool:
            """Frames are queued for ``data_to_send()``."""
            ...

        @property
        def can_send(self) -> bool:
            """Feed and data commands are allowed: the logon is accepted and the
            link not closed (the state is SYNCING or CONNECTED)."""
            ...

    else:
        has_events = property(
            methodcaller("_has_events"),
            doc="Events are waiting for ``next_event()`` / ``next_item()`` / ``next_batch()``.",
        )
        has_output = property(
            methodcaller("_has_output"), doc="Frames are queued for ``data_to_send()``."
        )
        can_send = property(
            attrgetter("_can_send"),
            doc="Feed and data commands are allowed: the logon is accepted and the link "
            "not closed (the state is SYNCING or CONNECTED).",
        )

    @property
    def data_queued(self) -> int:
        """Data frames queued since the last ``data_to_send()`` (for a queue limit)."""
        return self._data_queued

    @property
    def last_seq_sent(self) -> int:
        """Sequence number of the last sequenced frame queued (0 = none yet)."""
        return self._tx_seq

    @property
    def last_seq_received(self) -> int:
        """Highest sequence number received from the peer (0 = none yet)."""
        return self._rx_seq

    @property
    def bytes_buffered(self) -> int:
        """Received bytes held for an incomplete frame; never above max frame + 4."""
        return self._buffered

    # ---------------------------------------------------------------- events out

    def deliver_data_to(
        self,
        request: Callable[[WireKey, int, WireValue], bool],
        reply: Callable[[int, WireKey, ReplyStatus, WireValue, int | None], bool],
        request_ack: Callable[[int, int], bool],
    ) -> None:
        """Hand in-order REQUEST, REPLY and REQUEST_ACK frames on known keys to
        ``request(key, request_id, body)``, ``reply(request_id, key, status, body,
        repliers)`` and ``request_ack(request_id, repliers)`` as ``receive_data``
        parses them, while no event waits before them (see the module notes).
        They run inside ``receive_data`` and must not call this object; one that
        returns False leaves the frame to be queued as its event."""
        self._sinks = (request, reply, request_ack)

    def next_event(self) -> Event | None:
        """The next event, or None when nothing is waiting.

        Raises :class:`~actorbus.errors.ProtocolError` (once) when the next thing
        in the stream is a broken rule; the link is then CLOSED and a LOGOFF (or
        LOGON_REJECT) for the peer is queued — send ``data_to_send()``, then close
        the transport.
        """
        events = self._events
        if not events:
            return None
        event = events[0]
        if event.__class__ is Run:
            body = event.popleft()
            if not event:
                events.popleft()
            return NotificationReceived(event.key, body)
        events.popleft()
        if event.__class__ in _STATEFUL:
            return self._take(event)
        return event  # type: ignore[return-value]  # Failure is in _STATEFUL

    def next_item(self) -> Event | tuple[WireKey, WireValue] | None:
        """``next_event()`` for a shell's hot loop: a notification comes as a plain
        ``(key, body)`` tuple instead of a :class:`NotificationReceived` (the same
        fields, without building an event object per message); everything else,
        including the ProtocolError it raises, is exactly ``next_event()``."""
        events = self._events
        if not events:
            return None
        event = events[0]
        cls = event.__class__
        if cls is Run:
            body = event.popleft()  # type: ignore[union-attr]
            if not event:
                events.popleft()
            return (event.key, body)  # type: ignore[union-attr]
        events.popleft()
        if cls in _STATEFUL:
            return self._take(event)
        return event  # type: ignore[return-value]  # Failure is in _STATEFUL

    def next_batch(self) -> Event | tuple[WireKey, deque[WireValue]] | None:
        """``next_item()`` by runs: the notifications that arrived one after the
        other on one key come as one ``(key, bodies)`` tuple, ``bodies`` a
        non-empty deque of their bodies in arrival order (the caller's to keep);
        everything else, including the ProtocolError it raises, is exactly
        ``next_event()``.  Calls to ``next_event()``, ``next_item()`` and
        ``next_batch()`` may be mixed: each takes what the others left."""
        events = self._events
        if not events:
            return None
        event = events.popleft()
        cls = event.__class__
        if cls is Run:
            return (event.key, event)  # type: ignore[union-attr, return-value]
        if cls in _STATEFUL:
            return self._take(event)
        return event  # type: ignore[return-value]  # Failure is in _STATEFUL

    def events(self) -> Iterator[Event]:
        """Iterate ``next_event()`` until nothing is waiting (or it raises)."""
        while (event := self.next_event()) is not None:
            yield event

    def _take(self, item: QueueItem) -> Event:
        """Apply the state move an event reports, as the application takes it."""
        if isinstance(item, Failure):
            self.error = item.error
            self._close_telling_peer(f"protocol error: {item.error}", item.wire_reason)
            raise item.error
        if isinstance(item, LogonRequested):
            self.peer_node_id = item.peer_node_id
            self.peer_run_id = item.peer_run_id
            self._to(MOVES[(self._step, Move.PEER_PROOF)])
        elif isinstance(item, LogonAccepted):
            self.peer_node_id = item.peer_node_id
            self.peer_run_id = item.peer_run_id
            self._to(MOVES[(self._step, Move.PEER_ACCEPT)])
        elif isinstance(item, LogonComplete):
            self._to(MOVES[(self._step, Move.PEER_COMPLETE)])
        elif isinstance(item, LogonRejected):
            self._close(f"logon rejected by the peer: {item.reason}")
        elif isinstance(item, LogoffReceived):
            self._close(f"logged off by the peer: {item.reason}")
        elif isinstance(item, ConnectionClosed):
            self._close("the peer closed the connection without logging off")
        elif isinstance(item, HeartbeatTimeout):
            self._close_telling_peer(
                f"heartbeat timeout: nothing received for {item.silent_for:.3f}s",
                "heartbeat timeout",
            )
        elif isinstance(item, AuthenticationFailed):
            self._close_telling_peer(
                f"authentication failed: the proof of the peer claiming node "
                f"{item.claimed_node_id!r} does not match this node's secret",
                "authentication failed",
            )
        elif isinstance(item, LogonTimeout):
            self._close_telling_peer(
                f"logon timeout: not logged on after {item.waited:.3f}s", "logon timeout"
            )
        return item  # type: ignore[return-value]  # a Run (notifications) is not stateful

    # ------------------------------------------------------------------ bytes out

    def data_to_send(self) -> bytes:
        """All queued frames as one ``bytes`` (``b""`` if none); write it in one go."""
        out = self._out
        if not out:
            return b""
        data = b"".join(out)  # (the one entry itself when it is bytes)
        counters = self.counters
        counters.frames_out += len(out) + self._joined
        counters.bytes_out += len(data)
        counters.messages_out += self._data_queued
        out.clear()
        self._data_queued = 0
        self._joined = 0
        return data

    def output_size(self, start: int) -> tuple[int, int]:
        """How many frames wait for ``data_to_send()``, and the bytes of those
        from the ``start``-th on (a shell keeps the running total while it
        cannot write)."""
        out = self._out
        return len(out), sum(map(len, out[start:]))

    # -------------------------------------------------------------------- timers

    def next_deadline(self) -> float | None:
        """When ``tick()`` next has work to do (same clock as ``now``), or None."""
        if self._rx_done or self._step is Step.CLOSED:
            return None
        deadline = self._heartbeat_deadline()
        settings = self.settings
        if self._step is not Step.CONNECTED and settings.logon_timeout > 0:
            logon = self._created + settings.logon_timeout
            if deadline is None or logon < deadline:
                deadline = logon
        since = self._partial_since
        if since is not None and settings.frame_timeout > 0:
            frame = since + settings.frame_timeout
            if deadline is None or frame < deadline:
                deadline = frame
        return deadline

    def _heartbeat_deadline(self) -> float | None:
        if not self._can_send or self._hb_delay <= 0:
            return None
        if self._hb_sent_at is not None:
            return self._hb_sent_at + self._hb_reply
        return self._idle_since + self._hb_delay

    def tick(self, now: float) -> None:
        """Run the timers: send a HEARTBEAT when idle, or report a timeout.

        A timeout queues :class:`HeartbeatTimeout` / :class:`LogonTimeout` (a
        frame not finished within ``frame_timeout``: a failure, as a broken
        rule is); take it with ``next_event()`` (which closes the link), then
        send ``data_to_send()``.
        """
        deadline = self.next_deadline()
        if deadline is None or now < deadline:
            return
        settings = self.settings
        since = self._partial_since
        if (
            since is not None
            and settings.frame_timeout > 0
            and now >= since + settings.frame_timeout
        ):
            self._fail(self._frame_timeout(now - since))
            return
        if (
            self._step is not Step.CONNECTED
            and settings.logon_timeout > 0
            and now >= self._created + settings.logon_timeout
        ):
            self._rx_to(Step.CLOSED)
            self._events.append(LogonTimeout(waited=now - self._created))
            return
        heartbeat = self._heartbeat_deadline()
        if heartbeat is None or now < heartbeat:
            return
        if self._hb_sent_at is not None:
            self._rx_to(Step.CLOSED)
            self._events.append(HeartbeatTimeout(silent_for=now - self._last_rx))
        else:
            self._queue((_HEARTBEAT,), "heartbeat")
            self.counters.heartbeats_out += 1
            self._hb_sent_at = now

    def keepalive(self) -> None:
        """Send a HEARTBEAT now, expecting no answer in time: the shell has stopped
        reading on purpose (input back-pressure), and this keeps the peer's idle
        timer from taking the silence for a dead link."""
        self._check_sending("keepalive")
        self._queue((_HEARTBEAT,), "keepalive")
        self.counters.heartbeats_out += 1

    def reading_resumed(self, now: float) -> None:
        """The shell reads again after pausing on purpose: the silence was this
        side's, so the idle timer restarts at ``now`` and an unanswered HEARTBEAT
        is forgotten (its answer is waiting unread)."""
        if self._step is Step.CLOSED:
            return
        self._last_rx = self._idle_since = now
        self._hb_sent_at = None
        if self._partial_since is not None:
            self._partial_since = now  # the frame waited for this side, not the peer

    # ----------------------------------------------------------------- handshake

    def logon(self) -> None:
        """(client) Send LOGON with this node's id and a fresh nonce; the protocol
        answers the server's CHALLENGE by itself; wait for LogonAccepted /
        LogonRejected / AuthenticationFailed."""
        if self.side is not Side.CLIENT:
            raise UsageError("logon() on the server side; only the client sends LOGON")
        step = MOVES.get((self._step, Move.SEND_LOGON))
        if step is None:
            raise self._refusal(ProtocolState.IDLE, "logon")
        self._queue((_LOGON, PROTOCOL_VERSION, self.node_id, self.run_id, self._nonce), "logon")
        self._to(step)
        self._rx_along(Move.SEND_LOGON)

    def accept_logon(self) -> None:
        """(server) Accept the client of the LogonRequested just taken: send
        LOGON_ACCEPT with this node's id and its proof of the key.

        Then send advertisements and ``complete_logon()``."""
        if self.side is not Side.SERVER:
            raise UsageError(
                "accept_logon() on the client side; the client reacts to LogonAccepted"
            )
        step = MOVES.get((self._step, Move.SEND_ACCEPT))
        if step is None:
            raise self._refusal(ProtocolState.LOGON_RECEIVED, "accept_logon")
        peer, peer_run = self._claim
        proof = server_proof(
            self._link_key,
            self._peer_nonce,
            self._nonce,
            peer,
            peer_run,
            server_id=self.node_id,
            server_run=self.run_id,
        )
        self._queue((_LOGON_ACCEPT, self.node_id, self.run_id, proof), "accept_logon")
        self._to(step)
        self._rx_along(Move.SEND_ACCEPT)

    def reject_logon(self, reason: str) -> None:
        """Refuse the peer and close: the server answers LOGON with LOGON_REJECT;
        a client that took LogonAccepted (and dislikes the server's node id)
        sends LOGOFF.  ``reason`` goes to the peer; keep it short and free of
        internal details.  Events not yet taken are discarded."""
        self._check_reason(reason, "reject_logon")
        if self.side is Side.SERVER:
            self._require(ProtocolState.LOGON_RECEIVED, "reject_logon")
            frame_type = _LOGON_REJECT
        else:
            self._require(ProtocolState.SYNCING, "reject_logon")
            frame_type = _LOGOFF
        self._queue((frame_type, wire_text(reason)), "reject_logon")
        self._close(f"logon rejected here: {reason}")
        self._events.clear()

    def receipt(self, received: int) -> None:
        """Send RECEIPT: ``received`` data frames arrived here from the peer's
        run over earlier connections.  At most once, after acceptance and
        before ``complete_logon()``."""
        step = MOVES.get((self._step, Move.SEND_RECEIPT))
        if step is None:
            if SHOWN[self._step] is ProtocolState.SYNCING:
                raise UsageError(
                    "receipt() after complete_logon() or twice; RECEIPT is sent at most "
                    "once per link, before LOGON_COMPLETE"
                )
            raise self._refusal(ProtocolState.SYNCING, "receipt")
        self._check_uint(received, "received", "receipt")
        self._queue((_RECEIPT, received), "receipt")
        self._to(step)

    def complete_logon(self) -> None:
        """Send LOGON_COMPLETE: every advertisement of this node has been sent."""
        step = MOVES.get((self._step, Move.SEND_COMPLETE))
        if step is None:
            if SHOWN[self._step] is ProtocolState.SYNCING:
                raise UsageError(
                    "complete_logon() called twice; LOGON_COMPLETE is sent once per link"
                )
            raise self._refusal(ProtocolState.SYNCING, "complete_logon")
        self._queue((_LOGON_COMPLETE,), "complete_logon")
        self._to(step)

    def logoff(self, reason: str) -> None:
        """Close the link in order, telling the peer ``reason``.

        A no-op when already CLOSED.  Events not yet taken are discarded."""
        self._check_reason(reason, "logoff")
        if self._step is Step.CLOSED:
            return
        self._queue((_LOGOFF, wire_text(reason)), "logoff")
        self._close(f"logged off here: {reason}")
        self._events.clear()

    def _rx_along(self, move: Move) -> None:
        """The parser's cursor takes a command that opens the handshake too (a
        closed parser stays closed)."""
        if not self._rx_done:
            self._rx_to(MOVES[(self._rx, move)])
