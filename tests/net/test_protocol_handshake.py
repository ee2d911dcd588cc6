"""Logon handshake, logoff and the state rules of LinkProtocol (two objects in memory)."""

from __future__ import annotations

import pytest
from nodes.protocol import frames_of

from actorbus import FeedState, Scope, UsageError
from actorbus.bus.router import Role
from actorbus.config import LinkSettings
from actorbus.errors import LinkClosedError, ProtocolError
from actorbus.net import PROTOCOL_VERSION, LinkProtocol, ProtocolState, Side
from actorbus.net._auth import client_proof
from actorbus.net._wire import ROLE_CODES, SCOPE_CODES
from actorbus.net.protocol import (
    Advertised,
    FrameType,
    LogoffReceived,
    LogonAccepted,
    LogonComplete,
    LogonRejected,
    LogonRequested,
    NotificationReceived,
)
from actorbus.testing import (
    MemoryPipe,
    accept_for_client,
    all_types_known,
    encode_frame,
    proof_for_server,
)

KEY = ("demo.DataPoint", "/demo")
LOGON = int(FrameType.LOGON)
NONCE = b"n" * 32


def server() -> LinkProtocol:
    return LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)


def client() -> LinkProtocol:
    return LinkProtocol(Side.CLIENT, "cli", 0.0, is_known_type=all_types_known)


def requested_server() -> LinkProtocol:
    """A server that has taken LogonRequested from client 'cli'."""
    srv = server()
    srv.receive_data(proof_for_server(srv, "cli"), 0.0)
    assert srv.next_event() == LogonRequested("cli")
    return srv


def accepted_server() -> LinkProtocol:
    srv = requested_server()
    srv.accept_logon()
    srv.data_to_send()
    return srv


# ------------------------------------------------------------------- accepting


def test_logon_accepted_connects_both_ends() -> None:
    pipe = MemoryPipe()
    client_seen, server_seen = pipe.logon()
    assert client_seen == [LogonAccepted("server-node"), LogonComplete()]
    assert server_seen == [LogonRequested("client-node"), LogonComplete()]
    assert pipe.client.state is ProtocolState.CONNECTED
    assert pipe.server.state is ProtocolState.CONNECTED
    assert pipe.client.peer_node_id == "server-node"
    assert pipe.server.peer_node_id == "client-node"
    assert pipe.client.close_reason is None


