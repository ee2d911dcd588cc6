"""The protocol's two shortcuts for a shell's hot paths: data frames straight out
of the parser (``deliver_data_to``) and a frame at once (``request_now`` /
``reply_now``).  Each must be exactly the calls it stands for: the same bytes,
sequence numbers, counters and order of what the application sees."""

from __future__ import annotations

from typing import Any

import pytest

from actorbus import FeedState, ReplyStatus, Scope, UsageError
from actorbus.bus.party import Role
from actorbus.config import LinkSettings
from actorbus.errors import MessageTooLargeError
from actorbus.net import LinkProtocol
from actorbus.net.protocol import (
    Advertised,
    NotificationReceived,
    ReplyReceived,
    RequestAcknowledged,
    RequestReceived,
)
from actorbus.testing import MemoryPipe

KEY = ("demo.Ask", "/q")
REPLY_KEY = ("demo.Answer", "/q")
NOTE = ("demo.Tick", "/t")


class Sinks:
    """Records what the parser hands over; ``take`` says whether it takes it."""

    def __init__(self, take: bool = True) -> None:
        self.take = take
        self.got: list[tuple[Any, ...]] = []

    def request(self, key: Any, request_id: int, body: Any) -> bool:
        self.got.append(("request", key, request_id, body))
        return self.take

    def reply(self, request_id: int, key: Any, status: Any, body: Any, repliers: Any) -> bool:
        self.got.append(("reply", request_id, key, status, body, repliers))
        return self.take

    def request_ack(self, request_id: int, repliers: int) -> bool:
        self.got.append(("ack", request_id, repliers))
        return self.take


def connected(sinks: Sinks | None = None) -> MemoryPipe:
    pipe = MemoryPipe()
    pipe.logon()
    if sinks is not None:
        pipe.server.deliver_data_to(sinks.request, sinks.reply, sinks.request_ack)
    return pipe


def test_data_frames_go_to_the_sinks_in_order_and_are_counted_as_events_would_be() -> None:
    sinks = Sinks()
    pipe = connected(sinks)
    before = pipe.server.counters.messages_in
    pipe.client.request(KEY, 7, ["x"])
    pipe.client.reply(3, REPLY_KEY, ReplyStatus.OK_FINAL, ["y"], 2)
    pipe.client.request_ack(9, 1)
    pipe.transfer()
    assert sinks.got == [
        ("request", KEY, 7, ("x",)),
        ("reply", 3, REPLY_KEY, ReplyStatus.OK_FINAL, ("y",), 2),
        ("ack", 9, 1),
    ]
    assert not pipe.server.has_events
    assert pipe.server.counters.messages_in == before + 3
    assert pipe.server.last_seq_received == pipe.client.last_seq_sent


def test_a_sink_that_refuses_leaves_the_frame_as_its_event() -> None:
    sinks = Sinks(take=False)
    pipe = connected(sinks)
    pipe.client.request(KEY, 7, ["x"])
    pipe.client.reply(3, REPLY_KEY, ReplyStatus.ERROR, ["y"])
    pipe.client.request_ack(9, 0)
    pipe.transfer()
    events = list(pipe.server.events())
    assert events == [
        RequestReceived(KEY, 7, ("x",)),
        ReplyReceived(3, REPLY_KEY, ReplyStatus.ERROR, ("y",), None),
        RequestAcknowledged(9, 0),
    ]
    # each was offered once, in order; the first refusal queued it, and from then
    # on the rest wait behind it without being offered
    assert [g[0] for g in sinks.got] == ["request"]


