"""The Recorder actor on a real bus: what it journals, when it flushes, how it stops.

No Spark here: the recorder needs only the journal."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from spark_messages import Other, Reading
from spark_support import BASE_MS, reading

from actorbus import Actor, Bus, FeedState, MessageKey, UsageError
from actorbus.bus.codec import decode
from actorbus.journal import JournalLockedError, JournalReader
from actorbus.spark import Recorder


def barrier(actor: Actor, timeout: float = 10.0) -> None:
    """Wait until every task posted to ``actor`` so far has run."""
    done = threading.Event()
    actor.post(done.set)
    assert done.wait(timeout)


class SignallingRecorder(Recorder):
    """Tells the test each time a flush wrote something, and how many arrived."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.flushed = threading.Event()
        self.arrived = 0
        self._cond = threading.Condition()

    def _record(self, message: Any, feed: Any) -> None:
        super()._record(message, feed)
        with self._cond:
            self.arrived += 1
            self._cond.notify_all()

    def wait_arrived(self, count: int, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.arrived >= count, timeout)

    def flush(self) -> None:
        before = self.recorded
        super().flush()
        if self.recorded != before:
            self.flushed.set()


def journal_messages(path: Path) -> list[object]:
    out = []
    for rec in JournalReader(path).read(1):
        cls = {Reading.__type_name__: Reading, Other.__type_name__: Other}[rec.type_name]
        msg = decode(cls, rec.body)
        assert (msg.subject, msg.timestamp) == (rec.subject, rec.timestamp)
        out.append(msg)
    return out


def test_records_every_notification_of_its_keys_only(journal_dir: Path) -> None:
    with Bus() as bus:
        recorder = Recorder(journal_dir, [(Reading, "/a"), MessageKey(Other, "/b")])
        bus.register(recorder)
        bus.startup(recorder).wait(10)
        a = bus.publisher(Reading, "/a")
        b = bus.publisher(Other, "/b")
        c = bus.publisher(Reading, "/c")  # not recorded
        sent: list[object] = []
        for i in range(2_500):
            msg: Reading | Other = reading("/a", BASE_MS + i, i / 2, i)
            a.publish(msg)
            sent.append(msg)
            c.publish(reading("/c", BASE_MS + i, 0.0, i))
            if i % 100 == 0:
                msg = Other("/b", timestamp=BASE_MS + i, text=f"t{i}")
                b.publish(msg)
                sent.append(msg)
        assert recorder.flush_and_wait() == len(sent)
        assert recorder.recorded == len(sent)
        assert recorder.pending == 0
        bus.shutdown_all().wait(10)
    assert journal_messages(journal_dir) == sent


def test_flushes_when_flush_records_are_pending(journal_dir: Path) -> None:
    with Bus() as bus:
        recorder = Recorder(journal_dir, [(Reading, "/a")], flush_records=10, flush_interval=3600)
        bus.register(recorder)
        bus.startup(recorder).wait(10)
        feed = bus.publisher(Reading, "/a")
        for i in range(25):
            feed.publish(reading("/a", BASE_MS + i, 1.0, i))
        barrier(recorder)
        assert (recorder.recorded, recorder.pending) == (20, 5)
        assert JournalReader(journal_dir).end_seq() == 21  # two frames written, 5 pending
        bus.shutdown(recorder).wait(10)  # shutdown flushes the rest
        assert (recorder.recorded, recorder.pending) == (25, 0)
    assert [m.seq_no for m in journal_messages(journal_dir)] == list(range(25))  # type: ignore[attr-defined]


def test_flushes_on_its_timer_when_the_feed_is_quiet(journal_dir: Path) -> None:
    with Bus() as bus:
        recorder = SignallingRecorder(
            journal_dir, [(Reading, "/a")], flush_records=1_000, flush_interval=0.02
        )
        bus.register(recorder)
        bus.startup(recorder).wait(10)
        feed = bus.publisher(Reading, "/a")
        for i in range(3):
            feed.publish(reading("/a", BASE_MS + i, 1.0, i))
        assert recorder.flushed.wait(10)
        assert JournalReader(journal_dir).end_seq() == 4
        bus.shutdown_all().wait(10)


def test_records_notifications_from_a_remote_node(journal_dir: Path) -> None:
    with Bus(node_id="recording-node") as home:
        service = home.listen(0)
        recorder = SignallingRecorder(journal_dir, [(Reading, "/remote")])
        home.register(recorder)
        home.startup(recorder).wait(10)
        with Bus(node_id="publishing-node") as away:
            away.connect("127.0.0.1", service.port).wait_logged_on(10)
            up = threading.Event()
            feed = away.publisher(
                Reading, "/remote", on_status=lambda s, f: up.set() if s is FeedState.UP else None
            )
            assert up.wait(10)
            for i in range(100):
                feed.publish(reading("/remote", BASE_MS + i, float(i), i))
            assert recorder.wait_arrived(100)
            feed.close()
        assert recorder.flush_and_wait() == 100
        home.shutdown_all().wait(10)
    assert [m.seq_no for m in journal_messages(journal_dir)] == list(range(100))  # type: ignore[attr-defined]


def test_one_recorder_per_journal_and_a_restart_continues_the_seqs(journal_dir: Path) -> None:
    with Bus() as bus:
        first = Recorder(journal_dir, [(Reading, "/a")], name="first")
        second = Recorder(journal_dir, [(Reading, "/a")], name="second")
        bus.register(first)
        bus.register(second)
        bus.startup(first).wait(10)
        with pytest.raises(JournalLockedError):
            bus.startup(second).wait(10)
        feed = bus.publisher(Reading, "/a")
        feed.publish(reading("/a", BASE_MS, 1.0, 0))
        bus.shutdown(first).wait(10)
        bus.startup(second).wait(10)  # the lock is free again
        feed.publish(reading("/a", BASE_MS + 1, 2.0, 1))
        assert second.flush_and_wait() == 2
        bus.shutdown_all().wait(10)


def test_bad_recorder_arguments_are_usage_errors(journal_dir: Path) -> None:
    with pytest.raises(UsageError, match="at least one key"):
        Recorder(journal_dir, [])
    with pytest.raises(UsageError, match="not a Notification class"):
        Recorder(journal_dir, [(int, "/a")])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="flush_records=0"):
        Recorder(journal_dir, [(Reading, "/a")], flush_records=0)
    with pytest.raises(UsageError, match="flush_interval=0"):
        Recorder(journal_dir, [(Reading, "/a")], flush_interval=0)
