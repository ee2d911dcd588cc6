"""Bytecodes per remote request/reply round trip: a cost that noise does not move.

``remote.py`` times the round trip between two processes; on a shared VM its p50
moves by 10-20 % from run to run, which hides changes of a few microseconds.
This script counts instead: the Python bytecode instructions the interpreter
executes per round trip, on every thread, with ``sys.settrace`` and
``frame.f_trace_opcodes`` (an ``opcode`` event per instruction; the counting
is thread-private, so threads do not race on the counts).  The count of one
configuration changes by a few per cent between runs (how reads happen to
split, timers that fire now and then); a change of the code on the path shows
exactly.

What runs, in one process (the tracer makes everything some 100 times slower,
so times mean nothing here; the round trips are those of ``remote.py``'s
request/reply rows):

* **ours, threaded actors (the default bus)** — two ``Bus`` objects linked over
  127.0.0.1, ``remote.py``'s requestor and replier actors on their default
  (blocking) dispatchers, the link on its own I/O thread;
* **ours, actors on the link's loop** — the same, the actors on an asyncio
  dispatcher whose loop the link shares;
* **the same two, authenticated** — both nodes hold a shared secret, which
  the logon proves (CHALLENGE/PROOF); nothing after the logon should differ,
  and the rows say what the plain ones counted;
* **the same two, over TLS** — the records are made and read in C (OpenSSL);
* **raw uvloop echo** — ``remote.py``'s raw baseline: a uvloop server answering
  each length-prefixed msgpack request frame in ``data_received``, a client
  writing the next request once the reply's future is done.

Each row is bytecodes per round trip over both nodes; the ratio is against the
raw echo.  Under the rows, the count of the threaded configuration is split by
thread and source file, with the heaviest functions and the heaviest single
line: the profile is flat (docs/performance.md, "Bytecodes per round trip").

How the count turns into time was measured apart from this script: work of a
known count added to each read of a link (both nodes) lengthened the two-process
round trip by 1.5-1.7x its cost measured warm in a loop, so a bytecode on this
path costs about 1.5 times what it costs warm.

Run: ``.venv/bin/python benchmarks/remote_opcodes.py [--n N]`` (about 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import remote
from _common import Row, print_table, row

from actorbus.config.schema import BusConfig
from actorbus.node import Bus

__all__ = ["BUDGET_SHARED_LOOP", "BUDGET_THREADED", "layer_of", "main", "per_layer"]

#: Budgets (bytecodes per round trip, both nodes): the threaded default and the
#: actors on the link's loop.
BUDGET_THREADED = 2_200
BUDGET_SHARED_LOOP = 2_000

#: (thread name, file name, function name) -> bytecodes
_Counts = collections.Counter[tuple[str, str, str]]


class Opcodes:
    """Counts the bytecodes every thread executes while :attr:`on` is true.

    Install with :meth:`tracing` before the threads to count are started
    (``threading.settrace`` reaches only new threads; the calling thread is
    traced with ``sys.settrace``).  Every frame is traced from its first
    instruction, so frames that started before counting began (a worker's
    loop) are counted too once it is on."""

    def __init__(self) -> None:
        self.on = False
        self._per_thread: list[tuple[_Counts, collections.Counter[tuple[str, int]]]] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        #: (file name, function name) -> the layer it belongs to (layer_of)
        self.layers: dict[tuple[str, str], str] = {}

    def _counters(self) -> tuple[_Counts, collections.Counter[tuple[str, int]]]:
        mine = getattr(self._local, "counters", None)
        if mine is None:
            mine = (collections.Counter(), collections.Counter())
            self._local.counters = mine
            with self._lock:
                self._per_thread.append(mine)
        return mine

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        ops, lines = self._counters()
        code = frame.f_code
        where = code.co_filename.rsplit("/", 1)[-1]
        key = (threading.current_thread().name, where, code.co_name)
        self.layers[(where, code.co_name)] = layer_of(code.co_filename)

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode" and self.on:
                ops[key] += 1
                lines[(where, frame.f_lineno)] += 1
            return local

        return local

    @contextmanager
    def tracing(self) -> Iterator[Opcodes]:
        threading.settrace(self._call)
        sys.settrace(self._call)
        try:
            yield self
        finally:
            sys.settrace(None)
            threading.settrace(None)

    def ops(self) -> _Counts:
        total: _Counts = collections.Counter()
        for ops, _ in self._per_thread:
            total.update(ops)
        return total

    def lines(self) -> collections.Counter[tuple[str, int]]:
        total: collections.Counter[tuple[str, int]] = collections.Counter()
        for _, lines in self._per_thread:
            total.update(lines)
        return total


class _CountedRequestor(remote.Requestor):
    """``remote.py``'s requestor, counting from the first round trip after its
    warm-up to its last reply."""

    def __init__(self, n: int, warmup: int, counter: Opcodes) -> None:
        super().__init__(n, warmup)
        self.counter = counter

    def send(self) -> None:
        if len(self.times) == self.warmup:
            self.counter.on = True
        super().send()

    def got(self, remaining: int, reply: Any, handle: Any) -> None:
        super().got(remaining, reply, handle)
        if self.done.is_set():
            self.counter.on = False


#: the authenticated rows' shared secret (both nodes hold it)
_KEY = bytes(range(32))


def count_ours(
    config: BusConfig, n: int, warmup: int, tls: bool = False, secret: bytes | None = None
) -> tuple[Opcodes, int]:
    """Bytecodes of ``n`` round trips between two linked buses; (counts, lost).
    With ``tls`` the link runs over TLS (``remote.py``'s certificates, which
    ``remote._tls_files()`` must have made); with ``secret`` both nodes hold it
    and the logon proves it."""
    counter = Opcodes()
    server = remote._tls(True) if tls else None
    client = remote._tls(False) if tls else None
    with counter.tracing(), Bus(config, node_id="rep") as b, Bus(config, node_id="req") as a:
        service = b.listen(0, tls=server, secret=secret)
        replier = remote._Replier(name="replier")
        b.register(replier)
        b.startup(replier).wait(10)
        a.connect("127.0.0.1", service.port, tls=client, secret=secret).wait_logged_on(10)
        requestor = _CountedRequestor(n, warmup, counter)
        a.register(requestor)
        a.startup(requestor).wait(10)
        if not requestor.up.wait(10):
            raise RuntimeError("the replier never came up")
        requestor.post(requestor.go)
        if not requestor.done.wait(remote.TIMEOUT * 10):
            raise RuntimeError("the round trips did not finish")
        return counter, requestor.lost


def count_raw(n: int, warmup: int) -> Opcodes:
    """Bytecodes of ``n`` round trips of ``remote.py``'s raw uvloop echo."""
    counter = Opcodes()
    with counter.tracing():
        server_loop = remote._uvloop()
        server = server_loop.run_until_complete(
            server_loop.create_server(remote._EchoProtocol, "127.0.0.1", 0)
        )
        io = remote._loop_thread(server_loop)
        port = server.sockets[0].getsockname()[1]

        async def ask() -> None:
            # role_raw_requestor's loop, without its clock
            loop = asyncio.get_running_loop()
            transport, proto = await loop.create_connection(
                remote._AskingProtocol, "127.0.0.1", port
            )
            for i in range(n + warmup):
                if i == warmup:
                    counter.on = True
                body = (remote.SUBJECT, 1_700_000_000_000 + i, i)
                frame = remote._PACK((22, i + 1, 0, i, body))
                proto.waiter = loop.create_future()
                transport.write(remote._PREFIX.pack(len(frame)) + frame)
                await proto.waiter
            counter.on = False
            transport.close()

        loop = remote._uvloop()
        try:
            loop.run_until_complete(ask())
        finally:
            loop.close()
            remote._stop_loop(server_loop, io, server)
    return counter