def test_handshake_frames_on_the_wire() -> None:
    pipe = MemoryPipe()
    pipe.client.logon()
    logon = frames_of(pipe.client.data_to_send())
    assert [f[:4] for f in logon] == [(LOGON, PROTOCOL_VERSION, "client-node", "")]
    client_nonce = logon[0][4]
    assert type(client_nonce) is bytes and len(client_nonce) == 32
    pipe.server.receive_data(encode_frame(*logon[0]), 0.0)
    assert pipe.server.next_event() is None  # the client has not proved its key yet
    challenge = frames_of(pipe.server.data_to_send())
    assert [f[0] for f in challenge] == [int(FrameType.CHALLENGE)]
    server_nonce = challenge[0][1]
    assert type(server_nonce) is bytes and len(server_nonce) == 32 != client_nonce
    pipe.client.receive_data(encode_frame(*challenge[0]), 0.0)
    assert pipe.client.next_event() is None
    proof = frames_of(pipe.client.data_to_send())
    assert [(f[0], len(f[1])) for f in proof] == [(int(FrameType.PROOF), 32)]
    pipe.server.receive_data(encode_frame(*proof[0]), 0.0)
    assert isinstance(pipe.server.next_event(), LogonRequested)
    pipe.server.accept_logon()
    pipe.server.advertise(KEY, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
    pipe.server.complete_logon()
    answer = frames_of(pipe.server.data_to_send())
    assert answer[0][:3] == (int(FrameType.LOGON_ACCEPT), "server-node", "")
    assert len(answer[0]) == 4 and len(answer[0][3]) == 32  # the server's proof
    assert answer[1:] == [
        (int(FrameType.KEY_DEF), 0, *KEY),
        (
            int(FrameType.ADVERTISE),
            1,
            0,
            ROLE_CODES[Role.PUBLISHER],
            SCOPE_CODES[Scope.LOCAL_AND_REMOTE],
            True,
        ),
        (int(FrameType.LOGON_COMPLETE),),
    ]


def test_state_moves_when_the_event_is_taken() -> None:
    srv = server()
    srv.receive_data(proof_for_server(srv, "cli"), 0.0)
    assert srv.state is ProtocolState.IDLE  # parsed, not yet taken
    assert srv.peer_node_id is None
    assert srv.next_event() == LogonRequested("cli")
    assert srv.state is ProtocolState.LOGON_RECEIVED
    assert srv.peer_node_id == "cli"


def test_advertisements_then_complete_before_connected() -> None:
    pipe = MemoryPipe()
    pipe.client.logon()
    pipe.transfer()
    pipe.transfer()
    pipe.transfer()
    assert isinstance(pipe.server.next_event(), LogonRequested)
    pipe.server.accept_logon()
    pipe.server.advertise(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.DOWN)
    pipe.server.complete_logon()
    assert pipe.server.state is ProtocolState.SYNCING  # the client's complete is missing
    pipe.transfer()
    assert list(pipe.client.events()) == [
        LogonAccepted("server-node"),
        Advertised(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.DOWN),
        LogonComplete(),
    ]
    assert pipe.client.state is ProtocolState.SYNCING  # its own complete is not sent yet
    pipe.client.notify(KEY, (1,))  # anything may flow before LOGON_COMPLETE
    pipe.client.complete_logon()
    assert pipe.client.state is ProtocolState.CONNECTED
    pipe.transfer()
    assert list(pipe.server.events()) == [NotificationReceived(KEY, (1,)), LogonComplete()]
    assert pipe.server.state is ProtocolState.CONNECTED


def test_logon_with_extra_fields_is_accepted() -> None:
    # Later versions may append fields to LOGON after the nonce; they are ignored here.
    srv = server()
    srv.receive_data(encode_frame(LOGON, PROTOCOL_VERSION, "cli", "s-1", NONCE, {"x": 1}), 0.0)
    [(_, server_nonce)] = frames_of(srv.data_to_send())
    proof = client_proof(b"", NONCE, server_nonce, "cli", "s-1")
    srv.receive_data(encode_frame(int(FrameType.PROOF), proof), 0.0)
    assert srv.next_event() == LogonRequested("cli", "s-1")


# ------------------------------------------------------------------- rejecting


def test_server_rejects_a_second_link_with_the_reason() -> None:
    pipe = MemoryPipe()
    pipe.client.logon()
    pipe.transfer()
    pipe.transfer()
    pipe.transfer()
    request = pipe.server.next_event()
    assert isinstance(request, LogonRequested)
    # The application knows all its links; this pair is already linked.
    reason = f"a link to node {request.peer_node_id!r} already exists"
    pipe.server.reject_logon(reason)
    assert pipe.server.state is ProtocolState.CLOSED
    assert pipe.server.close_reason == f"logon rejected here: {reason}"
    pipe.transfer()
    assert list(pipe.client.events()) == [LogonRejected(reason)]
    assert pipe.client.state is ProtocolState.CLOSED
    assert pipe.client.close_reason == f"logon rejected by the peer: {reason}"


def test_version_mismatch_is_rejected_with_a_reason() -> None:
    srv = server()
    srv.receive_data(encode_frame(LOGON, PROTOCOL_VERSION + 1, "cli"), 0.0)
    theirs, ours = PROTOCOL_VERSION + 1, PROTOCOL_VERSION
    with pytest.raises(ProtocolError, match=rf"version {theirs}, this node speaks version {ours}"):
        srv.next_event()
    assert srv.state is ProtocolState.CLOSED
    answer = srv.data_to_send()
    assert frames_of(answer) == [
        (
            int(FrameType.LOGON_REJECT),
            f"protocol error: protocol version {theirs} is not supported; this node speaks "
            f"version {ours}",
        )
    ]
    # The client learns the reason as a rejection.
    cli = client()
    cli.logon()
    cli.receive_data(answer, 0.0)
    event = cli.next_event()
    assert isinstance(event, LogonRejected)
    assert f"version {theirs} is not supported" in event.reason
    assert cli.state is ProtocolState.CLOSED


def test_client_rejects_after_learning_the_server_id() -> None:
    pipe = MemoryPipe()
    pipe.client.logon()
    pipe.transfer()
    pipe.transfer()
    pipe.transfer()
    assert isinstance(pipe.server.next_event(), LogonRequested)
    pipe.server.accept_logon()
    pipe.server.advertise(KEY, Role.PUBLISHER, Scope.REMOTE_ONLY, FeedState.UP)
    pipe.server.complete_logon()
    pipe.transfer()
    accepted = pipe.client.next_event()
    assert accepted == LogonAccepted("server-node")
    pipe.client.reject_logon("server-node is not the node this connection was meant for")
    assert pipe.client.state is ProtocolState.CLOSED
    assert pipe.client.next_event() is None  # the advertisement was discarded
    pipe.transfer()
    assert list(pipe.server.events()) == [
        LogoffReceived("server-node is not the node this connection was meant for")
    ]
    assert pipe.server.state is ProtocolState.CLOSED


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ((LOGON, PROTOCOL_VERSION), "2 elements, expected at least 5"),
        ((LOGON, PROTOCOL_VERSION, "cli", ""), "4 elements, expected at least 5"),
        ((LOGON, PROTOCOL_VERSION, "", "", NONCE), "node id '': it has 0 UTF-8 bytes"),
        (
            (LOGON, PROTOCOL_VERSION, "x" * 256, "", NONCE),
            "it has 256 UTF-8 bytes, expected 1..255",
        ),
        ((LOGON, PROTOCOL_VERSION, "é" * 128, "", NONCE), "it has 256 UTF-8 bytes"),
        ((LOGON, PROTOCOL_VERSION, 7, "", NONCE), "node id is 7, expected a str"),
        ((LOGON, "1", "cli", "", NONCE), "version is '1', expected an int"),
        ((LOGON, PROTOCOL_VERSION, "cli", "", "n" * 32), "nonce is 'nnn.*expected bin"),
        ((LOGON, PROTOCOL_VERSION, "cli", "", b"n" * 15), "nonce has 15 bytes, expected 16..64"),
        ((LOGON, PROTOCOL_VERSION, "cli", "", b"n" * 65), "nonce has 65 bytes, expected 16..64"),
    ],
)
def test_malformed_logon(body: tuple[object, ...], match: str) -> None:
    srv = server()
    srv.receive_data(encode_frame(*body), 0.0)
    with pytest.raises(ProtocolError, match=match):
        srv.next_event()
    assert frames_of(srv.data_to_send())[0][0] == int(FrameType.LOGON_REJECT)


