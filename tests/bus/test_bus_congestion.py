"""Publisher back-pressure through the transport seam: a transport says its
output queue to a peer is congested (``RemoteParty.congested``) and the
publishers whose notifications go there learn it — ``feed.congested``, the
``on_congestion`` callback, ``wait_ready()`` and ``await ready()`` — the same
for every transport (here ``testing.InProcessLink``'s knob)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actorbus import Actor, Bus, Notification, PublishFeed, Scope, UsageError
from actorbus.testing import InProcessLink, Recorder, wait_until


class Tick(Notification):
    value: int


@pytest.fixture
def pair() -> Iterator[tuple[Bus, Bus, InProcessLink]]:
    a, b = Bus(node_id="A"), Bus(node_id="B")
    link = InProcessLink(a, b)
    yield a, b, link
    link.close()
    a.close()
    b.close()


class Publisher(Actor):
    def __init__(self, scope: Scope = Scope.LOCAL_AND_REMOTE) -> None:
        super().__init__(name="pub")
        self.scope = scope
        self.told: list[bool] = []
        self.changed = threading.Event()
        self.feed: PublishFeed[Tick] | None = None

    def startup(self) -> None:
        self.feed = self.publisher(Tick, "/t", scope=self.scope, up=True)

    def on_publish_status(self, state: Any, feed: Any) -> None:
        pass

    def on_congestion(self, congested: bool, feed: PublishFeed[Any]) -> None:
        self.told.append(congested)
        self.changed.set()


def _subscribed(b: Bus) -> Recorder:
    sub = Recorder("sub")
    b.register(sub)
    b.startup([sub]).wait(5)
    sub.subscribe(Tick, "/t")
    return sub


def test_a_congested_peer_is_told_to_its_publishers(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, b, link = pair
    pub = Publisher()
    a.register(pub)
    a.startup([pub]).wait(5)
    feed = pub.feed
    assert feed is not None
    local_only = a.publisher(Tick, "/t", scope=Scope.LOCAL_ONLY)
    _subscribed(b)
    assert wait_until(feed.is_feed_up, 5)
    assert not feed.congested and feed.wait_ready(0)

    link.congest("a")
    assert feed.congested
    assert not local_only.congested  # its routes never reach the link
    assert not feed.wait_ready(0.01)
    assert pub.changed.wait(5) and pub.told == [True]
    # publishing goes on (the transport's hard limit bounds it): nothing is refused
    assert feed.publish(Tick("/t", value=1)) == 1

    pub.changed.clear()
    waiter = threading.Thread(target=lambda: results.append(feed.wait_ready(5)))
    results: list[bool] = []
    waiter.start()
    link.congest("a", False)
    waiter.join(5)
    assert results == [True]
    assert not feed.congested
    assert pub.changed.wait(5) and pub.told == [True, False]
    local_only.close()


def test_congestion_follows_routes_and_the_link(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, b, link = pair
    told: list[bool] = []
    feed = a.publisher(Tick, "/t", on_congestion=lambda c, f: told.append(c))
    link.congest("a")
    assert not feed.congested  # nobody subscribed over there: no route to the link
    _subscribed(b)
    assert wait_until(lambda: feed.congested, 5)  # the new route reaches it
    later = a.publisher(Tick, "/t")
    assert later.congested  # placed on a key whose routes reach the congested link
    link.close("gone")
    assert wait_until(lambda: not feed.congested and not later.congested, 5)
    assert told == [True, False]
    assert a.router._congested == {} and a.router._congested_pubs == 0


def test_await_ready(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, b, link = pair
    feed = a.publisher(Tick, "/t")
    _subscribed(b)
    assert wait_until(feed.is_feed_up, 5)

    async def main() -> tuple[bool, bool, bool]:
        first = await feed.ready(0)
        link.congest("a")
        timed_out = await feed.ready(0.01)
        waiting = asyncio.ensure_future(feed.ready(5))
        await asyncio.sleep(0)
        threading.Thread(target=link.congest, args=("a", False)).start()
        return first, timed_out, await waiting

    assert asyncio.run(main()) == (True, False, True)
    assert feed._waiters == []


def test_wait_ready_refuses_to_block_an_event_loop(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    a, _, _ = pair
    feed = a.publisher(Tick, "/t")

    async def main() -> None:
        feed.wait_ready(0)

    with pytest.raises(UsageError, match="await feed.ready"):
        asyncio.run(main())


def test_the_knob_checks_its_side(pair: tuple[Bus, Bus, InProcessLink]) -> None:
    with pytest.raises(ValueError, match="side must be 'a' or 'b'"):
        pair[2].congest("c")
