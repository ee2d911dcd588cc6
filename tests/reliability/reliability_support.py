"""Support for the reliability tests: messages, a counting publisher, a checking
subscriber (exact or wildcard), queue-group members and their tally, log
capture, subprocess nodes and the figures printed at the end.

Everything here closes what it opens.  The subprocess node script
(``reliability_node.py``) imports this module too.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from actorbus import (
    Actor,
    Bus,
    FeedState,
    IncomingRequest,
    Notification,
    PublishFeed,
    Reply,
    ReplyStatus,
    Request,
    RequestHandle,
    SubscribeFeed,
    Wildcard,
)
from actorbus.config import LinkSettings
from actorbus.errors import ProtocolError
from actorbus.net import LinkProtocol, Side
from actorbus.net.protocol import Event, LogonAccepted, LogonComplete
from actorbus.testing import EventLog

HERE = Path(__file__).resolve().parent
NODE_SCRIPT = HERE / "reliability_node.py"

#: The run's seed: ``ACTORBUS_SEED`` when set, else fixed (tests print it).
SEED = int(os.environ.get("ACTORBUS_SEED", "20261121"))


# ------------------------------------------------------------------- messages


class Seq(Notification, type_name="reliability.Seq"):
    """A numbered notification: ``n`` is 1, 2, 3, ... per publisher."""

    n: int
    pad: bytes = b""


class Hold(Request, type_name="reliability.Hold"):
    """A request the holding replier keeps unanswered."""

    n: int


# ------------------------------------------------------------------- figures

#: ``(test, {figure: value})`` rows collected by the tests, printed by conftest.
FIGURES: list[tuple[str, dict[str, Any]]] = []


def record(test: str, **values: Any) -> None:
    """Keep figures for the end-of-run summary (and print them with -s)."""
    FIGURES.append((test, dict(values)))
    shown = " ".join(f"{k}={v}" for k, v in values.items())
    print(f"[figures] {test}: {shown}")


# --------------------------------------------------------------- publishing


class CountingPublisher:
    """Publishes ``Seq(n)`` for n = 1..total from its own thread, at about ``rate``
    per second, while its feed is up, and counts exactly what happened to each.

    ``sent`` counts every ``publish()`` made (so n = 1..sent); ``unrouted`` those
    that reached no subscriber (``publish()`` returned 0: the link went away
    between the ``is_feed_up()`` check and the publish, before this feed's DOWN
    status arrived).  While the feed is DOWN it publishes nothing and waits
    (``refused`` counts the waits).
    """

    def __init__(
        self,
        bus: Bus,
        subject: str,
        *,
        total: int,
        rate: float,
        batch: int = 20,
        pad: bytes = b"",
        on_state: Callable[[FeedState], None] | None = None,
    ) -> None:
        self.bus = bus
        self.on_state = on_state
        self.subject = subject
        self.total = total
        self.rate = rate
        self.batch = batch
        self.pad = pad
        self.sent = 0
        #: publishes that reached no subscriber (publish() returned 0).
        self.unrouted = 0
        #: times a batch found the feed down and waited for it to come back.
        self.refused = 0
        self.states = EventLog()
        self._cond = threading.Condition()
        self._up = False
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"reliability-publisher-{subject}", daemon=True
        )
        self.feed: PublishFeed[Seq] = bus.publisher(Seq, subject, on_status=self._status)

    def _status(self, state: FeedState, feed: PublishFeed[Seq]) -> None:
        with self._cond:
            self._up = state is FeedState.UP
            self._cond.notify_all()
        self.states.append((time.monotonic(), state))
        if self.on_state is not None:
            self.on_state(state)

    def wait_up(self, timeout: float) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._up, timeout):
                raise AssertionError(
                    f"publish feed {self.subject} not UP within {timeout:g} s; "
                    f"links: {self.bus.links}"
                )

    def start(self) -> CountingPublisher:
        self._thread.start()
        return self

    def _run(self) -> None:
        feed = self.feed
        started = time.monotonic()
        n = 0
        try:
            while n < self.total and not self._stop.is_set():
                with self._cond:
                    if not self._up:
                        self.refused += 1
                        self._cond.wait_for(lambda: self._up or self._stop.is_set(), 1.0)
                        continue
                end = min(self.total, n + self.batch)
                while n < end and feed.is_feed_up():
                    n += 1
                    if not feed.publish(Seq(self.subject, n=n, pad=self.pad)):
                        self.unrouted += 1
                self.sent = n
                ahead = started + n / self.rate - time.monotonic()
                if ahead > 0:
                    self._stop.wait(ahead)
        finally:
            self.sent = n
            self._done.set()

    def wait_done(self, timeout: float) -> None:
        if not self._done.wait(timeout):
            raise AssertionError(f"publisher sent {self.sent} of {self.total} within {timeout:g} s")

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(10)

    def close(self) -> None:
        self.stop()
        self.feed.close()

    def __enter__(self) -> CountingPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def publish_fence(bus: Bus, subject: str, timeout: float = 10.0) -> None:
    """Publish one ``Seq(n=0)`` that reaches the subscriber's link: the
    subscriber's sight of it proves everything sent before it on this connection
    has been taken in."""
    up = threading.Event()
    down = threading.Event()

    def status(state: FeedState, feed: PublishFeed[Seq]) -> None:
        if state is FeedState.UP:
            down.clear()
            up.set()
        else:
            up.clear()
            down.set()

    feed = bus.publisher(Seq, subject, on_status=status)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if not up.wait(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"fence feed {subject} never came UP")
            if feed.publish(Seq(subject, n=0)):
                return
            down.wait(max(0.0, deadline - time.monotonic()))  # it went: wait for DOWN
    finally:
        feed.close()


# --------------------------------------------------------------- subscribing


@dataclass
class SeqStats:
    """What a subscriber saw of the numbers 1, 2, 3, ..."""

    delivered: int = 0
    last: int = 0
    duplicates: int = 0
    reordered: int = 0
    #: jumps forward, and the numbers they skipped.
    gaps: int = 0
    missing: int = 0
    fences: int = 0

    def take(self, n: int) -> None:
        if n == 0:
            self.fences += 1
            return
        if n == self.last:
            self.duplicates += 1
            return
        if n < self.last:
            self.reordered += 1
            return
        if n > self.last + 1:
            self.gaps += 1
            self.missing += n - self.last - 1
        self.last = n
        self.delivered += 1


class SeqSubscriber(Actor):
    """Subscribes to ``Seq`` on ``subject``; checks order; logs feed states with times.

    ``subject`` may be a :class:`~actorbus.Wildcard` matching one publisher's
    subject (the numbers are checked as one stream).

    ``log`` holds ``("state", monotonic time, FeedState)`` and ``("fence", time)``;
    ``on_event(entry)`` is called with each entry as it is logged."""

    def __init__(
        self,
        subject: str | Wildcard,
        name: str = "seq-subscriber",
        on_event: Callable[[tuple[Any, ...]], None] | None = None,
    ) -> None:
        super().__init__(name=name)
        self.subject = subject
        self.on_event = on_event
        self.stats = SeqStats()
        self.log = EventLog()
        self.feed: SubscribeFeed[Seq] | None = None

    def startup(self) -> None:
        self.feed = self.subscribe(
            Seq, self.subject, on_message=self._message, on_status=self._state
        )

    def _message(self, message: Seq, feed: SubscribeFeed[Seq]) -> None:
        self.stats.take(message.n)
        if message.n == 0:
            self._log(("fence", time.monotonic()))

    def _state(self, state: FeedState, feed: SubscribeFeed[Seq]) -> None:
        self._log(("state", time.monotonic(), state))

    def _log(self, entry: tuple[Any, ...]) -> None:
        self.log.append(entry)
        if self.on_event is not None:
            self.on_event(entry)

    def states(self) -> list[FeedState]:
        return [e[2] for e in self.log.of("state")]

    def wait_state(self, state: FeedState, count: int = 1, timeout: float = 10.0) -> float:
        """Wait until ``state`` was reported ``count`` times; return when the last was."""
        items = self.log.wait_for(
            lambda ev: sum(1 for e in ev if e[0] == "state" and e[2] is state) >= count, timeout
        )
        return [e[1] for e in items if e[0] == "state" and e[2] is state][count - 1]


def start_actors(bus: Bus, *actors: Actor) -> None:
    for actor in actors:
        bus.register(actor)
    bus.startup(list(actors)).wait(10)


class WildSeqSubscriber(Actor):
    """Subscribes to ``Seq`` on a :class:`~actorbus.Wildcard`; checks each
    matching subject's numbers as a stream of its own (``stats[subject]``).

    ``log`` holds ``("state", monotonic time, FeedState)`` and ``("msg", subject,
    n)``; ``on_event(entry)`` is called with each entry as it is logged."""

    def __init__(
        self,
        pattern: Wildcard,
        name: str = "wild-subscriber",
        on_event: Callable[[tuple[Any, ...]], None] | None = None,
    ) -> None:
        super().__init__(name=name)
        self.pattern = pattern
        self.on_event = on_event
        self.stats: dict[str, SeqStats] = {}
        self.log = EventLog()
        self.feed: SubscribeFeed[Seq] | None = None

    def startup(self) -> None:
        self.subscribe_now()

    def subscribe_now(self) -> None:
        """Subscribe (again): a new feed on the pattern (run it on the actor)."""
        self.feed = self.subscribe(
            Seq, self.pattern, on_message=self._message, on_status=self._state
        )

    def unsubscribe_now(self) -> None:
        """Close the feed (run it on the actor)."""
        if self.feed is not None:
            self.feed.close()
            self.feed = None

    def _message(self, message: Seq, feed: SubscribeFeed[Seq]) -> None:
        self.stats.setdefault(message.subject, SeqStats()).take(message.n)
        self._log(("msg", message.subject, message.n))

    def _state(self, state: FeedState, feed: SubscribeFeed[Seq]) -> None:
        self._log(("state", time.monotonic(), state))

    def _log(self, entry: tuple[Any, ...]) -> None:
        self.log.append(entry)
        if self.on_event is not None:
            self.on_event(entry)

    def states(self) -> list[FeedState]:
        return [e[2] for e in self.log.of("state")]

    def wait_states(self, states: Sequence[FeedState], timeout: float = 10.0) -> None:
        """Wait until the feed states reported so far are exactly ``states``
        (AssertionError, naming what was seen, if they become anything else)."""
        want = list(states)

        def reached(items: list[Any]) -> bool:
            seen = [e[2] for e in items if e[0] == "state"]
            if seen[: len(want)] != want[: len(seen)]:
                raise AssertionError(f"feed states {seen}, expected {want}")
            return seen == want

        self.log.wait_for(reached, timeout)

    def wait_message(self, subject: str, n: int, timeout: float = 10.0) -> None:
        """Wait until ``Seq(n)`` on ``subject`` has arrived."""
        self.log.wait_for(lambda items: self.stats.get(subject, SeqStats()).last >= n, timeout)


class Tally:
    """The numbers queue-group members received, by member, wherever the
    members are; thread-safe, with a wait on the total.  ``dupes`` counts
    numbers received a second time (by any member)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.by_member: dict[str, list[int]] = {}
        self.seen: set[int] = set()
        self.dupes = 0
        self.fences: dict[str, int] = {}

    def add(self, member: str, numbers: Sequence[int]) -> None:
        with self._cond:
            got = self.by_member.setdefault(member, [])
            for n in numbers:
                if n == 0:
                    self.fences[member] = self.fences.get(member, 0) + 1
                    continue
                if n in self.seen:
                    self.dupes += 1
                self.seen.add(n)
                got.append(n)
            self._cond.notify_all()

    @property
    def total(self) -> int:
        with self._cond:
            return sum(len(v) for v in self.by_member.values())

    def count(self, member: str) -> int:
        with self._cond:
            return len(self.by_member.get(member, ()))

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {k: len(v) for k, v in sorted(self.by_member.items())}

    def fenced(self, member: str | None = None) -> int:
        """Fences (``n == 0``) received by ``member``, or by all."""
        with self._cond:
            if member is not None:
                return self.fences.get(member, 0)
            return sum(self.fences.values())

    def numbers(self, *members: str) -> list[int]:
        with self._cond:
            return [n for m in members for n in self.by_member.get(m, ())]

    def wait(self, predicate: Callable[[Tally], bool], what: str, timeout: float) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError(f"{what} not within {timeout:g} s; counts {self.counts()}")


