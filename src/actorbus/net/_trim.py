"""Giving the memory the C allocator holds free back to the system.

A connection's buffers (its read buffer, a frame it held) are freed when it
ends, but glibc's allocator keeps freed memory for reuse: a node that an attack
made hold a lot would keep it after the attack ended.  The node calls
:func:`release_free_memory` once, a little after links close."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

__all__ = ["TRIM_DELAY", "release_free_memory"]

#: After a link closes, free memory is returned to the system this many
#: seconds later (once for all the links that close meanwhile).
TRIM_DELAY = 1.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on a C library without it."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Give the memory the C allocator holds free back to the system (glibc's
    ``malloc_trim``; nothing elsewhere).  Python's own small-object arenas
    are returned when empty; this covers the buffers above them."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
