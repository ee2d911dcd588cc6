"""Links over IPv6 loopback (``::1``): feeds and request/reply across a link, the
bracketed ``[host]:port`` form in names and addresses, and the address filter
with IPv6 entries and with IPv4 peers of a dual-stack service (``::``), whose
addresses arrive IPv4-mapped (``::ffff:127.0.0.1``) and are matched as IPv4."""

from __future__ import annotations

import pytest
from nodes.messages import Answer, Ask, Counter
from nodes.support import buses, started, wait_for

from actorbus import FeedState
from actorbus.config import ServiceSettings
from actorbus.errors import LinkClosedError
from actorbus.testing import Recorder

UP = FeedState.UP


def test_feeds_and_requests_cross_a_link_over_ipv6_loopback() -> None:
    with buses("A", "B") as (a, b):
        service = a.listen(0, "::1")
        assert service.address == f"[::1]:{service.port}"
        link = b.connect("::1", service.port)
        assert link.wait_logged_on(5) == "A"
        assert link.name == f"[::1]:{service.port}"
        wait_for(lambda: any(x.is_logged_on for x in service.links), "A's side logs on")
        (accepted,) = service.links
        assert accepted.address.startswith("[::1]:")

        pub, rep, sub = Recorder("pub"), Recorder("rep"), Recorder("sub")
        started(a, pub, rep)
        started(b, sub)
        rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q * 2)
        rep.replier(Ask, "/q")
        p = pub.publisher(Counter, "/v6", up=False)
        s = sub.subscribe(Counter, "/v6")
        pub.log.wait_for(lambda ev: pub.states("publish_status") == [UP])
        p.update_feed_state(UP)
        sub.log.wait_for(lambda ev: sub.states() == [UP])
        p.publish(Counter("/v6", n=6))
        got = sub.log.wait_count("message", 1)
        assert [e[1].n for e in got if e[0] == "message"] == [6]

        f = sub.requestor(Ask, "/q")
        sub.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        f.request(Ask("/q", q=21))
        replies = [e for e in sub.log.wait_count("reply", 1) if e[0] == "reply"]
        assert [(r[1], r[2].value) for r in replies] == [(0, 42)]
        s.close()
        p.close()


def test_address_filter_with_ipv6_entries() -> None:
    with buses("A", "B", "C") as (a, b, c):
        service = a.listen(0, "::1", settings=ServiceSettings(address_filter=["::1"]))
        good = b.connect("::1", service.port)
        assert good.wait_logged_on(5) == "A"
        narrow = a.listen(
            0, "::1", settings=ServiceSettings(address_filter=["[::1]:1"])
        )  # no client uses port 1
        bad = c.connect("::1", narrow.port)
        with pytest.raises(LinkClosedError):
            bad.wait_logged_on(5)
        assert (service.counters.accepted, service.counters.refused) == (1, 0)
        assert (narrow.counters.accepted, narrow.counters.refused) == (0, 1)


def test_dual_stack_service_matches_ipv4_peers_by_their_ipv4_address() -> None:
    secret = b"s" * 32  # "::" is beyond loopback: the service needs a secret
    with buses("A", "B", "C") as (a, b, c):
        service = a.listen(
            0, "::", secret=secret, settings=ServiceSettings(address_filter=["127.0.0.1"])
        )
        good = b.connect("127.0.0.1", service.port, secret=secret)  # as ::ffff:127.0.0.1
        assert good.wait_logged_on(5) == "A"
        bad = c.connect("::1", service.port, secret=secret)
        with pytest.raises(LinkClosedError):
            bad.wait_logged_on(5)
        counters = service.counters
        assert (counters.accepted, counters.refused, counters.open_links) == (1, 1, 1)
