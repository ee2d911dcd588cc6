"""The gateway as a transport behind the seam: feed state reaches a WebSocket
client UP/DOWN, a client's publication reaches an actor, a client's request gets
streamed replies with Remaining, a client replier answers the bus, cancels both
ways, permissions, and session isolation between two clients."""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

from jrep_support import WAIT, Add, Client, Price, Sum, serving

from actorbus import Actor, FeedState, MessageKey, ReplyStatus
from actorbus.bus import SYSTEM_SUBJECT, AccessRefused, Permissions
from actorbus.bus.permissions import DEFAULT_DENY
from actorbus.testing import Recorder, wait_until

PRICE = Price.__type_name__
ADD = Add.__type_name__


class Adder(Actor):
    """Answers Add on /add with a partial sum, then the total."""

    def startup(self) -> None:
        self.serve(Add, "/add", self.add)

    def add(self, request: Add) -> Any:
        yield Sum(request.subject, total=request.a, status=ReplyStatus.OK_CONTINUING)
        return Sum(request.subject, total=request.a + request.b)


class Holder(Recorder):
    """Takes Add requests on /hold and never answers (logs cancels)."""

    def startup(self) -> None:
        feed = self.actor_context.open_reply_feed(Add, "/hold")
        feed.request_callback(self.on_request)
        feed.cancel_callback(self.on_cancel)
        feed.advertise()
        feed.update_feed_state(FeedState.UP)


def test_feed_state_reaches_the_client_up_and_down() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        c.join({"Subject": "/p", "Type": PRICE})
        state = c.command("FeedState")
        assert (state["Subject"], state["Type"], state["State"]) == ("/p", PRICE, "DOWN")
        feed = bus.publisher(Price, "/p")
        assert c.command("FeedState")["State"] == "UP"
        feed.publish(Price("/p", value=Decimal("1.25"), volume=2**60))
        data = c.on("/p")
        assert data["Type"] == PRICE
        assert data["Value"]["value"] == "1.25"
        assert data["Value"]["volume"] == str(2**60)  # beyond 2**53: a string
        assert data["Sender"]["Node"] == "gw"
        feed.close()
        assert c.command("FeedState")["State"] == "DOWN"


def test_a_client_publication_reaches_an_actor() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        actor = Recorder("sub")
        bus.register(actor)
        bus.startup([actor]).wait(WAIT)
        actor.post(lambda: actor.subscribe(Price, "/p", on_message=actor.on_message))
        # (a notification published before the subscription exists reaches nobody)
        key = MessageKey(Price, "/p")
        assert wait_until(lambda: bus.router.feeds(key)["subscribers"] == 1, WAIT)
        c.join()
        c.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": "9.90", "volume": "12"}})
        (event,) = actor.log.wait_count("message", 1)[-1:]
        message = event[1]
        assert str(message.value) == "9.90" and message.volume == 12
        assert actor.log.wait_for(lambda e: any(x[0] == "feed_status" for x in e))


def test_a_client_request_gets_streamed_replies_with_remaining() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        adder = Adder("adder")
        bus.register(adder)
        bus.startup([adder]).wait(WAIT)
        c.join()
        reply_to = c.prefix + "/1"
        c.send({"ToSubject": "/add", "Type": ADD, "ReplyTo": reply_to, "Value": {"a": 2, "b": 3}})
        first = c.on(reply_to)
        assert first["Type"] == Sum.__type_name__
        assert first["Value"]["total"] == 2 and first["Value"]["status"] == "OK_CONTINUING"
        assert first["Remaining"] == 1
        last = c.on(reply_to)
        assert last["Value"]["total"] == 5 and last["Remaining"] == 0
        # the ReplyTo is free again once the request is done
        c.send({"ToSubject": "/add", "Type": ADD, "ReplyTo": reply_to, "Value": {"a": 1, "b": 1}})
        c.on(reply_to)
        assert c.on(reply_to)["Remaining"] == 0


