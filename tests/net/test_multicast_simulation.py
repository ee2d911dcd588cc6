"""The channel protocol on a simulated multicast segment (tests/net/multicast_sim.py):
NAK storms (50 receivers missing the same datagram), and hypothesis properties —
any permutation, duplication and loss of a stream's datagrams within the cache's
limits delivers every message exactly once, in order per publisher; loss past
the cache is reported exactly."""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multicast_sim import SimNet

from actorbus.config.settings import MulticastSettings
from actorbus.net.multicast import datagram as dg
from actorbus.net.multicast.channel import ChannelProtocol
from actorbus.net.multicast.receiver import Delivered, Gone, LostRange

S = MulticastSettings()


def payloads(events: Sequence[object], stream: int) -> list[bytes]:
    return [e.payload for e in events if isinstance(e, Delivered) and e.stream == stream]


def lost_seq(seq: int) -> object:
    """A drop rule: the first transmission of datagram ``seq`` from node 0 is lost everywhere."""

    def drop(src: int, dst: int, d: dg.Decoded) -> bool:
        return src == 0 and isinstance(d, dg.Data) and d.seq == seq and not d.retransmit

    return drop


def _fifty_lose_one(net: SimNet) -> SimNet:
    """A publisher and 50 receivers on ``net``; 100 messages sent, the 50th
    lost on its way to every receiver; the network run 1 s past the last."""
    net.add("pub")
    for i in range(50):
        net.add(f"r{i}", publish=False)
    net.drop = lost_seq(50)  # type: ignore[assignment]
    net.run(0.01)  # the announcement: everyone joins
    for i in range(100):
        net.send(0, b"m%d" % i)
        net.run(0.001)
    net.run(1.0)
    return net


def test_fifty_receivers_losing_the_same_datagram_send_few_naks_and_get_one_repair() -> None:
    """One-way latencies of 0.1-1 ms (a LAN) with the default NAK delay, and
    of 1-5 ms with a NAK delay of 20 times the latency (docs/multicast.md)."""
    budgets = []
    networks = [
        (S, (0.0002, 0.001)),
        (S, (0.0001, 0.0003)),
        (MulticastSettings(nak_delay=0.1), (0.001, 0.005)),
    ]
    for seed in range(12):
        settings_, latency = networks[seed % 3]
        net = _fifty_lose_one(SimNet(settings_, seed=seed, latency=latency))
        pub = net.nodes[0].publisher
        assert pub is not None
        naks, repairs = pub.counters["naks_received"], pub.counters["retransmitted"]
        budgets.append((naks, repairs))
        assert naks <= 3, f"seed {seed}: {naks} NAKs reached the publisher"
        assert repairs <= 2, f"seed {seed}: {repairs} retransmissions"
        for index in range(1, 51):
            assert payloads(net.events[index], 1) == [b"m%d" % i for i in range(100)]
    print(f"50 receivers, one loss: (NAKs, retransmissions) per run: {budgets}")


def test_without_the_random_delay_every_receiver_asks_and_the_holdoff_still_bounds_repairs() -> (
    None
):
    """The budget above is the random delay's and suppression's work: with a
    NAK delay shorter than the network's latency, no receiver can hear another's
    NAK or the repair before its own goes."""
    net = _fifty_lose_one(SimNet(MulticastSettings(nak_delay=0.0001), seed=1))
    pub = net.nodes[0].publisher
    assert pub is not None
    assert pub.counters["naks_received"] >= 20  # only the nearest hear the repair first
    assert pub.counters["retransmitted"] <= 2  # the holdoff still bounds the repairs


def test_loss_outlasting_the_cache_is_reported_exactly_and_delivery_resumes() -> None:
    small = MulticastSettings(cache_bytes=10 * 100)
    net = SimNet(small, seed=4)
    net.add("pub")
    net.add("sub", publish=False)
    outage = range(20, 45)  # 25 datagrams lost at the receiver; the cache holds 10

    def drop(src: int, dst: int, d: dg.Decoded) -> bool:
        return dst == 1 and isinstance(d, dg.Data) and d.seq in outage and not d.retransmit

    net.drop = drop
    net.run(0.01)
    for i in range(60):
        net.send(0, bytes([i]) * 100)
    net.run(1.0)
    lost = [e for e in net.events[1] if isinstance(e, LostRange)]
    got = payloads(net.events[1], 1)
    assert lost == [LostRange(1, 20, 25)] or sum(e.length for e in lost) == 25
    # every message not reported lost arrived, once, in order
    kept = [bytes([i]) * 100 for i in range(60) if i not in outage]
    assert got == kept
    # the report is exact: the lost ranges are the outage, nothing more
    reported = {s for e in lost for s in range(e.first, e.first + e.length)}
    assert reported == set(outage)


