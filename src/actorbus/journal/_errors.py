"""The journal's exceptions, all under :class:`actorbus.Error`.

* :class:`JournalError` — root; also raised for I/O failures (disk full, fsync
  failed) with the ``OSError`` in ``__cause__``.
* :class:`JournalUsageError` — the calling code misused the API (bad argument,
  closed writer); also a :class:`~actorbus.UsageError`.
* :class:`JournalLockedError` — a second writer tried to open a directory.
* :class:`JournalCorruptError` — the files contradict the format in a way a
  crash cannot explain (damaged sealed segment, foreign files, missing middle
  segment).  Recovery never "repairs" these silently.
* :class:`RecordsDeletedError` — a read asked for records retention already
  deleted; ``first_seq`` says where the journal starts now.
"""

from __future__ import annotations

from ..errors import Error, UsageError

__all__ = [
    "JournalCorruptError",
    "JournalError",
    "JournalLockedError",
    "JournalUsageError",
    "RecordsDeletedError",
]


class JournalError(Error):
    """Something went wrong reading or writing a journal directory."""


class JournalUsageError(JournalError, UsageError):
    """The journal API was called wrongly: a bad argument or a closed writer."""


class JournalLockedError(JournalUsageError):
    """Another :class:`JournalWriter` holds the directory's writer lock.

    A journal has exactly one writer; readers need no lock.
    """


class JournalCorruptError(JournalError):
    """Journal files are damaged or inconsistent beyond what a crash explains.

    ``path`` names the file or directory; the message says what was found.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class RecordsDeletedError(JournalError):
    """A read started below the journal's first seq: retention deleted those records.

    ``first_seq`` is where the journal starts now; resume from there (and accept
    the loss) or keep more with a larger :class:`Retention`.
    """

    def __init__(self, message: str, *, requested: int, first_seq: int) -> None:
        super().__init__(message)
        self.requested = requested
        self.first_seq = first_seq
