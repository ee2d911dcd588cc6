"""Multicast channels between buses in one process, over real UDP sockets on
the loopback interface with TTL 0 (nothing leaves the host; a random group and
port per test keep parallel runs apart): notifications sent once reach every
subscribing node through normal feeds and callbacks, feed state UP and DOWN
over the channel, the secret's MAC, the properties keys."""

from __future__ import annotations

import dataclasses
import random
import socket
from pathlib import Path

import pytest
from nodes.messages import Counter
from nodes.support import buses, started

from actorbus import ConfigError, FeedState, UsageError, Wildcard
from actorbus.config import load_config
from actorbus.config.settings import MulticastSettings
from actorbus.testing import Recorder, wait_until

UP, DOWN = FeedState.UP, FeedState.DOWN


def channel_settings(**changes: object) -> MulticastSettings:
    rng = random.SystemRandom()
    return dataclasses.replace(
        MulticastSettings(
            group=f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}",
            port=rng.randrange(20_000, 60_000),
            interface="127.0.0.1",
            ttl=0,
            subjects=("/mc/...",),
        ),
        **changes,  # type: ignore[arg-type]
    )


def test_notifications_are_sent_once_and_reach_every_subscribing_node_with_feed_state() -> None:
    settings = channel_settings()
    with buses("pub", "sub1", "sub2") as (pub_bus, *subs):
        channels = [bus.join_multicast("prices", settings) for bus in (pub_bus, *subs)]
        recorders = [Recorder(f"r{i}") for i in range(2)]
        for bus, recorder in zip(subs, recorders, strict=True):
            started(bus, recorder)
            recorder.subscribe(Counter, "/mc/a")
        publisher = pub_bus.publisher(Counter, "/mc/a")
        off_channel = pub_bus.publisher(Counter, "/elsewhere")
        for recorder in recorders:
            recorder.log.wait_for(lambda ev, r=recorder: r.states() == [UP])  # type: ignore[misc]
        for n in range(200):
            publisher.publish(Counter("/mc/a", n=n))
            off_channel.publish(Counter("/elsewhere", n=n))
        for recorder in recorders:
            got = recorder.log.wait_count("message", 200)
            assert [e[1].n for e in got if e[0] == "message"] == list(range(200))
        # publish status on a channel: one subscriber, the channel, however many receive
        assert publisher.publish(Counter("/mc/a", n=200)) == 1
        stats = channels[0].stats()
        assert stats["notifications_sent"] == 201  # once each, for two receiving nodes
        # runs of notifications: at most one reliable message each
        assert stats["pub_messages_sent"] - stats["state_records_sent"] <= 201
        publisher.update_feed_state(DOWN)
        for recorder in recorders:
            recorder.log.wait_for(lambda ev, r=recorder: r.states() == [UP, DOWN])  # type: ignore[misc]
        publisher.update_feed_state(UP)
        for recorder in recorders:
            recorder.log.wait_for(lambda ev, r=recorder: r.states() == [UP, DOWN, UP])  # type: ignore[misc]
        channels[0].close()  # a BYE: DOWN at once, no timeout
        for recorder in recorders:
            recorder.log.wait_for(lambda ev, r=recorder: r.states()[-1:] == [DOWN], timeout=2)  # type: ignore[misc]
        for channel in channels[1:]:
            assert channel.stats()["refused_mac"] == 0
        assert off_channel.publish(Counter("/elsewhere", n=0)) == 0  # not on the channel


def test_a_channel_with_a_secret_refuses_datagrams_without_its_mac() -> None:
    settings = channel_settings()
    secret = b"0123456789abcdef0123"
    with buses("pub", "friend", "stranger") as (pub_bus, friend_bus, stranger_bus):
        pub_bus.join_multicast("c", settings, secret=secret)
        friend_bus.join_multicast("c", settings, secret=secret)
        stranger = stranger_bus.join_multicast("c", settings)
        friend, other = Recorder("friend"), Recorder("stranger")
        started(friend_bus, friend)
        started(stranger_bus, other)
        friend.subscribe(Counter, "/mc/s")
        other.subscribe(Counter, "/mc/s")
        publisher = pub_bus.publisher(Counter, "/mc/s")
        friend.log.wait_for(lambda ev: friend.states() == [UP])
        publisher.publish(Counter("/mc/s", n=1))
        friend.log.wait_count("message", 1)
        stats = stranger.stats()
        assert stats["refused_mac"] >= 2  # the announcement and the data, at least
        assert other.log.of("message") == [] and other.states() == []


