"""Reliable multicast over real sockets, in network namespaces on one bridged
segment (tests/reliability/multicast_netns.py), each node its own process:
random loss injected by iptables on the receiving side, loss outlasting the
retransmit cache, receivers and publishers killed.  Figures in docs/reliability.md."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from multicast_netns import McNode, segment
from reliability_netns import Host
from reliability_support import record

GROUP = "239.255.42.1"
PORT = 45_100


@contextlib.contextmanager
def nodes(
    hosts: list[Host], *extra: str, pub_extra: tuple[str, ...] = ()
) -> Iterator[list[McNode]]:
    """A publisher on hosts[0] and a subscriber on each other host, all following it."""
    made = [McNode(hosts[0], "pub", "pub", GROUP, PORT, *extra, *pub_extra)]
    try:
        made += [McNode(h, "sub", f"sub{i}", GROUP, PORT, *extra) for i, h in enumerate(hosts[1:])]
        for node in made:
            node.expect("ready")
        for node in made[1:]:
            node.send(cmd="wait_state", state="UP", timeout=20)
            assert node.expect("state")["states"] == ["UP"]
        yield made
    finally:
        for node in made:
            node.stop()


def _check_exact(report: dict[str, Any], published: int) -> int:
    """Every number delivered or reported lost, nothing twice, in order; the
    notifications reported lost are exactly the numbers missing."""
    lost: int = sum(m for _, _, m in report["lost"])
    assert all(m >= 0 for _, _, m in report["lost"]), report
    assert report["duplicates"] == 0, report
    assert report["reordered"] == 0, report
    assert report["delivered"] + lost == published, report
    assert report["last"] == published, report
    assert report["missing"] == lost, report  # the numbers skipped are those reported
    return lost


@pytest.mark.slow
def test_5000_messages_per_second_for_60_s_at_5_percent_loss_to_3_receivers() -> None:
    rate, seconds = 5000, 60
    with segment("r", 4) as hosts:
        for host in hosts[1:]:
            host.random_loss(0.05)
        with nodes(hosts) as (pub, *subs):
            pub.send(cmd="start", rate=rate, seconds=seconds)
            done = pub.expect("done", timeout=seconds * 3)
            published = done["published"]
            assert published == rate * seconds
            reports = []
            for sub in subs:
                sub.send(cmd="report", until=published, timeout=60)
                reports.append(sub.expect("report", timeout=90))
    channel = done["channel"]
    for report in reports:
        assert report["lost"] == [], report
        assert report["delivered"] == published, report
        assert report["duplicates"] == 0 and report["reordered"] == 0, report
    naks = channel["pub_naks_received"]
    record(
        "multicast_5000_per_s_60_s_5pct_loss_3_receivers",
        sent=published,
        delivered=sum(r["delivered"] for r in reports),
        dropped_reported=0,
        duplicates=0,
        reordered=0,
        unrecovered=sum(published - r["delivered"] for r in reports),
        seconds=done["seconds"],
        naks=naks,
        retransmitted=channel["pub_retransmitted"],
        naks_sent=[r["channel"]["naks_sent"] for r in reports],
        naks_suppressed=[r["channel"]["naks_suppressed"] for r in reports],
    )


@pytest.mark.slow
def test_loss_outlasting_the_cache_is_reported_exactly() -> None:
    """A receiver cut off for 1.5 s while the publisher's cache holds 0.2 s of
    messages: the numbers it missed are reported lost, exactly, and delivery
    resumes; the other receiver loses nothing."""
    rate = 1000
    # ~100 bytes a datagram: a cache of ~200 messages
    small = ("cache_bytes=20000",)
    with segment("c", 3) as hosts, nodes(hosts, *small) as (pub, cut, whole):
        pub.send(cmd="start", rate=rate, seconds=4)
        cut.send(cmd="report", until=1000, timeout=20)
        cut.expect("report")
        hosts[1].blackhole(hosts[0], True)
        whole.send(cmd="report", until=2500, timeout=20)
        whole.expect("report")
        hosts[1].blackhole(hosts[0], False)
        published = pub.expect("done", timeout=30)["published"]
        cut.send(cmd="report", until=published, timeout=30)
        report = cut.expect("report", timeout=40)
        whole.send(cmd="report", until=published, timeout=30)
        other = whole.expect("report", timeout=40)
    lost = _check_exact(report, published)
    assert lost > 500, report  # the blackhole outlasted the cache
    datagrams = sum(b - a + 1 for a, b, _ in report["lost"])
    assert report["channel"]["lost_datagrams"] == datagrams
    assert report["channel"]["lost_notifications"] == lost
    assert other["delivered"] == published and other["lost"] == [], other
    record(
        "multicast_loss_past_the_cache",
        sent=published,
        delivered=report["delivered"],
        dropped_reported=lost,
        duplicates=0,
        reordered=0,
        lost_ranges=len(report["lost"]),
        lost_datagrams=datagrams,
    )


@pytest.mark.slow
def test_a_receiver_killed_and_restarted_and_a_publisher_killed() -> None:
    """A receiver killed mid-stream and started again follows the stream from the
    next announcement, in order, no duplicate; the others lose nothing.  The
    publisher killed: every receiver's feed goes DOWN (heartbeats stop)."""
    with segment("k", 3) as hosts, nodes(hosts, "publisher_timeout=1.0") as (pub, victim, other):
        pub.send(cmd="start", rate=1000, seconds=5)
        victim.send(cmd="report", until=1000, timeout=20)
        assert victim.expect("report")["delivered"] >= 1000
        victim.kill()
        again = McNode(hosts[1], "sub", "sub0-again", GROUP, PORT, "publisher_timeout=1.0")
        try:
            again.expect("ready")
            again.send(cmd="wait_state", state="UP", timeout=20)
            assert again.expect("state")["states"] == ["UP"]
            published = pub.expect("done", timeout=30)["published"]
            again.send(cmd="report", until=1, timeout=5)
            late = again.expect("report")
            other.send(cmd="report", until=published, timeout=30)
            whole = other.expect("report", timeout=40)
            pub.kill()
            for node in (again, other):
                node.send(cmd="wait_state", state="DOWN", timeout=10)
                assert node.expect("state", timeout=20)["states"] == ["UP", "DOWN"]
        finally:
            again.stop()
    assert late["duplicates"] == 0 and late["reordered"] == 0 and late["lost"] == [], late
    assert late["gaps"] <= 1, late  # it starts wherever it joined
    assert 0 < late["delivered"] < published
    assert whole["delivered"] == published and whole["lost"] == [], whole
    record("multicast_receiver_restarted", sent=published, delivered=whole["delivered"])


