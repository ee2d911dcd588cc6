"""Delivery guarantees (actorbus.qos): what at-least-once, exactly-once and a
persistent publisher cost, against a plain feed and against NATS JetStream.

    python benchmarks/qos.py [--n N] [--rounds R] [--quick]

(a) **Throughput across one loopback link** — a publisher process and a
    subscriber process (the subscriber's node listens, the publisher's node
    connects), N messages of a 100-byte payload, timed from the first publish
    to the subscriber's application getting the last one:
    at-most-once (a plain ``publisher`` / ``subscribe`` pair) against
    at-least-once and exactly-once (``qos_publisher`` / ``qos_subscribe``, auto
    ack; exactly-once with a ``state_dir`` the consumer saves its watermark
    in before each ack).  Every run checks that the subscriber got every
    message once and in order.  Rows: the QoS rates and their ratio to the
    plain feed's.  No budget: the ratio is what the guarantee costs.

(b) **Persistent publish + ack** — a ``qos_publisher`` with ``journal=`` in a
    temporary directory and ``SyncPolicy.batch()`` (every frame the journal
    writes is fsynced before its publishes are acknowledged), no consumer: the
    acknowledged rate, i.e. publishes whose frame was committed, first publish
    to the last commit.  Against JetStream: a ``nats-server -js -sd DIR`` with
    a file-storage stream on the subject and a nats-py client waiting for the
    server's ack of every publish, pipelined (``js.publish_async``, up to
    4,000 in flight: how a fast JetStream publisher works) and sequential
    (``await js.publish`` one after the other).  Budget: >= 2x JetStream's
    pipelined rate.  A reference row (no budget) runs JetStream with
    ``sync_interval: always`` too: by default JetStream acknowledges a message
    once it is written to its file, without an fsync (it fsyncs the store every
    two minutes), so only that row is durable against a power loss as ours is.

(c) **Latency of one acknowledged publish** — publish -> ack, one at a time:
    ours (the commit of the journal frame) against ``await js.publish``; p50
    and p99.

Our publishers and subscribers run in processes of their own (``--role``), the
JetStream client in this one; rounds are interleaved and the best of each kind
is kept (``_common``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _jetstream
from _common import RoleProc, Row, best_of, percentile, print_table, row

from actorbus.actors import Actor
from actorbus.bus.message import Notification
from actorbus.bus.scope import FeedState
from actorbus.journal import JournalReader, SyncPolicy
from actorbus.node import Bus
from actorbus.qos import Delivery, DeliveryFuture, OutboxFull, Qos, qos_publisher, qos_subscribe

__all__ = ["main"]

SUBJECT = "/bench/qos"
PAYLOAD = b"q" * 100
#: Messages a publisher hands to ``publish`` before it lets its actor run other
#: work (acks, timers): the QoS publisher's log is bounded, and only acks free it.
CHUNK = 500
TIMEOUT = 300.0
#: Delivery of each mode of (a); "plain" is the at-most-once feed.
MODES = {
    "plain": None,
    "alo": Delivery.AT_LEAST_ONCE,
    "eo": Delivery.EXACTLY_ONCE,
}


class Point(Notification, type_name="bench.qos.Point"):
    value: int
    payload: bytes


def _say(*words: object) -> None:
    print(*words, flush=True)


class _Proc(RoleProc):
    script = __file__


# ============================================================ (a) subscriber


class _Sink(Actor):
    """Counts the messages its application gets, and checks they come once and
    in order (values 0..n-1)."""

    def __init__(self, mode: str, n: int, state_dir: str) -> None:
        super().__init__(name="sink")
        self.mode = mode
        self.n = n
        self.state_dir = state_dir
        self.count = 0
        self.out_of_order = 0
        self.t_last = 0
        self.done = threading.Event()
        self.said_up = False

    def startup(self) -> None:
        delivery = MODES[self.mode]
        if delivery is None:
            self.subscribe(Point, SUBJECT, on_message=self.got_plain, on_status=self.plain_status)
            return
        qos_subscribe(
            self,
            Point,
            SUBJECT,
            qos=Qos(delivery=delivery),
            on_message=self.got,
            name="bench-sink",
            state_dir=self.state_dir if delivery is Delivery.EXACTLY_ONCE else None,
            on_status=self.qos_status,
        )

    def plain_status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.up()

    def qos_status(self, status: Any, sub: Any) -> None:
        if status.refused:
            _say("REFUSED", status.refused)
        elif status.qos is not None:
            self.up()

    def up(self) -> None:
        if not self.said_up:
            self.said_up = True
            _say("UP")

    def got_plain(self, message: Point, feed: Any) -> None:
        self.take(message)

    def got(self, message: Point, delivery: Any) -> None:
        self.take(message)

    def take(self, message: Point) -> None:
        if message.value != self.count:
            self.out_of_order += 1
        self.count += 1
        if self.count == self.n:
            self.t_last = time.monotonic_ns()
            self.done.set()


def role_sink(mode: str, n: int) -> None:
    state_dir = tempfile.mkdtemp(prefix="bench-qos-state-")
    try:
        with Bus(node_id="sink") as bus:
            service = bus.listen(0)
            sink = _Sink(mode, n, state_dir)
            bus.register(sink)
            bus.startup(sink).wait(10)
            _say("PORT", service.port)
            if not sink.done.wait(TIMEOUT):
                raise SystemExit(f"sink: only {sink.count} of {n} messages arrived")
            _say("DONE", sink.t_last, sink.count, sink.out_of_order)
            sys.stdin.read()  # acks flow until the parent has both sides' results
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


# ============================================================ (a) publisher


class _Pump:
    """Publishes ``messages`` on its actor, CHUNK at a time, re-posting itself so
    that the actor handles acks in between; waits a millisecond when the QoS
    publisher's log is full (OutboxFull)."""

    def __init__(self, actor: Actor, publish: Any, messages: list[Point]) -> None:
        self.actor = actor
        self.publish = publish
        self.messages = messages
        self.i = 0
        self.full = 0
        self.done = threading.Event()

    def __call__(self) -> None:
        publish, messages = self.publish, self.messages
        end = min(self.i + CHUNK, len(messages))
        try:
            while self.i < end:
                publish(messages[self.i])
                self.i += 1
        except OutboxFull:
            self.full += 1
            self.actor.schedule(0.001, self)
            return
        if self.i < len(messages):
            self.actor.post(self)
        else:
            self.done.set()