def test_nothing_overtakes_an_event_waiting_before_it() -> None:
    sinks = Sinks()
    pipe = connected(sinks)
    pipe.client.advertise(NOTE, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
    pipe.client.notify(NOTE, ["n1"])
    pipe.client.request(KEY, 1, ["x"])
    pipe.transfer()
    # the advertisement and the notification were queued first: the request
    # waits behind them as an event, in the order of the bytes
    assert sinks.got == []
    kinds = [type(e) for e in pipe.server.events()]
    assert kinds == [Advertised, NotificationReceived, RequestReceived]
    # with nothing waiting, the next one goes straight to its sink again
    pipe.client.request(KEY, 2, ["z"])
    pipe.transfer()
    assert sinks.got == [("request", KEY, 2, ("z",))]


def twin_pipes() -> tuple[MemoryPipe, MemoryPipe]:
    """Two connected pipes in the same state, for comparing two ways of sending."""
    return connected(), connected()


@pytest.mark.parametrize("repliers", [None, 0, 3])
def test_reply_now_is_reply_then_data_to_send(repliers: int | None) -> None:
    a, b = twin_pipes()
    for pipe in (a, b):  # define the key on both (the first use queues a KEY_DEF)
        pipe.client.reply(1, REPLY_KEY, ReplyStatus.OK_CONTINUING, ["first"])
        pipe.client.data_to_send()
    a.client.reply(2, REPLY_KEY, ReplyStatus.OK_FINAL, ["body"], repliers)
    expected = a.client.data_to_send()
    got = b.client.reply_now(2, REPLY_KEY, ReplyStatus.OK_FINAL, ["body"], repliers)
    assert got == expected
    assert b.client.counters == a.client.counters
    assert b.client.last_seq_sent == a.client.last_seq_sent
    assert not b.client.has_output


def test_request_now_is_request_then_data_to_send() -> None:
    a, b = twin_pipes()
    for pipe in (a, b):
        pipe.client.request(KEY, 1, ["first"])
        pipe.transfer()
        list(pipe.server.events())
    a.client.request(KEY, 2, ["body"])
    expected = a.client.data_to_send()
    got = b.client.request_now(KEY, 2, ["body"])
    assert got == expected
    assert b.client.counters == a.client.counters
    assert got is not None
    b.server.receive_data(got, 0.0)
    assert list(b.server.events()) == [RequestReceived(KEY, 2, ("body",))]


def test_the_shortcuts_do_nothing_when_they_cannot_stand_for_the_command() -> None:
    pipe = connected()
    client: LinkProtocol = pipe.client
    seq = client.last_seq_sent
    # a key not defined on the link yet (its KEY_DEF must go first)
    assert client.request_now(KEY, 1, ["x"]) is None
    assert client.reply_now(1, REPLY_KEY, ReplyStatus.OK_FINAL, ["x"]) is None
    assert client.last_seq_sent == seq and not client.has_output
    client.request(KEY, 1, ["x"])
    client.reply(1, REPLY_KEY, ReplyStatus.OK_FINAL, ["x"])
    # frames queued already: they must leave first
    assert client.request_now(KEY, 2, ["x"]) is None
    assert client.reply_now(2, REPLY_KEY, ReplyStatus.OK_FINAL, ["x"]) is None
    client.data_to_send()
    seq = client.last_seq_sent
    # a status that is not a ReplyStatus: the command explains, the shortcut passes
    assert client.reply_now(2, REPLY_KEY, 7, ["x"]) is None  # type: ignore[arg-type]
    assert client.last_seq_sent == seq and not client.has_output


def test_the_shortcuts_refuse_what_the_commands_refuse_and_queue_nothing() -> None:
    pipe = MemoryPipe(settings=LinkSettings(max_frame_size=1024))
    pipe.logon()
    client = pipe.client
    client.request(KEY, 1, ["x"])
    client.reply(1, REPLY_KEY, ReplyStatus.OK_FINAL, ["x"])
    client.data_to_send()
    seq = client.last_seq_sent
    with pytest.raises(MessageTooLargeError):
        client.request_now(KEY, 2, ["x" * 2000])
    with pytest.raises(UsageError):
        client.reply_now(2, REPLY_KEY, ReplyStatus.OK_FINAL, [object()])
    assert client.last_seq_sent == seq and not client.has_output


def test_no_shortcut_before_logon_or_after_close() -> None:
    pipe = MemoryPipe()
    assert pipe.client.request_now(KEY, 1, ["x"]) is None
    pipe.logon()
    pipe.client.request(KEY, 1, ["x"])
    pipe.client.data_to_send()
    pipe.client.logoff("done")
    assert pipe.client.request_now(KEY, 2, ["x"]) is None
