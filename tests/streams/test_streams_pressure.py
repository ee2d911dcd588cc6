"""Back-pressure values, buffer policies and push-back policies (RFC 214 §5).

The virtual clock of :class:`InlineExecutor` records every wait the source
was asked for (``waits``), so the numbers are exact."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorbus import UsageError
from actorbus.streams import (
    BufferFullError,
    BufferStats,
    InlineExecutor,
    PushbackPolicy,
    PushStream,
    QueuePolicy,
)

P = PushbackPolicy


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (P.FIXED, [100, 100, 100, 100, 100]),
        (P.ON_FULL_FIXED, [0, 0, 0, 0, 100]),
        (P.LINEAR, [0, 25, 50, 75, 100]),
        (P.ON_FULL_EXPONENTIAL, [0, 0, 0, 0, 100]),
    ],
)
def test_pushback_at_fill_0_to_4_of_a_4_slot_buffer(policy: P, expected: list[int]) -> None:
    assert [policy.pushback(fill, 4, 100) for fill in range(5)] == expected


def test_on_full_exponential_doubles_while_full_and_restarts_after() -> None:
    streak = [P.ON_FULL_EXPONENTIAL.pushback(4, 4, 100, k) for k in range(4)]
    assert streak == [100, 200, 400, 800]
    assert P.ON_FULL_EXPONENTIAL.pushback(3, 4, 100, 7) == 0


def _answers(n: int, capacity: int, policy: P, queue: QueuePolicy = QueuePolicy.BLOCK) -> list[int]:
    """The push-backs a buffer answers its source while a slow consumer (1 s
    per event) takes: the source pushes at once whenever the answer is 0."""
    seen: list[int] = []
    ex = InlineExecutor()
    PushStream.of(range(n), on=ex).adjust_back_pressure(lambda bp: seen.append(bp) or bp).buffer(
        capacity, queue_policy=queue, pushback_policy=policy, base_ms=100
    ).for_each(lambda x: 1000).result()
    return seen


def test_a_buffer_answers_its_policy_as_it_fills() -> None:
    # the source pushes while answered 0; the consumer takes one per second
    assert _answers(6, 4, P.ON_FULL_FIXED)[:4] == [0, 0, 0, 100]
    assert _answers(6, 4, P.LINEAR)[:1] == [25]
    assert _answers(3, 4, P.FIXED) == [100, 100, 100]
    exp = _answers(12, 4, P.ON_FULL_EXPONENTIAL, QueuePolicy.DISCARD_OLDEST)
    assert exp[:6] == [0, 0, 0, 100, 200, 400]


def test_the_source_waits_what_it_is_answered() -> None:
    ex = InlineExecutor()
    PushStream.of(range(4), on=ex).for_each(lambda x: 5).result()
    assert ex.waits == [0.005] * 4
    ex2 = InlineExecutor()
    # data-dependent: wait as many ms as the event says
    PushStream.of([3, 1, 2], on=ex2).adjust_back_pressure(lambda e, bp: e).for_each(
        lambda x: None
    ).result()
    assert ex2.waits == [0.003, 0.001, 0.002]
    ex3 = InlineExecutor()
    PushStream.of(range(3), on=ex3).adjust_back_pressure(lambda bp: 42).for_each(
        lambda x: 0
    ).result()
    assert ex3.waits == [0.042] * 3


def test_negative_back_pressure_closes_the_stream() -> None:
    pulled: list[int] = []

    def source() -> Any:
        for i in range(100):
            pulled.append(i)
            yield i

    got: list[int] = []
    f = PushStream.of(source()).for_each(lambda x: got.append(x) or (-1 if x == 4 else 0))
    assert f.result() is None
    assert got == [0, 1, 2, 3, 4] and pulled == [0, 1, 2, 3, 4]


def test_fail_policy_errors_the_whole_stream() -> None:
    errors: list[BaseException] = []
    f = (
        PushStream.of(range(10))
        .buffer(2, queue_policy=QueuePolicy.FAIL, pushback_policy=P.ON_FULL_FIXED, base_ms=0)
        .on_error(errors.append)
        .for_each(lambda x: 1000)
    )
    with pytest.raises(BufferFullError, match="buffer full: 2 events waiting"):
        f.result()
    assert len(errors) == 1


def test_buffer_arguments_are_checked() -> None:
    with pytest.raises(UsageError, match="capacity=0"):
        PushStream.of([]).buffer(0)
    with pytest.raises(UsageError, match="queue_policy"):
        PushStream.of([]).buffer(4, queue_policy="block")  # type: ignore[arg-type]


def _run_buffer(
    events: list[int], capacity: int, queue: QueuePolicy, consumer_ms: int
) -> tuple[list[int], BufferStats]:
    stats = BufferStats()
    got: list[int] = []
    PushStream.of(events).buffer(
        capacity, queue_policy=queue, pushback_policy=P.ON_FULL_FIXED, base_ms=0, stats=stats
    ).for_each(lambda x: got.append(x) or consumer_ms).result()
    return got, stats


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(st.integers(), max_size=200),
    capacity=st.integers(1, 16),
    consumer_ms=st.integers(0, 5),
)
def test_block_never_loses_an_event(events: list[int], capacity: int, consumer_ms: int) -> None:
    got, stats = _run_buffer(events, capacity, QueuePolicy.BLOCK, consumer_ms)
    assert got == events
    assert stats.discarded == 0 and stats.max_fill <= capacity


@settings(max_examples=150, deadline=None)
@given(events=st.lists(st.integers(), min_size=1, max_size=200), capacity=st.integers(1, 16))
def test_discard_oldest_keeps_exactly_the_newest(events: list[int], capacity: int) -> None:
    # a consumer that never answers the source to wait: the source pushes its
    # first 256 events in one go, so the buffer keeps exactly the newest
    # `capacity` of each burst
    stats = BufferStats()
    got: list[int] = []
    ex = InlineExecutor()
    PushStream.of(events, on=ex).buffer(
        capacity,
        queue_policy=QueuePolicy.DISCARD_OLDEST,
        pushback_policy=P.ON_FULL_FIXED,
        base_ms=0,
        stats=stats,
    ).for_each(got.append).result()
    assert got == events[-capacity:]
    assert stats.discarded == len(events) - len(got)
    assert stats.pushed == len(events) and stats.delivered == len(got)
