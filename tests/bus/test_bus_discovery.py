"""Discovery: the topics and queue groups in use, on one bus and across a real
loopback link; hidden feeds, private topics and the system's own feeds are never
listed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actorbus import (
    Actor,
    Bus,
    MessageKey,
    Notification,
    Reply,
    Request,
    Scope,
    UsageError,
    Wildcard,
)
from actorbus.bus import SYSTEM_SUBJECT, LinkLoggedOn, discovery
from actorbus.bus.discovery import Topic, local_topics
from actorbus.bus.party import Role

LAR = "LOCAL_AND_REMOTE"


class Price(Notification, type_name="discotest.Price"):
    value: int


class Quote(Reply, type_name="discotest.Quote"):
    value: int


class GetQuote(Request, type_name="discotest.GetQuote", replies=(Quote,)):
    symbol: str


class Desk(Actor):
    """Opens one feed of each role (and two subscribers) when it starts."""

    def __init__(self) -> None:
        super().__init__(name="desk")

    def startup(self) -> None:
        self.publisher(Price, "/prices", up=True, on_status=_ignore)
        self.subscribe(Price, "/prices", on_message=_ignore)
        self.subscribe(Price, "/prices", on_message=_ignore)
        self.requestor(GetQuote, "/quotes", on_reply=_ignore)
        self.serve(GetQuote, "/quotes", lambda request: Quote(request.subject, value=1))


class Hider(Actor):
    """Opens hidden feeds of every role, through the long and the short forms."""

    def __init__(self) -> None:
        super().__init__(name="hider")

    def startup(self) -> None:
        self.publisher(Price, "/hidden/pub", on_status=_ignore, up=True, discoverable=False)
        self.subscribe(Price, "/hidden/sub", on_message=_ignore, discoverable=False)
        self.requestor(GetQuote, "/hidden/req", on_reply=_ignore, discoverable=False)
        self.replier(GetQuote, "/hidden/rep", on_request=_ignore, discoverable=False)
        self.serve(
            GetQuote, "/hidden/serve", lambda r: Quote(r.subject, value=0), discoverable=False
        )
        feed = self.actor_context.open_reply_feed(GetQuote, "/hidden/long", discoverable=False)
        feed.request_callback(_ignore)
        feed.advertise()


def _ignore(*args: object) -> None:
    pass


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus(node_id="N") as b:
        yield b


def started(bus: Bus, actor: Actor) -> None:
    bus.register(actor)
    bus.startup(actor).wait(5)


def row(subject: str, role: str, count: int = 1, up: int = 1, **kw: object) -> Topic:
    values = {
        "node": "N",
        "message_type": "discotest.Price",
        "subject": subject,
        "wildcard": None,
        "role": role,
        "scope": LAR,
        "queue": None,
        "count": count,
        "up": up,
    }
    values.update(kw)
    return Topic(**values)  # type: ignore[arg-type]


def test_a_new_bus_lists_nothing_not_even_its_system_feeds(bus: Bus) -> None:
    assert bus.topics() == []
    assert local_topics(bus.router, bus.node_id) == []


def test_local_rows_for_each_role(bus: Bus) -> None:
    started(bus, Desk())
    quote = {"message_type": "discotest.GetQuote"}
    expected = [
        row("/quotes", "requestor", **quote),
        row("/quotes", "replier", **quote),
        row("/prices", "publisher"),
        row("/prices", "subscriber", count=2, up=2),
    ]
    assert bus.topics() == expected
    assert local_topics(bus.router, "N") == expected


def test_up_counts_what_is_up_and_scripts_feeds_are_listed(bus: Bus) -> None:
    bus.publisher(Price, "/script", up=False)
    bus.inbox(Price, "/script")
    bus.inbox(Price, "/nobody")
    assert bus.topics() == [
        row("/nobody", "subscriber", up=0),
        row("/script", "publisher", up=0),  # advertised, not declared UP
        row("/script", "subscriber", up=0),  # no publisher declared UP
    ]


def test_a_wildcard_subscription_is_one_row_under_its_pattern(bus: Bus) -> None:
    bus.publisher(Price, "/w/a")
    bus.publisher(Price, "/w/b")
    levels = bus.inbox(Price, Wildcard.levels("/w/*"))
    bus.inbox(Price, Wildcard.prefix("/w/**"))
    bus.inbox(Price, Wildcard.levels("/none/..."))
    assert bus.topics() == [
        row("/none/...", "subscriber", up=0, wildcard="levels"),
        row("/w/*", "subscriber", wildcard="levels"),
        row("/w/**", "subscriber", wildcard="prefix"),
        row("/w/a", "publisher"),
        row("/w/b", "publisher"),
    ]
    levels.close()
    assert row("/w/*", "subscriber", wildcard="levels") not in bus.topics()


def test_a_queue_group_is_one_row_with_its_name_and_member_count(bus: Bus) -> None:
    for _ in range(3):
        bus.inbox(Price, "/jobs", queue="workers")
    bus.inbox(Price, "/jobs", queue="audit")
    bus.inbox(Price, "/jobs")
    assert bus.topics() == [
        row("/jobs", "subscriber", up=0),
        row("/jobs", "subscriber", up=0, queue="audit"),
        row("/jobs", "subscriber", count=3, up=0, queue="workers"),
    ]


def test_hidden_feeds_are_not_listed(bus: Bus) -> None:
    started(bus, Hider())
    hidden = bus.publisher(Price, "/hidden/script", discoverable=False)
    inbox = bus.inbox(Price, Wildcard.levels("/hidden/*"), discoverable=False)
    bus.inbox(Price, "/hidden/queue", queue="workers", discoverable=False)
    bus.inbox(LinkLoggedOn, SYSTEM_SUBJECT, discoverable=False)
    assert not hidden.discoverable
    assert not inbox.feed.discoverable
    assert bus.topics() == []
    shown = bus.publisher(Price, "/shown")
    assert shown.discoverable
    assert bus.topics() == [row("/shown", "publisher")]


def test_an_applications_feed_on_the_system_subject_is_listed(bus: Bus) -> None:
    bus.inbox(LinkLoggedOn, SYSTEM_SUBJECT)
    assert bus.topics() == [
        row(SYSTEM_SUBJECT, "subscriber", up=1, message_type="actorbus.LinkLoggedOn")
    ]


def test_private_topics_are_never_listed(bus: Bus) -> None:
    private = bus.private_topic()
    bus.publisher(Price, private, discoverable=True)
    bus.inbox(Price, private)
    bus.inbox(Price, ".mine", queue="workers")
    assert bus.topics() == []


def test_the_scope_filter(bus: Bus) -> None:
    for scope in Scope:
        bus.publisher(Price, f"/{scope.name.lower()}", scope=scope)
    assert bus.topics(scope=Scope.LOCAL_ONLY) == [
        row("/local_only", "publisher", scope="LOCAL_ONLY", up=1)
    ]
    assert [t.scope for t in bus.topics(scope=Scope.REMOTE_ONLY)] == ["REMOTE_ONLY"]
    assert len(bus.topics()) == 3


def test_bad_arguments_say_what_and_how_to_fix(bus: Bus) -> None:
    with pytest.raises(UsageError, match=r"scope='LOCAL_ONLY'.*expected a Scope"):
        bus.topics(scope="LOCAL_ONLY")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"timeout=0.*seconds > 0"):
        bus.topics(0)
    with pytest.raises(UsageError, match=r"scope must be a Scope or None, found 1"):
        local_topics(bus.router, "N", scope=1)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"discoverable must be True or False, found 'no'"):
        bus.publisher(Price, "/x", discoverable="no")  # type: ignore[arg-type]
    closed = Bus(node_id="closed")
    closed.close()
    with pytest.raises(UsageError, match="the bus is closed"):
        closed.topics()


# ==================================================================== across a link


@pytest.fixture
def two() -> Iterator[tuple[Bus, Bus]]:
    """Bus A dialled bus B's service over loopback TCP; both logged on."""
    with Bus(node_id="A") as a, Bus(node_id="B") as b:
        logged_on = b.inbox(LinkLoggedOn, SYSTEM_SUBJECT, discoverable=False)
        service = b.listen(0)
        a.connect("127.0.0.1", service.port).wait_logged_on(5)
        assert logged_on.receive(5) is not None, "B's side of the link did not log on"
        logged_on.close()
        yield a, b


