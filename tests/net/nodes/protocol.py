"""Helpers of the protocol tests: a logged-on pair of protocols in memory, a
server that accepted a client, frames fed by hand and read back."""

from __future__ import annotations

import msgpack

from actorbus.net import LinkProtocol, Side
from actorbus.net.protocol import Event, LogonRequested
from actorbus.testing import MemoryPipe, encode_frame, proof_for_server

__all__ = ["accepted_server", "connected", "feed", "frames_of", "knows_all_but_x"]


def frames_of(data: bytes) -> list[tuple[object, ...]]:
    """Split a byte stream into frame bodies, independently of the protocol."""
    out = []
    offset = 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        out.append(msgpack.unpackb(data[offset + 4 : offset + 4 + size], use_list=False))
        offset += 4 + size
    return out


def knows_all_but_x(type_name: str) -> bool:
    return not type_name.startswith("X")


def connected(**kwargs: object) -> MemoryPipe:
    pipe = MemoryPipe(**kwargs)  # type: ignore[arg-type]
    pipe.logon()
    return pipe


def accepted_server(**kwargs: object) -> LinkProtocol:
    """A server that accepted client 'cli'; feed it hand-made frames."""
    srv = LinkProtocol(Side.SERVER, "srv", 0.0, **kwargs)  # type: ignore[arg-type]
    srv.receive_data(proof_for_server(srv, "cli"), 0.0)
    assert srv.next_event() == LogonRequested("cli")
    srv.accept_logon()
    srv.data_to_send()
    return srv


def feed(proto: LinkProtocol, *frames: tuple[object, ...]) -> list[Event]:
    proto.receive_data(b"".join(encode_frame(*f) for f in frames), 0.0)
    return list(proto.events())