# ---------------------------------------------------------- out-of-order frames


def test_garbage_before_logon_is_a_protocol_error() -> None:
    srv = server()
    srv.receive_data(encode_frame(int(FrameType.NOTIFY), 1, 0, (1,)), 0.0)
    with pytest.raises(ProtocolError, match="garbage before logon: a NOTIFY frame") as info:
        srv.next_event()
    assert "unknown peer" in str(info.value)
    assert srv.state is ProtocolState.CLOSED
    assert srv.counters.corrupt_frames == 1
    assert frames_of(srv.data_to_send()) == [
        (int(FrameType.LOGON_REJECT), "protocol error: frame before logon was accepted")
    ]


def test_client_rejects_frames_before_the_logon_answer() -> None:
    cli = client()
    cli.logon()
    cli.data_to_send()
    cli.receive_data(encode_frame(int(FrameType.HEARTBEAT)), 0.0)
    with pytest.raises(ProtocolError, match="garbage before logon: a HEARTBEAT"):
        cli.next_event()
    assert frames_of(cli.data_to_send()) == [
        (int(FrameType.LOGOFF), "protocol error: frame before logon was accepted")
    ]


def test_frames_behind_logon_are_garbage_even_if_accepted_later() -> None:
    # A client must wait for LOGON_ACCEPT; frames batched behind its PROOF are an
    # error, reported in stream order after LogonRequested.
    srv = server()
    data = proof_for_server(srv, "cli") + encode_frame(int(FrameType.KEY_DEF), 0, *KEY)
    srv.receive_data(data, 0.0)
    assert srv.next_event() == LogonRequested("cli")
    srv.accept_logon()  # the application has not seen the error yet: allowed
    with pytest.raises(ProtocolError, match="garbage before logon: a KEY_DEF"):
        srv.next_event()
    assert [f[0] for f in frames_of(srv.data_to_send())] == [
        int(FrameType.LOGON_ACCEPT),
        int(FrameType.LOGOFF),
    ]


