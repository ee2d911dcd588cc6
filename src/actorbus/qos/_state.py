"""A durable consumer's acknowledged watermarks, one per origin, in a directory.

Theory of operation
-------------------
An exactly-once consumer must not lose its acknowledged watermark (every seq at
or below it was handed to the application and acknowledged) when its process
dies, and must save it *before* the acknowledgement leaves, so saves are on the
delivery path: each one is **one small append and one ``fdatasync``**.

The directory holds two files:

* ``consumer.lock`` — the ``flock`` target, holding the owner's pid.  One
  :class:`ConsumerState` per directory, in any process (a second one, even in
  the same process, is refused and told the pid).  The kernel drops the lock
  when the process dies, so a crashed consumer never blocks its successor.
* ``acked.state`` — an append-only log of saves.  8 bytes of magic
  (``ABQSTAT`` + format version 1), then records back to back, each::

      u32 crc32 (zlib) of the next 4 bytes and the payload
      u32 payload length L
      L bytes: entries, each u16 origin length, the origin (UTF-8), i64 watermark;
               or, for the application's state, u16 0, u32 length, its bytes

  all little-endian.  One record is one :meth:`ConsumerState.save_many` (or
  :meth:`~ConsumerState.save`): it is applied whole or not at all.  The state
  is the last value each origin got, reading records in file order, and the
  last application state a record carried (:attr:`ConsumerState.app_state`:
  saved in the same record as the watermarks it goes with, so a crash keeps
  both or neither).

**Crash safety.**  A crash during an append leaves a torn tail: an incomplete
record or one whose crc32 fails.  Opening reads records up to the first such
one, truncates the file there (logged) and keeps the state they give — always
the state after some prefix of the saves, never a torn value.  A record with a
good crc32 that does not decode cannot come from a crash and raises
:class:`~actorbus.errors.Error` instead of being dropped.

**Compaction.**  When an append would take the file past ``compact_bytes`` (or
twice the size of the current state, whichever is larger), the whole state is
written as one record to ``acked.state.tmp``, fsynced, renamed over
``acked.state`` and the directory fsynced.  A crash before the rename leaves
the old file (the temp file is deleted at the next open), after it the new
one; both hold a complete state.

**Why not a journal.**  A :class:`~actorbus.journal.JournalWriter` would give
the same append + fdatasync, but its retention deletes whole segments by size
or age, which would drop an origin whose last save is old, and without it the
directory grows forever; finding the current state would mean reading every
segment.  The state needs replace-by-key with compaction, which this file gives
in one small file.

The class is not thread-safe: it is used from its consumer actor's dispatcher,
which runs one callback at a time, so it needs no lock.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Final

from .._files import HeldBy, lock_with_pid
from .._log import logger
from ..errors import Error, UsageError

__all__ = ["MAX_APP_STATE", "STATE_FILE_NAME", "STATE_LOCK_NAME", "ConsumerState"]

#: the append-only log of saves inside the state directory.
STATE_FILE_NAME: Final = "acked.state"
#: the lock file inside the state directory.
STATE_LOCK_NAME: Final = "consumer.lock"
#: the file's first bytes: ``ABQSTAT`` and format version 1.
MAGIC: Final = b"ABQSTAT\x01"

_RECORD_HEADER: Final = struct.Struct("<II")
_ORIGIN_LEN: Final = struct.Struct("<H")
_WATERMARK: Final = struct.Struct("<q")
_MAX_ORIGIN_BYTES: Final = 0xFFFF
_APP_LEN: Final = struct.Struct("<I")
#: the largest application state a save takes (it is written at every save)
MAX_APP_STATE: Final = 1 << 20
_MIN_WATERMARK: Final = -1
_MAX_WATERMARK: Final = (1 << 63) - 1
#: the default file size past which a save compacts the file.
DEFAULT_COMPACT_BYTES: Final = 64 << 10

_fdatasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


def _encode_entries(entries: Mapping[str, int], app_state: bytes | None = None) -> bytes:
    parts: list[bytes] = []
    for origin, through in entries.items():
        raw = origin.encode("utf-8")
        parts.append(_ORIGIN_LEN.pack(len(raw)))
        parts.append(raw)
        parts.append(_WATERMARK.pack(through))
    if app_state is not None:
        parts.append(_ORIGIN_LEN.pack(0))
        parts.append(_APP_LEN.pack(len(app_state)))
        parts.append(app_state)
    payload = b"".join(parts)
    length = len(payload).to_bytes(4, "little")
    return (zlib.crc32(payload, zlib.crc32(length))).to_bytes(4, "little") + length + payload


def _entry_bytes(origin: str) -> int:
    return _ORIGIN_LEN.size + len(origin.encode("utf-8")) + _WATERMARK.size


def _decode_entries(payload: bytes) -> tuple[dict[str, int], bytes | None] | str:
    """The entries of one record's payload and the application state it
    carries (None if none), or why it does not decode."""
    out: dict[str, int] = {}
    app_state: bytes | None = None
    at, end = 0, len(payload)
    while at < end:
        if at + _ORIGIN_LEN.size > end:
            return f"an origin length cut at payload byte {at}"
        (n,) = _ORIGIN_LEN.unpack_from(payload, at)
        at += _ORIGIN_LEN.size
        if n == 0:  # the application's state
            if at + _APP_LEN.size > end:
                return f"an application state length cut at payload byte {at}"
            (size,) = _APP_LEN.unpack_from(payload, at)
            at += _APP_LEN.size
            if at + size > end:
                return f"an application state of {size} bytes runs past the payload's {end}"
            app_state = payload[at : at + size]
            at += size
            continue
        if at + n + _WATERMARK.size > end:
            return f"an entry of {n} origin bytes runs past the payload's {end} bytes"
        try:
            origin = payload[at : at + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"an origin that is not UTF-8 ({exc})"
        at += n
        (through,) = _WATERMARK.unpack_from(payload, at)
        at += _WATERMARK.size
        if through < _MIN_WATERMARK:
            return f"watermark {through} of origin {origin!r} is below -1"
        out[origin] = through
    return out, app_state


class ConsumerState:
    """The acknowledged watermark per origin of one durable consumer, kept in
    ``directory`` (created with mode 700 if missing).

    :meth:`save` and :meth:`save_many` return once the new values are on disk
    (written and ``fdatasync``'d); a crash at any instant leaves either the old
    or the new value of every origin a save names, never a torn one.  A second
    :class:`ConsumerState` on the same directory, in this process or another,
    raises :class:`~actorbus.errors.UsageError` naming the holder's pid.  Call
    :meth:`close` (or use it as a context manager) to release the directory.

    ``compact_bytes`` is the file size past which a save rewrites the file as
    one record (see the module docstring).
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, compact_bytes: int = DEFAULT_COMPACT_BYTES
    ) -> None:
        if type(compact_bytes) is not int or compact_bytes < 1:
            raise UsageError(
                f"ConsumerState compact_bytes={compact_bytes!r}: expected an integer >= 1"
            )
        self._dir = Path(directory)
        self._file = self._dir / STATE_FILE_NAME
        self._compact_bytes = compact_bytes
        self._acked: dict[str, int] = {}
        self._app_state: bytes | None = None
        self._fd = -1
        self._lock_fd = -1
        self._size = 0
        #: the size of the state as one record, which compaction would write
        self._state_bytes = _RECORD_HEADER.size
        self._failed = ""
        self._closed = False
        self._saves = 0
        self._compactions = 0
        self._open_directory()
        self._lock()
        try:
            self._recover()
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ public

    @property
    def path(self) -> Path:
        """The state directory."""
        return self._dir

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def saves(self) -> int:
        """How many saves wrote to disk since opening (a save that changed
        nothing writes nothing)."""
        return self._saves

    @property
    def compactions(self) -> int:
        """How many times a save rewrote the file since opening."""
        return self._compactions

    def acked(self, origin: str) -> int:
        """The saved watermark of ``origin``; -1 when nothing was saved for it."""
        return self._acked.get(origin, -1)

    @property
    def app_state(self) -> bytes | None:
        """The application's state saved with the watermarks (None if no save
        carried one)."""
        return self._app_state

    def watermarks(self) -> dict[str, int]:
        """A copy of every saved watermark, by origin."""
        return dict(self._acked)

    def save(self, origin: str, through: int) -> None:
        """Make ``through`` the watermark of ``origin``, durably: it is written
        and fsynced when this returns."""
        self.save_many({origin: through})

    def save_many(self, watermarks: Mapping[str, int], app_state: bytes | None = None) -> None:
        """Save several origins' watermarks (and ``app_state``, the application's
        state that goes with them, when given) with one write and one fsync;
        all of them survive a crash or none does.  Values that are unchanged
        are left out; when none changed nothing is written."""
        self._check_usable()
        changed: dict[str, int] = {}
        for origin, through in watermarks.items():
            self._check_entry(origin, through)
            if self._acked.get(origin) != through:
                changed[origin] = through
        if app_state is not None:
            if type(app_state) is not bytes:
                raise UsageError(
                    f"ConsumerState.save_many() app_state: expected bytes, found "
                    f"{type(app_state).__name__}"
                )
            if len(app_state) > MAX_APP_STATE:
                raise UsageError(
                    f"ConsumerState.save_many() app_state of {len(app_state)} bytes: at most "
                    f"{MAX_APP_STATE} (it is written at every save); keep a summary here and "
                    "the rest where the application keeps its data"
                )
            if app_state == self._app_state:
                app_state = None
        if not changed and app_state is None:
            return
        record = _encode_entries(changed, app_state)
        if self._size + len(record) > max(self._compact_bytes, 2 * self._state_bytes):
            kept = app_state if app_state is not None else self._app_state
            self._compact({**self._acked, **changed}, kept)
        else:
            self._append(record)
        for origin in changed:
            if origin not in self._acked:
                self._state_bytes += _entry_bytes(origin)
        self._acked.update(changed)
        if app_state is not None:
            old = 0 if self._app_state is None else len(self._app_state) + 6
            self._state_bytes += len(app_state) + 6 - old
            self._app_state = app_state
        self._saves += 1

    def close(self) -> None:
        """Release the directory (the saves are already durable).  Idempotent."""
        if not self._closed:
            self._release()

    def __enter__(self) -> ConsumerState:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("failed" if self._failed else "open")
        return f"<ConsumerState {str(self._dir)!r} origins={len(self._acked)} {state}>"

    # ---------------------------------------------------------------- checking

    def _check_usable(self) -> None:
        if self._closed:
            raise UsageError(
                f"ConsumerState for {self._dir} is closed; open a new ConsumerState to save"
            )
        if self._failed:
            raise Error(
                f"ConsumerState for {self._dir} failed earlier ({self._failed}); close it and "
                "open a new ConsumerState, which recovers what is on disk"
            )

    def _check_entry(self, origin: object, through: object) -> None:
        if type(origin) is not str:
            raise UsageError(
                f"ConsumerState.save() origin={origin!r}: expected a str (the publisher's origin)"
            )
        try:
            n = len(origin.encode("utf-8"))
        except UnicodeEncodeError:
            raise UsageError(
                f"ConsumerState.save() origin={origin!r} cannot be encoded as UTF-8"
            ) from None
        if n == 0:
            raise UsageError(
                "ConsumerState.save() origin='': expected a publisher's origin (not empty)"
            )
        if n > _MAX_ORIGIN_BYTES:
            raise UsageError(
                f"ConsumerState.save() origin of {n} UTF-8 bytes: at most "
                f"{_MAX_ORIGIN_BYTES} fit (origin {origin[:40]!r}...)"
            )
        if type(through) is not int or not _MIN_WATERMARK <= through <= _MAX_WATERMARK:
            raise UsageError(
                f"ConsumerState.save() origin {origin!r} through={through!r}: expected an "
                f"integer seq in -1..{_MAX_WATERMARK}"
            )

    # ----------------------------------------------------------------- writing

    def _append(self, record: bytes) -> None:
        try:
            view = memoryview(record)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError as undo:
                self._failed = f"a write failed ({exc}) and truncating it away failed ({undo})"
            raise Error(
                f"saving consumer state to {self._file} failed ({exc}); nothing of this save "
                "was kept — free disk space or fix the file system, then save again"
            ) from exc
        self._sync(self._fd)
        self._size += len(record)

    def _sync(self, fd: int) -> None:
        try:
            _fdatasync(fd)
        except OSError as exc:
            self._failed = f"fsync of {self._file} failed ({exc})"
            raise Error(
                f"fsync of consumer state {self._file} failed ({exc}); the kernel may have "
                "dropped the data, so this ConsumerState stopped — close it and open a new one"
            ) from exc

    def _compact(self, state: Mapping[str, int], app_state: bytes | None) -> None:
        """Replace the file by one holding ``state`` as a single record."""
        record = _encode_entries(state, app_state)
        try:
            fd = self._write_new_file(MAGIC + record)
        except OSError as exc:
            raise Error(
                f"compacting consumer state {self._file} failed ({exc}); the old file is "
                "intact and nothing of this save was kept — free disk space, then save again"
            ) from exc
        os.close(self._fd)
        self._fd = fd
        self._size = len(MAGIC) + len(record)
        self._compactions += 1

    def _write_new_file(self, data: bytes) -> int:
        """Write ``data`` as the state file (temp file, fsync, rename, directory
        fsync) and return a descriptor for appending to it."""
        tmp = self._file.with_name(STATE_FILE_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self._file)
        self._sync_directory()
        return os.open(self._file, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def _sync_directory(self) -> None:
        fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # ------------------------------------------------------- lock and recovery

    def _open_directory(self) -> None:
        if self._dir.exists() and not self._dir.is_dir():
            raise UsageError(
                f"consumer state path {self._dir} is a file, not a directory; give a "
                "directory (it is created if missing)"
            )
        if not self._dir.exists():
            try:
                self._dir.parent.mkdir(parents=True, exist_ok=True)
                self._dir.mkdir(mode=0o700)
                os.chmod(self._dir, 0o700)  # whatever the umask
                parent = os.open(self._dir.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.fsync(parent)
                finally:
                    os.close(parent)
            except FileExistsError:
                pass  # created meanwhile by someone else: the lock decides
            except OSError as exc:
                raise Error(
                    f"cannot create consumer state directory {self._dir} ({exc}); fix the "
                    "path or its parent's permissions"
                ) from exc

    def _lock(self) -> None:
        lock_path = self._dir / STATE_LOCK_NAME
        try:
            self._lock_fd = lock_with_pid(lock_path, 0o600)
        except HeldBy as held:
            raise UsageError(
                f"consumer state {self._dir} is already in use (lock {lock_path} is held "
                f"by pid {held.holder}); two consumers cannot share a state directory — close "
                "the other one, or give each durable consumer its own state_dir"
            ) from None
        except OSError as exc:
            raise Error(f"cannot lock consumer state {lock_path} ({exc})") from exc

    def _release(self) -> None:
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = -1

    def _recover(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._file.with_name(STATE_FILE_NAME + ".tmp"))  # an unfinished compaction
        try:
            data = self._file.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) < len(MAGIC):
            if data != MAGIC[: len(data)]:
                raise self._foreign(data)
            # new, or cut inside the magic (only by hand: it is written by rename)
            self._fd = self._write_new_file(MAGIC)
            self._size = len(MAGIC)
            return
        if data[: len(MAGIC)] != MAGIC:
            raise self._foreign(data)
        at, reason = self._replay(data)
        self._fd = os.open(self._file, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._size = at
        self._state_bytes = len(_encode_entries(self._acked, self._app_state))
        if at < len(data):
            os.ftruncate(self._fd, at)
            _fdatasync(self._fd)
            detail = f"{len(data) - at} bytes at offset {at} ({reason})"
            logger.warning(
                "consumer state {}: truncated a torn tail of {}; the state is the one before it",
                self._file,
                detail,
            )

    def _replay(self, data: bytes) -> tuple[int, str]:
        """Apply the records of ``data`` in order; return where the good ones
        end and, if the file goes on, why the next one is not good."""
        at, end = len(MAGIC), len(data)
        hsize = _RECORD_HEADER.size
        while at < end:
            if at + hsize > end:
                return at, f"{end - at} of {hsize} record header bytes"
            crc, length = _RECORD_HEADER.unpack_from(data, at)
            stop = at + hsize + length
            if stop > end:
                return at, f"{end - stop + length} of {length} payload bytes"
            if zlib.crc32(data[at + hsize : stop], zlib.crc32(data[at + 4 : at + hsize])) != crc:
                return at, "bad crc32"
            entries = _decode_entries(data[at + hsize : stop])
            if isinstance(entries, str):
                raise Error(
                    f"consumer state {self._file}: the record at offset {at} has a good crc32 "
                    f"but {entries}; a crash cannot do that — keep the file for a bug report "
                    "and move it out of the directory (the consumer then starts afresh)"
                )
            acked, app_state = entries
            self._acked.update(acked)
            if app_state is not None:
                self._app_state = app_state
            at = stop
        return at, ""

    def _foreign(self, data: bytes) -> Error:
        return Error(
            f"{self._file} is not a consumer state file (it starts with {data[:8]!r}, not "
            f"{MAGIC!r}); move it away or give the consumer another state_dir"
        )
