"""Browser to browser (docs/routing.md, docs/jrep.md): what one J.REP client
publishes reaches another client, with feed state, and a request from one
reaches a replier in the other; on one gateway, and on the gateways of two
linked nodes that forward."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from jrep_support import Add, Client, Price, serving

from actorbus import MessageKey
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.net.jrep import Gateway
from actorbus.testing import wait_until

PRICE = Price.__type_name__
ADD = Add.__type_name__


def browser_to_browser(g1: Gateway, g2: Gateway, hops: int) -> None:
    with Client(g1) as c1, Client(g2) as c2:
        c2.join({"Subject": "/p", "Type": PRICE}, {"Subject": "/add", "Type": ADD})
        assert c2.command("FeedState")["State"] == "DOWN"
        c1.join()
        c1.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": "1.5", "volume": 3}})
        assert c2.command("FeedState", 10)["State"] == "UP"
        # (the first went before c2's subscription reached c1's node: nobody's)
        key = MessageKey(Price, "/p")
        assert wait_until(lambda: g1.router.feeds(key)["subscribers"] >= 1, 10)
        c1.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": "2.5", "volume": 3}})
        data = c2.on("/p", 10)
        assert data["Value"]["value"] in ("1.5", "2.5")
        # the publishing client's session, one hop per gateway and link
        assert (data["Sender"]["Node"], data["Sender"]["Hops"]) == ("web#1", hops)
        # a request from one client reaches the replier in the other
        reply_to = c1.prefix + "/r"
        c1.send({"ToSubject": "/add", "Type": ADD, "ReplyTo": reply_to, "Value": {"a": 2, "b": 5}})
        request = c2.on("/add", 10)
        assert (request["Value"]["a"], request["Value"]["b"]) == (2, 5)
        c2.send({"ToSubject": request["ReplyTo"], "Value": {"total": 7}})
        answer = c1.on(reply_to, 10)
        assert answer["Value"]["total"] == 7 and answer["Remaining"] == 0
        # and back: c1 subscribes, c2 publishes
        c1.send(
            {
                "ToSubject": "ServerBus",
                "CommandType": "RemoteSubscribe",
                "Subject": "/q",
                "Type": PRICE,
            }
        )
        assert c1.command("FeedState")["State"] == "DOWN"
        c2.send({"ToSubject": "/q", "Type": PRICE, "Value": {"value": "2", "volume": 1}})
        assert c1.command("FeedState", 10)["State"] == "UP"
        key = MessageKey(Price, "/q")
        assert wait_until(lambda: g2.router.feeds(key)["subscribers"] >= 1, 10)
        c2.send({"ToSubject": "/q", "Type": PRICE, "Value": {"value": "3", "volume": 1}})
        assert c1.on("/q", 10)["Value"]["value"] in ("2", "3")
        c1.close()  # the publishing client leaves: its feed goes DOWN for the other
        assert c2.command("FeedState", 10)["State"] == "DOWN"


def test_two_clients_on_one_gateway() -> None:
    with serving() as (_bus, gateway):
        browser_to_browser(gateway, gateway, 1)


@contextlib.contextmanager
def two_linked_gateways() -> Iterator[tuple[Gateway, Gateway]]:
    with serving(node_id="one") as (b1, g1), serving(node_id="two") as (b2, g2):
        service = b1.listen(0, settings=ServiceSettings(forward=True))
        link = b2.connect("127.0.0.1", service.port, settings=ConnectionSettings(forward=True))
        link.wait_logged_on(5)
        yield g1, g2


def test_two_clients_on_two_gateways_of_linked_nodes() -> None:
    with two_linked_gateways() as (g1, g2):
        browser_to_browser(g1, g2, 2)


def test_without_forward_the_linked_nodes_keep_their_clients_apart() -> None:
    with serving(node_id="one") as (b1, g1), serving(node_id="two") as (b2, g2):
        service = b1.listen(0)
        b2.connect("127.0.0.1", service.port).wait_logged_on(5)
        with Client(g1) as c1, Client(g2) as c2:
            c2.join({"Subject": "/p", "Type": PRICE})
            c1.join()
            c1.send({"ToSubject": "/p", "Type": PRICE, "Value": {"value": "1", "volume": 1}})
            c1.sync()
            assert c2.command("FeedState")["State"] == "DOWN"
            c2.sync()
            assert not [m for m in c2.seen if m.get("ToSubject") == "/p"]
