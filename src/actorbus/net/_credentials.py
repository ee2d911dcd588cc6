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

**This user's secret.**  A node given no secret does not link unauthenticated:
it proves (and its services check) the secret of the user it runs as
(:func:`user_secret`), a random key in a file only that user may read —
``$ACTORBUS_USER_SECRET_FILE`` if set, else ``$XDG_CONFIG_HOME/actorbus/secret``,
else ``~/.config/actorbus/secret`` — made on first use, like Erlang's cookie
or Jupyter's token.  So the processes of one user link with no configuration,
and those of another user (another key) cannot.  A file that others may read
is refused, and its key is never shown.
"""

from __future__ import annotations

import os
import secrets
import stat
import threading
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
    "user_secret",
    "user_secret_path",
]

#: The environment variable that names the file of this user's secret (tests
#: point it at a directory of their own).
USER_SECRET_ENV: Final = "ACTORBUS_USER_SECRET_FILE"
#: this user's secret by file path, read once per process (a file replaced
#: while the process runs is read again only by a new process)
_user_secrets: dict[str, Secret] = {}
_user_lock = threading.Lock()

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


def user_secret_path() -> str:
    """Where this user's secret is: ``$ACTORBUS_USER_SECRET_FILE``, else
    ``$XDG_CONFIG_HOME/actorbus/secret``, else ``~/.config/actorbus/secret``."""
    named = os.environ.get(USER_SECRET_ENV)
    if named:
        return os.path.abspath(named)
    config = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(config):  # (the XDG rule: a relative value is ignored)
        config = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "actorbus", "secret")


def user_secret(what: str) -> Secret:
    """This user's secret (see the module docstring), made on first use: a
    random 32-byte key written as hex to a new file of mode 600 (its directory
    made with mode 700).  Read once per process.  ``what`` names the link or
    service in errors, which name the file and never its content."""
    path = user_secret_path()
    with _user_lock:
        found = _user_secrets.get(path)
        if found is None:
            found = _user_secrets[path] = _read_or_make(path, what)
        return found


def _read_or_make(path: str, what: str) -> Secret:
    if not os.path.lexists(path):
        _make(path, what)
    problem = secret_file_problem(path)
    if problem is None and os.name == "posix":
        info = os.stat(path)
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            problem = (
                f"this user's secret file {path!r} may be used by other users (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); chmod 600 {path}, or delete it to have "
                "a new one made (every node of this user must then be restarted)"
            )
        elif info.st_uid != os.getuid():
            problem = (
                f"this user's secret file {path!r} belongs to another user (uid "
                f"{info.st_uid}); delete it to have a new one made, or set "
                f"{USER_SECRET_ENV} to a file of this user's"
            )
    if problem is not None:
        raise ConfigError(
            f"{what}: no secret is configured, so it uses this user's secret, but {problem} "
            f"(or configure a secret; docs/security.md)"
        )
    return read_secret_file(path, what)


def _make(path: str, what: str) -> None:
    """Write a new secret to ``path`` at once: into a private temporary file
    first, then linked to ``path`` (so another process making it at the same
    time either wins, and this one reads its file, or loses; nobody reads a
    file half written)."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        temporary = os.path.join(directory, f".secret-{os.getpid()}-{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_hex(32) + "\n")
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process made it first: its key is the one
        finally:
            os.unlink(temporary)
    except OSError as exc:
        raise ConfigError(
            f"{what}: no secret is configured, so it uses this user's secret, which cannot "
            f"be made at {path!r} ({exc.strerror or exc}); make that directory writable, set "
            f"{USER_SECRET_ENV} to a file this user may write, or configure a secret "
            "(docs/security.md)"
        ) from None
