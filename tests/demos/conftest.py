"""The demo and CLI tests run ``actorbus``'s ``main()`` in process, and ``main()``
turns actorbus's loguru output on (as the command should).  Each test here puts
it back off, as after ``import actorbus``: left on, the later tests' failure
reports would go to loguru instead of the standard ``logging`` records their
``caplog`` checks read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loguru import logger


@pytest.fixture(autouse=True)
def library_logging_off_again() -> Iterator[None]:
    yield
    logger.disable("actorbus")
