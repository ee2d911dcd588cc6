"""Authorization per key over real loopback links: a service's (or a
connection's) permissions decide what the peer may publish, subscribe to,
request and reply on; each refusal is counted (``authz_refusals``), reported
with an ``AccessRefused`` system notification and leaves the feed as if the
peer had never asked; a pattern subscription wider than allowed is narrowed to
the keys allowed.  Permissions files: roles, and file:line errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nodes.messages import Answer, Ask, Counter
from nodes.support import RawPeer, buses, started, wait_for

from actorbus import (
    Bus,
    ConfigError,
    FeedState,
    MessageKey,
    ReplyStatus,
    RequestError,
    Scope,
    UsageError,
    Wildcard,
)
from actorbus.bus import SYSTEM_SUBJECT, AccessRefused, Inbox, Permissions, QueueGroup
from actorbus.bus.party import Role
from actorbus.bus.permissions import Action
from actorbus.net import Link, Service
from actorbus.net.protocol import Subscribed
from actorbus.testing import Recorder

COUNTER = Counter.__type_name__

#: node-a may publish and subscribe to /fx/..., request /q/ok, reply on /r/ok
RULES = [
    "allow publish,subscribe node-a /fx/...",
    "allow request node-a /q/ok",
    "allow reply node-a /r/ok linktest.*",
]


@pytest.fixture
def pair() -> Iterator[tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]]]:
    """``here`` serves node-a under RULES; node-a has dialled and logged on."""
    with buses("here", "node-a") as (here, a):
        refused = here.inbox(AccessRefused, SYSTEM_SUBJECT)
        service = here.listen(0, permissions=Permissions(RULES))
        link = a.connect("127.0.0.1", service.port)
        link.wait_logged_on(5)
        wait_for(lambda: any(x.is_logged_on for x in service.links), "here logs on")
        yield here, a, service, link, refused


def refusal(inbox: Inbox[AccessRefused]) -> AccessRefused:
    message = inbox.receive(5)
    assert message is not None, "no AccessRefused within 5 s"
    return message


def key(subject: str) -> str:
    return str(MessageKey(Counter, subject))


def test_a_peer_publishes_only_where_it_may(
    pair: tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]],
) -> None:
    here, a, service, _, refused = pair
    fx, orders = here.inbox(Counter, "/fx/eur"), here.inbox(Counter, "/orders")
    a.publisher(Counter, "/orders")
    fx_pub = a.publisher(Counter, "/fx/eur")
    told = refusal(refused)
    assert (told.peer_node, told.action, told.key) == ("node-a", "publish", key("/orders"))
    assert "no rule allows it" in told.rule
    assert fx.wait_up(5)
    wait_for(fx_pub.is_feed_up, "node-a's /fx/eur publisher sees its subscriber")
    fx_pub.publish(Counter("/fx/eur", n=1))
    message = fx.receive(5)
    assert message is not None and message.n == 1
    # the refused advertisement made nothing here: the subscriber stays DOWN
    assert orders.feed.feed_state is FeedState.DOWN
    assert here.router.feeds(MessageKey(Counter, "/orders"))["publishers"] == 0
    assert service.counters.links.authz_refusals == 1


def test_a_refused_subscription_gets_nothing(
    pair: tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]],
) -> None:
    here, a, service, _, refused = pair
    fx_pub, orders_pub = here.publisher(Counter, "/fx/eur"), here.publisher(Counter, "/orders")
    a.inbox(Counter, "/orders")
    fx_in = a.inbox(Counter, "/fx/eur")
    told = refusal(refused)
    assert (told.action, told.key) == ("subscribe", key("/orders"))
    wait_for(fx_pub.is_feed_up, "node-a's /fx/eur subscription reaches here")
    assert fx_pub.publish(Counter("/fx/eur", n=2)) == 1
    message = fx_in.receive(5)
    assert message is not None and message.n == 2
    assert not orders_pub.is_feed_up()
    assert orders_pub.publish(Counter("/orders", n=3)) == 0  # nobody to send it to
    assert service.counters.links.authz_refusals == 1


def test_a_refused_request_is_acknowledged_with_no_replier(
    pair: tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]],
) -> None:
    here, a, service, _, refused = pair
    rep = Recorder("rep")
    started(here, rep)
    rep.auto_reply = lambda inc: Answer(inc.request.subject, value=inc.request.q * 2)
    rep.replier(Ask, "/q/ok")
    rep.replier(Ask, "/q/no")
    wait_for(
        lambda: a.router.feeds(MessageKey(Ask, "/q/no"))["repliers"] == 1,
        "node-a knows here's repliers",
    )
    (reply,) = a.request_all(Ask("/q/no", q=1), 5.0)
    told = refusal(refused)
    assert (told.action, told.key) == ("request", str(MessageKey(Ask, "/q/no")))
    # acknowledged with no replier: the requestor is told at once
    assert reply.status is ReplyStatus.ERROR
    assert reply.reason == "no replier at remote node here took the request"
    assert [r.value for r in a.request_all(Ask("/q/ok", q=4), 5.0)] == [8]
    assert rep.log.of("request") and all(
        e[1].request.subject == "/q/ok" for e in rep.log.of("request")
    )
    # every refused request counts; the notification is sent once per key
    assert a.request_all(Ask("/q/no", q=2), 5.0)[0].status is ReplyStatus.ERROR
    assert service.counters.links.authz_refusals == 2
    assert refused.receive_nowait() is None


def test_a_peer_replies_only_where_it_may(
    pair: tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]],
) -> None:
    here, a, _, _, refused = pair
    rep = Recorder("rep")
    started(a, rep)
    rep.auto_reply = lambda inc: Answer(inc.request.subject, value=1)
    rep.replier(Ask, "/r/no")
    rep.replier(Ask, "/r/ok")
    told = refusal(refused)
    assert (told.action, told.key) == ("reply", str(MessageKey(Ask, "/r/no")))
    wait_for(lambda: here.router.feeds(MessageKey(Ask, "/r/ok"))["repliers"] == 1, "/r/ok")
    assert [r.value for r in here.request_all(Ask("/r/ok", q=1), 5.0)] == [1]
    with pytest.raises(RequestError):  # no replier here for /r/no
        here.request_all(Ask("/r/no", q=1), 5.0)


def test_a_pattern_wider_than_allowed_is_narrowed(
    pair: tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]],
) -> None:
    here, a, service, _, refused = pair
    orders_pub = here.publisher(Counter, "/orders")
    fx_pub = here.publisher(Counter, "/fx/eur")
    every = a.inbox(Counter, Wildcard.levels("/..."))
    wait_for(fx_pub.is_feed_up, "the pattern follows /fx/eur")
    told = refusal(refused)
    assert told.action == "subscribe"
    assert told.key == "linktest.Counter:/... (pattern)"
    assert key("/orders") in told.rule
    assert orders_pub.publish(Counter("/orders", n=1)) == 0
    assert fx_pub.publish(Counter("/fx/eur", n=2)) == 1
    message = every.receive(5)
    assert message is not None and message.subject == "/fx/eur"
    # a key that appears later is narrowed too, without another report
    late_no, late_fx = here.publisher(Counter, "/x"), here.publisher(Counter, "/fx/usd")
    wait_for(late_fx.is_feed_up, "the pattern follows /fx/usd")
    assert late_no.publish(Counter("/x", n=3)) == 0
    assert service.counters.links.authz_refusals == 1
    assert refused.receive_nowait() is None


def test_a_refused_queue_group_gets_no_turn(
    pair: tuple[Bus, Bus, Service, Link, Inbox[AccessRefused]],
) -> None:
    here, a, _, _, refused = pair
    orders_pub, fx_pub = here.publisher(Counter, "/orders"), here.publisher(Counter, "/fx/eur")
    a.inbox(Counter, "/orders", queue=QueueGroup("workers"))
    fx_worker = a.inbox(Counter, "/fx/eur", queue="workers")
    told = refusal(refused)
    assert (told.action, told.key) == ("subscribe", key("/orders"))
    wait_for(fx_pub.is_feed_up, "node-a's /fx/eur member reaches here")
    assert fx_pub.publish(Counter("/fx/eur", n=5)) == 1
    message = fx_worker.receive(5)
    assert message is not None and message.n == 5
    assert orders_pub.publish(Counter("/orders", n=6)) == 0


def test_notifications_on_a_refused_key_are_dropped_as_unexpected() -> None:
    """The data path needs no check of its own: a notification on a key whose
    advertisement was refused has no proxy publisher, so it is "unexpected"."""
    with buses("here") as (here,):
        refused = here.inbox(AccessRefused, SYSTEM_SUBJECT)
        service = here.listen(0, permissions=Permissions(RULES))
        orders, fx = here.inbox(Counter, "/orders"), here.inbox(Counter, "/fx/eur")
        with RawPeer.connect(service.port, "node-a") as raw:
            raw.logon()
            for subject in ("/orders", "/fx/eur"):
                raw.proto.advertise(
                    (COUNTER, subject), Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP
                )
            raw.send()
            assert raw.expect(Subscribed).key == (COUNTER, "/fx/eur")
            assert refusal(refused).key == key("/orders")
            for n in range(3):
                raw.proto.notify((COUNTER, "/orders"), ("/orders", 1, n, b""))
            raw.proto.notify((COUNTER, "/fx/eur"), ("/fx/eur", 1, 9, b""))
            raw.send()
            message = fx.receive(5)
            assert message is not None and message.n == 9  # read after the three
            counters = service.counters.links
            assert (counters.unexpected, counters.authz_refusals) == (3, 1)
            assert orders.receive_nowait() is None
            assert not orders.is_up


def test_roles_and_the_first_matching_rule() -> None:
    permissions = Permissions(
        [
            "deny subscribe @desk /fx/secret",
            "allow subscribe @desk /fx/...",
            "allow * node-c * linktest.Counter",
        ],
        roles={"desk": ["node-a", "node-b"]},
    )
    a, c = permissions.for_peer("node-a"), permissions.for_peer("node-c")
    assert a.allows(Action.SUBSCRIBE, MessageKey(Counter, "/fx/eur"))
    assert not a.allows(Action.SUBSCRIBE, MessageKey(Counter, "/fx/secret"))
    assert not a.allows(Action.PUBLISH, MessageKey(Counter, "/fx/eur"))  # no rule: refused
    assert c.allows(Action.PUBLISH, MessageKey(Counter, ".private"))  # `*`: every subject
    assert not c.allows(Action.REQUEST, MessageKey(Ask, "/q"))  # another type
    assert not permissions.for_peer("node-z").rules


def test_the_python_api_names_a_bad_rule() -> None:
    with pytest.raises(UsageError, match=r"rule 'allow publish node-a /fx/\.\.\./x': subject"):
        Permissions(["allow publish node-a /fx/.../x"])
    with pytest.raises(UsageError, match="role 'desk' is not defined"):
        Permissions(["allow publish @desk /fx/..."])
    with pytest.raises(UsageError, match="expected a Permissions"), buses("here") as (here,):
        here.listen(0, permissions="allow * * *")  # type: ignore[arg-type]


# ----------------------------------------------------------- permissions files


def props(tmp_path: Path, rules: str, section: str = "service") -> Path:
    perms = tmp_path / "links.permissions"
    perms.write_text(rules)
    path = tmp_path / "node.properties"
    if section == "service":
        body = (
            "actorbus.services = feeds\n"
            "actorbus.service.feeds.host = 127.0.0.1\n"
            "actorbus.service.feeds.port = 0\n"
            f"actorbus.service.feeds.permissionsFile = {perms}\n"
        )
    else:
        body = (
            "actorbus.connections = up\n"
            "actorbus.connection.up.host = 127.0.0.1\n"
            "actorbus.connection.up.port = 1\n"
            f"actorbus.connection.up.permissionsFile = {perms}\n"
        )
    path.write_text("actorbus.nodeId = here\n" + body)
    return path


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            "allow publish node-a",
            "has 3 fields; expected 'allow|deny ACTIONS PEERS SUBJECT [TYPE]'",
        ),
        ("permit publish node-a /fx/...", "starts with 'permit'; expected allow or deny"),
        ("allow publsh node-a /fx/...", "unknown action 'publsh'"),
        ("allow publish @desk /fx/...", "names role 'desk', which no 'role desk = node-id"),
        ("allow publish node-a /fx/.../x", "`...` is not the last level"),
        ("allow publish node-a fx.*.x*", "prefix pattern"),
        ("allow publish node-a /fx/... a*b", "type 'a*b' has a '*' before its end"),
        ("role desk", "expected 'role NAME = node-id node-id ...'"),
    ],
)
@pytest.mark.parametrize("section", ["service", "connection"])
def test_a_bad_permissions_line_names_file_line_and_key(
    tmp_path: Path, line: str, problem: str, section: str
) -> None:
    path = props(tmp_path, f"# feeds\nallow * node-b *\n\n{line}\n", section)
    with pytest.raises(ConfigError) as info:
        Bus.from_properties(path).close()
    name = "feeds" if section == "service" else "up"
    perms = str(tmp_path / "links.permissions")
    assert (info.value.path, info.value.line) == (perms, 4)
    assert info.value.key == f"actorbus.{section}.{name}.permissionsFile"
    assert str(info.value).startswith(f"{perms}:4: ")
    assert problem in str(info.value)
    assert f"(set by actorbus.{section}.{name}.permissionsFile)" in str(info.value)


def test_a_missing_permissions_file_is_refused_at_load(tmp_path: Path) -> None:
    path = props(tmp_path, "")
    (tmp_path / "links.permissions").unlink()
    with pytest.raises(ConfigError) as info:
        Bus.from_properties(path).close()
    assert info.value.key == "actorbus.service.feeds.permissionsFile"
    assert info.value.line == 5
    assert "does not exist" in str(info.value)


def test_a_permissions_file_with_roles_governs_a_configured_service(tmp_path: Path) -> None:
    rules = (
        "# the desks publish prices; nothing else\n"
        "role desks = node-a node-b\n"
        "allow publish @desks /fx/...   # any pair\n"
    )
    with Bus.from_properties(props(tmp_path, rules)) as here, Bus(node_id="node-a") as a:
        refused = here.inbox(AccessRefused, SYSTEM_SUBJECT)
        (service,) = here.net.services  # type: ignore[union-attr]
        a.connect("127.0.0.1", service.port).wait_logged_on(5)
        fx = here.inbox(Counter, "/fx/eur")
        a.publisher(Counter, "/fx/eur")
        a.publisher(Counter, "/orders")
        told = refusal(refused)
        assert (told.action, told.key) == ("publish", key("/orders"))
        assert fx.wait_up(5)
        # node-a may not subscribe at all: nothing it asks for is sent
        here.publisher(Counter, "/fx/usd")
        a.inbox(Counter, "/fx/usd")
        told = refusal(refused)
        assert (told.action, told.key, told.rule) == (
            "subscribe",
            key("/fx/usd"),
            "no rule allows it (a permissions list refuses what it does not allow)",
        )


def test_without_permissions_everything_is_allowed() -> None:
    with buses("here", "node-a") as (here, a):
        service = here.listen(0)
        a.connect("127.0.0.1", service.port).wait_logged_on(5)
        orders = here.inbox(Counter, "/orders")
        pub = a.publisher(Counter, "/orders")
        assert orders.wait_up(5)
        wait_for(pub.is_feed_up, "node-a sees its subscriber")
        pub.publish(Counter("/orders", n=1))
        assert orders.receive(5) is not None
        assert service.counters.links.authz_refusals == 0


def test_a_connection_checks_the_service_side_too() -> None:
    """Permissions on a dialled link govern the node it dialled."""
    with buses("here", "upstream") as (here, up):
        service = up.listen(0)
        refused = here.inbox(AccessRefused, SYSTEM_SUBJECT)
        link = here.connect(
            "127.0.0.1", service.port, permissions=Permissions(["allow publish upstream /fx/..."])
        )
        link.wait_logged_on(5)
        up.publisher(Counter, "/orders")
        told = refusal(refused)
        assert (told.peer_node, told.action, told.key) == ("upstream", "publish", key("/orders"))
        assert link.counters.authz_refusals == 1
