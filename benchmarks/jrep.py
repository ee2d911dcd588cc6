"""Two nodes federated over J.REP (WebSocket + JSON) between two processes, next
to the TCP link and to a raw ``websockets`` client and server doing the same
JSON framing work, all measured in the same run.

What is measured (each number the best of ``--rounds`` rounds; the rounds of the
three kinds interleaved so background load hits them alike; every round starts
two fresh processes on 127.0.0.1):

(a) **one-way notifications/s** — process *source* publishes N ``Point``
    notifications (the message of ``remote.py``: subject, timestamp, an int, a
    32-byte payload; built before the clock starts) as fast as ``publish()``
    returns; process *sink* counts them in a subscriber actor.  Rate = N / (time
    the last one is counted - time the first ``publish()`` began), both read
    from ``time.monotonic_ns()``.  J.REP: the source node dials the sink node's
    gateway (``bus.connect_jrep``); the TCP link: ``bus.connect`` to
    ``bus.listen``.  Baseline: a ``websockets`` client turns each message into
    the J.REP object (``ToSubject``, ``Type``, ``Value`` with the ISO timestamp,
    the int and the base64 payload), sends them 256 per JSON array as J.REP
    does, and a ``websockets`` server parses each array and counts the items.
    Budget: J.REP >= 0.5x the raw websockets rate.
(b) **request/reply round trip** — a requestor actor sends the next ``Ping``
    from its reply callback to a replier actor in the other process (the
    ``remote.py`` actors); each round trip timed with ``perf_counter_ns``.
    Baseline: a ``websockets`` client sends one J.REP request object in an
    array and awaits the reply array from a ``websockets`` server that parses
    it and answers at once.  Budget: J.REP p50 <= 2x the raw p50.  With
    ``--loop``, also the round trip with both nodes' actors on an asyncio
    dispatcher whose loop the session (or the link) shares (reported, no budget).

The gateway's per-session rate limit is off for these runs (``message_rate=0``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RoleProc, Row, best_of, percentile, print_table, row
from remote import (
    _BUSES,
    LOST_AFTER,
    PAYLOAD,
    SUBJECT,
    TIMEOUT,
    Point,
    Requestor,
    Sink,
    _Replier,
    _say,
    _uvloop,
    role_ours_replier,
    role_ours_requestor,
    role_ours_sink,
    role_ours_source,
)

from actorbus import Bus, FeedState
from actorbus.net.jrep import GatewaySettings

__all__ = ["main"]

N_ONE_WAY = 20_000
N_RTT = 2_000
ROUNDS = 3
#: J.REP messages per WebSocket message (as the gateway and the client bus send)
CHUNK = 256
_SETTINGS = GatewaySettings(message_rate=0, message_queue_size=10_000_000, max_batch=10_000)


# ============================================================ roles: J.REP


def role_jrep_sink(n: int) -> None:
    with Bus(_BUSES["ours"], node_id="sink") as bus:
        gateway = bus.serve_jrep(0, name="bench", settings=_SETTINGS)
        sink = Sink(n)
        bus.register(sink)
        bus.startup(sink).wait(10)
        _say("PORT", gateway.port)
        if not sink.done.wait(TIMEOUT):
            raise SystemExit(f"sink: only {sink.count} of {n} notifications arrived")
        _say("DONE", sink.t_last, sink.count)


def role_jrep_source(n: int, port: int) -> None:
    with Bus(node_id="source") as bus:
        up = threading.Event()
        client = bus.connect_jrep(f"ws://127.0.0.1:{port}/jrep")
        if not client.wait_connected(10):
            raise SystemExit("source: no session with the gateway")
        feed = bus.publisher(
            Point, SUBJECT, on_status=lambda state, f: up.set() if state is FeedState.UP else None
        )
        messages = [Point(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
        if not up.wait(10):
            raise SystemExit("source: the sink never subscribed")
        publish = feed.publish
        t0 = time.monotonic_ns()
        for message in messages:
            publish(message)
        _say("SENT", t0, time.monotonic_ns())
        sys.stdin.read()


def role_jrep_replier(bus_name: str = "ours") -> None:
    with Bus(_BUSES[bus_name], node_id="replier") as bus:
        gateway = bus.serve_jrep(0, name="bench", settings=_SETTINGS)
        replier = _Replier(name="replier")
        bus.register(replier)
        bus.startup(replier).wait(10)
        _say("PORT", gateway.port)
        sys.stdin.read()


def role_jrep_requestor(n: int, port: int, bus_name: str = "ours") -> None:
    with Bus(_BUSES[bus_name], node_id="requestor") as bus:
        client = bus.connect_jrep(f"ws://127.0.0.1:{port}/jrep")
        if not client.wait_connected(10):
            raise SystemExit("requestor: no session with the gateway")
        requestor = Requestor(n, warmup=max(n // 10, 100))
        bus.register(requestor)
        bus.startup(requestor).wait(10)
        if not requestor.up.wait(10):
            raise SystemExit("requestor: the replier never came up")
        requestor.post(requestor.go)
        if not requestor.done.wait(TIMEOUT):
            raise SystemExit("requestor: round trips did not finish")
        times = sorted(requestor.times[requestor.warmup :])
        _say("RTT", percentile(times, 50) / 1000, percentile(times, 99) / 1000, requestor.lost)


# ============================================================ roles: raw websockets


def _point_json(i: int, when: datetime.datetime) -> dict[str, Any]:
    return {
        "ToSubject": SUBJECT,
        "Type": "bench.Point",
        "Value": {
            "timestamp": when.isoformat(),
            "value": i,
            "payload": base64.b64encode(PAYLOAD).decode("ascii"),
        },
    }


def role_raw_sink(n: int) -> None:
    from websockets.asyncio.server import serve

    async def run() -> None:
        done = asyncio.Event()
        state = {"count": 0, "t_last": 0}

        async def handler(ws: Any) -> None:
            async for frame in ws:
                for item in json.loads(frame):
                    _ = item["Value"]["value"]
                    state["count"] += 1
                if state["count"] >= n:
                    state["t_last"] = time.monotonic_ns()
                    done.set()

        async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            _say("PORT", port)
            await asyncio.wait_for(done.wait(), TIMEOUT)
            _say("DONE", state["t_last"], state["count"])

    _uvloop().run_until_complete(run())


def role_raw_source(n: int, port: int) -> None:
    from websockets.asyncio.client import connect

    async def run() -> None:
        async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
            now = datetime.datetime.now(datetime.UTC)
            t0 = time.monotonic_ns()
            for start in range(0, n, CHUNK):
                batch = [_point_json(i, now) for i in range(start, min(n, start + CHUNK))]
                await ws.send(json.dumps(batch, separators=(",", ":")))
            _say("SENT", t0, time.monotonic_ns())
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    _uvloop().run_until_complete(run())


def role_raw_replier() -> None:
    from websockets.asyncio.server import serve

    async def run() -> None:
        async def handler(ws: Any) -> None:
            async for frame in ws:
                (request,) = json.loads(frame)
                reply = {
                    "ToSubject": request["ReplyTo"],
                    "Type": "bench.Pong",
                    "Value": {"value": request["Value"]["value"], "status": "OK_FINAL"},
                    "Remaining": 0,
                }
                await ws.send(json.dumps([reply], separators=(",", ":")))

        async with serve(handler, "127.0.0.1", 0, compression=None) as server:
            _say("PORT", next(iter(server.sockets)).getsockname()[1])
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    _uvloop().run_until_complete(run())


def role_raw_requestor(n: int, port: int) -> None:
    from websockets.asyncio.client import connect

    async def run() -> None:
        async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
            warmup = max(n // 10, 100)
            times: list[int] = []
            for i in range(n + warmup):
                started = time.perf_counter_ns()
                request = {
                    "ToSubject": SUBJECT,
                    "Type": "bench.Ping",
                    "ReplyTo": f".p/{i}",
                    "Value": {"value": i},
                }
                await ws.send(json.dumps([request], separators=(",", ":")))
                (reply,) = json.loads(await asyncio.wait_for(ws.recv(), LOST_AFTER))
                _ = reply["Value"]["value"]
                times.append(time.perf_counter_ns() - started)
            done = sorted(times[warmup:])
            _say("RTT", percentile(done, 50) / 1000, percentile(done, 99) / 1000, 0)

    _uvloop().run_until_complete(run())


# ==================================================================== the parent


class _Proc(RoleProc):
    """A role of this script in a subprocess."""

    script = __file__


def _one_way(kind: str, n: int) -> float:
    with _Proc(f"{kind}-sink", n) as sink:
        port = int(sink.expect("PORT")[0])
        with _Proc(f"{kind}-source", n, port) as source:
            t0, _ = map(int, source.expect("SENT"))
            t_last, _count = map(int, sink.expect("DONE"))
    return n / ((t_last - t0) / 1e9)


def _round_trip(kind: str, n: int) -> tuple[float, float, int]:
    with _Proc(f"{kind}-replier") as replier:
        port = int(replier.expect("PORT")[0])
        with _Proc(f"{kind}-requestor", n, port) as requestor:
            p50, p99, lost = requestor.expect("RTT")
    return float(p50), float(p99), int(lost)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("-n", type=int, default=N_ONE_WAY, help="notifications per round")
    parser.add_argument("--rtt", type=int, default=N_RTT, help="round trips per round")
    parser.add_argument(
        "--loop",
        action="store_true",
        help="also the round trip with the actors on an asyncio dispatcher whose loop the "
        "J.REP session (and the TCP link) shares: no thread hand-offs",
    )
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    kinds = ("jrep", "tcp", "raw")
    loop_kinds = ("jrep_loop", "tcp_loop") if args.loop else ()
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    rtts: dict[str, list[tuple[float, float, int]]] = {k: [] for k in kinds + loop_kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            rates[kind].append(_one_way(kind, args.n))
            rtts[kind].append(_round_trip(kind, args.rtt))
        for kind in loop_kinds:
            rtts[kind].append(_round_trip(kind, args.rtt))
    rate = {k: max(v) for k, v in rates.items()}
    p = {k: best_of(v, key=lambda r: r[0], lowest=True) for k, v in rtts.items()}
    note = f"best of {args.rounds}, interleaved"
    one_way_ok = rate["jrep"] >= 0.5 * rate["raw"]
    p50_ok = p["jrep"][0] <= 2 * p["raw"][0]
    lost = sum(r[2] for r in rtts["jrep"])
    rows = [
        row(
            "J.REP federation one-way notifications",
            rate["jrep"],
            "msg/s",
            baseline_name="raw websockets one-way (JSON arrays of 256)",
            baseline_value=rate["raw"],
            budget=">= 0.5x raw websockets",
            ok=one_way_ok,
            note=f"{note}; {args.n} Point per round",
        ),
        row(
            "J.REP federation one-way notifications",
            rate["jrep"],
            "msg/s",
            baseline_name="TCP link one-way (same message, same count)",
            baseline_value=rate["tcp"],
            note=f"{note}; no budget",
        ),
        row(
            "J.REP federation request/reply round trip p50",
            p["jrep"][0],
            "us",
            baseline_name="raw websockets request/reply p50",
            baseline_value=p["raw"][0],
            budget="<= 2x raw websockets",
            ok=p50_ok,
            note=f"{note}; {args.rtt} round trips per round; lost requests: {lost}",
        ),
        row(
            "J.REP federation request/reply round trip p50",
            p["jrep"][0],
            "us",
            baseline_name="TCP link request/reply p50",
            baseline_value=p["tcp"][0],
            note=f"{note}; no budget",
        ),
        row(
            "J.REP federation request/reply round trip p99",
            p["jrep"][1],
            "us",
            baseline_name="raw websockets request/reply p99",
            baseline_value=p["raw"][1],
            note="same runs as p50; no budget",
        ),
    ]
    for kind, peer in (("jrep_loop", "raw"), ("tcp_loop", "raw")):
        if kind in p:
            rows.append(
                row(
                    f"{'J.REP' if kind == 'jrep_loop' else 'TCP link'} round trip p50, "
                    "actors on the session's loop",
                    p[kind][0],
                    "us",
                    baseline_name="raw websockets request/reply p50",
                    baseline_value=p[peer][0],
                    note=f"{note}; no budget (--loop)",
                )
            )
    print_table(rows)
    return rows


def _role(argv: list[str]) -> None:
    role, *rest = argv
    values = [int(v) for v in rest]
    roles: dict[str, Any] = {
        "jrep-sink": role_jrep_sink,
        "jrep-source": role_jrep_source,
        "jrep-replier": role_jrep_replier,
        "jrep-requestor": role_jrep_requestor,
        "jrep_loop-replier": lambda: role_jrep_replier("loop"),
        "jrep_loop-requestor": lambda n, port: role_jrep_requestor(n, port, "loop"),
        "tcp_loop-replier": lambda: role_ours_replier(_BUSES["loop"]),
        "tcp_loop-requestor": lambda n, port: role_ours_requestor(n, port, _BUSES["loop"]),
        "raw-sink": role_raw_sink,
        "raw-source": role_raw_source,
        "raw-replier": role_raw_replier,
        "raw-requestor": role_raw_requestor,
        "tcp-sink": lambda n: role_ours_sink(n, _BUSES["ours"]),
        "tcp-source": role_ours_source,
        "tcp-replier": lambda: role_ours_replier(_BUSES["ours"]),
        "tcp-requestor": lambda n, port: role_ours_requestor(n, port, _BUSES["ours"]),
    }
    if role not in roles:
        raise SystemExit(f"unknown role {role!r}")
    roles[role](*values)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        _role(sys.argv[2:])
    else:
        main()
