"""Every frame type both ways, key ids, unknown types, sequence numbers, counters,
frame shapes and command arguments of LinkProtocol."""

from __future__ import annotations

import msgpack
import pytest
from nodes.protocol import accepted_server, connected, feed, frames_of, knows_all_but_x

import actorbus.net
import actorbus.net.protocol
from actorbus import CodecError, FeedState, ReplyStatus, Scope, UsageError
from actorbus.bus import codec
from actorbus.bus._types import big_int_to_wire
from actorbus.bus.routed import KIND_NOTIFY, RoutedFrame
from actorbus.bus.router import Role
from actorbus.config import LinkSettings
from actorbus.errors import MessageTooLargeError, ProtocolError
from actorbus.net import PROTOCOL_VERSION, ProtocolState
from actorbus.net.protocol import (
    DATA_FRAME_TYPES,
    Advertised,
    CancelReceived,
    Event,
    FeedStatusReceived,
    FrameType,
    NotificationReceived,
    ReplyReceived,
    RequestAcknowledged,
    RequestReceived,
    Retracted,
    SequenceGap,
    Subscribed,
    Unsubscribed,
)
from actorbus.testing import all_types_known, encode_frame

KEY = ("demo.DataPoint", "/demo")
ROUTED = int(FrameType.ROUTED)
OTHER = ("demo.DataPoint", "/other")
REPLY_KEY = ("demo.Answer", "/demo")
SECRET = ("XSecret", "/demo")  # a type the receiving node does not know

NOTIFY = int(FrameType.NOTIFY)
KEY_DEF = int(FrameType.KEY_DEF)


# ------------------------------------------------------------- frame types