def test_a_secret_file_keys_the_channel_as_the_same_secret_given_in_code(tmp_path: Path) -> None:
    secret = b"0123456789abcdef0123"
    path = tmp_path / "channel.secret"
    path.write_bytes(secret + b"\n")
    path.chmod(0o600)
    settings = channel_settings()
    with buses("pub", "friend") as (pub_bus, friend_bus):
        with pytest.raises(ConfigError) as refused:
            pub_bus.join_multicast(
                "c", dataclasses.replace(settings, secret_file=path), secret=secret
            )
        assert "secret= and secret_file= both given" in str(refused.value)
        assert "join_multicast(settings=MulticastSettings(secret_file=...))" in str(refused.value)
        assert pub_bus.net.multicasts == ()  # nothing joined
        pub_bus.join_multicast("c", dataclasses.replace(settings, secret_file=path))
        friend = friend_bus.join_multicast("c", settings, secret=secret)
        recorder = Recorder("friend")
        started(friend_bus, recorder)
        recorder.subscribe(Counter, "/mc/f")
        publisher = pub_bus.publisher(Counter, "/mc/f")
        recorder.log.wait_for(lambda ev: recorder.states() == [UP])
        publisher.publish(Counter("/mc/f", n=7))
        got = recorder.log.wait_count("message", 1)
        assert [e[1].n for e in got if e[0] == "message"] == [7]
        assert friend.stats()["refused_mac"] == 0


def test_the_properties_keys_open_a_channel_at_start(tmp_path: Path) -> None:
    s = channel_settings()
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.multicasts=feed\n"
        f"actorbus.multicast.feed.group={s.group}\n"
        f"actorbus.multicast.feed.port={s.port}\n"
        "actorbus.multicast.feed.interface=127.0.0.1\n"
        "actorbus.multicast.feed.ttl=0\n"
        "actorbus.multicast.feed.subjects=/mc/...\n"
        "actorbus.multicast.feed.heartbeatInterval=50\n"
    )
    config = load_config(path)
    assert config.multicasts[0].settings == dataclasses.replace(s, heartbeat_interval=0.05)
    with buses("a", config=config) as (a,), buses("b") as (b,):
        assert [c.name for c in a.net.multicasts] == ["feed"]
        b.join_multicast("feed", s)
        recorder = Recorder("r")
        started(b, recorder)
        recorder.subscribe(Counter, "/mc/x")
        a.publisher(Counter, "/mc/x").publish(Counter("/mc/x", n=0))
        recorder.log.wait_for(lambda ev: recorder.states() == [UP])


def test_an_interface_that_is_not_an_ipv4_address_is_refused_with_the_fix() -> None:
    with buses("a") as (a,):
        with pytest.raises(UsageError, match="IPv4 address of a local interface"):
            a.join_multicast("c", channel_settings(interface="eth0"))
        assert a.net.multicasts == ()


def test_a_node_does_not_read_its_own_datagrams_back() -> None:
    """Multicast loops every datagram back to every socket on the host, the
    sender's own included; the channel's socket filter drops this node's stream
    before its socket queues it (Linux), while another node's datagrams, and
    datagrams too short to carry a stream, still reach it."""
    settings = channel_settings()
    with buses("pub", "sub") as (pub_bus, sub_bus):
        pub_channel = pub_bus.join_multicast("c", settings)
        sub_channel = sub_bus.join_multicast("c", settings)
        recorder = Recorder("r")
        started(sub_bus, recorder)
        recorder.subscribe(Counter, "/mc/own")
        publisher = pub_bus.publisher(Counter, "/mc/own")
        recorder.log.wait_for(lambda ev: recorder.states() == [UP])
        for n in range(300):
            publisher.publish(Counter("/mc/own", n=n, payload=bytes(40)))
        got = recorder.log.wait_count("message", 300)
        assert [e[1].n for e in got if e[0] == "message"] == list(range(300))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            raw.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            raw.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            raw.sendto(b"AB", (settings.group, settings.port))  # truncated: counted, not filtered
        # (a counter, no event to wait on)
        assert wait_until(lambda: pub_channel.stats()["refused_truncated"] == 1, 10)
        pub = pub_channel.stats()
        assert pub["pub_datagrams_sent"] > 10  # the data, announcements, heartbeats
        assert pub["own"] == 0  # none of them read back
        assert pub["refused_truncated"] == 1
        assert sub_channel.stats()["received"] >= 10


