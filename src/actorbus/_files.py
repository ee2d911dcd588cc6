"""A directory's lock for its one writer: an exclusive ``flock`` on a file that
holds the owner's pid (the journal's writer, a QoS consumer's state).

The kernel drops the lock when its descriptor closes or its process dies, so
a crashed owner never blocks its successor; the pid in the file is only what a
refused second owner is told."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

__all__ = ["HeldBy", "lock_with_pid"]


class HeldBy(Exception):
    """The lock is held; ``holder`` is the pid its file names ("unknown" if none)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def lock_with_pid(path: Path, mode: int) -> int:
    """Lock ``path`` (created with ``mode`` if missing) for this process and
    write its pid there; returns the descriptor, whose closing releases it.
    Raises :class:`HeldBy` when another descriptor holds it, ``OSError`` when
    the file cannot be opened or locked."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise HeldBy(holder) from None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd
