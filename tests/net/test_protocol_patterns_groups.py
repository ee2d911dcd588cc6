"""Version 5 frames of LinkProtocol: SUBSCRIBE_PATTERN / UNSUBSCRIBE_PATTERN (a
wildcard subscriber's interest), GROUP (queue group members on a key) and
GROUP_NOTIFY (a notification for one member of a group, a data frame) — both
ways, their shapes, the checks on what the peer sends and on the commands, and
the data accounting GROUP_NOTIFY shares with NOTIFY."""

from __future__ import annotations

import pytest
from nodes.protocol import accepted_server, connected, feed, frames_of, knows_all_but_x

from actorbus import UsageError
from actorbus.bus.subjects import Wildcard
from actorbus.config import LinkSettings
from actorbus.errors import (
    LinkClosedError,
    MessageTooLargeError,
    ProtocolError,
    SubjectPatternError,
)
from actorbus.net import PROTOCOL_VERSION, LinkProtocol, ProtocolState, Side
from actorbus.net._events import (
    GroupChanged,
    GroupNotificationReceived,
    PatternSubscribed,
    PatternUnsubscribed,
)
from actorbus.net.protocol import DATA_FRAME_TYPES, FrameType, NotificationReceived, SequenceGap
from actorbus.testing import all_types_known, encode_frame

KEY = ("demo.DataPoint", "/demo")
OTHER = ("demo.DataPoint", "/other")
SECRET = ("XSecret", "/demo")  # a type the receiving node does not know

KEY_DEF = int(FrameType.KEY_DEF)
NOTIFY = int(FrameType.NOTIFY)
SUBSCRIBE_PATTERN = int(FrameType.SUBSCRIBE_PATTERN)
UNSUBSCRIBE_PATTERN = int(FrameType.UNSUBSCRIBE_PATTERN)
GROUP = int(FrameType.GROUP)
GROUP_NOTIFY = int(FrameType.GROUP_NOTIFY)
LEVELS, PREFIX = 0, 1


# ------------------------------------------------------------- both ways


@pytest.mark.parametrize("direction", ["client to server", "server to client"])
def test_every_new_frame_both_ways(direction: str) -> None:
    pipe = connected()
    sender, receiver = (
        (pipe.client, pipe.server)
        if direction == "client to server"
        else (pipe.server, pipe.client)
    )
    sender.subscribe_pattern("demo.DataPoint", "levels", "/demo/*/x")
    sender.subscribe_pattern("demo.DataPoint", "prefix", "demo/**")
    sender.group(KEY, "workers", 3)
    sender.group_notify(KEY, "workers", ("/demo", 1_700_000_000_000, 42))
    sender.group(KEY, "workers", 0)
    sender.unsubscribe_pattern("demo.DataPoint", "prefix", "demo/**")
    sender.unsubscribe_pattern("demo.DataPoint", LEVELS, "/demo/...")  # the code works too
    pipe.transfer()
    events = list(receiver.events())
    assert events == [
        PatternSubscribed("demo.DataPoint", Wildcard.levels("/demo/*/x")),
        PatternSubscribed("demo.DataPoint", Wildcard.prefix("demo/**")),
        GroupChanged(KEY, "workers", 3),
        GroupNotificationReceived(KEY, "workers", ("/demo", 1_700_000_000_000, 42)),
        GroupChanged(KEY, "workers", 0),
        PatternUnsubscribed("demo.DataPoint", Wildcard.prefix("demo/**")),
        PatternUnsubscribed("demo.DataPoint", Wildcard.levels("/demo/...")),
    ]
    # events carry the bus's Wildcard, and one key object per key
    assert all(type(e.wildcard) is Wildcard for e in events if hasattr(e, "wildcard"))
    assert events[2].key is events[3].key is events[4].key  # type: ignore[attr-defined]
    assert sender.last_seq_sent == receiver.last_seq_received == 7
    assert receiver.counters.messages_in == sender.counters.messages_out == 1
    assert receiver.counters.gaps == receiver.counters.duplicates == 0
    assert receiver.counters.unknown_type == 0
    assert receiver.state is ProtocolState.CONNECTED


