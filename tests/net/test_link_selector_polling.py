"""Polling selectors (``net.selector.NAME.type`` spinning | spin+park | spin+yield):
the selector's event loop polls instead of blocking in epoll when idle.  Real
loopback sockets between two buses in this process; the counters of
``IOThread.stats()`` show how the loop polled."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loguru import logger
from nodes.messages import Answer, Ask, Counter
from nodes.support import linked, started, wait_for

from actorbus import Bus, BusConfig, ConfigError, FeedState
from actorbus.config import (
    DispatcherConfig,
    DispatcherKind,
    SelectorConfig,
    ServiceSettings,
    load_config,
)
from actorbus.net import IOThreadStats
from actorbus.testing import Recorder

UP = FeedState.UP
POLLING = (DispatcherKind.SPINNING, DispatcherKind.SPIN_PARK, DispatcherKind.SPIN_YIELD)


def _sockets() -> int:
    """Sockets this process holds open (Linux: /proc/self/fd)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:  # closed while listing
            pass
    return count


@pytest.fixture(autouse=True)
def no_leaked_sockets() -> Iterator[None]:
    before = _sockets()
    yield
    wait_for(lambda: _sockets() <= before, f"the sockets open before the test ({before}) remain")


@pytest.fixture
def warnings_log() -> Iterator[list[str]]:
    """Messages the library logs at WARNING or above while the test runs."""
    records: list[str] = []
    logger.enable("actorbus")
    sink = logger.add(lambda m: records.append(m.record["message"]), level="WARNING")
    try:
        yield records
    finally:
        logger.remove(sink)
        logger.disable("actorbus")


def shared(node_id: str, kind: DispatcherKind, **selector: Any) -> Bus:
    """A bus whose actors and links share one asyncio dispatcher's loop, polled as ``kind``."""
    config = BusConfig(
        dispatchers=(DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=True),),
        selectors=(SelectorConfig("net", kind=kind, dispatcher="io", is_default=True, **selector),),
    )
    return Bus(config, node_id=node_id)


def own_thread(node_id: str, kind: DispatcherKind, **selector: Any) -> Bus:
    """The default bus (a blocking dispatcher) with its selector on its own thread."""
    config = BusConfig(selectors=(SelectorConfig("net", kind=kind, is_default=True, **selector),))
    return Bus(config, node_id=node_id)


def selector(bus: Bus) -> Any:
    assert bus.net is not None
    [only] = bus.net.selectors
    return only


def loop_turns(sel: Any, turns: int = 2) -> None:
    """Wait until ``sel``'s loop has run ``turns`` more iterations (one callback each)."""
    for _ in range(turns):
        done = threading.Event()
        assert sel.call(done.set)
        assert done.wait(5)


def exchange(a: Bus, b: Bus, count: int = 20) -> None:
    """Notifications A -> B and requests B -> A answered by A: all arrive, in order."""
    pub, rep = Recorder("pub"), Recorder("rep")
    sub, req = Recorder("sub"), Recorder("req")
    started(a, pub, rep)
    started(b, sub, req)
    rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q * 2)
    rep.replier(Ask, "/q")
    p = pub.publisher(Counter, "/c", up=True)
    s = sub.subscribe(Counter, "/c")
    sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
    pub.log.wait_for(lambda ev: ("publish_status", p.key, UP) in ev)
    for n in range(count):
        p.publish(Counter("/c", n=n))
    got = sub.log.wait_count("message", count)
    assert [e[1].n for e in got if e[0] == "message"] == list(range(count))
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    for q in range(count):
        f.request(Ask("/q", q=q))
    replies = [e for e in req.log.wait_count("reply", count) if e[0] == "reply"]
    assert sorted(r[2].value for r in replies) == [q * 2 for q in range(count)]


def net_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("actorbus-net-")]


def closed_promptly(*buses: Bus) -> float:
    """Close ``buses``; the seconds it took."""
    t0 = time.monotonic()
    for bus in buses:
        bus.close()
    return time.monotonic() - t0


# --------------------------------------------------------------- the kinds deliver


