"""Heartbeats and the logon timeout, driven by a fake clock (plain floats)."""

from __future__ import annotations

import msgpack
import pytest

from actorbus.config import LinkSettings
from actorbus.net import LinkProtocol, ProtocolState, Side
from actorbus.net.protocol import (
    FrameType,
    HeartbeatTimeout,
    LogonRequested,
    LogonTimeout,
    NotificationReceived,
)
from actorbus.testing import MemoryPipe, all_types_known, encode_frame, proof_for_server

KEY = ("demo.DataPoint", "/demo")
HB = LinkSettings(heartbeat_delay=10.0, heartbeat_reply_delay=2.0)


def frame_types(data: bytes) -> list[int]:
    out = []
    offset = 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        out.append(msgpack.unpackb(data[offset + 4 : offset + 4 + size])[0])
        offset += 4 + size
    return out


def connected(settings: LinkSettings, now: float = 100.0) -> MemoryPipe:
    pipe = MemoryPipe(now=now, settings=settings)
    pipe.logon(now)
    return pipe


def test_idle_link_sends_heartbeat_and_the_reply_keeps_it_alive() -> None:
    pipe = connected(HB)
    client, server = pipe.client, pipe.server
    assert client.next_deadline() == 110.0
    client.tick(109.9)
    assert client.data_to_send() == b""
    client.tick(110.0)
    assert frame_types(client.data_to_send()) == [int(FrameType.HEARTBEAT)]
    assert client.counters.heartbeats_out == 1
    assert client.next_deadline() == 112.0  # waiting for any answer
    server.receive_data(encode_frame(int(FrameType.HEARTBEAT)), 110.5)
    assert server.next_event() is None  # answered by the protocol, no event
    reply = server.data_to_send()
    assert frame_types(reply) == [int(FrameType.HEARTBEAT_REPLY)]
    client.receive_data(reply, 111.0)
    assert client.next_deadline() == 121.0  # idle timer restarted at the reply
    client.tick(115.0)
    assert client.state is ProtocolState.CONNECTED
    assert list(client.events()) == []
    assert server.counters.heartbeats_in == 1


def test_no_reply_times_out_and_closes() -> None:
    pipe = connected(HB)
    client = pipe.client
    client.tick(110.0)
    client.data_to_send()  # the heartbeat goes nowhere
    client.tick(111.9)
    assert client.next_event() is None
    client.tick(112.0)
    assert client.state is ProtocolState.CONNECTED  # until the event is taken
    assert client.next_deadline() is None
    event = client.next_event()
    assert event == HeartbeatTimeout(silent_for=12.0)
    assert client.state is ProtocolState.CLOSED
    assert client.close_reason == "heartbeat timeout: nothing received for 12.000s"
    logoff = client.data_to_send()
    assert msgpack.unpackb(logoff[4:]) == [int(FrameType.LOGOFF), "heartbeat timeout"]
    # Late bytes change nothing.
    client.receive_data(encode_frame(int(FrameType.HEARTBEAT_REPLY)), 113.0)
    assert client.next_event() is None


def test_any_frame_counts_as_activity() -> None:
    pipe = connected(HB)
    client, server = pipe.client, pipe.server
    for now in (105.0, 114.0, 123.0, 132.0):
        server.notify(KEY, (now,))
        pipe.transfer(now)
        client.tick(now)
        assert client.data_to_send() == b""  # never idle for 10 s
    assert client.next_deadline() == 142.0
    assert len(list(client.events())) == 4


def test_data_arriving_while_waiting_for_the_reply_is_an_answer() -> None:
    pipe = connected(HB)
    client, server = pipe.client, pipe.server
    client.tick(110.0)
    client.data_to_send()
    server.notify(KEY, (1,))
    pipe.transfer(111.0)
    client.tick(112.0)
    assert list(client.events()) == [NotificationReceived(KEY, (1,))]
    assert client.state is ProtocolState.CONNECTED


def test_reply_delay_zero_waits_as_long_as_the_heartbeat_delay() -> None:
    # LinkSettings: heartbeat_reply_delay=0 means the same as heartbeat_delay
    pipe = connected(LinkSettings(heartbeat_delay=5.0, heartbeat_reply_delay=0))
    client = pipe.client
    assert client.next_deadline() == 105.0
    client.tick(105.0)
    assert frame_types(client.data_to_send()) == [int(FrameType.HEARTBEAT)]
    assert client.next_deadline() == 110.0
    client.tick(110.0)
    assert list(client.events()) == [HeartbeatTimeout(silent_for=10.0)]
    assert client.counters.heartbeats_out == 1


def test_heartbeats_disabled() -> None:
    pipe = connected(LinkSettings(heartbeat_delay=0, heartbeat_reply_delay=2.0))
    assert pipe.client.next_deadline() is None
    pipe.client.tick(1e12)
    assert pipe.client.data_to_send() == b""


def test_no_heartbeats_before_logon_is_accepted() -> None:
    srv = LinkProtocol(
        Side.SERVER,
        "srv",
        0.0,
        is_known_type=all_types_known,
        settings=LinkSettings(heartbeat_delay=1.0, logon_timeout=0),
    )
    assert srv.next_deadline() is None
    srv.tick(50.0)
    assert srv.data_to_send() == b""


@pytest.mark.parametrize("side", [Side.SERVER, Side.CLIENT])
def test_logon_timeout(side: Side) -> None:
    proto = LinkProtocol(
        side,
        "node",
        1000.0,
        is_known_type=all_types_known,
        settings=LinkSettings(logon_timeout=5.0),
    )
    if side is Side.CLIENT:
        proto.logon()
        proto.data_to_send()
    assert proto.next_deadline() == 1005.0
    proto.tick(1004.0)
    assert proto.next_event() is None
    proto.tick(1005.5)
    assert proto.next_event() == LogonTimeout(waited=5.5)
    assert proto.state is ProtocolState.CLOSED
    closing = msgpack.unpackb(proto.data_to_send()[4:])
    expected = FrameType.LOGON_REJECT if side is Side.SERVER else FrameType.LOGOFF
    assert closing == [int(expected), "logon timeout"]


def test_logon_timeout_while_the_application_decides() -> None:
    srv = LinkProtocol(
        Side.SERVER,
        "srv",
        0.0,
        is_known_type=all_types_known,
        settings=LinkSettings(logon_timeout=5.0),
    )
    srv.receive_data(proof_for_server(srv, "cli", now=1.0), 1.0)
    assert srv.next_event() == LogonRequested("cli")
    srv.tick(6.0)
    assert srv.next_event() == LogonTimeout(waited=6.0)
    assert srv.state is ProtocolState.CLOSED


def test_accepted_logon_stops_the_logon_timer() -> None:
    pipe = MemoryPipe(now=0.0, settings=LinkSettings(logon_timeout=5.0, heartbeat_delay=0))
    pipe.logon(1.0)
    assert pipe.client.next_deadline() is None
    pipe.client.tick(100.0)
    assert pipe.client.state is ProtocolState.CONNECTED
