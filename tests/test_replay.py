"""Recording an actor and replaying it: the calculator demo byte for byte, a
timer-driven actor under the fake clock, a changed actor, damaged files, the CLI;
a replier and a requestor with their requests, replies and cancels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from demos.calculator.actors import Source
from demos.calculator.messages import DataPoint, MovingAverage
from demos.calculator.run import run

from actorbus import Actor, Notification, Reply, ReplyStatus, Request
from actorbus.actors.recording import MAGIC, RecordingError, read_recording
from actorbus.bus import codec
from actorbus.bus.feeds import IncomingRequest, RequestHandle
from actorbus.node import Bus
from actorbus.replay import replay
from actorbus.testing import wait_until

ROOT = Path(__file__).resolve().parents[1]
POINTS = 200
WINDOW = 5


def record_calculator(path: Path, *, seed: int = 7) -> None:
    """The calculator demo in one process, its calculator recorded, for POINTS points."""
    stop = threading.Event()
    averages: list[str] = []

    def out(line: str) -> None:
        if " over " in line:
            averages.append(line)
            if len(averages) == POINTS - WINDOW + 1:
                stop.set()

    summary = run(
        period_ms=1,
        seed=seed,
        count=POINTS,
        window=WINDOW,
        out=out,
        stop=stop,
        duration=60,
        record_to=path,
    )
    assert summary["published"] == POINTS - WINDOW + 1, summary


@pytest.fixture(scope="module")
def calculator_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "calculator.rec"
    record_calculator(path)
    return path


def test_the_calculator_recorded_for_200_points_replays_byte_identically(
    calculator_recording: Path,
) -> None:
    header, records = read_recording(calculator_recording)
    assert header.actor == "demos.calculator.actors:Calculator"
    assert header.kwargs is not None and header.kwargs["window"] == WINDOW
    messages = [r for r in records if r["kind"] == "message"]
    assert len(messages) == POINTS
    assert [codec.decode(DataPoint, r["body"]).subject for r in messages] == ["/demo/data"] * POINTS
    published = [out for r in records for out in r["out"]]
    assert len(published) == POINTS - WINDOW + 1
    assert {t for t, _, _ in published} == {MovingAverage.__type_name__}

    result = replay(calculator_recording)

    assert result.matched, result.difference
    assert len(result.steps) == len(records)
    for step in result.steps:
        assert step.replayed is not None
        assert step.replayed["out"] == step.recorded["out"]  # the encoded bytes
        assert step.replayed["fsm"] == step.recorded["fsm"]
    states = [state for r in records for _, state in r["fsm"]]
    assert states[0] == "Initializing" and "Publishing" in states and states[-1] == "Shutdown"


def test_a_replay_of_a_changed_actor_names_the_first_differing_output(
    calculator_recording: Path,
) -> None:
    header, records = read_recording(calculator_recording)
    assert header.kwargs is not None
    # a window of 4 publishes its first average one point earlier
    result = replay(calculator_recording, kwargs={**header.kwargs, "window": 4})

    assert not result.matched
    first = next(
        i
        for i, r in enumerate(records)
        if r["kind"] == "message" and r["fsm"][0][1] != "Collecting"
    )
    assert result.difference is not None
    assert result.difference.startswith(f"input #{first - 1} (message subscribe ")
    assert "0 publishes recorded, 1 replayed" in result.difference
    assert result.steps[-1].index == first - 1


def test_a_timer_driven_actor_replays_with_the_same_firings_at_the_recorded_times(
    tmp_path: Path,
) -> None:
    path = tmp_path / "source.rec"
    kwargs = {"subject": "/t/data", "period_ms": 2, "seed": 11, "count": 30}
    with Bus() as bus:
        source = Source("source", **kwargs)  # type: ignore[arg-type]
        bus.register(source)
        recording = bus.record(source, path, kwargs=kwargs)
        inbox = bus.inbox(DataPoint, "/t/data")
        bus.startup(source).wait(5)
        got = [inbox.receive(5) for _ in range(30)]
        wait_until(lambda: source.timer is None, 5)  # the tick after the last stopped it
        bus.shutdown(source).wait(5)
        recording.close()
    assert [m.value for m in got if m is not None] == [
        codec.decode(DataPoint, out[2]).value for r in read_recording(path)[1] for out in r["out"]
    ]

    result = replay(path)

    assert result.matched, result.difference
    timers = [s for s in result.steps if s.recorded["kind"] == "timer"]
    assert len(timers) == 31  # 30 points, then the tick that stops the timer
    for step in timers:
        assert step.replayed is not None
        assert step.replayed["timer"] == step.recorded["timer"] == "Source.tick"
        assert step.replayed["mono"] == step.recorded["mono"]  # the fake clock's time
    assert sum(len(s.recorded["out"]) for s in timers) == 30


def test_a_truncated_recording_is_refused_naming_the_byte(
    calculator_recording: Path, tmp_path: Path
) -> None:
    data = calculator_recording.read_bytes()
    cut = tmp_path / "cut.rec"
    cut.write_bytes(data[:-3])

    with pytest.raises(RecordingError, match=r"cut\.rec: truncated or damaged at byte \d+"):
        replay(cut)
    refused = _cli("replay", str(cut), cwd=ROOT)
    assert refused.returncode == 2
    assert "cut.rec: truncated or damaged at byte" in refused.stderr


def test_a_tampered_recording_is_refused_naming_the_byte(
    calculator_recording: Path, tmp_path: Path
) -> None:
    data = bytearray(calculator_recording.read_bytes())
    header_end = len(MAGIC) + 8 + int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "big")
    data[header_end + 20] ^= 0xFF  # inside the first record's body
    bad = tmp_path / "bad.rec"
    bad.write_bytes(bytes(data))

    with pytest.raises(
        RecordingError, match=rf"bad\.rec: damaged at byte {header_end}: the frame's CRC-32"
    ):
        read_recording(bad)


def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.rec"
    other.write_bytes(b"hello")
    with pytest.raises(RecordingError, match="not an actor recording"):
        read_recording(other)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    here = str(Path(__file__).parent)  # this module's actors
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), here])}
    return subprocess.run(
        [sys.executable, "-m", "actorbus", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actorbus_run_records_to_the_key_and_actorbus_replay_prints_the_run(tmp_path: Path) -> None:
    app = tmp_path / "app.properties"
    app.write_text(
        "actorbus.actors = source, calculator\n"
        "actorbus.actor.source.class = demos.calculator.actors.Source\n"
        "actorbus.actor.source.period_ms = 2\n"
        "actorbus.actor.source.seed = 5\n"
        "actorbus.actor.source.count = 40\n"
        "actorbus.actor.calculator.class = demos.calculator.actors.Calculator\n"
        "actorbus.actor.calculator.window = 3\n"
        "actorbus.actor.calculator.recordTo = calc.rec\n"
    )
    ran = _cli("run", str(app), "--duration", "1.5", cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    recording = tmp_path / "calc.rec"  # relative to the properties file
    header, records = read_recording(recording)
    assert header.kwargs == {"window": "3"}
    assert [r["kind"] for r in records][-1] == "shutdown"

    replayed = _cli("replay", str(recording), cwd=ROOT)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    lines = replayed.stdout.splitlines()
    assert lines[0].startswith(f"{recording}: demos.calculator.actors:Calculator 'calculator'")
    assert "startup" in lines[1] and "-> fsm <start> -> Initializing" in lines[2]
    assert lines[-1] == f"replayed {len(records)} inputs: the outputs match the recording"

    as_json = _cli("replay", str(recording), "--json", cwd=ROOT)
    assert as_json.returncode == 0, as_json.stderr
    run_json = json.loads(as_json.stdout)
    assert run_json["matched"] is True and run_json["inputs"] == len(records)


def test_actorbus_replay_exits_1_with_the_first_difference(tmp_path: Path) -> None:
    path = tmp_path / "calc.rec"
    record_calculator(path, seed=3)
    # the same recording, told the actor had a window of 4: an earlier first average
    data = path.read_bytes()
    changed = tmp_path / "changed.rec"
    body_start = len(MAGIC) + 8
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "big")
    head = msgpack.unpackb(data[body_start : body_start + size])
    head["kwargs"]["window"] = 4
    body = msgpack.packb(head)
    changed.write_bytes(
        MAGIC
        + len(body).to_bytes(4, "big")
        + zlib.crc32(body).to_bytes(4, "big")
        + body
        + data[body_start + size :]
    )

    result = _cli("replay", str(changed), cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("DIFFERENT: input #") and "0 publishes recorded, 1 replayed" in last


# ------------------------------------------------------------ requests and replies


class Squared(Reply, type_name="test.replay.Squared"):
    value: int


class Square(Request, type_name="test.replay.Square", replies=(Squared,)):
    n: int


class Counted(Reply, type_name="test.replay.Counted"):
    i: int


class Count(Request, type_name="test.replay.Count", replies=(Counted,)):
    n: int


class Go(Notification, type_name="test.replay.Go"):
    op: str
    n: int
    timeout_ms: int = 0


class Got(Notification, type_name="test.replay.Got"):
    status: int
    remaining: int
    value: int


class Cancelled(Notification, type_name="test.replay.Cancelled"):
    n: int


def _ignore(state: object, feed: object) -> None:
    pass


class Squarer(Actor):
    """A replier: squares at once (plus ``offset``); holds a negative n, with a
    continuing reply now and the final one in the next request's task; counts
    with a streaming ``serve()`` generator; publishes each cancel it is told."""

    def __init__(self, name: str | None = None, *, offset: int = 0) -> None:
        super().__init__(name=name)
        self.offset = offset
        self.held: list[IncomingRequest[Square]] = []

    def startup(self) -> None:
        self.cancels = self.publisher(Cancelled, "/rp/cancelled", on_status=_ignore, up=True)
        self.replier(Square, "/rp/square", on_request=self.square, on_cancel=self.cancelled)
        self.serve(Count, "/rp/count", self.count)

    def square(self, incoming: IncomingRequest[Square]) -> None:
        n, subject = incoming.request.n, incoming.request.subject
        if n == 13:
            raise ValueError("13 is not squared here")  # the bus sends an ERROR reply for it
        if n < 0:
            self.held.append(incoming)
            incoming.reply(
                Squared(subject, self.now_ms(), status=ReplyStatus.OK_CONTINUING, value=0)
            )
            return
        incoming.reply(Squared(subject, self.now_ms(), value=n * n + self.offset))
        for held in self.held:  # answered in a later task than their request's
            held.reply(Squared(subject, self.now_ms(), value=n))
        self.held.clear()

    def cancelled(self, incoming: IncomingRequest[Square]) -> None:
        if incoming in self.held:
            self.held.remove(incoming)
        self.cancels.publish(Cancelled("/rp/cancelled", self.now_ms(), n=incoming.request.n))

    def count(self, request: Count) -> Iterator[Counted]:
        for i in range(request.n):
            yield Counted(request.subject, self.now_ms(), status=ReplyStatus.OK_CONTINUING, i=i)
        return Counted(request.subject, self.now_ms(), i=request.n)  # type: ignore[return-value]


class Asker(Actor):
    """A requestor told what to ask by Go messages; publishes each reply it gets."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name=name)
        self.handles: list[RequestHandle[Any]] = []

    def startup(self) -> None:
        self.got = self.publisher(Got, "/rp/got", on_status=_ignore, up=True)
        self.squares = self.requestor(Square, "/rp/square", on_reply=self.reply)
        self.counts = self.requestor(Count, "/rp/count", on_reply=self.reply)
        self.subscribe(Go, "/rp/go", on_message=self.go)

    def go(self, msg: Go, feed: Any) -> None:
        timeout = msg.timeout_ms / 1000 if msg.timeout_ms else None
        if msg.op == "square":
            self.handles.append(
                self.squares.request(Square("/rp/square", self.now_ms(), n=msg.n), timeout=timeout)
            )
        elif msg.op == "count":
            self.handles.append(self.counts.request(Count("/rp/count", self.now_ms(), n=msg.n)))
        else:
            self.handles[msg.n].cancel()

    def reply(self, remaining: int, reply: Reply, handle: RequestHandle[Any]) -> None:
        value = getattr(reply, "value", getattr(reply, "i", -1))
        self.got.publish(
            Got(
                "/rp/got", self.now_ms(), status=int(reply.status), remaining=remaining, value=value
            )
        )


