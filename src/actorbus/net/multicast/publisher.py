"""The publishing half of a multicast channel, with no I/O (sans-IO).

A :class:`PublisherProtocol` numbers the datagrams of one stream (one node on
one channel, one run), cuts messages into segments, keeps what it sent in a
bounded FIFO retransmit cache and answers NAKs from it.  It never reads a clock
or a socket: every call takes ``now`` (seconds, any monotonic origin) and the
datagrams it makes wait in :meth:`datagrams_to_send`.

Rules it keeps:

* one sequence number per datagram, consecutive, from 0; a message of ``n``
  segments takes ``n`` consecutive numbers;
* the cache drops its oldest datagram first, when its bytes pass
  ``cache_bytes`` or its age passes ``cache_age``: what is in it is a
  contiguous run of sequence numbers ending at the last one sent;
* a NAK for numbers it holds is answered with retransmissions — each datagram
  at most once per ``retransmit_holdoff`` however many receivers ask, at most
  :data:`MAX_REPAIR` datagrams per NAK, within ``retransmit_rate`` bytes per
  second when set; a NAK reaching below the cache is answered with one LOST
  naming the numbers from the NAK's first up to the cache's oldest: nothing
  below the oldest cached number can be had any more (the cache is FIFO);
* a NAK for numbers never sent is counted (``bogus_nak``) and ignored;
* a HEARTBEAT with the next sequence number every ``heartbeat_interval``, so a
  receiver that lost the tail of a burst learns it; an ANNOUNCE of the feed
  state (opaque bytes the channel gives :meth:`announce`, cut into pages of a
  datagram each) at once and every ``announce_interval``; a BYE on
  :meth:`close`.
"""

from __future__ import annotations

from collections import deque

from actorbus.config.settings import MulticastSettings

from . import datagram as dg

__all__ = ["MAX_REPAIR", "PublisherProtocol"]

#: most datagrams one NAK is answered with (the receiver asks again for more)
MAX_REPAIR = 4_096


class _Cached:
    __slots__ = ("count", "index", "payload", "resent", "sent", "seq")

    def __init__(self, seq: int, index: int, count: int, payload: bytes, sent: float) -> None:
        self.seq = seq
        self.index = index
        self.count = count
        self.payload = payload
        self.sent = sent
        #: when it was last retransmitted (-inf: never)
        self.resent = float("-inf")


