"""Fixtures for the actor runtime tests: runtimes that always close, log capture,
and one dispatcher configuration per polling kind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actorbus import ActorRuntime, BusConfig
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.testing import capture_logs

#: One dispatcher per polling kind, named "d", tuned so idle spinning stays short.
KIND_CONFIGS: dict[str, DispatcherConfig] = {
    "blocking": DispatcherConfig(name="d", kind=DispatcherKind.BLOCKING, thread_count=2),
    "spinning": DispatcherConfig(name="d", kind=DispatcherKind.SPINNING, thread_count=2),
    "spin+park": DispatcherConfig(
        name="d",
        kind=DispatcherKind.SPIN_PARK,
        thread_count=2,
        spin_limit=1_000,
        park_time_ns=50_000,
    ),
    "spin+yield": DispatcherConfig(
        name="d", kind=DispatcherKind.SPIN_YIELD, thread_count=2, spin_limit=1_000
    ),
    "asyncio": DispatcherConfig(name="d", kind=DispatcherKind.ASYNCIO),
}


@pytest.fixture(params=list(KIND_CONFIGS))
def kind_config(request: pytest.FixtureRequest) -> DispatcherConfig:
    """Each polling kind in turn (tests using it run once per kind)."""
    config: DispatcherConfig = KIND_CONFIGS[request.param]
    return config


@pytest.fixture
def make_runtime() -> Iterator[Callable[..., ActorRuntime]]:
    """Build runtimes from dispatcher configs; every one is closed after the test."""
    made: list[ActorRuntime] = []

    def make(*dispatchers: DispatcherConfig, **kwargs: Any) -> ActorRuntime:
        config = BusConfig(dispatchers=dispatchers) if dispatchers else BusConfig()
        runtime = ActorRuntime(config, **kwargs)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.close()


@pytest.fixture
def runtime(
    kind_config: DispatcherConfig, make_runtime: Callable[..., ActorRuntime]
) -> ActorRuntime:
    """A runtime with the single dispatcher "d" of the current kind."""
    return make_runtime(kind_config)


@pytest.fixture
def log_records() -> Iterator[list[dict[str, Any]]]:
    """Every actorbus log record emitted during the test (logging enabled meanwhile)."""
    with capture_logs("DEBUG") as records:
        yield records
