"""Notifications in runs: ``LinkProtocol.notify_many`` on the sending side and
``next_batch`` (with ``next_item`` / ``next_event`` mixed in) on the receiving
side give the same frames and the same events, in the same order, as one
``notify`` / ``next_event`` per message."""

from __future__ import annotations

from collections import deque

import msgpack
import pytest
from nodes.protocol import connected

from actorbus import UsageError
from actorbus.config import LinkSettings
from actorbus.errors import MessageTooLargeError, ProtocolError
from actorbus.net.protocol import (
    RUN_MAX,
    FrameType,
    NotificationReceived,
    RequestAcknowledged,
    SequenceGap,
)
from actorbus.testing import MemoryPipe, encode_frame

KEY = ("demo.DataPoint", "/demo")
OTHER = ("demo.DataPoint", "/other")
NOTIFY = int(FrameType.NOTIFY)
NOTIFY_RUN = int(FrameType.NOTIFY_RUN)
KEY_DEF = int(FrameType.KEY_DEF)


def batches(pipe: MemoryPipe) -> list[object]:
    """Everything the client has, by next_batch(), runs as (key, [bodies])."""
    out: list[object] = []
    while (item := pipe.client.next_batch()) is not None:
        if type(item) is tuple:
            key, bodies = item
            assert isinstance(bodies, deque) and bodies
            out.append((key, list(bodies)))
        else:
            out.append(item)
    return out


def frame_types(data: bytes) -> list[int]:
    """The frame type of every frame in ``data``."""
    unpacker = msgpack.Unpacker(use_list=False)
    types, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        unpacker.feed(data[pos + 4 : pos + 4 + size])
        types.append(next(unpacker)[0])
        pos += 4 + size
    return types


def test_notify_many_sends_a_run_as_one_frame_the_peer_sees_as_one_notify_per_body() -> None:
    one, many = connected(), connected()
    for n in range(5):
        one.server.notify(KEY, ("/demo", n))
    one.server.notify(OTHER, ("/other", 9))
    many.server.notify_many(KEY, [("/demo", n) for n in range(5)])
    many.server.notify_many(OTHER, iter([("/other", 9)]))
    many.server.notify_many(OTHER, [])
    assert many.server.data_queued == one.server.data_queued == 6
    assert many.server.last_seq_sent == one.server.last_seq_sent
    one_bytes, many_bytes = one.server.data_to_send(), many.server.data_to_send()
    assert frame_types(one_bytes) == [KEY_DEF, *[NOTIFY] * 5, KEY_DEF, NOTIFY]
    assert frame_types(many_bytes) == [KEY_DEF, NOTIFY_RUN, KEY_DEF, NOTIFY]
    assert len(many_bytes) < len(one_bytes)
    assert many.server.counters.messages_out == one.server.counters.messages_out == 6
    one.client.receive_data(one_bytes, 0.0)
    many.client.receive_data(many_bytes, 0.0)
    assert list(many.client.events()) == list(one.client.events())
    assert many.client.last_seq_received == one.client.last_seq_received
    assert many.client.counters.messages_in == one.client.counters.messages_in == 6
    assert many.client.counters.frames_in == one.client.counters.frames_in - 4


def test_notify_many_splits_a_run_over_the_frame_size_limit_and_keeps_the_order() -> None:
    pipe = connected(settings=LinkSettings(max_frame_size=1024))
    bodies = [("/demo", n, b"x" * 100) for n in range(40)]  # some 4.5 KiB in all
    pipe.server.notify_many(KEY, bodies)
    data = pipe.server.data_to_send()
    types = frame_types(data)
    assert types.count(NOTIFY_RUN) >= 5 and types.count(KEY_DEF) == 1
    pipe.client.receive_data(data, 0.0)
    assert [e.body for e in pipe.client.events()] == bodies
    assert pipe.client.last_seq_received == pipe.server.last_seq_sent == 40
    assert pipe.client.counters.messages_in == 40


def test_notify_many_puts_at_most_run_max_bodies_in_a_frame() -> None:
    pipe = connected()
    bodies = [("/demo", n) for n in range(2 * RUN_MAX + 1)]
    pipe.server.notify_many(KEY, bodies)
    data = pipe.server.data_to_send()
    assert frame_types(data) == [KEY_DEF, NOTIFY_RUN, NOTIFY_RUN, NOTIFY]
    pipe.client.receive_data(data, 0.0)
    assert [body for _key, run in iter(pipe.client.next_batch, None) for body in run] == bodies  # type: ignore[misc]


def test_a_run_frame_numbers_its_bodies_like_notify_frames() -> None:
    # [NOTIFY_RUN, seq, key, (b1..bn)] takes seq .. seq+n-1: an old start is
    # dropped as duplicates (in part or whole), a late one is a gap.
    pipe = connected()
    pipe.server.notify(KEY, 0)
    pipe.transfer()
    seq = pipe.client.last_seq_received
    client = pipe.client
    before = client.counters.messages_in
    client.receive_data(
        encode_frame(NOTIFY_RUN, seq + 1, 0, (1, 2, 3))
        + encode_frame(NOTIFY_RUN, seq + 2, 0, (2, 3, 4, 5))  # 2 and 3 again
        + encode_frame(NOTIFY_RUN, seq + 1, 0, (1, 2))  # all old
        + encode_frame(NOTIFY_RUN, seq + 8, 0, (8, 9))  # 6 and 7 never arrive
        + encode_frame(NOTIFY, seq + 10, 0, 10),
        0.0,
    )
    assert batches(pipe) == [
        (KEY, [0, 1, 2, 3, 4, 5]),
        SequenceGap(seq + 6, seq + 8),
        (KEY, [8, 9, 10]),
    ]
    assert client.counters.duplicates == 4
    assert client.counters.gaps == 1
    assert client.counters.messages_in - before == 8
    assert client.last_seq_received == seq + 10


