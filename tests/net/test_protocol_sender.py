"""The SENDER frame: a node names the publisher of the notifications that
follow on a connection, whenever it changes (docs/protocol.md)."""

from __future__ import annotations

import msgpack
import pytest

from actorbus import UsageError
from actorbus.errors import ProtocolError
from actorbus.net._events import SenderChanged
from actorbus.net.protocol import (
    FrameType,
    LinkProtocol,
    LogonRequested,
    NotificationReceived,
    Side,
)
from actorbus.testing import MemoryPipe, all_types_known, encode_frame, proof_for_server

KEY = ("demo.DataPoint", "/demo")
SENDER = int(FrameType.SENDER)


def connected() -> MemoryPipe:
    pipe = MemoryPipe()
    pipe.logon()
    return pipe


def frames_of(data: bytes) -> list[tuple[object, ...]]:
    out, offset = [], 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        out.append(msgpack.unpackb(data[offset + 4 : offset + 4 + size], use_list=False))
        offset += 4 + size
    return out


def test_a_sender_frame_precedes_the_notifications_it_names_and_is_sent_on_change() -> None:
    pipe = connected()
    client, server = pipe.client, pipe.server
    client.sender("one", 7)
    client.notify(KEY, ("/demo", 1, 1))
    client.sender("one", 7)  # the same: nothing on the wire
    client.notify(KEY, ("/demo", 1, 2))
    client.sender(None, 9)
    client.notify(KEY, ("/demo", 1, 3))
    data = client.data_to_send()
    kinds = [f[0] for f in frames_of(data) if f[0] != int(FrameType.KEY_DEF)]
    notify = int(FrameType.NOTIFY)
    assert kinds == [SENDER, notify, notify, SENDER, notify]
    server.receive_data(data, 0.0)
    events = list(server.events())
    assert events == [
        SenderChanged("one", 7),
        NotificationReceived(KEY, ("/demo", 1, 1)),
        NotificationReceived(KEY, ("/demo", 1, 2)),
        SenderChanged(None, 9),
        NotificationReceived(KEY, ("/demo", 1, 3)),
    ]
    # a system frame: one sequence number each, no data message
    assert client.counters.messages_out == server.counters.messages_in == 3
    assert server.counters.gaps == server.counters.duplicates == 0


def test_sender_refuses_what_it_cannot_send() -> None:
    client = connected().client
    with pytest.raises(UsageError, match="actor must be a str"):
        client.sender("x" * 257, 1)
    with pytest.raises(UsageError):
        client.sender("one", -1)


def _server() -> LinkProtocol:
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)
    srv.receive_data(proof_for_server(srv, "cli"), 0.0)
    assert srv.next_event() == LogonRequested("cli")
    srv.accept_logon()
    srv.data_to_send()
    return srv


@pytest.mark.parametrize(
    "frame",
    [
        (SENDER, 1, "one"),  # too short
        (SENDER, 1, 5, 7),  # actor not a str
        (SENDER, 1, "x" * 257, 7),  # actor too long
        (SENDER, 1, "one", -1),  # feed not a uint
        (SENDER, 1, "one", "7"),
    ],
)
def test_a_malformed_sender_frame_is_a_protocol_error(frame: tuple[object, ...]) -> None:
    srv = _server()
    srv.receive_data(encode_frame(*frame), 0.0)
    with pytest.raises(ProtocolError, match="malformed SENDER frame"):
        list(srv.events())
