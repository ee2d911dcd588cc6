"""Actor's API is what an actor's own code uses; the plumbing is behind
``actor.actor_context``, and the names that moved there still work for one
release with a DeprecationWarning."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actorbus import Actor, Bus, FeedState, Notification, PublishFeed, Scope
from actorbus.actors import ActorContext

#: Actor's public names (FeedOwner's included): the user's API, then the
#: deprecated aliases of what moved to ``actor_context``.
API = {
    # lifecycle and identity
    "name",
    "startup",
    "shutdown",
    "on_failure",
    "is_started",
    # what inspection shows beyond the mailbox (an FSM actor overrides it)
    "inspect_machine",
    # tasks and timers
    "post",
    "schedule",
    "schedule_every",
    # the time, as a recording sees it (docs/replay.md)
    "now_ms",
    # feeds, short form
    "publisher",
    "subscribe",
    "requestor",
    "replier",
    # request/reply in one line
    "serve",
    "ask",
    "ask_all",
    "ask_blocking",
    # role callbacks a subclass overrides
    "on_publish_status",
    "on_congestion",
    "on_feed_status",
    "on_message",
    "on_request",
    "on_cancel",
    "on_reply",
    # the plumbing
    "actor_context",
}
MOVED = {
    "runtime",
    "dispatcher",
    "dispatcher_name",
    "is_registered",
    "open_publish_feed",
    "open_subscribe_feed",
    "open_request_feed",
    "open_reply_feed",
}


class Tick(Notification, type_name="test.actorapi.Tick"):
    n: int


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus(node_id="actor-api") as b:
        yield b


def test_actor_public_names_are_the_api_and_the_deprecated_aliases() -> None:
    assert {n for n in dir(Actor) if not n.startswith("_")} == API | MOVED


def test_actor_context_holds_the_plumbing(bus: Bus) -> None:
    actor = Actor("ctx")
    context = actor.actor_context
    assert isinstance(context, ActorContext)
    assert context is actor.actor_context
    assert not context.is_registered
    assert context.dispatcher_name is None
    bus.register(actor)
    assert context.is_registered
    assert context.runtime is bus.runtime
    assert context.dispatcher_name == context.dispatcher.name
    feed = context.open_publish_feed(Tick, "/api", Scope.LOCAL_ONLY)
    assert isinstance(feed, PublishFeed)
    feed.close()


@pytest.mark.parametrize("name", ["runtime", "dispatcher", "dispatcher_name", "is_registered"])
def test_a_moved_property_warns_and_still_answers(bus: Bus, name: str) -> None:
    actor = Actor("old-" + name)
    bus.register(actor)
    with pytest.warns(DeprecationWarning, match=f"Actor.{name} moved to Actor.actor_context"):
        value = getattr(actor, name)
    assert value == getattr(actor.actor_context, name)


@pytest.mark.parametrize("role", ["publish", "subscribe", "request", "reply"])
def test_a_moved_open_feed_warns_and_still_opens(bus: Bus, role: str) -> None:
    actor = Actor("old-open-" + role)
    bus.register(actor)
    cls: type = Tick
    if role in ("request", "reply"):
        from actorbus import Reply, Request

        class Ask(Request, replies=(Reply,), type_name=f"test.actorapi.Ask{role}"):
            pass

        cls = Ask
    name = f"open_{role}_feed"
    with pytest.warns(DeprecationWarning, match=f"actor_context.{name}"):
        feed = getattr(actor, name)(cls, "/old", Scope.LOCAL_ONLY)
    assert feed.key.subject == "/old"
    feed.close()


class Quiet(Actor):
    def on_publish_status(self, state: FeedState, feed: PublishFeed[Tick]) -> None:
        pass


def test_publisher_is_up_by_default_on_an_actor_as_on_a_bus(bus: Bus) -> None:
    actor = Quiet("pub-default")
    bus.register(actor)
    on_bus = bus.publisher(Tick, "/bus-default")
    explicit = actor.publisher(Tick, "/actor-up", up=True)
    down = actor.publisher(Tick, "/actor-down", up=False)
    with pytest.warns(
        DeprecationWarning, match=r"publisher\(Tick, '/actor-default'\) now declares"
    ):
        implicit = actor.publisher(Tick, "/actor-default")
    up = FeedState.UP
    assert on_bus.declared_state is explicit.declared_state is implicit.declared_state is up
    assert down.declared_state is FeedState.DOWN
    for feed in (on_bus, explicit, down, implicit):
        feed.close()