def test_the_frames_on_the_wire() -> None:
    pipe = connected()
    client = pipe.client
    client.subscribe_pattern("demo.DataPoint", "levels", "/a/*")
    client.unsubscribe_pattern("demo.DataPoint", "prefix", "a*")
    client.group(KEY, "g", 2)
    client.group_notify(KEY, "g", (5, "x"))
    client.group_notify(OTHER, "h", (6,))
    assert frames_of(client.data_to_send()) == [
        (SUBSCRIBE_PATTERN, 1, "demo.DataPoint", LEVELS, "/a/*"),
        (UNSUBSCRIBE_PATTERN, 2, "demo.DataPoint", PREFIX, "a*"),
        (KEY_DEF, 0, *KEY),  # GROUP uses the key table, as SUBSCRIBE does
        (GROUP, 3, 0, "g", 2),
        (GROUP_NOTIFY, 4, 0, "g", (5, "x")),
        (KEY_DEF, 1, *OTHER),
        (GROUP_NOTIFY, 5, 1, "h", (6,)),
    ]


def test_a_group_name_counts_characters_up_to_256() -> None:
    pipe = connected()
    longest = "é" * 256  # 512 UTF-8 bytes, 256 characters
    pipe.client.group(KEY, longest, 1)
    pipe.client.group_notify(KEY, longest, ())
    pipe.transfer()
    assert list(pipe.server.events()) == [
        GroupChanged(KEY, longest, 1),
        GroupNotificationReceived(KEY, longest, ()),
    ]


# ----------------------------------------------- GROUP_NOTIFY is a data frame


def test_group_notify_is_a_data_frame() -> None:
    assert FrameType.GROUP_NOTIFY in DATA_FRAME_TYPES
    system = {FrameType.SUBSCRIBE_PATTERN, FrameType.UNSUBSCRIBE_PATTERN, FrameType.GROUP}
    assert not system & DATA_FRAME_TYPES


def test_group_notify_counts_as_notify_does() -> None:
    """Against the same traffic with NOTIFY in its place: the same sequence
    numbers, the same output-queue count and the same data counters."""
    seen = []
    for group_notify in (True, False):
        pipe = connected()
        client = pipe.client
        client.subscribe_pattern("demo.DataPoint", "levels", "/a/*")  # system frames
        client.group(KEY, "g", 1)
        assert client.data_queued == 0
        for i in range(3):
            if group_notify:
                client.group_notify(KEY, "g", (i,))
            else:
                client.notify(KEY, (i,))
        queued, last = client.data_queued, client.last_seq_sent
        pipe.transfer()
        list(pipe.server.events())
        seen.append(
            (
                queued,
                last,
                client.data_queued,
                client.counters.messages_out,
                pipe.server.counters.messages_in,
                pipe.server.last_seq_received,
            )
        )
    assert seen[0] == seen[1] == (3, 5, 0, 3, 3, 5)


def test_group_notify_takes_its_place_between_runs_of_notifications() -> None:
    pipe = connected()
    server = pipe.server
    server.notify(KEY, (1,))
    server.notify(KEY, (2,))
    server.group_notify(KEY, "g", (3,))
    server.notify(KEY, (4,))
    server.notify_many(KEY, [(5,), (6,)])
    pipe.transfer()
    taken = []
    while (item := pipe.client.next_batch()) is not None:
        taken.append((item[0], list(item[1])) if isinstance(item, tuple) else item)
    assert taken == [
        (KEY, [(1,), (2,)]),
        GroupNotificationReceived(KEY, "g", (3,)),
        (KEY, [(4,), (5,), (6,)]),
    ]
    assert pipe.client.counters.messages_in == 6
    assert pipe.client.last_seq_received == 6


def test_group_notify_sequence_gaps_and_duplicates_as_notify() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    events = feed(
        srv,
        (KEY_DEF, 0, *KEY),
        (GROUP_NOTIFY, 1, 0, "g", ("a",)),
        (GROUP_NOTIFY, 1, 0, "g", ("a again",)),  # duplicate
        (NOTIFY, 2, 0, ("b",)),
        (GROUP_NOTIFY, 5, 0, "g", ("e",)),  # 3 and 4 are missing
        (GROUP, 6, 0, "g", 1),
        (GROUP, 6, 0, "g", 2),  # duplicate of a system frame
        (SUBSCRIBE_PATTERN, 7, "demo.DataPoint", LEVELS, "/a/*"),
        (SUBSCRIBE_PATTERN, 3, "demo.DataPoint", LEVELS, "/b/*"),  # stale
    )
    assert events == [
        GroupNotificationReceived(KEY, "g", ("a",)),
        NotificationReceived(KEY, ("b",)),
        SequenceGap(expected=3, got=5),
        GroupNotificationReceived(KEY, "g", ("e",)),
        GroupChanged(KEY, "g", 1),
        PatternSubscribed("demo.DataPoint", Wildcard.levels("/a/*")),
    ]
    assert srv.counters.duplicates == 3
    assert srv.counters.gaps == 1
    assert srv.counters.messages_in == 3  # duplicates are not messages
    assert srv.last_seq_received == 7


