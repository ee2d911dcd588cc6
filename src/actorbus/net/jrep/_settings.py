"""What a gateway counts (:class:`GatewayStats`); what configures it is
:class:`~actorbus.config.settings.GatewaySettings`, re-exported here."""

from __future__ import annotations

from dataclasses import dataclass

from ...config.settings import GatewaySettings

__all__ = ["GatewaySettings", "GatewayStats"]


@dataclass(frozen=True, slots=True)
class GatewayStats:
    """Counters of one gateway, sessions gone included."""

    #: WebSocket sessions opened (past the origin and token checks)
    sessions: int = 0
    #: sessions open now
    open_sessions: int = 0
    #: handshakes refused: origin not allowed, token missing or wrong
    refused: int = 0
    #: plain HTTP requests answered (files, not found)
    http_requests: int = 0
    #: J.REP messages received from clients (array items)
    received: int = 0
    #: J.REP messages sent to clients
    sent: int = 0
    #: errors sent on ClientBusErrors
    errors: int = 0
    #: sessions closed because their client read slower than the bus sent
    overflows: int = 0
    #: sessions that expired (idle timeout, or no ConnectToQueue in time)
    expired: int = 0