#: what the Asker is told, and how many Got messages it publishes for it
GOES = [
    (Go("/rp/go", 1, op="square", n=3), 1),  # #0: 9
    (Go("/rp/go", 2, op="square", n=-1), 1),  # #1: 0 continuing, held
    (Go("/rp/go", 3, op="count", n=3), 4),  # 0, 1, 2 continuing, 3 final
    (Go("/rp/go", 4, op="square", n=13), 1),  # #2: its callback raises: an ERROR reply
    (Go("/rp/go", 5, op="square", n=4), 2),  # #3: 16, and #1's final 4
    (Go("/rp/go", 6, op="square", n=-2), 1),  # #4: 0 continuing, held
    (Go("/rp/go", 7, op="cancel", n=5), 0),  # the Asker cancels #4: the Squarer publishes Cancelled
    (Go("/rp/go", 8, op="square", n=-5, timeout_ms=300), 2),  # #5: 0 continuing, then timed out
]
GOT = sum(count for _, count in GOES)


def record_requests(tmp: Path, *, offset: int = 0) -> tuple[Path, Path, list[Got]]:
    """The Squarer and the Asker on one bus, each recorded to its own file."""
    squarer_path, asker_path = tmp / "squarer.rec", tmp / "asker.rec"
    with Bus() as bus:
        squarer, asker = Squarer("squarer", offset=offset), Asker("asker")
        bus.register(squarer)
        bus.register(asker)
        bus.record(squarer, squarer_path, kwargs={"offset": offset})
        bus.record(asker, asker_path)
        cancels = bus.inbox(Cancelled, "/rp/cancelled")
        got = bus.inbox(Got, "/rp/got")
        bus.startup(squarer).wait(10)
        bus.startup(asker).wait(10)
        go = bus.publisher(Go, "/rp/go")
        assert go.wait_ready(10)
        received: list[Got | None] = []
        for msg, count in GOES:  # each in turn: the Squarer took the request before its cancel
            go.publish(msg)
            received += [got.receive(10) for _ in range(count)]
            if msg.op == "cancel":
                assert cancels.receive(10) is not None  # the cancel reached the Squarer
        assert cancels.receive(10) is not None  # the timed-out request's cancel
        bus.shutdown(asker).wait(10)
        bus.shutdown(squarer).wait(10)
    return squarer_path, asker_path, [m for m in received if m is not None]


