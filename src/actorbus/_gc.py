"""The interpreter's cyclic garbage collector while buses are open.

Theory of operation
-------------------
CPython's cyclic collector runs a young-generation pass whenever the count of
container objects allocated, net of those freed, passes a threshold (700 by
default), and every object that survives the pass moves to an older
generation; once enough have piled up there, a full pass walks every container
object of the process.  A bus moving messages makes exactly the objects this
is worst for: a message (a tuple subclass, so always tracked) is allocated by
the thread that decodes or publishes it and lives until the receiving actor's
worker has run it.  Under load thousands wait in mailboxes and link queues,
each young pass promotes them, and the full passes they bring about walk the
whole process: on the subscriber's node of ``benchmarks/remote.py``'s one-way
row the collector takes a large share of the CPU spent per message at the
default threshold, and much less at 10,000 (docs/performance.md, "Figures
measured once", has the figures).

So while at least one :class:`~actorbus.Bus` is open, the young generation's
threshold is raised to :data:`GC_THRESHOLD` (never lowered: a process that set
a higher one keeps it), and put back when the last bus closes, unless someone
changed it meanwhile.  Nothing else changes: the collector still runs, the
older generations' thresholds are untouched, and garbage cycles are still
found, a few thousand allocations later.  ``Bus(gc_threshold=None)`` leaves
the interpreter's settings alone; ``Bus(gc_threshold=N)`` asks for ``N``;
left out, the bus uses its config's ``gc_threshold`` (a properties file's
``gc.threshold`` key, this default when the file does not set it).
Holds are counted per process, under a lock: the first bus to open decides
the threshold the process runs with until every bus is closed.
"""

from __future__ import annotations

import gc
import threading
from typing import Final

from .errors import UsageError

__all__ = ["GC_THRESHOLD", "check_threshold", "hold", "release"]

#: The young generation's threshold while a bus is open (the default of
#: ``BusConfig.gc_threshold``, which ``Bus(gc_threshold=...)`` overrides).
GC_THRESHOLD: Final = 10_000

_lock = threading.Lock()
_holds = 0
#: (thresholds before the first hold, the one set) while held; None when not raised
_saved: tuple[tuple[int, ...], tuple[int, ...]] | None = None


def check_threshold(value: object, name: str = "gc_threshold") -> int | None:
    """``value`` as a threshold (an int >= 1, or None); a UsageError naming it
    ``name`` otherwise."""
    if value is None or (type(value) is int and value >= 1):
        return value
    raise UsageError(
        f"{name}={value!r}: expected an int >= 1 (the young generation's "
        f"threshold while the bus is open; default {GC_THRESHOLD}) or None to "
        f"leave the interpreter's garbage collector settings alone"
    )


def hold(threshold: int) -> None:
    """A bus opened: raise the young generation's threshold to ``threshold`` if it
    is lower (the first hold decides); pair with :func:`release`."""
    global _holds, _saved
    with _lock:
        _holds += 1
        if _holds == 1:
            before = gc.get_threshold()
            if before[0] < threshold:
                gc.set_threshold(threshold, *before[1:])
                _saved = (before, gc.get_threshold())


def release() -> None:
    """A bus closed: the last release puts the threshold back, unless it was
    changed since the first hold."""
    global _holds, _saved
    with _lock:
        if _holds == 0:
            return
        _holds -= 1
        if _holds == 0 and _saved is not None:
            before, mine = _saved
            _saved = None
            if gc.get_threshold() == mine:
                gc.set_threshold(*before)