class PublisherProtocol:
    """One stream's sequencing, segmentation, retransmit cache and timers."""

    def __init__(
        self,
        settings: MulticastSettings,
        *,
        stream: int,
        name: str,
        key: bytes | None,
        now: float,
    ) -> None:
        if not 0 < stream < 1 << 64:
            raise ValueError(f"stream must be 1 to 2**64-1, found {stream}")
        self.settings = settings
        self.stream = stream
        self.name = name
        self._key = key
        self.next_seq = 0
        self._stamp = 0
        self._segment = settings.datagram_size - dg.data_overhead(key is not None)
        self._max_segments = min(dg.MAX_SEGMENTS, -(-settings.max_message_size // self._segment))
        self._cache: deque[_Cached] = deque()
        self._cache_bytes = 0
        self._out: list[bytes] = []
        self._state = b""
        self._next_heartbeat = now
        self._next_announce = now
        self._tokens = float(settings.retransmit_rate)
        self._tokens_at = now
        #: (first, oldest) of the LOST last sent, and when
        self._last_lost: tuple[int, int, float] = (-1, -1, float("-inf"))
        self.closed = False
        self.counters = {
            "messages_sent": 0,
            "datagrams_sent": 0,
            "bytes_sent": 0,
            "naks_received": 0,
            "retransmitted": 0,
            "retransmit_held": 0,
            "rate_limited": 0,
            "lost_sent": 0,
            "bogus_nak": 0,
            "evicted": 0,
        }

    # ------------------------------------------------------------ commands

    @property
    def segment_size(self) -> int:
        """Bytes of a message one DATA datagram carries."""
        return self._segment

    @property
    def max_segments(self) -> int:
        return self._max_segments

    def send(self, payload: bytes, now: float) -> int:
        """Queue a message; returns its first sequence number."""
        if self.closed:
            raise RuntimeError("the multicast publisher is closed")
        size = len(payload)
        if size > self.settings.max_message_size:
            raise ValueError(
                f"a message of {size} bytes is larger than the channel's maxMessageSize "
                f"({self.settings.max_message_size}); raise it or send less"
            )
        seg = self._segment
        first = self.next_seq
        key = self._key
        if size <= seg:  # one datagram (the common case, written out)
            self.next_seq = first + 1
            self._stamp += 1
            self._out.append(dg.encode_data(self.stream, self._stamp, first, 0, 1, payload, key))
            self._cache.append(_Cached(first, 0, 1, payload, now))
            self._cache_bytes += size
            self.counters["messages_sent"] += 1
            if self._cache_bytes > self.settings.cache_bytes or self._cache[0].sent < (
                now - self.settings.cache_age
            ):
                self._evict(now)
            return first
        count = -(-size // seg)
        for index in range(count):
            part = payload[index * seg : (index + 1) * seg] if count > 1 else payload
            seq = self.next_seq
            self.next_seq = seq + 1
            self._stamp += 1
            self._out.append(dg.encode_data(self.stream, self._stamp, seq, index, count, part, key))
            self._cache.append(_Cached(seq, index, count, part, now))
            self._cache_bytes += len(part)
        self.counters["messages_sent"] += 1
        self._evict(now)
        return first

    def announce(self, state: bytes, now: float) -> None:
        """Set the feed state announced every ``announce_interval``, and announce it now."""
        if len(state) > self.settings.max_message_size:
            raise ValueError(
                f"a feed state of {len(state)} bytes is larger than the channel's "
                f"maxMessageSize ({self.settings.max_message_size}); raise it or publish "
                f"fewer keys on the channel"
            )
        self._state = state
        self._next_announce = now
        self._announce_due(now)

    def close(self) -> None:
        """Queue a BYE: receivers take the stream as ended once they hold all of it."""
        if not self.closed:
            self.closed = True
            self._stamp += 1
            self._out.append(dg.encode_bye(self.stream, self._stamp, self.next_seq, self._key))

    def datagrams_to_send(self) -> list[bytes]:
        out = self._out
        if not out:
            return []  # (a fresh list: the caller may append to what it gets)
        self._out = []
        self.counters["datagrams_sent"] += len(out)
        self.counters["bytes_sent"] += sum(map(len, out))
        return out

    def next_stamp(self) -> int:
        """Take the stream's next datagram counter (for a datagram the channel makes)."""
        self._stamp += 1
        return self._stamp

    @property
    def has_output(self) -> bool:
        return bool(self._out)

    # ------------------------------------------------------------ NAKs

    def on_nak(self, nak: dg.Nak, now: float) -> None:
        """A receiver's NAK for this stream: retransmit, or say what is lost."""
        self.counters["naks_received"] += 1
        budget = MAX_REPAIR
        self._evict(now)
        for first, length in nak.ranges:
            end = first + length
            if first >= self.next_seq:
                self.counters["bogus_nak"] += 1
                continue
            if end > self.next_seq:
                self.counters["bogus_nak"] += 1
                end = self.next_seq
            oldest = self._cache[0].seq if self._cache else self.next_seq
            if first < oldest:
                self._lost(first, oldest, now)
                first = oldest
            while first < end and budget > 0:
                budget -= 1
                if not self._resend(self._cache[first - oldest], now):
                    return
                first += 1

    def _lost(self, first: int, oldest: int, now: float) -> None:
        last_first, last_oldest, at = self._last_lost
        holdoff = self.settings.retransmit_holdoff
        if last_oldest == oldest and last_first <= first and now - at < holdoff:
            self.counters["retransmit_held"] += 1
            return
        self._last_lost = (first, oldest, now)
        self._stamp += 1
        self._out.append(dg.encode_lost(self.stream, self._stamp, first, oldest - first, self._key))
        self.counters["lost_sent"] += 1

    def _resend(self, entry: _Cached, now: float) -> bool:
        """Retransmit one cached datagram; False when the rate limit stops the NAK."""
        if now - entry.resent < self.settings.retransmit_holdoff:
            self.counters["retransmit_held"] += 1
            return True
        rate = self.settings.retransmit_rate
        if rate:
            self._tokens = min(float(rate), self._tokens + (now - self._tokens_at) * rate)
            self._tokens_at = now
            if self._tokens < len(entry.payload):
                self.counters["rate_limited"] += 1
                return False
            self._tokens -= len(entry.payload)
        entry.resent = now
        self._stamp += 1
        self._out.append(
            dg.encode_data(
                self.stream,
                self._stamp,
                entry.seq,
                entry.index,
                entry.count,
                entry.payload,
                self._key,
                retransmit=True,
            )
        )
        self.counters["retransmitted"] += 1
        return True

    # ------------------------------------------------------------ timers

    def _evict(self, now: float) -> None:
        cache = self._cache
        limit = self.settings.cache_bytes
        oldest_kept = now - self.settings.cache_age
        while cache and (self._cache_bytes > limit or cache[0].sent < oldest_kept):
            self._cache_bytes -= len(cache.popleft().payload)
            self.counters["evicted"] += 1

    @property
    def cache_range(self) -> tuple[int, int]:
        """The sequence numbers the cache holds: ``(oldest, next_seq)``."""
        return (self._cache[0].seq if self._cache else self.next_seq, self.next_seq)

    @property
    def cache_bytes(self) -> int:
        return self._cache_bytes

    def _announce_due(self, now: float) -> None:
        if now >= self._next_announce and not self.closed:
            self._next_announce = now + self.settings.announce_interval
            state = self._state
            room = self.settings.datagram_size - dg.announce_overhead(
                self.name, self._key is not None
            )
            pages = max(1, -(-len(state) // room))
            for page in range(pages):
                self._stamp += 1
                self._out.append(
                    dg.encode_announce(
                        self.stream,
                        self._stamp,
                        self.next_seq,
                        self.name,
                        state[page * room : (page + 1) * room],
                        self._key,
                        page,
                        pages,
                    )
                )

    def tick(self, now: float) -> None:
        """Run the timers: heartbeat, announcement, cache age."""
        if self.closed:
            return
        self._evict(now)
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self.settings.heartbeat_interval
            self._stamp += 1
            self._out.append(
                dg.encode_heartbeat(self.stream, self._stamp, self.next_seq, self.name, self._key)
            )
        self._announce_due(now)

    def next_deadline(self) -> float:
        """When :meth:`tick` has something to do next."""
        due = min(self._next_heartbeat, self._next_announce)
        if self._cache:
            due = min(due, self._cache[0].sent + self.settings.cache_age)
        return due
