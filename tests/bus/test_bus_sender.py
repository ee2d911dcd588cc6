"""Sender information: every delivered notification, request and reply says
which node, actor and feed sent it (``feed.sender``, ``request.sender``,
``handle.sender``), locally and across a link."""

from __future__ import annotations

import queue
import threading
from typing import Any

from actorbus import (
    Actor,
    Bus,
    FeedState,
    IncomingRequest,
    Notification,
    Reply,
    Request,
    RequestHandle,
    Wildcard,
)
from actorbus.bus.sender import Sender
from actorbus.testing import InProcessLink

WAIT = 10.0


class Tick(Notification, type_name="t.sender.Tick"):
    n: int = 0


class Pong(Reply, type_name="t.sender.Pong"):
    pass


class Ping(Request, type_name="t.sender.Ping", replies=(Pong,)):
    pass


class Listener(Actor):
    """Records (message, sender) for each delivery of each subscription it makes."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.got: queue.Queue[tuple[Any, Sender | None]] = queue.Queue()

    def on_message(self, message: Any, feed: Any) -> None:
        self.got.put((message, feed.sender))

    def take(self, n: int) -> list[tuple[Any, Sender | None]]:
        return [self.got.get(timeout=WAIT) for _ in range(n)]


class Talker(Actor):
    def __init__(self, name: str, subject: str = "/t") -> None:
        super().__init__(name=name)
        self.subject = subject
        self.feed: Any = None
        self.up = threading.Event()

    def startup(self) -> None:
        self.feed = self.publisher(Tick, self.subject, up=True, on_status=self._status)

    def _status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self.up.set()


def _start(bus: Bus, *actors: Actor) -> None:
    for actor in actors:
        bus.register(actor)
    bus.startup(list(actors)).wait(WAIT)


def test_a_subscriber_learns_the_publishing_node_actor_and_feed() -> None:
    with Bus(node_id="here") as bus:
        listener = Listener("listener")
        one, two = Talker("one"), Talker("two")
        _start(bus, listener, one, two)
        listener.post(lambda: listener.subscribe(Tick, "/t"))
        listener.post(lambda: listener.subscribe(Tick, Wildcard.levels("/*")))
        assert one.up.wait(WAIT) and two.up.wait(WAIT)
        one.post(lambda: one.feed.publish(Tick("/t", n=1)))
        two.post(lambda: two.feed.publish(Tick("/t", n=2)))
        got = listener.take(4)  # each message to the exact and the wildcard feed
        by_n = {}
        for message, sender in got:
            by_n.setdefault(message.n, set()).add(sender)
        assert by_n[1] == {Sender("here", "one", one.feed.id, 0)}
        assert by_n[2] == {Sender("here", "two", two.feed.id, 0)}


def test_a_feed_without_an_actor_is_named_by_node_and_feed() -> None:
    with Bus(node_id="here") as bus:
        listener = Listener("listener")
        _start(bus, listener)
        listener.post(lambda: listener.subscribe(Tick, "/t", queue="g"))
        up = threading.Event()
        with bus.publisher(Tick, "/t", on_status=lambda state, feed: state and up.set()) as pub:
            assert up.wait(WAIT)
            pub.publish(Tick("/t", n=1))
            [(message, sender)] = listener.take(1)
            assert message.n == 1
            assert sender == Sender("here", None, pub.id, 0)


def test_across_a_link_the_sender_is_the_peer_one_hop_away() -> None:
    with Bus(node_id="a") as a, Bus(node_id="b") as b:
        link = InProcessLink(a, b, "a", "b")
        try:
            listener = Listener("listener")
            _start(a, listener)
            listener.post(lambda: listener.subscribe(Tick, Wildcard.prefix("/t*")))
            up = threading.Event()
            with b.publisher(Tick, "/t", on_status=lambda state, feed: state and up.set()) as pub:
                assert up.wait(WAIT)
                pub.publish(Tick("/t", n=7))
                [(message, sender)] = listener.take(1)
            assert message.n == 7
            assert sender == Sender("b", None, pub.id, 1)
        finally:
            link.close()


def test_over_a_tcp_link_each_message_names_its_own_publisher() -> None:
    """Two actors publish the same key on B, interleaved, and one publishes a
    second key: A's subscribers see, per message, B's node, the actor and the
    feed that published it (the link names the publisher whenever it changes)."""
    with Bus(node_id="A") as a, Bus(node_id="B") as b:
        service = b.listen(0)
        a.connect("127.0.0.1", service.port).wait_logged_on(WAIT)
        listener = Listener("listener")
        _start(a, listener)
        listener.post(lambda: listener.subscribe(Tick, Wildcard.levels("/...")))
        one, two, other = Talker("one"), Talker("two"), Talker("other", "/u")
        _start(b, one, two, other)
        assert one.up.wait(WAIT) and two.up.wait(WAIT) and other.up.wait(WAIT)
        done = threading.Event()

        def burst() -> None:  # on "one"'s thread: the three feeds, interleaved
            for n in range(300):
                feed = (one.feed, two.feed, other.feed)[n % 3]
                feed.publish(Tick(feed.key.subject, n=n))
            done.set()

        one.post(burst)
        assert done.wait(WAIT)
        got = listener.take(300)
        expected = {
            0: Sender("B", "one", one.feed.id, 1),
            1: Sender("B", "two", two.feed.id, 1),
            2: Sender("B", "other", other.feed.id, 1),
        }
        assert [m.n for m, _ in got] == list(range(300))
        assert all(sender == expected[m.n % 3] for m, sender in got), got[:6]


class Answerer(Actor):
    def __init__(self) -> None:
        super().__init__(name="answerer")
        self.asked_by: queue.Queue[Sender] = queue.Queue()

    def startup(self) -> None:
        self.replier(Ping, "/p", on_request=self._answer, up=True)

    def _answer(self, request: IncomingRequest[Any]) -> None:
        self.asked_by.put(request.sender)
        request.reply(Pong("/p"))


class Asker(Actor):
    def __init__(self) -> None:
        super().__init__(name="asker")
        self.answered_by: queue.Queue[Sender | None] = queue.Queue()
        self.feed: Any = None
        self.up = threading.Event()

    def startup(self) -> None:
        self.feed = self.requestor(
            Ping, "/p", on_reply=self._reply, on_status=lambda s, f: s and self.up.set()
        )

    def _reply(self, remaining: int, reply: Reply, handle: RequestHandle[Any]) -> None:
        self.answered_by.put(handle.sender)


def test_a_replier_learns_the_requestor_and_the_requestor_the_replier() -> None:
    with Bus(node_id="here") as bus:
        answerer, asker = Answerer(), Asker()
        _start(bus, answerer, asker)
        assert asker.up.wait(WAIT)
        asker.post(lambda: asker.feed.request(Ping("/p")))
        assert answerer.asked_by.get(timeout=WAIT) == Sender("here", "asker", asker.feed.id, 0)
        by = asker.answered_by.get(timeout=WAIT)
        assert by is not None
        assert (by.node, by.actor, by.hops) == ("here", "answerer", 0)


def test_over_a_tcp_link_requests_and_replies_name_their_actors() -> None:
    with Bus(node_id="A") as a, Bus(node_id="B") as b:
        service = b.listen(0)
        a.connect("127.0.0.1", service.port).wait_logged_on(WAIT)
        answerer, asker = Answerer(), Asker()
        _start(b, answerer)
        _start(a, asker)
        assert asker.up.wait(WAIT)
        for _ in range(3):  # the first names them; the next go the direct way
            asker.post(lambda: asker.feed.request(Ping("/p")))
            assert answerer.asked_by.get(timeout=WAIT) == Sender("A", "asker", asker.feed.id, 1)
            by = asker.answered_by.get(timeout=WAIT)
            assert by is not None
            assert (by.node, by.actor, by.hops) == ("B", "answerer", 1)
            assert by.feed > 0
