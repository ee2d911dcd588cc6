"""A forwarder passes feed notifications on undecoded (docs/routing.md,
"Pass-through"), over real loopback links: A publishes, B forwards, C
subscribes.

While only C's link needs them, B sends on the bodies it received (counted in
``passed_through``) and C still decodes every message, in order, from A.  Once
a subscriber on B itself wants them, B decodes them for it (the ordinary path)
and still forwards them to C; when it leaves, pass-through resumes.  A body
that does not decode is not B's concern then: C, which decodes it, closes its
link to B, and B keeps serving the publisher's link.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nodes.messages import Counter
from nodes.support import RawPeer, buses, started, wait_for

from actorbus import Bus, FeedState, Scope
from actorbus.bus.router import Role
from actorbus.config import ServiceSettings
from actorbus.net.protocol import Subscribed
from actorbus.testing import Recorder

N = 2_000
COUNTER = ("linktest.Counter", "/c")


@pytest.fixture
def chain() -> Iterator[tuple[Bus, Bus, Bus, Recorder, Recorder]]:
    with buses("A", "B", "C") as (a, b, c):
        pub, sub = Recorder("pub"), Recorder("sub")
        started(a, pub)
        started(c, sub)
        to_b = b.listen(0, settings=ServiceSettings(forward=True))
        a.connect("127.0.0.1", to_b.port).wait_logged_on(5)
        from_b = b.listen(0, settings=ServiceSettings(forward=True))
        c.connect("127.0.0.1", from_b.port).wait_logged_on(5)
        yield a, b, c, pub, sub


def _values(recorder: Recorder, n: int) -> list[int]:
    recorder.log.wait_count("message", n, timeout=20)
    return [e[1].n for e in recorder.log.of("message")]


def _passed(bus: Bus) -> int:
    return sum(link.counters.passed_through for link in bus.links)


def _forwarded(bus: Bus) -> int:
    return sum(link.counters.forwarded for link in bus.links)


def test_forwarded_notifications_pass_through_and_a_local_subscriber_gets_them_decoded(
    chain: tuple[Bus, Bus, Bus, Recorder, Recorder],
) -> None:
    a, b, c, pub, sub = chain
    s = sub.subscribe(Counter, "/pass")
    p = pub.publisher(Counter, "/pass", up=True)
    wait_for(p.is_feed_up, "A's publisher sees C's subscriber through B")
    payload = b"x" * 40
    for i in range(N):
        p.publish(Counter("/pass", n=i, payload=payload))
    assert _values(sub, N) == list(range(N))
    got = [e[1] for e in sub.log.of("message")]
    assert all(type(m) is Counter and m.payload == payload for m in got)
    assert (s.sender.node, s.sender.actor, s.sender.hops) == ("A", "pub", 2)
    # every one passed B once, and (bar the first of the key, which B decodes to
    # learn the key's class) without B decoding it
    wait_for(lambda: _forwarded(b) == N, "B counts the notifications it forwarded")
    passed = _passed(b)
    assert N - 1 <= passed <= N, passed

    # a subscriber on B: B decodes for it, and still forwards to C
    local = Recorder("local")
    started(b, local)
    mine_feed = local.subscribe(Counter, "/pass")
    wait_for(lambda: b.router.feeds(s.key)["subscribers"] == 2, "B's subscriber is matched")
    for i in range(N, 2 * N):
        p.publish(Counter("/pass", n=i, payload=payload))
    assert _values(local, N) == list(range(N, 2 * N))
    mine = [e[1] for e in local.log.of("message")]
    assert all(type(m) is Counter and m.payload == payload for m in mine)
    assert _values(sub, 2 * N) == list(range(2 * N))
    assert _passed(b) == passed  # none of these went undecoded

    # it leaves: pass-through again
    mine_feed.close()
    wait_for(lambda: b.router.feeds(s.key)["subscribers"] == 1, "B's subscriber is gone")
    for i in range(2 * N, 3 * N):
        p.publish(Counter("/pass", n=i, payload=payload))
    assert _values(sub, 3 * N) == list(range(3 * N))
    wait_for(lambda: _passed(b) == passed + N, "B passes them through again")
    assert _forwarded(b) == 3 * N


def test_a_body_that_does_not_decode_is_caught_by_the_node_that_decodes_it() -> None:
    """A raw peer X publishes through forwarder B to a subscriber on C, then
    sends a body that is msgpack but not a Counter: B passes it on undecoded
    (its link to X stays up), C cannot decode it and closes its link to B."""
    with buses("B", "C") as (b, c):
        into_b = b.listen(0, settings=ServiceSettings(forward=True))
        out_of_b = b.listen(0, settings=ServiceSettings(forward=True))
        link_c = c.connect("127.0.0.1", out_of_b.port)
        link_c.wait_logged_on(5)
        inbox = c.inbox(Counter, "/c")
        with RawPeer.connect(into_b.port, "X") as raw:
            raw.logon()
            raw.proto.advertise(COUNTER, Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
            raw.send()
            raw.expect(Subscribed)  # C's inbox, through B
            assert inbox.wait_up(5)
            raw.proto.notify(COUNTER, ("/c", 1, 0, b""))  # decoded at B: learns the key
            raw.send()
            first = inbox.receive(5)
            assert first is not None and first.n == 0
            raw.proto.notify(COUNTER, ("/c", "not a timestamp", "not an int"))
            for n in range(1, 6):
                raw.proto.notify(COUNTER, ("/c", 1, n, b""))
            raw.send()
            wait_for(lambda: link_c.counters.corrupt_frames == 1, "C finds the bad body")
            wait_for(lambda: out_of_b.counters.open_links == 0, "C's link to B closes")
            # B passed the run on undecoded, and still serves X
            assert into_b.counters.links.corrupt_frames == 0
            assert into_b.counters.links.passed_through == 6
            assert into_b.counters.open_links == 1
