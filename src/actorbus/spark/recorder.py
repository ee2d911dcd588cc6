"""The recorder actor: every notification of its keys, appended to a journal directory.

Theory of operation
-------------------
A :class:`Recorder` subscribes to a list of message keys.  Its notification
callback only encodes the message and appends a record tuple to a list in
memory — no I/O per message.  The list becomes one journal frame (one
``append_many``: one ``write``, one crc32 and, with the default
:meth:`SyncPolicy.batch <actorbus.journal.SyncPolicy.batch>`, one fsync) when
``flush_records`` are pending, and on a repeating timer every
``flush_interval`` seconds, so a quiet feed still reaches readers within that
time.  Everything runs on the recorder's own dispatcher, so the journal
writer (which is not thread-safe) needs no lock.

Shutdown closes the subscriptions, flushes what is pending and closes the
writer.  Records still pending when the *process* dies are lost — at most
``flush_records`` or ``flush_interval`` worth; what was flushed survives
according to the sync policy (docs/journal.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._log import logger
from ..actors import Actor, TimerHandle
from ..bus.codec import encode
from ..bus.feeds import SubscribeFeed
from ..bus.message import MessageKey, Notification
from ..bus.scope import Scope
from ..errors import UsageError
from ..journal import JournalError, JournalWriter, Retention, SyncPolicy

__all__ = ["Recorder"]

KeyLike = MessageKey | tuple[type[Notification], str]


def _keys(keys: Iterable[KeyLike]) -> list[MessageKey]:
    out: list[MessageKey] = []
    for key in keys:
        if isinstance(key, MessageKey) or (isinstance(key, tuple) and len(key) == 2):
            cls, subject = key
        else:
            raise UsageError(
                f"Recorder key {key!r}: expected a MessageKey or a (Notification class, "
                "subject) tuple"
            )
        if not (isinstance(cls, type) and issubclass(cls, Notification)):
            raise UsageError(
                f"Recorder key {key!r}: {cls!r} is not a Notification class; the recorder "
                "records notifications"
            )
        if not isinstance(subject, str):
            raise UsageError(f"Recorder key {key!r}: the subject must be a str")
        mk = MessageKey(cls, subject)
        if mk not in out:
            out.append(mk)
    if not out:
        raise UsageError("Recorder needs at least one key to record")
    return out


class Recorder(Actor):
    """Appends every notification of ``keys`` to the journal in directory ``path``.

    ``keys`` are :class:`~actorbus.MessageKey`\\ s or ``(class, subject)``
    tuples.  The journal directory is created if missing; a second recorder on
    the same directory fails to start (``JournalLockedError``).  ``sync``,
    ``segment_bytes`` and ``retention`` go to the
    :class:`~actorbus.journal.JournalWriter`.

    Read :attr:`recorded`, :attr:`last_seq` and :attr:`pending` from any
    thread (plain ints, updated on the recorder's dispatcher); call
    :meth:`flush_and_wait` from outside the actor to make sure everything
    delivered so far is written.
    """

    def __init__(
        self,
        path: str | Path,
        keys: Iterable[KeyLike],
        *,
        name: str | None = None,
        flush_records: int = 4096,
        flush_interval: float = 0.05,
        sync: SyncPolicy | None = None,
        segment_bytes: int = 64 << 20,
        retention: Retention | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        max_pending: int = 1_000_000,
    ) -> None:
        super().__init__(name)
        if type(flush_records) is not int or flush_records < 1:
            raise UsageError(f"Recorder flush_records={flush_records!r}: expected an int >= 1")
        if not (isinstance(flush_interval, (int, float)) and flush_interval > 0):
            raise UsageError(f"Recorder flush_interval={flush_interval!r}: expected seconds > 0")
        if type(max_pending) is not int or max_pending < flush_records:
            raise UsageError(
                f"Recorder max_pending={max_pending!r}: expected an int >= flush_records "
                f"({flush_records})"
            )
        self.path = Path(path)
        self.keys = _keys(keys)
        self.flush_records = flush_records
        self.flush_interval = float(flush_interval)
        self.scope = scope
        self.max_pending = max_pending
        self._sync = sync if sync is not None else SyncPolicy.batch()
        self._segment_bytes = segment_bytes
        self._retention = retention
        self._writer: JournalWriter | None = None
        self._feeds: list[SubscribeFeed[Any]] = []
        self._timer: TimerHandle | None = None
        self._pending: list[tuple[str, str, int, bytes]] = []
        #: records written to the journal by this recorder.
        self.recorded = 0
        #: records lost because the journal kept failing and max_pending was reached.
        self.dropped = 0
        #: the seq of the last record written (0 before the first).
        self.last_seq = 0

    @property
    def pending(self) -> int:
        """Records received and not yet written."""
        return len(self._pending)

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        self._writer = JournalWriter(
            self.path,
            sync=self._sync,
            segment_bytes=self._segment_bytes,
            retention=self._retention,
        )
        self.last_seq = self._writer.last_seq
        for key in self.keys:
            self._feeds.append(
                self.subscribe(
                    key.message_class, key.subject, on_message=self._record, scope=self.scope
                )
            )
        self._timer = self.schedule_every(self.flush_interval, self.flush)

    def shutdown(self) -> None:
        for feed in self._feeds:
            feed.close()
        self._feeds.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        writer = self._writer
        if writer is None:
            return
        try:
            self.flush()
        finally:
            self._writer = None
            writer.close()

    # ------------------------------------------------------------------ recording

    def _record(self, message: Notification, feed: SubscribeFeed[Any]) -> None:
        pending = self._pending
        pending.append(
            (type(message).__type_name__, message.subject, message.timestamp, encode(message))
        )
        if len(pending) >= self.flush_records:
            self.flush()

    def flush(self) -> None:
        """Write what is pending as one journal frame (runs on the recorder's dispatcher)."""
        pending = self._pending
        writer = self._writer
        if writer is None:
            return
        if not pending:
            writer.sync_if_due()
            return
        try:
            seqs = writer.append_many(pending)
        except JournalError as exc:
            if len(pending) >= self.max_pending:
                self.dropped += len(pending)
                logger.error(
                    "recorder {}: journal {} keeps failing ({}); dropped {} records",
                    self.name,
                    self.path,
                    exc,
                    len(pending),
                )
                self._pending = []
            else:
                logger.error(
                    "recorder {}: journal {} write failed ({}); {} records kept for the next flush",
                    self.name,
                    self.path,
                    exc,
                    len(pending),
                )
            return
        self._pending = []
        self.recorded += len(seqs)
        self.last_seq = seqs[-1]

    def flush_and_wait(self, timeout: float = 10.0) -> int:
        """From outside the actor: flush everything delivered to the recorder so far,
        wait for it, and return the last seq written.  Raises TimeoutError."""
        done = threading.Event()

        def task() -> None:
            try:
                self.flush()
            finally:
                done.set()

        self.post(task)
        if not done.wait(timeout):
            raise TimeoutError(
                f"recorder {self.name}: flush not done within {timeout:g} s; is its "
                "dispatcher stuck?"
            )
        return self.last_seq