@pytest.mark.parametrize("direction", ["client to server", "server to client"])
def test_every_frame_type_both_ways(direction: str) -> None:
    pipe = connected()
    sender, receiver = (
        (pipe.client, pipe.server)
        if direction == "client to server"
        else (pipe.server, pipe.client)
    )
    sender.advertise(KEY, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
    sender.advertise(KEY, Role.REPLIER, Scope.REMOTE_ONLY, FeedState.DOWN)
    sender.feed_status(KEY, Role.PUBLISHER, False)
    sender.feed_status(KEY, Role.SUBSCRIBER, True)
    sender.subscribe(OTHER, Role.SUBSCRIBER)
    sender.subscribe(OTHER, Role.REQUESTOR)
    sender.notify(KEY, ("/demo", 1_700_000_000_000, 42))
    sender.request(KEY, 7, ("question",))
    sender.request_ack(9, 3)
    sender.reply(9, REPLY_KEY, ReplyStatus.OK_CONTINUING, ("part",))
    sender.reply(9, REPLY_KEY, ReplyStatus.ERROR, ("failed",))
    sender.cancel(7)
    sender.unsubscribe(OTHER, Role.REQUESTOR)
    sender.retract(KEY, Role.REPLIER)
    pipe.transfer()
    assert list(receiver.events()) == [
        Advertised(KEY, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP),
        Advertised(KEY, Role.REPLIER, Scope.REMOTE_ONLY, FeedState.DOWN),
        FeedStatusReceived(KEY, Role.PUBLISHER, False),
        FeedStatusReceived(KEY, Role.SUBSCRIBER, True),
        Subscribed(OTHER, Role.SUBSCRIBER),
        Subscribed(OTHER, Role.REQUESTOR),
        NotificationReceived(KEY, ("/demo", 1_700_000_000_000, 42)),
        RequestReceived(KEY, 7, ("question",)),
        RequestAcknowledged(9, 3),
        ReplyReceived(9, REPLY_KEY, ReplyStatus.OK_CONTINUING, ("part",)),
        ReplyReceived(9, REPLY_KEY, ReplyStatus.ERROR, ("failed",)),
        CancelReceived(7),
        Unsubscribed(OTHER, Role.REQUESTOR),
        Retracted(KEY, Role.REPLIER),
    ]
    assert sender.last_seq_sent == receiver.last_seq_received == 14
    assert receiver.counters.messages_in == sender.counters.messages_out == 6
    assert receiver.counters.gaps == receiver.counters.duplicates == 0
    assert receiver.state is ProtocolState.CONNECTED


def test_a_reply_carries_its_acknowledgement_in_one_frame() -> None:
    """Protocol 3: ``reply(..., repliers=n)`` sends one REPLY frame of 7 elements,
    taken by the peer as the acknowledgement followed by the reply."""
    pipe = connected()
    pipe.server.reply(9, REPLY_KEY, ReplyStatus.OK_FINAL, ("done",), 1)
    pipe.server.reply(9, REPLY_KEY, ReplyStatus.OK_CONTINUING, ("part",), 0)
    pipe.server.reply(10, REPLY_KEY, ReplyStatus.OK_FINAL, ("alone",))
    data = pipe.server.data_to_send()
    shapes = [len(f) for f in frames_of(data) if f[0] == int(FrameType.REPLY)]
    assert shapes == [7, 7, 6]
    pipe.client.receive_data(data, 0.0)
    assert list(pipe.client.events()) == [
        ReplyReceived(9, REPLY_KEY, ReplyStatus.OK_FINAL, ("done",), 1),
        ReplyReceived(9, REPLY_KEY, ReplyStatus.OK_CONTINUING, ("part",), 0),
        ReplyReceived(10, REPLY_KEY, ReplyStatus.OK_FINAL, ("alone",), None),
    ]
    assert pipe.client.counters.messages_in == pipe.server.counters.messages_out == 3
    # out of sequence, the same frame takes the checked path and means the same
    srv = accepted_server(is_known_type=all_types_known)
    events = feed(
        srv,
        (KEY_DEF, 0, *REPLY_KEY),
        (int(FrameType.REPLY), 1, 0, 4, int(ReplyStatus.ERROR), ("no",), 2),
        (int(FrameType.REPLY), 3, 0, 4, int(ReplyStatus.ERROR), ("no",), 2),
    )
    assert events[0] == ReplyReceived(4, REPLY_KEY, ReplyStatus.ERROR, ("no",), 2)
    assert events[1:] == [
        SequenceGap(2, 3),
        ReplyReceived(4, REPLY_KEY, ReplyStatus.ERROR, ("no",), 2),
    ]


def test_events_carry_enum_members_and_one_key_object_per_key() -> None:
    pipe = connected()
    pipe.server.advertise(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP)
    pipe.server.notify(KEY, (1,))
    pipe.server.notify(KEY, (2,))
    pipe.transfer()
    advertised, first, second = pipe.client.events()
    assert isinstance(advertised, Advertised)
    assert type(advertised.role) is Role
    assert type(advertised.scope) is Scope
    assert type(advertised.feed_state) is FeedState
    assert isinstance(first, NotificationReceived)
    assert isinstance(second, NotificationReceived)
    assert first.key is second.key is advertised.key


def test_golden_bytes_of_a_notification() -> None:
    # docs/protocol.md shows these bytes.
    pipe = connected()
    pipe.server.notify(("Tick", "/a"), (5, "x"))
    assert pipe.server.data_to_send().hex(" ") == (
        "00 00 00 0b 94 08 00 a4 54 69 63 6b a2 2f 61 00 00 00 08 94 15 01 00 92 05 a1 78"
    )


def test_key_def_is_sent_once_per_key_and_direction() -> None:
    pipe = connected()
    for i in range(3):
        pipe.client.notify(KEY, (i,))
        pipe.client.notify(OTHER, (i,))
    pipe.client.subscribe(KEY, Role.SUBSCRIBER)
    frames = frames_of(pipe.client.data_to_send())
    key_defs = [f for f in frames if f[0] == KEY_DEF]
    assert key_defs == [(KEY_DEF, 0, *KEY), (KEY_DEF, 1, *OTHER)]
    assert frames.index(key_defs[1]) == 2  # right before OTHER's first use
    # The other direction numbers its keys independently.
    pipe.server.notify(OTHER, (0,))
    assert frames_of(pipe.server.data_to_send())[0] == (KEY_DEF, 0, *OTHER)


def test_undefined_key_id_is_a_protocol_error() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    srv.receive_data(encode_frame(NOTIFY, 1, 5, (1,)), 0.0)
    with pytest.raises(ProtocolError, match="key id 5, which the peer never defined"):
        srv.next_event()
    assert frames_of(srv.data_to_send()) == [
        (int(FrameType.LOGOFF), "protocol error: undefined key id")
    ]


def test_duplicate_key_id_is_a_protocol_error() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    srv.receive_data(encode_frame(KEY_DEF, 0, *KEY) + encode_frame(KEY_DEF, 0, *OTHER), 0.0)
    with pytest.raises(ProtocolError, match="defined key id 0 twice"):
        srv.next_event()


def test_too_many_keys_is_a_protocol_error() -> None:
    srv = accepted_server(is_known_type=all_types_known, settings=LinkSettings(max_keys=2))
    srv.receive_data(b"".join(encode_frame(KEY_DEF, i, "T", str(i)) for i in range(3)), 0.0)
    with pytest.raises(ProtocolError, match="over max_keys=2 keys"):
        srv.next_event()
    assert srv.counters.over_limit == 1
    assert srv.counters.corrupt_frames == 0


# ------------------------------------------------------------ unknown types


def test_unknown_type_is_recorded_ignored_and_counted() -> None:
    pipe = connected(server_knows=knows_all_but_x)
    client, server = pipe.client, pipe.server
    client.advertise(SECRET, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP)
    client.feed_status(SECRET, Role.PUBLISHER, True)
    client.subscribe(SECRET, Role.SUBSCRIBER)
    client.unsubscribe(SECRET, Role.SUBSCRIBER)
    client.notify(SECRET, (1,))
    client.request(SECRET, 41, ("q",))
    client.retract(SECRET, Role.PUBLISHER)
    client.notify(KEY, (2,))  # known types still flow
    pipe.transfer()
    assert list(server.events()) == [NotificationReceived(KEY, (2,))]
    assert server.counters.unknown_type == 7
    assert server.state is ProtocolState.CONNECTED
    assert server.last_seq_received == 8  # sequence numbers still checked
    # Nobody here can take the request: the protocol says so itself.
    pipe.transfer()
    assert list(client.events()) == [RequestAcknowledged(41, 0)]


def test_reply_of_an_unknown_type_is_delivered_and_counted() -> None:
    pipe = connected(client_knows=knows_all_but_x)
    pipe.server.reply(3, SECRET, ReplyStatus.OK_FINAL, ("?",))
    pipe.transfer()
    assert list(pipe.client.events()) == [ReplyReceived(3, SECRET, ReplyStatus.OK_FINAL, ("?",))]
    assert pipe.client.counters.unknown_type == 1


# --------------------------------------------------------- sequence numbers


def test_sequence_gap_and_duplicate_detection() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    events = feed(
        srv,
        (KEY_DEF, 0, *KEY),
        (NOTIFY, 1, 0, ("a",)),
        (NOTIFY, 2, 0, ("b",)),
        (NOTIFY, 2, 0, ("b again",)),  # duplicate
        (NOTIFY, 1, 0, ("older",)),  # older: duplicate too
        (NOTIFY, 5, 0, ("e",)),  # 3 and 4 are missing
        (int(FrameType.CANCEL), 6, 77),
        (int(FrameType.CANCEL), 6, 77),  # duplicate of a non-notify frame
    )
    assert events == [
        NotificationReceived(KEY, ("a",)),
        NotificationReceived(KEY, ("b",)),
        SequenceGap(expected=3, got=5),
        NotificationReceived(KEY, ("e",)),
        CancelReceived(77),
    ]
    assert srv.counters.gaps == 1
    assert srv.counters.duplicates == 3
    assert srv.last_seq_received == 6
    assert srv.counters.messages_in == 4  # duplicates are not messages
    assert srv.state is ProtocolState.SYNCING


def test_request_frames_out_of_sequence_take_the_checked_path() -> None:
    request, ack, reply = (
        int(FrameType.REQUEST),
        int(FrameType.REQUEST_ACK),
        int(FrameType.REPLY),
    )
    srv = accepted_server(is_known_type=all_types_known)
    events = feed(
        srv,
        (KEY_DEF, 0, *KEY),
        (request, 1, 0, 10, ("q",)),
        (request, 1, 0, 11, ("q again",)),  # duplicate
        (ack, 2, 10, 1),
        (ack, 2, 10, 5),  # duplicate
        (reply, 3, 0, 10, 0, ("r",)),
        (reply, 3, 0, 10, 2, ("r again",)),  # duplicate
        (reply, 6, 0, 10, 1, ("after a gap",)),
        (ack, 8, 12, 0),
        (request, 10, 0, 13, ()),
    )
    assert events == [
        RequestReceived(KEY, 10, ("q",)),
        RequestAcknowledged(10, 1),
        ReplyReceived(10, KEY, ReplyStatus.OK_FINAL, ("r",)),
        SequenceGap(expected=4, got=6),
        ReplyReceived(10, KEY, ReplyStatus.OK_CONTINUING, ("after a gap",)),
        SequenceGap(expected=7, got=8),
        RequestAcknowledged(12, 0),
        SequenceGap(expected=9, got=10),
        RequestReceived(KEY, 13, ()),
    ]
    assert srv.counters.duplicates == 3
    assert srv.counters.gaps == 3
    assert srv.counters.messages_in == 6
    assert srv.last_seq_received == 10


def test_request_frames_end_a_run_of_notifications_and_keep_the_order() -> None:
    pipe = connected()
    server = pipe.server
    server.notify(KEY, (1,))
    server.notify(KEY, (2,))
    server.request(KEY, 7, ("q",))
    server.notify(KEY, (3,))
    server.request_ack(8, 2)
    server.notify(KEY, (4,))
    server.reply(9, REPLY_KEY, ReplyStatus.ERROR, ("e",))
    server.notify(KEY, (5,))
    server.notify(KEY, (6,))
    pipe.transfer()
    taken = []
    while (item := pipe.client.next_batch()) is not None:
        taken.append((item[0], list(item[1])) if isinstance(item, tuple) else item)
    assert taken == [
        (KEY, [(1,), (2,)]),
        RequestReceived(KEY, 7, ("q",)),
        (KEY, [(3,)]),
        RequestAcknowledged(8, 2),
        (KEY, [(4,)]),
        ReplyReceived(9, REPLY_KEY, ReplyStatus.ERROR, ("e",)),
        (KEY, [(5,), (6,)]),
    ]
    assert pipe.client.counters.messages_in == 9


def test_unsequenced_frames_do_not_consume_sequence_numbers() -> None:
    # The handshake frames, the KEY_DEF and heartbeats carry no seq.
    pipe = connected()
    pipe.server.notify(KEY, (1,))
    pipe.client.receive_data(encode_frame(int(FrameType.HEARTBEAT)), 0.0)
    assert pipe.server.last_seq_sent == 1
    pipe.transfer()
    assert list(pipe.client.events()) == [NotificationReceived(KEY, (1,))]
    assert pipe.client.last_seq_received == 1
    assert pipe.client.last_seq_sent == 0  # its heartbeat reply is unsequenced


# ------------------------------------------------------- counters and output


def test_counters_and_data_queued() -> None:
    pipe = connected()
    client = pipe.client
    before = client.counters.frames_out
    client.advertise(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP)  # + KEY_DEF
    client.subscribe(OTHER, Role.SUBSCRIBER)  # + KEY_DEF
    client.feed_status(KEY, Role.PUBLISHER, True)
    assert client.data_queued == 0  # system frames do not count
    client.notify(KEY, (1,))
    client.request(KEY, 1, ())
    client.request_ack(2, 1)
    client.reply(3, KEY, ReplyStatus.OK_FINAL, ())
    client.cancel(1)
    client.notify_many(KEY, [(2,), (3,), (4,)])  # one NOTIFY_RUN frame, 3 messages
    client.group_notify(KEY, "g", (5,))
    client.routed(RoutedFrame(KIND_NOTIFY, ("server-node",), ("client-node",), *KEY, 0, 0, b"x"))
    assert client.data_queued == 10
    data = client.data_to_send()
    assert client.data_queued == 0
    assert client.data_to_send() == b""  # everything went out in one batch
    assert client.counters.frames_out - before == 13
    assert client.counters.messages_out == 10
    assert {f[0] for f in frames_of(data)} >= {int(t) for t in DATA_FRAME_TYPES}
    pipe.server.receive_data(data, 0.0)
    assert len(list(pipe.server.events())) == 13
    assert pipe.server.counters.frames_in - pipe.client.counters.frames_out == 0
    assert pipe.server.counters.bytes_in == pipe.client.counters.bytes_out
    assert pipe.server.counters.messages_in == 10


def test_a_routed_run_is_one_frame_numbered_and_counted_as_its_messages() -> None:
    pipe = connected()
    client, server = pipe.client, pipe.server
    list(server.events())
    seq = client.last_seq_sent
    run = RoutedFrame(KIND_NOTIFY, ("server-node",), ("client-node",), *KEY, 0, 0, (b"1", b"2"))
    client.routed(run)
    client.routed(RoutedFrame(KIND_NOTIFY, ("server-node",), ("client-node",), *KEY, 0, 0, b"3"))
    assert client.data_queued == 3 and client.last_seq_sent == seq + 3
    data = client.data_to_send()
    assert [f[0] for f in frames_of(data)] == [ROUTED, ROUTED]
    server.receive_data(data, 0.0)
    frames = [e.frame for e in server.events()]
    assert [f.body for f in frames] == [(b"1", b"2"), b"3"]
    assert frames[0] == run
    assert server.counters.messages_in == 3 and server.last_seq_received == seq + 3
    # a run too large for one frame goes in halves, each message numbered once
    big = tuple(bytes([i]) * 600 for i in range(4))
    small = connected(settings=LinkSettings(max_frame_size=2_000))
    first = small.client.last_seq_sent
    small.client.routed(RoutedFrame(KIND_NOTIFY, ("server-node",), ("c",), *KEY, 0, 0, big))
    assert small.client.last_seq_sent == first + 4 and small.client.data_queued == 4
    data = small.client.data_to_send()
    assert len(frames_of(data)) == 2  # two halves of two
    list(small.server.events())
    small.server.receive_data(data, 0.0)
    assert [e.frame.body for e in small.server.events()] == [big[:2], big[2:]]


def test_heartbeat_frames_are_answered_and_counted() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    assert feed(srv, (int(FrameType.HEARTBEAT),), (int(FrameType.HEARTBEAT_REPLY),)) == []
    assert srv.counters.heartbeats_in == 1
    assert frames_of(srv.data_to_send()) == [(int(FrameType.HEARTBEAT_REPLY),)]


# ------------------------------------------------------------- frame shapes


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        ((NOTIFY, 1, 0), "malformed NOTIFY frame: 3 elements, expected 4"),
        ((NOTIFY, 1, 0, (), 5), "5 elements, expected 4"),
        ((NOTIFY, "1", 0, ()), "seq is '1', expected an int >= 1"),
        ((NOTIFY, 0, 0, ()), "seq is 0"),
        ((NOTIFY, 1.0, 0, ()), "seq is 1.0"),
        ((NOTIFY, 1, True, ()), "key id True, which the peer never defined"),
        ((NOTIFY, 1, 0.0, ()), "key id 0.0"),
        ((21.0, 1, 0, ()), "type 21.0, which is not a frame type"),
        ((True, PROTOCOL_VERSION, "x"), "type True"),
        ((99,), "type 99"),
        ((int(FrameType.ADVERTISE), 1, 0, 2, 1, True), "role is 2, expected one of"),
        ((int(FrameType.ADVERTISE), 1, 0, 1, 0, True), "scope is 0"),
        ((int(FrameType.ADVERTISE), 1, 0, 1, 1, 1), "feed state is 1, expected a bool"),
        ((int(FrameType.SUBSCRIBE), 1, 0, 1), "role is 1"),
        ((int(FrameType.RETRACT), 1, 0, 3), "role is 3"),
        ((int(FrameType.FEED_STATUS), 1, 0, 5, True), "role is 5"),
        ((int(FrameType.FEED_STATUS), 1, 0, 1, None), "up is None"),
        ((int(FrameType.REQUEST), 1, 0, -1, ()), "request id is -1"),
        ((int(FrameType.REQUEST_ACK), 1, 1, "3"), "repliers is '3'"),
        ((int(FrameType.REPLY), 1, 0, 1, 3, ()), "status is 3"),
        # the request/reply fast paths of the parser fall back on the same checks
        ((int(FrameType.REQUEST), 1, 0, True, ()), "request id is True"),
        ((int(FrameType.REQUEST), 1, 0, 1.0, ()), "request id is 1.0"),
        ((int(FrameType.REQUEST), 1, 5, 1, ()), "key id 5, which the peer never defined"),
        ((int(FrameType.REQUEST), 1, False, 1, ()), "key id False"),
        ((int(FrameType.REQUEST), True, 0, 1, ()), "seq is True"),
        ((int(FrameType.REQUEST), 1, 0, 1), "REQUEST frame: 4 elements, expected 5"),
        ((int(FrameType.REQUEST_ACK), 1, -1, 1), "request id is -1"),
        ((int(FrameType.REQUEST_ACK), 1, True, 1), "request id is True"),
        ((int(FrameType.REQUEST_ACK), 1, 1, False), "repliers is False"),
        ((int(FrameType.REQUEST_ACK), 1, 1, -3), "repliers is -3"),
        ((int(FrameType.REQUEST_ACK), 0, 1, 1), "seq is 0"),
        ((int(FrameType.REPLY), 1, 0, 1, True, ()), "status is True"),
        ((int(FrameType.REPLY), 1, 0, 1, 1.0, ()), "status is 1.0"),
        ((int(FrameType.REPLY), 1, 0, -2, 0, ()), "request id is -2"),
        ((int(FrameType.REPLY), 1, 0, None, 0, ()), "request id is None"),
        ((int(FrameType.REPLY), 1, 9, 1, 0, ()), "key id 9, which the peer never defined"),
        ((int(FrameType.REPLY), 1.5, 0, 1, 0, ()), "seq is 1.5"),
        ((int(FrameType.REPLY), 1, 0, 1, 0), "REPLY frame: 5 elements, expected 6"),
        ((int(FrameType.REPLY), 1, 0, 1, 0, (), -1), "repliers is -1"),
        ((int(FrameType.REPLY), 1, 0, 1, 0, (), "1"), "repliers is '1'"),
        ((int(FrameType.REPLY), 1, 0, 1, 0, (), True), "repliers is True"),
        ((int(FrameType.REPLY), 1, 0, 1, 0, (), 1, 2), "REPLY frame: 8 elements, expected 6"),
        ((int(FrameType.CANCEL), 1), "2 elements, expected 3"),
        ((int(FrameType.NOTIFY_RUN), 1, 0, ()), "NOTIFY_RUN frame: the bodies are ()"),
        ((int(FrameType.NOTIFY_RUN), 1, 0, 7), "the bodies are 7, expected a non-empty"),
        ((int(FrameType.NOTIFY_RUN), 1, 0, {"a": 2}), "the bodies are {.a.: 2}"),
        ((int(FrameType.NOTIFY_RUN), 0, 0, (1,)), "NOTIFY_RUN frame: seq is 0"),
        ((int(FrameType.NOTIFY_RUN), True, 0, (1,)), "seq is True"),
        ((int(FrameType.NOTIFY_RUN), 1, 4, (1,)), "key id 4, which the peer never defined"),
        ((int(FrameType.NOTIFY_RUN), 1, 0), "NOTIFY_RUN frame: 3 elements, expected 4"),
        ((ROUTED, 1, 0, ("B",), ("A",), "T", "/s", 0, 0), "ROUTED frame: 9 elements"),
        ((ROUTED, 1, 6, ("B",), ("A",), "T", "/s", 0, 0, b""), "kind is 6, expected one of"),
        ((ROUTED, 1, 0, ("B",), (), "T", "/s", 0, 0, b""), "route_from not empty"),
        ((ROUTED, 1, 0, "B", ("A",), "T", "/s", 0, 0, b""), "must be arrays"),
        ((ROUTED, 1, 0, ("B", ""), ("A",), "T", "/s", 0, 0, b""), "holds '', not a node id"),
        ((ROUTED, 1, 0, ("B",), ("A", 7), "T", "/s", 0, 0, b""), "holds 7, not a node id"),
        ((ROUTED, 1, 0, ("B",), ("A",), "", "/s", 0, 0, b""), "the type name not empty"),
        ((ROUTED, 1, 0, ("B",), ("A",), "T", "/s", -1, 0, b""), "request id -1 and"),
        ((ROUTED, 1, 0, ("B",), ("A",), "T", "/s", 0, 0, (1,)), r"body is \(1,\), expected bin"),
        ((ROUTED, 1, 1, ("B",), ("A",), "T", "/s", 0, 0, (b"",)), r"body is \(b'',\), expected"),
        ((ROUTED, 1, 0, ("B",), ("A",), "T", "/s", 0, 0, ()), r"body is \(\), expected bin"),
        ((ROUTED, 0, 0, ("B",), ("A",), "T", "/s", 0, 0, b""), "ROUTED frame: seq is 0"),
        ((KEY_DEF, -1, "T", "s"), "key id is -1"),
        ((KEY_DEF, 2**32, "T", "s"), "key id 4294967296 is above"),
        ((KEY_DEF, 1, "", "s"), "type name is empty"),
        ((KEY_DEF, 1, "T", b"s"), "subject is b's', expected a str"),
        ((int(FrameType.LOGOFF),), "LOGOFF frame: 1 elements, expected 2"),
        ((int(FrameType.LOGOFF), 5), "reason is 5"),
        ((int(FrameType.HEARTBEAT), 1), "HEARTBEAT frame: 2 elements, expected 1"),
        ((int(FrameType.LOGON_COMPLETE), None), "LOGON_COMPLETE frame: 2 elements"),
    ],
)
def test_malformed_frames_are_protocol_errors(frame: tuple[object, ...], match: str) -> None:
    srv = accepted_server(is_known_type=all_types_known)
    srv.receive_data(encode_frame(KEY_DEF, 0, *KEY), 0.0)
    srv.receive_data(encode_frame(*frame), 0.0)
    with pytest.raises(ProtocolError, match=match):
        srv.next_event()
    assert srv.state is ProtocolState.CLOSED
    assert srv.counters.corrupt_frames == 1
    (logoff,) = frames_of(srv.data_to_send())
    assert logoff[0] == int(FrameType.LOGOFF)
    assert str(logoff[1]).startswith("protocol error: ")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (msgpack.packb({"type": 21}), "msgpack dict, not a non-empty array"),
        (msgpack.packb(21), "msgpack int"),
        (msgpack.packb("NOTIFY"), "msgpack str"),
        (msgpack.packb(b"\x15\x01\x00\x00"), "msgpack bytes"),
        (msgpack.packb([]), "array, not a non-empty array"),
        (b"\xc1", "not exactly one valid msgpack value"),
        (b"\x94\x15\x01", "not exactly one valid msgpack value"),  # array of 4 with 2 elements
        (msgpack.packb([6]) + b"\x00", "3-byte frame body is not exactly one"),
        (b"\x91\xa2\xff\xfe", "not exactly one valid msgpack value"),  # invalid UTF-8
        (b"\x91\x81\x01\x02", "not exactly one valid msgpack value"),  # int map key
    ],
)
def test_malformed_bodies_are_protocol_errors(body: bytes, match: str) -> None:
    srv = accepted_server(is_known_type=all_types_known)
    srv.receive_data(len(body).to_bytes(4, "big") + body, 0.0)
    with pytest.raises(ProtocolError, match=match):
        srv.next_event()


