"""The receiving half of a multicast channel, with no I/O (sans-IO).

A :class:`ReceiverProtocol` follows every publisher (stream) heard on one
channel.  Datagrams come in already decoded (:mod:`.datagram`); what it makes
comes out as events (:class:`Delivered`, :class:`LostRange`,
:class:`Announced`, :class:`Joined`, :class:`Gone`, :class:`Nagging`) and NAKs
to send (:meth:`naks_to_send`).  Every call takes ``now``; the randomness of
the NAK delay comes from the ``rng`` it is given.

Rules it keeps, per stream:

* **joining**: a stream is followed from the first ANNOUNCE heard, at that
  announcement's sequence number, with its feed state; other datagrams of a
  stream not followed are counted (``unjoined``) and dropped — a sender
  nobody has heard announce cannot make a receiver wait for numbers it
  invents.  At most ``max_publishers`` streams;
* **order**: messages come out in sequence order, each once; a datagram below
  the next expected number or already held is a duplicate (counted); one
  ``receive_window`` or more past it is dropped (``beyond_window``) — the gap
  below it is closed first;
* **gaps**: a datagram past the next expected one, or a HEARTBEAT/BYE naming a
  later next number, opens a gap; a NAK for the missing numbers goes out after
  a random delay up to ``nak_delay`` (truncated exponential, so that among
  many receivers one usually asks first) and again every ``nak_retry`` until
  the gap closes; a NAK heard from another receiver covering all the numbers
  this one misses, before this one's is due, holds this one's for
  ``nak_retry`` (suppression);
* **loss**: a LOST up to ``n`` means the publisher holds nothing below ``n``:
  every number below it still missing is reported, as contiguous
  :class:`LostRange` events, and delivery resumes with what follows;
* **segments**: a message of several segments is delivered whole or not at
  all: a loss inside it drops the part held, and the rest of it is skipped;
* **feed state**: an ANNOUNCE (all its pages, when the state took several) is
  handed over when every datagram before its ``as_of`` has been delivered
  (held until then; an older one is stale and dropped), so it never
  contradicts what was delivered; a page lost waits for the next round;
* **gone**: nothing heard for ``publisher_timeout``, or a BYE once all of the
  stream was delivered: :class:`Gone`;
* **the nagging monitor** (when its three settings are set): the numbers this
  receiver asked retransmissions of are summed over the last
  ``nagging_window_interval``, every ``nagging_check_interval``; above
  ``nagging_max_retransmissions`` the channel is flagged (:class:`Nagging`): it
  stops asking and drops data until :meth:`resume`, which reports what was
  missed meanwhile lost and goes on from there.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from actorbus.config.settings import MulticastSettings

from . import datagram as dg

__all__ = [
    "MAX_REQUEST",
    "Announced",
    "Delivered",
    "Gone",
    "Joined",
    "LostRange",
    "Nagging",
    "NaggingMonitor",
    "ReceiverEvent",
    "ReceiverProtocol",
]

#: most sequence numbers one NAK asks for
MAX_REQUEST = 4_096
#: the group size the NAK delay's distribution is shaped for
_GROUP_ESTIMATE = 100
#: streams ended by BYE remembered, so their replayed datagrams do not rejoin
_MAX_CLOSED = 1_024


@dataclass(frozen=True, slots=True)
class Joined:
    stream: int
    name: str


class Delivered(NamedTuple):
    """A reliable message of ``stream``, whole and in order (a named tuple: one
    is made per datagram delivered, the receiver's hot path)."""

    stream: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class LostRange:
    """Datagrams ``first`` .. ``first + length - 1`` of ``stream`` are lost for good."""

    stream: int
    first: int
    length: int


@dataclass(frozen=True, slots=True)
class Announced:
    stream: int
    name: str
    state: bytes


@dataclass(frozen=True, slots=True)
class Gone:
    stream: int
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Nagging:
    """The channel asked for more than ``limit`` retransmissions within ``window`` s."""

    requested: int
    limit: int
    window: float


ReceiverEvent = Joined | Delivered | LostRange | Announced | Gone | Nagging


class NaggingMonitor:
    """Retransmissions requested, summed over a sliding window checked periodically."""

    def __init__(self, window: float, check: float, limit: int, now: float) -> None:
        self.window = window
        self.check_interval = check
        self.limit = limit
        self.enabled = window > 0 and check > 0 and limit > 0
        self._marks: deque[tuple[float, int]] = deque()
        self._sum = 0
        self.next_check = now + check if self.enabled else math.inf

    def record(self, now: float, requested: int) -> None:
        if self.enabled:
            self._marks.append((now, requested))
            self._sum += requested

    def requested(self, now: float) -> int:
        """Retransmissions requested within the window ending ``now``."""
        marks = self._marks
        while marks and marks[0][0] <= now - self.window:
            self._sum -= marks.popleft()[1]
        return self._sum

    def due(self, now: float) -> int | None:
        """At a check time: the window's sum when it is over the limit, else None."""
        if now < self.next_check:
            return None
        self.next_check = now + self.check_interval
        total = self.requested(now)
        return total if total > self.limit else None

    def reset(self, now: float) -> None:
        self._marks.clear()
        self._sum = 0
        self.next_check = now + self.check_interval if self.enabled else math.inf


class _Stream:
    __slots__ = (
        "buffer",
        "closing",
        "expected",
        "heard",
        "highest",
        "nak_due",
        "name",
        "parts",
        "parts_bytes",
        "pending",
        "resync",
        "stream",
    )

    def __init__(self, stream: int, name: str, expected: int, now: float) -> None:
        self.stream = stream
        self.name = name
        #: the next sequence number to deliver
        self.expected = expected
        #: one past the highest sequence number known to exist
        self.highest = expected
        #: datagrams past a gap, by sequence number
        self.buffer: dict[int, dg.Data] = {}
        #: the segments of the message being reassembled
        self.parts: list[bytes] = []
        self.parts_bytes = 0
        #: skip segments until the first of a message (after a loss)
        self.resync = False
        self.heard = now
        self.nak_due: float | None = None
        self.closing: int | None = None
        self.pending: dg.Announce | None = None


class ReceiverProtocol:
    """Every stream of one channel as one receiver follows it."""

    def __init__(
        self,
        settings: MulticastSettings,
        *,
        own_stream: int,
        rng: random.Random,
        now: float,
    ) -> None:
        self.settings = settings
        self.own_stream = own_stream
        self._rng = rng
        self._streams: dict[int, _Stream] = {}
        self._closed: dict[int, None] = {}
        #: paged announcements being collected: stream -> (as_of, pages, {page: part})
        self._pages: dict[int, tuple[int, int, dict[int, bytes]]] = {}
        self.events: deque[ReceiverEvent] = deque()
        self._naks: list[tuple[int, list[tuple[int, int]]]] = []
        self.nagging = False
        self.monitor = NaggingMonitor(
            settings.nagging_window_interval,
            settings.nagging_check_interval,
            settings.nagging_max_retransmissions,
            now,
        )
        lam = math.log(_GROUP_ESTIMATE) + 1
        self._lam = lam
        self._expm1 = math.expm1(lam)
        self.counters = {
            "delivered": 0,
            "duplicates": 0,
            "beyond_window": 0,
            "unjoined": 0,
            "publishers_refused": 0,
            "replayed": 0,
            "naks_sent": 0,
            "naks_suppressed": 0,
            "requested": 0,
            "lost_datagrams": 0,
            "partial_dropped": 0,
            "segments_skipped": 0,
            "segment_mismatch": 0,
            "stale_announce": 0,
            "nagging_dropped": 0,
            "gone": 0,
        }

    # ------------------------------------------------------------ queries

    def streams(self) -> dict[int, str]:
        """The streams followed: stream -> the publisher node's name."""
        return {s: st.name for s, st in self._streams.items()}

    @property
    def held(self) -> int:
        """Datagrams held past gaps, all streams together."""
        return sum(len(st.buffer) for st in self._streams.values())

    def expected(self, stream: int) -> int | None:
        st = self._streams.get(stream)
        return None if st is None else st.expected

    def naks_to_send(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """NAKs due: ``(target stream, [(first, length), ...])`` each."""
        out = self._naks
        self._naks = []
        return out

    def next_event(self) -> ReceiverEvent | None:
        return self.events.popleft() if self.events else None

    # ------------------------------------------------------------ datagrams

    def on_announce(self, a: dg.Announce, now: float) -> None:
        if a.pages > 1:
            whole = self._page(a)
            if whole is None:
                return
            a = whole
        st = self._streams.get(a.stream)
        if st is None:
            if a.stream in self._closed:
                self.counters["replayed"] += 1
                return
            if len(self._streams) >= self.settings.max_publishers:
                self.counters["publishers_refused"] += 1
                return
            st = self._streams[a.stream] = _Stream(a.stream, a.name, a.as_of, now)
            self.events.append(Joined(a.stream, a.name))
            self.events.append(Announced(a.stream, a.name, a.state))
            return
        st.heard = now
        st.name = a.name
        if a.as_of == st.expected and not st.parts:
            st.pending = None
            self.events.append(Announced(a.stream, a.name, a.state))
        elif a.as_of > st.expected:
            if st.pending is None or st.pending.as_of <= a.as_of:
                st.pending = a
            self._saw(st, a.as_of, now)
        else:
            self.counters["stale_announce"] += 1

    def _page(self, a: dg.Announce) -> dg.Announce | None:
        """Collect one page of a paged announcement; the whole one once all are in."""
        pages = self._pages
        held = pages.get(a.stream)
        if held is None or held[0] != a.as_of or held[1] != a.pages:
            if held is None and len(pages) >= self.settings.max_publishers:
                del pages[next(iter(pages))]  # the oldest collection goes
            held = pages[a.stream] = (a.as_of, a.pages, {})
        parts = held[2]
        parts[a.page] = a.state
        if sum(map(len, parts.values())) > self.settings.max_message_size:
            del pages[a.stream]  # more than any announcement may hold
            self.counters["stale_announce"] += 1
            return None
        if len(parts) < a.pages:
            return None
        del pages[a.stream]
        state = b"".join(parts[i] for i in range(a.pages))
        return dg.Announce(a.stream, a.stamp, a.as_of, a.name, state)

    def on_data(self, d: dg.Data, now: float) -> None:
        st = self._streams.get(d.stream)
        if st is None:
            self.counters["unjoined"] += 1
            return
        st.heard = now
        if self.nagging:
            self.counters["nagging_dropped"] += 1
            return
        seq = d.seq
        if seq == st.expected:
            if (
                d.count == 1
                and not st.parts
                and not st.buffer
                and st.pending is None
                and st.closing is None
            ):
                # the common case, written out: a whole message, next in line, nothing
                # held (what _take, _drain and _after_progress do for it)
                st.expected = seq = seq + 1
                st.resync = False
                self.events.append(Delivered(st.stream, d.payload))
                self.counters["delivered"] += 1
                if st.highest <= seq:
                    st.highest = seq
                    st.nak_due = None
                return
            self._take(st, d)
            if st.buffer:
                self._drain(st)
        elif seq < st.expected or seq in st.buffer:
            self.counters["duplicates"] += 1
            return
        elif seq >= st.expected + self.settings.receive_window:
            self.counters["beyond_window"] += 1
            self._saw(st, st.expected + self.settings.receive_window, now)
            return
        else:
            st.buffer[seq] = d
            self._saw(st, seq + 1, now)
            return
        self._after_progress(st, now)

    def on_heartbeat(self, h: dg.Heartbeat, now: float) -> None:
        st = self._streams.get(h.stream)
        if st is None:
            self.counters["unjoined"] += 1
            return
        st.heard = now
        st.name = h.name
        self._saw(st, h.next_seq, now)

    def on_bye(self, b: dg.Bye, now: float) -> None:
        st = self._streams.get(b.stream)
        if st is None:
            self.counters["unjoined"] += 1
            return
        st.heard = now
        st.closing = b.next_seq
        self._saw(st, b.next_seq, now)
        self._after_progress(st, now)

    def on_lost(self, lost: dg.Lost, now: float) -> None:
        """The publisher holds nothing below ``lost.first + lost.length``."""
        st = self._streams.get(lost.stream)
        if st is None:
            self.counters["unjoined"] += 1
            return
        st.heard = now
        end = lost.first + lost.length
        if end <= st.expected or self.nagging:
            return
        self._saw(st, end, now)
        self._skip_to(st, end, now)

    def _skip_to(self, st: _Stream, end: int, now: float) -> None:
        """Deliver what is held below ``end``, report the rest below it lost."""
        held = sorted(s for s in st.buffer if s < end)
        for seq in held:
            if seq > st.expected:
                self._report(st, st.expected, seq - st.expected)
            self._take(st, st.buffer.pop(seq))
        if st.expected < end:
            self._report(st, st.expected, end - st.expected)
        self._drain(st)
        self._after_progress(st, now)

    def on_nak(self, nak: dg.Nak, now: float) -> None:
        """Another receiver's NAK: hold ours if it asks for all we miss."""
        st = self._streams.get(nak.target)
        if st is None or st.nak_due is None or st.nak_due <= now:
            return
        ours = self._missing(st)
        if ours and all(
            any(f >= first and f + n <= first + length for first, length in nak.ranges)
            for f, n in ours
        ):
            st.nak_due = now + self.settings.nak_retry
            self.counters["naks_suppressed"] += 1

    # ------------------------------------------------------------ delivery

    def _report(self, st: _Stream, first: int, length: int) -> None:
        self.events.append(LostRange(st.stream, first, length))
        self.counters["lost_datagrams"] += length
        if st.parts:
            self.counters["partial_dropped"] += 1
            st.parts = []
            st.parts_bytes = 0
        st.resync = True
        st.expected = first + length

    def _take(self, st: _Stream, d: dg.Data) -> None:
        """Deliver datagram ``d``, the next expected one."""
        st.expected = d.seq + 1
        if d.index == 0:
            if st.parts:
                self.counters["segment_mismatch"] += 1
                st.parts = []
            st.resync = False
            if d.count == 1:
                self.events.append(Delivered(st.stream, d.payload))
                self.counters["delivered"] += 1
            else:
                st.parts = [d.payload]
                st.parts_bytes = len(d.payload)
                self._check_pending(st)
                return
        elif st.resync:
            self.counters["segments_skipped"] += 1
        elif d.index != len(st.parts) or not st.parts:
            self.counters["segment_mismatch"] += 1
            st.parts = []
            st.resync = True
        else:
            st.parts.append(d.payload)
            st.parts_bytes += len(d.payload)
            if st.parts_bytes > self.settings.max_message_size:
                self.counters["segment_mismatch"] += 1
                st.parts = []
                st.resync = True
            elif len(st.parts) == d.count:
                self.events.append(Delivered(st.stream, b"".join(st.parts)))
                self.counters["delivered"] += 1
                st.parts = []
        self._check_pending(st)

    def _check_pending(self, st: _Stream) -> None:
        pending = st.pending
        if pending is not None and pending.as_of <= st.expected:
            st.pending = None
            if pending.as_of == st.expected and not st.parts:
                self.events.append(Announced(st.stream, pending.name, pending.state))
            else:
                self.counters["stale_announce"] += 1

    def _drain(self, st: _Stream) -> None:
        buffer = st.buffer
        while st.expected in buffer:
            self._take(st, buffer.pop(st.expected))

    def _saw(self, st: _Stream, highest: int, now: float) -> None:
        """Numbers below ``highest`` exist: a gap opens when some are missing."""
        st.highest = max(st.highest, highest)
        if st.highest > st.expected and st.nak_due is None:
            st.nak_due = now + self._delay()

    def _after_progress(self, st: _Stream, now: float) -> None:
        st.highest = max(st.highest, st.expected)
        if st.highest == st.expected and not st.buffer:
            st.nak_due = None
        if st.closing is not None and st.expected >= st.closing:
            self._gone(st, "closed")
            if len(self._closed) >= _MAX_CLOSED:
                del self._closed[next(iter(self._closed))]
            self._closed[st.stream] = None

    def _delay(self) -> float:
        """A random NAK delay in [0, nak_delay): truncated exponential, most near the end."""
        x = self._rng.random()
        return self.settings.nak_delay * math.log1p(x * self._expm1) / self._lam

    def _gone(self, st: _Stream, reason: str) -> None:
        del self._streams[st.stream]
        self.events.append(Gone(st.stream, st.name, reason))
        self.counters["gone"] += 1

    # ------------------------------------------------------------ NAKs and timers

    def _missing(self, st: _Stream) -> list[tuple[int, int]]:
        """The ranges this receiver misses, first ones first, within one NAK's limits."""
        ranges: list[tuple[int, int]] = []
        budget = MAX_REQUEST
        cur = st.expected
        for seq in [*sorted(st.buffer), st.highest]:
            if seq > cur:
                n = min(seq - cur, budget, dg.MAX_NAK_LENGTH)
                ranges.append((cur, n))
                budget -= n
                if budget == 0 or len(ranges) == dg.MAX_NAK_RANGES:
                    break
            cur = max(cur, seq + 1)
        return ranges

    def tick(self, now: float) -> None:
        """Run the timers: NAKs due, publishers gone quiet, the nagging monitor."""
        timeout = self.settings.publisher_timeout
        for st in list(self._streams.values()):
            if now - st.heard >= timeout:
                self._gone(st, "timeout")
                continue
            if st.nak_due is not None and st.nak_due <= now and not self.nagging:
                ranges = self._missing(st)
                if not ranges:
                    st.nak_due = None
                    continue
                requested = sum(n for _, n in ranges)
                self._naks.append((st.stream, ranges))
                self.counters["naks_sent"] += 1
                self.counters["requested"] += requested
                self.monitor.record(now, requested)
                st.nak_due = now + self.settings.nak_retry
        if not self.nagging:
            over = self.monitor.due(now)
            if over is not None:
                self.nagging = True
                self.events.append(Nagging(over, self.monitor.limit, self.monitor.window))

    def resume(self, now: float) -> None:
        """After a :class:`Nagging` event: what was missed while flagged is
        reported lost (asking for it all at once would flag the channel again),
        the monitor counts anew, and delivery goes on with what comes next."""
        self.nagging = False
        self.monitor.reset(now)
        for st in list(self._streams.values()):
            if st.highest > st.expected:
                self._skip_to(st, st.highest, now)

    def next_deadline(self) -> float:
        """When :meth:`tick` has something to do next (flagged as nagging: only
        the publishers' timeouts; its NAKs wait for :meth:`resume`)."""
        nagging = self.nagging
        due = math.inf if nagging else self.monitor.next_check
        timeout = self.settings.publisher_timeout
        for st in self._streams.values():
            due = min(due, st.heard + timeout)
            if st.nak_due is not None and not nagging:
                due = min(due, st.nak_due)
        return due
