"""What ``listen()`` / ``connect()`` and a node's configuration turn into for a
service or a link: credentials, permissions and TLS contexts (and, for
``join_multicast()``, a channel's key), from the
:class:`~actorbus.config.settings.ServiceSettings` or
:class:`~actorbus.config.settings.ConnectionSettings` (or
:class:`~actorbus.config.settings.MulticastSettings`) they are given, with errors
that name the properties key (a configured one) or the settings field."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

from ..bus.permissions import Permissions
from ..config.settings import ConnectionSettings, ServiceSettings
from ..errors import ConfigError, UsageError
from ._credentials import (
    Credentials,
    Secret,
    read_peer_secrets,
    read_secret_file,
    secret_of,
)
from ._tls import client_context, server_context

__all__ = [
    "Label",
    "connection_tls",
    "credentials_of",
    "multicast_key",
    "permissions_of",
    "service_tls",
]

#: A secret given in code: bytes (every peer proves it) or node id -> bytes.
SecretArg = bytes | Secret | Mapping[str, bytes | Secret] | None


class Label:
    """How errors name a setting: ``actorbus.service.feeds.secretFile`` for a
    configured service, ``ServiceSettings.secret_file`` in code."""

    __slots__ = ("call", "prefix", "type_name")

    def __init__(self, call: str, type_name: str, prefix: str | None) -> None:
        self.call = call
        self.type_name = type_name
        self.prefix = prefix

    def __call__(self, attribute: str) -> str:
        if self.prefix:
            head, *rest = attribute.split("_")
            return self.prefix + head + "".join(part.capitalize() for part in rest)
        return f"{self.call}(settings={self.type_name}({attribute}=...))"


def credentials_of(
    secret: SecretArg,
    secret_file: str | os.PathLike[str] | None,
    peer_secrets_file: str | os.PathLike[str] | None,
    label: Label,
) -> Credentials | None:
    """What a service checks (or a dialled link proves): ``secret`` given in code
    (bytes: the one every peer proves; a mapping: node id -> that node's own),
    and the files its settings name; None: no secret."""
    call = label.call
    shared: Secret | None = None
    peers: dict[str, Secret] = {}
    if isinstance(secret, Mapping):
        if call == "connect":
            raise UsageError(
                "connect(secret={...}): a link proves one secret; pass the bytes "
                "(a mapping of node ids to secrets is for listen())"
            )
        for node_id, value in secret.items():
            peers[node_id] = secret_of(value, f"{call}(secret[{node_id!r}])")
    elif secret is not None:
        if secret_file is not None:
            raise ConfigError(
                f"{call}(): secret= and secret_file= both given ({label('secret_file')}); "
                "give one (the file is better: the secret stays out of the code)"
            )
        shared = secret_of(secret, f"{call}(secret=...)")
    if secret_file is not None:
        shared = read_secret_file(secret_file, label("secret_file"))
    if peer_secrets_file is not None:
        peers.update(read_peer_secrets(peer_secrets_file, label("peer_secrets_file")))
    if shared is None and not peers:
        return None
    return Credentials(shared, peers)


def multicast_key(
    secret: bytes | None, secret_file: str | os.PathLike[str] | None, label: Label
) -> bytes | None:
    """The key a multicast channel's MACs are keyed from: ``secret`` given in
    code, else the one its settings' secret file holds (None: neither)."""
    if secret is not None and secret_file is not None:
        raise ConfigError(
            f"{label.call}(): secret= and secret_file= both given "
            f"({label('secret_file')}); give one"
        )
    if secret is not None:
        return secret_of(secret, f"{label.call}(secret=...)").reveal()
    if secret_file is not None:
        return read_secret_file(secret_file, label("secret_file")).reveal()
    return None


def permissions_of(
    permissions: object, path: str | os.PathLike[str] | None, label: Label
) -> Permissions | None:
    """The ``permissions=`` argument, else the settings' permissions file read
    now (its errors name the file, the line and the key)."""
    if permissions is not None and not isinstance(permissions, Permissions):
        raise UsageError(
            f"{label.call}(permissions={permissions!r}): expected a Permissions, e.g. "
            "Permissions(['allow publish node-a /fx/...']) or Permissions.from_file(path)"
        )
    if path is None:
        return permissions
    if permissions is not None:
        raise UsageError(
            f"{label.call}(): permissions= and {label('permissions_file')} both given; give one"
        )
    return Permissions.from_file(os.fspath(path), label("permissions_file"))


def _fspath(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)


def service_tls(
    tls: ssl.SSLContext | None, s: ServiceSettings, label: Label
) -> ssl.SSLContext | None:
    """The TLS context of a service: ``tls=``, else the one its settings' TLS
    files make (None: neither)."""
    cert, key, ca = _fspath(s.tls_cert_file), _fspath(s.tls_key_file), _fspath(s.tls_ca_file)
    if cert is None and key is None and ca is None:
        return tls
    if tls is not None:
        raise UsageError(f"{label.call}(): tls= and TLS files in settings both given; give one")
    if cert is None or key is None:
        missing = label("tls_cert_file" if cert is None else "tls_key_file")
        raise ConfigError(
            f"{missing}: missing; a service speaks TLS with a certificate and its private key "
            "(tlsCertFile and tlsKeyFile; tlsCaFile only adds client certificates)",
            key=missing,
        )
    return server_context(
        cert, key, ca, (label("tls_cert_file"), label("tls_key_file")), label("tls_ca_file")
    )


def connection_tls(
    tls: ssl.SSLContext | None, s: ConnectionSettings, label: Label
) -> ssl.SSLContext | None:
    """The TLS context of a connection: ``tls=``, else the one its settings' TLS
    files make (None: neither)."""
    ca, cert, key = _fspath(s.tls_ca_file), _fspath(s.tls_cert_file), _fspath(s.tls_key_file)
    if ca is None:
        if cert is None and key is None:
            return tls
        raise ConfigError(
            f"{label('tls_ca_file')}: missing; TLS on a connection needs the CA that signs the "
            "service's certificate (its certificate is always verified)",
            key=label("tls_ca_file"),
        )
    if tls is not None:
        raise UsageError(f"{label.call}(): tls= and TLS files in settings both given; give one")
    return client_context(
        ca, cert, key, label("tls_ca_file"), (label("tls_cert_file"), label("tls_key_file"))
    )