def test_a_notification_over_max_message_size_is_dropped_counted_and_the_rest_goes_on() -> None:
    settings = channel_settings(max_message_size=300)
    with buses("pub", "sub") as (pub_bus, sub_bus):
        channel = pub_bus.join_multicast("c", settings)
        sub_bus.join_multicast("c", settings)
        recorder = Recorder("r")
        started(sub_bus, recorder)
        recorder.subscribe(Counter, "/mc/big")
        publisher = pub_bus.publisher(Counter, "/mc/big")
        recorder.log.wait_for(lambda ev: recorder.states() == [UP])
        publisher.publish(Counter("/mc/big", n=1, payload=bytes(1000)))
        publisher.publish(Counter("/mc/big", n=2, payload=bytes(100)))
        got = recorder.log.wait_count("message", 1)
        assert [e[1].n for e in got if e[0] == "message"] == [2]
        assert channel.stats()["too_large"] == 1


def test_a_pattern_subscriber_receives_from_a_channel_like_from_a_link() -> None:
    settings = channel_settings()
    with buses("pub", "sub") as (pub_bus, sub_bus):
        pub_bus.join_multicast("c", settings)
        sub_bus.join_multicast("c", settings)
        recorder = Recorder("r")
        started(sub_bus, recorder)
        recorder.subscribe(Counter, Wildcard.levels("/mc/*"))
        publishers = Recorder("p")
        started(pub_bus, publishers)
        feeds = [publishers.publisher(Counter, f"/mc/{name}", up=True) for name in ("a", "b")]
        # each feed's publish status UP: the channel carries it (a pattern's
        # own status says only that one feed matching it is UP)
        publishers.log.wait_for(lambda ev: publishers.states("publish_status") == [UP, UP])
        recorder.log.wait_for(lambda ev: recorder.states() == [UP])
        for n in range(10):
            for feed in feeds:
                feed.publish(Counter(feed.key.subject, n=n))
        got = recorder.log.wait_count("message", 20)
        messages = [e[1] for e in got if e[0] == "message"]
        for subject in ("/mc/a", "/mc/b"):
            assert [m.n for m in messages if m.subject == subject] == list(range(10))


def test_what_was_published_before_close_is_sent_before_the_bye() -> None:
    settings = channel_settings()
    with buses("pub", "sub") as (pub_bus, sub_bus):
        channel = pub_bus.join_multicast("c", settings)
        sub_bus.join_multicast("c", settings)
        recorder = Recorder("r")
        started(sub_bus, recorder)
        recorder.subscribe(Counter, "/mc/last")
        publisher = pub_bus.publisher(Counter, "/mc/last")
        recorder.log.wait_for(lambda ev: recorder.states() == [UP])
        for n in range(500):
            publisher.publish(Counter("/mc/last", n=n))
        channel.close()
        got = recorder.log.wait_for(lambda ev: recorder.states() == [UP, DOWN])
        assert [e[1].n for e in got if e[0] == "message"] == list(range(500))


def test_a_late_receiver_learns_a_hundred_feeds_from_a_paged_announcement() -> None:
    settings = channel_settings(announce_interval=0.2)
    with buses("pub", "late") as (pub_bus, late_bus):
        channel = pub_bus.join_multicast("c", settings)
        feeds = [pub_bus.publisher(Counter, f"/mc/feed-{i:03d}") for i in range(100)]
        feeds[7].update_feed_state(DOWN)
        recorder = Recorder("r")
        started(late_bus, recorder)
        subs = [recorder.subscribe(Counter, f"/mc/feed-{i:03d}") for i in range(100)]
        late_bus.join_multicast("c", settings)  # after every feed was advertised
        recorder.log.wait_for(lambda ev: recorder.states().count(UP) == 99, timeout=10)
        assert subs[7].feed_state is DOWN
        # the state cannot fit one datagram: the announcement came in pages
        assert 100 * len(b"linktest.Counter/mc/feed-000") > settings.datagram_size
        assert channel.stats()["refused_segment"] == 0
        feeds[7].update_feed_state(UP)
        recorder.log.wait_for(lambda ev: recorder.states().count(UP) == 100, timeout=10)