@pytest.mark.parametrize("kind", POLLING, ids=lambda k: k.value)
@pytest.mark.parametrize("make", [shared, own_thread], ids=["shared-loop", "own-thread"])
def test_each_polling_kind_carries_notifications_and_requests(
    kind: DispatcherKind, make: Any
) -> None:
    before = net_threads()
    # a small limit, so spin+park parks and spin+yield yields during the test
    a, b = make("A", kind, spin_limit=50), make("B", kind, spin_limit=50)
    try:
        linked(a, b)
        exchange(a, b)
        for bus in (a, b):
            sel = selector(bus)
            assert sel.poller is not None and sel.poller.running
            stats = sel.stats()
            assert (stats.name, stats.kind) == ("net", kind)
            assert stats.dispatcher == ("io" if make is shared else None)
            assert stats.spins > 0  # the loop polled without sleeping
            assert bus.net is not None and bus.net.stats()["selectors"]["net"].kind is kind
        if kind is DispatcherKind.SPINNING:
            assert selector(a).stats().parks == selector(a).stats().yields == 0
        # idle now: past 50 empty polls spin+park parks, spin+yield yields
        if kind is DispatcherKind.SPIN_PARK:
            wait_for(lambda: selector(b).stats().parks > 0, "B's selector parks")
        if kind is DispatcherKind.SPIN_YIELD:
            wait_for(lambda: selector(b).stats().yields > 0, "B's selector yields")
        pollers = [selector(a).poller, selector(b).poller]
    finally:
        took = closed_promptly(b, a)
    assert took < 3.0, f"closing two buses with {kind.value} selectors took {took:.2f} s"
    assert all(p is not None and not p.running for p in pollers)
    assert net_threads() == before


def test_a_blocking_selector_has_no_poller_and_zero_counters() -> None:
    for kind in (DispatcherKind.ASYNCIO, DispatcherKind.BLOCKING):
        with Bus(BusConfig(selectors=(SelectorConfig("net", kind=kind),)), node_id="X") as bus:
            bus.listen(0)
            sel = selector(bus)
            assert sel.poller is None
            assert sel.stats() == IOThreadStats("net", kind, None)


# ------------------------------------------------------------ spin+park, step by step


def test_spin_park_parks_after_the_limit_and_resumes_spinning_on_traffic() -> None:
    limit = 300
    a = shared("A", DispatcherKind.SPIN_PARK, spin_limit=limit, park_time_ns=1_000_000)
    b = shared("B", DispatcherKind.SPIN_PARK, spin_limit=limit, park_time_ns=1_000_000)
    try:
        linked(a, b)
        rep, req = Recorder("rep"), Recorder("req")
        started(a, rep)
        started(b, req)
        rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q + 1)
        rep.replier(Ask, "/q")
        f = req.requestor(Ask, "/q")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        sel = selector(a)
        link = a.links[0]
        # nothing arrives: after `limit` empty polls the loop parks, and stays parked.
        # The handshake's last frames (B's subscription, feed status) may still reach
        # A after it first parked, and a read rightly resumes spinning: judge a window
        # of three parked polls in which A read nothing.
        deadline = time.monotonic() + 10
        while True:
            wait_for(lambda: sel.stats().parked, "A's selector parks once the link is idle")
            idle, read = sel.stats(), link.counters.bytes_in
            wait_for(lambda: sel.stats().parks >= idle.parks + 3, "A's parked loop polls again")
            still = sel.stats()
            if link.counters.bytes_in == read:
                break
            assert time.monotonic() < deadline, "A's link never stayed quiet for 3 parked polls"
        assert still.spins == idle.spins  # parked polls are not spins
        assert still.parked
        # a request arrives: the loop handles it and spins again (at least `limit`
        # polls before it can park again)
        f.request(Ask("/q", q=41))
        replies = [e for e in req.log.wait_count("reply", 1) if e[0] == "reply"]
        assert replies[0][2].value == 42
        wait_for(
            lambda: sel.stats().spins >= still.spins + limit,
            "A's selector spins again after the request arrived",
        )
        wait_for(lambda: sel.stats().parked, "A's selector parks again once idle")
    finally:
        closed_promptly(b, a)


def test_closing_the_network_stops_the_poller_on_a_dispatcher_that_keeps_running() -> None:
    """The dispatcher owns a shared loop: closing the node's network stops the poller
    there (the loop blocks in epoll again) and leaves the loop to the dispatcher."""
    bus = shared("A", DispatcherKind.SPINNING)
    try:
        bus.listen(0)
        sel = selector(bus)
        loop_turns(sel)
        assert sel.stats().spins > 0
        assert bus.net is not None
        bus.net.close()
        assert sel.poller is not None and not sel.poller.running
        loop_turns(sel)  # the poller's last callback has run: it did not reschedule
        spins = sel.stats().spins
        loop_turns(sel, 5)
        assert sel.stats().spins == spins
        assert bus.runtime.dispatcher("io").is_running
    finally:
        t0 = time.monotonic()
        bus.close()
    assert time.monotonic() - t0 < 3.0


