"""J.REP over WebSocket: the gateway that lets browsers (and any WebSocket
program) join the bus, behind the same seam as TCP links (docs/jrep.md).

``bus.serve_jrep(port, ...)`` (or ``actorbus.jrep.gateway.NAME.*`` keys) opens a
:class:`Gateway`; each WebSocket session is one remote party of the bus.
``bus.connect_jrep(url, ...)`` makes a :class:`JrepClient`: this node federated
with another node's gateway.
"""

from actorbus.net.jrep._settings import GatewaySettings, GatewayStats
from actorbus.net.jrep.client import JrepClient, JrepClientStats
from actorbus.net.jrep.gateway import Gateway

__all__ = ["Gateway", "GatewaySettings", "GatewayStats", "JrepClient", "JrepClientStats"]
