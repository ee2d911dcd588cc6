"""Giving the memory the C allocator holds free back to the system.

A connection's buffers (its read buffer, a frame it held) are freed when it
ends, but glibc's allocator keeps freed memory for reuse: a node that an attack
made hold a lot would keep it after the attack ended.  The node calls
:func:`release_free_memory` once, a little after links close.

Large frames are the other half.  glibc serves a large allocation with its own
mapping, returned to the system when freed, but after the first such free it
raises that threshold to the size freed (up to 32 MiB): the next large frames
come from the heap, where they fragment it and stay.  A node with network
services so fixes the threshold (:func:`fix_mmap_threshold`, 512 KiB: above a
read buffer, below a frame an attacker would make big); an operator who set
glibc's ``MALLOC_MMAP_THRESHOLD_`` keeps that choice."""

from __future__ import annotations

import ctypes
import gc
import os
from collections.abc import Callable
from typing import Final

__all__ = [
    "MMAP_THRESHOLD",
    "TRIM_DELAY",
    "fix_mmap_threshold",
    "mmap_threshold_fixed",
    "release_free_memory",
]

#: allocations from this size on get their own mapping, freed back at once
MMAP_THRESHOLD: Final = 512 * 1024
#: mallopt's parameter number for it (glibc's malloc.h)
_M_MMAP_THRESHOLD: Final = -3

#: After a link closes, free memory is returned to the system this many
#: seconds later (once for all the links that close meanwhile): later than
#: a closing connection's grace for its peer's FIN (1 s), whose timer holds
#: the connection until then.
TRIM_DELAY = 1.5


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on a C library without it."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _malloc_trim()
_fixed = False


def mmap_threshold_fixed() -> bool:
    """True once :func:`fix_mmap_threshold` fixed it in this process."""
    return _fixed


def fix_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` (once per process),
    unless the environment sets ``MALLOC_MMAP_THRESHOLD_``; True if it is fixed
    now.  Nothing on a C library without ``mallopt``."""
    global _fixed
    if _fixed:
        return True
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    _fixed = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return _fixed


def release_free_memory() -> None:
    """Free what closed connections left and give the memory back to the system.

    A connection's objects can form reference cycles (the connection, its
    link and its protocol refer to each other), left to the cyclic collector
    when one is not broken as the connection ends: with the young
    generation's threshold a bus raises (:mod:`actorbus._gc`) that can be
    thousands of connections later,
    after they were promoted to the old generation, which is collected rarely
    — a burst of connections would stay.  So a full collection frees them
    first; then glibc's ``malloc_trim`` returns the free memory to the system
    (nothing on another C library; Python's own small-object arenas are
    returned when empty)."""
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
