"""What configures a J.REP gateway's sessions (:class:`GatewaySettings`) and what
a gateway counts (:class:`GatewayStats`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ...errors import UsageError

__all__ = ["GatewaySettings", "GatewayStats"]


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """Limits and timers of every session of one gateway (times in seconds;
    docs/jrep.md, "Configuration", has the properties keys)."""

    #: largest WebSocket message a client may send, in bytes (larger: closed, 1009)
    max_message_size: int = 1 << 20
    #: J.REP messages one wire message (a JSON array) may hold
    max_batch: int = 1_000
    #: keys a session may subscribe to, publish on or reply on (together)
    max_subscriptions: int = 1_000
    #: requests a session may have outstanding, each way
    max_requests: int = 1_000
    #: J.REP messages per second a session may send on average (0: no limit);
    #: past the burst, reading from it pauses until it is back under the rate
    message_rate: float = 1_000.0
    #: messages a session may send at once above the rate (0: one second's worth)
    message_burst: int = 0
    #: messages queued for one client before its session is closed (1008)
    message_queue_size: int = 10_000
    #: the WebSocket handshake, then the client's ConnectToQueue, must come within this
    handshake_timeout: float = 10.0
    #: a session that sends nothing (not even an empty array) for this long expires
    idle_timeout: float = 60.0
    #: the gateway sends a Heartbeat after this long without sending anything (0: never)
    heartbeat_delay: float = 20.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"GatewaySettings.{f.name}={value!r}; expected a number >= 0")
        for name in ("max_message_size", "max_batch", "message_queue_size"):
            if getattr(self, name) < 1:
                raise UsageError(f"GatewaySettings.{name}={getattr(self, name)!r}; expected >= 1")
        for name in ("handshake_timeout", "idle_timeout"):
            if getattr(self, name) <= 0:
                raise UsageError(
                    f"GatewaySettings.{name}={getattr(self, name)!r}; expected a time > 0 s"
                )

    @property
    def burst(self) -> float:
        """The rate limiter's bucket size."""
        return float(self.message_burst or max(1.0, self.message_rate))


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
