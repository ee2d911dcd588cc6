"""Persistent and exactly-once feeds: a journal-backed publisher that restarts
and continues its seqs, a durable consumer that restarts and resumes after
what it acknowledged (saved in its state_dir), replay from a position."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from qos_support import WAIT, Pub, Sub, Tick, on_actor, start

from actorbus import Bus, FeedState
from actorbus.journal import JournalReader, Retention, SyncPolicy
from actorbus.qos import Delivery, DeliveryFailed, DeliveryFuture, Position, Qos
from actorbus.testing import wait_until

EXACTLY = Qos(Delivery.EXACTLY_ONCE, persistent=True)


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(node_id="qos-persist")
    yield b
    b.close()


def _pub(journal: Path, **options: object) -> Pub:
    return Pub("/p", name="pub", offer=EXACTLY, journal=journal, **options)


def _sub(name: str, state: Path | None = None, **options: object) -> Sub:
    if state is not None:
        options.update(qos=EXACTLY, state_dir=state)
    else:
        options.setdefault("qos", Qos(persistent=True))
    return Sub("/p", actor_name=f"sub-{name}-{id(options)}", name=name, **options)


def _stop(bus: Bus, *actors: object) -> None:
    bus.shutdown(list(actors)).wait(WAIT)  # type: ignore[arg-type]
    for actor in actors:
        bus.runtime.unregister(actor)  # type: ignore[arg-type]


def _up(sub: Sub) -> None:
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP), sub.statuses


def test_restarted_publisher_and_consumer_continue_exactly_once(bus: Bus, tmp_path: Path) -> None:
    journal, state = tmp_path / "journal", tmp_path / "state"
    pub, sub = _pub(journal), _sub("x", state)
    start(bus, pub, sub)
    _up(sub)
    assert pub.publish(50) == list(range(1, 51))
    assert sub.wait(lambda s: len(s.taken()) >= 50)
    origin = pub.qp.origin
    assert origin == "qos-persist/pub//p"  # stable: the same after a restart
    assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"x": 50}, WAIT)

    # the publisher restarts on its journal: its seqs continue; the consumer's
    # session comes back by itself and resumes after its watermark
    _stop(bus, pub)
    pub = _pub(journal)
    pub.sent = 50
    start(bus, pub)
    assert pub.qp.origin == origin
    assert wait_until(lambda: pub.read(lambda p: p.sessions) == ("x",), WAIT)
    assert pub.publish(50) == list(range(51, 101))
    assert sub.wait(lambda s: len(s.taken()) >= 100)
    assert sub.taken() == list(range(1, 101))
    assert wait_until(lambda: sub.read(lambda q: q.acked(origin)) == 100, WAIT)

    # the consumer restarts on its state: it resumes after 100, not at earliest
    _stop(bus, sub)
    again = _sub("x", state, start=Position.earliest())
    start(bus, again)
    _up(again)
    assert again.read(lambda q: q.acked(origin)) == 100
    pub.publish(10)
    assert again.wait(lambda s: len(s.taken()) >= 10)
    assert not again.wait(lambda s: len(s.taken()) > 10, 0.3)
    assert again.taken() == list(range(101, 111))
    assert again.read(lambda q: q.counters).duplicates == 0


def test_a_new_durable_consumer_replays_from_its_position(bus: Bus, tmp_path: Path) -> None:
    pub = _pub(tmp_path / "journal")
    start(bus, pub)
    pub.publish(100)
    first = _sub("early", start=Position.earliest())
    from_seq = _sub("from-90", start=Position.seq(90))
    latest = _sub("late")
    start(bus, first, from_seq, latest)
    for s in (first, from_seq, latest):
        _up(s)
    pub.publish(5)
    assert first.wait(lambda s: len(s.taken()) >= 105)
    assert first.taken() == list(range(1, 106))
    assert from_seq.wait(lambda s: len(s.taken()) >= 16)
    assert from_seq.taken() == list(range(90, 106))
    assert latest.wait(lambda s: len(s.taken()) >= 5)
    assert latest.taken() == list(range(101, 106))
    assert first.infos[0].seq == 1 and first.infos[0].timestamp > 0


def test_a_time_position_starts_at_the_first_message_at_or_after_it(
    bus: Bus, tmp_path: Path
) -> None:
    pub = _pub(tmp_path / "journal")
    start(bus, pub)
    pub.publish(10)
    reader = _sub("reader", start=Position.earliest())
    start(bus, reader)
    _up(reader)
    assert reader.wait(lambda s: len(s.infos) >= 10)
    stamps = [info.timestamp for info in reader.infos]
    cut = stamps[5]
    expected = [i + 1 for i, t in enumerate(stamps) if t >= cut]
    timed = _sub("timed", start=Position.time(cut))
    start(bus, timed)
    _up(timed)
    assert timed.wait(lambda s: len(s.taken()) >= len(expected))
    assert timed.taken() == expected


def test_an_interval_sync_policy_sends_once_synced(bus: Bus, tmp_path: Path) -> None:
    """With SyncPolicy.interval, a message goes to consumers once an fsync
    covered it: the publisher commits again until everything is durable."""
    pub = _pub(tmp_path / "journal", sync=SyncPolicy.interval(50))
    sub = _sub("x", tmp_path / "state")
    start(bus, pub, sub)
    _up(sub)
    for _ in range(5):  # the later flushes come within 50 ms of an fsync
        pub.publish(10)
    assert sub.wait(lambda s: len(s.taken()) >= 50)
    assert sub.taken() == list(range(1, 51))


def test_a_durable_publish_is_acknowledged_once_its_frame_is_synced(
    bus: Bus, tmp_path: Path
) -> None:
    """publish_durable's future resolves after the journal holds the message
    (a reader in another process would see it), never before; with an
    interval policy, once the interval's fsync covered it."""
    journal = tmp_path / "journal"
    pub = _pub(journal, sync=SyncPolicy.interval(200))
    start(bus, pub)
    reader = JournalReader(journal)
    seen: list[tuple[int, int, int]] = []

    def run() -> list[DeliveryFuture]:
        futures = []
        for n in range(1, 101):
            future = pub.qp.publish_durable(Tick("/p", n=n))
            future.add_done_callback(
                lambda f: seen.append((f.seq, reader.last_seq(), pub.qp.durable_seq))
            )
            futures.append(future)
        assert not any(f.done() for f in futures)  # (nothing is durable yet)
        return futures

    futures = on_actor(pub, run)
    assert [f.result(WAIT).seq for f in futures] == list(range(1, 101))
    assert wait_until(lambda: len(seen) == 100, WAIT)  # (callbacks run after result())
    assert [seq for seq, _, _ in seen] == list(range(1, 101))  # in order
    for seq, on_disk, durable in seen:
        assert on_disk >= seq and durable >= seq, (seq, on_disk, durable)
    assert pub.read(lambda p: p.durable_seq) == 100


