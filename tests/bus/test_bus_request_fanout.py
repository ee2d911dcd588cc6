"""A request reaches every replier, even when one answers before the request has
been handed to the others (a replier without an actor answers on the
requesting thread; a fast remote one may answer from another thread)."""

from __future__ import annotations

from typing import Any

from actorbus import Bus, FeedState, MessageKey, Reply, ReplyStatus, Request, Scope
from actorbus.bus.feeds import ReplyFeed


class Said(Reply, type_name="t.fanout.Said"):
    who: str = ""


class Ask(Request, type_name="t.fanout.Ask", replies=(Said,)):
    pass


def _replier(bus: Bus, who: str) -> ReplyFeed[Any]:
    feed: ReplyFeed[Any] = ReplyFeed(bus.router, None, MessageKey(Ask, "/ask"), Scope.LOCAL_ONLY)
    feed.request_callback(lambda incoming: incoming.reply(Said("/ask", who=who)))
    feed.advertise()
    feed.update_feed_state(FeedState.UP)
    return feed


def test_every_replier_gets_the_request_when_each_answers_at_once() -> None:
    with Bus(node_id="fanout") as bus:
        feeds = [_replier(bus, f"replier {i}") for i in range(3)]
        replies = bus.request_all(Ask("/ask"), timeout=5.0, scope=Scope.LOCAL_ONLY)
        assert sorted(r.who for r in replies) == ["replier 0", "replier 1", "replier 2"]
        assert {r.status for r in replies} == {ReplyStatus.OK_FINAL}
        for feed in feeds:
            feed.close()
        assert bus.router.outstanding_requests == 0
