"""An actor's feeds find their bus through the actor (FeedOwner's interface):
registered, through its runtime; not yet registered, with the single open bus,
and a clear error when there is none (or several, or a runtime without a bus)."""

from __future__ import annotations

import pytest

from actorbus import Actor, ActorRuntime, Bus, Notification
from actorbus.errors import RegistrationError


class Ping(Notification):
    n: int


def test_an_unregistered_actor_opening_a_feed_joins_the_single_open_bus() -> None:
    with Bus() as bus:
        assert Bus.current() is bus
        actor = Actor("early")
        feed = actor.actor_context.open_publish_feed(Ping, "/early")
        assert actor.actor_context.is_registered and actor.actor_context.runtime is bus.runtime
        assert not actor.is_started  # registered, not started
        feed.close()
    assert Bus.current() is None


def test_with_no_open_bus_opening_a_feed_says_to_register_first() -> None:
    assert Bus.current() is None
    with pytest.raises(RegistrationError, match="no single open Bus exists"):
        Actor("lonely").actor_context.open_publish_feed(Ping, "/lonely")


def test_with_two_open_buses_neither_is_guessed() -> None:
    with Bus() as first, Bus() as second:
        assert Bus.current() is None
        with pytest.raises(RegistrationError, match="no single open Bus exists"):
            Actor("torn").actor_context.open_subscribe_feed(Ping, "/torn")
        second.close()
        assert Bus.current() is first  # a closed bus no longer counts


def test_an_actor_of_a_runtime_without_a_bus_cannot_open_feeds() -> None:
    with ActorRuntime() as runtime:
        actor = Actor("standalone")
        runtime.register(actor)
        with pytest.raises(RegistrationError, match="serves no bus"):
            actor.actor_context.open_publish_feed(Ping, "/standalone")
        runtime.unregister(actor)
