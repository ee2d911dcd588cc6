"""What ``Bus.serve_jrep()``'s arguments and a configured gateway's properties keys
turn into: the token, the permissions, the settings and the gateway itself, with
errors that name the argument or the key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...bus.message import Message
from ...bus.permissions import Permissions
from ...config.schema import GatewayConfig, JrepClientConfig
from ...config.settings import GatewaySettings, JrepClientSettings, from_old_keywords
from ...errors import ConfigError
from .._configured import Label, permissions_of
from .._credentials import Secret, read_secret_file, secret_of
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
    settings: GatewaySettings | None = None,
    token: bytes | Secret | None = None,
    permissions: Permissions | None = None,
    types: Mapping[str, type[Message] | str] | None = None,
    config_prefix: str | None = None,
) -> Gateway:
    """A gateway of ``net``, not open yet (``NodeNet.serve_jrep`` opens it)."""
    s = from_old_keywords("serve_jrep", GatewaySettings, settings, {})
    label = Label("serve_jrep", "GatewaySettings", config_prefix)
    secret = _token(token, s.token_file, label)
    return Gateway(
        name=name,
        node_id=net.node_id,
        router=net.router,
        selector=net.selector_named(s.selector, f"jrep gateway {name!r}"),
        peer_log=net.peer_log,
        host=host,
        port=port,
        path=s.path,
        settings=s,
        allowed_origins=s.allowed_origins,
        token=secret,
        auth=s.auth,
        permissions=permissions_of(permissions, s.permissions_file, label),
        static_dir=os.fspath(s.static_dir) if s.static_dir is not None else None,
        types=types,
        config_prefix=config_prefix,
        views=net.views,
    )


def _token(
    token: bytes | Secret | None, token_file: str | os.PathLike[str] | None, label: Label
) -> Secret | None:
    if token is not None and token_file is not None:
        raise ConfigError(
            f"{label.call}(): token= and {label('token_file')} both given; give one (the file "
            "is better: the token stays out of the code)"
        )
    if token is not None:
        return secret_of(token, f"{label.call}(token=...)")
    if token_file is not None:
        return read_secret_file(token_file, label("token_file"))
    return None


def configured_gateway(net: NodeNet, c: GatewayConfig) -> Gateway:
    """The gateway a properties file configures."""
    return make_gateway(
        net,
        port=c.port,
        host=c.host,
        name=c.name,
        settings=c.settings,
        config_prefix=f"actorbus.jrep.gateway.{c.name}.",
    )


def make_client(
    net: NodeNet,
    url: str,
    *,
    name: str,
    settings: JrepClientSettings | None = None,
    token: bytes | Secret | None = None,
    permissions: Permissions | None = None,
    config_prefix: str | None = None,
) -> JrepClient:
    """A client bus of ``net`` dialling the gateway at ``url``, not started yet."""
    s = from_old_keywords("connect_jrep", JrepClientSettings, settings, {})
    label = Label("connect_jrep", "JrepClientSettings", config_prefix)
    return JrepClient(
        name=name,
        node_id=net.node_id,
        url=url,
        router=net.router,
        selector=net.selector_named(s.selector, f"jrep client {name!r}"),
        peer_log=net.peer_log,
        token=_token(token, s.token_file, label),
        reconnect=s.reconnect,
        reconnect_delay=s.reconnect_delay,
        connect_timeout=s.connect_timeout,
        heartbeat=s.heartbeat,
        permissions=permissions_of(permissions, s.permissions_file, label),
    )


def client_arguments(c: JrepClientConfig) -> dict[str, Any]:
    """``connect_jrep()`` arguments of a client bus a properties file configures."""
    return {
        "name": c.name,
        "settings": c.settings,
        "config_prefix": f"actorbus.jrep.client.{c.name}.",
    }
