"""What one :class:`~actorbus.net.protocol.LinkProtocol` counts (it is set up with a
:class:`~actorbus.config.settings.LinkSettings`; ``ProtocolSettings`` is its
deprecated old name)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from ..config.settings import LinkSettings

__all__ = ["ProtocolSettings", "WireCounters"]


#: ProtocolSettings' field names that LinkSettings spells differently.
_RENAMED = {
    "max_peer_keys": "max_keys",
    "max_peer_feeds": "max_feeds",
    "max_peer_patterns": "max_patterns",
    "max_peer_groups": "max_groups",
}


def ProtocolSettings(**old: Any) -> LinkSettings:
    """Deprecated: the protocol reads :class:`~actorbus.config.settings.LinkSettings`
    (``max_peer_patterns`` is ``max_patterns`` there, and so on).  Builds one
    from the old field names, for one release."""
    new = {_RENAMED.get(name, name): value for name, value in old.items()}
    shown = ", ".join(f"{name}={value!r}" for name, value in new.items())
    warnings.warn(
        f"ProtocolSettings is deprecated; use LinkSettings({shown}) from actorbus.config "
        "(max_peer_* fields are max_* there; heartbeat_reply_delay=0 means the same as "
        "heartbeat_delay)",
        DeprecationWarning,
        stacklevel=2,
    )
    return LinkSettings(**new)


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