# ------------------------------------------------------------ unknown types


def test_unknown_types_are_dropped_and_counted() -> None:
    pipe = connected(server_knows=knows_all_but_x)
    client, server = pipe.client, pipe.server
    client.subscribe_pattern("XSecret", "levels", "/a/*")
    client.group(SECRET, "g", 1)
    client.group_notify(SECRET, "g", (1,))
    client.unsubscribe_pattern("XSecret", "levels", "/a/*")
    client.group_notify(KEY, "g", (2,))  # known types still flow
    pipe.transfer()
    assert list(server.events()) == [GroupNotificationReceived(KEY, "g", (2,))]
    assert server.counters.unknown_type == 4
    assert server.counters.messages_in == 2  # a data frame is counted even when dropped
    assert server.last_seq_received == 5  # sequence numbers still checked
    assert server.state is ProtocolState.CONNECTED


def test_a_pattern_frame_asks_is_known_type_for_its_type_name() -> None:
    asked: list[str] = []

    def known(type_name: str) -> bool:
        asked.append(type_name)
        return type_name != "Nope"

    srv = accepted_server(is_known_type=known)
    events = feed(
        srv,
        (SUBSCRIBE_PATTERN, 1, "Nope", LEVELS, "/a/*"),
        (SUBSCRIBE_PATTERN, 2, "Yes", PREFIX, "a**"),
    )
    assert events == [PatternSubscribed("Yes", Wildcard.prefix("a**"))]
    assert asked == ["Nope", "Yes"]
    assert srv.counters.unknown_type == 1


