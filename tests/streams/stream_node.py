"""One node of the cross-process back-pressure test (test_streams_link.py).

``python stream_node.py consumer POLICY SECONDS``: listens on a free port
(prints ``port N``), streams ``/fast`` through a 256-slot buffer with POLICY
(``block`` or ``discard``) into a consumer taking 10 ms per event, counts
``/other`` with a plain subscriber on another dispatcher; once the publisher
says how many it sent (``/done``) and the stream took them all (or counted the
rest as discarded), prints one JSON line of figures and exits.

``python stream_node.py publisher PORT SECONDS``: dials PORT, publishes
``/fast`` at up to 50 000 msg/s as the pressure it is told allows
(:func:`watch_pressure`) and ``/other`` at 1 000 msg/s regardless, for
SECONDS; then publishes ``/done`` with the counts and prints them as JSON.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from typing import Any

from actorbus import Actor, Bus, BusConfig, FeedState, Notification, PublishFeed
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.streams import BufferStats, PushbackPolicy, QueuePolicy, subscribe, watch_pressure

FAST_RATE = 50_000
OTHER_RATE = 1_000


class Seq(Notification, type_name="tests.streams.Seq"):
    n: int


class Done(Notification, type_name="tests.streams.Done"):
    fast: int
    other: int


def rss_mb() -> float:
    """Peak resident memory of this process (MiB): VmHWM, which starts afresh at
    exec (``ru_maxrss`` keeps the peak of the forking parent, here pytest)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM line in /proc/self/status")


