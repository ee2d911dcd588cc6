"""What one :class:`~actorbus.net.protocol.LinkProtocol` is set up with, and what it counts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..errors import UsageError
from ._framing import DEFAULT_MAX_FRAME_SIZE, MAX_PREFIX_VALUE, MIN_FRAME_SIZE, PREFIX

__all__ = ["ProtocolSettings", "WireCounters"]


@dataclass(frozen=True, slots=True)
class ProtocolSettings:
    """Limits and timers of one link; both nodes should agree on them.

    Times are in seconds, on whatever clock the shell passes as ``now``
    (``time.monotonic()``).  ``0`` disables a timer.
    """

    #: Largest frame body accepted or sent, in bytes (the 4-byte prefix excluded).
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: Send HEARTBEAT after this long with nothing received; 0 = never.
    heartbeat_delay: float = 0.0
    #: Close the link when nothing arrives this long after a HEARTBEAT; 0 = never.
    heartbeat_reply_delay: float = 0.0
    #: Close the link when the whole logon (authentication, receipts, both
    #: LOGON_COMPLETEs) has not finished this long after creation.
    logon_timeout: float = 10.0
    #: Close the link when a frame whose first bytes arrived has not arrived
    #: whole this long after; 0 = never.
    frame_timeout: float = 30.0
    #: Most keys the peer may define with KEY_DEF on one link.
    max_peer_keys: int = 16_384
    #: Longest type name, subject or wildcard pattern the peer may send, in characters.
    max_subject_length: int = 1_024
    #: Most advertisements and subscriptions the peer may hold at once on one link.
    max_peer_feeds: int = 16_384
    #: Most wildcard subscriptions the peer may hold at once on one link.
    max_peer_patterns: int = 1_024
    #: Most queue groups (key and group name) the peer may hold at once on one link.
    max_peer_groups: int = 1_024
    #: Byte order of the 4-byte length prefix (msgpack itself is always big-endian).
    byte_order: Literal["big", "little"] = "big"

    def __post_init__(self) -> None:
        size = self.max_frame_size
        if type(size) is not int or not MIN_FRAME_SIZE <= size <= MAX_PREFIX_VALUE - PREFIX:
            raise UsageError(
                f"ProtocolSettings.max_frame_size={size!r}: expected an int from "
                f"{MIN_FRAME_SIZE} to {MAX_PREFIX_VALUE - PREFIX}"
            )
        for name in ("heartbeat_delay", "heartbeat_reply_delay", "logon_timeout", "frame_timeout"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise UsageError(
                    f"ProtocolSettings.{name}={value!r}: expected a finite number of "
                    "seconds >= 0 (0 disables the timer)"
                )
        for name in (
            "max_peer_keys",
            "max_subject_length",
            "max_peer_feeds",
            "max_peer_patterns",
            "max_peer_groups",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise UsageError(f"ProtocolSettings.{name}={value!r}: expected an int >= 1")
        if self.byte_order not in ("big", "little"):
            raise UsageError(
                f"ProtocolSettings.byte_order={self.byte_order!r}: expected 'big' or 'little'"
            )


@dataclass(slots=True)
class WireCounters:
    """What one protocol object (one connection) has put on and taken off the
    wire.  Outgoing counts are taken when ``data_to_send()`` hands the bytes
    over; incoming counts when ``receive_data()`` parses them."""

    #: Frames handed to the transport / parsed from it (every kind).
    frames_out: int = 0
    frames_in: int = 0
    #: Bytes handed to the transport / received (ignored bytes after close excluded).
    bytes_out: int = 0
    bytes_in: int = 0
    #: Data frames (notify, request, request ack, reply, cancel) out / in.
    messages_out: int = 0
    messages_in: int = 0
    #: Frames that broke a protocol rule (the link closes on the first one).
    corrupt_frames: int = 0
    #: Frames dropped because their key's type name is unknown here.
    unknown_type: int = 0
    #: Sequence jumps seen, and sequenced frames dropped as duplicates.
    gaps: int = 0
    duplicates: int = 0
    #: HEARTBEAT probes sent by us / received from the peer (and answered).
    heartbeats_out: int = 0
    heartbeats_in: int = 0
    #: Logons refused because the peer's proof did not match this side's key.
    auth_failures: int = 0
    #: Links closed because the peer went over a limit (keys, subject length,
    #: feeds, patterns, groups, a frame not finished in time).
    over_limit: int = 0
