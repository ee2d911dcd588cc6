"""Persistent and exactly-once feeds: a journal-backed publisher that restarts
and continues its seqs, a durable consumer that restarts and resumes after
what it acknowledged (saved in its state_dir), replay from a position."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from qos_support import WAIT, Pub, Sub, start

from actorbus import Bus, FeedState
from actorbus.qos import Delivery, Position, Qos
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
