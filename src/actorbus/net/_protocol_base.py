"""What every part of :class:`~actorbus.net.protocol.LinkProtocol` shares: its
state (declared here, set by its constructor), the queue items, the handshake
cursors, queueing an encoded frame, and closing.

``LinkProtocol`` is one class assembled from mixins, one module each:
:mod:`~actorbus.net._commands` (feed and data commands),
:mod:`~actorbus.net._frames` (checking each received frame),
:mod:`~actorbus.net._parser` (bytes in: framing and the hot loop) and
:mod:`~actorbus.net.protocol` (the constructor, handshake commands, timers,
taking events).  They share the attributes below, all private to the class.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgpack

from ..config.settings import LinkSettings
from ..errors import LinkClosedError, MessageTooLargeError, ProtocolError, UsageError
from ._events import Event
from ._framing import ENCODE_ERRORS, OverLimit, closed_unpacker
from ._handshake import CAN_SEND, OPEN, SHOWN, ProtocolState, Side, Step
from ._settings import WireCounters
from ._wire import FrameType, WireKey, WireValue

if TYPE_CHECKING:
    from functools import partial

    from ..bus.party import Role

__all__ = [
    "MAX_ACTOR_NAME",
    "MAX_COUNT",
    "MAX_GROUP",
    "MAX_KEY_ID",
    "MAX_REASON",
    "MAX_ROUTE_PATH",
    "MAX_RUN_ID",
    "OUTPUT_CHUNK",
    "Failure",
    "ProtocolBase",
    "QueueItem",
    "Run",
    "check_length",
    "group_problem",
    "kind_of",
    "run_id_problem",
    "show",
    "wire_text",
]

#: Longest run id, in UTF-8 bytes.
MAX_RUN_ID: Final = 64
#: Largest count a RECEIPT (or a request id, or a repliers count) may carry.
MAX_COUNT: Final = (1 << 64) - 1
#: Reasons sent to the peer are cut to this many UTF-8 bytes.
MAX_REASON: Final = 512
#: Largest key id.
MAX_KEY_ID: Final = 0xFFFF_FFFF
#: Longest queue group name, in characters (GROUP, GROUP_NOTIFY).
MAX_GROUP: Final = 256
#: Longest actor name a SENDER frame may carry, in characters.
MAX_ACTOR_NAME: Final = 256
#: Most node ids a ROUTE frame may list (a node's forwarding peers).
MAX_ROUTE_PATH: Final = 255

#: what the output that waits is joined into (``compact_output``)
OUTPUT_CHUNK: Final = 64 * 1024
_LOGON_REJECT: Final = int(FrameType.LOGON_REJECT)
_LOGOFF: Final = int(FrameType.LOGOFF)
_KEY_DEF: Final = int(FrameType.KEY_DEF)


#: what the peer-held sets are before the logon is accepted (``_rx_to``)
_NOT_YET: Final[Any] = frozenset()


class Failure:
    """Queued in place of an event: the ProtocolError ``next_event()`` will raise."""

    __slots__ = ("error", "wire_reason")

    def __init__(self, error: ProtocolError, wire_reason: str) -> None:
        self.error = error
        self.wire_reason = wire_reason


class Run(deque[WireValue]):
    """Queued in place of events: the bodies of consecutive notifications on
    one key, in arrival order (the hot path: no object per message).  Only the
    newest queued item may grow, so order across items is kept."""

    __slots__ = ("key",)

    key: WireKey


QueueItem = Event | Failure | Run


def show(value: object, limit: int = 60) -> str:
    """``repr`` of a peer-supplied value, cut short so a log line stays a line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def check_length(text: str, what: str, longest: int) -> None:
    """A type name, subject or pattern the peer sent (``what``) is within the
    link's ``max_subject_length`` (``longest``), or OverLimit."""
    if len(text) > longest:
        raise OverLimit(
            f"the peer sent a {what} of {len(text)} characters ({show(text)}), over "
            f"max_subject_length={longest}; raise max_subject_length on this node if "
            "the peer is trusted and needs longer ones",
            f"{what} too long",
        )


