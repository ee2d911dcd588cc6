"""Every J.REP test leaves no socket open (threads: the suite-wide fixture)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from jrep_support import _sockets

from actorbus.testing import wait_until


@pytest.fixture(autouse=True)
def no_leaked_sockets() -> Iterator[None]:
    before = _sockets()
    yield
    assert wait_until(lambda: _sockets() <= before, 5.0), (
        f"sockets left open: {_sockets()} now, {before} before the test"
    )
