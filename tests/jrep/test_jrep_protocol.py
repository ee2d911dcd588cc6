"""The J.REP protocol as the gateway speaks it, over real loopback WebSockets:
the state sync (both sides' FinishStateSync), each verb, activity and timeouts,
heartbeats, reserved subjects, and the declared error for every kind of bad
input — after which the session (and the node) still work."""

from __future__ import annotations

import json

import pytest
from jrep_support import WAIT, Add, Client, Price, serving

from actorbus.net.jrep import GatewaySettings
from actorbus.testing import wait_until

PRICE = Price.__type_name__


def test_state_sync_lists_what_the_bus_routes_and_both_sides_finish() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        feed = bus.publisher(Price, "/p")
        c.send({"ToSubject": "ServerBus", "CommandType": "ConnectToQueue"})
        notice = c.command("CapabilitiesNotice")
        assert notice["CapabilitiesFlags"] == "WebSockets"
        assert notice["ReplyPrefix"].startswith(".")
        assert notice["NodeId"] == "gw"
        # the timing a client follows: heartbeats well within the idle timeout
        assert (notice["HeartbeatDelay"], notice["IdleTimeout"]) == (20_000, 60_000)
        routes = c.command("RemoteSubscribe")
        assert "/p" in routes["SubjectsList"]
        assert {"Subject": "/p", "Type": PRICE, "Role": "publisher", "State": "UP"} in routes[
            "Keys"
        ]
        c.command("FinishStateSync")
        (session,) = gateway.sessions
        assert session.server_synced and not session.active
        # data before this side's FinishStateSync is refused, not lost silently
        c.send({"ToSubject": "/q", "Type": PRICE, "Value": {"value": "1"}})
        assert "FinishStateSync" in c.error("NotActive")["ErrorMessage"]
        c.send({"ToSubject": "ServerBus", "CommandType": "FinishStateSync"})
        c.sync()
        assert session.active
        inbox = bus.inbox(Price, "/q")
        c.send({"ToSubject": "/q", "Type": PRICE, "Value": {"value": "2"}})
        assert inbox.receive(WAIT) is not None
        # a key that appears later is announced; one that goes, retracted
        later = bus.publisher(Price, "/later")
        assert c.expect(lambda m: m.get("Subject") == "/later")["CommandType"] == "RemoteSubscribe"
        later.close()
        gone = c.expect(lambda m: m.get("Subject") == "/later")
        assert gone["CommandType"] == "RemoteUnsubscribe"
        feed.close()


def test_messages_before_connect_to_queue_are_refused() -> None:
    with serving() as (_bus, gateway), Client(gateway) as c:
        c.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": "1"}})
        assert "ConnectToQueue" in c.error("NotActive")["ErrorMessage"]
        c.send({"ToSubject": "ServerBus", "CommandType": "RemoteSubscribe", "Subject": "/p"})
        c.error("NotActive")
        c.join()
        c.send({"ToSubject": "ServerBus", "CommandType": "ConnectToQueue"})
        assert "once" in c.error("BadPart")["ErrorMessage"]


def test_an_empty_array_is_activity_that_keeps_the_session_alive() -> None:
    settings = GatewaySettings(idle_timeout=0.4, heartbeat_delay=0)
    with serving(settings) as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.sync()
        # three idle timeouts' worth of empty arrays, one every 0.1 s
        for _ in range(12):
            c.raw("[]")
            with pytest.raises(TimeoutError):
                c.ws.recv(timeout=0.1)
        assert gateway.counters.open_sessions == 1
        assert gateway.counters.expired == 0
        # then silence: the session expires, and says so before it closes
        expired = c.command("SessionExpired", timeout=WAIT)
        assert "idle" in expired["Reason"]
        assert c.closed_code() == 4000
        assert wait_until(lambda: gateway.counters.open_sessions == 0, WAIT)
        assert gateway.counters.expired == 1


def test_no_connect_to_queue_within_the_handshake_timeout_closes() -> None:
    settings = GatewaySettings(handshake_timeout=0.3)
    with serving(settings) as (_bus, gateway), Client(gateway) as c:
        assert c.closed_code() == 1008


def test_after_connect_to_queue_the_idle_timeout_replaces_the_handshake_timeout() -> None:
    settings = GatewaySettings(handshake_timeout=0.3, idle_timeout=30, heartbeat_delay=0)
    with serving(settings) as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.sync()
        with pytest.raises(TimeoutError):  # twice the handshake timeout, silent
            c.ws.recv(timeout=0.6)
        c.sync()
        assert gateway.counters.expired == 0


