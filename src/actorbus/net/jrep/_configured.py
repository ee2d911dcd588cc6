"""What ``Bus.serve_jrep()``'s arguments and a configured gateway's properties keys
turn into: the token, the permissions, the settings and the gateway itself, with
errors that name the argument or the key."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...bus.message import Message
from ...bus.permissions import Permissions
from ...config.schema import GatewayConfig, JrepClientConfig
from ...errors import ConfigError, UsageError
from .._credentials import Secret, read_secret_file, secret_of
from ._settings import GatewaySettings
from .client import JrepClient
from .gateway import Gateway

if TYPE_CHECKING:
    from ..node import NodeNet

__all__ = ["client_arguments", "configured_gateway", "make_client", "make_gateway"]


def make_gateway(
    net: NodeNet,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    name: str,
    path: str = "/jrep",
    settings: GatewaySettings | None = None,
    allowed_origins: Iterable[str] = (),
    token: bytes | Secret | None = None,
    token_file: str | os.PathLike[str] | None = None,
    auth: str = "auto",
    permissions: Permissions | None = None,
    static_dir: str | os.PathLike[str] | None = None,
    types: Mapping[str, type[Message] | str] | None = None,
    selector: str | None = None,
    config_prefix: str | None = None,
) -> Gateway:
    """A gateway of ``net``, not open yet (``NodeNet.serve_jrep`` opens it)."""
    if token is not None and token_file is not None:
        raise ConfigError(
            "serve_jrep(): token= and token_file= both given; give one (the file is better: "
            "the token stays out of the code)"
        )
    secret: Secret | None = None
    if token is not None:
        secret = secret_of(token, "serve_jrep(token=...)")
    elif token_file is not None:
        what = f"{config_prefix}tokenFile" if config_prefix else "serve_jrep(token_file=...)"
        secret = read_secret_file(token_file, what)
    if permissions is not None and not isinstance(permissions, Permissions):
        raise UsageError(
            f"serve_jrep(permissions={permissions!r}): expected a Permissions, e.g. "
            "Permissions(['allow subscribe web /prices/...'])"
        )
    origins = (allowed_origins,) if isinstance(allowed_origins, str) else tuple(allowed_origins)
    return Gateway(
        name=name,
        node_id=net.node_id,
        router=net.router,
        selector=net.selector_named(selector, f"jrep gateway {name!r}"),
        peer_log=net.peer_log,
        host=host,
        port=port,
        path=path,
        settings=settings,
        allowed_origins=origins,
        token=secret,
        auth=auth,
        permissions=permissions,
        static_dir=os.fspath(static_dir) if static_dir is not None else None,
        types=types,
        config_prefix=config_prefix,
    )


def configured_gateway(net: NodeNet, c: GatewayConfig) -> Gateway:
    """The gateway a properties file configures."""
    prefix = f"actorbus.jrep.gateway.{c.name}."
    settings = GatewaySettings(
        max_message_size=c.max_message_size,
        max_batch=c.max_batch,
        max_subscriptions=c.max_subscriptions,
        max_requests=c.max_requests,
        message_rate=float(c.message_rate),
        message_burst=c.message_burst,
        message_queue_size=c.message_queue_size,
        handshake_timeout=c.handshake_timeout_ms / 1000,
        idle_timeout=c.idle_timeout_ms / 1000,
        heartbeat_delay=c.heartbeat_delay_ms / 1000,
    )
    permissions = (
        Permissions.from_file(c.permissions_file, f"{prefix}permissionsFile")
        if c.permissions_file is not None
        else None
    )
    args: dict[str, Any] = {
        "port": c.port,
        "host": c.host,
        "name": c.name,
        "path": c.path,
        "settings": settings,
        "allowed_origins": c.allowed_origins,
        "token_file": c.token_file,
        "auth": c.auth,
        "permissions": permissions,
        "static_dir": c.static_dir,
        "selector": c.selector,
        "config_prefix": prefix,
    }
    return make_gateway(net, **args)


def make_client(
    net: NodeNet,
    url: str,
    *,
    name: str,
    token: bytes | Secret | None = None,
    token_file: str | os.PathLike[str] | None = None,
    reconnect: bool = False,
    reconnect_delay: float = 5.0,
    connect_timeout: float = 10.0,
    heartbeat: float = 0.0,
    max_message_size: int = 1_048_576,
    permissions: Permissions | None = None,
    selector: str | None = None,
    config_prefix: str | None = None,
) -> JrepClient:
    """A client bus of ``net`` dialling the gateway at ``url``, not started yet."""
    if token is not None and token_file is not None:
        raise ConfigError("connect_jrep(): token= and token_file= both given; give one")
    secret: Secret | None = None
    if token is not None:
        secret = secret_of(token, "connect_jrep(token=...)")
    elif token_file is not None:
        what = f"{config_prefix}tokenFile" if config_prefix else "connect_jrep(token_file=...)"
        secret = read_secret_file(token_file, what)
    if permissions is not None and not isinstance(permissions, Permissions):
        raise UsageError(f"connect_jrep(permissions={permissions!r}): expected a Permissions")
    return JrepClient(
        name=name,
        node_id=net.node_id,
        url=url,
        router=net.router,
        selector=net.selector_named(selector, f"jrep client {name!r}"),
        peer_log=net.peer_log,
        token=secret,
        reconnect=reconnect,
        reconnect_delay=reconnect_delay,
        connect_timeout=connect_timeout,
        heartbeat=heartbeat,
        max_message_size=max_message_size,
        permissions=permissions,
    )


def client_arguments(c: JrepClientConfig) -> dict[str, Any]:
    """``connect_jrep()`` arguments of a client bus a properties file configures."""
    prefix = f"actorbus.jrep.client.{c.name}."
    permissions = (
        Permissions.from_file(c.permissions_file, f"{prefix}permissionsFile")
        if c.permissions_file is not None
        else None
    )
    return {
        "name": c.name,
        "token_file": c.token_file,
        "reconnect": c.reconnect,
        "reconnect_delay": c.reconnect_delay_ms / 1000,
        "connect_timeout": c.connect_timeout_ms / 1000,
        "heartbeat": c.heartbeat_ms / 1000,
        "permissions": permissions,
        "selector": c.selector,
        "config_prefix": prefix,
    }
