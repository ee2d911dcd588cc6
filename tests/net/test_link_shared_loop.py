"""Selectors that share an asyncio dispatcher's event loop (``SelectorConfig.dispatcher``):
actors on that dispatcher and the links run on one thread, so a message crosses no
thread between the socket and the actor.  Real loopback sockets, two buses."""

from __future__ import annotations

import gc
import socket
import threading
import warnings
from pathlib import Path

import pytest
from nodes.messages import Answer, Ask, Counter
from nodes.support import linked, started, wait_for

from actorbus import Actor, Bus, BusConfig, ConfigError, FeedState, UsageError
from actorbus.config import (
    DispatcherConfig,
    DispatcherKind,
    SelectorConfig,
    ServiceSettings,
    load_config,
)
from actorbus.testing import Recorder

UP = FeedState.UP


def shared(node_id: str) -> Bus:
    """A bus whose only dispatcher is an asyncio one, shared by its only selector."""
    config = BusConfig(
        dispatchers=(DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=True),),
        selectors=(SelectorConfig("net", dispatcher="io", is_default=True),),
    )
    return Bus(config, node_id=node_id)


class ThreadRecorder(Recorder):
    """A Recorder that also notes the thread each message and reply arrived on."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.threads: set[int] = set()

    def on_message(self, message: object, feed: object) -> None:
        self.threads.add(threading.get_ident())
        super().on_message(message, feed)

    def on_reply(self, remaining: int, reply: object, handle: object) -> None:
        self.threads.add(threading.get_ident())
        super().on_reply(remaining, reply, handle)  # type: ignore[arg-type]


def net_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("actorbus-net-")]


def test_actors_and_links_share_one_thread_and_no_io_thread_is_started() -> None:
    before = net_threads()
    a, b = shared("A"), shared("B")
    try:
        linked(a, b)
        assert net_threads() == before  # the links run on the dispatchers' loops
        pub, rep = Recorder("pub"), Recorder("rep")
        sub, req = ThreadRecorder("sub"), ThreadRecorder("req")
        started(a, pub, rep)
        started(b, sub, req)
        rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q * 2)
        rep.replier(Ask, "/q")
        p = pub.publisher(Counter, "/c", up=True)
        s = sub.subscribe(Counter, "/c")
        sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
        # the subscription reached A: the publisher was told someone listens
        pub.log.wait_for(lambda ev: ("publish_status", p.key, UP) in ev)
        for n in range(100):
            p.publish(Counter("/c", n=n))
        got = sub.log.wait_count("message", 100)
        assert [e[1].n for e in got if e[0] == "message"] == list(range(100))
        f = req.requestor(Ask, "/q")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        for q in range(20):
            f.request(Ask("/q", q=q))
        replies = [e for e in req.log.wait_count("reply", 20) if e[0] == "reply"]
        assert sorted(r[2].value for r in replies) == [q * 2 for q in range(20)]
        assert all(r[1] == 0 for r in replies)
        link_thread = b.net.links[0].selector.ident
        assert sub.threads == req.threads == {link_thread}
        assert b.runtime.dispatcher("io").loop_thread_ident == link_thread
    finally:
        b.close()
        a.close()
    assert net_threads() == before


def test_a_link_from_an_actor_on_the_shared_loop_cannot_be_closed_synchronously() -> None:
    a, b = shared("A"), shared("B")
    try:
        _service, link = linked(a, b)
        actor = Recorder("closer")
        started(b, actor)
        outcome: list[BaseException] = []
        done = threading.Event()

        def close_from_the_loop() -> None:
            try:
                link.close()
            except UsageError as exc:
                outcome.append(exc)
            done.set()

        actor.post(close_from_the_loop)
        assert done.wait(5)
        assert len(outcome) == 1 and "would wait for itself" in str(outcome[0])
        assert link.is_logged_on
    finally:
        b.close()
        a.close()


def test_a_selector_on_a_threaded_dispatcher_is_refused_at_start() -> None:
    config = BusConfig(
        dispatchers=(DispatcherConfig("main", is_default=True),),
        selectors=(SelectorConfig("net", dispatcher="main"),),
    )
    with Bus(config, node_id="X") as bus, pytest.raises(ConfigError) as info:
        bus.listen(0)
    assert "dispatcher 'main' is a blocking dispatcher" in str(info.value)
    assert "name an asyncio dispatcher" in str(info.value)
    config = BusConfig(selectors=(SelectorConfig("net", dispatcher="nope"),))
    with Bus(config, node_id="Y") as bus, pytest.raises(ConfigError) as info:
        bus.listen(0)
    assert "dispatcher='nope' names no dispatcher; this bus has default" in str(info.value)


def test_properties_file_puts_a_selector_on_an_asyncio_dispatcher(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.dispatchers=main,io\n"
        "actorbus.dispatcher.io.runQueueType=asyncio\n"
        "actorbus.net.selectors=net\n"
        "actorbus.net.selector.net.dispatcher=io\n"
        "actorbus.services=api\n"
        "actorbus.service.api.port=0\n"
        "actorbus.service.api.host=127.0.0.1\n"
    )
    config = load_config(path)
    assert config.selectors == (SelectorConfig("net", is_default=True, dispatcher="io"),)
    before = net_threads()
    with Bus(config, node_id="P") as bus:
        [service] = bus.net.services
        assert service.selector.dispatcher is bus.runtime.dispatcher("io")
        assert net_threads() == before


def test_properties_file_refuses_a_selector_on_a_threaded_dispatcher(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.dispatchers=main\n"
        "actorbus.net.selectors=net\n"
        "actorbus.net.selector.net.dispatcher=main\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert (err.line, err.key) == (3, "actorbus.net.selector.net.dispatcher")
    assert "'main' is a blocking dispatcher, which has no event loop to share" in err.detail
    assert "actorbus.dispatcher.main.runQueueType=asyncio" in err.detail
    path.write_text("actorbus.net.selectors=net\nactorbus.net.selector.net.dispatcher=io\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.line == 2
    assert "expected the name of a configured dispatcher" in info.value.detail


def test_input_back_pressure_on_a_shared_loop_pauses_and_delivers_everything() -> None:
    """The subscriber drains on the link's own thread: a paused link looks again
    right after the mailbox runs (not on a timer), and nothing is lost or reordered."""
    total = 20_000
    s = shared("S")
    try:
        with Bus(node_id="P") as p:
            service = s.listen(0, settings=ServiceSettings(input_backlog=200))
            link = p.connect("127.0.0.1", service.port)
            link.wait_logged_on(5)
            sub = Recorder("sub")
            started(s, sub)
            sub.subscribe(Counter, "/bp")
            feed = p.publisher(Counter, "/bp", up=True)
            wait_for(feed.is_feed_up, "the publisher sees the remote subscriber")
            for n in range(total):
                feed.publish(Counter("/bp", n=n))
            got = sub.log.wait_count("message", total, timeout=30)
            assert [e[1].n for e in got if e[0] == "message"] == list(range(total))
            [accepted] = service.links
            assert accepted.counters.input_pauses >= 1
            feed.close()
    finally:
        s.close()


class PingPong(Actor):
    """Sends the next request from the reply callback, like a latency benchmark."""

    def __init__(self, name: str, count: int) -> None:
        super().__init__(name)
        self.count = count
        self.values: list[int] = []
        self.remaining: list[int] = []
        self.up = threading.Event()
        self.done = threading.Event()

    def startup(self) -> None:
        self.feed = self.requestor(Ask, "/pp", on_reply=self.got, on_status=self.status)

    def status(self, state: FeedState, feed: object) -> None:
        if state is UP:
            self.up.set()

    def go(self) -> None:
        self.feed.request(Ask("/pp", q=0), timeout=10.0)

    def got(self, remaining: int, reply: Answer, handle: object) -> None:
        self.values.append(reply.value)
        self.remaining.append(remaining)
        if len(self.values) < self.count:
            self.feed.request(Ask("/pp", q=len(self.values)), timeout=10.0)
        else:
            self.done.set()


def test_a_read_runs_the_actors_it_delivers_to_before_the_loop_polls_again() -> None:
    """On a shared loop the actors a read made runnable run at the end of that read's
    callback (dispatcher stat ``drained_after_read``), and what they send leaves in
    the same callback: a ping-pong of requests makes one drain per hop on each node."""
    count = 200
    a, b = shared("A"), shared("B")
    try:
        linked(a, b)
        rep = Recorder("rep")
        started(a, rep)
        rep.auto_reply = lambda inc: Answer("/pp", value=inc.request.q * 2)
        rep.replier(Ask, "/pp")
        asker = PingPong("asker", count)
        started(b, asker)
        assert asker.up.wait(10)
        before_a = a.runtime.dispatcher("io").stats().drained_after_read
        before_b = b.runtime.dispatcher("io").stats().drained_after_read
        asker.post(asker.go)
        assert asker.done.wait(30)
        assert asker.values == [q * 2 for q in range(count)]
        assert asker.remaining == [0] * count
        # every request ran the replier, every reply the requestor, after a read
        assert a.runtime.dispatcher("io").stats().drained_after_read - before_a >= count
        assert b.runtime.dispatcher("io").stats().drained_after_read - before_b >= count
        assert b.router.outstanding_requests == 0
        assert a.router.outstanding_requests == 0
    finally:
        b.close()
        a.close()


def test_stopping_the_dispatcher_a_selector_shares_closes_its_links_and_service_first() -> None:
    """The dispatcher owns the loop: stopping it on its own (not through
    Bus.close) must not leave a socket open on a dead loop, nor the peer waiting
    for a heartbeat timeout to learn the link is gone."""
    a, b = shared("A"), Bus(node_id="B")
    try:
        service, link = linked(a, b)
        port = service.port
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert a.runtime.dispatcher("io").stop(5) == []
            # the peer was told (logoff), well inside the heartbeat delays
            reason = link.wait_closed(5)
            gc.collect()  # an unclosed transport would warn when collected
        assert reason is not None and "'io'" in reason and "was stopped" in reason, reason
        assert a.links == ()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), 1):
            pass  # nothing listens any more
        leftovers = [w for w in caught if issubclass(w.category, (ResourceWarning, RuntimeWarning))]
        assert leftovers == [], [str(w.message) for w in leftovers]
    finally:
        b.close()
        a.close()
