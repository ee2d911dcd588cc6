"""One-way notifications per second over a reliable multicast channel, against
the TCP link to the same receivers and raw UDP multicast of the same datagrams.

Every role is its own process on this host; the channel runs on the loopback
interface with TTL 0 (a random group and port), so nothing leaves the machine.

* **multicast**: a source publishes ``N`` notifications on a channel as fast
  as it can; 1 or 3 sink processes on the channel count them.  Losses (a sink's
  socket buffer overrun) are recovered by NAKs, so every sink gets all ``N``:
  the rate is ``N`` over the time from the first publish to the last sink's
  last message.
* **TCP link**: the same source publishing to the same number of sinks, each
  linked to it over TCP (the source sends each notification once per link).
* **raw UDP multicast**: a sender writes the datagrams a channel's source sends
  for ``N`` notifications published at once (the same bytes: runs of
  notifications, numbered) with bare ``sendto``; each receiver counts what it
  reads with bare ``recv`` — no sequencing, no recovery, no decoding, no bus:
  the ceiling of the network path.  Its rate is the notifications the
  datagrams the slowest receiver read carry, per second.

Budgets: the channel's rate with 1 receiver >= 0.5x raw UDP multicast, and with
3 receivers >= 2x the TCP link's delivered rate.  Also reported: the publishing
process's CPU time per notification (all its threads, until every receiver had
all of them), channel against links: what one send instead of one per receiver
saves, whatever the load on the host.

Run: ``.venv/bin/python benchmarks/multicast.py [--n N]``; ``make bench`` runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RoleProc, Row, print_table, row
from remote import Sink

from actorbus import Bus, FeedState, Notification
from actorbus.config.settings import MulticastSettings
from actorbus.net.multicast.channel import ChannelProtocol
from actorbus.net.multicast.runs import pack_notifications

SUBJECT = "/bench/mc"
N = 20_000
#: a raw receiver stops this long after the last datagram it read
_RAW_IDLE = 1.0
TIMEOUT = 120.0


class Tick(Notification, type_name="bench.mc.Tick"):
    value: int
    payload: bytes = b""


PAYLOAD = b"x" * 32


def _say(*words: object) -> None:
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()


def _settings(group: str, port: int, **changes: Any) -> MulticastSettings:
    return dataclasses.replace(
        MulticastSettings(group=group, port=port, interface="127.0.0.1", ttl=0), **changes
    )


def _run_sink(bus: Bus, n: int, ready: str, channel: Any = None) -> None:
    sink = Sink(n, Tick, SUBJECT)
    bus.register(sink)
    bus.startup(sink).wait(10)
    _say(*ready.split())
    if not sink.up.wait(TIMEOUT):
        raise SystemExit("sink: the source's feed never came UP")
    _say("UP")
    cpu0 = time.process_time()
    if not sink.done.wait(TIMEOUT):
        raise SystemExit(f"sink: only {sink.count} of {n} notifications arrived")
    cpu = time.process_time() - cpu0
    naks = channel.stats()["naks_sent"] if channel is not None else 0
    _say("DONE", sink.t_last, naks, cpu)


def role_mc_sink(n: int, group: str, port: int) -> None:
    with Bus(node_id=f"sink-{os.getpid()}") as bus:
        channel = bus.join_multicast("bench", _settings(group, port))
        _run_sink(bus, n, "READY", channel)


def role_tcp_sink(n: int) -> None:
    with Bus(node_id=f"sink-{os.getpid()}") as bus:
        service = bus.listen(0)
        _run_sink(bus, n, f"PORT {service.port}")


def _publish(bus: Bus, n: int, receivers: int) -> None:
    ups: list[int] = []
    cond = threading.Condition()

    def status(state: FeedState, feed: Any) -> None:
        with cond:
            ups.append(1 if state is FeedState.UP else 0)
            cond.notify_all()

    feed = bus.publisher(Tick, SUBJECT, on_status=status)
    with cond:
        if not cond.wait_for(lambda: bool(ups) and ups[-1] == 1, 10):
            raise SystemExit("source: never a subscriber")
    sys.stdin.readline()  # GO: every sink follows the feed
    messages = [Tick(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
    publish = feed.publish
    cpu0 = time.process_time()
    t0 = time.monotonic_ns()
    for message in messages:
        publish(message)
    _say("SENT", t0, time.monotonic_ns())
    sys.stdin.readline()  # END: every sink has all of them
    # the whole process: publishing thread, link or channel threads, retransmissions
    _say("CPU", time.process_time() - cpu0)
    sys.stdin.read()


def role_mc_source(n: int, group: str, port: int, receivers: int) -> None:
    with Bus(node_id="source") as bus:
        bus.join_multicast("bench", _settings(group, port, subjects=(SUBJECT,)))
        _say("READY")
        _publish(bus, n, receivers)


def role_tcp_source(n: int, *ports: int) -> None:
    with Bus(node_id="source") as bus:
        for port in ports:
            bus.connect("127.0.0.1", port).wait_logged_on(10)
        _say("READY")
        _publish(bus, n, len(ports))


def _raw_datagrams(n: int) -> list[bytes]:
    """The datagrams a channel's source sends for ``n`` Ticks published at once
    (the same bytes: notifications packed into runs, then numbered)."""
    proto = ChannelProtocol(_settings("239.255.0.1", 1), name="raw", stream=1, key=None, now=0.0)
    assert proto.publisher is not None
    messages = [Tick(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
    for record in pack_notifications(messages, proto.publisher.segment_size):
        proto.send(record, 0.0)
    return proto.datagrams_to_send()


def role_raw_sink(n: int, group: str, port: int) -> None:
    recv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    recv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    recv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    recv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    recv.bind((group, port))
    membership = socket.inet_aton(group) + socket.inet_aton("127.0.0.1")
    recv.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    _say("READY")
    count = 0
    t_last = 0
    recv.settimeout(TIMEOUT)
    read = recv.recv
    while count < n:
        try:
            read(2048)
        except TimeoutError:
            break
        count += 1
        t_last = time.monotonic_ns()
        recv.settimeout(_RAW_IDLE)
    _say("DONE", t_last, count)


def role_raw_source(n: int, group: str, port: int, receivers: int) -> None:
    datagrams = _raw_datagrams(n)
    send = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    send.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    send.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    _say("READY", len(datagrams))
    sys.stdin.readline()
    to = (group, port)
    sendto = send.sendto
    t0 = time.monotonic_ns()
    for datagram in datagrams:
        sendto(datagram, to)
    _say("SENT", t0, time.monotonic_ns())
    sys.stdin.read()


class _Proc(RoleProc):
    """A role of this script in a subprocess."""

    script = __file__

    def go(self) -> None:
        self.tell("GO")


def _group() -> tuple[str, int]:
    rng = random.SystemRandom()
    return f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}", rng.randrange(20_000, 60_000)


def _measure(kind: str, n: int, receivers: int) -> tuple[float, int, float, float]:
    """Delivered notifications per second at the slowest of ``receivers`` sinks,
    the NAKs they sent, the publishing process's CPU time per notification and
    the busiest receiving process's (microseconds)."""
    group, port = _group()
    procs: list[_Proc] = []
    try:
        if kind == "tcp":
            sinks = [_Proc("tcp-sink", n) for _ in range(receivers)]
            procs += sinks
            ports = [int(s.expect("PORT")[0]) for s in sinks]
            source = _Proc("tcp-source", n, *ports)
        else:
            sinks = [_Proc(f"{kind}-sink", n, group, port) for _ in range(receivers)]
            procs += sinks
            for s in sinks:
                s.expect("READY")
            source = _Proc(f"{kind}-source", n, group, port, receivers)
        procs.append(source)
        ready = source.expect("READY")
        if kind != "raw":
            for s in sinks:
                s.expect("UP")  # it follows the source's feed (a channel: its announcement heard)
        source.go()
        t0 = int(source.expect("SENT")[0])
        done = [s.expect("DONE") for s in sinks]
        cpu = 0.0
        if kind != "raw":
            source.go()  # (END)
            cpu = float(source.expect("CPU")[0])
    finally:
        for p in procs:
            p.close()
    if kind == "raw":  # datagrams read, in the notifications they carry
        per_datagram = n / int(ready[0])
        rate = min(int(d[1]) * per_datagram / ((int(d[0]) - t0) / 1e9) for d in done)
        # (in place of NAKs: the datagrams of the run the receivers did not read)
        return rate, sum(int(ready[0]) - int(d[1]) for d in done), 0.0, 0.0
    rate = n / ((max(int(d[0]) for d in done) - t0) / 1e9)
    receiving = max(float(d[2]) for d in done) * 1e6 / n
    return rate, sum(int(d[1]) for d in done), cpu * 1e6 / n, receiving


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N)
    parser.add_argument("--rounds", type=int, default=3, help="best of this many runs each")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    n = args.n
    rows: list[Row] = []
    rates: dict[tuple[str, int], float] = {}
    naks: dict[int, int] = {}
    raw_missed: dict[int, int] = {}
    cpus: dict[tuple[str, int], float] = {}
    rcpus: dict[tuple[str, int], float] = {}
    for _round in range(args.rounds):  # interleaved: a burst of load hits all alike
        for receivers in (1, 3):
            for kind in ("mc", "tcp", "raw"):
                rate, asked, cpu, receiving = _measure(kind, n, receivers)
                if kind != "raw":
                    cpus[kind, receivers] = min(cpus.get((kind, receivers), cpu), cpu)
                    rcpus[kind, receivers] = min(rcpus.get((kind, receivers), receiving), receiving)
                if rate > rates.get((kind, receivers), 0.0):
                    rates[kind, receivers] = rate
                    if kind == "mc":
                        naks[receivers] = asked
                    if kind == "raw":
                        raw_missed[receivers] = asked
    for receivers in (1, 3):
        mc = rates["mc", receivers]
        raw = rates["raw", receivers]
        tcp = rates["tcp", receivers]
        rows.append(
            row(
                f"multicast one-way, {receivers} receiver(s) vs raw UDP multicast",
                mc,
                "msg/s",
                baseline_name="raw UDP multicast",
                baseline_value=raw,
                budget=">= 0.5x raw UDP multicast" if receivers == 1 else "",
                ok=mc >= 0.5 * raw if receivers == 1 else None,
                note=f"{n} notifications, best of {args.rounds}; the channel's receivers sent "
                f"{naks[receivers]} NAKs; raw: what its slowest receiver read, no recovery "
                f"(its receivers missed {raw_missed[receivers]} datagrams in that run)",
            )
        )
        rows.append(
            row(
                f"multicast one-way, {receivers} receiver(s) vs TCP link",
                mc,
                "msg/s",
                baseline_name=f"TCP link x{receivers}",
                baseline_value=tcp,
                budget=">= 2x TCP link" if receivers == 3 else "",
                ok=mc >= 2 * tcp if receivers == 3 else None,
                note="delivered at the slowest receiver; the TCP source sends once per link",
            )
        )
    for receivers in (1, 3):
        rows.append(
            row(
                f"multicast publisher CPU per notification, {receivers} receiver(s)",
                cpus["mc", receivers],
                "us",
                baseline_name=f"TCP link x{receivers}",
                baseline_value=cpus["tcp", receivers],
                note="the publishing process's CPU time (all its threads) until every "
                "receiver had all, per notification; lowest of the rounds",
            )
        )
    for receivers in (1, 3):
        rows.append(
            row(
                f"multicast receiver CPU per notification, {receivers} receiver(s)",
                rcpus["mc", receivers],
                "us",
                baseline_name=f"TCP link x{receivers}",
                baseline_value=rcpus["tcp", receivers],
                note="a receiving process's CPU time (all its threads) from the feed UP "
                "until it had all, per notification; the busiest receiver, lowest of the rounds",
            )
        )
    return rows


def _role(argv: list[str]) -> None:
    name, *rest = argv
    role = globals()[f"role_{name.replace('-', '_')}"]
    role(*(int(a) if a.isdigit() else a for a in rest))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--role":
        _role(sys.argv[2:])
    else:
        print_table(main(), "multicast")
