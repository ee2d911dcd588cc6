"""What a multicast channel's reliable messages hold: runs of notifications
and feed state records, as msgpack.

* a **run**: ``[2, number of its first notification, [item, ...]]``, each item
  ``[type name, subject, body]`` with the body embedded as the codec's wire
  form (:func:`notification_item`), so a receiver unpacks a datagram's run at
  once and builds each notification with ``codec.from_wire``.  A publisher
  numbers its notifications 0, 1, 2 ...: a receiver that sees a run start past
  the number it expects knows exactly how many were lost;
* a **state record**: ``[1, type name, subject, up]`` (``up`` None: the key was
  retracted).

Used by :mod:`.transport` (and by the benchmark's raw baseline, which sends the
same bytes).
"""

from __future__ import annotations

import msgpack

from ...bus import codec
from ...bus.message import Message
from ...errors import CodecError, MessageTooLargeError

__all__ = [
    "RUN",
    "RUN_HEAD",
    "STATE",
    "Encoder",
    "notification_item",
    "pack_notifications",
    "run_record",
]

STATE, RUN = 1, 2  # (RUN is written as the byte 0x02 in run_record)
#: bytes of a run record before its items, at most
RUN_HEAD = 16
#: keys whose prefix an encoder keeps packed
_MAX_PREFIXES = 4_096


def notification_item(message: Message, max_size: int) -> bytes:
    """One notification as a run holds it: the msgpack array ``[type name,
    subject, body]``, the body embedded as the codec's wire form (so a receiver
    unpacks a whole run at once)."""
    try:
        item: bytes = msgpack.packb(
            [type(message).__type_name__, message.subject, codec.to_wire(message)],
            default=codec.pack_default,
        )
    except ValueError as exc:  # lone surrogates; msgpack's size and depth limits
        raise CodecError(f"cannot encode {type(message).__qualname__}: {exc}") from exc
    if len(item) > max_size - RUN_HEAD:  # a run of it alone must fit
        raise MessageTooLargeError(
            f"{type(message).__qualname__} on subject {message.subject!r} encodes to "
            f"{len(item)} bytes, over the channel's maxMessageSize of {max_size} (less "
            f"{RUN_HEAD}); send less data per message or raise maxMessageSize on every node "
            f"of the channel"
        )
    return item


def pack_notifications(items: list[bytes], limit: int, first: int = 0) -> list[bytes]:
    """Notifications (:func:`notification_item` each) as the channel's run
    records ``[2, number of the run's first notification, [item, ...]]``,
    numbered from ``first``: consecutive ones together while a record stays
    within ``limit`` bytes (one datagram's segment), a larger one alone (it is
    segmented)."""
    records: list[bytes] = []
    run: list[bytes] = []
    size = RUN_HEAD
    for item in items:
        if run and size + len(item) > limit:
            records.append(run_record(first, run))
            first += len(run)
            run, size = [], RUN_HEAD
        run.append(item)
        size += len(item)
    if run:
        records.append(run_record(first, run))
    return records


def run_record(first: int, items: list[bytes]) -> bytes:
    """``[2, first, [items]]`` in msgpack, the items (msgpack values already) as they are."""
    n = len(items)
    array = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
    head: bytes = msgpack.packb(first)
    return b"\x93\x02" + head + array + b"".join(items)


class Encoder:
    """Notifications as run items (the bytes :func:`notification_item` makes), on
    the channel's thread: one msgpack Packer reused, each key's ``[type name,
    subject`` prefix packed once."""

    def __init__(self) -> None:
        self._pack = msgpack.Packer(default=codec.pack_default).pack
        self._prefixes: dict[tuple[type, str], bytes] = {}

    def item(self, message: Message) -> bytes:
        cls = type(message)
        subject = message.subject
        prefix = self._prefixes.get((cls, subject))
        if prefix is None:
            if len(self._prefixes) >= _MAX_PREFIXES:
                self._prefixes.clear()
            pack = self._pack
            prefix = self._prefixes[cls, subject] = (
                b"\x93" + pack(cls.__type_name__) + pack(subject)
            )
        enc = cls.__wire_encode__
        item: bytes = prefix + self._pack(message if enc is None else enc(message))
        return item