@pytest.mark.slow
def test_the_nagging_monitor_flags_a_lossy_receiver_and_the_application_resumes_it() -> None:
    """A receiver losing 20 % asks for more than 20 retransmissions a second: its
    channel is flagged (MulticastNagging), stops asking and delivering; resumed,
    it asks again and gets what the cache still holds, the rest reported lost;
    the other receiver, without the monitor, loses nothing."""
    nagging = ("nagging_window_interval=1.0", "nagging_check_interval=0.1",
               "nagging_max_retransmissions=20")  # fmt: skip
    with segment("n", 3) as hosts:
        hosts[1].random_loss(0.2)
        pub = McNode(hosts[0], "pub", "pub", GROUP, PORT, "cache_bytes=30000")
        lossy = McNode(hosts[1], "sub", "lossy", GROUP, PORT, *nagging)
        fine = McNode(hosts[2], "sub", "fine", GROUP, PORT)
        made = [pub, lossy, fine]
        try:
            for node in made:
                node.expect("ready")
            for node in (lossy, fine):
                node.send(cmd="wait_state", state="UP", timeout=20)
                node.expect("state")
            pub.send(cmd="start", rate=1000, seconds=6)
            lossy.send(cmd="wait_nagging", timeout=20)
            flagged = lossy.expect("nagging", timeout=30)
            assert flagged["nagging"] and flagged["nagging"][0] > 20, flagged
            lossy.send(cmd="report", timeout=0)
            before = lossy.expect("report")
            lossy.send(cmd="report", timeout=0)
            still = lossy.expect("report")  # nothing more is delivered while flagged
            hosts[1].run("iptables", "-w", "-F", "INPUT")  # the loss stops
            lossy.send(cmd="resume")
            lossy.expect("resumed")
            published = pub.expect("done", timeout=30)["published"]
            lossy.send(cmd="report", until=published, timeout=30)
            after = lossy.expect("report", timeout=40)
            fine.send(cmd="report", until=published, timeout=30)
            whole = fine.expect("report", timeout=40)
        finally:
            for node in made:
                node.stop()
    # the flag came after everything delivered before it: nothing more until resumed
    assert still["delivered"] == before["delivered"], (before, still)
    lost = _check_exact(after, published)
    assert after["channel"]["nagging_dropped"] > 0
    assert whole["delivered"] == published and whole["lost"] == [], whole
    record(
        "multicast_nagging",
        sent=published,
        delivered=after["delivered"],
        dropped_reported=lost,
        duplicates=0,
        reordered=0,
        flagged_at=flagged["nagging"][0],
    )