def test_decode_error_is_chained() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    srv.receive_data(b"\x00\x00\x00\x01\xc1", 0.0)
    with pytest.raises(ProtocolError) as info:
        srv.next_event()
    assert isinstance(info.value.__cause__, ValueError)
    assert srv.error is info.value


# ----------------------------------------------------------------- ext types


def test_extension_values_arrive_as_ext_type_by_default() -> None:
    pipe = connected()
    pipe.server.notify(KEY, (msgpack.ExtType(5, b"abc"),))
    pipe.transfer()
    assert list(pipe.client.events()) == [NotificationReceived(KEY, (msgpack.ExtType(5, b"abc"),))]


def test_ext_hook_decodes_and_its_codec_error_is_a_corrupt_frame() -> None:
    def ext_hook(code: int, data: bytes) -> object:
        if code != 5:
            raise CodecError(f"unknown extension type {code}")
        return data.decode()

    srv = accepted_server(is_known_type=all_types_known, ext_hook=ext_hook)
    events = feed(srv, (KEY_DEF, 0, *KEY), (NOTIFY, 1, 0, (msgpack.ExtType(5, b"abc"),)))
    assert events == [NotificationReceived(KEY, ("abc",))]
    srv.receive_data(encode_frame(NOTIFY, 2, 0, (msgpack.ExtType(6, b""),)), 0.0)
    with pytest.raises(ProtocolError, match="not exactly one valid msgpack value") as info:
        srv.next_event()
    assert isinstance(info.value.__cause__, CodecError)


