"""TCP links: the asyncio shell around :class:`~actorbus.net.protocol.LinkProtocol`.

Theory of operation
-------------------
A :class:`Link` is the application's handle on the link to one remote node.  A
client link (made by :meth:`Bus.connect`) lives until it is closed and may
reconnect many times; a link accepted by a service lives for one connection.
Each TCP connection is a *session* (:class:`_Session`): one socket, one
protocol object, one :class:`~actorbus.bus.router.RemoteParty` in the router.
All of a session's work runs on the event loop of the link's selector (an I/O
thread); nothing here runs actor code, except that on a loop shared with an
asyncio dispatcher that dispatcher drains the mailboxes a read made runnable at
the end of the read (see **Inbound**).

**Outbound.**  The session is the router's ``PartyTransport``.  Its ``send_*``
methods are called from any thread (often a dispatcher thread, sometimes under
the router lock): each appends one item to the session's ``pending`` deque and,
if no flush is scheduled yet, schedules one with ``call_soon_threadsafe`` — one
hand-off per batch, not per message.  A send made on the loop's own thread (by
an actor on an asyncio dispatcher whose loop the selector shares) schedules it
with ``call_soon``: no wake-up, no hand-off.  ``_flush`` (on the loop) clears the flag
first, then turns every pending item into a protocol command and writes
``data_to_send()`` once.  A notification is queued as the message object
itself (no wrapper); other items are plain tuples ``(op, ...)``.  While the
session handles received bytes the flag is held set, so replies and
acknowledgements made by the router during that time are written in one go
at the end of the batch.

**Direct writes.**  A request or reply made on a thread other than the
loop's (a requestor or replier on a threaded dispatcher) is written by that
thread itself when the link is idle: nothing is paused or left over, at most a
few items are pending (they are written first, in order), and the transport
has nothing buffered (uvloop's ``get_write_buffer_size()`` counts libuv's write
queue too, so the socket is ours alone).  The thread encodes into the protocol
and calls ``os.write`` on a ``dup`` of the socket's descriptor (the
transport's own may be closed and reused on the loop at any moment; the dup is
closed when the session ends, before the transport closes).  Whatever the
socket does not take at once goes to ``tail``, which the loop writes before
anything else.  Mutual exclusion is the session's re-entrant ``wlock``: the
loop holds it in every callback that touches the protocol or writes, a sending
thread only *tries* it (and queues as above when it is busy), so no thread
ever waits on it while holding the router's lock.  A round trip so skips the
hand-off to the I/O thread on each node (~8-15 % of its p50).

**Inbound.**  ``buffer_updated`` feeds the bytes to the protocol and takes its
events: message bodies are decoded with the codec against classes already
defined in this process (``lookup_type``) and handed to the party, which
enqueues into the subscribers' mailboxes.  On a selector that shares an
asyncio dispatcher's loop the read is bracketed by the dispatcher's
``defer_runs``/``run_deferred``: the mailboxes it made runnable drain at the
end of the read's callback (outside the session lock), and the session then
writes the read's output together with what those actors sent — one loop
iteration and one write per request/reply hop.  A frame that breaks the protocol or
a body that does not decode closes this link (logged, counted as corrupt); the
node keeps serving its other links.

**Flow control and the queue limit.**  When the socket cannot keep up the
transport calls ``pause_writing``; the session then keeps encoding into the
protocol without writing.  The data messages waiting there (notify, request,
request ack, reply, cancel — never link-level frames) are the *output queue*;
past ``message_queue_size`` the connection is aborted, the waiting messages
are dropped and counted, and a client link reconnects if configured.

**Timers.**  The protocol says when it next needs ``tick()``
(``next_deadline()``); one ``call_at`` timer is kept per session and only
moved earlier, never re-armed per received batch.

**Ending.**  Whatever ends a session (logoff either way, EOF, reset, timeout,
protocol error, queue limit, application or node close) goes through
``_Session._end``: messages still pending are counted as dropped (or, for an
orderly close by this node, sent before the LOGOFF), the party is detached
(remote feeds go DOWN, forwarded requests end with ERROR replies), the
one-link claim is released, ``LinkLoggedOff`` is published and the link
decides whether to reconnect.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

from .._log import Throttle, logger, report
from ..actors.dispatcher import hold_wakes, release_wakes
from ..bus import codec
from ..bus.message import (
    Message,
    MessageKey,
    Notification,
    Reply,
    ReplyStatus,
    Request,
    lookup_type,
)
from ..bus.router import RemoteParty
from ..bus.router import Role as BusRole
from ..bus.scope import CAT_REMOTE
from ..bus.system import SYSTEM_SUBJECT, LinkLoggedOff, LinkLoggedOn
from ..errors import CodecError, LinkClosedError, ProtocolError, UsageError
from .protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    Advertised,
    CancelReceived,
    ConnectionClosed,
    Event,
    FeedState,
    FeedStatusReceived,
    HeartbeatTimeout,
    LinkProtocol,
    LinkState,
    LogoffReceived,
    LogonAccepted,
    LogonComplete,
    LogonRejected,
    LogonRequested,
    LogonTimeout,
    NotificationReceived,
    ProtocolSettings,
    ReceiptReceived,
    ReplyReceived,
    RequestAcknowledged,
    RequestReceived,
    Retracted,
    Role,
    Scope,
    SequenceGap,
    Side,
    Subscribed,
    Unsubscribed,
    WireKey,
)

if TYPE_CHECKING:
    from .node import NodeNet, Selector
    from .service import Service

__all__ = ["Link", "LinkSettings", "LinkStats", "LinkStatus"]

#: A reconnecting link waits ``reconnect_delay`` after a loss, doubling after each
#: failed attempt up to this many times the delay (and never more than
#: :data:`MAX_RECONNECT_BACKOFF` seconds, unless the delay itself is longer).
RECONNECT_BACKOFF_FACTOR: Final = 10
#: A link reports its failed dials at most once per this many seconds.
DIAL_REPORT_INTERVAL = 30.0

#: Upper bound of the reconnect back-off, in seconds.
MAX_RECONNECT_BACKOFF: Final = 30.0
#: Smallest read buffer, whatever ``input_buffer_size`` says.
_MIN_READ_BUFFER: Final = 4_096
#: How long an orderly close waits for the socket to drain before aborting it.
_CLOSE_GRACE: Final = 1.0
#: While reading is paused for input back-pressure, the backlog is checked this often (s).
_BACKLOG_RECHECK: Final = 0.005
#: Most pending items encoded per write; more wait for the next turn of the loop.
_MAX_BATCH: Final = 512
#: How long a request acknowledgement waits for a reply to share its write (s).
_ACK_DELAY: Final = 0.001
#: The event loop's timer tick (s): libuv keeps time and timers in whole
#: milliseconds, so a timer asked for ``d`` fires anywhere from ``d - 1 ms`` on,
#: and one asked for less than half a tick runs on the next turn of the loop.
#: The acknowledgement timer asks for a tick more than it needs.
_TICK: Final = 0.001
#: A request or reply is written by the sending thread itself only when at most
#: this many items wait before it (they are written with it).
_DIRECT_MAX_PENDING: Final = 8

_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """(loop) Run a session method holding the session's write lock (see
    "Direct writes" in the module docstring)."""

    @functools.wraps(method)
    def locked(self: _Session, *args: Any) -> Any:
        with self.wlock:
            return method(self, *args)

    return cast(_F, locked)


# Pending-item opcodes (a notification is queued as the message itself).
_ADVERTISE: Final = 1
_RETRACT: Final = 2
_FEED_STATUS: Final = 3
_SUBSCRIBE: Final = 4
_UNSUBSCRIBE: Final = 5
_REQUEST: Final = 6
_REQUEST_ACK: Final = 7
_REPLY: Final = 8
_CANCEL: Final = 9
#: a reply with the acknowledgement that was pending just before it (made by
#: _drain only, never pending): one REPLY frame carries both (protocol 3)
_REPLY_ACKED: Final = 10
#: opcodes of data messages (those the queue limit and the dropped counter count).
_DATA_OPS: Final = frozenset({_REQUEST, _REQUEST_ACK, _REPLY, _CANCEL})

_TO_WIRE_ROLE: Final = {
    BusRole.PUBLISHER: Role.PUBLISHER,
    BusRole.REPLIER: Role.REPLIER,
    BusRole.SUBSCRIBER: Role.SUBSCRIBER,
    BusRole.REQUESTOR: Role.REQUESTOR,
}
_FROM_WIRE_ROLE: Final = {wire: bus for bus, wire in _TO_WIRE_ROLE.items()}
_FAMILY: Final[dict[Role, type[Message]]] = {Role.PUBLISHER: Notification, Role.REPLIER: Request}

_from_wire = codec.from_wire


def _known_message_type(type_name: str) -> bool:
    """The protocol's ``is_known_type``: a message class of that name exists here."""
    cls = lookup_type(type_name)
    return cls is not None and issubclass(cls, Message)