def test_a_linked_nodes_rows_carry_its_node_id_and_leave_its_hidden_keys_out(
    two: tuple[Bus, Bus],
) -> None:
    a, b = two
    started(b, Hider())
    b.publisher(Price, "/b/prices")
    b.publisher(Price, "/b/private-ish", discoverable=False)
    b.publisher(Price, b.private_topic())
    b.inbox(Price, Wildcard.levels("/a/*"))
    b.inbox(Price, "/b/jobs", queue="workers", scope=Scope.LOCAL_ONLY)
    a.publisher(Price, "/a/prices", up=False)
    assert a.inbox(Price, "/b/prices").wait_up(5), "B's publisher never reached A"
    mine = {"node": "A"}
    theirs = {"node": "B"}
    expected = [
        row("/a/prices", "publisher", up=0, **mine),
        row("/b/prices", "subscriber", **mine),
        row("/a/*", "subscriber", up=0, wildcard="levels", **theirs),
        row("/b/jobs", "subscriber", up=0, queue="workers", scope="LOCAL_ONLY", **theirs),
        row("/b/prices", "publisher", **theirs),
    ]
    assert a.topics(5.0) == expected
    # the accepting side asks the dialling one just the same
    assert b.topics(5.0) == expected
    assert a.topics(5.0, scope=Scope.LOCAL_ONLY) == [expected[3]]
    # a peer's feeds are its own to list: A lists none of B's proxies
    assert all(t.node == "A" for t in local_topics(a.router, "A"))