# ------------------------------------------------------------ frame shapes


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        # SUBSCRIBE_PATTERN / UNSUBSCRIBE_PATTERN: shape and fields
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS), "SUBSCRIBE_PATTERN frame: 4 elements, expected 5"),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, "/a/*", 0), "6 elements, expected 5"),
        ((UNSUBSCRIBE_PATTERN, 1, "T", 0), "UNSUBSCRIBE_PATTERN frame: 4 elements"),
        ((SUBSCRIBE_PATTERN, 0, "T", LEVELS, "/a/*"), "seq is 0, expected an int >= 1"),
        ((SUBSCRIBE_PATTERN, "1", "T", LEVELS, "/a/*"), "seq is '1'"),
        ((SUBSCRIBE_PATTERN, 1, 5, LEVELS, "/a/*"), "type name is 5, expected a str"),
        ((SUBSCRIBE_PATTERN, 1, b"T", LEVELS, "/a/*"), "type name is b'T'"),
        ((SUBSCRIBE_PATTERN, 1, "", LEVELS, "/a/*"), "type name is empty"),
        ((SUBSCRIBE_PATTERN, 1, "T", 2, "/a/*"), "dialect is 2, expected one of levels=0"),
        ((SUBSCRIBE_PATTERN, 1, "T", -1, "/a/*"), "dialect is -1"),
        ((SUBSCRIBE_PATTERN, 1, "T", True, "/a/*"), "dialect is True"),
        ((SUBSCRIBE_PATTERN, 1, "T", 0.0, "/a/*"), "dialect is 0.0"),
        ((SUBSCRIBE_PATTERN, 1, "T", "levels", "/a/*"), "dialect is 'levels'"),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, None), "pattern is None, expected a str"),
        ((UNSUBSCRIBE_PATTERN, 1, "T", PREFIX, b"a*"), "pattern is b'a\\*', expected a str"),
        # a pattern the bus's Wildcard refuses: named, with the rule broken
        (
            (SUBSCRIBE_PATTERN, 1, "T", LEVELS, "a/*"),
            "malformed SUBSCRIBE_PATTERN frame: levels pattern 'a/\\*': does not start with '/'",
        ),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, "/a//*"), "levels pattern '/a//\\*': empty level"),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, "/a/b"), "levels pattern '/a/b': no wildcard"),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, "/.../a"), "`...` is not the last level"),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, "/a*"), "`\\*` mixed into a level"),
        ((SUBSCRIBE_PATTERN, 1, "T", LEVELS, ""), "levels pattern '': does not start"),
        (
            (UNSUBSCRIBE_PATTERN, 1, "T", PREFIX, "a/b"),
            "malformed UNSUBSCRIBE_PATTERN frame: prefix pattern 'a/b': does not end with",
        ),
        ((SUBSCRIBE_PATTERN, 1, "T", PREFIX, "a*b*"), "prefix pattern 'a\\*b\\*': `\\*` before"),
        ((SUBSCRIBE_PATTERN, 1, "T", PREFIX, "a***"), "prefix pattern 'a\\*\\*\\*'"),
        ((SUBSCRIBE_PATTERN, 1, "T", PREFIX, ".private*"), "private topic"),
        # GROUP
        ((GROUP, 1, 0, "g"), "GROUP frame: 4 elements, expected 5"),
        ((GROUP, 1, 0, "g", 1, 2), "GROUP frame: 6 elements, expected 5"),
        ((GROUP, 1, 9, "g", 1), "key id 9, which the peer never defined"),
        ((GROUP, 1, "0", "g", 1), "key id '0', which the peer never defined"),
        ((GROUP, 1, 0, "", 1), "malformed GROUP frame: group '': it is empty"),
        ((GROUP, 1, 0, "g" * 257, 1), "it has 257 characters, expected at most 256"),
        ((GROUP, 1, 0, 7, 1), "group is 7, expected a str"),
        ((GROUP, 1, 0, b"g", 1), "group is b'g', expected a str"),
        ((GROUP, 1, 0, "g", -1), "members is -1, expected an int >= 0"),
        ((GROUP, 1, 0, "g", True), "members is True"),
        ((GROUP, 1, 0, "g", "1"), "members is '1'"),
        ((GROUP, 1, 0, "g", 1.0), "members is 1.0"),
        ((GROUP, -1, 0, "g", 1), "GROUP frame: seq is -1"),
        # GROUP_NOTIFY
        ((GROUP_NOTIFY, 1, 0, "g"), "GROUP_NOTIFY frame: 4 elements, expected 5"),
        ((GROUP_NOTIFY, 1, 0, "g", (), ()), "GROUP_NOTIFY frame: 6 elements, expected 5"),
        ((GROUP_NOTIFY, 1, 3, "g", ()), "key id 3, which the peer never defined"),
        ((GROUP_NOTIFY, 1, True, "g", ()), "key id True, which the peer never defined"),
        ((GROUP_NOTIFY, 1, 0, "", ()), "malformed GROUP_NOTIFY frame: group '': it is empty"),
        ((GROUP_NOTIFY, 1, 0, "x" * 300, ()), "it has 300 characters"),
        ((GROUP_NOTIFY, 1, 0, None, ()), "group is None, expected a str"),
        ((GROUP_NOTIFY, 0, 0, "g", ()), "GROUP_NOTIFY frame: seq is 0"),
        ((GROUP_NOTIFY, 1.0, 0, "g", ()), "seq is 1.0"),
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
    name = FrameType(frame[0]).name  # type: ignore[arg-type]
    undefined = "never defined" in match
    reason = "undefined key id" if undefined else f"malformed {name} frame"
    assert logoff == (int(FrameType.LOGOFF), f"protocol error: {reason}")


def test_a_refused_pattern_is_chained_and_a_long_one_cut_short() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    text = "/" + "a" * 1000  # no wildcard (within max_subject_length)
    srv.receive_data(encode_frame(SUBSCRIBE_PATTERN, 1, "T", LEVELS, text), 0.0)
    with pytest.raises(ProtocolError, match="no wildcard: subscribe to the subject") as info:
        srv.next_event()
    assert isinstance(info.value.__cause__, SubjectPatternError)
    assert len(str(info.value)) < 500  # the peer's text is not copied whole
    assert srv.data_to_send().endswith(b"protocol error: malformed SUBSCRIBE_PATTERN frame")


def test_frames_before_the_logon_is_accepted_are_refused() -> None:
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)
    srv.receive_data(encode_frame(SUBSCRIBE_PATTERN, 1, "T", LEVELS, "/a/*"), 0.0)
    with pytest.raises(ProtocolError, match="garbage before logon"):
        srv.next_event()


def test_a_version_4_peer_is_refused_with_the_version_message() -> None:
    assert PROTOCOL_VERSION == 5
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)
    srv.receive_data(encode_frame(int(FrameType.LOGON), 4, "old"), 0.0)
    with pytest.raises(ProtocolError, match="peer speaks protocol version 4, this node speaks"):
        srv.next_event()
    assert frames_of(srv.data_to_send()) == [
        (
            int(FrameType.LOGON_REJECT),
            "protocol error: protocol version 4 is not supported; this node speaks version 5",
        )
    ]


