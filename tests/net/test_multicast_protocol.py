"""The sans-IO multicast channel, rule by rule, with a fake clock: the datagram
codec and its refusals, sequencing, segmentation and reassembly, gaps and NAK
ranges, the retransmit cache's eviction and LOST, heartbeats (tail loss,
publishers gone), announcements, suppression, the nagging monitor and the
MAC's replay window."""

from __future__ import annotations

import random
import struct

import pytest

from actorbus.config.settings import MulticastSettings
from actorbus.net.multicast import datagram as dg
from actorbus.net.multicast.channel import ChannelProtocol
from actorbus.net.multicast.publisher import PublisherProtocol
from actorbus.net.multicast.receiver import (
    Announced,
    Delivered,
    Gone,
    Joined,
    LostRange,
    Nagging,
    NaggingMonitor,
    ReceiverEvent,
    ReceiverProtocol,
)

S = MulticastSettings()
KEY = dg.channel_key(b"s3cret", S.group, S.port)


def publisher(settings: MulticastSettings = S, key: bytes | None = None) -> PublisherProtocol:
    return PublisherProtocol(settings, stream=7, name="pub", key=key, now=0.0)


def receiver(settings: MulticastSettings = S) -> ReceiverProtocol:
    return ReceiverProtocol(settings, own_stream=9, rng=random.Random(3), now=0.0)


def feed(r: ReceiverProtocol, datagrams: list[bytes], now: float = 0.0) -> None:
    """Hand decoded datagrams to the receiver half as the channel would."""
    for raw in datagrams:
        d = dg.decode(raw, None)
        handler = {
            dg.Data: r.on_data,
            dg.Heartbeat: r.on_heartbeat,
            dg.Lost: r.on_lost,
            dg.Announce: r.on_announce,
            dg.Bye: r.on_bye,
            dg.Nak: r.on_nak,
        }[type(d)]
        handler(d, now)  # type: ignore[operator]


def events(r: ReceiverProtocol) -> list[ReceiverEvent]:
    out = []
    while (e := r.next_event()) is not None:
        out.append(e)
    return out


def joined(p: PublisherProtocol, r: ReceiverProtocol, state: bytes = b"st") -> None:
    p.announce(state, 0.0)
    feed(r, p.datagrams_to_send())
    assert events(r) == [Joined(7, "pub"), Announced(7, "pub", state)]


def delivered(r: ReceiverProtocol) -> list[bytes]:
    return [e.payload for e in events(r) if isinstance(e, Delivered)]


# ---------------------------------------------------------------- the codec


def test_every_kind_round_trips() -> None:
    for key in (None, KEY):
        cases = [
            (dg.encode_data(5, 1, 10, 2, 3, b"xyz", key), dg.Data(5, 1, 10, 2, 3, b"xyz", False)),
            (
                dg.encode_data(5, 2, 10, 0, 1, b"", key, retransmit=True),
                dg.Data(5, 2, 10, 0, 1, b"", True),
            ),
            (dg.encode_nak(5, 3, 6, [(1, 2), (9, 1)], key), dg.Nak(5, 3, 6, ((1, 2), (9, 1)))),
            (dg.encode_heartbeat(5, 4, 11, "nodé", key), dg.Heartbeat(5, 4, 11, "nodé")),
            (dg.encode_lost(5, 5, 0, 4, key), dg.Lost(5, 5, 0, 4)),
            (
                dg.encode_announce(5, 6, 3, "n", b"\x00st", key),
                dg.Announce(5, 6, 3, "n", b"\x00st"),
            ),
            (dg.encode_bye(5, 7, 12, key), dg.Bye(5, 7, 12)),
        ]
        for raw, want in cases:
            assert dg.decode(raw, key) == want


def refused(raw: bytes, key: bytes | None = None, max_segments: int = dg.MAX_SEGMENTS) -> str:
    with pytest.raises(dg.DatagramError) as info:
        dg.decode(raw, key, max_segments)
    return info.value.reason


