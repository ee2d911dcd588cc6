"""What a multicast channel's reliable messages hold: runs of notifications
and feed state records, as msgpack.

* a **run**: ``[2, number of its first notification, [group, ...]]``, each
  group ``[type name, subject, [body, ...]]``: consecutive notifications on one
  key, each body the codec's wire form.  The type name and subject are written
  once per group, and a group's bodies are packed by one msgpack call (the
  encoding of a run, like the TCP link's NOTIFY_RUN frame); a receiver unpacks
  a datagram's run at once, looks each group's key up once and builds each
  notification with the class's decoder.  A publisher numbers its
  notifications 0, 1, 2 ...: a receiver that sees a run start past the number
  it expects knows exactly how many were lost;
* a **state record**: ``[1, type name, subject, up]`` (``up`` None: the key was
  retracted).

A run stays within one datagram's segment (``limit``) unless one notification
alone is larger: then that notification is a run of its own, which the
protocol segments (up to ``maxMessageSize``).

Used by :mod:`.transport` (and by the benchmark's raw baseline, which sends the
same bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from ...bus import codec
from ...bus.message import Message
from ...errors import CodecError, MessageTooLargeError, UsageError

__all__ = ["RUN", "RUN_HEAD", "STATE", "Encoder", "pack_notifications", "run_record"]

STATE, RUN = 1, 2  # (RUN is written as the byte 0x02 in run_record)
#: bytes of a run record before its groups, at most
RUN_HEAD = 16
#: bytes of a group's ``[`` and its bodies' array header, at most
_GROUP_HEAD = 6
#: keys whose prefix an encoder keeps packed
_MAX_PREFIXES = 4_096
#: what packing a value msgpack or the codec cannot encode raises
_PACK_ERRORS = (ValueError, TypeError, OverflowError, CodecError, UsageError)

#: ``dropped(counter, message, why)``: a notification that cannot be sent
Dropped = Callable[[str, Message, str], None]


def run_record(first: int, groups: Sequence[bytes]) -> bytes:
    """``[2, first, [groups]]`` in msgpack, the groups (msgpack values already) as they are."""
    n = len(groups)
    array = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
    head: bytes = msgpack.packb(first)
    return b"\x93\x02" + head + array + b"".join(groups)


class Encoder:
    """Notifications as run records, on one thread at a time: one msgpack
    Packer reused, each key's ``[type name, subject`` prefix packed once, each
    group's bodies packed at once."""

    def __init__(self) -> None:
        self._pack = msgpack.Packer(default=codec.pack_default).pack
        self._prefixes: dict[tuple[type, str], bytes] = {}

    def _prefix(self, cls: type[Message], subject: str) -> bytes:
        prefix = self._prefixes.get((cls, subject))
        if prefix is None:
            if len(self._prefixes) >= _MAX_PREFIXES:
                self._prefixes.clear()
            pack = self._pack
            prefix = self._prefixes[cls, subject] = (
                b"\x93" + pack(cls.__type_name__) + pack(subject)
            )
        return prefix

    def pack(
        self, messages: Sequence[Message], first: int, limit: int, most: int, dropped: Dropped
    ) -> tuple[list[bytes], int]:
        """``messages`` as run records numbered from ``first``, each within
        ``limit`` bytes but a lone notification larger than that; returns them
        and the number after the last notification packed.  One that cannot be
        encoded, or whose run alone would pass ``most`` bytes, is left out and
        told to ``dropped`` (``"unencodable"`` / ``"too_large"``)."""
        # (a record within limit must be within most too: the protocol refuses more)
        packer = _Packing(self._pack, first, min(limit, most), most, dropped)
        add = packer.add
        bodies: list[Any] = []
        group: list[Message] = []
        run_cls: type[Message] | None = None
        run_subject: str | None = None
        enc: Any = None
        for message in messages:
            cls = message.__class__
            if cls is not run_cls or message.subject != run_subject:
                if group:
                    add(self._prefix(run_cls, run_subject), bodies, group)  # type: ignore[arg-type]
                bodies, group = [], []
                run_cls, run_subject = cls, message.subject
                enc = cls.__wire_encode__
            if enc is None:
                bodies.append(message)  # the message is its own wire form
            else:
                try:
                    bodies.append(enc(message))
                except _PACK_ERRORS as exc:
                    dropped("unencodable", message, str(exc))
                    continue
            group.append(message)
        if group:
            add(self._prefix(run_cls, run_subject), bodies, group)  # type: ignore[arg-type]
        return packer.done()


class _Packing:
    """One :meth:`Encoder.pack` call's records in the making."""

    def __init__(
        self, pack: Callable[[Any], bytes], first: int, limit: int, most: int, dropped: Dropped
    ) -> None:
        self.pack = pack
        self.first = first
        self.limit = limit
        self.most = most
        self.dropped = dropped
        self.records: list[bytes] = []
        self.groups: list[bytes] = []
        self.count = 0
        self.size = RUN_HEAD

    def close(self) -> None:
        if self.groups:
            self.records.append(run_record(self.first, self.groups))
            self.first += self.count
            self.groups, self.count, self.size = [], 0, RUN_HEAD

    def done(self) -> tuple[list[bytes], int]:
        self.close()
        return self.records, self.first

    def add(self, prefix: bytes, bodies: list[Any], messages: list[Message]) -> None:
        """One key's consecutive notifications (their bodies), in as few groups
        as fit the records.  A group's share of a record is judged by the bytes
        per body packed so far, then packed (one call) and checked: no body is
        packed more than a few times, however many are queued."""
        pack = self.pack
        pos, n = 0, len(bodies)
        per_body = 0.0
        while pos < n:
            room = self.limit - self.size - len(prefix) - _GROUP_HEAD
            try:
                if not per_body:
                    per_body = float(len(pack(bodies[pos])))
                k = min(n - pos, max(1, int(room / per_body)))
                packed = pack(bodies[pos : pos + k])
                # shrink until it fits; then grow while the estimate says more fit
                while len(packed) > room and k > 0:
                    k = min(k - 1, k * max(room, 0) // len(packed))
                    if k > 0:
                        packed = pack(bodies[pos : pos + k])
                for _ in range(3):
                    if k == 0 or pos + k >= n:
                        break
                    more = int((room - len(packed)) / (len(packed) / k))
                    if more < 1:
                        break
                    bigger = pack(bodies[pos : pos + k + more])
                    if len(bigger) > room:
                        break
                    k, packed = k + more, bigger
            except _PACK_ERRORS:
                # some body cannot be encoded: find it (each alone), go on with the rest
                self._refuse_unencodable(prefix, bodies[pos:], messages[pos:])
                return
            if k == 0:
                if self.groups:  # a fresh record has the room
                    self.close()
                    continue
                packed = pack(bodies[pos : pos + 1])  # larger than a datagram: a run of its own
                k = 1
                if RUN_HEAD + len(prefix) + len(packed) > self.most:
                    self.dropped(
                        "too_large",
                        messages[pos],
                        f"{len(prefix) + len(packed)} bytes, over "
                        f"{self.most - RUN_HEAD} (with a run's head)",
                    )
                    pos += 1
                    per_body = 0.0
                    continue
            per_body = len(packed) / k
            self.groups.append(prefix + packed)
            self.count += k
            self.size += len(prefix) + len(packed)
            pos += k
            if pos < n or self.size >= self.limit:
                self.close()  # the rest goes in the next record

    def _refuse_unencodable(
        self, prefix: bytes, bodies: list[Any], messages: list[Message]
    ) -> None:
        pack = self.pack
        good_bodies: list[Any] = []
        good: list[Message] = []
        for body, message in zip(bodies, messages, strict=True):
            try:
                pack(body)
            except _PACK_ERRORS as exc:  # lone surrogates, msgpack's limits
                self.dropped("unencodable", message, str(exc))
                continue
            good_bodies.append(body)
            good.append(message)
        if good:
            self.add(prefix, good_bodies, good)


def _raise(counter: str, message: Message, why: str) -> None:
    text = (
        f"{type(message).__qualname__} on subject {message.subject!r} cannot be sent on a "
        f"multicast channel: {why}"
    )
    if counter == "too_large":
        raise MessageTooLargeError(
            text + "; send less data per message or raise maxMessageSize on every node of "
            "the channel"
        )
    raise CodecError(text)


def pack_notifications(
    messages: Sequence[Message], limit: int, first: int = 0, max_size: int = 1 << 20
) -> list[bytes]:
    """``messages`` as the channel's run records, numbered from ``first``,
    each within ``limit`` bytes (one datagram's segment) but a lone
    notification larger than that (it is segmented).  Raises
    :class:`~actorbus.errors.MessageTooLargeError` for one whose run alone
    would pass ``max_size`` (the channel's ``maxMessageSize``),
    :class:`~actorbus.errors.CodecError` for one that cannot be encoded."""
    records, _ = Encoder().pack(messages, first, limit, max_size, _raise)
    return records
