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
  in a :class:`NotificationReceived`.  The three may be mixed.
* **commands in** — ``logon()``, ``accept_logon()``, ``receipt()``, ``advertise()``,
  ``notify()``, ... each queue one frame (plus a KEY_DEF the first time a key is
  used on this link); ``notify_many(key, bodies)`` queues a run of
  notifications on one key as one NOTIFY_RUN frame (below).
* **bytes out** — ``data_to_send()`` returns everything queued as one ``bytes``
  (one socket write per batch).  ``tick(now)`` runs the timers; ``next_deadline()``
  says when to call it next.

The state moves only when you call a command, or when ``next_event()`` hands you
the event that reports the move (so ``state`` always agrees with what the
application has seen)::

    client: IDLE --logon()--> LOGON_SENT --LogonAccepted--> SYNCING
    server: IDLE --LogonRequested--> LOGON_RECEIVED --accept_logon()--> SYNCING
    SYNCING --(complete_logon() sent and LogonComplete taken)--> CONNECTED
    any --logoff(), reject_logon(), LogonRejected, LogoffReceived, ConnectionClosed,
          HeartbeatTimeout, LogonTimeout, ProtocolError--> CLOSED

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
body does, so a busy publisher's runs cost the receiving thread about half as
much per message (docs/performance.md).  ``notify_many`` sends runs of two or
more this way (at most ``_RUN_MAX`` bodies a frame, and halves a run whose frame
would exceed ``max_frame_size``); a single body goes as NOTIFY.  A run frame whose
first numbers the peer already had drops those as duplicates, and one that
jumps is a gap, as for *n* NOTIFY frames.

Receipts: a node that wants to learn what a broken connection lost sends, once
per link after acceptance and before its LOGON_COMPLETE, ``receipt(n)``: the
data frames it received from the peer's session (the ``session_id`` of its
LOGON / LOGON_ACCEPT) over earlier connections.  The peer gets
:class:`ReceiptReceived` before its :class:`LogonComplete`; the bookkeeping
across connections belongs to the shell.

Wire format: ``docs/protocol.md`` is the reference.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from struct import Struct
from typing import Final, Literal, TypeVar

import msgpack

