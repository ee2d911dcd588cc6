"""Logging: loguru for the library's records, and failure reports that are never silent.

Two kinds of records leave the library:

* **Everything else** (links coming and going, selectors starting, debug
  detail) goes to loguru, which is disabled for ``actorbus`` at import, as a
  library should leave it: call :func:`enable_logging` (the CLI and the demos
  do) or ``loguru.logger.enable("actorbus")`` to see it.
* **Failure reports** — an exception in actor code, a configured connection
  that cannot be made, an actor task that cannot run — are made with
  :func:`report`.  They go to loguru when the application enabled actorbus
  there (and some loguru handler takes the level); otherwise to the standard
  :mod:`logging` logger ``"actorbus"``.  With no logging configured at all,
  Python's last-resort handler prints WARNING and above to stderr, traceback
  included: failures are visible by default, as in Pykka.  An application
  that configured :mod:`logging` gets them through its own handlers; one that
  wants them gone sets ``logging.getLogger("actorbus").disabled = True``.

Each failure is reported once: through loguru or through :mod:`logging`,
never both.  Whether loguru took the record is known by a patcher, which
loguru calls only for a record it is about to hand to its handlers.

:class:`Throttle` rate-limits a repeating report (a dial that fails every
second) per key, and says how many were held back.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from loguru import logger

__all__ = ["Throttle", "enable_logging", "logger", "report"]

logger.disable("actorbus")

#: the standard-library logger failure reports fall back to.
stdlib_logger = logging.getLogger("actorbus")

_LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
}


def enable_logging(level: str = "INFO") -> None:
    """Turn on actorbus logging to stderr at ``level``."""
    logger.enable("actorbus")
    logger.remove()
    logger.add(sys.stderr, level=level, format="{time:HH:mm:ss.SSS} {level:<7} {name}: {message}")


def report(
    level: str,
    text: str,
    *,
    exception: BaseException | None = None,
    **context: Any,
) -> None:
    """Report ``text`` (already formatted) at ``level`` ("WARNING", "ERROR",
    "CRITICAL"), with ``exception``'s traceback if given, to loguru when the
    application enabled actorbus there, else to :mod:`logging` (see the module
    docstring).  ``context`` is bound as loguru ``extra`` fields and passed as
    ``extra`` to :mod:`logging`."""
    taken = False

    def mark(record: Any) -> None:
        nonlocal taken
        taken = True

    # depth=1: the record names the module and line that called report().
    logger.patch(mark).bind(**context).opt(exception=exception, depth=1).log(level, "{}", text)
    if not taken:
        exc_info = (
            (type(exception), exception, exception.__traceback__) if exception is not None else None
        )
        stdlib_logger.log(
            _LEVELS.get(level, logging.ERROR),
            "%s",
            text,
            exc_info=exc_info,
            extra={"actorbus": context},
            stacklevel=2,
        )


class Throttle:
    """Per key, lets one report through every ``interval`` seconds and counts the
    rest; thread-safe.  ``allow(key)`` returns None to hold a report back, else
    how many were held back since the last one let through (0 the first time)."""

    def __init__(self, interval: float, *, clock: Any = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        #: key -> (when the last report went out, reports held back since)
        self._seen: dict[object, tuple[float, int]] = {}

    def allow(self, key: object) -> int | None:
        now = self._clock()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self.interval:
                self._seen[key] = (last[0], last[1] + 1)
                return None
            self._seen[key] = (now, 0)
            return 0 if last is None else last[1]

    def forget(self, key: object) -> None:
        """Drop ``key``'s history (its next report goes out at once)."""
        with self._lock:
            self._seen.pop(key, None)
