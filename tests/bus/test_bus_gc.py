"""The young-generation GC threshold while buses are open (actorbus._gc)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from actorbus import Bus, BusConfig, UsageError, _gc
from actorbus.config import load_config


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


# ------------------------------------------------------------- the gc.threshold key


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bus_from_a_file_applies_its_gc_threshold(tmp_path: Path) -> None:
    path = write(tmp_path, "actorbus.dispatchers=main\nactorbus.gc.threshold=50000\n")
    with Bus.from_properties(path, node_id="a"):
        assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_bus_from_a_file_with_gc_threshold_none_leaves_the_collector_alone(
    tmp_path: Path,
) -> None:
    with Bus.from_properties(write(tmp_path, "eBus.gc.threshold=none\n"), node_id="a"):
        assert gc.get_threshold() == (700, 10, 10)
    assert _gc._holds == 0


def test_a_bus_from_a_file_without_the_key_uses_the_default(tmp_path: Path) -> None:
    with Bus.from_properties(write(tmp_path, "actorbus.dispatchers=main\n"), node_id="a"):
        assert gc.get_threshold() == (_gc.GC_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_bus_from_env_applies_the_files_gc_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_APP_CONFIG", str(write(tmp_path, "eBus.gc.threshold=30000\n")))
    with Bus.from_env("MY_APP_CONFIG"):
        assert gc.get_threshold() == (30_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize(
    ("argument", "while_open"), [(20_000, (20_000, 10, 10)), (None, (700, 10, 10))]
)
def test_the_constructor_argument_overrides_the_file(
    tmp_path: Path, argument: int | None, while_open: tuple[int, ...]
) -> None:
    config = load_config(write(tmp_path, "actorbus.gc.threshold=50000\n"))
    with Bus(config, node_id="a", gc_threshold=argument):
        assert gc.get_threshold() == while_open
    assert gc.get_threshold() == (700, 10, 10)


def test_the_constructor_argument_overrides_a_file_saying_none(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "actorbus.gc.threshold=none\n"))
    with Bus(config, node_id="a", gc_threshold=40_000):
        assert gc.get_threshold() == (40_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("bad", [0, -5, True, 1.5])
def test_a_bad_threshold_in_a_config_built_in_code_is_refused(bad: object) -> None:
    config = BusConfig(gc_threshold=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^config\.gc_threshold=.*expected an int >= 1"):
        Bus(config, node_id="a")
    assert _gc._holds == 0
    assert gc.get_threshold() == (700, 10, 10)
    Bus(config, node_id="b", gc_threshold=None).close()  # an explicit argument wins
