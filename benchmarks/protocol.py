"""Link protocol throughput: notify+encode and receive+decode through two
:class:`~actorbus.net.LinkProtocol` objects in memory, against raw msgpack
baselines measured in the same run.

Rows (frames per second, best of ``--repeat`` runs):

* ``raw encode``  — ``msgpack.packb(body)`` + 4-byte length prefix, joined: the
  least any length-prefixed msgpack framing can cost.
* ``notify+data_to_send`` — ``LinkProtocol.notify(key, body)`` for every body,
  ``data_to_send()`` every ``--batch`` frames (one socket write per batch).
* ``raw decode (unpackb/frame)`` — read the prefix, ``msgpack.unpackb`` the body.
* ``raw decode (Unpacker stream)`` — the same bytes through one streaming
  ``msgpack.Unpacker`` (the technique the protocol uses).
* ``receive_data+events`` — the protocol's notify stream fed in 64 KiB reads
  (as a socket delivers it) and every ``NotificationReceived`` taken.

The ``ratio`` column compares each protocol row with the ``unpackb``/``packb``
baseline of the same direction: the protocol does more (sequence numbers, key
ids, state checks, one event object per frame), so a ratio near or above 1.0
means the framing itself costs nothing extra.

Run: ``.venv/bin/python benchmarks/protocol.py [--frames N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import struct
import time
from collections.abc import Callable

import msgpack

from actorbus.net.protocol import NotificationReceived
from actorbus.testing import MemoryPipe

__all__ = ["main"]

KEY = ("demo.DataPoint", "/demo/data")
READ_SIZE = 65_536


def _bodies(count: int) -> list[tuple[object, ...]]:
    # The wire form of a small notification: subject, timestamp, value, flag.
    return [("/demo/data", 1_700_000_000_000 + i, i % 1000, i % 7 == 0) for i in range(count)]


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    """Run the benchmark, print a table, return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256, help="notifies per data_to_send()")
    args = parser.parse_args(argv)
    count: int = args.frames
    batch: int = args.batch
    bodies = _bodies(count)
    prefix = struct.Struct(">I")

    # ---- encode
    def raw_encode() -> bytes:
        packb = msgpack.packb
        pack_len = prefix.pack
        out: list[bytes] = []
        for body in bodies:
            data = packb(body)
            out.append(pack_len(len(data)) + data)
        return b"".join(out)

    def protocol_encode() -> bytes:
        pipe = MemoryPipe()
        pipe.logon()
        notify = pipe.server.notify
        data_to_send = pipe.server.data_to_send
        chunks = []
        for start in range(0, count, batch):
            for body in bodies[start : start + batch]:
                notify(KEY, body)
            chunks.append(data_to_send())
        return b"".join(chunks)

    raw_stream = raw_encode()
    # the protocol's own stream, as the client will receive it (starts with a KEY_DEF)
    proto_stream = protocol_encode()

    # ---- decode
    def raw_decode_unpackb() -> int:
        unpackb = msgpack.unpackb
        read_len = prefix.unpack_from
        data = raw_stream
        offset = 0
        end = len(data)
        frames = 0
        while offset < end:
            (size,) = read_len(data, offset)
            offset += 4
            unpackb(data[offset : offset + size], use_list=False)
            offset += size
            frames += 1
        return frames

    def raw_decode_stream() -> int:
        unpacker = msgpack.Unpacker(use_list=False, max_buffer_size=len(raw_stream) + 16)
        unpacker.feed(raw_stream)
        read_bytes = unpacker.read_bytes
        unpack = unpacker.unpack
        for _ in range(count):
            read_bytes(4)
            unpack()
        return count

    def protocol_decode() -> int:
        pipe = MemoryPipe()
        pipe.logon()
        client = pipe.client
        receive = client.receive_data
        next_event = client.next_event
        received = 0
        view = memoryview(proto_stream)
        for start in range(0, len(proto_stream), READ_SIZE):
            receive(view[start : start + READ_SIZE], 1.0)
            while (event := next_event()) is not None:
                if type(event) is NotificationReceived:
                    received += 1
        if received != count:
            raise AssertionError(f"received {received} notifications, expected {count}")
        return received

    rows: list[dict[str, object]] = []

    def row(name: str, seconds: float, baseline: float | None, size: int) -> None:
        rows.append(
            {
                "case": name,
                "frames_per_s": round(count / seconds),
                "ns_per_frame": round(seconds / count * 1e9),
                "bytes": size,
                "ratio": None if baseline is None else round(baseline / seconds, 2),
            }
        )

    t_raw_enc = _best(raw_encode, args.repeat)
    t_proto_enc = _best(protocol_encode, args.repeat)
    t_raw_dec = _best(raw_decode_unpackb, args.repeat)
    t_raw_stream = _best(raw_decode_stream, args.repeat)
    t_proto_dec = _best(protocol_decode, args.repeat)
    row("raw encode (packb + prefix)", t_raw_enc, None, len(raw_stream))
    row("notify+data_to_send", t_proto_enc, t_raw_enc, len(proto_stream))
    row("raw decode (unpackb/frame)", t_raw_dec, None, len(raw_stream))
    row("raw decode (Unpacker stream)", t_raw_stream, t_raw_dec, len(raw_stream))
    row("receive_data+events", t_proto_dec, t_raw_dec, len(proto_stream))

    print(f"link protocol, {count} notifications, small body {bodies[0]!r}")
    print(f"{'case':<32}{'frames/s':>12}{'ns/frame':>10}{'bytes':>11}{'vs raw':>8}")
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        print(
            f"{r['case']:<32}{r['frames_per_s']:>12,}{r['ns_per_frame']:>10}"
            f"{r['bytes']:>11,}{ratio:>8}"
        )
    return rows


if __name__ == "__main__":
    main()
