"""The TCP link's side of wildcard interest and queue groups: its ``send_*``
methods put SUBSCRIBE_PATTERN, UNSUBSCRIBE_PATTERN, GROUP and GROUP_NOTIFY
frames on the wire (the notification encoded by the codec, counted as a data
message), and the frames a peer sends reach the party's inbound methods.  The
party's methods are stood in for here: what the router makes of them is the
bus's to test."""

from __future__ import annotations

from typing import Any

import pytest
from nodes.messages import Ask, Counter
from nodes.support import RawPeer, buses, wait_for

from actorbus.bus import codec
from actorbus.bus.message import MessageKey
from actorbus.bus.subjects import Wildcard
from actorbus.net._connection import _Connection
from actorbus.net._events import (
    GroupChanged,
    GroupNotificationReceived,
    PatternSubscribed,
    PatternUnsubscribed,
)

TYPE = Counter.__type_name__
WIRE_KEY = (TYPE, "/r")


def _connection(bus: Any, peer: str) -> _Connection:
    link = bus.net.link_to(peer)
    assert link is not None
    connection = link._connection
    assert connection is not None
    return connection  # type: ignore[no-any-return]


def test_the_send_methods_write_the_frames() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        with RawPeer.connect(service.port, "P") as peer:
            peer.logon()
            connection = _connection(a, "P")
            link = connection.link
            before = link.counters.messages_out
            connection.send_subscribe_pattern(Counter, Wildcard.levels("/r/*"))
            connection.send_group(MessageKey(Counter, "/r"), "workers", 2)
            connection.send_group_notify("workers", Counter("/r", n=7))
            connection.send_group(MessageKey(Counter, "/r"), "workers", 0)
            connection.send_unsubscribe_pattern(Counter, Wildcard.prefix("r**"))
            peer.expect(PatternUnsubscribed)
            ours = [
                e
                for e in peer.seen
                if type(e)
                in (PatternSubscribed, PatternUnsubscribed, GroupChanged, GroupNotificationReceived)
            ]
            assert ours[:2] == [
                PatternSubscribed(TYPE, Wildcard.levels("/r/*")),
                GroupChanged(WIRE_KEY, "workers", 2),
            ]
            notified = ours[2]
            assert isinstance(notified, GroupNotificationReceived)
            assert (notified.key, notified.group) == (WIRE_KEY, "workers")
            message = codec.from_wire(Counter, notified.body)
            assert (message.subject, message.n) == ("/r", 7)
            assert ours[3:] == [
                GroupChanged(WIRE_KEY, "workers", 0),
                PatternUnsubscribed(TYPE, Wildcard.prefix("r**")),
            ]
            # the group notification is a data message; the rest are not
            wait_for(lambda: link.counters.messages_out == before + 1, "the count is taken")


def test_the_frames_of_the_peer_reach_the_party(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    with buses("A") as (a,):
        service = a.listen(0)
        with RawPeer.connect(service.port, "P") as peer:
            peer.logon()
            connection = _connection(a, "P")
            party = connection.party
            assert party is not None
            for name in ("subscribe_pattern", "unsubscribe_pattern", "group", "group_notify"):
                monkeypatch.setattr(
                    party,
                    name,
                    lambda *args, _name=name: calls.append((_name, *args)),
                    raising=False,
                )
            proto = peer.proto
            proto.subscribe_pattern(TYPE, "levels", "/r/*")
            proto.group(WIRE_KEY, "workers", 3)
            proto.group_notify(WIRE_KEY, "workers", codec.to_wire(Counter("/r", n=5)))
            proto.subscribe_pattern(Ask.__type_name__, "prefix", "r*")  # not a notification
            proto.subscribe_pattern("linktest.Nowhere", "prefix", "r*")  # not a type here
            proto.unsubscribe_pattern(TYPE, "prefix", "r**")
            peer.send()
            wait_for(lambda: len(calls) == 4, "the party is told")
            key = MessageKey(Counter, "/r")
            assert calls[0] == ("subscribe_pattern", Counter, Wildcard.levels("/r/*"))
            assert calls[1] == ("group", key, "workers", 3)
            name, group, message, message_key, sender = calls[2]
            assert (name, group, message_key, sender) == ("group_notify", "workers", key, None)
            assert isinstance(message, Counter) and message.n == 5
            assert calls[3] == ("unsubscribe_pattern", Counter, Wildcard.prefix("r**"))
            counters = connection.link.counters
            assert counters.unknown_types == 2  # the request type, the unknown type
            assert counters.messages_in == 1
            assert connection.link.is_logged_on


def test_a_group_notification_on_a_link_gone_is_dropped_and_counted() -> None:
    with buses("A") as (a,):
        service = a.listen(0)
        with RawPeer.connect(service.port, "P") as peer:
            peer.logon()
            connection = _connection(a, "P")
        wait_for(lambda: connection.ended, "the node sees the connection end")
        link = connection.link
        dropped = link.counters.dropped
        connection.send_group(MessageKey(Counter, "/r"), "workers", 1)  # not a data message
        connection.send_subscribe_pattern(Counter, Wildcard.levels("/r/*"))
        assert link.counters.dropped == dropped
        connection.send_group_notify("workers", Counter("/r", n=1))
        assert link.counters.dropped == dropped + 1
