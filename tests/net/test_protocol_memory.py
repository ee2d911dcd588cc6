"""What a protocol object costs in memory: output joined while a shell cannot
write (the bytes and the counters unchanged), an object released by its
shell freed without the cyclic collector, and what one that never logs on
holds in the interpreter's small objects."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Iterator

import pytest
from nodes.protocol import accepted_server, frames_of

from actorbus.net import LinkProtocol, Side
from actorbus.net.protocol import FrameType
from actorbus.testing import all_types_known, encode_frame


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic collector off: only reference counts free objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def test_joined_output_is_the_same_bytes_and_frames() -> None:
    srv = accepted_server(is_known_type=all_types_known)
    heartbeats = encode_frame(int(FrameType.HEARTBEAT)) * 1_000
    srv.receive_data(heartbeats, 1.0)
    assert list(srv.events()) == []
    assert srv.output_size(0)[0] == 1_000  # a frame object per reply
    assert srv.compact_output(0) == 1
    srv.receive_data(heartbeats[:6_000], 2.0)  # 1,000 more
    assert srv.compact_output(1) == 1  # the open chunk took them
    assert srv.compact_output(1) == 1  # nothing new: nothing to join
    before = srv.counters.frames_out
    data = srv.data_to_send()
    assert type(data) is bytes
    assert srv.counters.frames_out - before == 2_000
    assert frames_of(data) == [(int(FrameType.HEARTBEAT_REPLY),)] * 2_000


def test_joined_output_is_held_in_full_chunks_not_small_objects() -> None:
    # one check's frames are a few hundred bytes; joined on their own they
    # would be small objects again, which pin the interpreter's arenas
    srv = accepted_server(is_known_type=all_types_known)
    heartbeat = encode_frame(int(FrameType.HEARTBEAT))
    frames = 0
    for _ in range(2_000):
        srv.receive_data(heartbeat * 50, 1.0)
        frames = srv.compact_output(frames)
    out = srv.data_to_send
    waiting = srv.output_size(0)
    reply = len(encode_frame(int(FrameType.HEARTBEAT_REPLY)))
    assert waiting == (frames, 100_000 * reply)
    sizes = [srv.output_size(i)[1] - srv.output_size(i + 1)[1] for i in range(frames)]
    assert min(sizes[:-1]) >= 32 * 1_024, sizes  # (2,000 entries of 300 bytes before)
    before = srv.counters.frames_out
    data = out()
    assert srv.counters.frames_out - before == 100_000
    assert frames_of(data) == [(int(FrameType.HEARTBEAT_REPLY),)] * 100_000


def test_a_released_protocol_is_freed_by_reference_counts(no_collector: None) -> None:
    class Shell:
        """Holds the protocol and gives it its own bound methods, as a connection does."""

        def __init__(self) -> None:
            self.proto = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=self.known)
            self.proto.deliver_data_to(self.sink, self.sink, self.sink)

        def known(self, type_name: str) -> bool:
            return True

        def sink(self, *args: object) -> bool:
            return False

    kept = Shell()
    kept_ref = weakref.ref(kept.proto)
    released = Shell()
    released.proto.release()
    released_ref = weakref.ref(released.proto)
    counters = released.proto.counters
    del kept, released
    assert kept_ref() is not None  # a reference cycle: left to the collector
    assert released_ref() is None  # freed at once
    assert counters.frames_in == 0
    gc.collect()
    assert kept_ref() is None


#: what a protocol object that never logs on may hold in small objects (at
#: most 512 bytes each, which the interpreter keeps in its 1 MiB arenas), in
#: bytes: docs/reliability.md, "What stays"
PRE_LOGON_SMALL = 3_000


def test_a_protocol_that_never_logs_on_holds_few_small_objects() -> None:
    # A burst of such connections takes new arenas for their small objects;
    # what survives the burst pins them, so the fewer the better: the frame
    # handlers are shared per class, the peer-held sets made at the logon.
    partial = (4_096).to_bytes(4, "big") + b"\x92" + b"\x00" * 1_995

    def stranger() -> LinkProtocol:
        proto = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=bool, secret=b"k" * 32)
        proto.receive_data(partial, 0.0)
        assert list(proto.events()) == []
        return proto

    stranger()
    count = 200
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        held = [stranger() for _ in range(count)]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()

    def small(snapshot: tracemalloc.Snapshot) -> int:
        return sum(trace.size for trace in snapshot.traces if trace.size <= 512)

    each = (small(after) - small(before)) / count
    assert len(held) == count
    assert 0 < each <= PRE_LOGON_SMALL, each
