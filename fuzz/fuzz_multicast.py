"""Fuzz target for the multicast datagram decoder and the channel behind it:
untrusted datagrams are decoded or refused with a counted reason — nothing
else — and a channel fed any sequence of them never raises and never holds
more than its limits.

Contract checked on every input:

1. ``decode`` returns one of the datagram kinds or raises DatagramError with a
   reason from ``REASONS``;
2. a decoded datagram encodes again to one that decodes to the same fields
   (with the same key);
3. a channel (publisher and receiver halves, following one publisher that
   announced itself) fed the input cut into datagrams counts every one as
   received, refused (per reason), replayed, its own, or taken — and its
   receiver holds no more datagrams past a gap than its receive window, and
   its publisher no more than its cache.

Input layout: byte 0 picks the key (bit 0: with a secret) and how the rest is
cut into datagrams (bits 1-7: the cut seed); the rest is datagrams separated
where the seed says.  Seeds (:func:`seeds`) are valid datagrams of every kind.

With atheris installed::

    .venv/bin/python fuzz/fuzz_multicast.py -max_total_time=600 corpus/multicast/

Without it, :func:`one_input` is the whole target (tests/net/test_multicast_fuzz.py
drives it with hypothesis).
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzing import fuzz, instrumented

with instrumented(__name__):
    from actorbus.config.settings import MulticastSettings
    from actorbus.net.multicast import datagram as dg
    from actorbus.net.multicast.channel import ChannelProtocol

__all__ = ["KEY", "SETTINGS", "one_input", "seeds"]

SETTINGS = MulticastSettings(receive_window=64, cache_bytes=4096, max_message_size=8192)
KEY = dg.channel_key(b"fuzz", SETTINGS.group, SETTINGS.port)
#: the stream the fuzzed channel follows, and its own
PUBLISHER, OWN = 5, 9


def _datagrams(key: bytes | None) -> list[bytes]:
    return [
        dg.encode_data(PUBLISHER, 2, 0, 0, 1, b"hello", key),
        dg.encode_data(PUBLISHER, 3, 1, 0, 2, b"first half", key),
        dg.encode_data(PUBLISHER, 4, 2, 1, 2, b"second half", key, retransmit=True),
        dg.encode_nak(PUBLISHER, 5, OWN, [(0, 2), (4, 1)], key),
        dg.encode_nak(7, 1, PUBLISHER, [(1, 1)], key),
        dg.encode_heartbeat(PUBLISHER, 6, 3, "pub", key),
        dg.encode_lost(PUBLISHER, 7, 0, 2, key),
        dg.encode_announce(PUBLISHER, 8, 3, "pub", b"\x91\x01", key),
        dg.encode_announce(PUBLISHER, 10, 3, "pub", b"\x92\x01", key, 0, 2),
        dg.encode_announce(PUBLISHER, 11, 3, "pub", b"\x02", key, 1, 2),
        dg.encode_bye(PUBLISHER, 9, 3, key),
    ]


def seeds() -> list[bytes]:
    """Valid inputs: each datagram alone, and all of them in one input."""
    out: list[bytes] = []
    for with_key in (0, 1):
        key = KEY if with_key else None
        datagrams = _datagrams(key)
        out.extend(bytes([with_key]) + d for d in datagrams)
        out.append(bytes([with_key | 2]) + b"".join(datagrams))
    return out


def _cut(payload: bytes, seed: int) -> list[bytes]:
    if seed == 0 or len(payload) < 2:
        return [payload]
    rng = random.Random(seed)
    n = min(len(payload) - 1, rng.randint(1, 12))
    cuts = sorted(rng.sample(range(1, len(payload)), n))
    bounds = [0, *cuts, len(payload)]
    return [payload[a:b] for a, b in itertools.pairwise(bounds)]


def one_input(data: bytes) -> None:
    """The fuzz target: raises only when the decoder or the channel breaks its contract."""
    if not data:
        return
    key = KEY if data[0] & 1 else None
    pieces = _cut(data[1:], data[0] >> 1)
    for piece in pieces:
        try:
            d = dg.decode(piece, key)
        except dg.DatagramError as exc:
            if exc.reason not in dg.REASONS:
                raise AssertionError(f"unknown reason {exc.reason!r}") from None
            continue
        again = _encode(d, key)
        if dg.decode(again, key) != d:
            raise AssertionError(f"{d!r} encodes to {again!r}, which decodes otherwise")
    channel = ChannelProtocol(SETTINGS, name="fuzz", stream=OWN, key=key, now=0.0)
    channel.receive(dg.encode_announce(PUBLISHER, 1, 0, "pub", b"", key), 0.0)
    channel.send(b"x" * 3000, 0.0)
    now = 0.0
    for piece in pieces:
        now += 0.01
        channel.receive(piece, now)
        channel.tick(now)
        channel.datagrams_to_send()
        while channel.next_event() is not None:
            pass
    counters = channel.counters
    refused = sum(v for k, v in counters.items() if k.startswith("refused_"))
    if counters["received"] != len(pieces) + 1 or refused > len(pieces):
        raise AssertionError(f"counters do not add up: {counters}")
    held = channel.receiver.held
    if held > SETTINGS.receive_window:
        raise AssertionError(f"{held} datagrams held past a gap")
    assert channel.publisher is not None
    if channel.publisher.cache_bytes > SETTINGS.cache_bytes:
        raise AssertionError(f"the cache holds {channel.publisher.cache_bytes} bytes")


def _encode(d: dg.Decoded, key: bytes | None) -> bytes:
    if isinstance(d, dg.Data):
        return dg.encode_data(
            d.stream, d.stamp, d.seq, d.index, d.count, d.payload, key, retransmit=d.retransmit
        )
    if isinstance(d, dg.Nak):
        return dg.encode_nak(d.stream, d.stamp, d.target, list(d.ranges), key)
    if isinstance(d, dg.Heartbeat):
        return dg.encode_heartbeat(d.stream, d.stamp, d.next_seq, d.name, key)
    if isinstance(d, dg.Lost):
        return dg.encode_lost(d.stream, d.stamp, d.first, d.length, key)
    if isinstance(d, dg.Announce):
        return dg.encode_announce(d.stream, d.stamp, d.as_of, d.name, d.state, key, d.page, d.pages)
    return dg.encode_bye(d.stream, d.stamp, d.next_seq, key)


def main() -> None:
    """Run under atheris (libFuzzer arguments in ``sys.argv``)."""
    fuzz(one_input)


if __name__ == "__main__":
    main()