# ------------------------------------------------------------ command checks


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda p: p.subscribe_pattern("", "levels", "/a/*"), "type_name='': expected a non"),
        (lambda p: p.subscribe_pattern(5, "levels", "/a/*"), "type_name=5"),
        (lambda p: p.subscribe_pattern("T", "glob", "/a/*"), "dialect='glob': expected 'levels'"),
        (lambda p: p.subscribe_pattern("T", 2, "/a/*"), "dialect=2"),
        (lambda p: p.subscribe_pattern("T", True, "/a/*"), "dialect=True"),
        (lambda p: p.subscribe_pattern("T", None, "/a/*"), "dialect=None"),
        (lambda p: p.subscribe_pattern("T", "levels", "a/*"), "does not start with '/'"),
        (lambda p: p.subscribe_pattern("T", "levels", "/a/b"), "no wildcard"),
        (lambda p: p.unsubscribe_pattern("T", "prefix", "a/b"), "does not end with '\\*'"),
        (lambda p: p.unsubscribe_pattern("T", "prefix", ".p*"), "private topic"),
        (lambda p: p.unsubscribe_pattern("T", "prefix", 5), "a pattern is a str, found int"),
        (lambda p: p.group(KEY, "", 1), "group='': it is empty"),
        (lambda p: p.group(KEY, "g" * 257, 1), "it has 257 characters"),
        (lambda p: p.group(KEY, b"g", 1), "group=b'g': expected a str"),
        (lambda p: p.group(KEY, "g", -1), "members=-1: expected an int from 0"),
        (lambda p: p.group(KEY, "g", 2**64), "members=18446744073709551616"),
        (lambda p: p.group(KEY, "g", 1.0), "members=1.0"),
        (lambda p: p.group(("", "s"), "g", 1), "non-empty type name"),
        (lambda p: p.group_notify(KEY, "", ()), "group_notify\\(\\) with group=''"),
        (lambda p: p.group_notify(["T", "s"], "g", ()), "key=\\['T', 's'\\]"),
        (lambda p: p.group_notify(KEY, "g", {1, 2}), "cannot be encoded as msgpack"),
        (lambda p: p.group_notify(OTHER, "g", object()), "cannot be encoded as msgpack"),
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
    assert proto.data_queued == 0
    # a key refused with its frame stays undefined: its id is the next one used
    proto.notify(OTHER, ())
    assert frames_of(proto.data_to_send())[0] == (KEY_DEF, 1, *OTHER)


def test_a_refused_pattern_command_raises_the_wildcard_error() -> None:
    pipe = connected()
    with pytest.raises(SubjectPatternError, match=r"subscribe_pattern\(\): levels pattern 'x'"):
        pipe.client.subscribe_pattern("T", "levels", "x")


def test_too_large_group_notify_is_refused_before_queueing() -> None:
    pipe = connected(settings=LinkSettings(max_frame_size=1024))
    pipe.client.group_notify(KEY, "g", b"x" * 990)  # fits with the frame header
    pipe.client.data_to_send()
    with pytest.raises(MessageTooLargeError, match=r"group_notify\(\).*max_frame_size=1024"):
        pipe.client.group_notify(OTHER, "g", b"x" * 1024)
    assert pipe.client.data_to_send() == b""
    assert pipe.client.last_seq_sent == 1
    assert pipe.client.data_queued == 0
    pipe.client.notify(OTHER, ())
    assert frames_of(pipe.client.data_to_send())[0] == (KEY_DEF, 1, *OTHER)


def test_commands_before_acceptance_and_after_closing() -> None:
    commands = [
        lambda p: p.subscribe_pattern("T", "levels", "/a/*"),
        lambda p: p.unsubscribe_pattern("T", "levels", "/a/*"),
        lambda p: p.group(KEY, "g", 1),
        lambda p: p.group_notify(KEY, "g", ()),
    ]
    fresh = LinkProtocol(Side.CLIENT, "cli", 0.0, is_known_type=all_types_known)
    closed = connected().client
    closed.logoff("bye")
    closed.data_to_send()
    for command in commands:
        with pytest.raises(UsageError, match="before the logon was accepted"):
            command(fresh)
        with pytest.raises(LinkClosedError, match="on a closed link"):
            command(closed)
    assert fresh.data_to_send() == closed.data_to_send() == b""
