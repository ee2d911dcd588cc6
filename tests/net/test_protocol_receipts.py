"""RECEIPT frames and run ids (docs/protocol.md §2, §3), and commands that
are refused for their body queueing no KEY_DEF either."""

from __future__ import annotations

import msgpack
import pytest

from actorbus import FeedState, Scope, UsageError
from actorbus.bus.router import Role
from actorbus.config import LinkSettings
from actorbus.errors import MessageTooLargeError, ProtocolError
from actorbus.net import PROTOCOL_VERSION, LinkProtocol, ProtocolState, Side
from actorbus.net.protocol import (
    FrameType,
    LogonAccepted,
    LogonComplete,
    LogonRequested,
    NotificationReceived,
    ReceiptReceived,
)
from actorbus.testing import accept_for_client, all_types_known, authenticate, encode_frame

LOGON = int(FrameType.LOGON)
RECEIPT = int(FrameType.RECEIPT)
KEY = ("Tick", "/a")


def frames_of(data: bytes) -> list[tuple[object, ...]]:
    frames = []
    while data:
        size = int.from_bytes(data[:4], "big")
        frames.append(msgpack.unpackb(data[4 : 4 + size], use_list=False))
        data = data[4 + size :]
    return frames


#: The smallest frame limit, so that "too large" is cheap to reach.
SETTINGS = LinkSettings(max_frame_size=1024)


def end(side: Side, node: str, run_id: str = "") -> LinkProtocol:
    return LinkProtocol(
        side, node, 0.0, is_known_type=all_types_known, settings=SETTINGS, run_id=run_id
    )


def test_run_ids_cross_in_logon_and_logon_accept() -> None:
    cli = end(Side.CLIENT, "cli", "c-1")
    srv = end(Side.SERVER, "srv", "s-1")
    cli.logon()
    logon = cli.data_to_send()
    assert [f[:4] for f in frames_of(logon)] == [(LOGON, PROTOCOL_VERSION, "cli", "c-1")]
    srv.receive_data(logon, 0.0)
    cli.receive_data(srv.data_to_send(), 0.0)  # CHALLENGE
    srv.receive_data(cli.data_to_send(), 0.0)  # PROOF
    assert srv.next_event() == LogonRequested("cli", "c-1")
    assert srv.peer_run_id == "c-1"
    srv.accept_logon()
    accept = srv.data_to_send()
    assert [f[:3] for f in frames_of(accept)] == [(int(FrameType.LOGON_ACCEPT), "srv", "s-1")]
    cli.receive_data(accept, 0.0)
    assert cli.next_event() == LogonAccepted("srv", "s-1")
    assert cli.peer_run_id == "s-1"


def test_receipts_arrive_before_logon_complete_both_ways() -> None:
    cli = end(Side.CLIENT, "cli", "c-1")
    srv = end(Side.SERVER, "srv", "s-1")
    cli.logon()
    authenticate(cli, srv)
    assert isinstance(srv.next_event(), LogonRequested)
    srv.accept_logon()
    srv.receipt(7)
    srv.complete_logon()
    cli.receive_data(srv.data_to_send(), 0.0)
    assert list(cli.events()) == [LogonAccepted("srv", "s-1"), ReceiptReceived(7), LogonComplete()]
    cli.receipt(2**64 - 1)
    cli.complete_logon()
    srv.receive_data(cli.data_to_send(), 0.0)
    assert list(srv.events()) == [ReceiptReceived(2**64 - 1), LogonComplete()]
    assert cli.state is srv.state is ProtocolState.CONNECTED


def test_the_receipt_command_is_once_and_before_logon_complete() -> None:
    cli = end(Side.CLIENT, "cli")
    with pytest.raises(UsageError, match="receipt\\(\\) while the link is IDLE"):
        cli.receipt(1)
    srv = end(Side.SERVER, "srv")
    cli.logon()
    authenticate(cli, srv)
    srv.next_event()
    srv.accept_logon()
    for bad in (-1, 2**64, 1.0, True):
        with pytest.raises(UsageError, match="received="):
            srv.receipt(bad)  # type: ignore[arg-type]
    srv.receipt(0)
    with pytest.raises(UsageError, match="at most once per link, before LOGON_COMPLETE"):
        srv.receipt(0)
    srv.complete_logon()
    with pytest.raises(UsageError, match="at most once"):
        srv.receipt(0)


