"""RFC 214 semantics of the intermediate operations, on iterable sources.

A stream of ``PushStream.of`` runs on the thread that asks for its result, on
a virtual clock (waits move it, nothing sleeps), so these are exact."""

from __future__ import annotations

import datetime
import itertools
from typing import Any

import pytest

from actorbus import UsageError
from actorbus.streams import EMPTY, EventKind, InlineExecutor, PushEvent, PushStream


def of(items: Any) -> PushStream[Any]:
    return PushStream.of(items)


def test_filter_map_flat_map_distinct_sorted_skip() -> None:
    assert of(range(10)).filter(lambda x: x % 3 == 0).collect().result() == [0, 3, 6, 9]
    assert of("abc").map(str.upper).collect().result() == ["A", "B", "C"]
    assert of([1, 2, 3]).flat_map(lambda x: [x] * x).collect().result() == [1, 2, 2, 3, 3, 3]
    nested = of([1, 2]).flat_map(lambda x: PushStream.of([x, -x])).collect().result()
    assert nested == [1, -1, 2, -2]
    assert of([3, 1, 3, 2, 1]).distinct().collect().result() == [3, 1, 2]
    assert of(["aa", "b", "cc"]).distinct(key=len).collect().result() == ["aa", "b"]
    assert of([3, 1, 2]).sorted().collect().result() == [1, 2, 3]
    assert of(["bb", "a", "ccc"]).sorted(key=len, reverse=True).collect().result() == [
        "ccc",
        "bb",
        "a",
    ]
    assert of(range(6)).skip(4).collect().result() == [4, 5]
    assert of(range(3)).skip(0).collect().result() == [0, 1, 2]


def test_coalesce_count_flushes_the_partial_batch_at_close() -> None:
    got = of(range(50)).coalesce(3, sum).collect().result()
    assert got == [9 * i + 3 for i in range(16)] + [48 + 49]
    assert got[:3] == [3, 12, 21] and got[-2:] == [138, 97]


def test_coalesce_count_is_read_again_for_each_batch() -> None:
    sizes = itertools.chain([1, 2, 3], itertools.repeat(4))
    got = of(range(10)).coalesce(lambda: next(sizes), list).collect().result()
    assert got == [[0], [1, 2], [3, 4, 5], [6, 7, 8, 9]]


def test_coalesce_accumulator_emits_when_it_returns_a_value_and_never_flushes() -> None:
    held: list[int] = []

    def pairs(x: int) -> tuple[int, ...] | None:
        held.append(x)
        if len(held) < 2:
            return None
        out = tuple(held)
        held.clear()
        return out

    assert of(range(5)).coalesce(pairs).collect().result() == [(0, 1), (2, 3)]
    assert held == [4]  # the partial one stays: no flush at close


def test_window_by_time_by_count_and_the_flush_at_close() -> None:
    ex = InlineExecutor()
    # one event per 10 ms (the consumer's back-pressure paces the source)
    timed = (
        PushStream.of(range(10), on=ex)
        .adjust_back_pressure(lambda bp: 10)
        .window(0.035, list)
        .collect()
    )
    assert timed.result() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    counted = of(range(10)).window(datetime.timedelta(seconds=60), sum, max_count=4).collect()
    assert counted.result() == [0 + 1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9]


def test_limit_closes_after_n_runs_on_close_once_and_stops_the_source() -> None:
    closed: list[str] = []
    pulled: list[int] = []

    def source() -> Any:
        for i in range(1000):
            pulled.append(i)
            yield i

    f = of(source()).on_close(lambda: closed.append("closed")).limit(3).collect()
    assert f.result() == [0, 1, 2]
    assert closed == ["closed"]
    assert pulled == [0, 1, 2]


def test_limit_zero_is_refused_with_a_clear_error() -> None:
    with pytest.raises(UsageError, match=r"limit\(0\): expected an integer >= 1.*PushStream.of"):
        of(range(3)).limit(0)
    with pytest.raises(UsageError, match="skip"):
        of(range(3)).skip(-1)


def test_an_exception_in_map_reaches_the_terminal_future_and_on_error() -> None:
    errors: list[BaseException] = []
    closed: list[int] = []

    def boom(x: int) -> int:
        if x == 3:
            raise ValueError(f"bad {x}")
        return x

    f = of(range(10)).map(boom).on_error(errors.append).on_close(lambda: closed.append(1)).collect()
    with pytest.raises(ValueError, match="bad 3"):
        f.result()
    assert isinstance(f.exception(), ValueError)
    assert [str(e) for e in errors] == ["bad 3"]
    assert closed == [1]