def test_a_request_nobody_takes_ends_at_once() -> None:
    with serving() as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.send(
            {
                "ToSubject": "/none",
                "Type": ADD,
                "ReplyTo": c.prefix + "/x",
                "Value": {"a": 1, "b": 1},
            }
        )
        answer = c.on(c.prefix + "/x")
        assert answer["Remaining"] == 0 and answer["ErrorCode"] == "NoReplier"


def test_a_client_cancels_its_request() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        holder = Holder("holder")
        bus.register(holder)
        bus.startup([holder]).wait(WAIT)
        c.join()
        c.send(
            {
                "ToSubject": "/hold",
                "Type": ADD,
                "ReplyTo": c.prefix + "/h",
                "Value": {"a": 1, "b": 1},
            }
        )
        holder.log.wait_count("request", 1)
        c.send({"ToSubject": "ServerBus", "CommandType": "Cancel", "Subject": c.prefix + "/h"})
        holder.log.wait_count("cancel", 1)


def test_a_client_replier_answers_a_bus_request() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        c.join({"Subject": "/add", "Type": ADD})
        c.sync()
        assert wait_until(lambda: bus.router.feeds(MessageKey(Add, "/add"))["repliers"] == 1, WAIT)
        replies: list[Any] = []
        asker = threading.Thread(
            target=lambda: replies.extend(bus.request_all(Add("/add", a=4, b=5), WAIT))
        )
        asker.start()
        request = c.on("/add")
        assert request["Value"]["a"] == 4
        c.send({"ToSubject": request["ReplyTo"], "Value": {"total": 4, "status": "OK_CONTINUING"}})
        c.send({"ToSubject": request["ReplyTo"], "Value": {"total": 9}})
        asker.join(WAIT)
        assert [(type(r), r.total, r.status) for r in replies] == [
            (Sum, 4, ReplyStatus.OK_CONTINUING),
            (Sum, 9, ReplyStatus.OK_FINAL),
        ]
        # an error reply: ErrorMessage
        asker = threading.Thread(
            target=lambda: replies.extend(bus.request_all(Add("/add", a=0, b=0), WAIT))
        )
        asker.start()
        request = c.on("/add")
        c.send({"ToSubject": request["ReplyTo"], "ErrorMessage": "cannot add zeros"})
        asker.join(WAIT)
        assert replies[-1].status is ReplyStatus.ERROR and replies[-1].reason == "cannot add zeros"
        # a reply to a finished request is refused
        c.send({"ToSubject": request["ReplyTo"], "Value": {"total": 0}})
        c.error("NoSuchRequest")


def test_the_bus_cancelling_reaches_the_client() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        c.join({"Subject": "/add", "Type": ADD})
        c.sync()
        assert wait_until(lambda: bus.router.feeds(MessageKey(Add, "/add"))["repliers"] == 1, WAIT)
        replies: list[Any] = []
        asker = threading.Thread(
            target=lambda: replies.extend(bus.request_all(Add("/add", a=1, b=1), 0.3))
        )
        asker.start()
        request = c.on("/add")
        cancel = c.command("Cancel")  # the bus's request timed out
        assert cancel["Subject"] == request["ReplyTo"]
        asker.join(WAIT)
        assert replies[-1].status is ReplyStatus.ERROR


def test_permissions_refuse_with_a_reason() -> None:
    rules = Permissions(["allow subscribe,publish web /ok"])
    with serving(permissions=rules) as (_bus, gateway), Client(gateway) as c:
        c.join({"Subject": "/ok", "Type": PRICE})
        c.command("FeedState")
        c.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteSubscribe",
                "Subject": "/no",
                "Type": PRICE,
            }
        )
        assert "may not subscribe" in c.error("Refused")["ErrorMessage"]
        c.send({"ToSubject": "/no", "Type": PRICE, "Value": {"value": "1"}})
        c.error("Refused")
        c.send({"ToSubject": "/ok", "Type": PRICE, "Value": {"value": "1"}})
        c.sync()


