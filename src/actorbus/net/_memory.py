"""Two :class:`LinkProtocol` objects joined back to back in memory.

For tests, benchmarks and the fuzz target: no sockets, no threads, no clock.
``transfer()`` moves whatever each side queued to the other side, exactly as a
shell would (one ``data_to_send()`` per direction, one ``receive_data()``).
:func:`encode_frame` builds a frame by hand (straight from the wire format, not
through the protocol) to feed a protocol what a correct peer never would.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Literal

import msgpack

from actorbus.net._events import Event, LogonAccepted, LogonComplete, LogonRequested
from actorbus.net.protocol import LinkProtocol, ProtocolSettings, ProtocolState, Side

__all__ = ["MemoryPipe", "all_types_known", "encode_frame"]


def encode_frame(*fields: object, byte_order: Literal["big", "little"] = "big") -> bytes:
    """One frame: the 4-byte length prefix and the msgpack array ``fields``."""
    body: bytes = msgpack.packb(fields, use_bin_type=True)
    return struct.pack(">I" if byte_order == "big" else "<I", len(body)) + body


def all_types_known(type_name: str) -> bool:
    """An ``is_known_type`` that knows every type name."""
    return True


class MemoryPipe:
    """A client and a server protocol wired to each other."""

    def __init__(
        self,
        *,
        now: float = 0.0,
        client_id: str = "client-node",
        server_id: str = "server-node",
        settings: ProtocolSettings | None = None,
        client_knows: Callable[[str], bool] = all_types_known,
        server_knows: Callable[[str], bool] = all_types_known,
    ) -> None:
        self.client = LinkProtocol(
            Side.CLIENT, client_id, now, is_known_type=client_knows, settings=settings
        )
        self.server = LinkProtocol(
            Side.SERVER, server_id, now, is_known_type=server_knows, settings=settings
        )

    def transfer(self, now: float = 0.0) -> int:
        """Move queued bytes both ways once; return how many bytes moved."""
        to_server = self.client.data_to_send()
        to_client = self.server.data_to_send()
        if to_server:
            self.server.receive_data(to_server, now)
        if to_client:
            self.client.receive_data(to_client, now)
        return len(to_server) + len(to_client)

    def logon(self, now: float = 0.0) -> tuple[list[Event], list[Event]]:
        """Run the whole handshake (accepting); return the events each side saw.

        Both ends are CONNECTED afterwards.
        """
        client_seen: list[Event] = []
        server_seen: list[Event] = []
        self.client.logon()
        self.transfer(now)
        for event in self.server.events():
            server_seen.append(event)
            if isinstance(event, LogonRequested):
                self.server.accept_logon()
                self.server.complete_logon()
        self.transfer(now)
        for event in self.client.events():
            client_seen.append(event)
            if isinstance(event, LogonAccepted):
                self.client.complete_logon()
        self.transfer(now)
        server_seen.extend(self.server.events())
        if not (
            self.client.state is ProtocolState.CONNECTED
            and self.server.state is ProtocolState.CONNECTED
            and any(isinstance(e, LogonComplete) for e in client_seen)
        ):
            raise AssertionError(
                f"handshake did not connect: {self.client!r} {self.server!r} "
                f"client saw {client_seen} server saw {server_seen}"
            )
        return client_seen, server_seen