def test_the_gateway_sends_heartbeats_and_takes_the_clients() -> None:
    settings = GatewaySettings(heartbeat_delay=0.1)
    with serving(settings) as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.command("Heartbeat")
        c.send({"ToSubject": "ServerBus", "CommandType": "Heartbeat"})
        c.command("Heartbeat")


def test_disconnect_ends_the_session() -> None:
    with serving() as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.sync()
        c.send({"ToSubject": "ServerBus", "CommandType": "Disconnect", "Reason": "bye"})
        assert c.closed_code() == 1000
        assert wait_until(lambda: gateway.counters.open_sessions == 0, WAIT)


def test_the_node_closing_tells_its_clients() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        c.join()
        c.sync()
        bus.close()
        assert c.command("Disconnect")["Reason"] == "node closing"
        assert c.closed_code() == 1001


@pytest.mark.parametrize("subject", ["ClientBus", "ServerBus", "ClientBusErrors"])
def test_reserved_subjects_cannot_be_subscribed(subject: str) -> None:
    with serving() as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteSubscribe",
                "Subject": subject,
                "Type": PRICE,
            }
        )
        assert subject in c.error("ReservedSubject")["ErrorMessage"]
        if subject != "ServerBus":
            c.send({"ToSubject": subject, "Type": PRICE, "Value": {"value": "1"}})
            c.error("ReservedSubject")


BAD_INPUT = [
    ("not json", "Malformed"),
    ('{"ToSubject": "ServerBus"}', "Malformed"),
    ("[1, 2]", "Malformed"),
    ("[NaN]", "Malformed"),
    ("[" * 100_000 + "]" * 100_000, "Malformed"),
    ('[{"CommandType": "Heartbeat"}]', "BadPart"),
    ('[{"ToSubject": 7}]', "BadPart"),
    ('[{"ToSubject": "ServerBus", "CommandType": 3}]', "BadPart"),
    (
        '[{"ToSubject": "ServerBus", "CommandType": "Heartbeat", "PriorityProcessing": "x"}]',
        "BadPart",
    ),
    (
        '[{"ToSubject": "ServerBus", "CommandType": "RemoteSubscribe", "SubjectsList": [1]}]',
        "BadPart",
    ),
    ('[{"ToSubject": "ServerBus", "CommandType": "RemoteSubscribe"}]', "BadPart"),
    ('[{"ToSubject": "ServerBus", "CommandType": "Fly"}]', "UnknownCommand"),
    ('[{"ToSubject": "/p", "CommandType": "Fly"}]', "UnknownCommand"),
    ('[{"ToSubject": "/p", "Value": {}}]', "UnknownType"),
    ('[{"ToSubject": "/p", "Type": "no.Such"}]', "UnknownType"),
    ('[{"ToSubject": "/p", "Type": "jreptest.Sum", "Value": {"total": 1}}]', "UnknownType"),
    ('[{"ToSubject": "/p", "Type": "jreptest.Price", "Value": []}]', "BadValue"),
    ('[{"ToSubject": "/p", "Type": "jreptest.Price", "Value": {"value": 1.5}}]', "BadValue"),
    ('[{"ToSubject": "/p", "Type": "jreptest.Price", "Value": {"value": "x"}}]', "BadValue"),
    (
        '[{"ToSubject": "/p", "Type": "jreptest.Price", "Value": {"value": "1", "volume": true}}]',
        "BadValue",
    ),
    (
        '[{"ToSubject": "/p", "Type": "jreptest.Price", "Value": {"value": "1", "nope": 1}}]',
        "BadValue",
    ),
    ('[{"ToSubject": "/p", "Type": "jreptest.Price", "Value": {"volume": 1}}]', "BadValue"),
    ('[{"ToSubject": "/add", "Type": "jreptest.Add", "Value": {"a": 1, "b": 2}}]', "BadPart"),
    ('[{"ToSubject": "ServerBus", "CommandType": "Cancel", "Subject": "x"}]', "NoSuchRequest"),
]


@pytest.mark.parametrize(("frame", "code"), BAD_INPUT)
def test_bad_input_gets_its_declared_error_and_the_session_goes_on(frame: str, code: str) -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        c.join()
        c.raw(frame)
        error = c.error()
        assert error["ErrorCode"] == code, error
        assert error["ErrorMessage"]
        assert "Traceback" not in error["ErrorMessage"]
        inbox = bus.inbox(Price, "/ok")
        c.send({"ToSubject": "/ok", "Type": PRICE, "Value": {"value": "1"}})
        assert inbox.receive(WAIT) is not None