def test_a_long_list_crosses_in_several_replies(
    two: tuple[Bus, Bus], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two
    monkeypatch.setattr(discovery, "ROWS_PER_REPLY", 3)
    for n in range(10):
        b.publisher(Price, f"/b/{n:02}")
    rows = a.topics(5.0)
    assert [t.subject for t in rows] == [f"/b/{n:02}" for n in range(10)]
    assert {t.node for t in rows} == {"B"}


def test_a_node_that_does_not_answer_in_time_is_missing(
    two: tuple[Bus, Bus], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two
    held: list[object] = []
    answer = discovery.answer

    def b_holds_its_answer(incoming: object, router: object, node_id: str) -> None:
        if node_id == "B":
            held.append(incoming)  # never answered
        else:
            answer(incoming, router, node_id)  # type: ignore[arg-type]

    monkeypatch.setattr(discovery, "answer", b_holds_its_answer)
    a.publisher(Price, "/a/prices")
    b.publisher(Price, "/b/prices")
    assert a.topics(0.3) == [row("/a/prices", "publisher", node="A")]
    assert len(held) == 1


class _Silent:
    """A transport that sends nothing (every ``send_*`` is a no-op)."""

    def __getattr__(self, name: str) -> object:
        return _ignore


def test_a_peers_discovery_replier_passes_the_reserved_check_its_publishers_do_not(
    bus: Bus,
) -> None:
    party = bus.router.attach("peer", _Silent())  # type: ignore[arg-type]
    party.advertise(MessageKey(discovery.DiscoverTopics, SYSTEM_SUBJECT), Role.REPLIER, True)
    assert bus.router.feeds(MessageKey(discovery.DiscoverTopics, SYSTEM_SUBJECT))["repliers"] == 2
    with pytest.raises(UsageError, match="reserved for system notifications"):
        party.advertise(MessageKey(LinkLoggedOn, SYSTEM_SUBJECT), Role.PUBLISHER, True)
    assert bus.topics() == []  # a peer's proxies are the peer's to list
    party.detach("test over")
