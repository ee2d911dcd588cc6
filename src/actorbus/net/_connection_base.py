"""What the parts of one TCP connection share: its state (declared here, set by
the constructor in :mod:`~actorbus.net._connection`), the pending-item opcodes,
how a connection may end, and the write lock.

A connection is one class assembled from mixins, one module each:
:mod:`~actorbus.net._outbound` (what the router sends), on which
:mod:`~actorbus.net._inbound` (what the peer sends) builds, on which
:mod:`~actorbus.net._connection` (asyncio callbacks, logon, timers, ending)
builds.  They share the attributes below.

**The write lock** (``wlock``, re-entrant) is held by the loop thread in every
callback that touches the protocol object or writes to the socket (the
:func:`locked` methods), and by a thread writing a request or reply itself
(``_write_at_once``), which only *tries* it: no thread ever waits on it while
holding the router's lock.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from .._log import logger
from ..bus.message import MessageKey
from ..bus.party import RemoteParty
from ..bus.sender import Sender
from .protocol import LinkProtocol, WireKey

if TYPE_CHECKING:
    from .link import Link
    from .node import NodeNet

__all__ = [
    "ABORT",
    "CLOSE",
    "DATA_OPS",
    "OP_ADVERTISE",
    "OP_BODIES",
    "OP_CANCEL",
    "OP_FEED_STATUS",
    "OP_GROUP",
    "OP_GROUP_NOTIFY",
    "OP_REPLY",
    "OP_REPLY_ACKED",
    "OP_REQUEST",
    "OP_REQUEST_ACK",
    "OP_RETRACT",
    "OP_ROUTE",
    "OP_ROUTED",
    "OP_SUBSCRIBE",
    "OP_SUBSCRIBE_PATTERN",
    "OP_UNSUBSCRIBE",
    "OP_UNSUBSCRIBE_PATTERN",
    "ORDERLY",
    "TELL",
    "ConnectionBase",
    "locked",
]

# How a connection's socket is closed when it ends.
#: TCP states (``TCP_INFO``, Linux's numbers) of a connection that can carry
#: nothing more: TIME_WAIT, CLOSE (after a reset), CLOSE_WAIT, LAST_ACK.
_TCP_GONE: Final = frozenset({6, 7, 8, 9})

ORDERLY: Final = "orderly"  # we logged off: send everything queued, then close
TELL: Final = "tell"  # the protocol queued a LOGOFF/REJECT saying why: send it, then close
CLOSE: Final = "close"  # the peer is done (logoff, EOF): drop what is queued, close
ABORT: Final = "abort"  # the socket is stuck or broken: drop what is queued, reset

# Pending-item opcodes (a notification is queued as the message itself; every
# other item is a tuple ``(op, ...)``).
OP_ADVERTISE: Final = 1
OP_RETRACT: Final = 2
OP_FEED_STATUS: Final = 3
OP_SUBSCRIBE: Final = 4
OP_UNSUBSCRIBE: Final = 5
OP_REQUEST: Final = 6
OP_REQUEST_ACK: Final = 7
OP_REPLY: Final = 8
OP_CANCEL: Final = 9
#: a reply with the acknowledgement that was pending just before it (made by
#: _drain and _write_now only, never pending): one REPLY frame carries both
OP_REPLY_ACKED: Final = 10
# wildcard interest and queue groups (a GROUP_NOTIFY item is a data message)
OP_SUBSCRIBE_PATTERN: Final = 11
OP_UNSUBSCRIBE_PATTERN: Final = 12
OP_GROUP: Final = 13
OP_GROUP_NOTIFY: Final = 14
#: a source-routed message (bus/routed.py), a data message
OP_ROUTED: Final = 16
#: this node's place in the forwarding tree (ROUTE)
OP_ROUTE: Final = 15
#: a run of notifications on one key as their wire bodies (a forwarder's
#: pass-through, net/_passthrough.py): (OP_BODIES, wire key, [body, ...])
OP_BODIES: Final = 17
#: opcodes of data messages (those the queue limit and the dropped counter count;
#: a notification, queued as the message itself, is one too).
DATA_OPS: Final = frozenset(
    {OP_REQUEST, OP_REQUEST_ACK, OP_REPLY, OP_CANCEL, OP_GROUP_NOTIFY, OP_ROUTED, OP_BODIES}
)

_F = TypeVar("_F", bound=Callable[..., Any])


def locked(method: _F) -> _F:
    """(loop) Run a connection method holding the connection's write lock."""

    @functools.wraps(method)
    def with_lock(self: ConnectionBase, *args: Any) -> Any:
        with self.wlock:
            return method(self, *args)

    return cast(_F, with_lock)