def test_a_value_error_names_the_field_and_the_fix() -> None:
    with serving() as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": 1.5}})
        text = c.error("BadValue")["ErrorMessage"]
        assert "jreptest.Price.value" in text
        assert '"9.90"' in text  # what to send instead


def test_a_binary_frame_is_refused() -> None:
    with serving() as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.raw(b"[]")
        c.error("BinaryFrame")
        c.sync()


def test_an_oversized_frame_closes_that_session_only() -> None:
    settings = GatewaySettings(max_message_size=1024)
    with serving(settings) as (bus, gateway):
        with Client(gateway) as c:
            c.join()
            c.raw(json.dumps([{"ToSubject": "/p", "Value": "x" * 2000}]))
            assert c.closed_code() == 1009
        with Client(gateway) as again:
            again.join()
            inbox = bus.inbox(Price, "/ok")
            again.send({"ToSubject": "/ok", "Type": PRICE, "Value": {"value": "1"}})
            assert inbox.receive(WAIT) is not None


def test_too_many_messages_in_one_array_are_refused() -> None:
    settings = GatewaySettings(max_batch=3)
    with serving(settings) as (_bus, gateway), Client(gateway) as c:
        c.join()
        c.send(*[{"ToSubject": "ServerBus", "CommandType": "Heartbeat"}] * 4)
        c.error("LimitReached")
        c.sync()


def test_priority_messages_of_an_array_go_first() -> None:
    with serving() as (bus, gateway), Client(gateway) as c:
        inbox = bus.inbox(Price, "/p")
        c.join()
        c.send(
            {"ToSubject": "/p", "Type": PRICE, "Value": {"value": "1"}},
            {"ToSubject": "/p", "Type": PRICE, "Value": {"value": "2"}, "PriorityProcessing": 1},
            {"ToSubject": "/p", "Type": PRICE, "Value": {"value": "3"}, "PriorityProcessing": 0},
        )
        got = [inbox.receive(WAIT) for _ in range(3)]
        assert [str(m.value) for m in got if m is not None] == ["2", "1", "3"]


def test_an_array_of_notifications_is_delivered_in_order_whatever_breaks_its_runs() -> None:
    """Consecutive notifications with the same ToSubject and Type are converted
    and delivered as a run; a bad Value in the middle gets its error and the
    rest still arrive, in order; another subject, another part or a message of
    no Type ends the run and is handled on its own."""
    with serving() as (bus, gateway), Client(gateway) as c:
        gateway.types["/t"] = Price
        p_inbox, q_inbox, t_inbox = (
            bus.inbox(Price, "/p"),
            bus.inbox(Price, "/q"),
            bus.inbox(Price, "/t"),
        )
        c.join()

        def price(subject: str, value: object, **more: object) -> dict[str, object]:
            return {"ToSubject": subject, "Type": PRICE, "Value": {"value": value}, **more}

        c.send(
            price("/p", "1"),
            price("/p", "2"),
            price("/p", "two"),  # a bad Value: its error, the run goes on
            price("/p", "3"),
            price("/q", "4"),
            price("/q", "5"),
            price("/p", "6"),
            price("/p", "7", PriorityProcessing=0),  # another part: handled on its own
            price("/p", "8"),
            {"ToSubject": "/t", "Value": {"value": "9"}},  # the type by subject
            {"ToSubject": "/t", "Value": {"value": "10"}},
            price("/p", "11"),
        )
        assert "Price.value" in c.error("BadValue")["ErrorMessage"]

        def values(inbox: object, n: int) -> list[str]:
            got = [inbox.receive(WAIT) for _ in range(n)]  # type: ignore[attr-defined]
            return [str(m.value) for m in got if m is not None]

        assert values(p_inbox, 7) == ["1", "2", "3", "6", "7", "8", "11"]
        assert values(q_inbox, 2) == ["4", "5"]
        assert values(t_inbox, 2) == ["9", "10"]
        c.sync()


def test_subscription_limit() -> None:
    settings = GatewaySettings(max_subscriptions=2)
    with serving(settings) as (_bus, gateway), Client(gateway) as c:
        c.join(
            {"Subject": "/a", "Type": PRICE},
            {"SubjectsList": ["/b"], "Type": Add.__type_name__},
        )
        c.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteSubscribe",
                "Subject": "/c",
                "Type": PRICE,
            }
        )
        c.error("LimitReached")
        c.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteUnsubscribe",
                "Subject": "/a",
                "Type": PRICE,
            }
        )
        c.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteSubscribe",
                "Subject": "/c",
                "Type": PRICE,
            }
        )
        c.expect(lambda m: m.get("CommandType") == "FeedState" and m.get("Subject") == "/c")
