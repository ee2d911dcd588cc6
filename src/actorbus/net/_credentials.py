"""The secrets links authenticate with, and reading them from files.

A :class:`Secret` holds one key and never shows it: its ``repr`` and ``str``
say only that it is hidden, so a secret in a settings object, a log line or an
error message shows as ``Secret(<hidden>)``.  :class:`Credentials` is what a
service checks logons against: one secret shared by every node, and/or one
secret per node id (the key of a link is the one of its client node,
:mod:`~actorbus.net._auth`).

A secret file holds the key as text; the key is the file's bytes without the
whitespace around them (so a trailing newline does not count).  A file that is
missing, not a regular file, empty, shorter than :data:`MIN_SECRET` bytes, or
that every user may read or write is refused with an error saying which file
and what to do — never what it holds.  A peer-secrets file holds one
``node-id = secret`` line per node, in the properties file syntax
(docs/configuration.md; escape ``=``, ``:`` or spaces in a node id with
``\\``), under the same rules.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from ..config.properties import read_properties
from ..config.schema import GENERATE, MIN_SECRET, node_id_problem, secret_file_problem
from ..errors import ConfigError

__all__ = [
    "GENERATE",
    "MIN_SECRET",
    "Credentials",
    "Secret",
    "read_peer_secrets",
    "read_secret_file",
    "secret_of",
]

_WHITESPACE: Final = b" \t\r\n\f\v"


class Secret:
    """One secret key; ``repr``/``str`` never show it (see the module docstring)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = bytes(key)

    def reveal(self) -> bytes:
        """The key itself, for the protocol; never log it."""
        return self._key

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    __str__ = __repr__

    def __reduce__(self) -> str:
        raise TypeError("a Secret is not pickled: read it again from its file")


def secret_of(value: object, what: str) -> Secret:
    """``value`` (bytes, or a Secret) as a Secret; ``what`` names the setting in
    the error (the value itself never appears there)."""
    if isinstance(value, Secret):
        return value
    if not isinstance(value, bytes | bytearray):
        raise ConfigError(
            f"{what}: expected bytes (the key itself), got a {type(value).__name__}; "
            f"generate a key with {GENERATE}"
        )
    key = bytes(value)
    if len(key) < MIN_SECRET:
        raise ConfigError(
            f"{what}: the secret has {len(key)} bytes, expected at least {MIN_SECRET}; "
            f"a short secret can be guessed from one recorded logon: generate one with "
            f"{GENERATE}"
        )
    return Secret(key)


def read_secret_file(path: str | os.PathLike[str], what: str) -> Secret:
    """The secret held by the file at ``path`` (see the module docstring);
    ``what`` names the setting (``actorbus.service.feeds.secretFile``) in errors."""
    name = os.fspath(path)
    problem = secret_file_problem(name)
    if problem is None:
        try:
            with open(name, "rb") as file:
                return Secret(file.read().strip(_WHITESPACE))
        except OSError as exc:
            problem = (
                f"the secret file {name!r} cannot be read ({exc.strerror or exc}); check "
                "that this user may read it"
            )
    raise ConfigError(f"{what}: {problem}", key=what)


def read_peer_secrets(path: str | os.PathLike[str], what: str) -> dict[str, Secret]:
    """The ``node-id = secret`` lines of the file at ``path``."""
    name = os.fspath(path)
    problem = secret_file_problem(name, holds_one=False)
    if problem is not None:
        raise ConfigError(f"{what}: {problem}", key=what)
    try:
        entries = read_properties(name)
    except ConfigError as exc:  # its text may quote the line: say where, not what
        raise ConfigError(
            f"{what}: this line of the peer-secrets file does not parse as 'node-id = "
            "secret' in the properties syntax (the line is not shown: it may hold a "
            "secret); escape '=', ':' and spaces in a node id with a backslash",
            path=name,
            line=exc.line,
            key=what,
        ) from None
    peers: dict[str, Secret] = {}
    for entry in entries:
        problem = node_id_problem(entry.key)
        if problem is not None:
            raise ConfigError(
                f"{what}: node id {entry.key!r}: {problem}; write one 'node-id = secret' "
                "line per node",
                path=name,
                line=entry.line,
                key=what,
            )
        key = entry.value.encode("utf-8")
        if len(key) < MIN_SECRET:
            raise ConfigError(
                f"{what}: the secret of node {entry.key!r} has {len(key)} bytes, expected "
                f"at least {MIN_SECRET}; generate one with {GENERATE}",
                path=name,
                line=entry.line,
                key=what,
            )
        peers[entry.key] = Secret(key)
    if not peers:
        raise ConfigError(
            f"{what}: the peer-secrets file {name!r} holds no 'node-id = secret' line",
            key=what,
        )
    return peers


class Credentials:
    """What a service checks logons against: ``secret`` for every node, and
    ``peers`` (node id -> secret) for the nodes that have their own.  A node
    with its own secret must prove that one; a node with none proves
    ``secret``; with neither, its logon fails."""

    __slots__ = ("_peers", "_secret")

    def __init__(self, secret: Secret | None = None, peers: Mapping[str, Secret] | None = None):
        self._secret = secret
        self._peers: Mapping[str, Secret] = MappingProxyType(dict(peers or {}))

    @property
    def peer_ids(self) -> tuple[str, ...]:
        """The node ids that have a secret of their own."""
        return tuple(self._peers)

    @property
    def secret(self) -> Secret | None:
        """The secret every node without its own proves (None: none)."""
        return self._secret

    def key_for(self, node_id: str) -> bytes | None:
        """The key a client claiming ``node_id`` must prove (None: none)."""
        secret = self._peers.get(node_id, self._secret)
        return secret.reveal() if secret is not None else None

    def __repr__(self) -> str:
        shared = "a shared secret" if self._secret is not None else "no shared secret"
        return f"Credentials({shared}, {len(self._peers)} node secrets)"
