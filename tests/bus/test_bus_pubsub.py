"""Publish/subscribe and feed state, through a real Bus and real actors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    FeedState,
    FeedStateError,
    MessageKey,
    Notification,
    Scope,
    UsageError,
)
from actorbus.config import DispatcherConfig
from actorbus.errors import CallbackError
from actorbus.testing import Recorder

UP, DOWN = FeedState.UP, FeedState.DOWN


class Tick(Notification):
    value: int


class CatalogUpdate(Notification):
    item: str


@pytest.fixture
def bus() -> Iterator[Bus]:
    config = BusConfig(
        dispatchers=(
            DispatcherConfig(name="default", is_default=True),
            DispatcherConfig(name="other", thread_count=2),
        )
    )
    b = Bus(config)
    yield b
    b.close()


def started(bus: Bus, *actors: Actor) -> None:
    for a in actors:
        bus.register(a)
    bus.startup(list(actors)).wait(5)


def test_subscriber_sees_up_only_after_publisher_declares_up(bus: Bus) -> None:
    pub, sub = Recorder("pub"), Recorder("sub")
    started(bus, pub, sub)
    pfeed = pub.actor_context.open_publish_feed(Tick, "/t")
    pfeed.advertise()
    sfeed = sub.subscribe(Tick, "/t")
    pub.log.wait_for(lambda ev: ("publish_status", pfeed.key, UP) in ev)
    assert sub.states() == []  # publisher advertised but its own state is DOWN
    pfeed.update_feed_state(UP)
    sub.log.wait_for(lambda ev: ("feed_status", sfeed.key, UP) in ev)
    pfeed.publish(Tick("/t", value=1))
    sub.log.wait_count("message", 1)
    pfeed.update_feed_state(DOWN)
    sub.log.wait_for(lambda ev: sub.states() == [UP, DOWN])


def test_publish_while_down_is_an_error_that_says_what_to_do(bus: Bus) -> None:
    pub = Recorder("pub")
    started(bus, pub)
    pfeed = pub.publisher(Tick, "/t", up=False)
    with pytest.raises(
        FeedStateError, match=r"Tick:\"/t\" while its state is DOWN; call update_feed_state"
    ):
        pfeed.publish(Tick("/t", value=1))


def test_publish_of_another_key_is_refused(bus: Bus) -> None:
    pub = Recorder("pub")
    started(bus, pub)
    pfeed = pub.publisher(Tick, "/t", up=True)
    with pytest.raises(UsageError, match="only its own key"):
        pfeed.publish(Tick("/other", value=1))


def test_keys_are_type_plus_subject(bus: Bus) -> None:
    pub, fishing, camping = Recorder("pub"), Recorder("fishing"), Recorder("camping")
    started(bus, pub, fishing, camping)
    fishing.subscribe(CatalogUpdate, "FishingGear")
    camping.subscribe(CatalogUpdate, "CampingGear")
    tick_sub = Recorder("ticks")
    started(bus, tick_sub)
    tick_sub.subscribe(Tick, "FishingGear")
    f = pub.publisher(CatalogUpdate, "FishingGear", up=True)
    f.publish(CatalogUpdate("FishingGear", item="rod"))
    fishing.log.wait_count("message", 1)
    assert camping.log.of("message") == []
    assert tick_sub.log.of("message") == []


def test_fan_out_and_condition(bus: Bus) -> None:
    pub = Recorder("pub")
    subs = [Recorder(f"s{i}") for i in range(5)]
    started(bus, pub, *subs)
    for i, s in enumerate(subs):
        s.subscribe(Tick, "/t", condition=(lambda m, i=i: m.value % 5 == i) if i == 0 else None)
    f = pub.publisher(Tick, "/t", up=True)
    for v in range(10):
        f.publish(Tick("/t", value=v))
    for s in subs[1:]:
        s.log.wait_count("message", 10)
    subs[0].log.wait_count("message", 2)
    assert [m[1].value for m in subs[0].log.of("message")] == [0, 5]
    assert [m[1].value for m in subs[1].log.of("message")] == list(range(10))


def test_one_down_feed_does_not_affect_other_feeds(bus: Bus) -> None:
    pub, sub = Recorder("pub"), Recorder("sub")
    started(bus, pub, sub)
    a = sub.subscribe(Tick, "/a")
    b = sub.subscribe(Tick, "/b")
    pa = pub.publisher(Tick, "/a", up=True)
    pub.publisher(Tick, "/b", up=True)
    sub.log.wait_for(
        lambda ev: ("feed_status", a.key, UP) in ev and ("feed_status", b.key, UP) in ev
    )
    pa.close()
    sub.log.wait_for(lambda ev: ("feed_status", a.key, DOWN) in ev)
    assert ("feed_status", b.key, DOWN) not in sub.log.snapshot()


def test_publisher_told_down_when_last_subscriber_leaves(bus: Bus) -> None:
    pub, s1, s2 = Recorder("pub"), Recorder("s1"), Recorder("s2")
    started(bus, pub, s1, s2)
    p = pub.publisher(Tick, "/t", up=False)
    f1 = s1.subscribe(Tick, "/t")
    f2 = s2.subscribe(Tick, "/t")
    pub.log.wait_count("publish_status", 1)
    f1.unsubscribe()
    f2.close()
    pub.log.wait_count("publish_status", 2)
    assert pub.states("publish_status") == [UP, DOWN]
    assert p.feed_state is DOWN


def test_callbacks_fire_only_on_change(bus: Bus) -> None:
    p1, p2, sub = Recorder("p1"), Recorder("p2"), Recorder("sub")
    started(bus, p1, p2, sub)
    s = sub.subscribe(Tick, "/t")
    a = p1.publisher(Tick, "/t", up=True)
    b = p2.publisher(Tick, "/t", up=True)
    sub.log.wait_count("feed_status", 1)
    a.update_feed_state(DOWN)  # b still up: no change for the subscriber
    b.update_feed_state(DOWN)
    sub.log.wait_count("feed_status", 2)
    assert sub.states() == [UP, DOWN]
    assert s.feed_state is DOWN


def test_closed_feed_is_unusable_and_says_so(bus: Bus) -> None:
    pub = Recorder("pub")
    started(bus, pub)
    f = pub.publisher(Tick, "/t", up=True)
    f.close()
    f.close()  # harmless
    with pytest.raises(FeedStateError, match="closed"):
        f.advertise()
    with pytest.raises(FeedStateError, match="closed"):
        f.publish(Tick("/t", value=1))


def test_retract_and_place_again(bus: Bus) -> None:
    pub, sub = Recorder("pub"), Recorder("sub")
    started(bus, pub, sub)
    s = sub.subscribe(Tick, "/t")
    p = pub.publisher(Tick, "/t", up=True)
    p.unadvertise()
    with pytest.raises(FeedStateError, match="not advertised; call advertise"):
        p.publish(Tick("/t", value=1))
    p.advertise()
    p.update_feed_state(UP)
    p.publish(Tick("/t", value=2))
    sub.log.wait_count("message", 1)
    assert sub.states() == [UP, DOWN, UP]
    assert s.is_placed


def test_callback_wiring_errors(bus: Bus) -> None:
    class Bare(Actor):
        pass

    a = Bare()
    started(bus, a)
    f = a.actor_context.open_subscribe_feed(Tick, "/t")
    with pytest.raises(CallbackError, match=r"no message callback; override Bare.on_message\(\)"):
        f.subscribe()
    f.message_callback(lambda m, feed: None)
    f.subscribe()
    with pytest.raises(CallbackError, match="already placed"):
        f.status_callback(lambda s, feed: None)
    p = a.actor_context.open_publish_feed(Tick, "/t")
    with pytest.raises(CallbackError, match="no status callback"):
        p.advertise()


def test_scope_table_local_cells(bus: Bus) -> None:
    expected = {
        (Scope.LOCAL_ONLY, Scope.LOCAL_ONLY): True,
        (Scope.LOCAL_ONLY, Scope.LOCAL_AND_REMOTE): True,
        (Scope.LOCAL_ONLY, Scope.REMOTE_ONLY): False,
        (Scope.LOCAL_AND_REMOTE, Scope.LOCAL_ONLY): True,
        (Scope.LOCAL_AND_REMOTE, Scope.LOCAL_AND_REMOTE): True,
        (Scope.LOCAL_AND_REMOTE, Scope.REMOTE_ONLY): True,
        (Scope.REMOTE_ONLY, Scope.LOCAL_ONLY): False,
        (Scope.REMOTE_ONLY, Scope.LOCAL_AND_REMOTE): True,
        (Scope.REMOTE_ONLY, Scope.REMOTE_ONLY): False,
    }
    for n, ((ps, ss), match) in enumerate(expected.items()):
        pub, sub = Recorder(f"p{n}"), Recorder(f"s{n}")
        started(bus, pub, sub)
        subject = f"/scope/{n}"
        probe = bus.inbox(Tick, subject, scope=ss)
        sfeed = sub.subscribe(Tick, subject, scope=ss)
        p = pub.publisher(Tick, subject, scope=ps, up=True)
        p.publish(Tick(subject, value=n))
        got = probe.receive(timeout=0.5 if match else 0.05)
        assert (got is not None) == match, (ps, ss)
        assert (sfeed.feed_state is UP) == match or not match
        probe.close()


def test_value_added_publisher_sees_no_callback_before_startup_returned(bus: Bus) -> None:
    """eBus race: subscribe to one key and advertise another in startup(); no
    callback may arrive before startup() returned."""
    order: list[str] = []

    class ValueAdded(Actor):
        def startup(self) -> None:
            self.out = self.publisher(Tick, "/out", on_status=lambda s, f: None, up=False)
            self.inp = self.subscribe(Tick, "/in", on_message=self.fwd, on_status=self.status)
            order.append("startup-opened")
            # give every other thread a chance to deliver a callback early
            for _ in range(2000):
                pass
            order.append("startup-returned")

        def status(self, state: FeedState, feed: object) -> None:
            order.append(f"status-{state.name}")
            self.out.update_feed_state(state)

        def fwd(self, msg: Tick, feed: object) -> None:
            self.out.publish(Tick("/out", value=msg.value + 1))

    for _ in range(20):
        order.clear()
        va = ValueAdded()
        src = bus.publisher(Tick, "/in")
        sink = bus.inbox(Tick, "/out")
        bus.register(va, dispatcher="other")
        bus.startup(va).wait(5)
        assert sink.wait_up(5)
        src.publish(Tick("/in", value=1))
        got = sink.receive(5)
        assert got is not None and got.value == 2
        assert order[:2] == ["startup-opened", "startup-returned"], order
        bus.shutdown(va).wait(5)
        va.out.close()
        va.inp.close()
        src.close()
        sink.close()


def test_message_key_text(bus: Bus) -> None:
    assert str(MessageKey(CatalogUpdate, "FishingGear")).endswith('CatalogUpdate:"FishingGear"')
