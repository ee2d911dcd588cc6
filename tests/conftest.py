"""Shared fixtures: every test fails if it leaks threads.

Leaked sockets and child processes are checked by the fixtures of the tests that
make them (see tests/support).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from loguru import logger


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


@pytest.fixture(autouse=True)
def library_logging_as_at_import() -> Iterator[None]:
    """Every test starts and ends with actorbus's loguru output disabled, as after
    ``import actorbus``.  A test that turns it on (the CLI's ``main()`` does, in
    process) must not send the next tests' failure reports to loguru, away from
    the standard ``logging`` records they check with ``caplog``."""
    logger.disable("actorbus")
    yield
    logger.disable("actorbus")
