"""Recording an actor: the watched mailbox, what each task becomes, the timer
service on a handed-in clock, the rules of Bus.record."""

from __future__ import annotations

import threading
import time
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorbus import Actor, Bus, FeedState, Notification, Reply, Request
from actorbus.actors.recording import _FEED_TASKS, MAGIC, ActorRecorder, read_recording
from actorbus.actors.timers import TimerQueue, TimerService
from actorbus.bus import codec
from actorbus.bus.feeds import PublishFeed, ReplyFeed, RequestFeed, SubscribeFeed
from actorbus.errors import RecordingError, UsageError
from actorbus.replay import replay
from actorbus.testing import capture_logs, wait_until

WAIT = 10.0


class Tick(Notification, type_name="test.recording.Tick"):
    n: int


class Echoed(Notification, type_name="test.recording.Echoed"):
    n: int


class Ask(Request, type_name="test.recording.Ask", replies=()):
    n: int


class Echo(Actor):
    """Republishes every Tick as Echoed n*2, stamped with now_ms()."""

    def __init__(self, name: str | None = None, *, inbound: str = "/rec/in") -> None:
        super().__init__(name=name)
        self.inbound = inbound
        self.stamps: list[int] = []

    def startup(self) -> None:
        self.out = self.publisher(Echoed, "/rec/out", on_status=self.out_status, up=True)
        self.subscribe(Tick, self.inbound, on_message=self.echo)

    def out_status(self, state: FeedState, feed: Any) -> None:
        self.out_state = state

    def echo(self, msg: Tick, feed: Any) -> None:
        now = self.now_ms()
        self.stamps.append(now)
        if self.out.is_feed_up():
            self.out.publish(Echoed("/rec/out", now, n=msg.n * 2))


def test_every_delivery_task_of_every_feed_class_has_a_kind() -> None:
    for cls in (PublishFeed, SubscribeFeed, RequestFeed, ReplyFeed):
        for task in cls._task_callbacks:
            assert task in _FEED_TASKS, f"{cls.__name__}.{task} is not recorded by its kind"
    assert _FEED_TASKS["_deliver"] == _FEED_TASKS["_deliver_if"] == "message"