from actorbus.config.schema import node_id_problem
from actorbus.errors import (
    CodecError,
    LinkClosedError,
    MessageTooLargeError,
    ProtocolError,
    UsageError,
)
from actorbus.net._events import (
    Advertised,
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
from actorbus.net._wire import (
    DATA_FRAME_TYPES,
    PROTOCOL_VERSION,
    FeedState,
    FrameType,
    ReplyStatus,
    Role,
    Scope,
    WireKey,
    WireValue,
)

__all__ = [
    "DATA_FRAME_TYPES",
    "DEFAULT_MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "Advertised",
    "CancelReceived",
    "ConnectionClosed",
    "Event",
    "FeedState",
    "FeedStatusReceived",
    "FrameType",
    "HeartbeatTimeout",
    "LinkCounters",
    "LinkProtocol",
    "LinkState",
    "LogoffReceived",
    "LogonAccepted",
    "LogonComplete",
    "LogonRejected",
    "LogonRequested",
    "LogonTimeout",
    "NotificationReceived",
    "ProtocolSettings",
    "ReceiptReceived",
    "ReplyReceived",
    "ReplyStatus",
    "RequestAcknowledged",
    "RequestReceived",
    "Retracted",
    "Role",
    "Scope",
    "SequenceGap",
    "Side",
    "Subscribed",
    "Unsubscribed",
    "WireKey",
    "WireValue",
]

#: Default largest frame body: a 1 MiB message plus room for the frame header.
DEFAULT_MAX_FRAME_SIZE: Final = 1_048_576 + 1_024

#: Smallest allowed ``max_frame_size``: handshake and closing frames always fit.
_MIN_FRAME_SIZE: Final = 1024
#: Largest value a 4-byte length prefix can carry.
_MAX_PREFIX_VALUE: Final = 0xFFFF_FFFF
_PREFIX: Final = 4
#: Longest session (incarnation) id, in UTF-8 bytes.
_MAX_SESSION_ID: Final = 64
#: Largest count a RECEIPT may carry.
_MAX_COUNT: Final = (1 << 64) - 1
#: Reasons sent to the peer are cut to this many UTF-8 bytes.
_MAX_REASON: Final = 512
_MAX_KEY_ID: Final = 0xFFFF_FFFF
#: Most notifications ``notify_many`` puts in one NOTIFY_RUN frame (more: several).
_RUN_MAX: Final = 1024

# Frame type numbers as plain ints: compared on every frame.
_LOGON: Final = int(FrameType.LOGON)
_LOGON_ACCEPT: Final = int(FrameType.LOGON_ACCEPT)
_LOGON_REJECT: Final = int(FrameType.LOGON_REJECT)
_LOGON_COMPLETE: Final = int(FrameType.LOGON_COMPLETE)
_LOGOFF: Final = int(FrameType.LOGOFF)
_HEARTBEAT: Final = int(FrameType.HEARTBEAT)
_HEARTBEAT_REPLY: Final = int(FrameType.HEARTBEAT_REPLY)
_KEY_DEF: Final = int(FrameType.KEY_DEF)
_RECEIPT: Final = int(FrameType.RECEIPT)
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

# Value -> enum member lookups for validated wire fields.  Plain dict lookups
# are much cheaper than calling the enum; the caller checks ``type(x) is int``
# first because ``True == 1`` would otherwise match.
_ALL_ROLES: Final = {int(r): r for r in Role}
_OFFER_ROLES: Final = {int(r): r for r in (Role.PUBLISHER, Role.REPLIER)}
_INTEREST_ROLES: Final = {int(r): r for r in (Role.SUBSCRIBER, Role.REQUESTOR)}
_REMOTE_SCOPES: Final = {int(s): s for s in (Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY)}
_STATUSES: Final = {int(s): s for s in ReplyStatus}
#: status -> the plain int sent (the encode side's check and conversion in one lookup)
_STATUS_VALUES: Final = {int(s): int(s) for s in ReplyStatus}
_FEED_STATES: Final = (FeedState.DOWN, FeedState.UP)

# msgpack's decoding failures: its own exception tree plus the ValueErrors it
# raises for bad UTF-8, bad map keys and bad timestamps; CodecError is what an
# ext_hook raises for an extension value it cannot read.  Nothing broader.
_DECODE_ERRORS: Final = (msgpack.UnpackException, ValueError, CodecError)
# msgpack's encoding failures for a value it cannot represent; CodecError is what
# a ``pack_default`` hook raises for a value it does not handle either.
_ENCODE_ERRORS: Final = (TypeError, ValueError, OverflowError, CodecError)


class Side(Enum):
    """Which end of the link this object is: the client dialled, the server listened."""

    CLIENT = "client"
    SERVER = "server"


class LinkState(Enum):
    """Where the link is in its life (see the module docstring for the moves)."""

    IDLE = "idle"
    LOGON_SENT = "logon sent"
    LOGON_RECEIVED = "logon received"
    SYNCING = "syncing"
    CONNECTED = "connected"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class ProtocolSettings:
    """Limits and timers of one link; both nodes should agree on them.

    Times are in seconds, on whatever clock the shell passes as ``now``
    (``time.monotonic()``).  ``0`` disables a timer.
    """

    #: Largest frame body accepted or sent, in bytes (the 4-byte prefix excluded).
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: Send HEARTBEAT after this long with nothing received; 0 = never.
    heartbeat_delay: float = 0.0
    #: Close the link when nothing arrives this long after a HEARTBEAT; 0 = never.
    heartbeat_reply_delay: float = 0.0
    #: Close the link when the logon is not accepted this long after creation.
    logon_timeout: float = 30.0
    #: Most keys the peer may define with KEY_DEF on one link.
    max_peer_keys: int = 65_536
    #: Byte order of the 4-byte length prefix (msgpack itself is always big-endian).
    byte_order: Literal["big", "little"] = "big"

    def __post_init__(self) -> None:
        size = self.max_frame_size
        if type(size) is not int or not _MIN_FRAME_SIZE <= size <= _MAX_PREFIX_VALUE - _PREFIX:
            raise UsageError(
                f"ProtocolSettings.max_frame_size={size!r}: expected an int from "
                f"{_MIN_FRAME_SIZE} to {_MAX_PREFIX_VALUE - _PREFIX}"
            )
        for name in ("heartbeat_delay", "heartbeat_reply_delay", "logon_timeout"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise UsageError(
                    f"ProtocolSettings.{name}={value!r}: expected a finite number of "
                    "seconds >= 0 (0 disables the timer)"
                )
        if type(self.max_peer_keys) is not int or self.max_peer_keys < 1:
            raise UsageError(
                f"ProtocolSettings.max_peer_keys={self.max_peer_keys!r}: expected an int >= 1"
            )
        if self.byte_order not in ("big", "little"):
            raise UsageError(
                f"ProtocolSettings.byte_order={self.byte_order!r}: expected 'big' or 'little'"
            )


@dataclass(slots=True)
class LinkCounters:
    """Per-link counters.  Outgoing counts are taken when ``data_to_send()`` hands
    the bytes over; incoming counts when ``receive_data()`` parses them."""

    #: Frames handed to the transport / parsed from it (every kind).
    frames_out: int = 0
    frames_in: int = 0
    #: Bytes handed to the transport / received (ignored bytes after close excluded).
    bytes_out: int = 0
    bytes_in: int = 0
    #: Data frames (notify, request, request ack, reply, cancel) out / in.
    messages_out: int = 0
    messages_in: int = 0
    #: Frames that broke a protocol rule (the link closes on the first one).
    corrupt_frames: int = 0
    #: Frames dropped because their key's type name is unknown here.
    unknown_type: int = 0
    #: Sequence jumps seen, and sequenced frames dropped as duplicates.
    gaps: int = 0
    duplicates: int = 0
    #: HEARTBEAT probes sent by us / received from the peer (and answered).
    heartbeats_out: int = 0
    heartbeats_in: int = 0


class _Reject(Exception):
    """A received frame broke a rule.  Raised and caught inside the parser only.

    ``message`` is for the local log (it may quote peer values); ``wire_reason``
    is the short, fixed text sent back to the peer.
    """

    def __init__(self, message: str, wire_reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.wire_reason = wire_reason


class _Failure:
    """Queued in place of an event: the ProtocolError ``next_event()`` will raise."""

    __slots__ = ("error", "wire_reason")

    def __init__(self, error: ProtocolError, wire_reason: str) -> None:
        self.error = error
        self.wire_reason = wire_reason


class _Run(deque[WireValue]):
    """Queued in place of events: the bodies of consecutive notifications on
    one key, in arrival order (the hot path: no object per message).  Only the
    newest queued item may grow, so order across items is kept."""

    __slots__ = ("key",)

    key: WireKey


_QueueItem = Event | _Failure | _Run
_E = TypeVar("_E", bound=Enum)

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
        _Failure,
    }
)


def _show(value: object, limit: int = 60) -> str:
    """``repr`` of a peer-supplied value, cut short so a log line stays a line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _member(table: dict[int, _E], value: object) -> _E | None:
    """``table[value]`` for an int (or IntEnum) argument; None otherwise (bool too)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return table.get(value)
    return None


_BAD_BODY: Final = "frame body is not one valid msgpack value"


def _bad_body(size: int) -> str:
    return (
        f"a {size}-byte frame body is not exactly one valid msgpack value "
        "(corrupt, truncated, or followed by extra bytes)"
    )


def _session_problem(session_id: str) -> str | None:
    """Why the str ``session_id`` is not a valid session id, or None ("" is valid)."""
    try:
        size = len(session_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode text"
    if size > _MAX_SESSION_ID:
        return f"it has {size} UTF-8 bytes, expected at most {_MAX_SESSION_ID}"
    return None


def _wire_text(reason: str) -> str:
    """``reason`` cut to ``_MAX_REASON`` UTF-8 bytes, so a closing frame always fits."""
    data = reason.encode("utf-8", "replace")
    if len(data) <= _MAX_REASON:
        return reason
    return data[: _MAX_REASON - 3].decode("utf-8", "ignore") + "..."


def _kind(value: object) -> str:
    return "array" if type(value) is tuple else type(value).__name__


class LinkProtocol:
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
    """

    def __init__(
        self,
        side: Side,
        node_id: str,
        now: float,
        *,
        is_known_type: Callable[[str], bool],
        settings: ProtocolSettings | None = None,
        ext_hook: Callable[[int, bytes], object] | None = None,
        pack_default: Callable[[object], object] | None = None,
        session_id: str = "",
    ) -> None:
        if not isinstance(side, Side):
            raise UsageError(f"LinkProtocol side={side!r}: expected Side.CLIENT or Side.SERVER")
        problem = node_id_problem(node_id) if type(node_id) is str else "expected a str"
        if problem is not None:
            raise UsageError(
                f"LinkProtocol node_id={_show(node_id)}: {problem}; use a short id "
                "unique to this node"
            )
        problem = _session_problem(session_id) if type(session_id) is str else "expected a str"
        if problem is not None:
            raise UsageError(
                f"LinkProtocol session_id={_show(session_id)}: {problem}; use a short random "
                "id made once per process (or '' for none)"
            )
        self.side: Final = side
        self.node_id: Final = node_id
        #: This node's session (incarnation) id, sent in LOGON / LOGON_ACCEPT.
        self.session_id: Final = session_id
        #: The peer's session id, once its LogonRequested / LogonAccepted was taken.
        self.peer_session: str | None = None
        self.settings: Final = settings if settings is not None else ProtocolSettings()
        self.counters = LinkCounters()
        #: The peer's node id, once its LogonRequested / LogonAccepted was taken.
        self.peer_node_id: str | None = None
        #: Why the link closed (for logs and the link-down notification), once CLOSED.
        self.close_reason: str | None = None
        #: The ProtocolError raised by ``next_event()``, if the peer broke a rule.
        self.error: ProtocolError | None = None

        self._state = LinkState.IDLE
        self._sending = False  # state is SYNCING or CONNECTED
        self._is_known_type = is_known_type
        self._created = now
        self._sent_complete = False
        self._sent_receipt = False
        self._peer_complete = False  # the LogonComplete event was taken

        # -- output
        self._out: list[bytes] = []
        self._data_queued = 0
        self._tx_seq = 0
        self._out_keys: dict[WireKey, int] = {}
        self._pack = msgpack.Packer(use_bin_type=True, datetime=False, default=pack_default).pack
        order = ">I" if self.settings.byte_order == "big" else "<I"
        self._prefix = Struct(order).pack
        self._max_frame = self.settings.max_frame_size

        # -- input: the parser's own view of the handshake
        self._rx_phase = LinkState.IDLE
        self._rx_open = False  # post-logon frames are legal
        self._rx_done = False  # no more parsing: closed, or a closing event is queued
        self._rx_complete = False  # the peer's LOGON_COMPLETE was parsed
        self._rx_receipt = False  # the peer's RECEIPT was parsed
        self._rx_seq = 0
        self._in_keys: dict[int, WireKey] = {}  # known types only
        self._in_unknown: dict[int, WireKey] = {}
        self._events: deque[_QueueItem] = deque()
        self._buffer_limit = self._max_frame + _PREFIX
        unpacker_options: dict[str, object] = {}
        if ext_hook is not None:
            unpacker_options["ext_hook"] = ext_hook
        self._unpacker = msgpack.Unpacker(
            use_list=False,
            raw=False,
            strict_map_key=True,
            max_buffer_size=self._buffer_limit,
            **unpacker_options,
        )
        self._buffered = 0  # bytes fed to the unpacker and not consumed yet
        self._frame_len = -1  # body length of the frame being read; -1 = reading a prefix
        self._read_len = Struct(order).unpack

        # -- timers
        self._idle_since = now  # last time something arrived (or an unanswerable probe left)
        self._last_rx = now
        self._hb_sent_at: float | None = None  # a HEARTBEAT awaits any answer

        self._handlers: dict[int, Callable[[tuple[object, ...]], None]] = {
            _LOGON: self._on_logon,
            _LOGON_ACCEPT: self._on_logon_accept,
            _LOGON_REJECT: self._on_logon_reject,
            _LOGON_COMPLETE: self._on_logon_complete,
            _LOGOFF: self._on_logoff,
            _HEARTBEAT: self._on_heartbeat,
            _HEARTBEAT_REPLY: self._on_heartbeat_reply,
            _KEY_DEF: self._on_key_def,
            _RECEIPT: self._on_receipt,
            _ADVERTISE: self._on_advertise,
            _RETRACT: self._on_retract,
            _SUBSCRIBE: self._on_subscribe,
            _UNSUBSCRIBE: self._on_unsubscribe,
            _FEED_STATUS: self._on_feed_status,
            _NOTIFY: self._on_notify,
            _REQUEST: self._on_request,
            _REQUEST_ACK: self._on_request_ack,
            _REPLY: self._on_reply,
            _CANCEL: self._on_cancel,
            _NOTIFY_RUN: self._on_notify_run,
        }

    def __repr__(self) -> str:
        peer = f" peer={self.peer_node_id!r}" if self.peer_node_id else ""
        return (
            f"<LinkProtocol {self.side.value} node={self.node_id!r}{peer} state={self._state.name}>"
        )

    # ------------------------------------------------------------ read-only views

    @property
    def state(self) -> LinkState:
        """Where the link is; moves on commands and on taking events."""
        return self._state

    @property
    def data_queued(self) -> int:
        """Data frames queued since the last ``data_to_send()`` (for a queue limit)."""
        return self._data_queued

    @property
    def has_output(self) -> bool:
        """Frames are queued for ``data_to_send()``."""
        return bool(self._out)

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

    # -------------------------------------------------------------- bytes in/out

    def receive_data(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Take bytes from the transport (``b""`` = EOF) and parse every complete frame.

        Never raises for what the peer sent: a broken rule is reported by
        ``next_event()``.  Bytes arriving after the link closed are ignored.
        Call ``next_event()`` / ``events()`` next, then ``data_to_send()``
        (the protocol answers heartbeats by itself).
        """
        if self._rx_done:
            return
        if type(data) is memoryview and data.format != "B":
            data = data.cast("B")
        size = len(data)
        if size == 0:
            self._end_of_stream()
            return
        self._last_rx = self._idle_since = now
        self._hb_sent_at = None
        self.counters.bytes_in += size
        room = self._buffer_limit - self._buffered
        if size <= room:
            self._unpacker.feed(data)
            self._buffered += size
            self._parse()
            return
        # More than the buffer may hold: feed it in pieces, parsing in between,
        # so at most one max-size frame plus its prefix is ever buffered.
        view = memoryview(data)
        pos = 0
        while pos < size and not self._rx_done:
            piece = view[pos : pos + self._buffer_limit - self._buffered]
            self._unpacker.feed(piece)
            self._buffered += len(piece)
            pos += len(piece)
            self._parse()

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
        if event.__class__ is _Run:
            body = event.popleft()
            if not event:
                events.popleft()
            return NotificationReceived(event.key, body)
        events.popleft()
        if event.__class__ in _STATEFUL:
            return self._take(event)
        return event  # type: ignore[return-value]  # _Failure is in _STATEFUL

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
        if cls is _Run:
            body = event.popleft()  # type: ignore[union-attr]
            if not event:
                events.popleft()
            return (event.key, body)  # type: ignore[union-attr]
        events.popleft()
        if cls in _STATEFUL:
            return self._take(event)
        return event  # type: ignore[return-value]  # _Failure is in _STATEFUL

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
        if cls is _Run:
            return (event.key, event)  # type: ignore[union-attr, return-value]
        if cls in _STATEFUL:
            return self._take(event)
        return event  # type: ignore[return-value]  # _Failure is in _STATEFUL

    def events(self) -> Iterator[Event]:
        """Iterate ``next_event()`` until nothing is waiting (or it raises)."""
        while (event := self.next_event()) is not None:
            yield event

    def data_to_send(self) -> bytes:
        """All queued frames as one ``bytes`` (``b""`` if none); write it in one go."""
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        counters = self.counters
        counters.frames_out += len(out)
        counters.bytes_out += len(data)
        counters.messages_out += self._data_queued
        out.clear()
        self._data_queued = 0
        return data

    # -------------------------------------------------------------------- timers

    def next_deadline(self) -> float | None:
        """When ``tick()`` next has work to do (same clock as ``now``), or None."""
        if self._rx_done or self._state is LinkState.CLOSED:
            return None
        settings = self.settings
        if not self._sending:
            if settings.logon_timeout > 0:
                return self._created + settings.logon_timeout
            return None
        if settings.heartbeat_delay <= 0:
            return None
        if self._hb_sent_at is not None:
            return self._hb_sent_at + settings.heartbeat_reply_delay
        return self._idle_since + settings.heartbeat_delay

    def tick(self, now: float) -> None:
        """Run the timers: send a HEARTBEAT when idle, or report a timeout.

        A timeout queues :class:`HeartbeatTimeout` / :class:`LogonTimeout`; take
        it with ``next_event()`` (which closes the link), then send
        ``data_to_send()``.
        """
        deadline = self.next_deadline()
        if deadline is None or now < deadline:
            return
        if not self._sending:
            self._rx_done = True
            self._events.append(LogonTimeout(waited=now - self._created))
        elif self._hb_sent_at is not None:
            self._rx_done = True
            self._events.append(HeartbeatTimeout(silent_for=now - self._last_rx))
        else:
            self._queue((_HEARTBEAT,), "heartbeat")
            self.counters.heartbeats_out += 1
            if self.settings.heartbeat_reply_delay > 0:
                self._hb_sent_at = now
            else:
                self._idle_since = now

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
        if self._state is LinkState.CLOSED:
            return
        self._last_rx = self._idle_since = now
        self._hb_sent_at = None

    # ----------------------------------------------------------------- handshake

    def logon(self) -> None:
        """(client) Send LOGON with this node's id; wait for LogonAccepted/LogonRejected."""
        if self.side is not Side.CLIENT:
            raise UsageError("logon() on the server side; only the client sends LOGON")
        self._require(LinkState.IDLE, "logon")
        frame: tuple[object, ...] = (_LOGON, PROTOCOL_VERSION, self.node_id)
        if self.session_id:
            frame = (*frame, self.session_id)
        self._queue(frame, "logon")
        self._set_state(LinkState.LOGON_SENT)
        self._rx_phase = LinkState.LOGON_SENT

    def accept_logon(self) -> None:
        """(server) Accept the client of the LogonRequested just taken.

        Then send advertisements and ``complete_logon()``."""
        if self.side is not Side.SERVER:
            raise UsageError(
                "accept_logon() on the client side; the client reacts to LogonAccepted"
            )
        self._require(LinkState.LOGON_RECEIVED, "accept_logon")
        frame: tuple[object, ...] = (_LOGON_ACCEPT, self.node_id)
        if self.session_id:
            frame = (*frame, self.session_id)
        self._queue(frame, "accept_logon")
        self._set_state(LinkState.SYNCING)
        self._rx_phase = LinkState.SYNCING
        self._rx_open = True

    def reject_logon(self, reason: str) -> None:
        """Refuse the peer and close: the server answers LOGON with LOGON_REJECT;
        a client that took LogonAccepted (and dislikes the server's node id)
        sends LOGOFF.  ``reason`` goes to the peer; keep it short and free of
        internal details.  Events not yet taken are discarded."""
        self._check_reason(reason, "reject_logon")
        if self.side is Side.SERVER:
            self._require(LinkState.LOGON_RECEIVED, "reject_logon")
            frame_type = _LOGON_REJECT
        else:
            self._require(LinkState.SYNCING, "reject_logon")
            frame_type = _LOGOFF
        self._queue((frame_type, _wire_text(reason)), "reject_logon")
        self._close(f"logon rejected here: {reason}")
        self._events.clear()

    def receipt(self, received: int) -> None:
        """Send RECEIPT: ``received`` data frames arrived here from the peer's
        session over earlier connections.  At most once, after acceptance and
        before ``complete_logon()``."""
        self._require(LinkState.SYNCING, "receipt")
        if self._sent_complete or self._sent_receipt:
            raise UsageError(
                "receipt() after complete_logon() or twice; RECEIPT is sent at most once "
                "per link, before LOGON_COMPLETE"
            )
        self._check_uint(received, "received", "receipt")
        self._queue((_RECEIPT, received), "receipt")
        self._sent_receipt = True

    def complete_logon(self) -> None:
        """Send LOGON_COMPLETE: every advertisement of this node has been sent."""
        self._require(LinkState.SYNCING, "complete_logon")
        if self._sent_complete:
            raise UsageError("complete_logon() called twice; LOGON_COMPLETE is sent once per link")
        self._queue((_LOGON_COMPLETE,), "complete_logon")
        self._sent_complete = True
        if self._peer_complete:
            self._set_state(LinkState.CONNECTED)

    def logoff(self, reason: str) -> None:
        """Close the link in order, telling the peer ``reason``.

        A no-op when already CLOSED.  Events not yet taken are discarded."""
        self._check_reason(reason, "logoff")
        if self._state is LinkState.CLOSED:
            return
        self._queue((_LOGOFF, _wire_text(reason)), "logoff")
        self._close(f"logged off here: {reason}")
        self._events.clear()

    # ---------------------------------------------------- feeds and data (commands)

    def advertise(self, key: WireKey, role: Role, scope: Scope, feed_state: FeedState) -> None:
        """Tell the peer this node has a publisher/replier on ``key`` in ``feed_state``."""
        what = "advertise"
        self._check_sending(what)
        role_value = self._check_role(role, _OFFER_ROLES, what)
        if _member(_REMOTE_SCOPES, scope) is None:
            raise UsageError(
                f"advertise({key!r}) with scope={scope!r}: only LOCAL_AND_REMOTE and "
                "REMOTE_ONLY feeds are advertised to a peer"
            )
        up = self._check_feed_state(feed_state, what)
        kid = self._key_id(key, what)
        self._queue_sequenced(
            _ADVERTISE, (kid, role_value, int(scope), up), what, data=False, key=key
        )

    def retract(self, key: WireKey, role: Role) -> None:
        """Withdraw a publisher/replier advertisement of ``key``."""
        self._send_role_frame(_RETRACT, key, role, _OFFER_ROLES, "retract")

    def subscribe(self, key: WireKey, role: Role) -> None:
        """Tell the peer this node has a subscriber/requestor on ``key``."""
        self._send_role_frame(_SUBSCRIBE, key, role, _INTEREST_ROLES, "subscribe")

    def unsubscribe(self, key: WireKey, role: Role) -> None:
        """Tell the peer this node's last subscriber/requestor on ``key`` left."""
        self._send_role_frame(_UNSUBSCRIBE, key, role, _INTEREST_ROLES, "unsubscribe")

    def feed_status(self, key: WireKey, role: Role, up: bool) -> None:
        """Send the feed state of ``key`` for ``role`` across the link."""
        what = "feed_status"
        self._check_sending(what)
        role_value = self._check_role(role, _ALL_ROLES, what)
        if type(up) is not bool:
            raise UsageError(f"feed_status({key!r}) with up={up!r}: expected a bool")
        kid = self._key_id(key, what)
        self._queue_sequenced(_FEED_STATUS, (kid, role_value, up), what, data=False, key=key)

    def notify(self, key: WireKey, body: object) -> None:
        """Queue a notification; ``body`` is the codec's msgpack-able wire value.

        Raises MessageTooLargeError when the frame would exceed ``max_frame_size``,
        UsageError before logon is accepted, LinkClosedError once closed."""
        if not self._sending:
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
        except _ENCODE_ERRORS as exc:
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
        frame when there are two or more (see "Runs on the wire" in the module
        notes): the same sequence numbers, counters and events at the peer as one
        NOTIFY per body, for one frame's encoding and parsing.

        Raises what ``notify()`` raises, for the first body that cannot be sent:
        the bodies before it stay queued and the ones after it are not taken
        (``last_seq_sent`` moved by one per body queued)."""
        if not self._sending:
            self._check_sending("notify")
        if type(bodies) is not list:
            bodies = list(bodies)
        n = len(bodies)
        if n < 2:
            if n:
                self.notify(key, bodies[0])
            return
        if n > _RUN_MAX:
            for i in range(0, n, _RUN_MAX):
                self.notify_many(key, bodies[i : i + _RUN_MAX])
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
        except _ENCODE_ERRORS:
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
        if not self._sending:
            self._check_sending("request")
        if type(request_id) is not int or not 0 <= request_id <= _MAX_COUNT:
            self._check_uint(request_id, "request_id", "request")
        try:
            kid = self._out_keys.get(key)
        except TypeError:
            kid = None  # unhashable: _key_id explains
        new_key = kid is None
        if kid is None:
            kid = self._key_id(key, "request")
        seq = self._tx_seq + 1
        try:
            packed = self._pack((_REQUEST, seq, kid, request_id, body))
        except _ENCODE_ERRORS as exc:
            raise self._unencodable("request", None, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large("request", None, size)
        if new_key:
            self._define(key, kid, "request")
        self._out.append(self._prefix(size) + packed)
        self._tx_seq = seq
        self._data_queued += 1

    def request_ack(self, request_id: int, repliers: int) -> None:
        """Tell the requestor how many local repliers took request ``request_id``."""
        if not self._sending:
            self._check_sending("request_ack")
        if type(request_id) is not int or not 0 <= request_id <= _MAX_COUNT:
            self._check_uint(request_id, "request_id", "request_ack")
        if type(repliers) is not int or not 0 <= repliers <= _MAX_COUNT:
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
        if not self._sending:
            self._check_sending("reply")
        if type(request_id) is not int or not 0 <= request_id <= _MAX_COUNT:
            self._check_uint(request_id, "request_id", "reply")
        if repliers is not None and (type(repliers) is not int or not 0 <= repliers <= _MAX_COUNT):
            self._check_uint(repliers, "repliers", "reply")
        # an int (or IntEnum) that is a status; never a bool (True == 1)
        given: object = status
        wire_status = (
            _STATUS_VALUES.get(given)
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
        seq = self._tx_seq + 1
        try:
            packed = self._pack(
                (_REPLY, seq, kid, request_id, wire_status, body)
                if repliers is None
                else (_REPLY, seq, kid, request_id, wire_status, body, repliers)
            )
        except _ENCODE_ERRORS as exc:
            raise self._unencodable("reply", None, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large("reply", None, size)
        if new_key:
            self._define(key, kid, "reply")
        self._out.append(self._prefix(size) + packed)
        self._tx_seq = seq
        self._data_queued += 1

    def cancel(self, request_id: int) -> None:
        """Tell the peer our request ``request_id`` is cancelled."""
        what = "cancel"
        self._check_sending(what)
        self._check_uint(request_id, "request_id", what)
        self._queue_sequenced(_CANCEL, (request_id,), what, data=True)

    # ------------------------------------------------------------ command helpers

    def _set_state(self, state: LinkState) -> None:
        self._state = state
        self._sending = state is LinkState.SYNCING or state is LinkState.CONNECTED

    def _require(self, state: LinkState, what: str) -> None:
        if self._state is state:
            return
        if self._state is LinkState.CLOSED:
            raise LinkClosedError(
                f"{what}() on a closed link ({self.close_reason}); "
                "the link is gone, wait for the shell to reconnect"
            )
        raise UsageError(
            f"{what}() while the link is {self._state.name}; it is allowed only in "
            f"state {state.name}"
        )

    def _check_sending(self, what: str) -> None:
        if self._sending:
            return
        if self._state is LinkState.CLOSED:
            raise LinkClosedError(
                f"{what}() on a closed link ({self.close_reason}); "
                "the link is gone, wait for the shell to reconnect"
            )
        raise UsageError(
            f"{what}() before the logon was accepted (state {self._state.name}); "
            "the server calls accept_logon(), the client waits for LogonAccepted"
        )

    @staticmethod
    def _check_reason(reason: str, what: str) -> None:
        if type(reason) is not str:
            raise UsageError(f"{what}() with reason={reason!r}: expected a str for the peer")

    @staticmethod
    def _check_role(role: Role, allowed: dict[int, Role], what: str) -> int:
        if _member(allowed, role) is not None:
            return int(role)
        names = " or ".join(f"Role.{r.name}" for r in allowed.values())
        raise UsageError(f"{what}() with role={role!r}: expected {names}")

    @staticmethod
    def _check_feed_state(feed_state: FeedState, what: str) -> bool:
        # This module's FeedState, the bus's (a plain Enum with values 0/1), or 0/1.
        value = feed_state.value if isinstance(feed_state, Enum) else feed_state
        if type(value) is int and value in (0, 1):
            return value == 1
        raise UsageError(
            f"{what}() with feed_state={feed_state!r}: expected FeedState.UP or FeedState.DOWN"
        )

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
                f"{what}() with key={_show(key)}: expected a (type_name, subject) tuple "
                "of str with a non-empty type name"
            )
        kid = self._out_keys.get(key)
        return len(self._out_keys) if kid is None else kid

    def _define(self, key: WireKey, kid: int, what: str) -> None:
        """Queue the KEY_DEF of a key used for the first time."""
        self._queue((_KEY_DEF, kid, key[0], key[1]), what)
        self._out_keys[key] = kid

    def _send_role_frame(
        self, frame_type: int, key: WireKey, role: Role, allowed: dict[int, Role], what: str
    ) -> None:
        self._check_sending(what)
        role_value = self._check_role(role, allowed, what)
        kid = self._key_id(key, what)
        self._queue_sequenced(frame_type, (kid, role_value), what, data=False, key=key)

    def _queue_sequenced(
        self,
        frame_type: int,
        fields: tuple[object, ...],
        what: str,
        *,
        data: bool,
        key: WireKey | None = None,
    ) -> None:
        seq = self._tx_seq + 1
        packed = self._encode((frame_type, seq, *fields), what)
        if key is not None and key not in self._out_keys:
            self._define(key, fields[0], what)  # type: ignore[arg-type]
        self._out.append(packed)
        self._tx_seq = seq
        if data:
            self._data_queued += 1

    def _queue(self, frame: tuple[object, ...], what: str) -> None:
        self._out.append(self._encode(frame, what))

    def _encode(self, frame: tuple[object, ...], what: str) -> bytes:
        """``frame`` with its length prefix; raises (and queues nothing) when it
        cannot be encoded or is above ``max_frame_size``."""
        try:
            packed: bytes = self._pack(frame)
        except _ENCODE_ERRORS as exc:
            raise self._unencodable(what, None, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large(what, None, size)
        return self._prefix(size) + packed

    @staticmethod
    def _unencodable(what: str, key: WireKey | None, exc: Exception) -> UsageError:
        on = f" on {key!r}" if key is not None else ""
        return UsageError(
            f"{what}(){on}: the frame cannot be encoded as msgpack ({exc}); pass the "
            "codec's wire value (lists, str, int, float, bytes, bool, None, ExtType)"
        )

    def _too_large(self, what: str, key: WireKey | None, size: int) -> MessageTooLargeError:
        on = f" on {key!r}" if key is not None else ""
        return MessageTooLargeError(
            f"{what}(){on}: the frame is {size} bytes, above max_frame_size="
            f"{self._max_frame}; send a smaller message or raise max_frame_size on both nodes"
        )

    def _close(self, reason: str) -> None:
        self._set_state(LinkState.CLOSED)
        self.close_reason = reason
        self._rx_done = True
        self._hb_sent_at = None
        # Drop whatever partial frame was buffered.
        self._unpacker = msgpack.Unpacker(max_buffer_size=1)
        self._buffered = 0
        self._frame_len = -1

    def _close_telling_peer(self, reason: str, wire_reason: str) -> None:
        """Close after a timeout or a peer error, queueing a frame that says why."""
        awaiting_answer = self.side is Side.SERVER and self._state in (
            LinkState.IDLE,
            LinkState.LOGON_RECEIVED,
        )
        frame_type = _LOGON_REJECT if awaiting_answer else _LOGOFF
        self._queue((frame_type, _wire_text(wire_reason)), "close")
        self._close(reason)

    # ------------------------------------------------------------- taking events

    def _take(self, item: _QueueItem) -> Event:
        """Apply the state move an event reports, as the application takes it."""
        if isinstance(item, _Failure):
            self.error = item.error
            self._close_telling_peer(f"protocol error: {item.error}", item.wire_reason)
            raise item.error
        if isinstance(item, LogonRequested):
            self.peer_node_id = item.peer_node_id
            self.peer_session = item.peer_session
            self._set_state(LinkState.LOGON_RECEIVED)
        elif isinstance(item, LogonAccepted):
            self.peer_node_id = item.peer_node_id
            self.peer_session = item.peer_session
            self._set_state(LinkState.SYNCING)
        elif isinstance(item, LogonComplete):
            self._peer_complete = True
            if self._sent_complete:
                self._set_state(LinkState.CONNECTED)
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
        elif isinstance(item, LogonTimeout):
            self._close_telling_peer(
                f"logon timeout: not logged on after {item.waited:.3f}s", "logon timeout"
            )
        return item  # type: ignore[return-value]  # a tuple (notification) is not stateful

    # -------------------------------------------------------------------- parser

    def _parse(self) -> None:
        """Turn every complete buffered frame into events (the hot loop)."""
        unpacker = self._unpacker
        read_bytes = unpacker.read_bytes
        unpack = unpacker.unpack
        tell = unpacker.tell
        read_len = self._read_len
        max_frame = self._max_frame
        in_keys = self._in_keys
        events = self._events
        notify_type = _NOTIFY
        run_type = _Run
        rx_open = self._rx_open
        rx_seq = self._rx_seq
        buffered = self._buffered
        need = self._frame_len
        pos = tell()  # stream offset where the unread bytes start
        frames = 0
        slow = 0  # frames handled by _dispatch (which counts their messages)
        extra = 0  # messages beyond the first in NOTIFY_RUN frames of the fast path
        # (every frame a fast path takes is a data frame: counted in messages_in)
        # Notifications go onto the newest queued run while they are on its key.
        run_key: WireKey | None = None
        run_append: Callable[[WireValue], None] | None = None
        last = events[-1] if events else None
        if last.__class__ is run_type:
            run_key = last.key
            run_append = last.append
        rejection: _Reject | None = None
        try:
            while True:
                if need < 0:
                    if buffered < 4:
                        break
                    need = read_len(read_bytes(4))[0]
                    buffered -= 4
                    pos += 4
                    if not 0 < need <= max_frame:
                        raise self._bad_length(need)
                if buffered < need:
                    break
                # A body that is not exactly one msgpack value either fails to
                # decode or decodes past the frame end into bytes already
                # buffered; which one depends on how the bytes were split, so
                # both are the same error.
                try:
                    frame = unpack()
                except _DECODE_ERRORS as exc:
                    raise _Reject(_bad_body(need), _BAD_BODY) from exc
                end = tell()
                if end - pos != need:
                    raise _Reject(_bad_body(need), _BAD_BODY)
                pos = end
                buffered -= need
                need = -1
                frames += 1
                # Fast paths: in-order NOTIFY, REQUEST, REQUEST_ACK and REPLY frames
                # on known keys with every field well-formed (the same checks the
                # handlers make, made once); anything else takes the handlers.
                if type(frame) is tuple and rx_open:
                    size = len(frame)
                    if size == 4:
                        frame_type, seq, kid, body = frame
                        if (
                            type(frame_type) is int
                            and type(seq) is int
                            and type(kid) is int
                            and seq == rx_seq + 1
                        ):
                            if frame_type == notify_type:
                                key = in_keys.get(kid)
                                if key is not None:
                                    rx_seq = seq
                                    if key is run_key:
                                        run_append(body)  # type: ignore[misc]
                                    else:
                                        run = run_type((body,))
                                        run.key = run_key = key
                                        run_append = run.append
                                        events.append(run)
                                    continue
                            elif frame_type == _NOTIFY_RUN and type(body) is tuple and body:
                                key = in_keys.get(kid)
                                if key is not None:
                                    count = len(body)
                                    rx_seq = seq + count - 1
                                    extra += count - 1
                                    if key is not run_key:
                                        run = run_type()
                                        run.key = run_key = key
                                        run_append = run.append
                                        events.append(run)
                                    events[-1].extend(body)  # type: ignore[union-attr]
                                    continue
                            elif (
                                frame_type == _REQUEST_ACK
                                and kid >= 0
                                and type(body) is int
                                and body >= 0
                            ):
                                # [REQUEST_ACK, seq, request_id, repliers]
                                rx_seq = seq
                                events.append(RequestAcknowledged(kid, body))
                                run_key = None
                                continue
                    elif size == 5:
                        frame_type, seq, kid, request_id, body = frame
                        if (
                            frame_type == _REQUEST
                            and type(frame_type) is int
                            and type(seq) is int
                            and type(kid) is int
                            and type(request_id) is int
                            and seq == rx_seq + 1
                            and request_id >= 0
                        ):
                            key = in_keys.get(kid)
                            if key is not None:
                                rx_seq = seq
                                events.append(RequestReceived(key, request_id, body))
                                run_key = None
                                continue
                    elif size in (6, 7):
                        # [REPLY, seq, key_id, request_id, status, body, repliers?]
                        if size == 6:
                            frame_type, seq, kid, request_id, status, body = frame
                            repliers = None
                        else:
                            frame_type, seq, kid, request_id, status, body, repliers = frame
                        if (
                            frame_type == _REPLY
                            and type(frame_type) is int
                            and type(seq) is int
                            and type(kid) is int
                            and type(request_id) is int
                            and type(status) is int
                            and seq == rx_seq + 1
                            and request_id >= 0
                            and (repliers is None or (type(repliers) is int and repliers >= 0))
                        ):
                            key = in_keys.get(kid)
                            reply_status = _STATUSES.get(status)
                            if key is not None and reply_status is not None:
                                rx_seq = seq
                                events.append(
                                    ReplyReceived(request_id, key, reply_status, body, repliers)
                                )
                                run_key = None
                                continue
                slow += 1
                self._rx_seq = rx_seq
                self._dispatch(frame)
                rx_seq = self._rx_seq
                if self._rx_done:
                    break
                # It may have queued anything: go on with the newest item if a run.
                last = events[-1] if events else None
                if last.__class__ is run_type:
                    run_key = last.key
                    run_append = last.append
                else:
                    run_key = None
                rx_open = self._rx_open
        except _Reject as exc:
            rejection = exc
        finally:
            # Also reached when is_known_type() raises: keep the parser consistent.
            self._buffered = buffered
            self._frame_len = need
            self._rx_seq = max(self._rx_seq, rx_seq)
            self.counters.frames_in += frames
            self.counters.messages_in += frames - slow + extra
        if rejection is not None:
            self._fail(rejection)

    def _bad_length(self, need: int) -> _Reject:
        """The rejection of a length prefix out of 1..max_frame_size."""
        max_frame = self._max_frame
        if need:
            return _Reject(
                f"the peer announced a frame of {need} bytes, above "
                f"max_frame_size={max_frame}; it sends bigger messages than "
                "this link allows (raise max_frame_size on both nodes) or its "
                "byte stream is not this protocol",
                f"frame of {need} bytes exceeds the limit of {max_frame}",
            )
        return _Reject(
            "the peer sent a frame of length 0; every frame holds a msgpack array",
            "empty frame",
        )

    def _fail(self, rejection: _Reject) -> None:
        error = ProtocolError(
            f"link {self.node_id!r} <- {self.peer_node_id or 'unknown peer'!r}: "
            f"{rejection.message}; the link is closed"
        )
        error.__cause__ = rejection.__cause__
        self.counters.corrupt_frames += 1
        self._rx_done = True
        self._unpacker = msgpack.Unpacker(max_buffer_size=1)
        self._buffered = 0
        self._frame_len = -1
        self._events.append(_Failure(error, f"protocol error: {rejection.wire_reason}"))

    def _end_of_stream(self) -> None:
        if self._buffered or self._frame_len >= 0:
            if self._frame_len >= 0:
                detail = (
                    f"{self._buffered} of the {self._frame_len} body bytes of a frame had arrived"
                )
            else:
                detail = f"{self._buffered} of the 4 bytes of a length prefix had arrived"
            self._fail(
                _Reject(f"the connection ended in the middle of a frame: {detail}", "truncated")
            )
            return
        self._rx_done = True
        self._events.append(ConnectionClosed())

    def _dispatch(self, frame: object) -> None:
        if type(frame) is not tuple or not frame:
            raise _Reject(
                f"a frame body is a msgpack {_kind(frame)}, not a non-empty array",
                "malformed frame",
            )
        frame_type = frame[0]
        handler = self._handlers.get(frame_type) if type(frame_type) is int else None
        if handler is None:
            raise _Reject(
                f"a frame has type {_show(frame_type)}, which is not a frame type of "
                f"protocol version {PROTOCOL_VERSION}",
                "unknown frame type",
            )
        if frame_type >= _LOGON_COMPLETE and frame_type != _LOGOFF and not self._rx_open:
            raise _Reject(
                f"garbage before logon: a {FrameType(frame_type).name} frame arrived "
                f"while the logon is {self._rx_phase.name}; only LOGON, LOGON_ACCEPT/"
                "REJECT and LOGOFF may come before the logon is accepted",
                "frame before logon was accepted",
            )
        handler(frame)

    # --------------------------------------------------- frame shape validation

    @staticmethod
    def _malformed(frame: tuple[object, ...], detail: str) -> _Reject:
        name = FrameType(frame[0]).name  # type: ignore[arg-type]
        return _Reject(f"malformed {name} frame: {detail}", f"malformed {name} frame")

    def _length(self, frame: tuple[object, ...], length: int) -> None:
        if len(frame) != length:
            raise self._malformed(frame, f"{len(frame)} elements, expected {length}")

    def _text(self, frame: tuple[object, ...], index: int, what: str) -> str:
        value = frame[index]
        if type(value) is not str:
            raise self._malformed(frame, f"{what} is {_show(value)}, expected a str")
        return value

    def _node_id(self, frame: tuple[object, ...], index: int) -> str:
        node_id = self._text(frame, index, "node id")
        problem = node_id_problem(node_id)
        if problem is not None:
            raise self._malformed(frame, f"node id {_show(node_id)}: {problem}")
        return node_id

    def _session(self, frame: tuple[object, ...], index: int) -> str:
        """The optional session id at ``index`` ("" when the frame is shorter)."""
        if len(frame) <= index:
            return ""
        session = self._text(frame, index, "session id")
        problem = _session_problem(session)
        if problem is not None:
            raise self._malformed(frame, f"session id {_show(session)}: {problem}")
        return session

    def _uint(self, frame: tuple[object, ...], index: int, what: str) -> int:
        value = frame[index]
        if type(value) is not int or value < 0:
            raise self._malformed(frame, f"{what} is {_show(value)}, expected an int >= 0")
        return value

    def _flag(self, frame: tuple[object, ...], index: int, what: str) -> bool:
        value = frame[index]
        if type(value) is not bool:
            raise self._malformed(frame, f"{what} is {_show(value)}, expected a bool")
        return value is True

    def _role(self, frame: tuple[object, ...], index: int, allowed: dict[int, Role]) -> Role:
        value = frame[index]
        role = allowed.get(value) if type(value) is int else None
        if role is None:
            names = ", ".join(f"{r.name}={int(r)}" for r in allowed.values())
            raise self._malformed(frame, f"role is {_show(value)}, expected one of {names}")
        return role

    def _key(self, frame: tuple[object, ...], index: int) -> WireKey | None:
        """The key a frame names; None when its type is unknown here."""
        kid = frame[index]
        if type(kid) is int:
            key = self._in_keys.get(kid)
            if key is not None:
                return key
            if kid in self._in_unknown:
                return None
        name = FrameType(frame[0]).name  # type: ignore[arg-type]
        raise _Reject(
            f"a {name} frame uses key id {_show(kid)}, which the peer never defined with KEY_DEF",
            "undefined key id",
        )

    def _in_sequence(self, frame: tuple[object, ...]) -> bool:
        """Check ``seq``; False means a duplicate, to be dropped."""
        seq = frame[1]
        if type(seq) is not int or seq < 1:
            raise self._malformed(frame, f"seq is {_show(seq)}, expected an int >= 1")
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

    # ------------------------------------------------------- handshake frames

    def _on_logon(self, frame: tuple[object, ...]) -> None:
        if self.side is Side.CLIENT:
            raise _Reject(
                "the server sent LOGON; only a client logs on", "unexpected LOGON from a server"
            )
        if self._rx_phase is not LinkState.IDLE:
            raise _Reject(
                f"duplicate LOGON: the peer already logged on (logon {self._rx_phase.name})",
                "duplicate LOGON",
            )
        if len(frame) < 3:
            raise self._malformed(frame, f"{len(frame)} elements, expected at least 3")
        version = frame[1]
        if type(version) is not int:
            raise self._malformed(frame, f"version is {_show(version)}, expected an int")
        if version != PROTOCOL_VERSION:
            raise _Reject(
                f"the peer speaks protocol version {_show(version)}, this node speaks "
                f"version {PROTOCOL_VERSION}; run the same actorbus protocol on both nodes",
                f"protocol version {version} is not supported; this node speaks "
                f"version {PROTOCOL_VERSION}",
            )
        node_id = self._node_id(frame, 2)
        session = self._session(frame, 3)
        self._rx_phase = LinkState.LOGON_RECEIVED
        self._events.append(LogonRequested(node_id, session))

    def _on_logon_accept(self, frame: tuple[object, ...]) -> None:
        self._expect_logon_answer(frame)
        if len(frame) not in (2, 3):
            raise self._malformed(frame, f"{len(frame)} elements, expected 2 or 3")
        node_id = self._node_id(frame, 1)
        session = self._session(frame, 2)
        self._rx_phase = LinkState.SYNCING
        self._rx_open = True
        self._events.append(LogonAccepted(node_id, session))

    def _on_logon_reject(self, frame: tuple[object, ...]) -> None:
        self._expect_logon_answer(frame)
        self._length(frame, 2)
        reason = self._text(frame, 1, "reason")
        self._rx_done = True
        self._events.append(LogonRejected(reason))

    def _expect_logon_answer(self, frame: tuple[object, ...]) -> None:
        name = FrameType(frame[0]).name  # type: ignore[arg-type]
        if self.side is Side.SERVER:
            raise _Reject(
                f"the client sent {name}; only a server answers LOGON", "unexpected frame"
            )
        if self._rx_phase is not LinkState.LOGON_SENT:
            raise _Reject(
                f"{name} arrived while the logon is {self._rx_phase.name}; it answers "
                "exactly one LOGON",
                "unexpected frame",
            )

    def _on_logon_complete(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 1)
        if self._rx_complete:
            raise _Reject("duplicate LOGON_COMPLETE", "duplicate LOGON_COMPLETE")
        self._rx_complete = True
        self._events.append(LogonComplete())

    def _on_logoff(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 2)
        reason = self._text(frame, 1, "reason")
        self._rx_done = True
        self._events.append(LogoffReceived(reason))

    def _on_receipt(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 2)
        received = self._uint(frame, 1, "received count")
        if received > _MAX_COUNT:
            raise self._malformed(frame, f"received count {received} is above 2**64-1")
        if self._rx_complete:
            raise _Reject(
                "RECEIPT after LOGON_COMPLETE; it belongs to the logon", "RECEIPT after logon"
            )
        if self._rx_receipt:
            raise _Reject("duplicate RECEIPT", "duplicate RECEIPT")
        self._rx_receipt = True
        self._events.append(ReceiptReceived(received))

    def _on_heartbeat(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 1)
        self.counters.heartbeats_in += 1
        self._queue((_HEARTBEAT_REPLY,), "heartbeat reply")

    def _on_heartbeat_reply(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 1)  # receiving it was the point: activity is recorded

    def _on_key_def(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 4)
        kid = self._uint(frame, 1, "key id")
        if kid > _MAX_KEY_ID:
            raise self._malformed(frame, f"key id {kid} is above {_MAX_KEY_ID}")
        type_name = self._text(frame, 2, "type name")
        subject = self._text(frame, 3, "subject")
        if not type_name:
            raise self._malformed(frame, "type name is empty")
        if kid in self._in_keys or kid in self._in_unknown:
            raise _Reject(f"the peer defined key id {kid} twice", "duplicate key id")
        if len(self._in_keys) + len(self._in_unknown) >= self.settings.max_peer_keys:
            raise _Reject(
                f"the peer defined more than max_peer_keys={self.settings.max_peer_keys} "
                "keys on one link",
                "too many keys",
            )
        key = (type_name, subject)
        if self._is_known_type(type_name):
            self._in_keys[kid] = key
        else:
            self._in_unknown[kid] = key

    # ------------------------------------------------------------ sequenced frames

    def _on_advertise(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 6)
        key = self._key(frame, 2)
        role = self._role(frame, 3, _OFFER_ROLES)
        value = frame[4]
        scope = _REMOTE_SCOPES.get(value) if type(value) is int else None
        if scope is None:
            raise self._malformed(
                frame,
                f"scope is {_show(value)}, expected LOCAL_AND_REMOTE=1 or REMOTE_ONLY=2",
            )
        up = self._flag(frame, 5, "feed state")
        if self._in_sequence(frame):
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(Advertised(key, role, scope, _FEED_STATES[up]))

    def _on_retract(self, frame: tuple[object, ...]) -> None:
        self._role_frame(frame, _OFFER_ROLES, Retracted)

    def _on_subscribe(self, frame: tuple[object, ...]) -> None:
        self._role_frame(frame, _INTEREST_ROLES, Subscribed)

    def _on_unsubscribe(self, frame: tuple[object, ...]) -> None:
        self._role_frame(frame, _INTEREST_ROLES, Unsubscribed)

    def _role_frame(
        self,
        frame: tuple[object, ...],
        allowed: dict[int, Role],
        event: type[Retracted | Subscribed | Unsubscribed],
    ) -> None:
        self._length(frame, 4)
        key = self._key(frame, 2)
        role = self._role(frame, 3, allowed)
        if self._in_sequence(frame):
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(event(key, role))

    def _on_feed_status(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 5)
        key = self._key(frame, 2)
        role = self._role(frame, 3, _ALL_ROLES)
        up = self._flag(frame, 4, "up")
        if self._in_sequence(frame):
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._events.append(FeedStatusReceived(key, role, up))

    def _on_notify(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 4)
        key = self._key(frame, 2)
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            if key is None:
                self.counters.unknown_type += 1
            else:
                self._queue_notification(key, frame[3])

    def _on_notify_run(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 4)
        key = self._key(frame, 2)
        bodies = frame[3]
        if type(bodies) is not tuple or not bodies:
            raise self._malformed(
                frame, f"the bodies are {_show(bodies)}, expected a non-empty array"
            )
        seq = frame[1]
        if type(seq) is not int or seq < 1:
            raise self._malformed(frame, f"seq is {_show(seq)}, expected an int >= 1")
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

    def _on_request(self, frame: tuple[object, ...]) -> None:
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

    def _on_request_ack(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 4)
        request_id = self._uint(frame, 2, "request id")
        repliers = self._uint(frame, 3, "repliers")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            self._events.append(RequestAcknowledged(request_id, repliers))

    def _on_reply(self, frame: tuple[object, ...]) -> None:
        if len(frame) != 7:
            self._length(frame, 6)
        key = self._key(frame, 2)
        request_id = self._uint(frame, 3, "request id")
        repliers = self._uint(frame, 6, "repliers") if len(frame) == 7 else None
        value = frame[4]
        status = _STATUSES.get(value) if type(value) is int else None
        if status is None:
            raise self._malformed(frame, f"status is {_show(value)}, expected 0, 1 or 2")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            if key is None:
                # Counted, but delivered: see ReplyReceived.
                self.counters.unknown_type += 1
                key = self._in_unknown[frame[2]]  # type: ignore[index]
            self._events.append(ReplyReceived(request_id, key, status, frame[5], repliers))

    def _on_cancel(self, frame: tuple[object, ...]) -> None:
        self._length(frame, 3)
        request_id = self._uint(frame, 2, "request id")
        if self._in_sequence(frame):
            self.counters.messages_in += 1
            self._events.append(CancelReceived(request_id))

    def _queue_notification(self, key: WireKey, body: WireValue) -> None:
        """Queue a notification: onto the newest run if it is on ``key``."""
        events = self._events
        if events:
            last = events[-1]
            if last.__class__ is _Run and last.key is key:
                last.append(body)
                return
        run = _Run((body,))
        run.key = key
        events.append(run)