@pytest.fixture(scope="module")
def request_recordings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Got]]:
    return record_requests(tmp_path_factory.mktemp("requests"))


def test_a_replier_is_recorded_with_its_replies_tied_to_their_requests(
    request_recordings: tuple[Path, Path, list[Got]],
) -> None:
    squarer_path, _, received = request_recordings
    assert len(received) == GOT
    records = read_recording(squarer_path)[1]
    squares = [r for r in records if r["kind"] == "request" and r["type"] == Square.__type_name__]
    assert [r["n"] for r in squares] == [0, 1, 2, 3, 4, 5]
    assert [codec.decode(Square, r["body"]).n for r in squares] == [3, -1, 13, 4, -2, -5]
    [failed] = squares[2]["rep"]  # the bus's ERROR reply for the callback that raised
    assert (failed[2], failed[3], failed[5]) == (2, Reply.__type_name__, "ERROR")
    # request #3's task answers #3 and, later than its own task, #1
    assert [(rep[2], rep[5]) for rep in squares[3]["rep"]] == [(3, "OK_FINAL"), (1, "OK_FINAL")]
    assert codec.decode(Squared, squares[3]["rep"][1][4]).value == 4
    count = next(r for r in records if r["kind"] == "request" and r["type"] == Count.__type_name__)
    assert [rep[5] for rep in count["rep"]] == ["OK_CONTINUING"] * 3 + ["OK_FINAL"]
    cancels = [r for r in records if r["kind"] == "cancel"]
    assert [r["n"] for r in cancels] == [4, 5]  # the Asker's cancel, then the timeout's
    assert all(len(r["out"]) == 1 for r in cancels)


