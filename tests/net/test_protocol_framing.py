"""Length-prefix framing: size limits, the bounded input buffer, zero-length
frames, EOF, byte splitting, byte order, and what happens after CLOSED."""

from __future__ import annotations

import random

import msgpack
import pytest

from actorbus.bus.router import Role
from actorbus.config import LinkSettings
from actorbus.errors import LinkClosedError, ProtocolError
from actorbus.net import LinkProtocol, ProtocolState, Side
from actorbus.net.protocol import (
    ConnectionClosed,
    Event,
    FrameType,
    LogonRequested,
    NotificationReceived,
)
from actorbus.testing import MemoryPipe, all_types_known, encode_frame, proof_for_server

KEY = ("demo.Blob", "/big")
LIMIT = 1024
SETTINGS = LinkSettings(max_frame_size=LIMIT)
NOTIFY = int(FrameType.NOTIFY)
KEY_DEF = int(FrameType.KEY_DEF)


def accepted_server(settings: LinkSettings = SETTINGS) -> LinkProtocol:
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known, settings=settings)
    srv.receive_data(proof_for_server(srv, "cli"), 0.0)
    assert srv.next_event() == LogonRequested("cli")
    srv.accept_logon()
    srv.data_to_send()
    srv.receive_data(encode_frame(KEY_DEF, 0, *KEY), 0.0)
    return srv


def notify_frame(seq: int, body_size: int) -> bytes:
    """A NOTIFY frame whose whole msgpack body is exactly ``body_size`` bytes."""
    overhead = len(msgpack.packb((NOTIFY, seq, 0, b"")))
    payload = b"p" * (body_size - overhead)
    # bin8 vs bin16 headers differ by one byte: adjust until the size is exact.
    while len(msgpack.packb((NOTIFY, seq, 0, payload))) > body_size:
        payload = payload[:-1]
    frame = encode_frame(NOTIFY, seq, 0, payload)
    assert len(frame) == 4 + body_size
    return frame


def drain(proto: LinkProtocol) -> list[Event]:
    return list(proto.events())


# -------------------------------------------------------------- size limits


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    srv = accepted_server()
    srv.receive_data(notify_frame(1, LIMIT), 0.0)
    (event,) = drain(srv)
    assert isinstance(event, NotificationReceived)
    assert srv.bytes_buffered == 0


def test_oversized_prefix_is_rejected_from_the_prefix_alone() -> None:
    srv = accepted_server()
    srv.receive_data((LIMIT + 1).to_bytes(4, "big"), 0.0)  # no body byte sent yet
    assert srv.bytes_buffered == 0
    with pytest.raises(ProtocolError, match=r"frame of 1025 bytes, above max_frame_size=1024"):
        srv.next_event()
    assert srv.state is ProtocolState.CLOSED
    assert srv.counters.corrupt_frames == 1
    assert msgpack.unpackb(srv.data_to_send()[4:]) == [
        int(FrameType.LOGOFF),
        "protocol error: frame of 1025 bytes exceeds the limit of 1024",
    ]
    # The body that follows is never buffered.
    srv.receive_data(b"x" * 100_000, 0.0)
    assert srv.bytes_buffered == 0


def test_huge_prefix_from_a_foreign_protocol() -> None:
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)
    srv.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0.0)
    with pytest.raises(ProtocolError, match="frame of 1195725856 bytes"):
        srv.next_event()
    assert srv.bytes_buffered == 0


def test_input_buffer_never_holds_more_than_one_max_frame() -> None:
    seed = random.randrange(2**32)
    print(f"random seed {seed}")
    rng = random.Random(seed)
    srv = accepted_server()
    stream = b"".join(notify_frame(seq, rng.choice([LIMIT, LIMIT - 1, 40])) for seq in range(1, 41))
    received = 0
    offset = 0
    while offset < len(stream):
        size = rng.choice([1, 3, 7, 100, LIMIT, 3 * LIMIT + 17])
        srv.receive_data(stream[offset : offset + size], 0.0)
        offset += size
        assert srv.bytes_buffered <= LIMIT + 4
        received += len(drain(srv))
    assert received == 40
    assert srv.bytes_buffered == 0


