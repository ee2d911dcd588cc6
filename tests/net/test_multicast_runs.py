"""What a channel's reliable messages hold (net/multicast/runs.py): notifications
packed into numbered runs within a datagram's segment, consecutive ones on one
key in one group (the key once, the bodies packed at once), each body the
codec's wire form."""

from __future__ import annotations

import msgpack
import pytest
from nodes.messages import Counter

from actorbus import Notification
from actorbus.bus import codec
from actorbus.bus.message import Message
from actorbus.errors import CodecError, MessageTooLargeError
from actorbus.net.multicast.runs import Encoder, pack_notifications


class Text(Notification, type_name="mctest.runs.Text"):
    text: str


def unpack(record: bytes) -> tuple[int, int, list[Message]]:
    kind, first, groups = msgpack.unpackb(record, use_list=False, ext_hook=codec.ext_hook)
    out: list[Message] = []
    for type_name, subject, bodies in groups:
        cls = {Counter.__type_name__: Counter, Text.__type_name__: Text}[type_name]
        for body in bodies:
            message = codec.from_wire(cls, body)
            assert message.subject == subject
            out.append(message)
    return kind, first, out


def test_runs_are_numbered_consecutively_and_stay_within_the_limit() -> None:
    messages = [Counter("/s", n=n, payload=bytes(n % 50)) for n in range(300)]
    records = pack_notifications(messages, 1400, first=1000)
    assert len(records) > 1
    expected_first = 1000
    seen: list[int] = []
    for record in records:
        assert len(record) <= 1400
        kind, first, got = unpack(record)
        assert (kind, first) == (2, expected_first)
        expected_first += len(got)
        seen += [m.n for m in got]  # type: ignore[attr-defined]
    assert seen == list(range(300))


def test_records_are_filled_not_cut_short_by_the_size_estimate() -> None:
    """Bodies of very different sizes: every record but the last is nearly full
    (what the next body would need does not fit), and nothing passes the limit."""
    sizes = [(n * 37) % 200 for n in range(2000)]
    messages = [Counter("/s", n=n, payload=bytes(size)) for n, size in enumerate(sizes)]
    records = pack_notifications(messages, 1400)
    assert all(len(r) <= 1400 for r in records)
    assert all(len(r) > 1400 - 260 for r in records[:-1])
    assert [m.n for r in records for m in unpack(r)[2]] == list(range(2000))  # type: ignore[attr-defined]


def test_keys_alternating_share_a_record_group_by_group() -> None:
    messages: list[Message] = []
    for n in range(12):
        messages.append(Counter("/a", n=n))
        messages.append(Counter("/a", n=n))
        messages.append(Text("/b", text=str(n)))
    (record,) = pack_notifications(messages, 1400)
    _, _, groups = msgpack.unpackb(record, use_list=False, ext_hook=codec.ext_hook)
    assert [(g[1], len(g[2])) for g in groups] == [("/a", 2), ("/b", 1)] * 12
    assert [m.subject for m in unpack(record)[2]] == [m.subject for m in messages]


def test_a_notification_larger_than_the_limit_is_a_run_of_its_own() -> None:
    small = Counter("/s", n=1)
    big = Counter("/s", n=2, payload=bytes(5000))
    records = pack_notifications([small, big, small], 1400)
    assert [len(unpack(r)[2]) for r in records] == [1, 1, 1]
    assert [unpack(r)[1] for r in records] == [0, 1, 2]
    assert len(records[1]) > 5000  # segmented by the protocol, whole here


def test_a_notification_over_the_channels_max_message_size_is_refused_with_the_fix() -> None:
    with pytest.raises(MessageTooLargeError, match="raise maxMessageSize"):
        pack_notifications([Counter("/s", n=1, payload=bytes(500))], 100, max_size=100)


def test_the_encoder_leaves_out_what_it_cannot_send_and_numbers_the_rest() -> None:
    dropped: list[tuple[str, int]] = []
    messages: list[Message] = [
        Counter("/s", n=0),
        Text("/t", text="bad \ud800"),  # a lone surrogate: msgpack refuses it
        Counter("/s", n=2, payload=bytes(3000)),  # over maxMessageSize
        Counter("/s", n=3),
    ]
    records, after = Encoder().pack(
        messages, 10, 1400, 2000, lambda counter, m, why: dropped.append((counter, id(m)))
    )
    assert dropped == [("unencodable", id(messages[1])), ("too_large", id(messages[2]))]
    assert after == 12
    got = [m for r in records for m in unpack(r)[2]]
    assert [m.n for m in got] == [0, 3]  # type: ignore[attr-defined]


def test_an_unencodable_notification_raises_from_pack_notifications() -> None:
    with pytest.raises(CodecError, match="cannot be sent"):
        pack_notifications([Text("/t", text="\udfff")], 1400)


def test_a_notification_at_the_limit_makes_a_record_the_protocol_takes() -> None:
    """The size check leaves room for the run's head: a record of one
    notification at the limit is within maxMessageSize, which the protocol
    enforces."""
    from actorbus.config import MulticastSettings
    from actorbus.net.multicast.publisher import PublisherProtocol

    most = 2000
    publisher = PublisherProtocol(
        MulticastSettings(max_message_size=most), stream=1, name="p", key=None, now=0.0
    )
    size = 0
    while True:
        try:
            pack_notifications([Counter("/s", n=1, payload=bytes(size + 1))], 1400, max_size=most)
        except MessageTooLargeError:
            break
        size += 1
    (record,) = pack_notifications([Counter("/s", n=1, payload=bytes(size))], 1400, max_size=most)
    assert len(record) <= most
    assert len(record) > most - 16
    publisher.send(record, 0.0)  # no ValueError
