"""Terminal operations: what each resolves to, and when it stops the source."""

from __future__ import annotations

from typing import Any

import pytest

from actorbus import UsageError
from actorbus.streams import EMPTY, EventKind, PushEvent, PushStream


def of(items: Any) -> PushStream[Any]:
    return PushStream.of(items)


def counted(n: int, pulled: list[int]) -> Any:
    for i in range(n):
        pulled.append(i)
        yield i


def test_collect_to_list_count_reduce() -> None:
    assert of("ab").collect().result() == ["a", "b"]
    assert of("ab").to_list().result() == ["a", "b"]
    assert of(range(7)).count().result() == 7
    assert of(range(5)).reduce(lambda a, b: a + b).result() == 10
    assert of(range(5)).reduce(100, lambda a, b: a + b).result() == 110
    assert of([]).reduce(lambda a, b: a + b).result() is None
    assert of([]).reduce(lambda a, b: a + b, default=EMPTY).result() is EMPTY
    assert of([]).reduce(0, lambda a, b: a + b).result() == 0
    with pytest.raises(UsageError, match="reduce"):
        of([]).reduce()


def test_min_max_by_key_and_empty() -> None:
    assert of([3, 1, 2]).min().result() == 1
    assert of([3, 1, 2]).max().result() == 3
    assert of(["bb", "a", "cc"]).max(key=len).result() == "bb"  # the first of equals
    assert of([]).min().result() is None
    assert of([]).max(default=EMPTY).result() is EMPTY


def test_matches_stop_at_the_deciding_event() -> None:
    pulled: list[int] = []
    assert of(counted(100, pulled)).any_match(lambda x: x == 3).result() is True
    assert pulled == [0, 1, 2, 3]
    pulled.clear()
    assert of(counted(100, pulled)).all_match(lambda x: x < 2).result() is False
    assert pulled == [0, 1, 2]
    pulled.clear()
    assert of(counted(100, pulled)).none_match(lambda x: x == 1).result() is False
    assert pulled == [0, 1]
    assert of([]).any_match(bool).result() is False
    assert of([]).all_match(bool).result() is True
    assert of([]).none_match(bool).result() is True
    assert of([1, 2]).all_match(lambda x: x > 0).result() is True


def test_find_first_stops_the_source() -> None:
    pulled: list[int] = []
    assert of(counted(100, pulled)).filter(lambda x: x > 4).find_first().result() == 5
    assert pulled == [0, 1, 2, 3, 4, 5]


def test_for_each_event_sees_data_then_one_terminal_event() -> None:
    events: list[PushEvent[Any]] = []
    assert of("xy").for_each_event(events.append).result() == 2
    assert [(e.kind, e.data) for e in events] == [
        (EventKind.DATA, "x"),
        (EventKind.DATA, "y"),
        (EventKind.CLOSE, None),
    ]
    assert events[-1].is_terminal and not events[0].is_terminal


def test_a_consumer_exception_fails_the_future() -> None:
    def consumer(x: int) -> None:
        if x == 2:
            raise RuntimeError("consumer broke")

    f = of(range(5)).for_each(consumer)
    with pytest.raises(RuntimeError, match="consumer broke"):
        f.result()


def test_add_done_callback_after_and_before_done() -> None:
    f = of([1]).collect()
    seen: list[Any] = []
    f.add_done_callback(lambda fut: seen.append(("before", fut.result())))
    assert f.result() == [1]
    f.add_done_callback(lambda fut: seen.append(("after", fut.result())))
    assert seen == [("before", [1]), ("after", [1])]
    assert "result=[1]" in repr(f)