def test_a_recorded_actor_gives_one_record_per_task_with_its_outputs(tmp_path: Path) -> None:
    path = tmp_path / "echo.rec"
    with Bus() as bus:
        echo = Echo("echo")
        bus.register(echo)
        recording = bus.record(echo, path)
        outs = bus.inbox(Echoed, "/rec/out")
        bus.startup(echo).wait(WAIT)
        pub = bus.publisher(Tick, "/rec/in")
        for n in range(3):
            pub.publish(Tick("/rec/in", n=n))
        got = [outs.receive(WAIT) for _ in range(3)]
        bus.shutdown(echo).wait(WAIT)
        recording.close()
        assert recording.records == len(read_recording(path)[1])

    header, records = read_recording(path)
    assert header.actor == f"{__name__}:Echo" and header.name == "echo" and header.kwargs is None
    kinds = [(r["kind"], r.get("role")) for r in records]
    assert kinds[0] == ("startup", None)
    assert ("status", "publish") in kinds and ("status", "subscribe") in kinds
    messages = [r for r in records if r["kind"] == "message"]
    assert [codec.decode(Tick, r["body"]).n for r in messages] == [0, 1, 2]
    # each message's output is what the inbox got, byte for byte, stamped with the record's time
    assert [r["out"] for r in messages] == [
        [[Echoed.__type_name__, "/rec/out", codec.encode(m)]] for m in got if m is not None
    ]
    assert echo.stamps == [r["wall"] // 1_000_000 for r in messages]
    assert kinds[-1] == ("shutdown", None)


def test_the_echo_replays_with_the_recorded_time(tmp_path: Path) -> None:
    path = tmp_path / "echo.rec"
    with Bus() as bus:
        echo = Echo("echo")
        bus.register(echo)
        bus.record(echo, path)
        outs = bus.inbox(Echoed, "/rec/out")
        bus.startup(echo).wait(WAIT)
        pub = bus.publisher(Tick, "/rec/in")
        for n in range(5):
            pub.publish(Tick("/rec/in", n=n))
        for _ in range(5):
            outs.receive(WAIT)
        bus.shutdown(echo).wait(WAIT)

    result = replay(path)

    assert result.matched, result.difference
    assert sum(len(s.recorded["out"]) for s in result.steps) == 5

    moved = replay(path, kwargs={"inbound": "/rec/elsewhere"}, timeout=WAIT)
    assert moved.difference is not None
    assert moved.difference.endswith(
        "(status subscribe test.recording.Tick:'/rec/in' UP): the actor has no subscriber "
        "on test.recording.Tick:'/rec/in'"
    )


class Answerer(Actor):
    def startup(self) -> None:
        self.serve(Ask, "/rec/ask", self.answer)

    def answer(self, request: Ask) -> Reply:
        return Reply(request.subject)


def test_a_request_is_recorded_with_its_reply_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "answer.rec"
    with Bus() as bus:
        actor = Answerer("answerer")
        bus.register(actor)
        bus.record(actor, path)
        bus.startup(actor).wait(WAIT)
        assert len(bus.request_all(Ask("/rec/ask", n=1), timeout=WAIT)) == 1
        bus.shutdown(actor).wait(WAIT)
    records = read_recording(path)[1]
    request = next(r for r in records if r["kind"] == "request")
    assert codec.decode(Ask, request["body"]).n == 1 and request["role"] == "reply"
    assert request["n"] == 0
    [(type_name, subject, n, reply_type, body, status)] = request["rep"]
    assert (type_name, subject, n, reply_type, status) == (
        Ask.__type_name__,
        "/rec/ask",
        0,
        Reply.__type_name__,
        "OK_FINAL",
    )
    assert codec.decode(Reply, body).subject == "/rec/ask"

    result = replay(path)

    assert result.matched, result.difference
    replayed = next(s.replayed for s in result.steps if s.recorded["kind"] == "request")
    assert replayed is not None and len(replayed["rep"]) == 1


def test_a_class_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    class Local(Actor):
        pass

    path = tmp_path / "local.rec"
    with Bus() as bus:
        actor = Local("local")
        bus.register(actor)
        bus.record(actor, path)
        bus.startup(actor).wait(WAIT)
    with pytest.raises(RecordingError, match=r"actor class '.*Local' cannot be imported"):
        replay(path)


class Fragile(Actor):
    def startup(self) -> None:
        self.subscribe(Tick, "/rec/fragile", on_message=self.check)

    def check(self, msg: Tick, feed: Any) -> None:
        raise ValueError(f"{msg.n} is not allowed")


def test_a_recorded_actors_failure_names_its_callback_and_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "fragile.rec"
    with capture_logs() as logs, Bus() as bus:
        fragile = Fragile("fragile")
        bus.register(fragile)
        recording = bus.record(fragile, path)
        bus.startup(fragile).wait(WAIT)
        bus.publisher(Tick, "/rec/fragile").publish(Tick("/rec/fragile", n=3))
        wait_until(lambda: recording.records >= 3, WAIT)
        wait_until(lambda: any("Fragile.check" in r["message"] for r in logs), WAIT)
    text = next(r["message"] for r in logs if "Fragile.check" in r["message"])
    assert (
        'on feed test.recording.Tick:"/rec/fragile"' in text
        and "ValueError: 3 is not allowed" in text
    )
    assert [r["kind"] for r in read_recording(path)[1]][:3] == ["startup", "status", "message"]


def test_recording_a_started_actor_is_refused() -> None:
    with Bus() as bus:
        echo = Echo("late")
        bus.register(echo)
        bus.startup(echo).wait(WAIT)
        with pytest.raises(UsageError, match="'late' is started; a recording must begin before"):
            bus.runtime.watch(echo, ActorRecorder(echo, lambda record: None))


def test_a_mailbox_is_watched_once() -> None:
    with Bus() as bus:
        echo = Echo("twice")
        bus.register(echo)
        bus.runtime.watch(echo, ActorRecorder(echo, lambda record: None))
        with pytest.raises(UsageError, match="it is watched already"):
            bus.runtime.watch(echo, ActorRecorder(echo, lambda record: None))


def test_constructor_keywords_that_msgpack_cannot_hold_are_refused(tmp_path: Path) -> None:
    with Bus() as bus:
        echo = Echo("odd")
        bus.register(echo)
        with pytest.raises(RecordingError, match="kwargs=.*strings, numbers, booleans or None"):
            bus.record(echo, tmp_path / "odd.rec", kwargs={"when": object()})


def test_a_timer_service_on_a_given_clock_fires_only_when_told() -> None:
    now = [1_000]
    fired = threading.Event()
    with Bus(timer_clock=lambda: now[0]) as bus:
        timers = bus.runtime.timers
        assert timers.manual

        class Sleeper(Actor):
            def startup(self) -> None:
                self.schedule(0.5, fired.set)

        sleeper = Sleeper("sleeper")
        bus.startup(sleeper).wait(WAIT)
        assert timers.fire_due() == 0
        now[0] += 499_999_999
        assert timers.fire_due() == 0
        now[0] += 1
        assert timers.fire_due() == 1
        assert fired.wait(WAIT)


def test_fire_due_on_a_threaded_timer_service_is_refused() -> None:
    service = TimerService()
    with pytest.raises(UsageError, match="only a service made with a clock"):
        service.fire_due()
    service.stop()


def test_now_ms_outside_a_recording_is_the_wall_clock() -> None:
    with Bus() as bus:
        echo = Echo("clock")
        bus.register(echo)
        before = time.time_ns() // 1_000_000
        assert before <= echo.now_ms() <= time.time_ns() // 1_000_000


def _framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body


@settings(max_examples=300, deadline=None)
@given(
    raw=st.binary(max_size=64),
    bodies=st.lists(st.binary(max_size=32), max_size=4),
    header=st.booleans(),
)
def test_any_bytes_read_as_a_recording_or_as_a_recording_error(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes, bodies: list[bytes], header: bool
) -> None:
    head = msgpack.packb({"version": 1, "actor": "m:C", "name": "n", "kwargs": None})
    data = MAGIC + (_framed(head) if header else b"") + b"".join(map(_framed, bodies)) + raw
    path = tmp_path_factory.mktemp("fuzz") / "any.rec"
    path.write_bytes(data)
    try:
        found, records = read_recording(path)
    except RecordingError as exc:
        refusal: RecordingError | None = exc
    else:
        refusal = None
        assert header and found.version == 1
        assert all(isinstance(r, dict) for r in records)
    if refusal is not None:
        assert str(refusal).startswith(str(path))  # every refusal names the file


def test_expire_takes_one_timer_now_and_rearms_a_repeating_one_a_period_on() -> None:
    q: TimerQueue[str] = TimerQueue()
    once = q.add("once", 500)
    every = q.add("every", 100, 10)
    assert q.expire(once) == "once" and once not in q
    assert q.expire(once) is None
    assert q.expire(every) == "every"
    assert q.deadline(every) == 110  # one period after its deadline, whatever the time
    assert q.pop_due(109) == []
    assert q.pop_due(110) == ["every"]
    assert q.deadline(every) == 120


def test_expire_next_fires_the_timer_that_runs_the_callback_whatever_its_deadline() -> None:
    fired: list[str] = []
    done = threading.Event()
    with Bus(timer_clock=lambda: 0) as bus:

        class Two(Actor):
            def startup(self) -> None:
                self.schedule(5.0, self.late)
                self.schedule_every(1.0, self.often)

            def late(self) -> None:
                fired.append("late")
                done.set()

            def often(self) -> None:
                fired.append("often")

        two = Two("two")
        bus.startup(two).wait(WAIT)
        timers = bus.runtime.timers
        assert timers.expire_next("nothing.here") is None
        late = timers.expire_next(Two.late.__qualname__)
        assert late is not None and late.label == Two.late.__qualname__
        assert done.wait(WAIT)
        assert fired == ["late"]  # the clock never moved
        assert timers.fire_due() == 0