# ------------------------------------------------------------ command checks


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda p: p.advertise(KEY, Role.SUBSCRIBER, Scope.REMOTE_ONLY, FeedState.UP), "role="),
        (lambda p: p.advertise(KEY, Role.PUBLISHER, Scope.LOCAL_ONLY, FeedState.UP), "scope="),
        (lambda p: p.advertise(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, "UP"), "feed_state="),
        (lambda p: p.advertise(KEY, True, Scope.REMOTE_ONLY, FeedState.UP), "role=True"),
        (lambda p: p.subscribe(KEY, Role.PUBLISHER), "expected Role.SUBSCRIBER or Role.REQ"),
        (lambda p: p.retract(KEY, Role.REQUESTOR), "expected Role.PUBLISHER or Role.REPLIER"),
        (lambda p: p.feed_status(KEY, Role.PUBLISHER, 1), "up=1: expected a bool"),
        (lambda p: p.notify(["T", "s"], ()), "key=\\['T', 's'\\]"),
        (lambda p: p.notify(("", "s"), ()), "non-empty type name"),
        (lambda p: p.notify(("T", 5), ()), "tuple of str"),
        (lambda p: p.request(KEY, -1, ()), "request_id=-1"),
        (lambda p: p.request(KEY, 2**64, ()), "request_id=18446744073709551616"),
        (lambda p: p.request_ack(1, 1.5), "repliers=1.5"),
        (lambda p: p.reply(1, KEY, 7, ()), "status=7"),
        (lambda p: p.reply(1, KEY, ReplyStatus.OK_FINAL, (), -1), "repliers=-1"),
        (lambda p: p.reply(1, KEY, ReplyStatus.OK_FINAL, (), 1.0), "repliers=1.0"),
        (lambda p: p.cancel("1"), "request_id='1'"),
        (lambda p: p.notify(KEY, {1, 2}), "cannot be encoded as msgpack"),
        (lambda p: p.request(KEY, 1, object()), "cannot be encoded as msgpack"),
        (lambda p: p.notify(KEY, 2**70), "cannot be encoded as msgpack"),
    ],
)
def test_bad_command_arguments_are_usage_errors_and_queue_nothing(call: object, match: str) -> None:
    pipe = connected()
    proto = pipe.client
    proto.notify(KEY, ())  # the key is defined; later failures must not redefine it
    proto.data_to_send()
    with pytest.raises(UsageError, match=match):
        call(proto)  # type: ignore[operator]
    assert proto.data_to_send() == b""
    assert proto.last_seq_sent == 1


