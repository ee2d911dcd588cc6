"""Where a remote request/reply round trip spends its time, hop by hop.

``remote.py`` gives the round trip as one number; this script splits it.  It runs
the same two processes (a requestor actor and a replier actor on 127.0.0.1, the
roles of ``remote.py``), with a timestamp (``time.perf_counter_ns``, one clock
for every process on the host) taken at twelve points of the path by thin wrappers
around the methods that mark them.  The two processes' timestamps are merged;
for every round trip each point's first occurrence after the previous point is
taken, and the table gives the median of each step over the round trips whose
points all occurred in order:

==  =====================================================================
 1  requestor: ``RequestFeed.request()`` called
 2  requestor: the request is encoded (``LinkProtocol.data_to_send`` returns)
 3  requestor: the request is written (the direct write, or the loop's flush)
 4  replier: the link's read callback starts (``buffer_updated``)
 5  replier: the request is posted to the replier's mailbox
 6  replier: the replier's request callback starts
 7  replier: ``reply()`` reaches the request's handle
 8  replier: the reply is encoded
 9  replier: the reply is written
10  requestor: the link's read callback starts
11  requestor: the reply is accounted for and posted to the requestor's mailbox
12  requestor: the requestor's reply callback starts; then back to 1
==  =====================================================================

Steps 2->3 and 8->9 are the socket write (the send system call, which on
loopback also queues the bytes at the peer and wakes it); 3->4 and 9->10 are
the kernel and the wake-up of the reading thread; 5->6 and 11->12 are thread
hand-offs (none when the actors share the link's loop).
Each wrapper costs about half a microsecond, so the round trip here is some
5 us longer than in ``remote.py``; the steps are for comparing, not budgets.

Run: ``.venv/bin/python benchmarks/remote_hops.py [--n N] [--kind ours|loop ...]``
(``ours``: the default bus, actors on a blocking dispatcher and the link on its
own I/O thread; ``loop``: the actors on an asyncio dispatcher whose loop the
link shares).
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, print_table, row

#: (point, what it is), in path order; the first letter is the side (Q requestor,
#: P replier)
POINTS = (
    ("Q.request", "requestor: request() called"),
    ("Q.encoded", "requestor: request encoded"),
    ("Q.sent", "requestor: request written"),
    ("P.read", "replier: read callback starts"),
    ("P.posted", "replier: request posted to the replier's mailbox"),
    ("P.callback", "replier: request callback starts"),
    ("P.reply", "replier: reply() reaches the handle"),
    ("P.encoded", "replier: reply encoded"),
    ("P.sent", "replier: reply written"),
    ("Q.read", "requestor: read callback starts"),
    ("Q.posted", "requestor: reply posted to the requestor's mailbox"),
    ("Q.callback", "requestor: reply callback starts"),
)


def _install(side: str, out: str) -> None:
    """(role process) Wrap the methods that mark the points; dump at exit."""
    from actorbus.bus import feeds
    from actorbus.net import _connection, protocol

    marks: list[tuple[int, str]] = []
    mark = marks.append
    clock = time.perf_counter_ns

    def wrap(cls: type, method: str, point: str, after: bool = False) -> None:
        inner: Callable[..., Any] = getattr(cls, method)
        tag = f"{side}.{point}"
        if after:

            def marked(*args: Any, **kwargs: Any) -> Any:
                result = inner(*args, **kwargs)
                mark((clock(), tag))
                return result

        else:

            def marked(*args: Any, **kwargs: Any) -> Any:
                mark((clock(), tag))
                return inner(*args, **kwargs)

        setattr(cls, method, marked)

    wrap(feeds.RequestFeed, "request", "request")
    wrap(protocol.LinkProtocol, "data_to_send", "encoded", after=True)
    wrap(_connection._Connection, "_write_direct", "sent", after=True)
    wrap(_connection._Connection, "_flush_locked", "sent", after=True)
    wrap(_connection._Connection, "buffer_updated", "read")
    wrap(feeds.ReplyFeed, "_send_request", "posted")
    wrap(feeds.ReplyFeed, "_deliver_request", "callback")
    wrap(feeds.RequestHandle, "_reply_from", "reply" if side == "P" else "posted")
    wrap(feeds.RequestFeed, "_deliver_reply", "callback")

    def dump() -> None:
        with open(out, "w") as f:
            f.writelines(f"{t} {tag}\n" for t, tag in marks)

    atexit.register(dump)


def _run(kind: str, n: int, folder: str) -> float:
    """Run the two roles with marks on; the requestor's own RTT p50 (us)."""
    script = str(Path(__file__).resolve())

    def start(side: str, *args: object) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1", HOPS_OUT=f"{folder}/{side}.txt")
        return subprocess.Popen(
            [sys.executable, script, "--role", side, *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    replier = start("P", f"{kind}-replier")
    try:
        assert replier.stdout is not None
        port = replier.stdout.readline().split()[1]
        requestor = start("Q", f"{kind}-requestor", n, port)
        try:
            assert requestor.stdout is not None
            words = requestor.stdout.readline().split()
            if not words or words[0] != "RTT":
                raise RuntimeError(f"requestor: expected RTT, got {words!r}")
        finally:
            _finish(requestor)
    finally:
        _finish(replier)
    return float(words[1])


def _finish(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def steps(folder: str, skip: float = 0.2) -> tuple[dict[tuple[str, str], float], int, int]:
    """Median of each step, over the round trips whose points all occurred in
    order; and (round trips used, round trips seen).  The first ``skip`` of the
    round trips (warm-up) are left out."""
    marks: list[tuple[int, str]] = []
    for side in "PQ":
        with open(f"{folder}/{side}.txt") as f:
            for line in f:
                t, tag = line.split()
                marks.append((int(t), tag))
    marks.sort()
    trips: list[list[tuple[int, str]]] = []
    for t, tag in marks:
        if tag == POINTS[0][0]:
            trips.append([])
        if trips:
            trips[-1].append((t, tag))
    trips = trips[int(len(trips) * skip) :]
    names = [p for p, _ in POINTS]
    per_step: dict[tuple[str, str], list[int]] = {}
    used = 0
    for this, following in itertools.pairwise(trips):
        times: list[int] = []
        want = 0
        for t, tag in this:
            if want < len(names) and tag == names[want]:
                times.append(t)
                want += 1
        if want < len(names):
            continue
        times.append(following[0][0])  # the next request(): the last step's end
        used += 1
        for i in range(len(names)):
            step = (names[i], names[(i + 1) % len(names)])
            per_step.setdefault(step, []).append(times[i + 1] - times[i])
    return (
        {step: statistics.median(v) / 1000 for step, v in per_step.items()},
        used,
        len(trips),
    )


def main(argv: list[str] | None = None) -> list[Row]:
    """Run the round trips with marks, print each step's median."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5_000, help="round trips per kind")
    parser.add_argument("--kind", action="append", choices=("ours", "loop"))
    args = parser.parse_args(argv)
    what = dict(POINTS)
    rows: list[Row] = []
    for kind in args.kind or ["ours", "loop"]:
        with tempfile.TemporaryDirectory(prefix="actorbus-hops-") as folder:
            rtt = _run(kind, args.n, folder)
            medians, used, seen = steps(folder)
        where = "threaded actors" if kind == "ours" else "actors on the link's loop"
        note = f"{used} of {seen} round trips had every point in order; RTT p50 {rtt:.1f} us"
        for (start, end), value in medians.items():
            rows.append(row(f"{where}: {what[start]} -> {what[end]}", value, "us", note=note))
        rows.append(
            row(
                f"{where}: sum of the steps",
                sum(medians.values()),
                "us",
                note="a sum of medians: near, not equal to, the round trip's median",
            )
        )
    print_table(rows, notes=False)
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        _install(sys.argv[2], os.environ["HOPS_OUT"])
        import remote

        remote._role(sys.argv[3:])
    else:
        main()
