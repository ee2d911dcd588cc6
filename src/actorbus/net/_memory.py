"""Two :class:`LinkProtocol` objects joined back to back in memory.

For tests, benchmarks and the fuzz target: no sockets, no threads, no clock.
``transfer()`` moves whatever each side queued to the other side, exactly as a
shell would (one ``data_to_send()`` per direction, one ``receive_data()``).
:func:`encode_frame` builds a frame by hand (straight from the wire format, not
through the protocol) to feed a protocol what a correct peer never would;
:func:`proof_for_server` and :func:`accept_for_client` play the other side's
part of the authentication by hand, so a test can put what it likes behind it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Literal

import msgpack

from actorbus.config.settings import LinkSettings
from actorbus.net._auth import KeyLookup, client_proof, new_nonce, server_proof
from actorbus.net._events import Event, LogonAccepted, LogonComplete, LogonRequested
from actorbus.net._wire import PROTOCOL_VERSION, FrameType
from actorbus.net.protocol import LinkProtocol, ProtocolState, Side

__all__ = [
    "MemoryPipe",
    "accept_for_client",
    "all_types_known",
    "authenticate",
    "encode_frame",
    "proof_for_server",
]


def encode_frame(*fields: object, byte_order: Literal["big", "little"] = "big") -> bytes:
    """One frame: the 4-byte length prefix and the msgpack array ``fields``."""
    body: bytes = msgpack.packb(fields, use_bin_type=True)
    return struct.pack(">I" if byte_order == "big" else "<I", len(body)) + body


def proof_for_server(
    server: LinkProtocol,
    node_id: str,
    *,
    run_id: str = "",
    secret: bytes = b"",
    now: float = 0.0,
    nonce: bytes | None = None,
) -> bytes:
    """Log on to ``server`` as client ``node_id`` by hand: feed it a LOGON, take
    its CHALLENGE (its output is drained), and return the PROOF frame made with
    ``secret``, for the caller to feed to it (alone or with more frames)."""
    client_nonce = new_nonce() if nonce is None else nonce
    server.receive_data(
        encode_frame(int(FrameType.LOGON), PROTOCOL_VERSION, node_id, run_id, client_nonce), now
    )
    server.data_to_send()
    proof = client_proof(secret, client_nonce, server._nonce, node_id, run_id)
    return encode_frame(int(FrameType.PROOF), proof)


def accept_for_client(
    client: LinkProtocol,
    node_id: str,
    *,
    run_id: str = "",
    secret: bytes = b"",
    now: float = 0.0,
) -> bytes:
    """Answer ``client`` (it has called ``logon()``) as server ``node_id`` by
    hand: feed it a CHALLENGE, take its PROOF (its output is drained), and
    return the LOGON_ACCEPT frame with the server's proof made with ``secret``,
    for the caller to feed to it (alone or with more frames)."""
    server_nonce = new_nonce()
    client.receive_data(encode_frame(int(FrameType.CHALLENGE), server_nonce), now)
    client.data_to_send()
    proof = server_proof(
        secret,
        client._nonce,
        server_nonce,
        client.node_id,
        client.run_id,
        server_id=node_id,
        server_run=run_id,
    )
    return encode_frame(int(FrameType.LOGON_ACCEPT), node_id, run_id, proof)


def authenticate(client: LinkProtocol, server: LinkProtocol, now: float = 0.0) -> None:
    """Move the client's LOGON (it has called ``logon()``), the server's CHALLENGE
    and the client's PROOF across: the server holds ``LogonRequested`` next (or
    ``AuthenticationFailed``)."""
    server.receive_data(client.data_to_send(), now)
    client.receive_data(server.data_to_send(), now)
    server.receive_data(client.data_to_send(), now)


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
        settings: LinkSettings | None = None,
        client_knows: Callable[[str], bool] = all_types_known,
        server_knows: Callable[[str], bool] = all_types_known,
        client_secret: bytes = b"",
        server_secret: bytes | KeyLookup = b"",
    ) -> None:
        self.client = LinkProtocol(
            Side.CLIENT,
            client_id,
            now,
            is_known_type=client_knows,
            settings=settings,
            secret=client_secret,
        )
        self.server = LinkProtocol(
            Side.SERVER,
            server_id,
            now,
            is_known_type=server_knows,
            settings=settings,
            secret=server_secret,
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
        self.transfer(now)  # LOGON; the server answers CHALLENGE by itself
        self.transfer(now)  # CHALLENGE; the client answers PROOF by itself
        self.transfer(now)  # PROOF
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
