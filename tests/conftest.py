"""Shared fixtures: every test fails if it leaks threads.

Leaked sockets and child processes are checked by the fixtures of the tests that
make them (see tests/support).

Nodes with no secret configured prove this user's secret, a file made on first
use in the user's config directory.  The suite never touches the real one:
``ACTORBUS_USER_SECRET_FILE`` points at a file of a temporary directory of this
run, made here (mode 600) so the raw peers of the tests can prove it too, and
inherited by every subprocess node.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

#: the environment variable naming this user's secret file (actorbus.net's)
USER_SECRET_ENV = "ACTORBUS_USER_SECRET_FILE"
_user_dir: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _user_dir
    _user_dir = tempfile.mkdtemp(prefix="actorbus-user-")
    path = os.path.join(_user_dir, "actorbus", "secret")
    os.makedirs(os.path.dirname(path), mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_hex(32) + "\n")
    os.environ[USER_SECRET_ENV] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    if _user_dir is not None:
        shutil.rmtree(_user_dir, ignore_errors=True)


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