def test_a_replier_replays_with_byte_identical_replies(
    request_recordings: tuple[Path, Path, list[Got]],
) -> None:
    squarer_path = request_recordings[0]

    result = replay(squarer_path)

    assert result.matched, result.difference
    kinds = [s.recorded["kind"] for s in result.steps]
    assert kinds.count("request") == 7 and kinds.count("cancel") == 2
    for step in result.steps:
        assert step.replayed is not None
        if (
            step.recorded["kind"] == "request"
            and step.recorded["n"] == 2
            and "rep" in step.recorded
        ):
            # the bus's ERROR reply carries the clock's time: all but the timestamp is the same
            [want], [got] = step.recorded["rep"], step.replayed["rep"]
            assert want[:4] == got[:4] and want[5] == got[5] == "ERROR"
            assert codec.decode(Reply, want[4]).reason == codec.decode(Reply, got[4]).reason
        else:
            assert step.replayed.get("rep") == step.recorded.get("rep")  # byte for byte


def test_a_requestor_is_recorded_with_the_replies_it_was_given_and_replays_identically(
    request_recordings: tuple[Path, Path, list[Got]],
) -> None:
    _, asker_path, received = request_recordings
    records = read_recording(asker_path)[1]
    sent = [request for r in records for request in r.get("req", [])]
    assert [(t, n) for t, _, n, _ in sent] == [
        (Square.__type_name__, 0),
        (Square.__type_name__, 1),
        (Count.__type_name__, 0),
        (Square.__type_name__, 2),
        (Square.__type_name__, 3),
        (Square.__type_name__, 4),
        (Square.__type_name__, 5),
    ]
    replies = [r for r in records if r["kind"] == "reply"]
    assert len(replies) == GOT
    timed_out = replies[-1]
    assert (timed_out["n"], timed_out["status"], timed_out["state"]) == (5, "ERROR", 0)
    assert "timed out after 0.3 s" in str(codec.decode(Reply, timed_out["body"]).reason)
    outputs = [codec.decode(Got, out[2]) for r in replies for out in r["out"]]
    assert outputs == received

    result = replay(asker_path)

    assert result.matched, result.difference
    assert [s.replayed["req"] for s in result.steps if s.replayed and "req" in s.replayed] == [
        r["req"] for r in records if "req" in r
    ]