@pytest.mark.parametrize("kind", POLLING, ids=lambda k: k.value)
def test_a_polling_loop_does_not_hold_up_its_dispatcher_s_stop(kind: DispatcherKind) -> None:
    """The dispatcher owns a shared loop: stopping it while the poller still runs
    ends the loop at once (a ready callback does not keep a stopped loop alive)."""
    bus = shared("A", kind, spin_limit=0)  # spin+park parks, spin+yield yields at once
    try:
        bus._start_net()
        sel = selector(bus)
        loop_turns(sel)
        assert sel.poller is not None and sel.poller.running
        t0 = time.monotonic()
        assert bus.runtime.dispatcher("io").stop(5.0) == []
        assert time.monotonic() - t0 < 1.0
        assert sel.loop.is_closed()
    finally:
        bus.close()


def test_two_selectors_on_one_loop_share_one_poller() -> None:
    config = BusConfig(
        dispatchers=(DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=True),),
        selectors=(
            SelectorConfig("x", kind=DispatcherKind.SPIN_PARK, dispatcher="io", spin_limit=10),
            SelectorConfig("y", kind=DispatcherKind.SPIN_PARK, dispatcher="io", spin_limit=10),
        ),
    )
    with Bus(config, node_id="A") as a, Bus(node_id="B") as b:
        service = a.listen(0, settings=ServiceSettings(service_selector="y"))
        link = b.connect("127.0.0.1", service.port)
        link.wait_logged_on(5)
        assert a.net is not None
        x, y = a.net.selectors
        assert x.poller is y.poller is not None
        assert x.poller.selectors == (x, y)
        # a link on either selector is activity for the loop's one poller
        wait_for(lambda: x.stats().parked, "the shared loop parks once idle")
        parked = x.stats()
        b.publisher(Counter, "/c", up=True)  # the advertisement arrives on y's link
        wait_for(lambda: x.stats().spins > parked.spins, "y's read makes the loop spin")
        assert x.stats().spins == y.stats().spins


# --------------------------------------------------------------------- the GIL warning


def test_a_polling_selector_beside_threaded_actors_logs_a_warning(
    warnings_log: list[str],
) -> None:
    with own_thread("A", DispatcherKind.SPIN_PARK) as bus:
        bus.listen(0)
    [message] = [m for m in warnings_log if "selector net" in m]
    assert "polls (spin+park) on its own thread" in message
    assert "'default'" in message and "GIL" in message
    assert "net.selector.net.dispatcher" in message
    warnings_log.clear()
    config = BusConfig(
        dispatchers=(
            DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=True),
            DispatcherConfig("main"),
        ),
        selectors=(SelectorConfig("net", kind=DispatcherKind.SPINNING, dispatcher="io"),),
    )
    with Bus(config, node_id="B") as bus:
        bus.listen(0)
    [message] = [m for m in warnings_log if "selector net" in m]
    assert "dispatcher 'io'" in message and "'main'" in message and "GIL" in message


def test_a_polling_selector_alone_on_its_actors_loop_logs_no_warning(
    warnings_log: list[str],
) -> None:
    with shared("A", DispatcherKind.SPIN_PARK) as bus:
        bus.listen(0)
    assert not [m for m in warnings_log if "selector" in m]


# ---------------------------------------------------------------------- configuration


def test_properties_file_makes_a_spin_park_selector(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.dispatchers=io\n"
        "actorbus.dispatcher.io.runQueueType=asyncio\n"
        "actorbus.net.selectors=net\n"
        "actorbus.net.selector.net.dispatcher=io\n"
        "actorbus.net.selector.net.type=Spin+Park\n"
        "actorbus.net.selector.net.spinLimit=100\n"
        "actorbus.net.selector.net.parkTime=2500000\n"
        "actorbus.services=api\n"
        "actorbus.service.api.port=0\n"
        "actorbus.service.api.host=127.0.0.1\n"
    )
    config = load_config(path)
    assert config.selectors == (
        SelectorConfig(
            "net",
            kind=DispatcherKind.SPIN_PARK,
            is_default=True,
            spin_limit=100,
            park_time_ns=2_500_000,
            dispatcher="io",
        ),
    )
    with Bus(config, node_id="P") as bus:
        sel = selector(bus)
        assert sel.poller is not None
        assert sel.poller.park_delay == 0.003  # 2.5 ms, rounded up to whole milliseconds
        wait_for(lambda: sel.stats().parked, "the idle selector parks after 100 polls")
        assert sel.stats().spins >= 100


def test_selectors_polling_one_loop_differently_are_refused_at_start() -> None:
    config = BusConfig(
        dispatchers=(DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=True),),
        selectors=(
            SelectorConfig("a", kind=DispatcherKind.SPINNING, dispatcher="io"),
            SelectorConfig("b", dispatcher="io"),
        ),
    )
    with Bus(config, node_id="X") as bus, pytest.raises(ConfigError) as info:
        bus.listen(0)
    assert info.value.key == "net.selector.b.type"
    assert "selectors 'a' and 'b' share the event loop of dispatcher 'io'" in str(info.value)
    assert "(a: spinning; b: blocking)" in str(info.value)