def accepted_client() -> LinkProtocol:
    cli = end(Side.CLIENT, "cli")
    cli.logon()
    cli.data_to_send()
    cli.receive_data(accept_for_client(cli, "srv"), 0.0)
    assert cli.next_event() == LogonAccepted("srv", "")
    return cli


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([(RECEIPT,)], "malformed RECEIPT frame: 1 elements, expected 2"),
        ([(RECEIPT, 1, 2)], "malformed RECEIPT frame: 3 elements"),
        ([(RECEIPT, -1)], "received count is -1, expected an int >= 0"),
        ([(RECEIPT, "3")], "received count is '3'"),
        ([(RECEIPT, True)], "received count is True"),
        ([(RECEIPT, 1), (RECEIPT, 1)], "duplicate RECEIPT"),
        ([(int(FrameType.LOGON_COMPLETE),), (RECEIPT, 1)], "RECEIPT after LOGON_COMPLETE"),
    ],
)
def test_bad_receipts_are_protocol_errors(frames: list[tuple[object, ...]], match: str) -> None:
    cli = accepted_client()
    cli.receive_data(b"".join(encode_frame(*f) for f in frames), 0.0)
    with pytest.raises(ProtocolError, match=match):
        list(cli.events())
    assert cli.state is ProtocolState.CLOSED


def test_a_receipt_before_the_logon_is_accepted_is_garbage() -> None:
    srv = end(Side.SERVER, "srv")
    srv.receive_data(encode_frame(RECEIPT, 0), 0.0)
    with pytest.raises(ProtocolError, match="garbage before logon: a RECEIPT frame"):
        srv.next_event()


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ((LOGON, PROTOCOL_VERSION, "cli", 5, b"n" * 32), "run id is 5, expected a str"),
        (
            (LOGON, PROTOCOL_VERSION, "cli", "s" * 65, b"n" * 32),
            "it has 65 UTF-8 bytes, expected at most 64",
        ),
    ],
)
def test_malformed_run_ids(body: tuple[object, ...], match: str) -> None:
    srv = end(Side.SERVER, "srv")
    srv.receive_data(encode_frame(*body), 0.0)
    with pytest.raises(ProtocolError, match=match):
        srv.next_event()
    cli = end(Side.CLIENT, "cli")
    cli.logon()
    accept_for_client(cli, "srv")  # (the client is past the challenge now)
    cli.receive_data(encode_frame(int(FrameType.LOGON_ACCEPT), "srv", 5, b"p" * 32), 0.0)
    with pytest.raises(ProtocolError, match="malformed LOGON_ACCEPT frame: run id is 5"):
        cli.next_event()


def test_the_run_id_argument_is_checked() -> None:
    with pytest.raises(UsageError, match="run_id=5: expected a str"):
        end(Side.CLIENT, "cli", 5)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="at most 64"):
        end(Side.CLIENT, "cli", "é" * 33)


def connected() -> tuple[LinkProtocol, LinkProtocol]:
    cli, srv = end(Side.CLIENT, "cli"), end(Side.SERVER, "srv")
    cli.logon()
    authenticate(cli, srv)
    srv.next_event()
    srv.accept_logon()
    srv.complete_logon()
    cli.receive_data(srv.data_to_send(), 0.0)
    list(cli.events())
    cli.complete_logon()
    srv.receive_data(cli.data_to_send(), 0.0)
    list(srv.events())
    return cli, srv


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.notify(KEY, {1}),
        lambda p: p.request(KEY, 1, object()),
        lambda p: p.reply(1, KEY, 0, object()),
        lambda p: p.notify(KEY, b"x" * 2000),
        lambda p: p.advertise(("T", "s" * 2000), Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP),
    ],
)
def test_a_refused_command_on_a_new_key_queues_no_key_def(call: object) -> None:
    cli, srv = connected()
    assert cli.settings.max_frame_size == 1024
    with pytest.raises((UsageError, MessageTooLargeError)):
        call(cli)  # type: ignore[operator]
    assert cli.data_to_send() == b""
    assert cli.last_seq_sent == 0
    # the key is still new: its KEY_DEF goes with the first frame that uses it
    cli.notify(KEY, (1,))
    data = cli.data_to_send()
    assert frames_of(data)[0] == (int(FrameType.KEY_DEF), 0, "Tick", "/a")
    srv.receive_data(data, 0.0)
    assert list(srv.events()) == [NotificationReceived(KEY, (1,))]