def kind_of(value: object) -> str:
    """The msgpack kind of a decoded value, for messages."""
    return "array" if type(value) is tuple else type(value).__name__


def run_id_problem(run_id: str) -> str | None:
    """Why the str ``run_id`` is not a valid run id, or None ("" is valid)."""
    try:
        size = len(run_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode text"
    if size > MAX_RUN_ID:
        return f"it has {size} UTF-8 bytes, expected at most {MAX_RUN_ID}"
    return None


def group_problem(group: str) -> str | None:
    """Why the str ``group`` is not a queue group name, or None."""
    if not group:
        return "it is empty"
    if len(group) > MAX_GROUP:
        return f"it has {len(group)} characters, expected at most {MAX_GROUP}"
    return None


def wire_text(reason: str) -> str:
    """``reason`` cut to ``MAX_REASON`` UTF-8 bytes, so a closing frame always fits."""
    data = reason.encode("utf-8", "replace")
    if len(data) <= MAX_REASON:
        return reason
    return data[: MAX_REASON - 3].decode("utf-8", "ignore") + "..."


#: The unpacker of every released protocol object (it holds nothing and takes nothing).
_SPENT: Final = closed_unpacker()
#: The unpacker of every protocol object until its first read that is not one
#: whole frame (``Parser._stream``): a real one costs ~40 KiB, msgpack's parse
#: stack, which a connection that never logs on need not hold.
UNSTARTED: Final = closed_unpacker()


def _no_type(type_name: str) -> bool:
    """``is_known_type`` after :meth:`LinkProtocol.release`: nothing is."""
    return False


class ProtocolBase:
    """The state of one end of a link, and the moves every part makes."""

    # -- public (see LinkProtocol); the first four never change
    side: Side
    node_id: str
    run_id: str
    settings: LinkSettings
    peer_run_id: str | None
    counters: WireCounters
    peer_node_id: str | None
    close_reason: str | None
    error: ProtocolError | None

    # -- the handshake: the application's cursor and the parser's (_handshake.py)
    _step: Step
    _rx: Step
    #: ``_step in CAN_SEND``, ``_rx in OPEN`` and ``_rx is CLOSED``: copies for
    #: the hot paths, written only by ``_to()`` / ``_rx_to()``
    _can_send: bool
    _rx_open: bool
    _rx_done: bool
    _is_known_type: Callable[[str], bool]
    _created: float
    #: frame type -> its handler (``FrameChecks``); emptied by ``release``
    _handlers: dict[int, Callable[[Any, tuple[object, ...]], None]]

    # -- the authentication (_auth.py)
    #: the key of a link is the secret of its client node: node id -> key
    _key_for: Callable[[str], bytes | None]
    #: this side's nonce, and the peer's once its LOGON / CHALLENGE is in
    _nonce: bytes
    _peer_nonce: bytes
    #: (server) the node id and run id the client's LOGON claims, unproven
    _claim: tuple[str, str]
    #: (server) the key the client's proof matched, for the server's own proof
    _link_key: bytes

    # -- output
    _out: list[bytes | bytearray]
    #: frames in ``_out`` beyond its length: joined by ``compact_output``
    _joined: int
    _has_output: partial[bool]
    _data_queued: int
    _tx_seq: int
    _out_keys: dict[WireKey, int]
    _pack: Callable[[object], bytes]
    _prefix: Callable[[int], bytes]
    _max_frame: int

    # -- input
    _rx_seq: int
    _in_keys: dict[int, WireKey]
    _in_unknown: dict[int, WireKey]
    _events: deque[QueueItem]
    _has_events: partial[bool]
    _buffer_limit: int
    #: largest frame body accepted now: LOGON_FRAME_LIMIT until the logon is
    #: accepted, max_frame_size after
    _max_in: int
    #: (loop time) when the first bytes of the frame not whole yet arrived, or None
    _partial_since: float | None
    #: what the peer holds on this link: (key id, role) advertisements and
    #: subscriptions, (type name, dialect, pattern) wildcards, (key id, group)
    #: groups; these and ``_routed_ids`` are made when the logon is accepted
    #: (no frame before it uses them): a connection that never logs on holds
    #: none (a burst of connections allocates less that a survivor can keep)
    _in_feeds: set[tuple[int, Role]]
    _in_patterns: set[tuple[str, int, str]]
    _in_groups: set[tuple[int, str]]
    #: node ids of the peer's ROUTED frames already checked (bounded)
    _routed_ids: set[str]
    _unpacker: msgpack.Unpacker
    _ext_hook: Callable[[int, bytes], object] | None
    _buffered: int
    _frame_len: int
    _read_len: Callable[[bytes], tuple[int]]
    _read_len_from: Callable[[bytes | bytearray | memoryview, int], tuple[int]]
    _unpackb: Callable[[bytes | bytearray | memoryview], object]
    #: (request, reply, request_ack) data sinks, or Nones (``deliver_data_to``)
    _sinks: tuple[Callable[..., bool] | None, ...]
    #: the (actor, feed, node, hops) the last SENDER frame sent named (``sender()``)
    _sent_by: tuple[str | None, int, str | None, int] | None
    #: the peer sent a ROUTE frame: it knows the forwarding frames (a forwarded
    #: sender's node and hops go in SENDER)
    peer_routes: bool

    # -- timers
    _idle_since: float
    _last_rx: float
    _hb_sent_at: float | None

    # ------------------------------------------------------------- handshake

    def _to(self, step: Step) -> None:
        """Move the application's cursor."""
        self._step = step
        self._can_send = step in CAN_SEND

    def _hold_nothing_yet(self) -> None:
        """The peer-held sets before the logon is accepted: one shared empty set."""
        self._in_feeds = self._in_patterns = self._in_groups = self._routed_ids = _NOT_YET

    def _rx_to(self, step: Step) -> None:
        """Move the parser's cursor (``_handshake.OPEN`` steps take any frame)."""
        self._rx = step
        self._rx_open = open_ = step in OPEN
        self._rx_done = step is Step.CLOSED
        if open_:
            self._max_in = self._max_frame  # the logon is accepted: frames of any size
            if self._routed_ids is _NOT_YET:
                self._in_feeds = set()
                self._in_patterns = set()
                self._in_groups = set()
                self._routed_ids = set()

    def _closed_error(self, what: str) -> LinkClosedError:
        return LinkClosedError(
            f"{what}() on a closed link ({self.close_reason}); "
            "the link is gone, wait for the shell to reconnect"
        )

    def _refusal(self, state: ProtocolState, what: str) -> LinkClosedError | UsageError:
        """The error for a command allowed only in ``state``, made in another."""
        shown = SHOWN[self._step]
        if shown is ProtocolState.CLOSED:
            return self._closed_error(what)
        return UsageError(
            f"{what}() while the link is {shown.name}; it is allowed only in state {state.name}"
        )

    def _require(self, state: ProtocolState, what: str) -> None:
        """Raise unless the link shows ``state``."""
        if SHOWN[self._step] is not state:
            raise self._refusal(state, what)

    def _check_sending(self, what: str) -> None:
        if self._can_send:
            return
        if self._step is Step.CLOSED:
            raise self._closed_error(what)
        raise UsageError(
            f"{what}() before the logon was accepted (state {SHOWN[self._step].name}); "
            "the server calls accept_logon(), the client waits for LogonAccepted"
        )

    # -------------------------------------------------------------- queueing

    def discard_output(self) -> None:
        """Forget the frames waiting for ``data_to_send()``, neither sent nor
        counted as sent: the shell's connection ended without writing them (it
        counts the data messages among them, ``data_queued``, as dropped).  A
        connection reset at its output queue limit so frees what it held at once
        rather than when the collector gets to the connection."""
        self._out.clear()
        self._data_queued = 0
        self._joined = 0

    def release(self) -> None:
        """The shell is done with this object (its connection ended): drop the
        data sinks and the type check.  They are bound methods of the shell,
        which holds this object, so they make reference cycles, which only the
        cyclic collector frees — late, when a burst of connections has already
        piled up; without them the object and its buffers go when the shell
        lets go.  (The frame handlers are functions, not bound: no cycle; they
        are dropped so that nothing is handled after it.)  Counters and state
        stay readable; nothing may be received after it."""
        self._handlers = {}
        self._sinks = (None, None, None)
        self._is_known_type = _no_type
        # an unpacker costs ~40 KiB (msgpack's parse stack) even when empty
        self._unpacker = _SPENT
        self._buffered = 0

    def compact_output(self, start: int) -> int:
        """Join the frames waiting for ``data_to_send()`` from the ``start``-th
        entry on into chunks of about :data:`OUTPUT_CHUNK` bytes, and return how
        many entries wait now.  A shell that cannot write calls it as the output
        grows, so what waits costs about its wire size in memory rather than an
        object per frame (a 6-byte heartbeat reply is a ~50-byte object and a
        list slot).  The frames of one call are a few hundred bytes: joined on
        their own they would again be small objects, and the interpreter keeps
        the 1 MiB arena of small objects until every one in it is freed (a
        flood left ~20 MiB held so).  So the last chunk stays open (a
        ``bytearray``) and takes the next call's frames until it is full; then
        it is closed as ``bytes`` of exactly its size."""
        out = self._out
        if start and type(out[start - 1]) is bytearray:
            start -= 1  # the open chunk takes the new frames
        rest = out[start:]
        if not rest or (len(rest) == 1 and len(rest[0]) >= OUTPUT_CHUNK):
            return len(out)
        chunk = rest[0] if type(rest[0]) is bytearray else bytearray(rest[0])
        if len(rest) > 1:
            chunk += b"".join(rest[1:])
            self._joined += len(rest) - 1
        del out[start:]
        out.append(bytes(chunk) if len(chunk) >= OUTPUT_CHUNK else chunk)
        return len(out)

    def _queue(self, frame: tuple[object, ...], what: str) -> None:
        self._out.append(self._encode(frame, what))

    def _encode(self, frame: tuple[object, ...], what: str) -> bytes:
        """``frame`` with its length prefix; raises (and queues nothing) when it
        cannot be encoded or is above ``max_frame_size``."""
        try:
            packed: bytes = self._pack(frame)
        except ENCODE_ERRORS as exc:
            raise self._unencodable(what, None, exc) from exc
        size = len(packed)
        if size > self._max_frame:
            raise self._too_large(what, None, size)
        return self._prefix(size) + packed

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

    def _define(self, key: WireKey, kid: int, what: str) -> None:
        """Queue the KEY_DEF of a key used for the first time."""
        self._queue((_KEY_DEF, kid, key[0], key[1]), what)
        self._out_keys[key] = kid

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

    # --------------------------------------------------------------- closing

    def _drop_partial_frame(self) -> None:
        """Forget whatever partial frame was buffered: nothing more is parsed."""
        self._unpacker = _SPENT
        self._buffered = 0
        self._frame_len = -1
        self._partial_since = None

    def _close(self, reason: str) -> None:
        self._to(Step.CLOSED)
        self._rx_to(Step.CLOSED)
        self.close_reason = reason
        self._hb_sent_at = None
        self._drop_partial_frame()

    def _close_telling_peer(self, reason: str, wire_reason: str) -> None:
        """Close after a timeout or a peer error, queueing a frame that says why."""
        awaiting_answer = self.side is Side.SERVER and self._step in (
            Step.IDLE,
            Step.CHALLENGE_SENT,
            Step.LOGON_RECEIVED,
        )
        frame_type = _LOGON_REJECT if awaiting_answer else _LOGOFF
        self._queue((frame_type, wire_text(wire_reason)), "close")
        self._close(reason)