def test_a_durable_publish_fails_when_the_publisher_closes_first(bus: Bus, tmp_path: Path) -> None:
    pub = _pub(tmp_path / "journal", sync=SyncPolicy.interval(60_000))

    def run() -> DeliveryFuture:
        future = pub.qp.publish_durable(Tick("/p", n=1))
        pub.qp.close()  # before any fsync covered it
        return future

    start(bus, pub)
    future = on_actor(pub, run)
    with pytest.raises(DeliveryFailed, match="closed before its journal said"):
        future.result(WAIT)


def test_a_publisher_that_is_not_persistent_acknowledges_at_once(bus: Bus) -> None:
    pub = Pub("/m", name="mem", offer=Qos(Delivery.AT_LEAST_ONCE))
    start(bus, pub)
    future = on_actor(pub, lambda: pub.qp.publish_durable(Tick("/m", n=1)))
    assert future.done() and future.result(0).consumers == ()


def test_a_consumer_back_after_retention_took_its_messages_is_told_what_was_lost(
    bus: Bus, tmp_path: Path
) -> None:
    """Retention, not acknowledgements, decides what the journal keeps: a
    durable consumer away while retention deleted what it had not read gets a
    LOST range for it (counted on both sides), then the rest, in order."""
    journal = tmp_path / "journal"
    pub = _pub(journal, segment_bytes=512, retention=Retention(max_bytes=2_048))
    sub = _sub("away", tmp_path / "state")
    start(bus, pub, sub)
    _up(sub)
    pub.publish(5)
    assert sub.wait(lambda s: len(s.taken()) >= 5)
    assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"away": 5}, WAIT)
    _stop(bus, sub)
    for _ in range(30):  # a frame a turn, a 512-byte segment a frame or two:
        pub.publish(10)  # retention deletes the oldest
    back = _sub("away", tmp_path / "state")
    start(bus, back)
    _up(back)
    assert back.wait(lambda s: bool(s.taken()) and s.taken()[-1] == 305), back.taken()[-3:]
    first = back.taken()[0]  # where the journal started when it came back
    assert first > 6 and first == JournalReader(journal).first_seq(), first
    assert back.taken() == list(range(first, 306))  # the rest, in order
    assert back.read(lambda q: q.counters).lost == first - 6  # 6 .. first - 1: told, not skipped
    assert pub.read(lambda p: p.counters).lost == first - 6
