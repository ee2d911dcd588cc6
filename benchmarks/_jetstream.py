"""NATS JetStream as the peer of the persistent-publish benchmarks: a real
``nats-server -js`` storing a file-backed stream, and a nats-py publisher
waiting for the server's acknowledgement of each message.

Not a benchmark itself (:mod:`run_all` skips files starting with ``_``): a
helper :mod:`qos` imports to measure JetStream in the same run as ours.

What it gives
-------------
:func:`jetstream_server`
    A context manager: a ``nats-server`` with JetStream on, its store in a
    temporary directory (``-js -sd DIR``); yields the URL.  With
    ``sync_always`` the server is started from a configuration file with
    ``sync_interval: always``: it fsyncs every message before acknowledging it
    (by default JetStream acknowledges a message once it is written to its
    file, and fsyncs the store every two minutes).
:func:`pipelined`
    Acknowledged publishes/s with ``js.publish_async`` (nats-py's pipelined
    publish: many publishes in flight, at most ``max_pending``, each a future
    resolved by the server's ack): the way a fast JetStream publisher works.
:func:`sequential`
    ``await js.publish(...)`` one after the other: acknowledged publishes/s and
    the latency of each publish -> ack.

Every run publishes to a fresh stream (``QOSBENCH``, file storage, the one
subject), checks that every publish was acknowledged with a distinct stream
sequence and that the stream holds them all, then deletes the stream.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _nats import TIMEOUT, NatsBenchError, _connect, _nats, _run, nats_server

__all__ = ["STREAM", "SUBJECT", "jetstream_server", "pipelined", "sequential"]

STREAM = "QOSBENCH"
SUBJECT = "qosbench.points"


@contextlib.contextmanager
def jetstream_server(*, sync_always: bool = False) -> Iterator[str]:
    """A JetStream ``nats-server`` whose store is a temporary directory; yields its URL."""
    with tempfile.TemporaryDirectory(prefix="bench-js-") as where:
        store = Path(where, "store")
        if sync_always:
            conf = Path(where, "js.conf")
            conf.write_text(f'jetstream {{\n  store_dir: "{store}"\n  sync_interval: always\n}}\n')
            args: tuple[str, ...] = ("-c", str(conf))
        else:
            args = ("-js", "-sd", str(store))
        with nats_server(args=args) as url:
            yield url


async def _fresh_stream(nc: Any) -> Any:
    from nats.js.api import StorageType

    js = nc.jetstream(timeout=TIMEOUT)
    with contextlib.suppress(_nats().js.errors.NotFoundError):
        await js.delete_stream(STREAM)
    await js.add_stream(name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE)
    return js


async def _check_and_drop(js: Any, n: int, seqs: set[int]) -> None:
    if len(seqs) != n:
        raise NatsBenchError(f"jetstream: {len(seqs)} distinct acks for {n} publishes")
    info = await js.stream_info(STREAM)
    if info.state.messages != n:
        raise NatsBenchError(f"jetstream: the stream holds {info.state.messages} of {n}")
    await js.delete_stream(STREAM)


async def _pipelined(url: str, n: int, payload: bytes, max_pending: int) -> float:
    nc = await _connect(url)
    try:
        js = await _fresh_stream(nc)
        js = nc.jetstream(timeout=TIMEOUT, publish_async_max_pending=max_pending)
        publish = js.publish_async
        futures = []
        t0 = time.perf_counter()
        for _ in range(n):
            futures.append(await publish(SUBJECT, payload, wait_stall=TIMEOUT))
        acks = [await f for f in futures]
        elapsed = time.perf_counter() - t0
        await _check_and_drop(js, n, {a.seq for a in acks})
        return n / elapsed
    finally:
        await nc.close()


async def _sequential(url: str, n: int, payload: bytes) -> tuple[float, list[float]]:
    nc = await _connect(url)
    try:
        js = await _fresh_stream(nc)
        publish = js.publish
        seqs: set[int] = set()
        times: list[float] = []
        clock = time.perf_counter_ns
        t0 = clock()
        for _ in range(n):
            t = clock()
            ack = await publish(SUBJECT, payload)
            times.append((clock() - t) / 1000)
            seqs.add(ack.seq)
        elapsed = (clock() - t0) / 1e9
        await _check_and_drop(js, n, seqs)
        return n / elapsed, sorted(times)
    finally:
        await nc.close()


def pipelined(url: str, n: int, payload: bytes, *, max_pending: int = 4000) -> float:
    """Acknowledged publishes/s of ``n`` ``js.publish_async`` calls, at most
    ``max_pending`` unacknowledged: first publish to last ack."""
    return _run(_pipelined(url, n, payload, max_pending))


def sequential(url: str, n: int, payload: bytes) -> tuple[float, list[float]]:
    """(acknowledged publishes/s, sorted publish -> ack latencies in us) of ``n``
    sequential ``await js.publish`` calls."""
    return _run(_sequential(url, n, payload))
