"""What a channel's reliable messages hold (net/multicast/runs.py): notifications
packed into numbered runs within a datagram's segment, each body embedded as the
codec's wire form."""

from __future__ import annotations

import msgpack
import pytest
from nodes.messages import Counter

from actorbus.bus import codec
from actorbus.errors import MessageTooLargeError
from actorbus.net.multicast.runs import notification_item, pack_notifications


def unpack(record: bytes) -> tuple[int, int, list[Counter]]:
    kind, first, items = msgpack.unpackb(record, use_list=False, ext_hook=codec.ext_hook)
    out = []
    for type_name, subject, body in items:
        assert type_name == Counter.__type_name__
        message = codec.from_wire(Counter, body)
        assert message.subject == subject
        out.append(message)
    return kind, first, out


def test_runs_are_numbered_consecutively_and_stay_within_the_limit() -> None:
    items = [
        notification_item(Counter("/s", n=n, payload=bytes(n % 50)), 1 << 20) for n in range(300)
    ]
    records = pack_notifications(items, 1400, first=1000)
    assert len(records) > 1
    expected_first = 1000
    seen: list[int] = []
    for record in records:
        assert len(record) <= 1400
        kind, first, messages = unpack(record)
        assert (kind, first) == (2, expected_first)
        expected_first += len(messages)
        seen += [m.n for m in messages]
    assert seen == list(range(300))


def test_a_notification_larger_than_the_limit_is_a_run_of_its_own() -> None:
    small = notification_item(Counter("/s", n=1), 1 << 20)
    big = notification_item(Counter("/s", n=2, payload=bytes(5000)), 1 << 20)
    records = pack_notifications([small, big, small], 1400)
    assert [len(unpack(r)[2]) for r in records] == [1, 1, 1]
    assert len(records[1]) > 5000  # segmented by the protocol, whole here


def test_an_item_over_the_channels_max_message_size_is_refused_with_the_fix() -> None:
    with pytest.raises(MessageTooLargeError, match="raise maxMessageSize"):
        notification_item(Counter("/s", n=1, payload=bytes(500)), 100)


def test_an_item_at_the_limit_makes_a_record_the_protocol_takes() -> None:
    """The size check leaves room for the run's head: a record of one item at the
    limit is within maxMessageSize, which the protocol enforces."""
    from actorbus.config import MulticastSettings
    from actorbus.net.multicast.publisher import PublisherProtocol

    most = 2000
    publisher = PublisherProtocol(
        MulticastSettings(max_message_size=most), stream=1, name="p", key=None, now=0.0
    )
    size = 0
    while True:
        try:
            item = notification_item(Counter("/s", n=1, payload=bytes(size + 1)), most)
        except MessageTooLargeError:
            break
        size += 1
    (record,) = pack_notifications([item], 1400)
    assert len(record) <= most
    publisher.send(record, 0.0)  # no ValueError