def test_every_truncation_of_every_kind_is_refused_never_misread() -> None:
    raws = [
        dg.encode_data(5, 1, 10, 0, 1, b"", None),
        dg.encode_nak(5, 1, 6, [(1, 2)], None),
        dg.encode_heartbeat(5, 1, 11, "name", None),
        dg.encode_lost(5, 1, 0, 4, None),
        dg.encode_announce(5, 1, 3, "name", b"", None),
        dg.encode_bye(5, 1, 12, None),
    ]
    for raw in raws:
        for cut in range(len(raw)):
            assert refused(raw[:cut]) == "truncated"
    for raw in raws:  # with a MAC, a cut anywhere fails the MAC or the length
        sealed = dg.encode_bye(5, 1, 12, KEY)
        for cut in range(len(sealed)):
            assert refused(sealed[:cut], KEY) in ("truncated", "mac")
        assert raw


def test_malformed_datagrams_are_refused_with_their_reason() -> None:
    good = dg.encode_data(5, 1, 10, 0, 1, b"x", None)
    assert refused(b"XX" + good[2:]) == "magic"
    assert refused(good[:2] + bytes([2]) + good[3:]) == "version"
    assert refused(good[:3] + bytes([99]) + good[4:]) == "kind"
    assert refused(dg.encode_data(0, 1, 10, 0, 1, b"x", None)) == "stream"
    # a giant segment count, an index past the count, a count of 0
    assert refused(dg.encode_data(5, 1, 10, 0, 65_535, b"x", None), max_segments=1000) == "segment"
    assert refused(dg.encode_data(5, 1, 10, 3, 3, b"x", None)) == "segment"
    assert refused(dg.encode_data(5, 1, 10, 0, 0, b"x", None)) == "segment"
    assert refused(dg.encode_data(5, 1, 2**63, 0, 1, b"x", None)) == "sequence"
    # a NAK for 10**9 messages, or for none, or reaching past 2**63
    assert refused(dg.encode_nak(5, 1, 6, [(0, 10**9)], None)) == "nak_range"
    assert refused(dg.encode_nak(5, 1, 6, [(0, 0)], None)) == "nak_range"
    assert refused(dg.encode_nak(5, 1, 6, [(2**63 - 1, 2)], None)) == "nak_range"
    many = dg.encode_nak(5, 1, 6, [(0, 1)], None)
    many = many[: dg.HEADER_SIZE + 8] + struct.pack("!H", 65) + bytes(12 * 65)
    assert refused(many) == "nak_range"
    with pytest.raises(ValueError, match="1 to 64 ranges"):
        dg.encode_nak(5, 1, 6, [(0, 1)] * 65, None)
    assert refused(dg.encode_lost(5, 1, 2**63, 1, None)) == "sequence"
    bad_name = dg.encode_heartbeat(5, 1, 1, "ab", None)[:-2] + b"\xff\xfe"
    assert refused(bad_name) == "name"
    assert refused(dg.encode_heartbeat(5, 1, 1, "ab", None) + b"!") == "truncated"


def test_the_mac_is_required_checked_and_refused_without_a_secret() -> None:
    sealed = dg.encode_data(5, 1, 10, 0, 1, b"x", KEY)
    assert refused(sealed) == "mac"  # a MAC this node cannot check
    assert refused(dg.encode_data(5, 1, 10, 0, 1, b"x", None), KEY) == "mac"  # none
    other = dg.channel_key(b"other", S.group, S.port)
    assert refused(dg.encode_data(5, 1, 10, 0, 1, b"x", other), KEY) == "mac"
    forged = bytearray(sealed)
    forged[dg.HEADER_SIZE + 7] ^= 1  # the sequence number changed in flight
    assert refused(bytes(forged), KEY) == "mac"
    # the key depends on the channel: the same secret on another port is another key
    assert dg.channel_key(b"s3cret", S.group, S.port + 1) != KEY


# ---------------------------------------------------------------- sequencing and segments