def test_a_refusal_is_the_seams_and_reported_like_a_linked_nodes() -> None:
    """The session asks its party, which decides by the rule a TCP peer meets:
    the client hears why, and the node publishes AccessRefused for it."""
    rules = Permissions(["allow subscribe web /ok"])
    with serving(permissions=rules) as (bus, gateway), Client(gateway) as c:
        refused = bus.inbox(AccessRefused, SYSTEM_SUBJECT)
        c.join({"Subject": "/ok", "Type": PRICE})
        c.command("FeedState")
        c.send({"ToSubject": "/no", "Type": PRICE, "Value": {"value": "1"}})
        assert "may not publish" in c.error("Refused")["ErrorMessage"]
        told = refused.receive(WAIT)
        assert told is not None, "no AccessRefused"
        assert (told.action, told.key) == ("publish", str(MessageKey(Price, "/no")))
        assert told.rule == DEFAULT_DENY
        refused.close()


def test_two_sessions_never_see_each_others_private_subjects_or_replies() -> None:
    with serving() as (bus, gateway), Client(gateway) as a, Client(gateway) as b:
        adder = Adder("adder")
        bus.register(adder)
        bus.startup([adder]).wait(WAIT)
        a.join()
        b.join()
        assert a.prefix != b.prefix
        mine = a.prefix + "/1"
        # B cannot subscribe to, publish on, or take replies on A's subjects
        b.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteSubscribe",
                "Subject": mine,
                "Type": PRICE,
            }
        )
        b.error("ReservedSubject")
        b.send({"ToSubject": mine, "Type": PRICE, "Value": {"value": "1"}})
        b.error("ReservedSubject")
        b.send({"ToSubject": "/add", "Type": ADD, "ReplyTo": mine, "Value": {"a": 1, "b": 1}})
        b.error("ReservedSubject")
        # both ask with the same suffix; each gets only its own replies
        a.send({"ToSubject": "/add", "Type": ADD, "ReplyTo": mine, "Value": {"a": 1, "b": 1}})
        b.send(
            {
                "ToSubject": "/add",
                "Type": ADD,
                "ReplyTo": b.prefix + "/1",
                "Value": {"a": 5, "b": 5},
            }
        )
        assert a.on(mine)["Value"]["total"] == 1
        assert a.on(mine)["Value"]["total"] == 2
        assert b.on(b.prefix + "/1")["Value"]["total"] == 5
        assert b.on(b.prefix + "/1")["Value"]["total"] == 10
        a.sync()
        b.sync()
        assert not any(m.get("ToSubject", "").startswith(b.prefix) for m in a.seen)
        assert not any(m.get("ToSubject", "").startswith(a.prefix) for m in b.seen)


def test_a_session_ending_takes_its_feeds_down_on_the_bus() -> None:
    with serving() as (bus, gateway):
        inbox = bus.inbox(Price, "/p")
        with Client(gateway) as c:
            c.join()
            c.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": "1"}})
            assert inbox.receive(WAIT) is not None
            assert inbox.wait_up(WAIT)
        assert wait_until(lambda: not inbox.is_up, WAIT)
        assert wait_until(lambda: gateway.counters.open_sessions == 0, WAIT)


class Failing(Actor):
    """A serve() handler that raises, with a text that is not for the client."""

    reported: Exception | None = None

    def startup(self) -> None:
        self.serve(Add, "/fails", self.add)

    def add(self, request: Add) -> Any:
        raise ValueError("internal table adders_v2 is locked")

    def on_failure(self, exc: Exception, task: Any) -> None:
        self.reported = exc


def test_a_serve_failure_reaches_the_browser_as_its_class_only() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        failing = Failing("failing")
        bus.register(failing)
        bus.startup([failing]).wait(WAIT)
        c.join()
        c.send({"ToSubject": "/fails", "Type": ADD, "ReplyTo": c.prefix + "/f",
                "Value": {"a": 1, "b": 1}})  # fmt: skip
        answer = c.on(c.prefix + "/f")
        assert answer["Remaining"] == 0
        text = str(answer)
        assert "ValueError" in text and "adders_v2" not in text
        drained = threading.Event()
        failing.post(drained.set)
        assert drained.wait(WAIT)
        assert isinstance(failing.reported, ValueError)  # reported on the replier's node
