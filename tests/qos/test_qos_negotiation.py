"""Negotiation: every combination that cannot be given is refused — at
qos_subscribe / qos_publisher time, or by the publisher when the session
arrives — with a text naming the key, what was asked, what is offered, and
the fix.  Nothing is silently degraded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from qos_support import Pub, Sub, Tick, Tock, on_actor, start

from actorbus import Actor, Bus, FeedState, Wildcard
from actorbus.qos import Delivery, Position, Qos, QosRefused, qos_publisher, qos_subscribe

KEY = 'tests.qos.Tick:"/q"'


@pytest.fixture
def bus() -> Iterator[Bus]:
    b = Bus(node_id="qos-negotiation")
    yield b
    b.close()


@pytest.fixture
def actor(bus: Bus) -> Actor:
    a = Actor(name="plain")
    start(bus, a)
    return a


def _refused_subscribe(actor: Actor, **options: object) -> str:
    def run() -> None:
        qos_subscribe(actor, Tick, "/q", on_message=lambda m, d: None, **options)  # type: ignore[arg-type]

    with pytest.raises(QosRefused) as caught:
        on_actor(actor, run)
    return str(caught.value)


def _refused_publisher(actor: Actor, subject: object = "/q", **options: object) -> str:
    def run() -> None:
        qos_publisher(actor, Tick, subject, **options)  # type: ignore[arg-type]

    with pytest.raises(QosRefused) as caught:
        on_actor(actor, run)
    return str(caught.value)


def test_exactly_once_needs_state_dir(actor: Actor) -> None:
    text = _refused_subscribe(actor, qos=Qos(Delivery.EXACTLY_ONCE), name="c")
    assert text == (
        f"QoS refused for {KEY}: delivery asked exactly-once without state_dir, offered "
        "exactly-once only with a durable watermark; pass state_dir= (a directory the "
        "consumer keeps its acknowledged seqs in) and name=, or ask Delivery.AT_LEAST_ONCE"
    )


def test_a_start_other_than_latest_needs_persistent(actor: Actor) -> None:
    text = _refused_subscribe(actor, start=Position.earliest())
    assert text.startswith(f"QoS refused for {KEY}: start asked Position.earliest(), offered ")
    assert "ask Qos(persistent=True)" in text
    text = _refused_subscribe(actor, start=Position.seq(5))
    assert "start asked Position.seq(5)" in text


def test_persistent_needs_a_name(actor: Actor) -> None:
    text = _refused_subscribe(actor, qos=Qos(persistent=True))
    assert text.startswith(
        f"QoS refused for {KEY}: persistent asked a persistent feed without name="
    )
    assert text.endswith("pass name= (the consumer's durable name)")


def test_a_wildcard_subject_is_refused(actor: Actor) -> None:
    def run() -> None:
        qos_subscribe(actor, Tick, Wildcard.levels("/q/*"), on_message=lambda m, d: None)  # type: ignore[arg-type]

    with pytest.raises(
        QosRefused, match=r"subject asked the wildcard .*call qos_subscribe\(\) once"
    ):
        on_actor(actor, run)
    text = _refused_publisher(actor, Wildcard.levels("/q/*"))
    assert "subject asked the wildcard" in text and "call qos_publisher() once" in text


def test_window_below_one_is_refused(actor: Actor) -> None:
    text = _refused_subscribe(actor, window=0)
    assert text == (
        f"QoS refused for {KEY}: window asked 0, offered 1 or more unacknowledged messages; "
        "pass window=1024 (the default) or another positive count"
    )
    assert "window asked 0" in _refused_publisher(actor, window=0)


def test_journal_and_persistent_go_together(actor: Actor, tmp_path: Path) -> None:
    text = _refused_publisher(actor, journal=tmp_path)
    assert text == (
        f"QoS refused for {KEY}: journal asked journal={str(tmp_path)!r}, offered an offer "
        "that is not persistent (at-least-once, in order); offer Qos(persistent=True) "
        "with the journal, or drop journal="
    )
    text = _refused_publisher(actor, offer=Qos(persistent=True))
    assert text.startswith(
        f"QoS refused for {KEY}: persistent asked an offer at-least-once, persistent, in order"
    )
    assert text.endswith("pass journal= (the journal directory), or offer Qos(persistent=False)")


def _refused_by_publisher(bus: Bus, pub: Pub, sub: Sub) -> str:
    start(bus, pub, sub)
    assert sub.wait(lambda s: bool(s.statuses) and s.statuses[-1].refused is not None)
    status = sub.qs.status
    assert status.state is FeedState.DOWN and status.qos is None
    assert status.refused is not None
    pub.publish(3)
    assert not sub.wait(lambda s: bool(s.got), 0.3)  # nothing is delivered
    assert pub.read(lambda p: p.counters).refused == 1
    assert sub.read(lambda q: q.counters).refused == 1
    return status.refused


def test_more_delivery_than_offered_is_refused(bus: Bus) -> None:
    text = _refused_by_publisher(
        bus, Pub("/q", offer=Qos(Delivery.AT_MOST_ONCE)), Sub("/q", qos=Qos(Delivery.AT_LEAST_ONCE))
    )
    assert text == (
        f"QoS refused for {KEY}: delivery asked at-least-once, offered at-most-once; offer "
        "Qos(delivery=Delivery.AT_LEAST_ONCE) at the publisher, or ask "
        "Delivery.AT_MOST_ONCE at the subscriber"
    )


def test_persistent_from_a_publisher_without_journal_is_refused(bus: Bus) -> None:
    text = _refused_by_publisher(bus, Pub("/q"), Sub("/q", name="d", qos=Qos(persistent=True)))
    assert text == (
        f"QoS refused for {KEY}: persistent asked a persistent session, offered "
        "at-least-once, in order (no journal); make the publisher persistent "
        "(qos_publisher(offer=Qos(persistent=True), journal=...)), or subscribe with "
        "Qos(persistent=False)"
    )


def test_another_message_type_on_the_subject_is_refused(bus: Bus) -> None:
    text = _refused_by_publisher(bus, Pub("/q"), Sub("/q", message_class=Tock))
    assert text == (
        f"QoS refused for {KEY}: message type asked tests.qos.Tock, offered tests.qos.Tick; "
        "subscribe with the publisher's type tests.qos.Tick on this subject, or use another subject"
    )


def test_what_is_in_force_comes_with_the_offer(bus: Bus) -> None:
    pub = Pub("/q", offer=Qos(Delivery.EXACTLY_ONCE))
    sub = Sub("/q", qos=Qos(Delivery.AT_LEAST_ONCE, ordered=False))
    start(bus, pub, sub)
    assert sub.wait(lambda s: s.qs.status.state is FeedState.UP)
    assert sub.qs.status.qos == Qos(Delivery.AT_LEAST_ONCE, ordered=False)
    assert str(sub.qs.status.qos) == "at-least-once, unordered"
    assert str(Qos(Delivery.EXACTLY_ONCE, persistent=True)) == "exactly-once, persistent, in order"
