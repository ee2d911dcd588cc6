"""Authenticating a logon: the nonces and the two proofs of the handshake.

Both ends of a link prove that they hold the same secret key without sending
it: each sends a fresh random *nonce*, and each answers with an HMAC-SHA256
of both nonces, the protocol version and the node ids under the key (a
*proof*).  A proof is good for one exchange only: the next one has other
nonces.  The two proofs carry different labels, so one can never stand in for
the other.  docs/protocol.md §3 is the reference::

    client proof = HMAC-SHA256(key, msgpack(["actorbus client proof", version,
                   client_nonce, server_nonce, client_node_id, client_run_id]))
    server proof = HMAC-SHA256(key, msgpack(["actorbus server proof", version,
                   client_nonce, server_nonce, client_node_id, client_run_id,
                   server_node_id, server_run_id]))

A link with no key proves with the empty key: two such ends link as they did
before authentication existed, and an end with a key never links with one
without (their proofs differ).  (The shell gives a node with no secret
configured its user's secret as the key unless ``auth`` is "none",
:mod:`~actorbus.net._credentials`.)

Pure functions, no I/O: :mod:`~actorbus.net.protocol` uses them; the shell
reads secrets (:mod:`~actorbus.net._credentials`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Final

import msgpack

from ._wire import PROTOCOL_VERSION

__all__ = [
    "MAX_NONCE",
    "MIN_NONCE",
    "NONCE_SIZE",
    "PROOF_SIZE",
    "KeyLookup",
    "client_proof",
    "key_lookup",
    "new_nonce",
    "proofs_match",
    "server_proof",
]

#: Bytes of the nonce this implementation sends.
NONCE_SIZE: Final = 32
#: Shortest and longest nonce accepted from a peer.
MIN_NONCE: Final = 16
MAX_NONCE: Final = 64
#: Bytes of a proof (an HMAC-SHA256).
PROOF_SIZE: Final = hashlib.sha256().digest_size

_CLIENT: Final = "actorbus client proof"
_SERVER: Final = "actorbus server proof"

#: The server's key for a client node id (None: no key for that node).
KeyLookup = Callable[[str], "bytes | None"]


def new_nonce() -> bytes:
    """A fresh random nonce (from the operating system's CSPRNG)."""
    return secrets.token_bytes(NONCE_SIZE)


def _mac(key: bytes, fields: list[object]) -> bytes:
    message: bytes = msgpack.packb(fields, use_bin_type=True)
    return hmac.new(key, message, hashlib.sha256).digest()


def client_proof(
    key: bytes, client_nonce: bytes, server_nonce: bytes, client_id: str, client_run: str
) -> bytes:
    """What the client sends in PROOF."""
    return _mac(key, [_CLIENT, PROTOCOL_VERSION, client_nonce, server_nonce, client_id, client_run])


def server_proof(
    key: bytes,
    client_nonce: bytes,
    server_nonce: bytes,
    client_id: str,
    client_run: str,
    *,
    server_id: str,
    server_run: str,
) -> bytes:
    """What the server sends in LOGON_ACCEPT."""
    return _mac(
        key,
        [
            _SERVER,
            PROTOCOL_VERSION,
            client_nonce,
            server_nonce,
            client_id,
            client_run,
            server_id,
            server_run,
        ],
    )


def proofs_match(expected: bytes, received: bytes) -> bool:
    """Compare two proofs in time that does not depend on where they differ."""
    return hmac.compare_digest(expected, received)


def key_lookup(secret: bytes | KeyLookup) -> KeyLookup:
    """``secret`` as a lookup: the same key for every node id, or the lookup itself."""
    if callable(secret):
        return secret
    key = bytes(secret)
    return lambda node_id: key