def test_a_run_frame_on_a_type_unknown_here_counts_each_body() -> None:
    pipe = connected(client_knows=lambda name: name != "demo.Secret")
    pipe.server.notify_many(("demo.Secret", "/s"), [1, 2, 3])
    pipe.server.notify_many(KEY, [4, 5])
    pipe.transfer()
    assert batches(pipe) == [(KEY, [4, 5])]
    assert pipe.client.counters.unknown_type == 3
    assert pipe.client.counters.messages_in == 5


def test_notify_many_stops_at_a_body_that_cannot_be_sent() -> None:
    pipe = connected(settings=LinkSettings(max_frame_size=1024))
    sender = pipe.server
    seq = sender.last_seq_sent
    with pytest.raises(MessageTooLargeError):
        sender.notify_many(KEY, [("/demo", 1), ("/demo", b"x" * 2000), ("/demo", 3)])
    assert sender.last_seq_sent == seq + 1  # the first is queued, the rest are not
    with pytest.raises(UsageError, match="cannot be encoded"):
        sender.notify_many(KEY, [("/demo", 2), ("/demo", object())])
    assert sender.last_seq_sent == seq + 2
    assert sender.data_queued == 2
    pipe.transfer()
    assert [e.body for e in pipe.client.events()] == [("/demo", 1), ("/demo", 2)]


def test_notify_many_defines_a_new_key_once_and_only_if_a_frame_is_queued() -> None:
    pipe = connected()
    sender = pipe.server
    with pytest.raises(UsageError):
        sender.notify_many(KEY, [("/demo", object())])
    assert sender.data_to_send() == b""  # no KEY_DEF for a key no frame used
    sender.notify_many(KEY, [("/demo", 1), ("/demo", 2)])
    frames = sender.data_to_send()
    assert frames.count(b"demo.DataPoint") == 1
    with pytest.raises(UsageError):
        sender.notify_many(("no", "tuple", "key"), [1])  # type: ignore[arg-type]


def test_next_batch_hands_over_runs_per_key_in_arrival_order() -> None:
    pipe = connected()
    sender = pipe.server
    for n in range(3):
        sender.notify(KEY, n)
    sender.notify(OTHER, 10)
    sender.request_ack(7, 1)
    sender.notify(OTHER, 11)
    sender.notify(OTHER, 12)
    sender.notify(KEY, 3)
    pipe.transfer()
    assert batches(pipe) == [
        (KEY, [0, 1, 2]),
        (OTHER, [10]),
        RequestAcknowledged(7, 1),
        (OTHER, [11, 12]),
        (KEY, [3]),
    ]
    assert pipe.client.next_batch() is None
    assert pipe.client.counters.messages_in == 8


def test_a_run_grows_across_reads_until_taken() -> None:
    pipe = connected()
    for n in range(4):
        pipe.server.notify(KEY, n)
    data = pipe.server.data_to_send()
    half = len(data) // 2 + 3  # in the middle of a frame
    pipe.client.receive_data(data[:half], 0.0)
    pipe.client.receive_data(data[half:], 0.0)
    assert batches(pipe) == [(KEY, [0, 1, 2, 3])]


def test_next_item_next_event_and_next_batch_mix() -> None:
    pipe = connected()
    for n in range(5):
        pipe.server.notify(KEY, n)
    pipe.transfer()
    client = pipe.client
    assert client.next_item() == (KEY, 0)
    assert client.next_event() == NotificationReceived(KEY, 1)
    assert batches(pipe) == [(KEY, [2, 3, 4])]
    for n in range(5, 8):
        pipe.server.notify(KEY, n)
    pipe.transfer()
    assert client.next_item() == (KEY, 5)
    assert client.next_item() == (KEY, 6)
    assert client.next_item() == (KEY, 7)
    assert client.next_item() is None
    assert client.next_event() is None


def test_next_batch_delivers_what_came_before_a_broken_frame() -> None:
    pipe = connected()
    for n in range(3):
        pipe.server.notify(KEY, n)
    pipe.transfer()
    client = pipe.client
    client.receive_data(b"\x00\x00\x00\x03\xc1\xc1\xc1", 0.0)
    assert client.next_batch() == (KEY, deque([0, 1, 2]))
    with pytest.raises(ProtocolError):
        client.next_batch()
    assert client.next_batch() is None


def test_a_gap_ends_a_run() -> None:
    pipe = connected()
    pipe.server.notify(KEY, 0)
    pipe.transfer()
    seq = pipe.client.last_seq_received
    client = pipe.client
    client.receive_data(
        encode_frame(NOTIFY, seq + 1, 0, 1)
        + encode_frame(NOTIFY, seq + 3, 0, 3)  # seq + 2 never arrives
        + encode_frame(NOTIFY, seq + 4, 0, 4),
        0.0,
    )
    assert batches(pipe) == [(KEY, [0, 1]), SequenceGap(seq + 2, seq + 3), (KEY, [3, 4])]
