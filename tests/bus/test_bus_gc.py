"""The young-generation GC threshold while buses are open (actorbus._gc)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from actorbus import _gc
from actorbus.bus.bus import Bus
from actorbus.errors import UsageError


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[tuple[int, ...]]:
    """Each test starts with no bus open and the interpreter's thresholds at
    (700, 10, 10), and the thresholds are put back whatever happens."""
    assert _gc._holds == 0, "a bus from another test is still open"
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*before)


def test_an_open_bus_raises_the_young_threshold_and_closing_puts_it_back() -> None:
    with Bus(node_id="a"):
        assert gc.get_threshold() == (_gc.GC_THRESHOLD, 10, 10)
        assert gc.isenabled()
    assert gc.get_threshold() == (700, 10, 10)


def test_the_threshold_stays_until_the_last_bus_closes() -> None:
    a = Bus(node_id="a")
    b = Bus(node_id="b")
    try:
        a.close()
        assert gc.get_threshold()[0] == _gc.GC_THRESHOLD
        a.close()  # closing twice releases once
        assert gc.get_threshold()[0] == _gc.GC_THRESHOLD
    finally:
        b.close()
    assert gc.get_threshold() == (700, 10, 10)


def test_none_leaves_the_collector_alone_and_a_value_is_asked_for() -> None:
    with Bus(node_id="a", gc_threshold=None):
        assert gc.get_threshold() == (700, 10, 10)
    with Bus(node_id="b", gc_threshold=50_000):
        assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_is_never_lowered() -> None:
    gc.set_threshold(100_000, 20, 30)
    with Bus(node_id="a"):
        assert gc.get_threshold() == (100_000, 20, 30)
    assert gc.get_threshold() == (100_000, 20, 30)


def test_a_threshold_the_application_changed_meanwhile_is_kept() -> None:
    with Bus(node_id="a"):
        gc.set_threshold(1_234, 5, 6)
    assert gc.get_threshold() == (1_234, 5, 6)


@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "10000"])
def test_a_bad_threshold_is_refused_before_anything_starts(bad: object) -> None:
    with pytest.raises(UsageError, match=r"gc_threshold=.*expected an int >= 1"):
        Bus(node_id="a", gc_threshold=bad)  # type: ignore[arg-type]
    assert _gc._holds == 0
    assert gc.get_threshold() == (700, 10, 10)