def rss_now_mb() -> float:
    """Resident memory of this process now (MiB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1_048_576


def _ignore(*_: Any) -> None:
    pass


class Publisher(Actor):
    def __init__(self, seconds: float) -> None:
        super().__init__("publisher")
        self.seconds = seconds
        self.fast_sent = 0
        self.other_sent = 0
        self.waits = 0
        self.finished = threading.Event()

    def startup(self) -> None:
        self.fast = self.publisher(Seq, "/fast", up=True, on_status=self.status)
        self.other = self.publisher(Seq, "/other", up=True, on_status=_ignore)
        self.done = self.publisher(Done, "/done", up=True, on_status=_ignore)
        self.watch = watch_pressure(self, self.fast)
        self.started = False

    def status(self, state: FeedState, feed: PublishFeed[Any]) -> None:
        if state is FeedState.UP and not self.started:
            self.started = True
            self.t0 = self.base = time.monotonic()
            self.base_sent = 0
            self.post(self.tick)

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.t0 >= self.seconds:
            self.done.publish(Done("/done", 0, fast=self.fast_sent, other=self.other_sent))
            self.finished.set()
            return
        due_other = int((now - self.t0) * OTHER_RATE) - self.other_sent
        for _ in range(max(0, due_other)):
            self.other_sent += 1
            self.other.publish(Seq("/other", 0, n=self.other_sent))
        watch = self.watch
        due = int((now - self.base) * FAST_RATE) - (self.fast_sent - self.base_sent)
        for _ in range(min(max(0, due), 500)):
            wait = watch.wait_s()
            if wait > 0:
                self.waits += 1
                # time held is not made up afterwards
                self.base, self.base_sent = now + wait, self.fast_sent
                self.schedule(min(wait, 0.005), self.tick)
                return
            self.fast_sent += 1
            self.fast.publish(Seq("/fast", 0, n=self.fast_sent))
            watch.sent()
        self.schedule(0.001, self.tick)


def publisher(port: int, seconds: float) -> None:
    with Bus(node_id="P") as bus:
        bus.connect("127.0.0.1", port)
        pub = Publisher(seconds)
        bus.register(pub)
        bus.startup([pub]).wait(10)
        start_mb = rss_now_mb()
        if not pub.finished.wait(seconds + 60):
            raise SystemExit("publisher: never finished")
        print(
            json.dumps(
                {
                    "fast": pub.fast_sent,
                    "other": pub.other_sent,
                    "pressure": pub.watch.received,
                    "held": pub.waits,
                    "rss_mb": rss_mb(),
                    "rss_start_mb": start_mb,
                    "rss_end_mb": rss_now_mb(),
                }
            ),
            flush=True,
        )
        sys.stdin.read()  # the test closes our stdin once the consumer has it all


class Consumer(Actor):
    def __init__(self, policy: QueuePolicy, pressure: bool) -> None:
        super().__init__("consumer")
        self.policy = policy
        self.pressure = pressure
        self.stats = BufferStats()
        self.got: list[int] = []
        #: set when the node closes: what is left is dropped quickly
        self.stopping = False

    def startup(self) -> None:
        self.stream = (
            subscribe(self, Seq, "/fast", pressure=self.pressure)
            .buffer(
                256,
                queue_policy=self.policy,
                pushback_policy=PushbackPolicy.LINEAR
                if self.policy is QueuePolicy.BLOCK
                else PushbackPolicy.ON_FULL_FIXED,
                base_ms=50 if self.policy is QueuePolicy.BLOCK else 0,
                stats=self.stats,
            )
            .for_each(self.slow)
        )

    def waiting(self) -> bool:
        stats = self.stats
        # delivered counts an event as it is handed to slow(), got once taken
        return stats.delivered + stats.discarded < stats.pushed or len(self.got) < stats.delivered

    def slow(self, s: Seq) -> None:
        if self.stopping:
            return
        time.sleep(0.010)  # the consumer's work: 10 ms per event
        self.got.append(s.n)


class Other(Actor):
    def __init__(self) -> None:
        super().__init__("other")
        self.times: list[float] = []
        self.done: Done | None = None

    def startup(self) -> None:
        self.subscribe(Seq, "/other", on_message=lambda m, _: self.times.append(time.monotonic()))
        self.subscribe(Done, "/done", on_message=self.finish)

    def finish(self, msg: Done, _: Any) -> None:
        self.done = msg


def consumer(policy_name: str, seconds: float) -> None:
    policy = {
        "block": QueuePolicy.BLOCK,
        "discard": QueuePolicy.DISCARD_OLDEST,
        "block-unpaced": QueuePolicy.BLOCK,
    }[policy_name]
    paced = policy_name != "block-unpaced"
    config = BusConfig(
        dispatchers=(
            DispatcherConfig(name="default", kind=DispatcherKind.BLOCKING),
            DispatcherConfig(name="slow", kind=DispatcherKind.BLOCKING),
        )
    )
    with Bus(config, node_id="C") as bus:
        service = bus.listen(0)
        c, o = Consumer(policy, pressure=paced), Other()
        bus.register(c, dispatcher="slow")
        bus.register(o)
        bus.startup([c, o]).wait(10)
        start_mb = rss_now_mb()
        print(f"port {service.port}", flush=True)
        mailbox = c.actor_context.mailbox
        if not paced:
            unpaced(service, c, o, seconds, start_mb)
            return
        deadline = time.monotonic() + seconds + 120
        max_depth = 0
        while time.monotonic() < deadline:
            time.sleep(0.02)  # sampling the mailbox depth while the test runs
            max_depth = max(max_depth, mailbox.depth if mailbox is not None else 0)
            done = o.done
            if done is not None and c.stats.pushed == done.fast and not c.waiting():
                break
        else:
            raise SystemExit("consumer: the stream never took everything")
        times = o.times
        window = (times[-1] - times[0]) if len(times) > 1 else 0.0
        got = c.got
        assert done is not None
        print(
            json.dumps(
                {
                    "published": done.fast,
                    "received": len(got),
                    "in_order": got == sorted(got) and len(set(got)) == len(got),
                    "contiguous": got == list(range(1, len(got) + 1)),
                    "discarded": c.stats.discarded,
                    "max_fill": c.stats.max_fill,
                    "mailbox_max_depth": max_depth,
                    "other_received": len(times),
                    "other_published": done.other,
                    "other_rate": len(times) / window if window else 0.0,
                    "rss_mb": rss_mb(),
                    "rss_start_mb": start_mb,
                    "rss_end_mb": rss_now_mb(),
                    "input_pauses": service.counters.links.input_pauses,
                }
            ),
            flush=True,
        )


def unpaced(service: Any, c: Consumer, o: Other, seconds: float, start_mb: float) -> None:
    """The stream asks no Pressure: what happens to the link and its other
    feed, over the publisher's run and one second more (then the node drops
    what is left and closes)."""
    mailbox = c.actor_context.mailbox
    t0 = time.monotonic()
    max_depth = 0
    while time.monotonic() < t0 + seconds + 1:
        time.sleep(0.02)  # sampling the mailbox depth while the test runs
        max_depth = max(max_depth, mailbox.depth if mailbox is not None else 0)
    c.stopping = True
    print(
        json.dumps(
            {
                "received": len(c.got),
                "mailbox_max_depth": max_depth,
                "other_received": len(o.times),
                "other_rate": len(o.times) / (seconds + 1),
                "rss_mb": rss_mb(),
                "rss_start_mb": start_mb,
                "rss_end_mb": rss_now_mb(),
                "input_pauses": service.counters.links.input_pauses,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    role, arg, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if role == "consumer":
        consumer(arg, secs)
    else:
        publisher(int(arg), secs)
