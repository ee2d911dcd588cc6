"""How the network side writes an address: ``host:port``, an IPv6 host in brackets."""

from __future__ import annotations

__all__ = ["endpoint"]


def endpoint(host: str, port: int) -> str:
    """``host:port``, or ``[host]:port`` for an IPv6 host (``[::1]:7000``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