def test_a_publisher_gone_quiet_is_gone_at_every_receiver() -> None:
    net = SimNet(S, seed=2)
    net.add("pub")
    for i in range(3):
        net.add(f"r{i}", publish=False)
    net.run(0.5)
    net.nodes[0] = ChannelProtocol(S, name="dead", stream=99, key=None, now=net.now, publish=False)
    net.run(S.publisher_timeout + 0.5)
    for index in range(1, 4):
        assert [e for e in net.events[index] if isinstance(e, Gone)] == [Gone(1, "pub", "timeout")]


# ---------------------------------------------------------------- properties

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=30),
    seed=st.integers(0, 2**32 - 1),
    loss=st.floats(0.0, 0.5),
    duplicate=st.floats(0.0, 0.3),
)
def test_any_permutation_duplication_and_loss_delivers_each_message_once_in_order(
    sizes: list[int], seed: int, loss: float, duplicate: float
) -> None:
    """The publisher's datagrams (first sends and repairs alike) reach the
    receiver shuffled, duplicated and lost at random; the cache holds
    everything.  Every message arrives exactly once, in order, none lost."""
    rng = random.Random(seed)
    p = ChannelProtocol(S, name="pub", stream=1, key=None, now=0.0, rng=random.Random(seed))
    r = ChannelProtocol(
        S, name="sub", stream=2, key=None, now=0.0, rng=random.Random(~seed), publish=False
    )
    p.tick(0.0)
    for raw in p.datagrams_to_send():  # the announcement arrives: r follows the stream
        r.receive(raw, 0.0)
    messages = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    for m in messages:
        p.send(m, 0.0)
    now = 0.0
    in_flight = p.datagrams_to_send()
    got: list[bytes] = []
    for _ in range(400):
        rng.shuffle(in_flight)
        for raw in in_flight:
            copies = 0 if rng.random() < loss else 1 + (rng.random() < duplicate)
            for _ in range(copies):
                r.receive(raw, now)
        while (e := r.next_event()) is not None:
            assert not isinstance(e, LostRange), e
            if isinstance(e, Delivered):
                got.append(e.payload)
        if len(got) == len(messages):
            break
        now += 0.05
        p.tick(now)
        r.tick(now)
        naks = r.datagrams_to_send()
        for raw in naks:
            p.receive(raw, now)
        in_flight = p.datagrams_to_send()
    assert got == messages


@PROPERTY
@given(
    count=st.integers(1, 40),
    cache=st.integers(0, 20),
    lost=st.sets(st.integers(0, 39)),
)
def test_whatever_the_cache_no_longer_holds_is_reported_exactly_once(
    count: int, cache: int, lost: set[int]
) -> None:
    """Single-datagram messages, some lost on first send, a cache of ``cache``
    of them: each message is delivered or reported lost, exactly once, in order."""
    s = MulticastSettings(cache_bytes=cache * 10)
    p = ChannelProtocol(s, name="pub", stream=1, key=None, now=0.0)
    r = ChannelProtocol(s, name="sub", stream=2, key=None, now=0.0, publish=False)
    p.tick(0.0)
    for raw in p.datagrams_to_send():
        r.receive(raw, 0.0)
    for i in range(count):
        p.send(bytes([i]) * 10, 0.0)
    for i, raw in enumerate(p.datagrams_to_send()):
        if i not in lost:
            r.receive(raw, 0.0)
    now = 0.0
    outcome: dict[int, str] = {}
    for _ in range(50):
        now += 0.2
        p.tick(now)
        r.tick(now)
        for raw in r.datagrams_to_send():
            p.receive(raw, now)
        for raw in p.datagrams_to_send():
            r.receive(raw, now)
        while (e := r.next_event()) is not None:
            if isinstance(e, Delivered):
                assert e.payload[0] not in outcome
                outcome[e.payload[0]] = "delivered"
            elif isinstance(e, LostRange):
                for seq in range(e.first, e.first + e.length):
                    assert seq not in outcome
                    outcome[seq] = "lost"
        if len(outcome) == count:
            break
    assert sorted(outcome) == list(range(count))
    first_kept = count - cache  # what the cache holds at the end
    for i in range(count):
        want = "lost" if i in lost and i < first_kept else "delivered"
        assert outcome[i] == want, (i, outcome)