class SeqMember(Actor):
    """A member of queue group ``group`` on ``Seq:subject``: hands each number it
    receives to ``tally`` under its name, and counts numbers received out of
    order (a member's share of 1, 2, 3, ... rises)."""

    def __init__(self, subject: str, group: str, tally: Tally, name: str) -> None:
        super().__init__(name=name)
        self.subject = subject
        self.group = group
        self.tally = tally
        self.last = 0
        self.reordered = 0
        self.feed: SubscribeFeed[Seq] | None = None

    def startup(self) -> None:
        self.feed = self.subscribe(Seq, self.subject, on_message=self._message, queue=self.group)

    def _message(self, message: Seq, feed: SubscribeFeed[Seq]) -> None:
        n = message.n
        if n:
            if n <= self.last:
                self.reordered += 1
            self.last = max(self.last, n)
        self.tally.add(self.name, (n,))


# ------------------------------------------------------------- requests


class Asker(Actor):
    """Sends ``Hold`` requests and records how each ended: ``ends`` holds
    ``(monotonic time, handle id, final reply status, reason)``."""

    def __init__(self, subject: str) -> None:
        super().__init__(name="asker")
        self.subject = subject
        self.ends = EventLog()
        self.replies = 0
        self.up = threading.Event()
        self.handles: list[RequestHandle[Hold]] = []

    def startup(self) -> None:
        self.feed = self.requestor(Hold, self.subject, on_reply=self._reply, on_status=self._state)

    def _state(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.up.set()
        else:
            self.up.clear()

    def _reply(self, remaining: int, reply: Reply, handle: RequestHandle[Hold]) -> None:
        self.replies += 1
        if remaining == 0:
            self.ends.append((time.monotonic(), handle.id, reply.status, reply.reason))

    def ask(self, count: int) -> None:
        """Send ``count`` requests from the calling thread."""
        for n in range(count):
            self.handles.append(self.feed.request(Hold(self.subject, n=n)))


class Holder(Actor):
    """Takes ``Hold`` requests and never answers them."""

    def __init__(self, subject: str, on_count: Callable[[int], None] | None = None) -> None:
        super().__init__(name="holder")
        self.subject = subject
        self.held: list[IncomingRequest[Hold]] = []
        self.on_count = on_count

    def startup(self) -> None:
        self.replier(Hold, self.subject, on_request=self._take)

    def _take(self, request: IncomingRequest[Hold]) -> None:
        self.held.append(request)
        if self.on_count is not None:
            self.on_count(len(self.held))


class Echo(Actor):
    """Answers every ``Hold`` request at once with one OK reply."""

    def __init__(self, subject: str) -> None:
        super().__init__(name="echo")
        self.subject = subject

    def startup(self) -> None:
        self.replier(Hold, self.subject, on_request=self._take)

    def _take(self, request: IncomingRequest[Hold]) -> None:
        request.reply(Reply(self.subject))


# ------------------------------------------------------------------ logs


class LogCapture:
    """Collects actorbus's log records (enabled for the duration) as text lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._sink: int | None = None

    def __enter__(self) -> LogCapture:
        logger.enable("actorbus")
        self._sink = logger.add(self._write, level="INFO", format="{level} {message}")
        return self

    def _write(self, message: Any) -> None:
        with self._lock:
            self.lines.append(str(message).rstrip("\n"))

    def __exit__(self, *exc: object) -> None:
        if self._sink is not None:
            logger.remove(self._sink)
        logger.disable("actorbus")

    def matching(self, *words: str) -> list[str]:
        with self._lock:
            return [line for line in self.lines if all(w in line for w in words)]

    def wait_for(self, *words: str, timeout: float = 5.0) -> str:
        deadline = time.monotonic() + timeout
        wake = threading.Event()
        while True:
            found = self.matching(*words)
            if found:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line with {words}; lines: {self.lines[-20:]}")
            wake.wait(0.01)


# ----------------------------------------------------------- subprocess nodes


@dataclass
class NodeProcess:
    """A bus node in its own process (``reliability_node.py``), optionally inside a
    network namespace.  It speaks JSON lines: commands on stdin, events on stdout,
    collected into :attr:`events`."""

    args: Sequence[str]
    netns: str | None = None
    name: str = "node"
    events: EventLog = field(default_factory=EventLog)
    proc: subprocess.Popen[str] | None = None
    stderr_lines: list[str] = field(default_factory=list)
    #: called with each event (after it is logged), on the node's reader thread
    on_event: Callable[[dict[str, Any]], None] | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    #: the node's script (another one speaks the same JSON lines)
    script: Path = NODE_SCRIPT

    def start(self) -> NodeProcess:
        command = [sys.executable, "-u", str(self.script), *self.args]
        if self.netns is not None:
            command = ["ip", "netns", "exec", self.netns, *command]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        for stream, sink in ((self.proc.stdout, self._event), (self.proc.stderr, self._stderr)):
            thread = threading.Thread(
                target=_pump_lines, args=(stream, sink), name=f"node-{self.name}-io", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _event(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            self.stderr_lines.append(f"(stdout) {line}")
            return
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def _stderr(self, line: str) -> None:
        self.stderr_lines.append(line)

    def send(self, command: str, **args: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": command, **args}) + "\n")
        self.proc.stdin.flush()

    def wait_event(
        self,
        ev: str,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        timeout: float = 20.0,
    ) -> dict[str, Any]:
        """The first event named ``ev`` (that ``predicate`` accepts)."""

        def match(e: dict[str, Any]) -> bool:
            return e.get("ev") == ev and (predicate is None or predicate(e))

        try:
            items = self.events.wait_for(
                lambda items: (
                    any(match(e) for e in items)
                    or (self.proc is not None and self.proc.poll() is not None)
                ),
                timeout,
            )
        except AssertionError:
            raise AssertionError(
                f"node {self.name}: no {ev!r} event within {timeout:g} s\n{self.tail()}"
            ) from None
        for e in items:
            if match(e):
                return e
        raise AssertionError(f"node {self.name} exited before {ev!r}\n{self.tail()}")

    def of(self, ev: str) -> list[dict[str, Any]]:
        return [e for e in self.events.snapshot() if e.get("ev") == ev]

    def tail(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        return f"exit code {code}; stderr:\n" + "\n".join(self.stderr_lines[-30:])

    def kill(self, sig: int) -> None:
        """Send ``sig`` to the node (``ip netns exec`` execs it: same pid)."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        """Ask it to exit (stdin closed), kill it if it does not, reap it."""
        proc = self.proc
        if proc is None:
            return None
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        for thread in self._threads:
            thread.join(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        return proc.returncode

    def __enter__(self) -> NodeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def user_key() -> bytes:
    """This user's secret, which nodes with no secret configured prove: the
    file tests/conftest.py made for this run (never the real user's)."""
    with open(os.environ["ACTORBUS_USER_SECRET_FILE"], "rb") as file:
        return file.read().strip()


class RawPeer:
    """A peer driven by hand: the sans-IO protocol over a blocking socket, so a
    test can log on properly and then misbehave (garbage, floods, silence).
    It proves ``secret``; None: this user's (as a node with none configured)."""

    def __init__(
        self,
        address: tuple[str, int],
        node_id: str,
        *,
        rcvbuf: int | None = None,
        run_id: str = "",
        secret: bytes | None = None,
    ):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if rcvbuf is not None:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(10)
            self.sock.connect(address)
        except BaseException:
            self.sock.close()
            raise
        self.proto = LinkProtocol(
            Side.CLIENT,
            node_id,
            time.monotonic(),
            is_known_type=lambda name: True,
            settings=LinkSettings(logon_timeout=0),
            run_id=run_id,
            secret=user_key() if secret is None else secret,
        )
        self.seen: list[Event] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def flush(self) -> None:
        data = self.proto.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def expect(self, kinds: tuple[type[Event], ...], timeout: float = 10.0) -> Event:
        """Read until an event of one of ``kinds`` arrives (all kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                for event in self.proto.events():
                    self.seen.append(event)
                    if isinstance(event, kinds):
                        self.flush()
                        return event
            except ProtocolError as exc:
                raise AssertionError(f"the node broke the protocol: {exc}") from exc
            self.flush()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"none of {kinds} within {timeout} s; saw {self.seen}")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            self.proto.receive_data(data, time.monotonic())
            if not data:
                self.seen.extend(self.proto.events())
                found = [e for e in self.seen if isinstance(e, kinds)]
                if found:
                    return found[-1]
                raise AssertionError(f"EOF before {kinds}; saw {self.seen}")

    def logon(self) -> str:
        """Log on and complete the handshake; return the node's id."""
        self.proto.logon()
        self.flush()
        accepted = self.expect((LogonAccepted,))
        self.proto.complete_logon()
        self.flush()
        self.expect((LogonComplete,))
        assert isinstance(accepted, LogonAccepted)
        return accepted.peer_node_id

    def read_raw_until_closed(self, timeout: float = 10.0) -> bytes:
        """Every byte the node sends until it closes the connection."""
        chunks = []
        self.sock.settimeout(timeout)
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    def read_until_closed(self, timeout: float = 10.0) -> list[Event]:
        """Parse what the node sends until it closes; return the events."""
        self.sock.settimeout(timeout)
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            self.proto.receive_data(data, time.monotonic())
            with contextlib.suppress(ProtocolError):
                self.seen.extend(self.proto.events())
            if not data:
                return self.seen


def _pump_lines(stream: Any, sink: Callable[[str], None]) -> None:
    with contextlib.suppress(ValueError, OSError):
        for line in stream:
            sink(line.rstrip("\n"))


__all__ = [
    "FIGURES",
    "NODE_SCRIPT",
    "SEED",
    "Asker",
    "CountingPublisher",
    "Hold",
    "Echo",
    "Holder",
    "LogCapture",
    "NodeProcess",
    "ReplyStatus",
    "Seq",
    "SeqStats",
    "SeqMember",
    "SeqSubscriber",
    "Tally",
    "WildSeqSubscriber",
    "publish_fence",
    "record",
    "start_actors",
]