def _wire_key(key: MessageKey) -> WireKey:
    return (key.message_class.__type_name__, key.subject)


# ============================================================== settings, stats


@dataclass(frozen=True, slots=True)
class LinkSettings:
    """Per-link limits and timers (a service's settings apply to every link it
    accepts).  Times are seconds; ``0`` switches a timer off.  Both nodes should
    use the same ``byte_order`` and ``max_frame_size``."""

    #: Send a heartbeat after this long with nothing received; 0 = never.
    heartbeat_delay: float = 0.0
    #: Close the link when nothing arrives this long after a heartbeat; 0 = the
    #: same as ``heartbeat_delay``.
    heartbeat_reply_delay: float = 0.0
    #: Most data messages waiting for a socket that cannot keep up; past it the
    #: link is closed and they are dropped (and counted).  0 = unlimited.
    message_queue_size: int = 0
    #: Bytes read from the socket at a time (the session's read buffer).
    input_buffer_size: int = 65_536
    #: Bytes the transport may hold unsent before it asks the link to pause
    #: (its write-buffer high-water mark).
    output_buffer_size: int = 65_536
    #: Byte order of the 4-byte frame length prefix.
    byte_order: Literal["big", "little"] = "big"
    #: Largest frame accepted or sent, in bytes.
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: Close a connection that has not logged on within this many seconds.
    logon_timeout: float = 30.0
    #: Input back-pressure: when a mailbox (or inbox) the link delivers the peer's
    #: notifications to holds more than this many tasks, the link stops reading
    #: the socket until it is below half of it; TCP then pushes back on the
    #: peer (whose output queue limit drops and counts).  0 = never pause.
    input_backlog: int = 10_000

    def __post_init__(self) -> None:
        for name in ("heartbeat_delay", "heartbeat_reply_delay", "logon_timeout"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not 0 <= value < float("inf"):
                raise UsageError(
                    f"LinkSettings.{name}={value!r}: expected a finite number of seconds >= 0 "
                    "(0 switches the timer off)"
                )
        for name in (
            "message_queue_size",
            "input_buffer_size",
            "output_buffer_size",
            "input_backlog",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise UsageError(f"LinkSettings.{name}={value!r}: expected an int >= 0")
        # ProtocolSettings checks max_frame_size and byte_order with its own words.
        self.protocol_settings()

    def protocol_settings(self) -> ProtocolSettings:
        """The protocol's view of these settings."""
        reply_delay = self.heartbeat_reply_delay or self.heartbeat_delay
        return ProtocolSettings(
            max_frame_size=self.max_frame_size,
            heartbeat_delay=float(self.heartbeat_delay),
            heartbeat_reply_delay=float(reply_delay),
            logon_timeout=float(self.logon_timeout),
            byte_order=self.byte_order,
        )


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Counters of one link, summed over every connection it has had.

    Read them at any time with :attr:`Link.counters`; the numbers of the
    connection in progress are read without stopping it, so two fields may be
    a few messages apart."""

    #: Data messages (notify, request, request ack, reply, cancel) handed to /
    #: parsed from the socket.
    messages_out: int = 0
    messages_in: int = 0
    #: Bytes written to / read from the socket.
    bytes_out: int = 0
    bytes_in: int = 0
    #: Frames of every kind written / read.
    frames_out: int = 0
    frames_in: int = 0
    #: Data messages that never reached the socket: queued when the link died,
    #: over the queue limit, too large to send, or sent to a link already gone.
    dropped: int = 0
    #: Data messages written to a connection that broke and never read by the
    #: peer, learnt from the peer's RECEIPT at the next logon (a peer that
    #: restarted: everything its last receipt did not cover).
    lost: int = 0
    #: Frames that broke the protocol, or message bodies that did not decode.
    corrupt_frames: int = 0
    #: Frames about a message type this node does not define (dropped).
    unknown_types: int = 0
    #: Messages from the peer on keys it never advertised (dropped by the router).
    unexpected: int = 0
    #: Sequence-number gaps and duplicates seen in what the peer sent.
    gaps: int = 0
    duplicates: int = 0
    #: Heartbeats sent / answered.
    heartbeats_out: int = 0
    heartbeats_in: int = 0
    #: TCP connections made (dialled or accepted), and logons completed.
    connections: int = 0
    logons: int = 0
    #: Logons this node refused (one link per pair of nodes, or its own node id).
    refused_logons: int = 0
    #: Dial attempts after the first (a client link that lost or never got its
    #: connection and tried again).
    reconnects: int = 0
    #: Times the link stopped reading because a mailbox or inbox it feeds was over
    #: ``input_backlog`` (input back-pressure).
    input_pauses: int = 0

    def __add__(self, other: LinkStats) -> LinkStats:
        return LinkStats(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


class LinkStatus(Enum):
    """Where a :class:`Link` is in its life."""

    #: dialling (client), or waiting for the session to start (accepted).
    CONNECTING = "connecting"
    #: connected; the logon handshake is running.
    LOGGING_ON = "logging on"
    #: logged on: feeds and messages flow.
    LOGGED_ON = "logged on"
    #: the connection was lost; waiting ``reconnect_delay`` (with back-off) to dial again.
    RECONNECT_WAIT = "waiting to reconnect"
    #: closed for good.
    CLOSED = "closed"


@dataclass(slots=True)
class _Totals:
    """Link-level counts not kept by the protocol (loop thread, plus the lock)."""

    dropped: int = 0
    lost: int = 0
    connections: int = 0
    logons: int = 0
    reconnects: int = 0
    closed: LinkStats = field(default_factory=LinkStats)


# ===================================================================== the link


class Link:
    """The handle on a link to one remote node (see the module docstring).

    Made by :meth:`Bus.connect` (``initiator`` True) or by a service accepting a
    connection.  Thread-safe: read :attr:`status`, :attr:`peer_node` and
    :attr:`counters`, call :meth:`wait_logged_on` and :meth:`close` from any
    thread except the link's own I/O thread."""

    def __init__(
        self,
        net: NodeNet,
        selector: Selector,
        settings: LinkSettings,
        *,
        name: str,
        initiator: bool,
        host: str,
        port: int,
        bind_host: str | None = None,
        bind_port: int = 0,
        reconnect: bool = False,
        reconnect_delay: float = 5.0,
        connect_timeout: float = 10.0,
        service: Service | None = None,
    ) -> None:
        self.name = name
        self.initiator = initiator
        self.settings = settings
        self.selector = selector
        self.reconnect = reconnect
        self.reconnect_delay = reconnect_delay
        #: seconds a dial may go unanswered before it counts as failed (0: the OS's limit).
        self.connect_timeout = connect_timeout
        #: the service that accepted this link (None for a client link).
        self.service = service
        self._net = net
        self._loop = selector.loop
        self._host = host
        self._port = port
        self._local = (bind_host or "", bind_port) if (bind_host or bind_port) else None
        self._cond = threading.Condition()
        self._status = LinkStatus.CONNECTING
        self._peer: str | None = None
        self._address = _endpoint(host, port)
        self._totals = _Totals()
        self._session: _Session | None = None
        self._closing = False
        self._retry: asyncio.TimerHandle | None = None
        self._dialing: asyncio.Task[None] | None = None
        self._failures = 0
        self._last_reason: str | None = None
        #: failed dials are reported at most once per DIAL_REPORT_INTERVAL
        self._dial_reports = Throttle(DIAL_REPORT_INTERVAL)

    def __repr__(self) -> str:
        peer = f" peer={self._peer!r}" if self._peer else ""
        return f"<Link {self.name!r} {self._address}{peer} {self._status.value}>"

    # ------------------------------------------------------------- public view

    @property
    def status(self) -> LinkStatus:
        """Where the link is now."""
        return self._status

    @property
    def is_logged_on(self) -> bool:
        """True while the link is logged on (messages flow)."""
        return self._status is LinkStatus.LOGGED_ON

    @property
    def peer_node(self) -> str | None:
        """The remote node's id, once a logon told it (kept after the link drops)."""
        return self._peer

    @property
    def address(self) -> str:
        """``host:port`` of the remote end."""
        return self._address

    @property
    def last_reason(self) -> str | None:
        """Why the last connection of this link ended (None while it never has)."""
        return self._last_reason

    @property
    def counters(self) -> LinkStats:
        """The link's counters, summed over all its connections."""
        with self._cond:
            totals = self._totals
            session = self._session
            live = session.stats() if session is not None else LinkStats()
            return (
                totals.closed
                + live
                + LinkStats(
                    dropped=totals.dropped,
                    lost=totals.lost,
                    connections=totals.connections,
                    logons=totals.logons,
                    reconnects=totals.reconnects,
                )
            )

    def wait_logged_on(self, timeout: float = 5.0) -> str:
        """Block until the link is logged on; return the peer's node id.

        Raises :class:`~actorbus.LinkClosedError` when the link closed for good
        first (with the reason), ``TimeoutError`` after ``timeout`` seconds."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self._status in (LinkStatus.LOGGED_ON, LinkStatus.CLOSED), timeout
            )
            if self._status is LinkStatus.LOGGED_ON:
                assert self._peer is not None
                return self._peer
            if ok:
                raise LinkClosedError(
                    f"link {self.name!r} to {self._address} closed before logging on: "
                    f"{self._last_reason}"
                )
            raise TimeoutError(
                f"link {self.name!r} to {self._address} not logged on after {timeout:g} s "
                f"(status {self._status.value}; last reason: {self._last_reason}); is the "
                "remote node listening, and does its address filter admit this host?"
            )

    def wait_logons(self, count: int, timeout: float = 5.0) -> None:
        """Block until the link has completed ``count`` logons in total and is
        logged on (reconnect tests use it); TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._totals.logons >= count and self._status is LinkStatus.LOGGED_ON,
                timeout,
            ):
                raise TimeoutError(
                    f"link {self.name!r}: {self._totals.logons} logons after {timeout:g} s, "
                    f"expected {count} (status {self._status.value}; last reason: "
                    f"{self._last_reason})"
                )

    def wait_closed(self, timeout: float = 5.0) -> str | None:
        """Block until the link is closed for good; return the last reason."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._status is LinkStatus.CLOSED, timeout):
                raise TimeoutError(
                    f"link {self.name!r} still {self._status.value} after {timeout:g} s"
                )
            return self._last_reason

    def close(self, reason: str = "closed by the application", timeout: float = 5.0) -> None:
        """Log off (telling the peer ``reason``), stop reconnecting, and wait up to
        ``timeout`` seconds for the connection to close.  Idempotent."""
        if self.selector.on_loop_thread():
            raise UsageError(
                f"Link.close() on link {self.name!r} from its own I/O thread would wait "
                "for itself; call it from another thread"
            )
        done = threading.Event()
        if not self.selector.call(self._close_on_loop, reason, done.set):
            return  # the selector already stopped: nothing is running
        if not done.wait(timeout):
            logger.warning(
                "link {}: not closed within {:g} s; it is aborted when the node closes",
                self.name,
                timeout,
            )

    # ------------------------------------------------------------ loop thread

    def _start(self) -> None:
        """(loop) Dial (client links)."""
        if self.initiator:
            self._dial()

    def _dial(self) -> None:
        self._retry = None
        if self._closing:
            return
        self._set_status(LinkStatus.CONNECTING)
        self._dialing = self._loop.create_task(self._connect())

    async def _connect(self) -> None:
        session = _Session(self)
        timeout = self.connect_timeout or None
        try:
            await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: session, self._host, self._port, local_addr=self._local
                ),
                timeout,
            )
        except OSError as exc:  # (TimeoutError included: ours or the OS's)
            reason = f"cannot connect to {self._address}: {_dial_failure(exc, timeout)}"
            self._report_dial_failure(reason)
            self._session_over(None, reason)
            if not self.reconnect and not self._closing:
                self._net._link_failed(self, reason)
        except asyncio.CancelledError:
            self._session_over(None, "closed while connecting")
            raise
        finally:
            self._dialing = None

    def _report_dial_failure(self, reason: str) -> None:
        """(loop) Say why a dial failed, at WARNING (visible by default), at most
        once per DIAL_REPORT_INTERVAL per link, with how many were held back."""
        held = self._dial_reports.allow("dial")
        if held is None:
            return
        more = f" ({held} more failed attempts since the last report)" if held else ""
        then = (
            f"retrying every {self.reconnect_delay:g} s or more (back-off)"
            if self.reconnect
            else "not retrying: the link is closed (set reconnect to retry)"
        )
        report("WARNING", f"link {self.name}: {reason}; {then}{more}", link=self.name)

    def _adopt(self, sock: socket.socket) -> None:
        """(loop) Start a session on a socket a service accepted."""
        self._dialing = self._loop.create_task(self._adopt_socket(sock))

    async def _adopt_socket(self, sock: socket.socket) -> None:
        session = _Session(self)
        try:
            await self._loop.connect_accepted_socket(lambda: session, sock)
        except OSError as exc:
            sock.close()
            self._session_over(None, f"accepted connection failed: {exc.strerror or exc}")
        except asyncio.CancelledError:
            sock.close()
            self._session_over(None, "closed while connecting")
            raise
        finally:
            self._dialing = None

    def _close_on_loop(self, reason: str, done: Callable[[], object]) -> None:
        self._closing = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        session = self._session
        if session is not None and not session.ended:
            session.on_closed.append(done)
            session.logoff(reason)
            return
        if self._dialing is not None:
            self._dialing.cancel()
        if self._status is not LinkStatus.CLOSED:
            self._last_reason = self._last_reason or reason
            self._set_status(LinkStatus.CLOSED)
            self._net._forget(self)
        done()

    def _set_status(self, status: LinkStatus) -> None:
        with self._cond:
            self._status = status
            self._cond.notify_all()

    def _session_started(self, session: _Session, address: str) -> None:
        with self._cond:
            self._session = session
            self._address = address
            self._totals.connections += 1
        self._set_status(LinkStatus.LOGGING_ON)

    def _logged_on(self, peer: str) -> None:
        self._failures = 0
        with self._cond:
            self._peer = peer
            self._totals.logons += 1
            self._status = LinkStatus.LOGGED_ON
            self._cond.notify_all()

    def _session_over(self, session: _Session | None, reason: str) -> None:
        """(loop) A session ended (or a dial failed): count, then reconnect or close."""
        with self._cond:
            if session is not None:
                totals = self._totals
                totals.closed = totals.closed + session.stats()
                if self._session is session:
                    self._session = None
            self._last_reason = reason
        if self.reconnect and self.initiator and not self._closing and not self._net.closing:
            delay = self._backoff()
            self._failures += 1
            with self._cond:
                self._totals.reconnects += 1
            logger.bind(link=self.name).info(
                "link {}: reconnecting to {}:{} in {:.3f} s",
                self.name,
                self._host,
                self._port,
                delay,
            )
            self._set_status(LinkStatus.RECONNECT_WAIT)
            self._retry = self._loop.call_later(delay, self._dial)
            return
        self._set_status(LinkStatus.CLOSED)
        self._net._forget(self)

    def _backoff(self) -> float:
        base = self.reconnect_delay
        cap = max(base, min(base * RECONNECT_BACKOFF_FACTOR, MAX_RECONNECT_BACKOFF))
        return float(min(base * (2 ** min(self._failures, 32)), cap))

    def _count_lost(self, n: int) -> None:
        if n:
            with self._cond:
                self._totals.lost += n

    def _count_dropped(self, n: int) -> None:
        if n:
            with self._cond:
                self._totals.dropped += n


# ================================================================== the session

# How a session's socket is closed when it ends.
_ORDERLY: Final = "orderly"  # we logged off: send everything queued, then close
_TELL: Final = "tell"  # the protocol queued a LOGOFF/REJECT saying why: send it, then close
_CLOSE: Final = "close"  # the peer is done (logoff, EOF): drop what is queued, close
_ABORT: Final = "abort"  # the socket is stuck or broken: drop what is queued, reset


class _Session(asyncio.BufferedProtocol):
    """One TCP connection of a link: protocol object, socket, remote party.

    Everything except the ``send_*`` methods and :meth:`stats` runs on the
    link's loop thread."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.loop = link._loop
        self.name = link.name
        self.pending: deque[Any] = deque()
        #: a flush is scheduled (or the loop is inside ``buffer_updated``).
        self.scheduled = False
        #: sends are accepted (False once the session ended).
        self.open = True
        self.ended = False
        self.lost = False
        self.paused = False
        #: reading stopped for input back-pressure (see LinkSettings.input_backlog)
        self.reading_paused = False
        self.input_pauses = 0
        self.backlog_timer: asyncio.TimerHandle | None = None
        self._keepalive_at = 0.0
        self.logged_on = False
        self.peer: str | None = None
        #: the peer's session id, once this connection claimed the peer
        self.peer_session: str | None = None
        self.party: RemoteParty | None = None
        self.proto: LinkProtocol | None = None
        self.transport: asyncio.Transport | None = None
        self.address = link._address
        #: called once the socket is closed (connection_lost) or never opened.
        self.on_closed: list[Callable[[], object]] = []
        self.corrupt = 0
        self.unknown = 0
        self.refused_logons = 0
        self._unknown_logged: set[str] = set()
        self.keys: dict[WireKey, MessageKey | None] = {}
        #: ``(decode, key)`` of notifications by wire key, for the hot path (filled
        #: on first use): the class's compiled decoder and the bus key, resolved once
        self.notified: dict[WireKey, tuple[Callable[[Any], Any], MessageKey]] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: float | None = None
        #: acknowledgements wait on this timer for a reply to share their frame
        self.ack_timer: asyncio.TimerHandle | None = None
        #: (loop time) when the oldest acknowledgement pending was queued; None
        #: once a drain emptied ``pending`` (under wlock, on any thread)
        self.acks_since: float | None = None
        self._unexpected_party: RemoteParty | None = None
        size = max(link.settings.input_buffer_size, _MIN_READ_BUFFER)
        self.view = memoryview(bytearray(size))
        self._call_soon_threadsafe = self.loop.call_soon_threadsafe
        self._call_soon = self.loop.call_soon
        #: the loop's thread: a send made there (by an actor on an asyncio dispatcher
        #: that shares the loop) schedules its flush without waking the loop
        self._loop_ident = link.selector._ident
        #: the asyncio dispatcher whose loop the selector shares (its actors run on
        #: this thread), or None: the selector has its own I/O thread
        self.shared = link.selector.dispatcher
        #: while reading is paused for input back-pressure, how often to look again:
        #: on a loop shared with the actors' dispatcher, right after the mailbox
        #: runs this loop has scheduled (they drain on this very thread)
        self._recheck_delay = 0.0 if self.shared is not None else _BACKLOG_RECHECK
        #: keys of the notifications the batch being handled delivered
        self.touched: set[MessageKey] = set()
        #: while reading is paused: the mailboxes that must drain below half the limit
        self.watched: list[Any] = []
        #: held by the loop thread whenever it uses the protocol or writes, and by a
        #: thread writing a request or reply itself (re-entrant: loop code nests)
        self.wlock = threading.RLock()
        #: a dup of the socket's descriptor for direct writes (-1: none / closed)
        self.wfd = -1
        #: bytes a direct write could not write at once; the loop writes them first
        self.tail = b""
        #: requests and replies written by their sending thread; how many of those
        #: writes the socket took only in part (the loop wrote the rest)
        self.direct_writes = 0
        self.direct_partial = 0
        self._log = logger.bind(link=link.name)

    def stats(self) -> LinkStats:
        """Counters of this connection (any thread)."""
        proto = self.proto
        if proto is None:
            return LinkStats()
        c = proto.counters
        party = self._unexpected_party
        return LinkStats(
            messages_out=c.messages_out,
            messages_in=c.messages_in,
            bytes_out=c.bytes_out,
            bytes_in=c.bytes_in,
            frames_out=c.frames_out,
            frames_in=c.frames_in,
            corrupt_frames=c.corrupt_frames + self.corrupt,
            unknown_types=c.unknown_type + self.unknown,
            unexpected=party.unexpected if party is not None else 0,
            gaps=c.gaps,
            duplicates=c.duplicates,
            heartbeats_out=c.heartbeats_out,
            heartbeats_in=c.heartbeats_in,
            refused_logons=self.refused_logons,
            input_pauses=self.input_pauses,
        )

    def _known_type(self, type_name: str) -> bool:
        """The protocol's ``is_known_type``, asked once per key the peer defines."""
        if _known_message_type(type_name):
            return True
        self._unknown_type(type_name, "a type this node does not define")
        return False

    def _unknown_type(self, type_name: str, why: str) -> None:
        """Log once per link and type name why its frames are dropped."""
        if type_name in self._unknown_logged:
            return
        self._unknown_logged.add(type_name)
        self._log.warning(
            "link {}: node {} sends {} messages, {}; they are dropped and counted (unknown_types)",
            self.name,
            self.peer,
            type_name,
            why,
        )

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
                    self.link._count_dropped(1)
        else:
            self.link._count_dropped(1)

    def _push(self, item: tuple[Any, ...], data: bool) -> None:
        if self.open:
            self.pending.append(item)
            if not self.scheduled:
                self.scheduled = True
                try:
                    self._schedule_flush()
                except RuntimeError:
                    if data:
                        self.link._count_dropped(1)
        elif data:
            self.link._count_dropped(1)

    def _schedule_flush(self) -> None:
        """Run ``_flush`` on the loop soon: without a wake-up when called on the
        loop's own thread (an actor on a dispatcher sharing the loop).  Raises
        RuntimeError when the loop is closed."""
        if get_ident() == self._loop_ident:
            self._call_soon(self._flush)
        else:
            self._call_soon_threadsafe(self._flush)

    def send_advertise(self, key: MessageKey, role: BusRole, up: bool) -> None:
        self._push((_ADVERTISE, key, role, up), False)

    def send_retract(self, key: MessageKey, role: BusRole) -> None:
        self._push((_RETRACT, key, role), False)

    def send_feed_status(self, key: MessageKey, role: BusRole, up: bool) -> None:
        self._push((_FEED_STATUS, key, role, up), False)

    def send_subscribe(self, key: MessageKey) -> None:
        self._push((_SUBSCRIBE, key), False)

    def send_unsubscribe(self, key: MessageKey) -> None:
        self._push((_UNSUBSCRIBE, key), False)

    def send_request(self, request_id: int, message: Message) -> None:
        item = (_REQUEST, request_id, message)
        # (on the loop's own thread there is no direct write: skip its call)
        if get_ident() == self._loop_ident or not self._write_now(item):
            self._push(item, True)

    def send_request_ack(self, request_id: int, taken: int) -> None:
        self._push((_REQUEST_ACK, request_id, taken), True)

    def send_reply(self, request_id: int, reply: Reply) -> None:
        item = (_REPLY, request_id, reply)
        if get_ident() == self._loop_ident or not self._write_now(item):
            self._push(item, True)

    def _write_now(self, item: tuple[Any, ...]) -> bool:
        """(a thread other than the loop's) Encode ``item`` — after the few items
        pending before it — and write it to the socket on this thread, when the
        link is idle; False (the caller queues it) when it is not, or the loop
        holds the session."""
        if self.wfd < 0:  # (the callers made sure this is not the loop's thread)
            return False
        wlock = self.wlock
        if not wlock.acquire(blocking=False):
            return False
        try:
            proto, transport = self.proto, self.transport
            if (
                self.wfd < 0
                or not self.open
                or self.paused
                or self.tail
                or proto is None
                or transport is None
                or not proto._sending  # (state in _SENDING, without the property)
                or len(self.pending) > _DIRECT_MAX_PENDING
                or transport.is_closing()
                or transport.get_write_buffer_size()
            ):
                return False
            pending = self.pending
            if not pending:
                first = item  # the usual case, a request: nothing waits before it
            elif (
                len(pending) == 1
                and item[0] == _REPLY
                and (ack := pending[0]).__class__ is tuple
                and ack[0] == _REQUEST_ACK
                and ack[1] == item[1]
            ):
                # the usual reply: its own acknowledgement waits, and goes with it
                pending.popleft()
                self.acks_since = None
                first = (_REPLY_ACKED, item[1], item[2], ack[2])
            else:
                first = None
            if first is not None:  # _drain's work for one item, without its loop
                try:
                    self._command(proto, first)
                except (CodecError, UsageError) as exc:
                    self._unsendable(first, exc)  # queues a stand-in reply, if one
            else:
                pending.append(item)
                self._drain(proto)  # what waited before it, then the item
            if pending:  # a stand-in for a reply that could not be encoded
                self._drain(proto)
            data = proto.data_to_send()
            if data:
                self._write_direct(data)
            self.direct_writes += 1
            return True
        finally:
            wlock.release()

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

    def _take_tail(self, data: bytes) -> bytes:
        """(loop, holding wlock) ``data`` behind what a direct write left over."""
        tail = self.tail
        if tail:
            self.tail = b""
            return tail + data
        return data

    def _close_wfd(self) -> None:
        """(holding wlock) No more direct writes: close the descriptor's dup."""
        fd, self.wfd = self.wfd, -1
        if fd >= 0:
            os.close(fd)

    def send_cancel(self, request_id: int) -> None:
        self._push((_CANCEL, request_id), True)

    # ------------------------------------------------------------ asyncio side

    @_locked
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        link = self.link
        settings = link.settings
        transport.set_write_buffer_limits(high=settings.output_buffer_size)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # Small frames must leave at once (Nagle + delayed ACK = 40 ms stalls).
            # uvloop sets it; asyncio skips sockets that accept() made.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Requests and replies made on other threads may be written from there
            # (when the link is idle) through a descriptor of our own: the
            # transport's may be closed and reused on the loop at any time.
            self.wfd = os.dup(sock.fileno())
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple) and len(peername) >= 2:
            self.address = _endpoint(peername[0], peername[1])
        side = Side.CLIENT if link.initiator else Side.SERVER
        self.proto = LinkProtocol(
            side,
            link._net.node_id,
            self.loop.time(),
            is_known_type=self._known_type,
            settings=settings.protocol_settings(),
            # nested structs of a subclass travel as ext values the codec reads;
            # one that does not is a corrupt frame (the link closes, it is counted)
            ext_hook=codec.ext_hook,
            # ints beyond 64 bits travel in the codec's wire form (bytes), as in
            # the journal: the receiving codec turns them back into ints
            pack_default=codec.pack_default,
            session_id=link._net.session_id,
        )
        link._session_started(self, self.address)
        if link._closing or link._net.closing:
            self.proto.logoff("the link is closing")
            self._end("the link was closed while connecting", _TELL)
            return
        if side is Side.CLIENT:
            self.proto.logon()
            self._write()
        self._arm()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self.link.selector.active = True  # activity, for a polling selector (node.py)
        shared = self.shared
        if shared is None:
            # The actors' workers are woken once this read is handled, when this
            # thread is about to give up the GIL (actors/dispatcher.py, "Held
            # wake-ups"): a worker woken earlier would find the GIL taken and
            # sleep again until it is released, a second wake-up per hop.
            held = hold_wakes()
            try:
                with self.wlock:  # see _locked
                    self._received(nbytes)
            finally:
                if held:
                    release_wakes()
            return
        # On a loop shared with the actors' dispatcher the actors this batch made
        # runnable run right here, once the protocol work is done and the session
        # lock is released (actors/dispatcher.py, "defer_runs"), and what they sent
        # (replies, the next request) leaves with this batch's own output in one
        # write: one loop iteration per read, as a hand-written protocol would have.
        opened = shared.defer_runs()
        try:
            with self.wlock:
                flush = self._received(nbytes)
        finally:
            if opened:
                shared.run_deferred()
        if flush:
            with self.wlock:
                self._flush_received()

    def _received(self, nbytes: int) -> bool:
        """(loop, holding wlock) Handle a read of ``nbytes`` into ``view``.  True:
        the session is up and ``scheduled`` is held for the caller to
        :meth:`_flush_received`."""
        proto = self.proto
        if proto is None or self.ended:
            return False
        self.scheduled = True  # sends made while this batch is handled wait for its end
        now = self.loop.time()
        proto.receive_data(self.view[:nbytes], now)
        if not self._take_events():
            return False
        if self.touched and self.party is not None and self.link.settings.input_backlog:
            self._check_backlog()
        # _arm_if_earlier(), inline (the session is up: _take_events said so)
        deadline = proto.next_deadline()
        if deadline is not None and (self.timer_at is None or deadline < self.timer_at):
            self._arm()
        if self.shared is not None:
            return True
        if self._only_acks_pending():
            # Our repliers took the peer's requests and usually answer at once:
            # the acknowledgements wait (_ACK_DELAY, up to a tick more) to go in the first
            # reply's frame, which saves the peer a frame and a wake-up per
            # request.  A push of anything else flushes them at once.
            self.scheduled = False
            if self.acks_since is None:
                self.acks_since = now
            if self.ack_timer is None:
                self.ack_timer = self.loop.call_later(_ACK_DELAY + _TICK, self._acks_due)
        else:
            # cleared first: a send racing with the check below schedules a flush
            self.scheduled = False
            if self.pending or proto._out:
                self._flush_locked()
        return False

    def _flush_received(self) -> None:
        """(loop, holding wlock) After a read on a shared loop and the actors it
        ran: write it all."""
        self.scheduled = False  # cleared first: a racing send schedules its own flush
        proto = self.proto
        if self.pending or (proto is not None and proto._out):
            self._flush_locked()

    @_locked
    def _acks_due(self) -> None:
        """(loop) The acknowledgement timer: acknowledgements that waited
        ``_ACK_DELAY`` for a reply go alone; younger ones wait on.  (The timer is
        armed once for many requests, since the threads that write the replies
        cannot cancel it; without this check it would cut the wait of whichever
        acknowledgement happened to be pending when it fired.)  Both arming
        points ask for ``_TICK`` more than the wait: asked for exactly the wait,
        libuv's millisecond timers fired up to a tick early, found the
        acknowledgement younger than ``_ACK_DELAY`` and re-armed for less than
        half a tick, which runs on the next turn of the loop; the I/O thread
        went round its loop ~1.9 times per request answered at once, 1.1 now."""
        self.ack_timer = None
        if not self.pending or self.ended:
            return  # the replies took them
        since = self.acks_since
        if since is not None and self._only_acks_pending():
            wait = since + _ACK_DELAY - self.loop.time()
            if wait > 0:
                self.ack_timer = self.loop.call_later(wait + _TICK, self._acks_due)
                return
        self._flush_locked()

    # ----------------------------------------------------- input back-pressure

    def _mailboxes(self, keys: set[MessageKey]) -> list[Any]:
        """The mailboxes (and inboxes) the peer's notifications on ``keys`` are
        delivered to: anything with a ``depth``."""
        party = self.party
        if party is None:
            return []
        pubs = party._pubs
        boxes: list[Any] = []
        for key in tuple(keys):
            feed = pubs.get(key)
            entry = feed._entry if feed is not None else None
            if entry is not None:
                local, other = entry.routes[CAT_REMOTE]
                boxes.extend(route[3] for route in local)
                for route in other:  # feeds of no actor: an Inbox's is watched too
                    backlog = getattr(getattr(route, "__self__", None), "_backlog", None)
                    if backlog is not None:
                        boxes.append(backlog)
        return boxes

    def _check_backlog(self) -> None:
        """(loop, after each inbound batch) Stop reading while a mailbox is over the
        limit.  Only the mailboxes this batch delivered to are looked at (a mailbox
        can only cross the limit in a batch that delivers to it): the cost follows
        the batch, not the number of feeds the link carries."""
        touched = self.touched
        transport = self.transport
        if self.reading_paused or transport is None or self.ended or not touched:
            touched.clear()
            return
        boxes = self._mailboxes(touched)
        touched.clear()
        limit = self.link.settings.input_backlog
        backlog = max((box.depth for box in boxes), default=0)
        if backlog <= limit:
            return
        self.watched = boxes
        transport.pause_reading()
        self.reading_paused = True
        self.input_pauses += 1
        self._keepalive_at = self.loop.time()
        log = self._log.info if self.input_pauses == 1 else self._log.debug
        log(
            "link {}: stopped reading from node {}: a subscriber's mailbox (or inbox) holds {} "
            "messages, above input_backlog={}; reading resumes below {} (TCP pushes back on the peer; "
            "raise input_backlog or speed up the subscriber if this repeats)",
            self.name,
            self.peer,
            backlog,
            limit,
            limit // 2,
        )
        self.backlog_timer = self.loop.call_later(self._recheck_delay, self._recheck_backlog)

    @_locked
    def _recheck_backlog(self) -> None:
        """(loop, while paused) Read again below half the limit; meanwhile keep the
        peer from taking our silence for a dead link."""
        self.backlog_timer = None
        proto, transport = self.proto, self.transport
        if self.ended or not self.reading_paused or proto is None or transport is None:
            return
        now = self.loop.time()
        if max((box.depth for box in self.watched), default=0) <= (
            self.link.settings.input_backlog // 2
        ):
            self.watched = []
            self.reading_paused = False
            proto.reading_resumed(now)  # the silence was ours: restart the idle timer
            transport.resume_reading()
            self._arm()
            return
        delay = self.link.settings.heartbeat_delay
        if delay and now - self._keepalive_at >= delay / 2 and proto.state in _SENDING:
            self._keepalive_at = now
            proto.keepalive()
            self._write()
        self.backlog_timer = self.loop.call_later(self._recheck_delay, self._recheck_backlog)

    def _only_acks_pending(self) -> bool:
        """Only acknowledgements of requests some replier took are pending (few)."""
        pending = self.pending
        if not pending or len(pending) > 8:
            return False
        for item in pending:
            if item.__class__ is not tuple or item[0] != _REQUEST_ACK or item[2] == 0:
                return False
        return True

    @_locked
    def eof_received(self) -> bool:
        proto = self.proto
        if proto is not None and not self.ended:
            proto.receive_data(b"", self.loop.time())
            self._take_events()
        return False  # let the transport close itself

    @_locked
    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._close_wfd()
        if not self.ended:
            reason = (
                f"connection lost: {exc}"
                if exc is not None
                else "the peer closed the connection without logging off"
            )
            self._end(reason, _CLOSE)
        self._closed()

    @_locked
    def pause_writing(self) -> None:
        self.paused = True

    @_locked
    def resume_writing(self) -> None:
        self.paused = False
        if not self.ended:
            self._write()
            if self.pending and not self.scheduled:
                self.scheduled = True
                self.loop.call_soon(self._flush)

    # ---------------------------------------------------------------- outbound

    @_locked
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
        if proto is None or not proto._sending:  # (state not in _SENDING)
            return  # nothing is attached before logon
        if self.paused:
            # The socket cannot keep up: everything waits here, and the queue
            # limit applies to the data messages among it.
            limit = self.link.settings.message_queue_size
            if limit and self._waiting(proto, limit) > limit:
                self._end(
                    f"output queue limit: {self._waiting(proto, limit)} data messages wait "
                    f"for a socket that cannot keep up, over message_queue_size={limit}; "
                    "the peer does not read fast enough",
                    _ABORT,
                )
            return  # resume_writing() flushes
        self._drain(proto, _MAX_BATCH)
        data = proto.data_to_send()
        if self.tail:
            data = self._take_tail(data)
        if data:
            assert self.transport is not None
            self.transport.write(data)
        if self.pending and not self.scheduled and not self.ended:
            # More is waiting: write this batch now so the peer can work on it
            # while the next one is encoded (bounded batches pipeline better).
            self.scheduled = True
            self.loop.call_soon(self._flush)

    def _waiting(self, proto: LinkProtocol, limit: int) -> int:
        """Data messages waiting: encoded in the protocol, and still pending."""
        queued = proto.data_queued
        pending = self.pending
        if queued + len(pending) <= limit:
            return queued + len(pending)  # cheap bound: system items counted too
        return queued + sum(
            1 for item in list(pending) if item.__class__ is not tuple or item[0] in _DATA_OPS
        )

    def _drain(self, proto: LinkProtocol, most: int | None = None) -> None:
        """Encode the items pending now (at most ``most``).  Items that producers
        add meanwhile wait for the flush they schedule: a busy publisher cannot
        keep the loop here.  Consecutive notifications on one key are encoded
        as a run (``LinkProtocol.notify_many``): the key and the class's encoder
        are looked up once per run, not per message."""
        pending = self.pending
        popleft = pending.popleft
        count = len(pending) if most is None else min(len(pending), most)
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
            if cls is not tuple:  # a notification: the message itself
                if cls is not run_cls or item.subject != run_subject:
                    if bodies:
                        self._notify_run(proto, key, bodies)
                        bodies = []
                        add = bodies.append
                    run_cls = cls
                    run_subject = item.subject
                    key = (cls.__type_name__, run_subject)
                    enc = cls._ab_enc
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
            if item[0] == _REQUEST_ACK and pending:
                # The reply to the same request right behind its acknowledgement
                # (a replier answered at once): one frame carries both.  Only this
                # drain pops, so the head of the deque is stable here.
                following = pending[0]
                if (
                    following.__class__ is tuple
                    and following[0] == _REPLY
                    and following[1] == item[1]
                ):
                    popleft()
                    count -= 1
                    item = (_REPLY_ACKED, item[1], following[2], item[2])
            try:
                self._command(proto, item)
            except (CodecError, UsageError) as exc:
                # MessageTooLargeError is a CodecError; a value msgpack cannot
                # encode is a UsageError: one message is lost, not the link.
                self._unsendable(item, exc)
        if bodies:
            self._notify_run(proto, key, bodies)
        if not pending:
            self.acks_since = None  # whatever acknowledgement waited has gone

    def _notify_run(self, proto: LinkProtocol, key: WireKey, bodies: list[Any]) -> None:
        """Encode notifications on one key; one that cannot be sent is lost, not the
        link (nor the ones after it)."""
        while bodies:
            before = proto.last_seq_sent
            try:
                proto.notify_many(key, bodies)
                return
            except (CodecError, UsageError) as exc:
                self._unsendable(None, exc)
                bodies = bodies[proto.last_seq_sent - before + 1 :]

    def _command(self, proto: LinkProtocol, item: tuple[Any, ...]) -> None:
        op = item[0]
        # codec.to_wire(m), inline: the class's encoder, or the message itself
        if op == _REPLY_ACKED:
            reply = item[2]
            cls = reply.__class__
            enc = cls._ab_enc
            body = reply if enc is None else enc(reply)
            proto.reply(item[1], (cls.__type_name__, reply.subject), reply.status, body, item[3])
        elif op == _REPLY:
            reply = item[2]
            cls = reply.__class__
            enc = cls._ab_enc
            body = reply if enc is None else enc(reply)
            proto.reply(item[1], (cls.__type_name__, reply.subject), reply.status, body)
        elif op == _REQUEST:
            message = item[2]
            cls = message.__class__
            enc = cls._ab_enc
            body = message if enc is None else enc(message)
            proto.request((cls.__type_name__, message.subject), item[1], body)
        elif op == _REQUEST_ACK:
            proto.request_ack(item[1], item[2])
        elif op == _CANCEL:
            proto.cancel(item[1])
        elif op == _ADVERTISE:
            state = FeedState.UP if item[3] else FeedState.DOWN
            proto.advertise(
                _wire_key(item[1]), _TO_WIRE_ROLE[item[2]], Scope.LOCAL_AND_REMOTE, state
            )
        elif op == _RETRACT:
            proto.retract(_wire_key(item[1]), _TO_WIRE_ROLE[item[2]])
        elif op == _FEED_STATUS:
            proto.feed_status(_wire_key(item[1]), _TO_WIRE_ROLE[item[2]], bool(item[3]))
        elif op == _SUBSCRIBE:
            proto.subscribe(_wire_key(item[1]), Role.SUBSCRIBER)
        else:
            proto.unsubscribe(_wire_key(item[1]), Role.SUBSCRIBER)

    def _unsendable(self, item: Any, exc: Exception) -> None:
        if item.__class__ is tuple and item[0] == _REPLY_ACKED:
            # the reply cannot go, its acknowledgement can (it holds only ints)
            if self.proto is not None:
                self.proto.request_ack(item[1], item[3])
            item = (_REPLY, item[1], item[2])
        self.link._count_dropped(1)
        self._log.warning("link {}: a message is dropped, it cannot be sent: {}", self.name, exc)
        party = self.party
        op = item[0] if item.__class__ is tuple else None
        if party is None:
            return
        if op == _REQUEST:
            # Nobody over there will see it: the requestor gets its ERROR reply now.
            party.request_ack(item[1], 0)
        elif op == _REPLY:
            # Keep the requestor's count right with a small reply in its place.
            reply: Reply = item[2]
            final = reply.status is not ReplyStatus.OK_CONTINUING
            stand_in = Reply(
                reply.subject,
                status=ReplyStatus.ERROR if final else ReplyStatus.OK_CONTINUING,
                reason=f"a {type(reply).__name__} reply could not be sent over the link",
            )
            self.pending.appendleft((_REPLY, item[1], stand_in))

    def _write(self) -> None:
        proto, transport = self.proto, self.transport
        if proto is None or transport is None or self.paused or transport.is_closing():
            return
        data = self._take_tail(proto.data_to_send())
        if data:
            transport.write(data)

    def _drop_pending(self) -> None:
        pending = self.pending
        n = 0
        while pending:
            item = pending.popleft()
            if item.__class__ is not tuple or item[0] in _DATA_OPS:
                n += 1
        self.link._count_dropped(n)

    # ----------------------------------------------------------------- inbound

    def _take_events(self) -> bool:
        """(loop) Handle every event the protocol has; False once the session ended."""
        proto = self.proto
        assert proto is not None
        next_batch = proto.next_batch
        notified = self.notified
        touched_add = self.touched.add
        # The hot path: the protocol hands over notifications that arrived one
        # after the other on one key as a run, (wire key, bodies); on a key seen
        # before they are decoded with the cached decoder and go to the party in
        # one call (arrival order is kept: the run comes before anything later).
        events = proto._events  # (next_batch() is None exactly when it is empty)
        try:
            while events:
                event = next_batch()
                if event is None:  # pragma: no cover - events was not empty
                    return True
                if event.__class__ is not tuple:
                    if not self._event(event):  # type: ignore[arg-type]
                        return False
                    continue
                wire_key, bodies = event
                party = self.party
                known = notified.get(wire_key) if party is not None else None
                if known is None:
                    # first use of the key (or no party yet): one at a time, until
                    # the key's decoder is cached
                    while bodies:
                        if not self._notification(wire_key, bodies.popleft(), len(bodies)):
                            return False
                        party = self.party
                        known = notified.get(wire_key) if party is not None else None
                        if known is not None:
                            break
                    if not bodies:
                        continue
                decode, key = known  # type: ignore[misc]
                try:
                    messages = [decode(body) for body in bodies]
                except CodecError:
                    return self._corrupt_run(key, decode, bodies)
                party.notify_run(messages, key)  # type: ignore[union-attr]
                touched_add(key)
            return True
        except ProtocolError as exc:
            self._log.warning("link {} ({}): {}", self.name, self.address, exc)
            self._end(f"protocol error: {exc}", _TELL)
            return False

    def _corrupt_run(
        self, key: MessageKey, decode: Callable[[Any], Any], bodies: deque[Any]
    ) -> bool:
        """A body of the run does not decode: the messages before it are delivered,
        the ones after it dropped, and the link closes."""
        good: list[Message] = []
        for i, body in enumerate(bodies):
            try:
                good.append(decode(body))
            except CodecError as exc:
                if good and self.party is not None:
                    self.party.notify_run(good, key)
                self._corrupt_body(key, exc, len(bodies) - i - 1)
                return False
        raise AssertionError("a body failed to decode once, then decoded")  # pragma: no cover

    def _resolve(self, wire_key: WireKey) -> MessageKey | None:
        cls = lookup_type(wire_key[0])
        key = None
        if cls is not None and issubclass(cls, Message):
            key = MessageKey(cls, wire_key[1])
        self.keys[wire_key] = key
        return key

    def _key_of(self, wire_key: WireKey, family: type[Message]) -> MessageKey | None:
        key: MessageKey | None = self.keys.get(wire_key, _UNRESOLVED)
        if key is _UNRESOLVED:
            key = self._resolve(wire_key)
        if key is None or not issubclass(key.message_class, family):
            self.unknown += 1
            if key is not None:
                self._unknown_type(
                    wire_key[0],
                    f"used as {family.__name__} messages, but here the type is a "
                    f"{_family_name(key.message_class)}",
                )
            return None
        return key

    def _corrupt_body(self, key: MessageKey, exc: Exception, dropped: int = 0) -> None:
        """Close the link for a body that does not decode; ``dropped`` messages read
        after it, and no longer in the protocol, are dropped with it."""
        self.corrupt += 1
        self._log.warning(
            "link {} ({}, peer {}): a {} body does not decode ({}); closing the link",
            self.name,
            self.address,
            self.peer,
            key,
            exc,
        )
        proto = self.proto
        assert proto is not None
        self.link._count_dropped(self._discard_events(proto) + dropped)
        proto.logoff("a message body did not decode")
        self._end(f"corrupt {key} message body: {exc}", _TELL)

    @staticmethod
    def _discard_events(proto: LinkProtocol) -> int:
        """Take the events still waiting (the link is closing); the data messages
        among them were read but are not delivered: their count."""
        dropped = 0
        try:
            while (event := proto.next_event()) is not None:
                if event.__class__ in _DATA_EVENTS:
                    dropped += 1
        except ProtocolError:
            pass  # a later frame is broken too: the link closes either way
        return dropped

    def _event(self, event: Event) -> bool:
        """(loop) Every event but the common notification; False once ended."""
        party = self.party
        if type(event) is NotificationReceived:
            return self._notification(event.key, event.body)
        elif type(event) is RequestReceived:
            key = self._key_of(event.key, Request)
            if key is not None and party is not None:
                try:
                    # codec.from_wire(cls, body), inline: the class's decoder
                    message = key.message_class._ab_dec(event.body)
                except CodecError as exc:
                    self._corrupt_body(key, exc)
                    return False
                party.request(event.request_id, message)
        elif type(event) is ReplyReceived:
            if party is not None:
                key = self._key_of(event.key, Reply)
                if key is None:
                    reply: Reply = self._stand_in_reply(event)
                else:
                    try:
                        reply = key.message_class._ab_dec(event.body)
                    except CodecError as exc:
                        self._corrupt_body(key, exc)
                        return False
                # with the acknowledgement when it came in the same frame
                party.reply(event.request_id, reply, event.repliers)
        elif type(event) is RequestAcknowledged:
            if party is not None:
                party.request_ack(event.request_id, event.repliers)
        elif type(event) is CancelReceived:
            if party is not None:
                party.cancel(event.request_id)
        elif type(event) is Advertised:
            key = self._key_of(event.key, _FAMILY[event.role])
            if key is not None and party is not None:
                party.advertise(key, _FROM_WIRE_ROLE[event.role], event.feed_state is FeedState.UP)
        elif type(event) is FeedStatusReceived:
            family = _FAMILY.get(event.role)
            if family is not None:  # subscriber/requestor presence is not used here
                key = self._key_of(event.key, family)
                if key is not None and party is not None:
                    party.feed_status(key, _FROM_WIRE_ROLE[event.role], event.up)
        elif type(event) is Retracted:
            key = self._key_of(event.key, _FAMILY[event.role])
            if key is not None and party is not None:
                party.retract(key, _FROM_WIRE_ROLE[event.role])
        elif type(event) is Subscribed:
            # Requestors need no subscription: a request names its key itself.
            if event.role is Role.SUBSCRIBER:
                key = self._key_of(event.key, Notification)
                if key is not None and party is not None:
                    party.subscribe(key)
        elif type(event) is Unsubscribed:
            if event.role is Role.SUBSCRIBER:
                key = self._key_of(event.key, Notification)
                if key is not None and party is not None:
                    party.unsubscribe(key)
        elif type(event) is SequenceGap:
            self._log.warning(
                "link {}: frames {}..{} from node {} never arrived",
                self.name,
                event.expected,
                event.got - 1,
                self.peer,
            )
        elif type(event) is LogonRequested or type(event) is LogonAccepted:
            return self._logon(event.peer_node_id, event.peer_session)
        elif type(event) is ReceiptReceived:
            self._receipt(event.received)
        elif type(event) is LogonComplete:
            self._maybe_logged_on()
        elif type(event) is LogoffReceived:
            self._end(f"logged off by the peer: {event.reason}", _CLOSE)
            return False
        elif type(event) is LogonRejected:
            self._end(f"logon rejected by the peer: {event.reason}", _CLOSE)
            return False
        elif type(event) is ConnectionClosed:
            self._end("the peer closed the connection without logging off", _CLOSE)
            return False
        elif type(event) is HeartbeatTimeout:
            self._end(f"heartbeat timeout: nothing received for {event.silent_for:.3f} s", _TELL)
            return False
        elif type(event) is LogonTimeout:
            self._end(f"logon timeout: not logged on after {event.waited:.3f} s", _TELL)
            return False
        return True

    def _notification(self, wire_key: WireKey, body: Any, dropped: int = 0) -> bool:
        """A notification on a key not cached in ``notified`` yet: resolve the key,
        decode, cache, deliver; False once ended (``dropped``: as ``_corrupt_body``)."""
        party = self.party
        key = self._key_of(wire_key, Notification)
        if key is not None and party is not None:
            try:
                message = _from_wire(key.message_class, body)
            except CodecError as exc:
                self._corrupt_body(key, exc, dropped)
                return False
            # decoded once, so the class's decoder is compiled: cache it with the key
            self.notified[wire_key] = (key.message_class._ab_dec, key)
            party.notify(message, key)
            self.touched.add(key)
        return True

    def _stand_in_reply(self, event: ReplyReceived) -> Reply:
        """A reply of a type unknown here still counts: a base Reply takes its place
        (ERROR when it was final, so the requestor's count stays right)."""
        continuing = int(event.status) == int(ReplyStatus.OK_CONTINUING)
        return Reply(
            event.key[1],
            status=ReplyStatus.OK_CONTINUING if continuing else ReplyStatus.ERROR,
            reason=f"the remote node replied with a {event.key[0]!r} reply, a type not "
            "defined at this node",
        )

    # ------------------------------------------------------------------- logon

    def _logon(self, peer: str, session: str) -> bool:
        proto = self.proto
        assert proto is not None
        self.peer = peer
        link = self.link
        refusal = link._net._claim(self, peer, session)
        if refusal is not None:
            self.refused_logons += 1
            self._log.info(
                "link {} ({}): refusing node {}: {}", self.name, self.address, peer, refusal
            )
            proto.reject_logon(refusal)
            self._end(f"logon rejected here: {refusal}", _TELL)
            return False
        if proto.side is Side.SERVER:
            proto.accept_logon()
        self.peer_session = session
        received, lost = link._net.receipts.logon(peer, session)
        if lost:
            link._count_lost(lost)
            self._log.warning(
                "link {}: node {} restarted (new session {!r}); {} data messages written to "
                "its previous session were never acknowledged and are counted as lost",
                self.name,
                peer,
                session,
                lost,
            )
        proto.receipt(received)
        party = link._net.router.attach(peer, self)  # queues every advertisement now
        self.party = self._unexpected_party = party
        self._drain(proto)
        proto.complete_logon()
        self._write()
        self._maybe_logged_on()
        self._arm_if_earlier()
        return True

    def _receipt(self, received: int) -> None:
        """The peer's RECEIPT: count what the earlier connections lost in flight."""
        peer, session = self.peer, self.peer_session
        if peer is None or session is None:
            return
        lost = self.link._net.receipts.receipt(peer, session, received)
        if lost:
            self.link._count_lost(lost)
            self._log.warning(
                "link {}: node {} read {} data messages from this node in total; {} written "
                "to a connection that broke never arrived and are counted as lost (nothing is resent)",
                self.name,
                peer,
                received,
                lost,
            )

    def _maybe_logged_on(self) -> None:
        proto = self.proto
        if self.logged_on or proto is None or proto.state is not LinkState.CONNECTED:
            return
        self.logged_on = True
        peer = self.peer
        assert peer is not None
        link = self.link
        how = "dialled" if link.initiator else "accepted"
        self._log.info(
            "link {}: logged on with node {} at {} ({})", self.name, peer, self.address, how
        )
        link._logged_on(peer)
        link._net._publish(
            LinkLoggedOn(
                SYSTEM_SUBJECT, peer_node=peer, address=self.address, initiator=link.initiator
            )
        )

    # ------------------------------------------------------------------ timers

    def _arm(self) -> None:
        proto = self.proto
        if proto is None or self.ended:
            return
        deadline = proto.next_deadline()
        if deadline is None:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = deadline
        self.timer = self.loop.call_at(deadline, self._on_timer)

    def _arm_if_earlier(self) -> None:
        proto = self.proto
        if proto is None or self.ended:
            return
        deadline = proto.next_deadline()
        if deadline is not None and (self.timer_at is None or deadline < self.timer_at):
            self._arm()

    @_locked
    def _on_timer(self) -> None:
        self.timer = None
        self.timer_at = None
        proto = self.proto
        if proto is None or self.ended or self.reading_paused:
            return  # while paused the silence is ours; resuming re-arms the timer
        proto.tick(self.loop.time())
        if self._take_events():
            self._write()
            self._arm()

    # ------------------------------------------------------------------ ending

    @_locked
    def logoff(self, reason: str) -> None:
        """(loop) Orderly close by this node: send what is pending, then LOGOFF."""
        if self.ended:
            return
        proto = self.proto
        if proto is not None:
            if proto.state in _SENDING:
                self._drain(proto)
            proto.logoff(reason)
        self._end(f"logged off here: {reason}", _ORDERLY)

    @_locked
    def abort(self) -> None:
        """(loop) Reset the socket now (the node is closing and time is up)."""
        if not self.ended:
            self._end("aborted: the node is closing", _ABORT)
        transport = self.transport
        if transport is not None and not self.lost:
            transport.abort()

    @_locked
    def _end(self, reason: str, how: str) -> None:
        """(loop) The session is over: close the socket, count, detach, tell."""
        if self.ended:
            return
        self.ended = True
        self.open = False
        self.scheduled = True  # a straggler's flush is scheduled by _flush below, not by sends
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.ack_timer is not None:
            self.ack_timer.cancel()
            self.ack_timer = None
        if self.backlog_timer is not None:
            self.backlog_timer.cancel()
            self.backlog_timer = None
        self._close_wfd()  # before the transport closes: the socket must not outlive it
        proto, transport = self.proto, self.transport
        if transport is not None and not transport.is_closing():
            if how in (_ORDERLY, _TELL) and not (how == _TELL and self.paused):
                if proto is not None:
                    data = self._take_tail(proto.data_to_send())
                    if data:
                        transport.write(data)
                transport.close()
                self.loop.call_later(_CLOSE_GRACE, self._abort_if_open)
            else:
                if proto is not None:
                    self.link._count_dropped(proto.data_queued)
                if how == _CLOSE:
                    transport.close()
                    self.loop.call_later(_CLOSE_GRACE, self._abort_if_open)
                else:
                    transport.abort()
        self._drop_pending()
        self.scheduled = False
        link = self.link
        net = link._net
        log = self._log.info if how in (_ORDERLY, _CLOSE) else self._log.warning
        log("link {} ({}, peer {}): closed: {}", self.name, self.address, self.peer, reason)
        party, self.party = self.party, None
        if party is not None:
            party.detach(reason)
        if self.peer is not None and self.peer_session is not None and proto is not None:
            # before the claim goes: the next connection's receipts count this one
            counters = proto.counters
            net.receipts.ended(
                self.peer, self.peer_session, counters.messages_out, counters.messages_in
            )
        net._release(self)
        if transport is not None:  # every connection that was made says how it ended
            net._publish(
                LinkLoggedOff(
                    SYSTEM_SUBJECT, peer_node=self.peer or "", address=self.address, reason=reason
                )
            )
        link._session_over(self, reason)
        if transport is None:
            self._closed()

    @_locked
    def _abort_if_open(self) -> None:
        transport = self.transport
        if transport is not None and not self.lost:
            transport.abort()

    def _closed(self) -> None:
        callbacks, self.on_closed = self.on_closed, []
        for callback in callbacks:
            callback()