def test_an_error_of_the_source_is_the_error_event() -> None:
    def broken() -> Any:
        yield 1
        raise OSError("disk gone")

    events: list[PushEvent[Any]] = []
    f = of(broken()).for_each_event(events.append)
    with pytest.raises(OSError, match="disk gone"):
        f.result()
    assert [e.kind for e in events] == [EventKind.DATA, EventKind.ERROR]


def test_split_sends_an_event_to_every_matching_branch() -> None:
    even, big = of(range(10)).split(lambda x: x % 2 == 0, lambda x: x > 5)
    f_even, f_big = even.collect(), big.collect()
    assert f_even.result() == [0, 2, 4, 6, 8]
    assert f_big.result() == [6, 7, 8, 9]


def test_split_source_closes_when_all_branches_closed() -> None:
    pulled: list[int] = []

    def source() -> Any:
        for i in range(1000):
            pulled.append(i)
            yield i

    a, b = of(source()).split(lambda x: True, lambda x: x % 2 == 1)
    fa, fb = a.limit(2).collect(), b.limit(3).collect()
    assert fa.result() == [0, 1] and fb.result() == [1, 3, 5]
    assert pulled == list(range(6))  # stopped once the second branch closed


def test_merge_closes_when_all_closed_and_fails_at_the_first_error() -> None:
    ex = InlineExecutor()
    got = PushStream.of([1, 2], on=ex).merge(PushStream.of("ab", on=ex)).collect().result()
    assert sorted(map(str, got)) == ["1", "2", "a", "b"]

    def broken() -> Any:
        yield 1
        raise KeyError("lost")

    f = of([1, 2, 3]).merge(PushStream.of(broken())).collect()
    with pytest.raises(KeyError):
        f.result()


def test_fork_hands_events_on_in_tasks_and_answers_its_delay_when_full() -> None:
    seen: list[int] = []
    got = (
        of(range(6))
        .adjust_back_pressure(lambda bp: seen.append(bp) or bp)
        .fork(2, delay_ms=7)
        .collect()
        .result()
    )
    assert got == list(range(6))
    assert seen[:2] == [0, 7]


def test_a_stream_is_used_once() -> None:
    s = of(range(3))
    s.map(str)
    with pytest.raises(UsageError, match="used once"):
        s.filter(bool)


def test_stream_close_flushes_and_ends_the_future() -> None:
    ex = InlineExecutor()
    s = PushStream.of(range(100), on=ex).adjust_back_pressure(lambda bp: 1000)
    held = s.coalesce(10, list)
    f = held.collect()
    ex.call_later(0.5, s.close)  # the first event is in, the second waits 1 s
    assert f.result() == [[0]]


def test_find_first_empty_marker() -> None:
    assert of([None, 1]).find_first().result() is None
    assert of([]).find_first().result() is None
    assert of([]).find_first(default=EMPTY).result() is EMPTY
    assert of([None]).find_first(default=EMPTY).result() is None
    assert not EMPTY and repr(EMPTY) == "EMPTY"


def test_closing_a_split_pipeline_closes_every_branch() -> None:
    ex = InlineExecutor()
    source = PushStream.of(range(100), on=ex).adjust_back_pressure(lambda bp: 1000)
    a, b = source.split(lambda x: True, lambda x: x % 2 == 0)
    fa, fb = a.collect(), b.collect()
    ex.call_later(2.5, a.close)  # events 0, 1, 2 are in
    assert fa.result() == [0, 1, 2] and fb.result() == [0, 2]


def test_closing_a_merged_stream_closes_it_once_every_input_stopped() -> None:
    ex = InlineExecutor()
    slow = PushStream.of(range(100), on=ex).adjust_back_pressure(lambda bp: 1000)
    merged = slow.merge(PushStream.of(["a"], on=ex))
    f = merged.collect()
    ex.call_later(1.5, merged.close)
    assert sorted(map(str, f.result())) == ["0", "1", "a"]


def test_a_count_window_passes_the_close_of_downstream_up() -> None:
    pulled: list[int] = []

    def source() -> Any:
        for i in range(100):
            pulled.append(i)
            yield i

    got = of(source()).window(60, sum, max_count=2).limit(2).collect().result()
    assert got == [1, 5] and pulled == [0, 1, 2, 3]