def test_duplicate_logon() -> None:
    srv = accepted_server()
    srv.receive_data(encode_frame(LOGON, PROTOCOL_VERSION, "cli", "", NONCE), 0.0)
    with pytest.raises(ProtocolError, match="duplicate LOGON"):
        srv.next_event()


def test_duplicate_logon_before_the_answer() -> None:
    srv = server()
    srv.receive_data(encode_frame(LOGON, PROTOCOL_VERSION, "cli", "", NONCE) * 2, 0.0)
    with pytest.raises(ProtocolError, match="duplicate LOGON"):
        srv.next_event()
    assert srv.counters.auth_failures == 0


def test_logon_sent_to_a_client() -> None:
    cli = client()
    cli.logon()
    cli.receive_data(encode_frame(LOGON, PROTOCOL_VERSION, "srv", "", NONCE), 0.0)
    with pytest.raises(ProtocolError, match="the server sent LOGON"):
        cli.next_event()


@pytest.mark.parametrize("frame_type", [FrameType.LOGON_ACCEPT, FrameType.LOGON_REJECT])
def test_logon_answer_sent_by_a_client(frame_type: FrameType) -> None:
    srv = requested_server()
    srv.receive_data(encode_frame(int(frame_type), "x"), 0.0)
    with pytest.raises(ProtocolError, match=f"the client sent {frame_type.name}"):
        srv.next_event()


def test_second_logon_accept() -> None:
    cli = client()
    cli.logon()
    accept = accept_for_client(cli, "srv")
    cli.receive_data(accept + accept, 0.0)
    assert cli.next_event() == LogonAccepted("srv")
    with pytest.raises(ProtocolError, match="LOGON_ACCEPT arrived while the logon is SYNCING"):
        cli.next_event()


def test_logon_accept_before_logon_was_sent() -> None:
    cli = client()
    cli.receive_data(encode_frame(int(FrameType.LOGON_ACCEPT), "srv", "", b"p" * 32), 0.0)
    with pytest.raises(ProtocolError, match="while the logon is IDLE"):
        cli.next_event()


def test_duplicate_logon_complete() -> None:
    srv = accepted_server()
    srv.receive_data(encode_frame(int(FrameType.LOGON_COMPLETE)) * 2, 0.0)
    assert srv.next_event() == LogonComplete()
    with pytest.raises(ProtocolError, match="duplicate LOGON_COMPLETE"):
        srv.next_event()


def test_logoff_is_allowed_before_logon() -> None:
    srv = server()
    srv.receive_data(encode_frame(int(FrameType.LOGOFF), "changed my mind"), 0.0)
    assert srv.next_event() == LogoffReceived("changed my mind")
    assert srv.state is ProtocolState.CLOSED


# ------------------------------------------------------------ local misuse


def test_commands_before_logon_are_usage_errors() -> None:
    cli = client()
    with pytest.raises(
        UsageError, match=r"notify\(\) before the logon was accepted \(state IDLE\)"
    ):
        cli.notify(KEY, (1,))
    cli.logon()
    with pytest.raises(UsageError, match="state LOGON_SENT"):
        cli.subscribe(KEY, Role.SUBSCRIBER)
    with pytest.raises(UsageError, match=r"complete_logon\(\) while the link is LOGON_SENT"):
        cli.complete_logon()
    assert cli.data_to_send() != b""  # only the LOGON


def test_handshake_commands_on_the_wrong_side() -> None:
    srv = server()
    cli = client()
    with pytest.raises(UsageError, match="only the client sends LOGON"):
        srv.logon()
    with pytest.raises(UsageError, match="the client reacts to LogonAccepted"):
        cli.accept_logon()
    with pytest.raises(UsageError, match=r"accept_logon\(\) while the link is IDLE"):
        srv.accept_logon()
    with pytest.raises(UsageError, match=r"reject_logon\(\) while the link is IDLE"):
        cli.reject_logon("no")
    cli.logon()
    with pytest.raises(UsageError, match=r"logon\(\) while the link is LOGON_SENT"):
        cli.logon()