class _Source(Actor):
    def __init__(self, mode: str) -> None:
        super().__init__(name="source")
        self.mode = mode
        self.ready = threading.Event()
        self.publish: Any = None

    def startup(self) -> None:
        delivery = MODES[self.mode]
        if delivery is None:
            feed = self.publisher(Point, SUBJECT, up=True, on_status=self.status)
            self.publish = feed.publish
        else:
            self.publish = qos_publisher(self, Point, SUBJECT, offer=Qos(delivery=delivery)).publish
            self.ready.set()

    def status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.ready.set()


def role_source(mode: str, n: int, port: int) -> None:
    with Bus(node_id="source") as bus:
        bus.connect("127.0.0.1", port).wait_logged_on(10)
        source = _Source(mode)
        bus.register(source)
        bus.startup(source).wait(10)
        if not source.ready.wait(10):
            raise SystemExit("source: the publish feed never came up")
        messages = [Point(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
        _say("READY")
        if sys.stdin.readline().strip() != "GO":
            raise SystemExit("source: expected GO")
        pump = _Pump(source, source.publish, messages)
        t0 = time.monotonic_ns()
        source.post(pump)
        if not pump.done.wait(TIMEOUT):
            raise SystemExit(f"source: published {pump.i} of {n}")
        _say("SENT", t0, time.monotonic_ns(), pump.full)
        sys.stdin.read()  # keep the link up until the parent has the sink's result


def _one_way(mode: str, n: int) -> float:
    """Messages/s from a publisher process to a subscriber process in ``mode``."""
    with _Proc("sink", mode, n) as sink:
        port = int(sink.expect("PORT")[0])
        with _Proc("source", mode, n, port) as source:
            source.expect("READY")
            sink.expect("UP")
            source.tell("GO")
            t0 = int(source.expect("SENT")[0])
            t_last, count, out_of_order = map(int, sink.expect("DONE"))
    if count != n or out_of_order:
        raise RuntimeError(f"{mode}: {count} of {n} delivered, {out_of_order} out of order")
    return n / ((t_last - t0) / 1e9)


# ============================================================ (b), (c) persistent publisher


class _Journaled(Actor):
    """A persistent QoS publisher with no consumer: a publish is acknowledged
    when the future :meth:`QosPublisher.publish_durable` returned resolves
    (its journal frame written and fsynced per the SyncPolicy);
    :func:`role_persist` also checks with a
    :class:`~actorbus.journal.JournalReader` that the journal then holds it."""

    def __init__(self, journal: str) -> None:
        super().__init__(name="journaled")
        self.journal = journal
        self.t_mark = 0
        self.last = 0
        self.marked = threading.Event()

    def startup(self) -> None:
        self.qos = qos_publisher(
            self,
            Point,
            SUBJECT,
            offer=Qos(delivery=Delivery.AT_LEAST_ONCE, persistent=True),
            journal=self.journal,
            sync=SyncPolicy.batch(),
        )

    def publish_one(self, message: Point) -> None:
        self.qos.publish_durable(message).add_done_callback(self.acked)

    def acked(self, future: DeliveryFuture) -> None:
        """(the publisher's actor, at the commit) ``future`` is durable."""
        future.result(0)
        if future.seq >= self.last:
            self.t_mark = time.perf_counter_ns()
            self.marked.set()


def role_persist(n: int, n_latency: int) -> None:
    """Prints one JSON line: ``rate`` (acknowledged publishes/s of ``n``
    publishes, as fast as the publisher takes them), ``p50`` and ``p99`` (us,
    of ``n_latency`` publishes one at a time, publish -> ack)."""
    where = tempfile.mkdtemp(prefix="bench-qos-journal-")
    journal = str(Path(where, "j"))
    try:
        with Bus(node_id="persist") as bus:
            actor = _Journaled(journal)
            bus.register(actor)
            bus.startup(actor).wait(10)
            reader = JournalReader(journal)
            messages = [Point(SUBJECT, value=i, payload=PAYLOAD) for i in range(n)]
            actor.last = n
            pump = _Pump(actor, actor.publish_one, messages)
            t0 = time.perf_counter_ns()
            actor.post(pump)
            if not actor.marked.wait(TIMEOUT):
                raise SystemExit(f"persist: published {pump.i} of {n}")
            rate = n / ((actor.t_mark - t0) / 1e9)
            if reader.last_seq() != n:
                raise SystemExit(
                    f"persist: acknowledged {n}, the journal holds {reader.last_seq()}"
                )
            times: list[float] = []
            message = Point(SUBJECT, value=-1, payload=PAYLOAD)
            for i in range(n_latency):
                actor.marked.clear()
                actor.last = n + i + 1
                t = time.perf_counter_ns()
                actor.post(actor.publish_one, message)
                if not actor.marked.wait(TIMEOUT):
                    raise SystemExit("persist: a publish was never acknowledged")
                times.append((actor.t_mark - t) / 1000)
                if reader.last_seq() != n + i + 1:
                    raise SystemExit(
                        f"persist: publish {n + i + 1} acknowledged, not in the journal"
                    )
            times.sort()
            result = {"rate": rate, "p50": percentile(times, 50), "p99": percentile(times, 99)}
            _say(json.dumps(result))
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _persist(n: int, n_latency: int) -> dict[str, float]:
    with _Proc("persist", n, n_latency) as proc:
        assert proc.proc.stdout is not None
        line = proc.proc.stdout.readline()
    if not line.startswith("{"):
        raise RuntimeError(f"persist role: expected its JSON result, got {line!r}")
    out: dict[str, float] = json.loads(line)
    return out


# ============================================================ main


_SAVED = ", the watermark fdatasync-ed before each acknowledgement (every 256 messages or 20 ms)"


def main(argv: list[str] | None = None) -> list[Row]:
    """Run the benchmark, print a table, return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="messages per throughput run")
    parser.add_argument("--latency-n", type=int, default=2_000, help="publishes timed one by one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer messages, one round")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.n
    n_latency = min(args.latency_n, 500) if args.quick else args.latency_n
    rounds = 1 if args.quick else args.rounds

    link: dict[str, list[float]] = {mode: [] for mode in MODES}
    ours: list[dict[str, float]] = []
    js_pipe: list[float] = []
    js_seq: list[tuple[float, list[float]]] = []
    js_sync: list[float] = []
    js_sync_seq: list[tuple[float, list[float]]] = []
    for _ in range(rounds):
        for mode in MODES:
            link[mode].append(_one_way(mode, n))
    with (
        _jetstream.jetstream_server() as url,
        _jetstream.jetstream_server(sync_always=True) as durable,
    ):
        for _ in range(rounds):
            ours.append(_persist(n, n_latency))
            js_pipe.append(_jetstream.pipelined(url, n, PAYLOAD))
            js_seq.append(_jetstream.sequential(url, n_latency, PAYLOAD))
            js_sync.append(_jetstream.pipelined(durable, n, PAYLOAD))
            js_sync_seq.append(_jetstream.sequential(durable, n_latency, PAYLOAD))

    plain = max(link["plain"])
    rows = [row("at-most-once (plain feed), 1 link", plain, "msg/s", note=f"n={n}")]
    for mode, label in (("alo", "at-least-once"), ("eo", "exactly-once")):
        rows.append(
            row(
                f"{label}, 1 link",
                max(link[mode]),
                "msg/s",
                baseline_name="at-most-once (plain feed)",
                baseline_value=plain,
                note=f"n={n}, auto ack" + (_SAVED if mode == "eo" else ""),
            )
        )
    rate = max(r["rate"] for r in ours)
    pipe = max(js_pipe)
    rows.append(
        row(
            "persistent publish+ack (journal, SyncPolicy.batch)",
            rate,
            "msg/s",
            baseline_name="JetStream js.publish_async",
            baseline_value=pipe,
            budget=">= 2x JetStream",
            ok=rate >= 2 * pipe,
            note=f"n={n}; JetStream: file storage, up to 4,000 in flight",
        )
    )
    seq_rate, _ = best_of(js_seq, key=lambda r: r[0])
    rows.append(
        row(
            "persistent publish+ack vs sequential JetStream",
            rate,
            "msg/s",
            baseline_name="JetStream await js.publish",
            baseline_value=seq_rate,
            note=f"JetStream: {n_latency} sequential publishes",
        )
    )
    rows.append(
        row(
            "persistent publish+ack vs JetStream fsync always",
            rate,
            "msg/s",
            baseline_name="JetStream publish_async, sync_interval always",
            baseline_value=max(js_sync),
            note="the JetStream configuration that fsyncs before acking, as ours does",
        )
    )
    best = best_of(ours, key=lambda r: r["p50"], lowest=True)
    for peer, runs in (("", js_seq), (" fsync always", js_sync_seq)):
        _, js_times = best_of(runs, key=lambda r: percentile(r[1], 50), lowest=True)
        for p, key in ((50, "p50"), (99, "p99")):
            rows.append(
                row(
                    f"persistent publish -> ack {key}"
                    + (" vs JetStream fsync always" if peer else ""),
                    best[key],
                    "us",
                    baseline_name=f"JetStream{peer} await js.publish {key}",
                    baseline_value=percentile(js_times, p),
                    note=f"{n_latency} sequential publishes; lower is better",
                )
            )
    print_table(rows, "QoS (actorbus.qos) against a plain feed and NATS JetStream")
    return rows


def _role(argv: list[str]) -> None:
    role, *rest = argv
    if role == "sink":
        role_sink(rest[0], int(rest[1]))
    elif role == "source":
        role_source(rest[0], int(rest[1]), int(rest[2]))
    elif role == "persist":
        role_persist(int(rest[0]), int(rest[1]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        _role(sys.argv[2:])
    else:
        main()