def test_a_changed_replier_is_reported_at_its_first_different_reply_naming_the_request(
    request_recordings: tuple[Path, Path, list[Got]],
) -> None:
    records = read_recording(request_recordings[0])[1]
    first = next(i for i, r in enumerate(records) if r["kind"] == "request")

    result = replay(request_recordings[0], kwargs={"offset": 1})

    assert not result.matched
    assert result.difference is not None
    assert result.difference.startswith(
        f"input #{first} (request reply test.replay.Square:'/rp/square' #0 "
    ), result.difference
    assert "reply #0 sent differs: recorded reply OK_FINAL to request " in result.difference
    assert "test.replay.Square:'/rp/square' #0 Squared(" in result.difference
    assert "value=9" in result.difference and "value=10" in result.difference


def test_actorbus_replay_lists_requests_and_replies(
    request_recordings: tuple[Path, Path, list[Got]],
) -> None:
    squarer_path, asker_path, _ = request_recordings
    squarer = _cli("replay", str(squarer_path), cwd=ROOT)
    assert squarer.returncode == 0, squarer.stdout + squarer.stderr
    assert "request reply test.replay.Square:'/rp/square' #0 Square(" in squarer.stdout
    assert "-> reply OK_FINAL to request test.replay.Square:'/rp/square' #1 Squared(" in (
        squarer.stdout
    )
    assert "cancel reply test.replay.Square:'/rp/square' #4 " in squarer.stdout

    asker = _cli("replay", str(asker_path), cwd=ROOT)
    assert asker.returncode == 0, asker.stdout + asker.stderr
    assert "-> request test.replay.Count:'/rp/count' #0 Count(" in asker.stdout
    assert (
        "reply request test.replay.Square:'/rp/square' #5 remaining 0 ERROR Reply(" in asker.stdout
    )
    assert asker.stdout.splitlines()[-1].endswith("the outputs match the recording")


def test_a_request_answered_by_two_repliers_replays_until_the_remaining_differs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "asker.rec"
    with Bus() as bus:
        squarers = [Squarer(f"squarer{i}") for i in range(2)]
        asker = Asker("asker")
        for actor in (*squarers, asker):
            bus.register(actor)
        bus.record(asker, path)
        got = bus.inbox(Got, "/rp/got")
        for squarer in squarers:
            bus.startup(squarer).wait(10)
        bus.startup(asker).wait(10)
        go = bus.publisher(Go, "/rp/go")
        assert go.wait_ready(10)
        go.publish(Go("/rp/go", 1, op="square", n=3))
        answers = [got.receive(10) for _ in range(2)]
        bus.shutdown(asker).wait(10)
    assert [(m.remaining, m.value) for m in answers if m is not None] == [(1, 9), (0, 9)]

    result = replay(path, timeout=10)

    # one private replier answers the replay: its first final reply leaves none due
    assert not result.matched
    assert result.difference is not None
    assert "reply request test.replay.Square:'/rp/square' #0 remaining 1 OK_FINAL" in (
        result.difference
    )
    assert result.difference.endswith("state recorded 1, replayed 0"), result.difference
