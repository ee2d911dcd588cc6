"""What a node's configuration and its ``listen()`` / ``connect()`` arguments
turn into for a service or a link: credentials, permissions, TLS contexts and
link settings, with errors that name the argument or the properties key."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any

from ..bus.permissions import Permissions
from ..config.schema import ConnectionConfig, LinkConfig, ServiceConfig
from ..errors import ConfigError, UsageError
from ._credentials import (
    Credentials,
    Secret,
    read_peer_secrets,
    read_secret_file,
    secret_of,
)
from ._tls import client_context, server_context
from .link import LinkSettings

__all__ = [
    "connection_tls",
    "credentials_of",
    "permissions_arg",
    "permissions_from_file",
    "service_tls",
    "settings_of",
]


def credentials_of(  # noqa: PLR0917 (listen()'s and connect()'s arguments, in their order)
    secret: bytes | Secret | None,
    secret_file: str | os.PathLike[str] | None,
    peer_secrets: Mapping[str, bytes | Secret] | None,
    peer_secrets_file: str | os.PathLike[str] | None,
    prefix: str | None,
    call: str,
) -> Credentials | None:
    """What a service checks (or a dialled link proves), from the arguments of
    listen() / connect() or the keys of a properties file; None: no secret."""

    def name(arg: str, key: str) -> str:
        return f"{prefix}{key}" if prefix else f"{call}({arg}=...)"

    if secret is not None and secret_file is not None:
        raise ConfigError(
            f"{call}(): secret= and secret_file= both given; give one (the file is "
            "better: the secret stays out of the code)"
        )
    shared: Secret | None = None
    if secret is not None:
        shared = secret_of(secret, name("secret", "secret"))
    elif secret_file is not None:
        shared = read_secret_file(secret_file, name("secret_file", "secretFile"))
    peers: dict[str, Secret] = {}
    if peer_secrets is not None:
        for node_id, value in peer_secrets.items():
            peers[node_id] = secret_of(value, f"{call}(peer_secrets[{node_id!r}])")
    if peer_secrets_file is not None:
        peers.update(
            read_peer_secrets(peer_secrets_file, name("peer_secrets_file", "peerSecretsFile"))
        )
    if shared is None and not peers:
        return None
    return Credentials(shared, peers)


def permissions_arg(permissions: object, call: str) -> Permissions | None:
    if permissions is None or isinstance(permissions, Permissions):
        return permissions
    raise UsageError(
        f"{call}(permissions={permissions!r}): expected a Permissions, e.g. "
        "Permissions(['allow publish node-a /fx/...']) or Permissions.from_file(path)"
    )


def permissions_from_file(path: str | None, prefix: str) -> Permissions | None:
    """A configured service's or connection's permissions file, read now (its
    errors name the file, the line and the key)."""
    if path is None:
        return None
    return Permissions.from_file(path, f"{prefix}permissionsFile")


def service_tls(c: ServiceConfig) -> ssl.SSLContext | None:
    """The TLS context of a configured service (None: it has no TLS keys)."""
    if c.tls_cert_file is None and c.tls_key_file is None and c.tls_ca_file is None:
        return None
    prefix = f"actorbus.service.{c.name}."
    if c.tls_cert_file is None or c.tls_key_file is None:
        missing = "tlsCertFile" if c.tls_cert_file is None else "tlsKeyFile"
        raise ConfigError(
            f"{prefix}{missing}: missing; a service speaks TLS with a certificate and its "
            "private key (tlsCertFile and tlsKeyFile; tlsCaFile only adds client certificates)",
            key=prefix + missing,
        )
    return server_context(
        c.tls_cert_file,
        c.tls_key_file,
        c.tls_ca_file,
        (f"{prefix}tlsCertFile", f"{prefix}tlsKeyFile"),
        f"{prefix}tlsCaFile",
    )


def connection_tls(c: ConnectionConfig) -> ssl.SSLContext | None:
    """The TLS context of a configured connection (None: it has no TLS keys)."""
    prefix = f"actorbus.connection.{c.name}."
    if c.tls_ca_file is None:
        if c.tls_cert_file is None and c.tls_key_file is None and c.tls_server_name is None:
            return None
        raise ConfigError(
            f"{prefix}tlsCaFile: missing; TLS on a connection needs the CA that signs the "
            "service's certificate (its certificate is always verified)",
            key=f"{prefix}tlsCaFile",
        )
    return client_context(
        c.tls_ca_file,
        c.tls_cert_file,
        c.tls_key_file,
        f"{prefix}tlsCaFile",
        (f"{prefix}tlsCertFile", f"{prefix}tlsKeyFile"),
    )


def byte_order(value: str) -> Any:
    order = value.lower()
    if order not in ("big", "little"):
        raise ConfigError(f"byteOrder={value!r}: expected big or little")
    return order


def settings_of(c: LinkConfig) -> LinkSettings:
    """The link settings a configured service or connection gives its links."""
    return LinkSettings(
        heartbeat_delay=c.heartbeat_delay_ms / 1000,
        heartbeat_reply_delay=c.heartbeat_reply_delay_ms / 1000,
        message_queue_size=c.message_queue_size,
        input_buffer_size=c.input_buffer_size,
        output_buffer_size=c.output_buffer_size,
        byte_order=byte_order(c.byte_order),
        input_backlog=c.input_backlog,
        logon_timeout=c.logon_timeout_ms / 1000,
        frame_timeout=c.frame_timeout_ms / 1000,
        max_frame_size=c.max_frame_size,
        max_keys=c.max_keys,
        max_subject_length=c.max_subject_length,
        max_feeds=c.max_feeds,
        max_patterns=c.max_patterns,
        max_groups=c.max_groups,
        message_queue_bytes=c.message_queue_bytes,
        message_queue_high_water=c.message_queue_high_water,
    )
