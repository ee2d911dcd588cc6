"""The ROUTE frame (the forwarding tree) and the forwarded form of SENDER
(docs/protocol.md, docs/routing.md), between two protocol ends in memory."""

from __future__ import annotations

import pytest

from actorbus.errors import ProtocolError
from actorbus.net._events import RouteAnnounced, SenderChanged
from actorbus.net.protocol import FrameType, NotificationReceived
from actorbus.testing import MemoryPipe, encode_frame

KEY = ("demo.DataPoint", "/demo")
ROUTE = int(FrameType.ROUTE)


def connected() -> MemoryPipe:
    pipe = MemoryPipe()
    pipe.logon()
    return pipe


def test_route_crosses_with_its_flags() -> None:
    pipe = connected()
    pipe.client.route("A", 2**63, ("B", "C"), 3, 3)
    pipe.client.route("", 0, (), 0, 0)
    pipe.server.receive_data(pipe.client.data_to_send(), 0.0)
    assert list(pipe.server.events()) == [
        RouteAnnounced("A", 2**63, ("B", "C"), 3, 3),
        RouteAnnounced("", 0, (), 0, 0),
    ]
    assert pipe.server.peer_routes


def test_a_forwarded_sender_names_its_node_only_to_a_peer_that_routes() -> None:
    pipe = connected()
    client, server = pipe.client, pipe.server
    client.sender("pub", 3, "A", 2)  # the peer sent no ROUTE: the short form
    client.notify(KEY, ("/demo", 1, 1))
    server.receive_data(client.data_to_send(), 0.0)
    assert list(server.events())[0] == SenderChanged("pub", 3)
    server.route("B", 1, ("A",), 0, 3)
    client.receive_data(server.data_to_send(), 0.0)
    list(client.events())
    client.sender("pub", 3, "A", 2)  # now it knows: node and hops go too
    client.notify(KEY, ("/demo", 1, 2))
    server.receive_data(client.data_to_send(), 0.0)
    assert list(server.events()) == [
        SenderChanged("pub", 3, "A", 2),
        NotificationReceived(KEY, ("/demo", 1, 2)),
    ]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (("A", 1, "B", 0, 3), "peers is 'B'"),
        (("A", 1, ["B", 7], 0, 3), "peer node 7"),
        (("A", 1, ["B"] * 256, 0, 3), "at most 255"),
        (("A", -1, ["B"], 0, 3), "seq"),
        (("A", 1, ["B"], 0, -1), "flags"),
        (("A", 1, ["B"], 0), "6 elements"),
    ],
)
def test_a_malformed_route_is_refused(fields: tuple[object, ...], says: str) -> None:
    server = connected().server
    server.receive_data(encode_frame(ROUTE, 1, *fields), 0.0)
    with pytest.raises(ProtocolError, match=f"malformed ROUTE frame.*{says}"):
        list(server.events())
