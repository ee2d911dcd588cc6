"""Shared fixtures: every test fails if it leaks threads.

Leaked sockets and child processes are checked by the fixtures of the tests that
make them (see tests/support).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest


def _live_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    before = _live_threads()
    yield
    deadline = time.monotonic() + 5.0
    leaked: set[threading.Thread] = set()
    while time.monotonic() < deadline:
        leaked = {
            t for t in _live_threads() - before if not t.daemon or t.name.startswith("actorbus")
        }
        if not leaked:
            return
        for t in leaked:
            t.join(timeout=0.05)
    pytest.fail(f"test leaked threads: {sorted(t.name for t in leaked)}")


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    """The message of every actorbus log record, DEBUG and up, while the test runs."""
    from loguru import logger

    found: list[str] = []
    logger.enable("actorbus")
    sink = logger.add(lambda m: found.append(m.record["message"]), level="DEBUG")
    try:
        yield found
    finally:
        logger.remove(sink)
        logger.disable("actorbus")