def test_plain_int_enum_values_are_accepted() -> None:
    pipe = connected()
    pipe.client.advertise(KEY, 1, 2, 1)  # type: ignore[arg-type]
    pipe.client.reply(1, KEY, 0, ())  # type: ignore[arg-type]
    pipe.transfer()
    assert list(pipe.server.events()) == [
        Advertised(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP),
        ReplyReceived(1, KEY, ReplyStatus.OK_FINAL, ()),
    ]


def test_too_large_body_is_refused_before_queueing() -> None:
    settings = LinkSettings(max_frame_size=1024)
    pipe = connected(settings=settings)
    pipe.client.notify(KEY, b"x" * 1000)  # fits with the frame header
    pipe.client.data_to_send()
    with pytest.raises(MessageTooLargeError, match="above max_frame_size=1024"):
        pipe.client.notify(KEY, b"x" * 1024)
    with pytest.raises(MessageTooLargeError, match=r"request\(\)"):
        pipe.client.request(KEY, 1, b"x" * 1024)
    assert pipe.client.data_to_send() == b""
    assert pipe.client.last_seq_sent == 1
    assert pipe.client.data_queued == 0


# ------------------------------------------------------------------ exports


def test_the_protocol_module_exports_its_api_and_every_event() -> None:
    exported = set(actorbus.net.protocol.__all__)
    for name in exported:
        assert hasattr(actorbus.net.protocol, name), name
    events = {
        value
        for value in vars(actorbus.net.protocol).values()
        if isinstance(value, type) and issubclass(value, Event) and value is not Event
    }
    assert len(events) == 21
    assert all(event.__name__ in exported for event in events)
    # what actorbus.net exports of the protocol is the protocol module's own
    for name in set(actorbus.net.__all__) & exported:
        assert getattr(actorbus.net, name) is getattr(actorbus.net.protocol, name)


def test_a_pack_default_hook_packs_what_msgpack_cannot() -> None:
    """Without a hook an int beyond 64 bits in a body is refused before anything is
    queued; with the codec's hook it travels in the codec's wire form (bytes)."""
    big = 2**64 + 5
    plain = accepted_server(is_known_type=all_types_known)
    with pytest.raises(UsageError, match="cannot be encoded|cannot encode|msgpack"):
        plain.notify(KEY, ("/demo", 1, big))
    assert plain.data_to_send() == b""
    hooked = accepted_server(is_known_type=all_types_known, pack_default=codec.pack_default)
    hooked.notify(KEY, ("/demo", 1, big))
    notify = frames_of(hooked.data_to_send())[-1]
    assert notify[0] == NOTIFY
    assert notify[-1] == ("/demo", 1, big_int_to_wire(big))
    # what the hook does not handle either is refused the same way, nothing queued
    with pytest.raises(UsageError):
        hooked.notify(KEY, ("/demo", 1, object()))
    assert hooked.data_to_send() == b""
