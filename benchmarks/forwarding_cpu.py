"""What a forwarding node costs per notification, in process CPU time.

Run: ``PYTHONPATH=src python benchmarks/forwarding_cpu.py [--n 100000] [--rounds 3]``

Three processes on 127.0.0.1: a source publishes N ``Point`` notifications as
fast as ``publish()`` returns, a sink counts them in an actor; in the *direct*
run the sink dials the source, in the *forwarded* run both dial a third
process that forwards (``ServiceSettings(forward=True)``) and runs no actor.
Each process reports its CPU time (``time.process_time()``: user + system, all
threads) spent between the first and the last notification; per message:

* the direct sink's (a link receiver: read, decode, deliver to an actor);
* the forwarder's (read, decode, route, encode, write) and the sink's behind it.

The issue's budget: a forwarder's CPU per message at most 1.5x a direct
link's receiver's.  Best of ``--rounds`` (the host is shared).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import row

from actorbus import Actor, Bus, Notification
from actorbus.config import ConnectionSettings, ServiceSettings

ROOT = Path(__file__).resolve().parents[1]


class Point(Notification, type_name="bench.FwdPoint"):
    n: int
    payload: bytes = b""


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


class _Sink(Actor):
    def __init__(self, n: int) -> None:
        super().__init__(name="sink")
        self.n, self.seen, self.first = n, 0, 0.0
        self.done = threading.Event()

    def startup(self) -> None:
        self.subscribe(Point, "/p", on_message=self.message)

    def message(self, message: Point, feed: Any) -> None:
        if self.seen == 0:
            self.first = time.process_time()
        self.seen += 1
        if self.seen == self.n:
            _say(cpu=time.process_time() - self.first)
            self.done.set()


def role_sink(n: int, port: int) -> None:
    with Bus(node_id="sink") as bus:
        sink = _Sink(n)
        bus.register(sink)
        bus.startup([sink]).wait(10)
        bus.connect("127.0.0.1", port, settings=ConnectionSettings()).wait_logged_on(10)
        _say(ready=True)
        sink.done.wait(600)


def role_source(n: int, port: int) -> None:
    with Bus(node_id="source") as bus:
        bus.listen(port, settings=ServiceSettings())
        feed = bus.publisher(Point, "/p")
        messages = [Point("/p", n=i, payload=b"x" * 32) for i in range(n)]
        _say(ready=True)
        sys.stdin.readline()  # go
        while not feed.is_feed_up():
            time.sleep(0.01)
        for m in messages:
            feed.publish(m)
        sys.stdin.readline()  # the sink counted them: close


def role_forwarder(port_in: int, port_out: int) -> None:
    """Dials the source, serves the sink; measures from "go" to "stop"."""
    with Bus(node_id="forwarder") as bus:
        bus.listen(port_out, settings=ServiceSettings(forward=True))
        link = bus.connect("127.0.0.1", port_in, settings=ConnectionSettings(forward=True))
        link.wait_logged_on(10)
        _say(ready=True)
        sys.stdin.readline()
        start = time.process_time()
        sys.stdin.readline()
        _say(
            cpu=time.process_time() - start, forwarded=sum(x.counters.forwarded for x in bus.links)
        )


def _proc(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--role", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _read(p: subprocess.Popen[str]) -> dict[str, Any]:
    assert p.stdout is not None
    return json.loads(p.stdout.readline())  # type: ignore[no-any-return]


def _send(p: subprocess.Popen[str], line: str = "go") -> None:
    assert p.stdin is not None
    p.stdin.write(line + "\n")
    p.stdin.flush()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(n: int, forwarded: bool) -> dict[str, float]:
    p_src = _free_port()
    source = _proc("source", str(n), str(p_src))
    _read(source)
    procs = [source]
    try:
        if forwarded:
            p_fwd = _free_port()
            fwd = _proc("forwarder", str(p_src), str(p_fwd))
            procs.append(fwd)
            _read(fwd)
            sink = _proc("sink", str(n), str(p_fwd))
        else:
            sink = _proc("sink", str(n), str(p_src))
        procs.append(sink)
        _read(sink)
        if forwarded:
            _send(fwd)
        _send(source)
        sink_cpu = _read(sink)["cpu"]
        out = {"sink_us": sink_cpu / n * 1e6}
        if forwarded:
            _send(fwd, "stop")
            told = _read(fwd)
            out["forwarder_us"] = told["cpu"] / n * 1e6
            out["forwarded"] = told["forwarded"]
        _send(source, "close")
        return out
    finally:
        for p in procs:
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()


def main() -> list[dict[str, Any]]:
    """Run it (or, with ``--role``, be one of its processes); the table's rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--role", nargs="+")
    args = parser.parse_args()
    if args.role:
        role, *rest = args.role
        {"sink": role_sink, "source": role_source, "forwarder": role_forwarder}[role](
            *map(int, rest)
        )
        return []
    direct = min((run(args.n, False) for _ in range(args.rounds)), key=lambda r: r["sink_us"])
    fwd = [run(args.n, True) for _ in range(args.rounds)]
    best = min(fwd, key=lambda r: r["forwarder_us"])
    ratio = best["forwarder_us"] / direct["sink_us"]
    print(f"N={args.n}, best of {args.rounds}")
    print(f"direct link receiver (sink):  {direct['sink_us']:.2f} us CPU / message")
    print(f"forwarder:                    {best['forwarder_us']:.2f} us CPU / message")
    print(f"sink behind the forwarder:    {best['sink_us']:.2f} us CPU / message")
    print(f"forwarder / direct receiver:  {ratio:.2f}x (budget <= 1.5x)")
    print(f"forwarded counter: {best['forwarded']}")
    return [
        row(
            "forwarder: process CPU per notification",
            best["forwarder_us"],
            "us",
            baseline_name="a direct link's receiver (sink actor)",
            baseline_value=direct["sink_us"],
            budget="<= 1.5x",
            ok=ratio <= 1.5,
            note=f"N={args.n}, best of {args.rounds}; 3 processes on 127.0.0.1",
        )
    ]


if __name__ == "__main__":
    main()
