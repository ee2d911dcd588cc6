"""One node on one multicast channel, with no I/O: the publisher and receiver
halves behind one datagram entry point.

A :class:`ChannelProtocol` takes every datagram the channel's socket reads
(:meth:`receive`) — its own included, as multicast loops them back — decodes it
once, drops and counts what :func:`~.datagram.decode` refuses (per reason, in
``counters["refused_<reason>"]``), and hands the rest to the half it is for:
NAKs for this node's stream to the publisher half, everything from other
streams to the receiver half (other receivers' NAKs too: suppression).  With a
secret, a datagram whose per-sender counter (``stamp``) was seen already or
is older than :data:`REPLAY_WINDOW` counters below the newest is a replay:
dropped and counted (``replayed``).  The stream number is drawn at random per
run (the per-run nonce), so datagrams of an earlier run do not pass for this
run's.

Everything to send comes out of :meth:`datagrams_to_send`; events out of
:meth:`next_event`.  :meth:`tick` runs both halves' timers;
:meth:`next_deadline` says when to call it next.
"""

from __future__ import annotations

import random

from actorbus.config.settings import MulticastSettings

from . import datagram as dg
from .publisher import PublisherProtocol
from .receiver import ReceiverEvent, ReceiverProtocol

__all__ = ["REPLAY_WINDOW", "ChannelProtocol", "new_stream"]

#: with a secret: how far below a sender's newest counter a datagram may still come
REPLAY_WINDOW = 1_024
#: senders whose replay windows are kept (the oldest is forgotten first)
_MAX_WINDOWS = 4_096


def new_stream(rng: random.Random | None = None) -> int:
    """A random stream number (the per-run nonce): 1 to 2**64-1."""
    source = rng if rng is not None else random.SystemRandom()
    return source.randrange(1, 1 << 64)


class ChannelProtocol:
    """A node's publisher (optional) and receiver on one channel."""

    def __init__(
        self,
        settings: MulticastSettings,
        *,
        name: str,
        stream: int,
        key: bytes | None,
        now: float,
        rng: random.Random | None = None,
        publish: bool = True,
    ) -> None:
        self.settings = settings
        self.stream = stream
        self.key = key
        self.publisher = (
            PublisherProtocol(settings, stream=stream, name=name, key=key, now=now)
            if publish
            else None
        )
        self.receiver = ReceiverProtocol(
            settings, own_stream=stream, rng=rng or random.Random(), now=now
        )
        self._max_segments = min(
            dg.MAX_SEGMENTS,
            -(
                -settings.max_message_size
                // (settings.datagram_size - dg.data_overhead(key is not None))
            ),
        )
        self._nak_stamp = 0
        #: this node's stream as the header holds it (bytes 8 to 16)
        self._own = stream.to_bytes(8, "big")
        #: sender -> (newest counter, bitmask of the REPLAY_WINDOW below it)
        self._windows: dict[int, tuple[int, int]] = {}
        self.counters: dict[str, int] = {f"refused_{r}": 0 for r in dg.REASONS}
        self.counters.update(received=0, replayed=0, own=0, naks_for_others=0)

    # ------------------------------------------------------------ in

    def receive(self, datagram: bytes, now: float) -> None:
        """One datagram as the socket read it."""
        self.counters["received"] += 1
        if datagram[8:16] == self._own:  # multicast loops our own back: not even decoded
            self.counters["own"] += 1
            return
        try:
            d = dg.decode(datagram, self.key, self._max_segments)
        except dg.DatagramError as exc:
            self.counters[f"refused_{exc.reason}"] += 1
            return
        if d.stream == self.stream:
            self.counters["own"] += 1
            return
        if self.key is not None and not self._fresh(d.stream, d.stamp):
            self.counters["replayed"] += 1
            return
        receiver = self.receiver
        kind = type(d)
        if kind is dg.Data:
            receiver.on_data(d, now)  # type: ignore[arg-type]
        elif kind is dg.Nak:
            assert isinstance(d, dg.Nak)
            if d.target == self.stream and self.publisher is not None:
                self.publisher.on_nak(d, now)
            else:
                self.counters["naks_for_others"] += 1
                receiver.on_nak(d, now)
        elif kind is dg.Heartbeat:
            receiver.on_heartbeat(d, now)  # type: ignore[arg-type]
        elif kind is dg.Lost:
            receiver.on_lost(d, now)  # type: ignore[arg-type]
        elif kind is dg.Announce:
            receiver.on_announce(d, now)  # type: ignore[arg-type]
        else:
            receiver.on_bye(d, now)  # type: ignore[arg-type]

    def _fresh(self, sender: int, stamp: int) -> bool:
        """``stamp`` was not seen from ``sender`` and is within its window."""
        windows = self._windows
        newest, seen = windows.get(sender, (0, 0))
        if stamp > newest:
            shift = stamp - newest
            seen = ((seen << shift) | (1 << (shift - 1))) if shift < REPLAY_WINDOW else 0
            seen &= (1 << REPLAY_WINDOW) - 1
            if sender not in windows and len(windows) >= _MAX_WINDOWS:
                del windows[next(iter(windows))]
            windows[sender] = (stamp, seen)
            return True
        behind = newest - stamp
        if behind == 0 or behind > REPLAY_WINDOW or seen >> (behind - 1) & 1:
            return False
        windows[sender] = (newest, seen | 1 << (behind - 1))
        return True

    # ------------------------------------------------------------ out

    def send(self, payload: bytes, now: float) -> int:
        """Publish a message on the channel; returns its first sequence number."""
        if self.publisher is None:
            raise RuntimeError("this channel only receives (publish=False)")
        return self.publisher.send(payload, now)

    def datagrams_to_send(self) -> list[bytes]:
        out = self.publisher.datagrams_to_send() if self.publisher is not None else []
        for target, ranges in self.receiver.naks_to_send():
            self._nak_stamp += 1
            # a receive-only node's NAKs carry its stream too: the replay window's
            stamp = self._nak_stamp if self.publisher is None else self.publisher.next_stamp()
            out.append(dg.encode_nak(self.stream, stamp, target, ranges, self.key))
        return out

    def next_event(self) -> ReceiverEvent | None:
        return self.receiver.next_event()

    # ------------------------------------------------------------ timers

    def tick(self, now: float) -> None:
        if self.publisher is not None:
            self.publisher.tick(now)
        self.receiver.tick(now)

    def next_deadline(self) -> float:
        due = self.receiver.next_deadline()
        if self.publisher is not None:
            due = min(due, self.publisher.next_deadline())
        return due

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
