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

**What a peer can make us log.**  A remote node (or a stranger at a service)
can trigger warnings at the rate it sends frames, and chooses some of the text
in them (its node id, a logoff reason, subjects, type names).  Two helpers keep
such lines few and honest:

* :class:`RateLimitedLog` lets at most one line per key (the peer and the kind
  of warning) through per period; the next line let through, or
  :meth:`RateLimitedLog.close`, says how many more like it were held back;
* :func:`shown` turns a peer-supplied string into text that cannot start a new
  line or move the terminal's cursor (control characters escaped, ``repr``
  style) and cuts it to a bounded length.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from loguru import logger

__all__ = ["RateLimitedLog", "Throttle", "enable_logging", "logger", "report", "shown"]

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


#: How many characters of a peer-supplied string a log line shows (by default).
SHOWN_LIMIT = 120


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """A peer-supplied value as one bounded piece of a log line: a str of printable
    characters (no newline, no escape sequence, no bidi control) and at most
    ``limit`` long is shown as it is; anything else as its ``repr`` (which escapes
    every non-printable character: ``'a\\nb'``, ``'\\x1b[31m'``), cut after ``limit``
    characters of the value with how many more there were."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit and text.isprintable():
        return text
    if len(text) > limit:
        return f"{text[:limit]!r}...({len(text) - limit} more characters)"
    return repr(text)


class RateLimitedLog:
    """At most one log line per key per ``period`` seconds; the lines held back
    are counted and said: by the next line of the key let through ("(1,234 more
    like this in the last 10 s)") or, for a key still holding some, by
    :meth:`close` ("... 1,234 more like this").  Thread-safe.

    Keys are the peer and the kind of line, e.g. ``("node-a", "unexpected")``.
    They may come from a peer, so at most ``max_keys`` are kept: past that the
    lines of a new key share one overflow key (and its limit)."""

    OVERFLOW: tuple[str] = ("(other keys)",)

    def __init__(
        self,
        period: float,
        *,
        max_keys: int = 1_024,
        clock: Any = time.monotonic,
        sink: Any = None,
    ) -> None:
        self.period = period
        self.max_keys = max_keys
        self._clock = clock
        #: where lines go: ``sink(level, text, *args)``; loguru by default
        self._sink = sink
        self._lock = threading.Lock()
        #: key -> [when the last line went out, lines held back since, the last
        #: held line's (level, text, args) for the summary]
        self._seen: dict[object, list[Any]] = {}

    def warning(self, key: object, text: str, *args: Any) -> bool:
        """Log ``text.format(*args)`` at WARNING unless ``key`` logged within the
        period; True when it went out."""
        return self.log("WARNING", key, text, *args)

    def info(self, key: object, text: str, *args: Any) -> bool:
        return self.log("INFO", key, text, *args)

    def log(self, level: str, key: object, text: str, *args: Any) -> bool:
        now = self._clock()
        with self._lock:
            seen = self._seen
            last = seen.get(key)
            if last is None and len(seen) >= self.max_keys:
                key = self.OVERFLOW
                last = seen.get(key)
            if last is not None and now - last[0] < self.period:
                last[1] += 1
                last[2] = (level, text, args)
                return False
            held = last[1] if last is not None else 0
            seen[key] = [now, 0, None]
        if held:
            text += f" ({held:,} more like this since the last such line)"
        self._emit(level, text, args)
        return True

    def held(self, key: object) -> int:
        """Lines of ``key`` held back since its last one went out."""
        with self._lock:
            last = self._seen.get(key)
            return last[1] if last is not None else 0

    def close(self) -> None:
        """Say, for each key holding lines back, how many (one line each; the
        last held line's text with the count); then forget every key."""
        with self._lock:
            pending = [last for last in self._seen.values() if last[1]]
            self._seen.clear()
        for _, count, (level, text, args) in pending:
            self._emit(level, text + f" ... and {count:,} more like this", args)

    def _emit(self, level: str, text: str, args: tuple[Any, ...]) -> None:
        # every argument that is not a number is escaped (a line stays one line)
        safe = [a if type(a) in (int, float, bool) else shown(a, _ARG_LIMIT) for a in args]
        if self._sink is not None:
            self._sink(level, text, *safe)
        else:
            logger.log(level, text, *safe)


#: the longest argument a rate-limited line shows (a reason may quote a peer's)
_ARG_LIMIT = 1_000