class ConnectionBase(asyncio.BufferedProtocol):
    """The state of one TCP connection of a link."""

    link: Link
    net: NodeNet
    loop: asyncio.AbstractEventLoop
    name: str
    #: items the router sent, not encoded yet (any thread appends; the loop, or a
    #: thread holding wlock, pops)
    pending: deque[Any]
    #: a flush is scheduled (or the loop is inside ``buffer_updated``).
    scheduled: bool
    #: sends are accepted (False once the connection ended).
    open: bool
    ended: bool
    #: the socket is gone (connection_lost ran)
    lost: bool
    #: the transport asked us to stop writing (pause_writing)
    paused: bool
    #: reading stopped for input back-pressure (see LinkSettings.input_backlog)
    reading_paused: bool
    input_pauses: int
    backlog_timer: asyncio.TimerHandle | None
    _keepalive_at: float
    logged_on: bool
    peer: str | None
    #: the peer's run id, once this connection claimed the peer
    peer_run_id: str | None
    party: RemoteParty | None
    proto: LinkProtocol | None
    transport: asyncio.Transport | None
    address: str
    #: called once the socket is closed (connection_lost) or never opened.
    on_closed: list[Callable[[], object]]
    corrupt: int
    unknown: int
    refused_logons: int
    #: the unknown type names already reported (made at the first)
    _unknown_logged: set[str] | None
    keys: dict[WireKey, MessageKey | None]
    sent_from: Sender | None
    sent_by: Sender | None
    #: ``(decode, key)`` of notifications by wire key, for the hot path (filled
    #: on first use): the class's compiled decoder and the bus key, resolved once
    notified: dict[WireKey, tuple[Callable[[Any], Any], MessageKey]]
    #: the compiled decoders of the request and of the reply keys the event path
    #: resolved: the protocol's data sinks decode with them (``_take_request``)
    request_decoders: dict[WireKey, Callable[[Any], Any]]
    reply_decoders: dict[WireKey, Callable[[Any], Any]]
    #: ``(hold, release)`` of the bus's delivery batching (bus/party.py), taken
    #: around every read
    hold_deliveries: Callable[[], bool]
    release_deliveries: Callable[[], None]
    timer: asyncio.TimerHandle | None
    timer_at: float | None
    #: acknowledgements wait on this timer for a reply to share their frame
    ack_timer: asyncio.TimerHandle | None
    #: (loop time) when the oldest acknowledgement pending was queued; None
    #: once a drain emptied ``pending`` (under wlock, on any thread)
    acks_since: float | None
    _unexpected_party: RemoteParty | None
    #: the read buffer (asyncio.BufferedProtocol)
    view: memoryview
    _call_soon_threadsafe: Callable[..., object]
    _call_soon: Callable[..., object]
    #: the loop's thread: a send made there (by an actor on an asyncio dispatcher
    #: that shares the loop) schedules its flush without waking the loop
    _loop_ident: int | None
    #: the asyncio dispatcher whose loop the I/O thread shares (its actors run on
    #: this thread), or None: the I/O thread has its own loop
    shared: Any
    #: while reading is paused for input back-pressure, how often to look again
    _recheck_delay: float
    #: keys of the notifications the batch being handled delivered
    touched: set[MessageKey]
    #: while reading is paused: the mailboxes that must drain below half the limit
    watched: list[Any]
    #: the write lock (see the module docstring)
    wlock: threading.RLock
    #: a dup of the socket's descriptor for direct writes (-1: none / closed)
    wfd: int
    #: the socket is TCP: direct writes may open ``wfd`` (on the loop, once asked)
    direct_ok: bool
    #: a request or reply found no ``wfd``: the loop opens it at its next flush
    want_wfd: bool
    #: (frames, bytes) of the protocol's output counted so far while paused
    queued: tuple[int, int]
    #: bytes per pending item, from what waited when last measured: what the
    #: items still pending (not yet encoded) are counted at
    item_bytes: int
    #: items taken from ``pending`` so far (for ``item_bytes``)
    popped: int
    #: times this connection was closed over an output queue limit
    limit_closes: int
    #: publisher back-pressure: the output queue's high-water mark (bytes, 0 =
    #: never), its mark in data messages (half of ``message_queue_size``; 0 =
    #: none), whether it is over either now, and how many times it went over
    high_water: int
    high_water_messages: int
    congested: bool
    congestions: int
    #: the timer that resets a closing socket whose peer did not close its
    #: side within the grace (cancelled once the socket is closed)
    grace_timer: asyncio.TimerHandle | None
    #: bytes a direct write could not write at once; the loop writes them first
    tail: bytes
    #: requests and replies written by their sending thread; how many of those
    #: writes the socket took only in part (the loop wrote the rest)
    direct_writes: int
    direct_partial: int
    #: the logger bound to the link's name, made at its first use (most
    #: connections never log through it)
    _bound_log: Any

    def _init_state(self, link: Link, net: NodeNet) -> None:
        """Set every attribute above to its value before the socket opens."""
        self.link = link
        self.net = net
        selector = link.selector
        self.loop = selector.loop
        self.name = link.name
        self.pending = deque()
        self.scheduled = False
        self.open = True
        self.ended = False
        self.lost = False
        self.paused = False
        self.reading_paused = False
        self.input_pauses = 0
        self.backlog_timer = None
        self._keepalive_at = 0.0
        self.logged_on = False
        self.peer = None
        self.peer_run_id = None
        self.party = None
        self.proto = None
        self.transport = None
        self.address = link.address
        self.on_closed = []
        self.corrupt = 0
        self.unknown = 0
        self.refused_logons = 0
        self._unknown_logged = None
        self.keys = {}
        #: the Sender named by the last SENDER frame written / read on this
        #: connection (each direction starts with none)
        self.sent_from = None
        self.sent_by = None
        self.notified = {}
        self.request_decoders = {}
        self.reply_decoders = {}
        self.hold_deliveries = net.router.hold_deliveries
        self.release_deliveries = net.router.release_deliveries
        self.timer = None
        self.timer_at = None
        self.ack_timer = None
        self.grace_timer = None
        self.acks_since = None
        self._unexpected_party = None
        self._call_soon_threadsafe = self.loop.call_soon_threadsafe
        self._call_soon = self.loop.call_soon
        self._loop_ident = selector.ident
        self.shared = selector.dispatcher
        self.touched = set()
        self.watched = []
        self.wlock = threading.RLock()
        self.wfd = -1
        self.direct_ok = False
        self.want_wfd = False
        self.queued = (0, 0)
        self.item_bytes = 0
        self.popped = 0
        self.limit_closes = 0
        self.high_water = link.settings.high_water
        self.high_water_messages = link.settings.high_water_messages
        self.congested = False
        self.congestions = 0
        self.tail = b""
        self.direct_writes = 0
        self.direct_partial = 0
        self._bound_log = None

    @property
    def _log(self) -> Any:
        """The logger bound to the link's name (made at the first use)."""
        log = self._bound_log
        if log is None:
            log = self._bound_log = logger.bind(link=self.name)
        return log

    def socket_reset(self) -> bool:
        """(the loop) Whether the TCP connection under this one is gone (the peer
        reset it, or both ends closed) although the transport has not said so:
        a link that stopped reading (input back-pressure) is not told of a reset
        until it reads again.  Asks the kernel (``TCP_INFO``'s state, Linux);
        False where it cannot."""
        transport = self.transport
        if transport is None or self.lost:
            return False
        sock = transport.get_extra_info("socket")
        info = getattr(socket, "TCP_INFO", None)
        if sock is None or info is None:
            return False
        try:
            state = sock.getsockopt(socket.IPPROTO_TCP, info, 1)[0]
        except OSError:
            return True  # (the descriptor is gone)
        return state in _TCP_GONE

    if TYPE_CHECKING:
        # Defined by a later part (_connection.py); called by the earlier ones.

        def _end(self, reason: str, how: str) -> None: ...

        def _arm(self) -> None: ...

        def _congest(self, congested: bool, waiting: str) -> None: ...

        def _logon(self, peer: str, run_id: str) -> bool: ...

        def _receipt(self, received: int) -> None: ...

        def _auth_failed(self, claimed: str) -> None: ...

        def _origin(self) -> str: ...

        def _maybe_logged_on(self) -> None: ...
