""":class:`SocketAddress`: a ``(host, port)`` message field value."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["SocketAddress"]


class SocketAddress(NamedTuple):
    """A ``(host, port)`` socket address field value; port is 0..65535."""

    host: str
    port: int
