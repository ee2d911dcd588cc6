"""The settings of a reliable multicast channel (``multicast.NAME.KEY``;
docs/multicast.md): :class:`MulticastSettings`, declared with
:func:`~actorbus.config._fields.setting` as every settings type of
:mod:`actorbus.config.settings` is, and re-exported from it; apart because a
channel shares nothing with a TCP link or a J.REP session but the way a
setting is written."""

from __future__ import annotations

import os
from dataclasses import dataclass

from actorbus.config._fields import (
    Settings,
    bool_check,
    host_check,
    path_setting,
    setting,
    strings_check,
)
from actorbus.config._values import (
    _boolean,
    _host,
    _multicast_group,
    _secret_file,
    _subject_patterns,
    multicast_group_problem,
)

__all__ = ["MulticastSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MulticastSettings(Settings):
    """A reliable multicast channel (``multicast.NAME.KEY``; docs/multicast.md): its
    group and port, the subjects sent on it, the timers and limits of its NAK
    recovery.  Every node of a channel should use the same secret."""

    group: str = setting(
        "239.255.77.1",
        check=multicast_group_problem,
        unit="IPv4 multicast address",
        row=_multicast_group,
        doc="the multicast group the channel sends to and joins",
    )
    port: int = setting(40_077, low=1, high=65535, unit="port", doc="the channel's UDP port")
    interface: str | None = setting(
        None,
        check=host_check,
        unit="IPv4 address",
        row=_host,
        doc="the address of the local interface to send and join on (none: the route's)",
    )
    ttl: int = setting(
        1,
        low=0,
        high=255,
        unit="hops",
        doc="multicast time-to-live: 0 this host only, 1 this LAN segment, more crosses routers",
    )
    loopback: bool = setting(
        True,
        check=bool_check,
        unit="boolean",
        row=_boolean,
        doc="deliver the channel's datagrams to other processes on this host too",
    )
    subjects: tuple[str, ...] = setting(
        (),
        check=strings_check,
        unit="comma list",
        row=_subject_patterns,
        doc="the subjects (or patterns: `/prices/...`, `prices.*`) whose notifications this node publishes "
        "on the channel; empty: the node only receives",
    )
    datagram_size: int = setting(
        1_472,
        low=256,
        high=65_507,
        unit="bytes",
        doc="largest datagram sent (1,472 fits a 1,500-byte MTU); a larger message is "
        "split into segments",
    )
    max_message_size: int = setting(1 << 20, low=1, unit="bytes", doc="largest message")
    cache_bytes: int = setting(
        16 << 20,
        low=0,
        unit="bytes",
        doc="the retransmit cache: datagrams kept for retransmission, oldest dropped first",
    )
    cache_age: float = setting(
        30.0,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="the retransmit cache: datagrams older than this are dropped",
    )
    heartbeat_interval: float = setting(
        0.1,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="a publisher heartbeats its last sequence number this often",
    )
    publisher_timeout: float = setting(
        3.0,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="a publisher not heard from for this long is gone: its feeds go DOWN",
    )
    announce_interval: float = setting(
        1.0,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="a publisher announces its feeds (advertisements, UP/DOWN) this often",
    )
    nak_delay: float = setting(
        0.02,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="a receiver waits a random time up to this before asking for a retransmission "
        "(and holds its request when it hears another receiver ask for the same)",
    )
    nak_retry: float = setting(
        0.1,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="a receiver asks again after this long when the repair has not come",
    )
    retransmit_holdoff: float = setting(
        0.05,
        ms=True,
        low=0.0,
        unit="seconds",
        doc="a publisher retransmits a datagram at most once in this long, whoever asks",
    )
    retransmit_rate: int = setting(
        0,
        low=0,
        unit="bytes per second, 0 = unlimited",
        doc="most retransmitted bytes a publisher sends per second (0 = unlimited)",
    )
    receive_window: int = setting(
        65_536,
        low=16,
        unit="datagrams",
        doc="datagrams a receiver holds past a gap; later ones are dropped until it closes",
    )
    max_publishers: int = setting(
        256, low=1, unit="publishers", doc="publishers a receiver follows on the channel at most"
    )
    nagging_window_interval: float = setting(
        0.0,
        ms=True,
        zero="off",
        unit="seconds",
        doc="the nagging monitor's window (0: off): retransmissions requested within it count",
    )
    nagging_check_interval: float = setting(
        0.0,
        ms=True,
        zero="off",
        unit="seconds",
        doc="how often the nagging monitor checks the window (0: off)",
    )
    nagging_max_retransmissions: int = setting(
        0,
        low=0,
        unit="datagrams, 0 = off",
        doc="more retransmissions requested within the window flag the channel as nagging (0: off)",
    )
    secret_file: str | os.PathLike[str] | None = path_setting(
        row=_secret_file,
        doc="a file holding the channel's secret: every datagram carries a MAC keyed from it",
    )
