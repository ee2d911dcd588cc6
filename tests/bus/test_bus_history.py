"""FeedHistory and RequestLatencies (bus/history.py): what a node keeps for its
inspect page and metrics, bounded; and the router telling the history when a
key gains its first UP publisher or loses its last one."""

from __future__ import annotations

import itertools

import pytest

from actorbus import Bus, FeedState, Notification, UsageError
from actorbus.bus.history import LATENCY_BUCKETS, FeedChange, FeedHistory, RequestLatencies
from actorbus.bus.message import MessageKey


class Level(Notification, type_name="historytest.Level"):
    value: int


def key(subject: str) -> MessageKey:
    return MessageKey(Level, subject)


def test_each_key_keeps_its_last_changes_with_their_time() -> None:
    clock = itertools.count(100.0)
    history = FeedHistory(per_key=3, keys=10, clock=lambda: next(clock))
    for up in (True, False, True, False):
        history.record(key("/a"), up)
    assert history.changes() == {
        key("/a"): (FeedChange(101.0, False), FeedChange(102.0, True), FeedChange(103.0, False))
    }


def test_the_key_changed_longest_ago_goes_first() -> None:
    history = FeedHistory(per_key=2, keys=2, clock=lambda: 0.0)
    history.record(key("/a"), True)
    history.record(key("/b"), True)
    history.record(key("/a"), False)  # /a is now the latest
    history.record(key("/c"), True)  # over two keys: /b goes
    assert list(history.changes()) == [key("/a"), key("/c")]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bounds_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(UsageError, match="expected an integer >= 1"):
        FeedHistory(per_key=bad)  # type: ignore[arg-type]


def test_latencies_fall_in_cumulative_buckets() -> None:
    latencies = RequestLatencies()
    for seconds in (0.00005, 0.0001, 0.003, 20.0):
        latencies.observe(seconds)
    buckets, count, total = latencies.read()
    assert count == 4 and total == pytest.approx(20.00315)
    assert [b for b, _ in buckets] == [*LATENCY_BUCKETS, float("inf")]
    by_bound = dict(buckets)
    assert by_bound[0.0001] == 2  # a bound holds what is at or under it
    assert by_bound[0.0025] == 2 and by_bound[0.005] == 3
    assert by_bound[10.0] == 3 and by_bound[float("inf")] == 4


def test_the_router_records_a_keys_first_up_publisher_and_its_last_going() -> None:
    with Bus(node_id="H") as bus:
        first = bus.publisher(Level, "/h")
        second = bus.publisher(Level, "/h")  # a second UP publisher changes nothing
        second.update_feed_state(FeedState.DOWN)
        first.update_feed_state(FeedState.DOWN)  # the last one: DOWN
        first.update_feed_state(FeedState.UP)
        first.close()
        second.close()
        changes = bus.feed_history.changes()[key("/h")]
        assert [c.up for c in changes] == [True, False, True, False]