_SENDING: Final = (LinkState.SYNCING, LinkState.CONNECTED)
_DATA_EVENTS: Final = frozenset(
    {NotificationReceived, RequestReceived, ReplyReceived, RequestAcknowledged, CancelReceived}
)
_UNRESOLVED: Final[Any] = object()


def _family_name(cls: type[Message]) -> str:
    for family in (Notification, Request, Reply):
        if issubclass(cls, family):
            return family.__name__
    return cls.__name__


def _dial_failure(exc: OSError, timeout: float | None) -> str:
    """Why a dial failed and what to do about it, for its reason (logs,
    LinkClosedError).  A TimeoutError without errno is ours (``connect_timeout``);
    one with errno (ETIMEDOUT) is the operating system's."""
    if isinstance(exc, TimeoutError):
        waited = f"{timeout:g} s" if exc.errno is None and timeout else "the OS's limit"
        return (
            f"no answer within {waited}; check that the peer's host is up and that no "
            "firewall drops the connection (or raise connect_timeout)"
        )
    what = exc.strerror or exc
    if isinstance(exc, socket.gaierror):
        return f"{what}; check the host name (it does not resolve here)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{what}; nothing listens there: start the peer node's service or check the port"
    if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
        return f"{what}; the local address (bind_host/bind_port) is taken or not on this host"
    return f"{what}; check the address and the network path to it"


def _endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
