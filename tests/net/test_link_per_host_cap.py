"""The connection cap per source address counts only connections that have
not logged on: authenticated peers on an address never count against it, so
neither they nor a stranger on their address can lock the others out by
holding logged-on links, and the cap still bounds what strangers hold before
logon."""

from __future__ import annotations

import socket

from nodes.support import buses, wait_for

from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.testing import wait_until

CAP = 2


def test_logged_on_links_do_not_count_against_the_cap_per_address() -> None:
    with buses("hub", "n0", "n1", "n2", "n3", "n4") as (hub, *nodes):
        service = hub.listen(0, settings=ServiceSettings(max_connections_per_host=CAP))
        # five nodes from one address, one after the other: more than the cap,
        # all logged on (before, the third was closed at once)
        links = []
        for i, node in enumerate(nodes):
            links.append(node.connect("127.0.0.1", service.port))
            assert links[-1].wait_logged_on(5) == "hub", node.node_id
            wait_for(
                lambda: sum(x.is_logged_on for x in service.links) == i + 1,
                f"the hub logs on with {node.node_id}",
            )
        assert service.counters.over_limit == 0
        # a stranger on the same address fills the cap with connections that
        # never log on: they are admitted (the five do not count) ...
        held = []
        try:
            for _ in range(CAP + 1):
                sock = socket.create_connection(("127.0.0.1", service.port), timeout=5)
                held.append(sock)
            # ... up to the cap; one more is closed at once
            assert wait_until(lambda: service.counters.over_limit == 1, 5), service.counters
            assert service.counters.accepted == 5 + CAP
            # and the logged-on links are untouched
            assert all(link.is_logged_on for link in links)
            assert len(service.links) == 5 + CAP
        finally:
            for sock in held:
                sock.close()
        # the stranger gone, its connections no longer count: a sixth node links
        wait_for(lambda: len(service.links) == 5, "the stranger's connections are closed")
        with buses("n5") as (late,):
            link = late.connect("127.0.0.1", service.port, settings=ConnectionSettings())
            assert link.wait_logged_on(5) == "hub"
        assert service.counters.over_limit == 1
