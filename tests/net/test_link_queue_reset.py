"""A link reset by its output queue limit comes back: the paused peer, which
reads nothing (input back-pressure) and so is not told of the reset, neither
keeps the old link nor refuses the new logon."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from nodes.messages import Counter
from nodes.support import buses, wait_for

from actorbus import Actor
from actorbus.bus.system import SYSTEM_SUBJECT, LinkLoggedOff
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.net import _inbound
from actorbus.testing import wait_until


class _Held(Actor):
    """A subscriber that takes nothing until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__(name="held")
        self.gate = threading.Event()
        self.taken = 0

    def startup(self) -> None:
        self.subscribe(Counter, "/reset", on_message=self._take)

    def _take(self, message: Counter, feed: object) -> None:
        self.gate.wait(30)
        self.taken += 1


@pytest.mark.parametrize("noticed", ["by the paused side", "at the new logon"])
def test_a_queue_limit_reset_lets_the_pair_link_again(
    noticed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = "reset the connection while this node was not reading"
    if noticed == "at the new logon":
        reason = "logged on again while this link was not reading"
        # the paused side looks at its backlog (and its socket) only every 30 s:
        # the publisher's new logon is what finds the old link gone
        monkeypatch.setattr(_inbound.Inbound, "_recheck_delay", 30.0, raising=False)
        original = _inbound.Inbound._check_backlog

        def slow_recheck(self: Any) -> None:
            self._recheck_delay = 30.0
            original(self)

        monkeypatch.setattr(_inbound.Inbound, "_check_backlog", slow_recheck)
    with buses("S", "P") as (s, p):
        held = _Held()
        s.register(held)
        s.startup([held]).wait(5)
        ended = s.inbox(LinkLoggedOff, SYSTEM_SUBJECT)
        service = s.listen(0, settings=ServiceSettings(input_backlog=100))
        link = p.connect(
            "127.0.0.1",
            service.port,
            settings=ConnectionSettings(
                reconnect=True, reconnect_delay=0.2, message_queue_bytes=1_000_000
            ),
        )
        link.wait_logged_on(5)
        feed = p.publisher(Counter, "/reset")
        published = sent = 0  # (published: messages a subscriber took)
        try:
            wait_for(feed.is_feed_up, "the publisher sees the held subscriber")
            payload = b"x" * 1_000
            while link.counters.over_limit == 0 and sent < 200_000:
                published += feed.publish(Counter("/reset", n=sent, payload=payload))
                sent += 1
            assert link.counters.over_limit == 1, link.counters
            # the publisher dials again and logs on: nobody refuses it
            wait_for(lambda: link.counters.logons == 2, "the publisher logs on again")
            wait_for(
                lambda: service.counters.links.logons == 2 and service.counters.open_links == 1,
                "the held side takes the new link in place of the reset one",
            )
            gone = ended.receive(5)
            assert gone is not None and reason in gone.reason, gone
            held.gate.set()

            # every message is delivered, dropped (waiting at the reset) or lost
            # (written to the reset connection, learnt at the new logon)
            def accounted() -> bool:
                ours = link.counters
                return held.taken + ours.dropped + ours.lost == published

            c = link.counters
            assert wait_until(accounted, 10), (
                f"taken {held.taken} dropped {c.dropped} lost {c.lost} written {c.messages_out} "
                f"published {published}; held side read {service.counters.links.messages_in}"
            )
            ours = link.counters
            assert ours.dropped > 0 and ours.lost > 0
        finally:
            held.gate.set()
            feed.close()
        assert link.counters.refused_logons == 0
        assert service.counters.links.refused_logons == 0