def test_sequence_numbers_are_consecutive_and_a_large_message_is_segmented() -> None:
    p = publisher()
    seg = p.segment_size
    assert seg == S.datagram_size - dg.data_overhead(False)
    assert p.send(b"a", 0.0) == 0
    big = bytes(range(256)) * (seg * 3 // 256 + 1)
    assert p.send(big, 0.0) == 1
    out = [dg.decode(raw, None) for raw in p.datagrams_to_send()]
    assert all(len(dg.encode_data(7, 1, 0, 0, 1, o.payload, None)) <= S.datagram_size for o in out)  # type: ignore[union-attr]
    assert [(o.seq, o.index, o.count) for o in out] == [  # type: ignore[union-attr]
        (0, 0, 1),
        (1, 0, 4),
        (2, 1, 4),
        (3, 2, 4),
        (4, 3, 4),
    ]
    assert p.next_seq == 5
    with pytest.raises(ValueError, match="maxMessageSize"):
        p.send(bytes(S.max_message_size + 1), 0.0)


def test_segments_reassemble_in_any_arrival_order() -> None:
    p, r = publisher(), receiver()
    joined(p, r)
    big = bytes(range(256)) * 20
    p.send(big, 0.0)
    p.send(b"after", 0.0)
    raws = p.datagrams_to_send()
    feed(r, list(reversed(raws)))
    assert delivered(r) == [big, b"after"]


def test_a_partial_message_is_never_delivered_and_the_loss_is_reported_exactly() -> None:
    settings = MulticastSettings(cache_bytes=0)  # nothing can be retransmitted
    p, r = publisher(settings), receiver(settings)
    joined(p, r)
    big = bytes(5000)
    p.send(b"one", 0.0)  # seq 0
    p.send(big, 0.0)  # seq 1..4
    p.send(b"two", 0.0)  # seq 5
    raws = p.datagrams_to_send()
    feed(r, raws[:2] + raws[3:])  # segment 1 of the big one (seq 2) lost
    assert delivered(r) == [b"one"]  # the rest waits for the gap
    r.tick(1.0)
    ((target, ranges),) = r.naks_to_send()
    assert (target, ranges) == (7, [(2, 1)])
    p.on_nak(dg.Nak(9, 1, 7, tuple(ranges)), 1.0)
    feed(r, p.datagrams_to_send(), 1.0)  # a LOST: the cache holds nothing
    got = events(r)
    assert LostRange(7, 2, 1) in got
    assert [e.payload for e in got if isinstance(e, Delivered)] == [b"two"]
    assert r.counters["partial_dropped"] == 1
    assert r.counters["segments_skipped"] == 2  # seq 3 and 4, the rest of the lost message


# ---------------------------------------------------------------- gaps and NAKs


def test_gaps_become_nak_ranges_after_the_random_delay_and_are_repaired() -> None:
    p, r = publisher(), receiver()
    joined(p, r)
    for i in range(10):
        p.send(b"m%d" % i, 0.0)
    raws = p.datagrams_to_send()
    keep = [raw for i, raw in enumerate(raws) if i not in (2, 3, 6)]
    feed(r, keep, 0.0)
    assert delivered(r) == [b"m0", b"m1"]
    due = r.next_deadline()
    assert 0.0 <= due < S.nak_delay
    r.tick(due - 1e-9)
    assert r.naks_to_send() == []
    r.tick(due)
    assert r.naks_to_send() == [(7, [(2, 2), (6, 1)])]
    p.on_nak(dg.Nak(9, 1, 7, ((2, 2), (6, 1))), due)
    repairs = p.datagrams_to_send()
    assert [dg.decode(x, None).retransmit for x in repairs] == [True] * 3  # type: ignore[union-attr]
    feed(r, repairs, due)
    assert delivered(r) == [b"m%d" % i for i in range(2, 10)]
    assert r.next_deadline() > due + S.nak_retry  # no NAK pending: the gap closed


def test_an_unrepaired_gap_is_asked_again_every_nak_retry() -> None:
    p, r = publisher(), receiver()
    joined(p, r)
    p.send(b"a", 0.0)
    p.send(b"b", 0.0)
    feed(r, p.datagrams_to_send()[1:])
    times = []
    now = 0.0
    for _ in range(4):
        now = r.next_deadline()
        r.tick(now)
        if r.naks_to_send():
            times.append(now)
    assert len(times) == 4
    assert all(abs(b - a - S.nak_retry) < 1e-9 for a, b in zip(times, times[1:], strict=False))


def test_heartbeats_reveal_a_lost_tail() -> None:
    p, r = publisher(), receiver()
    joined(p, r)
    p.send(b"a", 0.0)
    p.send(b"tail", 0.0)
    feed(r, p.datagrams_to_send()[:1])  # the last message is lost, then silence
    assert delivered(r) == [b"a"]
    assert r.next_deadline() >= S.publisher_timeout - 1  # nothing says anything is missing
    p.tick(0.2)
    feed(r, p.datagrams_to_send(), 0.2)  # the heartbeat: next_seq 2
    r.tick(r.next_deadline())
    assert r.naks_to_send() == [(7, [(1, 1)])]


def test_a_nak_heard_from_another_receiver_holds_ours() -> None:
    p, r = publisher(), receiver()
    joined(p, r)
    p.send(b"a", 0.0)
    p.send(b"b", 0.0)
    feed(r, p.datagrams_to_send()[1:])
    due = r.next_deadline()
    r.on_nak(dg.Nak(11, 1, 7, ((0, 5),)), due / 2)  # covers what we miss
    assert r.counters["naks_suppressed"] == 1
    r.tick(due)
    assert r.naks_to_send() == []
    assert r.next_deadline() == pytest.approx(due / 2 + S.nak_retry)
    # a NAK for other numbers does not hold ours
    r2 = receiver()
    p2 = publisher()
    joined(p2, r2)
    p2.send(b"a", 0.0)
    p2.send(b"b", 0.0)
    feed(r2, p2.datagrams_to_send()[1:])
    r2.on_nak(dg.Nak(11, 1, 7, ((1, 5),)), 0.0)
    assert r2.counters["naks_suppressed"] == 0


def test_duplicates_and_data_past_the_receive_window_are_dropped_and_counted() -> None:
    settings = MulticastSettings(receive_window=16)
    p, r = publisher(settings), receiver(settings)
    joined(p, r)
    for i in range(20):
        p.send(b"%d" % i, 0.0)
    raws = p.datagrams_to_send()
    feed(r, raws[:1] + raws[:1] + raws[17:20])
    assert r.counters["duplicates"] == 1
    assert r.counters["beyond_window"] == 3  # 17, 18, 19 are 16 or more past seq 1
    r.tick(r.next_deadline())
    ((_, ranges),) = r.naks_to_send()
    assert ranges == [(1, 16)]


# ---------------------------------------------------------------- the retransmit cache


def test_the_cache_is_bounded_by_bytes_and_age_oldest_first() -> None:
    p = publisher(MulticastSettings(cache_bytes=1000, cache_age=5.0))
    for i in range(10):
        p.send(bytes(300), float(i) * 0.1)
    assert p.cache_range == (7, 10)  # 3 x 300 bytes fit
    assert p.cache_bytes == 900
    assert p.counters["evicted"] == 7
    p.tick(5.75)  # seq 7 was sent at 0.7: older than 5 s now
    assert p.cache_range == (8, 10)
    p.tick(100.0)
    assert p.cache_range == (10, 10)
    assert p.cache_bytes == 0


def test_a_nak_below_the_cache_gets_one_lost_up_to_the_oldest_and_the_rest_retransmitted() -> None:
    p = publisher(MulticastSettings(cache_bytes=1000))
    for _ in range(10):
        p.send(bytes(300), 0.0)
    p.datagrams_to_send()
    p.on_nak(dg.Nak(9, 1, 7, ((2, 7),)), 1.0)
    out = [dg.decode(x, None) for x in p.datagrams_to_send()]
    assert out[0] == dg.Lost(7, out[0].stamp, 2, 5)
    assert [o.seq for o in out[1:]] == [7, 8]  # type: ignore[union-attr]
    # the same NAK again within the holdoff: nothing; after it: again
    p.on_nak(dg.Nak(10, 1, 7, ((2, 7),)), 1.01)
    assert p.datagrams_to_send() == []
    assert p.counters["retransmit_held"] == 3
    p.on_nak(dg.Nak(10, 2, 7, ((2, 7),)), 1.0 + S.retransmit_holdoff)
    assert len(p.datagrams_to_send()) == 3
    # a NAK for numbers never sent is counted and ignored
    p.on_nak(dg.Nak(10, 3, 7, ((50, 3),)), 2.0)
    assert p.datagrams_to_send() == []
    assert p.counters["bogus_nak"] == 1


def test_the_retransmit_rate_limit_stops_a_nak_short() -> None:
    p = publisher(MulticastSettings(retransmit_rate=1000))
    for _ in range(10):
        p.send(bytes(300), 0.0)
    p.datagrams_to_send()
    p.on_nak(dg.Nak(9, 1, 7, ((0, 10),)), 0.0)
    assert len(p.datagrams_to_send()) == 3  # 1,000 bytes of tokens
    assert p.counters["rate_limited"] == 1
    p.on_nak(dg.Nak(9, 2, 7, ((3, 7),)), 0.6)  # 600 more bytes of tokens
    assert len(p.datagrams_to_send()) == 2


# ---------------------------------------------------------------- joining, state, gone


def test_a_stream_is_followed_from_its_first_announcement_only() -> None:
    p, r = publisher(), receiver()
    p.send(b"before", 0.0)
    p.tick(0.0)  # a heartbeat and the first announcement
    raws = p.datagrams_to_send()
    feed(r, raws[:1])  # the data before any announcement: no stream yet
    assert r.counters["unjoined"] == 1
    feed(r, raws[1:])
    assert events(r) == [Joined(7, "pub"), Announced(7, "pub", b"")]
    assert r.expected(7) == 1


def test_an_announcement_is_handed_over_once_everything_before_it_was_delivered() -> None:
    p, r = publisher(), receiver()
    joined(p, r, b"s0")
    p.send(b"a", 0.0)
    p.send(b"b", 0.0)
    p.announce(b"s1", 0.0)
    first, second, announce = p.datagrams_to_send()
    feed(r, [announce, second])
    assert events(r) == []  # the announcement waits for seq 0
    feed(r, [first])
    assert events(r) == [Delivered(7, b"a"), Delivered(7, b"b"), Announced(7, "pub", b"s1")]
    r.on_announce(dg.Announce(7, 50, 0, "pub", b"s0"), 0.1)  # an older one, late: stale
    assert events(r) == []
    assert r.counters["stale_announce"] == 1


def test_a_silent_publisher_is_gone_after_the_timeout_and_a_bye_ends_a_stream() -> None:
    p, r = publisher(), receiver()
    joined(p, r)
    r.tick(S.publisher_timeout - 0.01)
    assert events(r) == []
    r.tick(S.publisher_timeout)
    assert events(r) == [Gone(7, "pub", "timeout")]
    assert r.streams() == {}
    p2, r2 = publisher(), receiver()
    joined(p2, r2)
    p2.send(b"last", 0.0)
    p2.close()
    data, bye = p2.datagrams_to_send()
    feed(r2, [bye])
    assert events(r2) == []  # seq 0 is still missing
    feed(r2, [data])
    assert events(r2) == [Delivered(7, b"last"), Gone(7, "pub", "closed")]
    p2.announce(b"", 0.0)  # a replayed announcement of the closed stream does not rejoin
    r2.on_announce(dg.Announce(7, 99, 1, "pub", b""), 0.1)
    assert r2.counters["replayed"] == 1


# ---------------------------------------------------------------- the nagging monitor


def test_the_nagging_monitor_sums_a_sliding_window_at_each_check() -> None:
    m = NaggingMonitor(window=1.0, check=0.25, limit=10, now=0.0)
    m.record(0.1, 6)
    m.record(0.2, 4)
    assert m.due(0.2) is None  # not a check time yet
    assert m.due(0.25) is None  # 10 is not more than 10
    m.record(0.3, 1)
    assert m.due(0.4) is None  # the next check is at 0.5
    assert m.due(0.5) == 11
    assert m.due(1.0) == 11
    assert m.due(1.25) is None  # the marks at 0.1 and 0.2 left the window
    assert m.requested(1.25) == 1
    assert m.due(1.4) is None  # between checks
    m.record(1.45, 20)
    assert m.due(1.5) == 20  # the mark at 0.3 left the window too


def test_nagging_flags_the_channel_stops_its_naks_and_data_until_resumed() -> None:
    settings = MulticastSettings(
        nagging_window_interval=1.0, nagging_check_interval=0.1, nagging_max_retransmissions=3
    )
    p, r = publisher(settings), receiver(settings)
    joined(p, r)
    for i in range(6):
        p.send(b"%d" % i, 0.0)
    raws = p.datagrams_to_send()
    feed(r, raws[5:])  # 0..4 missing: one NAK asks for 5
    now = r.next_deadline()
    r.tick(now)
    assert r.naks_to_send() == [(7, [(0, 5)])]
    r.tick(0.1)
    assert events(r) == [Nagging(5, 3, 1.0)]
    assert r.nagging
    r.tick(0.5)
    assert r.naks_to_send() == []  # no more requests
    assert r.next_deadline() > 0.5  # and no timer due while flagged: nothing to spin on
    feed(r, raws[:5], 0.5)
    assert events(r) == [] and r.counters["nagging_dropped"] == 5
    r.resume(0.6)  # what was missed while flagged is lost; what was held is delivered
    assert events(r) == [LostRange(7, 0, 5), Delivered(7, b"5")]
    p.send(b"next", 0.6)
    feed(r, p.datagrams_to_send(), 0.6)
    assert delivered(r) == [b"next"]
    r.tick(0.7)
    assert r.naks_to_send() == [] and not r.nagging


def test_nagging_is_off_when_any_of_its_settings_is_zero() -> None:
    for window, check, limit in ((0.0, 0.1, 3), (1.0, 0.0, 3), (1.0, 0.1, 0)):
        m = NaggingMonitor(window, check, limit, 0.0)
        m.record(0.0, 1000)
        assert m.due(10.0) is None


# ---------------------------------------------------------------- the channel: MAC, replay


def test_a_channel_with_a_secret_drops_replays_forgeries_and_its_own_datagrams() -> None:
    pub = ChannelProtocol(S, name="pub", stream=7, key=KEY, now=0.0)
    sub = ChannelProtocol(S, name="sub", stream=9, key=KEY, now=0.0, publish=False)
    pub.tick(0.0)
    pub.send(b"hello", 0.0)
    raws = pub.datagrams_to_send()
    for raw in raws:
        sub.receive(raw, 0.0)
        pub.receive(raw, 0.0)  # multicast loops our own datagrams back
    assert pub.counters["own"] == len(raws)
    got = []
    while (e := sub.next_event()) is not None:
        got.append(e)
    assert Delivered(7, b"hello") in got
    for raw in raws:  # the same datagrams again: replays
        sub.receive(raw, 0.1)
    assert sub.counters["replayed"] == len(raws)
    sub.receive(dg.encode_data(7, 999, 1, 0, 1, b"x", None), 0.1)  # no MAC
    sub.receive(dg.encode_data(8, 1, 1, 0, 1, b"x", dg.channel_key(b"guess", S.group, S.port)), 0.1)
    assert sub.counters["refused_mac"] == 2
    assert sub.next_event() is None


def test_a_channel_sends_each_nak_once_also_when_its_publisher_has_nothing_to_send() -> None:
    pub = ChannelProtocol(S, name="pub", stream=7, key=None, now=0.0)
    sub = ChannelProtocol(S, name="sub", stream=9, key=None, now=0.0)  # it publishes too
    pub.tick(0.0)
    sub.tick(0.0)
    sub.datagrams_to_send()
    pub.send(b"a", 0.0)
    pub.send(b"b", 0.0)
    raws = pub.datagrams_to_send()
    assert [type(dg.decode(x, None)) for x in raws] == [dg.Heartbeat, dg.Announce, dg.Data, dg.Data]
    for raw in raws[:2] + raws[3:]:  # a is lost
        sub.receive(raw, 0.0)
    now = sub.next_deadline()
    sub.tick(now)
    naks = [dg.decode(x, None) for x in sub.datagrams_to_send()]
    assert [type(n) for n in naks] == [dg.Nak]
    assert sub.datagrams_to_send() == []


def test_a_state_larger_than_a_datagram_is_announced_in_pages_and_applied_whole() -> None:
    p = publisher()
    state = bytes(range(256)) * 20  # 5,120 bytes: four or five pages
    p.announce(state, 0.0)
    pages = p.datagrams_to_send()
    decoded = [dg.decode(x, None) for x in pages]
    assert len(pages) > 3 and all(len(x) <= S.datagram_size for x in pages)
    assert [(a.page, a.pages) for a in decoded] == [(i, len(pages)) for i in range(len(pages))]  # type: ignore[union-attr]
    r = receiver()
    feed(r, pages[:-1])
    assert events(r) == []  # a page missing: nothing joined yet
    feed(r, list(reversed(pages)))  # the next round, in any order
    assert events(r) == [Joined(7, "pub"), Announced(7, "pub", state)]
    with pytest.raises(ValueError, match="maxMessageSize"):
        p.announce(bytes(S.max_message_size + 1), 0.0)
