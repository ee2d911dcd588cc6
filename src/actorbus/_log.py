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

* :class:`RateLimitedLog` lets few lines per key (the peer, or the service,
  and the kind of line) through per period — one, or a small burst while the
  key is quiet — and says how many more like them were held back: in the
  next line let through, in one summary line per period while a flood lasts,
  or at :meth:`RateLimitedLog.close`;
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
    """Few log lines per key per ``period`` seconds; the lines held back are
    counted and said.  Thread-safe.

    Keys are the peer and the kind of line, e.g. ``("node-a", "unexpected")``,
    or the service and the kind for what strangers at a service can repeat
    (``("service feeds", "logged on")``).  Each key has a window of ``period``
    seconds that lets ``burst`` lines through (``log(..., burst=N)``, 1 by
    default); the rest are held back and counted.  A key that held lines back
    is *flooded*: its next windows let one line through each, until a window
    passes with nothing held.  So a flood of any size writes about one line
    per period per key, and a quiet key (a few peers logging on at start)
    shows every line.

    The count held back is said by the next line of the key let through
    ("(1,234 more like this since the last such line)"); with a ``schedule``
    (``schedule(delay, callback)``, e.g. a timer on an event loop) also at the
    end of the window that held them ("(1,234 more like this in the last
    10 s)"), so a flood is summed up once per period while it lasts; and by
    :meth:`close` ("... 1,234 more like this") for a key still holding some.

    Keys may come from a peer, so at most ``max_keys`` are kept: past that the
    lines of a new key share one overflow key (and its limit)."""

    OVERFLOW: tuple[str] = ("(other keys)",)

    def __init__(
        self,
        period: float,
        *,
        max_keys: int = 1_024,
        clock: Any = time.monotonic,
        sink: Any = None,
        schedule: Any = None,
    ) -> None:
        self.period = period
        self.max_keys = max_keys
        self._clock = clock
        #: where lines go: ``sink(level, text, *args)``; loguru by default
        self._sink = sink
        #: ``schedule(delay, callback)``: a window's summary at its end (None: none)
        self._schedule = schedule
        self._lock = threading.Lock()
        #: key -> its window
        self._seen: dict[object, _Window] = {}

    def warning(self, key: object, text: str, *args: Any, burst: int = 1) -> bool:
        """Log ``text.format(*args)`` at WARNING unless ``key`` already let
        ``burst`` lines through in its window; True when it went out."""
        return self.log("WARNING", key, text, *args, burst=burst)

    def info(self, key: object, text: str, *args: Any, burst: int = 1) -> bool:
        return self.log("INFO", key, text, *args, burst=burst)

    def debug(self, key: object, text: str, *args: Any, burst: int = 1) -> bool:
        return self.log("DEBUG", key, text, *args, burst=burst)

    def log(self, level: str, key: object, text: str, *args: Any, burst: int = 1) -> bool:
        now = self._clock()
        due: float | None = None
        with self._lock:
            seen = self._seen
            window = seen.get(key)
            if window is None and len(seen) >= self.max_keys:
                key = self.OVERFLOW
                window = seen.get(key)
            held = 0
            if window is None or now - window.start >= self.period:
                held = window.held if window is not None else 0
                window = seen[key] = _Window(now, flooded=held > 0)
            go = window.sent < (1 if window.flooded else burst)
            if go:
                window.sent += 1
            else:
                window.held += 1
                window.last = (level, text, args)
                if self._schedule is not None and not window.scheduled:
                    window.scheduled = True
                    due = max(0.0, window.start + self.period - now)
        if not go:
            if due is not None:
                summarized = key
                self._schedule(due, lambda: self._summarize(summarized))
            return False
        if held:
            text += f" ({held:,} more like this since the last such line)"
        self._emit(level, text, args)
        return True

    def _summarize(self, key: object) -> None:
        """(``schedule``'s callback) The window of ``key`` is over: say how many
        lines it held back, in one line; its next window lets one line
        through, as the key is flooded."""
        now = self._clock()
        with self._lock:
            window = self._seen.get(key)
            if window is None or not window.held or window.last is None:
                return
            held, (level, text, args) = window.held, window.last
            # the summary is the one line of the next window
            fresh = self._seen[key] = _Window(now, True)
            fresh.sent = 1
        self._emit(level, text + f" ({held:,} more like this in the last {self.period:g} s)", args)

    def held(self, key: object) -> int:
        """Lines of ``key`` held back since its last one went out."""
        with self._lock:
            window = self._seen.get(key)
            return window.held if window is not None else 0

    def close(self) -> None:
        """Say, for each key holding lines back, how many (one line each; the
        last held line's text with the count); then forget every key."""
        with self._lock:
            pending = [w for w in self._seen.values() if w.held and w.last is not None]
            self._seen.clear()
        for window in pending:
            assert window.last is not None
            level, text, args = window.last
            self._emit(level, text + f" ... and {window.held:,} more like this", args)

    def _emit(self, level: str, text: str, args: tuple[Any, ...]) -> None:
        # every argument that is not a number is escaped (a line stays one line)
        safe = [a if type(a) in (int, float, bool) else shown(a, _ARG_LIMIT) for a in args]
        if self._sink is not None:
            self._sink(level, text, *safe)
        else:
            logger.log(level, text, *safe)


class _Window:
    """One key's current window of a :class:`RateLimitedLog`."""

    __slots__ = ("flooded", "held", "last", "scheduled", "sent", "start")

    def __init__(self, start: float, flooded: bool) -> None:
        #: when the window began
        self.start = start
        #: the key held lines back in its previous window: one line per window
        self.flooded = flooded
        #: lines let through, and held back, in this window
        self.sent = 0
        self.held = 0
        #: the last held line's (level, text, args), for the summary
        self.last: tuple[str, str, tuple[Any, ...]] | None = None
        #: a summary at the window's end is scheduled
        self.scheduled = False


#: the longest argument a rate-limited line shows (a reason may quote a peer's)
_ARG_LIMIT = 1_000