def test_many_max_frames_in_one_read() -> None:
    srv = accepted_server()
    stream = b"".join(notify_frame(seq, LIMIT) for seq in range(1, 6))
    srv.receive_data(stream + notify_frame(6, LIMIT)[:500], 0.0)
    assert len(drain(srv)) == 5
    assert srv.bytes_buffered == 500 - 4


def test_zero_length_frame() -> None:
    srv = accepted_server()
    srv.receive_data(b"\x00\x00\x00\x00", 0.0)
    with pytest.raises(ProtocolError, match="frame of length 0"):
        srv.next_event()
    assert srv.state is ProtocolState.CLOSED


def test_prefix_shorter_than_the_body_is_detected() -> None:
    frame = encode_frame(NOTIFY, 1, 0, (1, 2, 3))
    srv = accepted_server()
    shortened = (int.from_bytes(frame[:4], "big") - 2).to_bytes(4, "big") + frame[4:]
    srv.receive_data(shortened, 0.0)
    with pytest.raises(ProtocolError, match="not exactly one valid msgpack value"):
        srv.next_event()


# ----------------------------------------------------------------------- EOF


def test_eof_at_a_frame_boundary() -> None:
    pipe = MemoryPipe()
    pipe.logon()
    pipe.server.notify(KEY, (1,))
    pipe.transfer()
    pipe.client.receive_data(b"", 1.0)
    assert list(pipe.client.events()) == [NotificationReceived(KEY, (1,)), ConnectionClosed()]
    assert pipe.client.state is ProtocolState.CLOSED
    assert pipe.client.close_reason == "the peer closed the connection without logging off"
    assert pipe.client.data_to_send() == b""  # nobody to tell


def test_eof_before_anything_arrived() -> None:
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)
    srv.receive_data(b"", 0.0)
    assert list(srv.events()) == [ConnectionClosed()]


@pytest.mark.parametrize(
    ("partial", "match"),
    [
        (b"\x00\x00", "2 of the 4 bytes of a length prefix"),
        (b"\x00\x00\x00\x09", "0 of the 9 body bytes"),
        (b"\x00\x00\x00\x09\x94\x15", "2 of the 9 body bytes"),
    ],
)
def test_eof_in_the_middle_of_a_frame(partial: bytes, match: str) -> None:
    srv = accepted_server()
    srv.receive_data(partial, 0.0)
    srv.receive_data(b"", 0.0)
    with pytest.raises(ProtocolError, match=f"ended in the middle of a frame: {match}"):
        srv.next_event()
    assert srv.state is ProtocolState.CLOSED


# ---------------------------------------------------------------- splitting


def test_same_events_whatever_the_reads() -> None:
    seed = random.randrange(2**32)
    print(f"random seed {seed}")
    rng = random.Random(seed)
    pipe = MemoryPipe()
    pipe.logon()
    for i in range(50):
        pipe.server.notify(KEY, ("/big", i, "x" * rng.randrange(300)))
        if i % 10 == 0:
            pipe.server.subscribe((f"T{i}", "s"), Role.SUBSCRIBER)
    stream = pipe.server.data_to_send()

    def run(reads: list[bytes]) -> list[Event]:
        fresh = MemoryPipe()
        fresh.logon()
        seen: list[Event] = []
        for data in reads:
            fresh.client.receive_data(data, 0.0)
            seen.extend(fresh.client.events())
        return seen

    whole = run([stream])
    assert len(whole) == 55
    assert run([stream[i : i + 1] for i in range(len(stream))]) == whole
    cuts = sorted(rng.sample(range(1, len(stream)), 30))
    assert run([stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]) == (
        whole
    )