def test_complete_logon_twice() -> None:
    srv = accepted_server()
    srv.complete_logon()
    with pytest.raises(UsageError, match="called twice"):
        srv.complete_logon()


@pytest.mark.parametrize("reason", [None, 3, b"bytes"])
def test_reason_must_be_text(reason: object) -> None:
    srv = accepted_server()
    with pytest.raises(UsageError, match="expected a str"):
        srv.logoff(reason)  # type: ignore[arg-type]


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(UsageError, match="node_id='': it has 0 UTF-8 bytes"):
        LinkProtocol(Side.SERVER, "", 0.0, is_known_type=all_types_known)
    with pytest.raises(UsageError, match="not valid Unicode"):
        LinkProtocol(Side.SERVER, "\ud800", 0.0, is_known_type=all_types_known)
    with pytest.raises(UsageError, match="expected a str"):
        LinkProtocol(Side.SERVER, b"n", 0.0, is_known_type=all_types_known)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="Side.CLIENT or Side.SERVER"):
        LinkProtocol("server", "n", 0.0, is_known_type=all_types_known)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_frame_size", 1023),
        ("max_frame_size", 2**32),
        ("max_frame_size", 1.5),
        ("heartbeat_delay", -1.0),
        ("heartbeat_reply_delay", float("nan")),
        ("logon_timeout", True),
        ("max_keys", 0),
        ("byte_order", "middle"),
    ],
)
def test_settings_are_checked(field: str, value: object) -> None:
    with pytest.raises(UsageError, match=f"LinkSettings.{field}="):
        LinkSettings(**{field: value})  # type: ignore[arg-type]


# -------------------------------------------------------------------- logoff


def test_logoff_both_ways_and_commands_after_close() -> None:
    pipe = MemoryPipe()
    pipe.logon()
    pipe.client.logoff("node shutting down")
    assert pipe.client.state is ProtocolState.CLOSED
    assert pipe.client.close_reason == "logged off here: node shutting down"
    pipe.transfer()
    assert list(pipe.server.events()) == [LogoffReceived("node shutting down")]
    assert pipe.server.close_reason == "logged off by the peer: node shutting down"
    for proto in (pipe.client, pipe.server):
        with pytest.raises(LinkClosedError, match=r"notify\(\) on a closed link \(log"):
            proto.notify(KEY, (1,))
        with pytest.raises(LinkClosedError, match="closed link"):
            proto.complete_logon()
        proto.logoff("again")  # a no-op once closed
        assert proto.data_to_send() == b""


def test_logoff_discards_events_not_yet_taken() -> None:
    pipe = MemoryPipe()
    pipe.logon()
    pipe.server.notify(KEY, (1,))
    pipe.server.notify(KEY, (2,))
    pipe.transfer()
    assert pipe.client.next_event() == NotificationReceived(KEY, (1,))
    pipe.client.logoff("enough")
    assert pipe.client.next_event() is None
    assert list(pipe.client.events()) == []


def test_logoff_while_iterating_events_stops_the_iteration() -> None:
    pipe = MemoryPipe()
    pipe.logon()
    for i in range(5):
        pipe.server.notify(KEY, (i,))
    pipe.transfer()
    taken = []
    for event in pipe.client.events():
        taken.append(event)
        pipe.client.logoff("first one is enough")
    assert taken == [NotificationReceived(KEY, (0,))]


def test_long_reasons_are_cut_so_the_closing_frame_always_fits() -> None:
    pipe = MemoryPipe(settings=LinkSettings(max_frame_size=1024))
    pipe.logon()
    pipe.client.logoff("é" * 5000)
    assert pipe.client.state is ProtocolState.CLOSED
    pipe.transfer()
    (event,) = pipe.server.events()
    assert isinstance(event, LogoffReceived)
    assert event.reason == "é" * 254 + "..."
    assert len(event.reason.encode()) <= 512


def test_repr_names_side_node_peer_and_state() -> None:
    pipe = MemoryPipe()
    pipe.logon()
    assert repr(pipe.client) == (
        "<LinkProtocol client node='client-node' peer='server-node' state=CONNECTED>"
    )