def layer_of(filename: str) -> str:
    """The layer of actorbus a code object's file belongs to (docs/architecture.md,
    "Layers"): ``net``, ``bus``, ``actors``, ..., ``codec (generated)`` for the
    generated encoders, decoders and constructors, ``benchmark actors`` for this
    benchmark's own code, ``python`` for the standard library."""
    if filename.startswith("<actorbus"):
        return "codec (generated)"
    parts = filename.split("/")
    if "actorbus" in parts:
        rest = parts[len(parts) - 1 - parts[::-1].index("actorbus") + 1 :]
        return rest[0].removesuffix(".py") if rest else "actorbus"
    if "benchmarks" in parts:
        return "benchmark actors"
    return "python"


def per_layer(counter: Opcodes, n: int) -> dict[str, float]:
    """Bytecodes per round trip by layer (both nodes, every thread)."""
    totals: collections.Counter[str] = collections.Counter()
    for (_, where, name), count in counter.ops().items():
        totals[counter.layers.get((where, name), "python")] += count
    return {layer: count / n for layer, count in totals.most_common()}


def _breakdown(counter: Opcodes, n: int, top: int) -> None:
    """Print where the bytecodes of one configuration are: by thread and file, the
    heaviest functions, the heaviest lines."""
    ops = counter.ops()
    total = sum(ops.values())
    by_file: collections.Counter[tuple[str, str]] = collections.Counter()
    for (thread, where, _), count in ops.items():
        by_file[(thread, where)] += count
    print(f"\n  by thread and file (bytecodes per round trip, both nodes; {total / n:.0f} in all)")
    for (thread, where), count in by_file.most_common():
        if count / n >= 1:
            print(f"    {thread:<24} {where:<36} {count / n:8.1f}  {100 * count / total:5.1f} %")
    print(f"\n  the {top} heaviest functions")
    for (thread, where, name), count in ops.most_common(top):
        print(f"    {thread:<24} {where + ':' + name:<48} {count / n:8.1f}")
    lines = counter.lines()
    print(f"\n  the {top} heaviest lines")
    for (where, line), count in lines.most_common(top):
        print(f"    {where + ':' + str(line):<40} {count / n:8.1f}  {100 * count / total:5.2f} %")


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="round trips counted per row")
    parser.add_argument("--top", type=int, default=12, help="functions and lines listed")
    args = parser.parse_args(argv)
    n, warmup = args.n, max(args.n // 10, 50)

    started = time.monotonic()
    raw = count_raw(n, warmup)
    raw_per_rt = sum(raw.ops().values()) / n
    rows: list[Row] = []
    threaded: Opcodes | None = None
    layers: dict[str, dict[str, float]] = {}
    plain: dict[str, float] = {}
    with remote._tls_files() as has_tls:
        for name, config, budget, tls, secret in (
            ("threaded actors (default)", remote._BUSES["ours"], BUDGET_THREADED, False, None),
            ("actors on the link's loop", remote._BUSES["loop"], BUDGET_SHARED_LOOP, False, None),
            ("threaded actors (default), authenticated", remote._BUSES["ours"], None, False, _KEY),
            ("actors on the link's loop, authenticated", remote._BUSES["loop"], None, False, _KEY),
            ("threaded actors (default), TLS", remote._BUSES["ours"], None, True, None),
            ("actors on the link's loop, TLS", remote._BUSES["loop"], None, True, None),
        ):
            if tls and not has_tls:
                continue  # (no openssl command to make the certificates)
            counter, lost = count_ours(config, n, warmup, tls, secret)
            if threaded is None:
                threaded = counter
            per_rt = sum(counter.ops().values()) / n
            layers[name] = per_layer(counter, n)
            note = (
                f"{n} round trips after {warmup} of warm-up, both nodes in one process; "
                f"lost requests: {lost}"
            )
            if budget is None:
                plain_name, _, variant = name.rpartition(", ")
                without = "TLS" if variant == "TLS" else "a secret"
                note += f"; the same without {without}: {plain[plain_name]:,.1f}"
            else:
                plain[name] = per_rt
                note += f"; budget <= {budget:,}: {'met' if per_rt <= budget else 'missed'}"
            rows.append(
                row(
                    f"request/reply round trip, bytecodes, {name}",
                    per_rt,
                    "ops",
                    baseline_name="raw uvloop echo, bytecodes",
                    baseline_value=raw_per_rt,
                    note=note,
                )
            )
    print_table(rows)
    names = list(layers)
    print("\nby layer (bytecodes per round trip, both nodes)")
    print(f"    {'layer':<20}" + "".join(f"{x[:26]:>28}" for x in names))
    for layer in sorted(
        {k for v in layers.values() for k in v}, key=lambda k: -layers[names[0]].get(k, 0)
    ):
        print(f"    {layer:<20}" + "".join(f"{layers[x].get(layer, 0.0):>28.1f}" for x in names))
    assert threaded is not None
    print("\nthreaded actors (default):", end="")
    _breakdown(threaded, n, args.top)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return rows


if __name__ == "__main__":
    main()