def test_reads_may_be_bytearray_or_memoryview() -> None:
    srv = accepted_server()
    frame = encode_frame(NOTIFY, 1, 0, (1,)) + encode_frame(NOTIFY, 2, 0, (2,))
    srv.receive_data(bytearray(frame[:5]), 0.0)
    srv.receive_data(memoryview(frame)[5:], 0.0)
    assert drain(srv) == [NotificationReceived(KEY, (1,)), NotificationReceived(KEY, (2,))]


def test_reads_may_be_memoryviews_of_any_item_format() -> None:
    srv = accepted_server()
    pad = ""
    while len(data := encode_frame(NOTIFY, 1, 0, (pad,))) % 4:
        pad += "x"
    before = srv.counters.bytes_in
    srv.receive_data(memoryview(data).cast("I"), 0.0)  # len() counts 4-byte items
    assert drain(srv) == [NotificationReceived(KEY, (pad,))]
    assert srv.counters.bytes_in - before == len(data)


def test_little_endian_prefix() -> None:
    pipe = MemoryPipe(settings=LinkSettings(byte_order="little"))
    pipe.logon()
    pipe.server.notify(KEY, (1,))
    data = pipe.server.data_to_send()
    assert data.startswith(len(encode_frame(KEY_DEF, 0, *KEY)[4:]).to_bytes(4, "little"))
    pipe.client.receive_data(data, 0.0)
    assert list(pipe.client.events()) == [NotificationReceived(KEY, (1,))]


def test_mismatched_byte_order_is_caught_by_the_size_limit() -> None:
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=all_types_known)
    srv.receive_data(
        encode_frame(int(FrameType.LOGON), 1, "cli", "", b"n" * 32, byte_order="little"), 0.0
    )
    with pytest.raises(ProtocolError, match="handshake's limit of 4096 bytes.*byte_order"):
        srv.next_event()


# ------------------------------------------------------------- after CLOSED


def test_after_a_protocol_error_everything_is_quiet_and_consistent() -> None:
    srv = accepted_server()
    srv.receive_data(encode_frame(NOTIFY, 1, 0, (1,)) + b"\x00\x00\x00\x00", 0.0)
    assert srv.next_event() == NotificationReceived(KEY, (1,))
    assert srv.state is ProtocolState.SYNCING  # the error has not been taken yet
    srv.notify(KEY, ("still allowed",))  # queued before the LOGOFF
    with pytest.raises(ProtocolError) as info:
        srv.next_event()
    assert srv.error is info.value
    assert [f[0] for f in _frames(srv.data_to_send())] == [
        int(FrameType.KEY_DEF),
        NOTIFY,
        int(FrameType.LOGOFF),
    ]
    # Raised once; afterwards the link is simply closed.
    assert srv.next_event() is None
    srv.receive_data(encode_frame(NOTIFY, 2, 0, (2,)), 1.0)
    srv.receive_data(b"", 1.0)
    assert srv.next_event() is None
    assert srv.counters.frames_in == 4  # LOGON, PROOF, KEY_DEF, the first NOTIFY
    srv.tick(1e9)
    assert srv.next_deadline() is None
    assert srv.data_to_send() == b""
    with pytest.raises(LinkClosedError, match="protocol error"):
        srv.subscribe(KEY, Role.SUBSCRIBER)
    srv.logoff("no-op")
    assert srv.data_to_send() == b""


def test_bytes_behind_a_logoff_are_ignored() -> None:
    srv = accepted_server()
    before = srv.counters.frames_in
    srv.receive_data(
        encode_frame(int(FrameType.LOGOFF), "bye") + encode_frame(NOTIFY, 1, 0, (1,)), 0.0
    )
    assert [type(e).__name__ for e in srv.events()] == ["LogoffReceived"]
    assert srv.counters.frames_in == before + 1  # the NOTIFY behind it was never parsed


def _frames(data: bytes) -> list[tuple[object, ...]]:
    out = []
    offset = 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        out.append(msgpack.unpackb(data[offset + 4 : offset + 4 + size], use_list=False))
        offset += 4 + size
    return out
