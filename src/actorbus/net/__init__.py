"""Remote links between nodes.

:mod:`actorbus.net.protocol` is the sans-IO link protocol: every wire rule, no
sockets, no ``await``, no clock (its events are importable from there).  The
asyncio shell that carries it over TCP is :class:`Link` (:mod:`actorbus.net.link`),
on the node's I/O threads (the *selectors* of the configuration, counted by
:class:`IOThreadStats`), with :class:`Service` listening for links.  :func:`tls_server_context` and
:func:`tls_client_context` build the TLS contexts of ``Bus.listen(tls=...)``
and ``Bus.connect(tls=...)`` from PEM files.

The protocol speaks the bus's own enums (``actorbus.Scope``, ``actorbus.FeedState``,
``actorbus.ReplyStatus``, ``actorbus.bus.party.Role``); this package has no
copies of them.
"""

from actorbus.net._io_thread import IOThreadStats
from actorbus.net._link_stats import LinkStats
from actorbus.net._tls import tls_client_context, tls_server_context
from actorbus.net.link import Link, LinkSettings, LinkStatus
from actorbus.net.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    PROTOCOL_VERSION,
    LinkProtocol,
    ProtocolSettings,
    ProtocolState,
    Side,
    WireCounters,
)
from actorbus.net.service import Service, ServiceStats

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "IOThreadStats",
    "Link",
    "LinkProtocol",
    "LinkSettings",
    "LinkStats",
    "LinkStatus",
    "ProtocolSettings",
    "ProtocolState",
    "Service",
    "ServiceStats",
    "Side",
    "WireCounters",
    "tls_client_context",
    "tls_server_context",
]
