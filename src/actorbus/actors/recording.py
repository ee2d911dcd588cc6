"""Recording one actor: every task delivered to it, and what it published.

Theory of operation
-------------------
Every call into an actor is a task in its mailbox.  To record an actor, its
mailbox is *watched* (:meth:`ActorRuntime.watch`, :meth:`Mailbox.watch`): the
worker runs each task through :meth:`ActorRecorder.run`, on the actor's thread, in
mailbox order, at the moment it is delivered.  The recorder names the task —
startup, shutdown, a message, a feed status, a request, a reply, a cancel, a
timer firing, the feed's key and role, the message encoded with the codec, the
state, the timer's callback — stamps it with the monotonic and wall clocks,
runs it, and collects what the task caused: the messages the actor published
(its publish feeds are :class:`~actorbus.bus.feeds.WatchedPublishFeed` while it
is recorded), the requests it sent (its request feeds are
:class:`~actorbus.bus.feeds.WatchedRequestFeed`), the replies its repliers sent
(its reply feeds are given the recorder's :meth:`ActorRecorder.replied`) and,
for an actor with an ``fsm_trace`` list (an FsmActor), the machine's
transitions.  One record per task goes to the sink.

:class:`RecordingFile` is the sink that writes the file: a buffered writer of
64 KiB, written to on the actor's thread (one OS write per 64 KiB of records,
never one per message) and flushed by :meth:`RecordingFile.close` (a clean
shutdown loses nothing).  Nothing else pays: an actor that is not recorded has
a plain deque and plain publish and request feeds (a reply costs every replier
one test of its feed's watch, None).

The file
--------
``MAGIC`` (8 bytes), then frames: a 4-byte big-endian body length, the body's
CRC-32 (4 bytes), the body (msgpack).  The first frame is the header: a map
``{"version", "actor", "name", "kwargs"}`` (the actor's class as
``module:qualname``, its name, the constructor keywords given to the recording,
or None).  Every other frame is one delivered task, a map of:

``kind``    startup, shutdown, message, status, congestion, request, cancel,
            reply, timer, or task (anything else posted to the actor)
``role``    the feed's role: publish, subscribe, request or reply (feed kinds)
``type``    the message class's type name, ``subject`` the subject, ``scope``
            the feed's scope name (feed kinds)
``body``    the message (message, request, cancel, reply) encoded with the codec, or None
``state``   UP or DOWN (status), True/False (congestion), the replies still
            due (reply)
``timer``   the timer's callback (timer), or the task's (task)
``mono``    ``time.monotonic_ns()``, ``wall`` ``time.time_ns()`` at delivery
``n``       (request, cancel, reply) the request's number on its key
``reply``   (reply) the reply's class's type name, ``status`` its status
``out``     what the task published: ``[type name, subject, body]`` each
``req``     the requests it sent, ``[type name, subject, n, body]`` each (only
            when there are some)
``rep``     the replies its repliers sent, ``[type name, subject, n, reply
            type name, body, status]`` each (only when there are some)
``fsm``     the machine's steps it took: ``[event, state]`` each

Requests are numbered per key, from 0, in order: those the actor's repliers
take in the order their tasks run, those it sends in the order it sends them.
A cancel, a reply it sends and a reply it is given name their request by that
number, so a request answered in a later task, or by a stream of replies over
many tasks, is still tied to it; a replay numbers its requests the same way.

Why not the journal: a journal is a directory of segments with a lock,
recovery and retention, made for many records of one message class read back
by offset; a recording is one file of mixed records, read once from the start.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from actorbus.actors.actor import Actor
from actorbus.actors.mailbox import unpack_task
from actorbus.actors.timers import TimerHandle
from actorbus.bus import codec
from actorbus.bus.feeds import (
    Feed,
    IncomingRequest,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    Stamped,
    SubscribeFeed,
)
from actorbus.bus.message import Message, Reply, ReplyStatus
from actorbus.errors import RecordingError

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "ActorRecorder",
    "RecordingError",
    "RecordingFile",
    "RecordingHeader",
    "class_path",
    "describe",
    "read_recording",
]

#: the first bytes of a recording file
MAGIC = b"ABREC\x00\r\n"
#: the version of the records' layout the header names
FORMAT_VERSION = 1
_FRAME_HEAD = 8
#: a frame longer than this is damage, not a record
_MAX_FRAME = 64 * 1024 * 1024
_BUFFER = 64 * 1024

#: the feeds' delivery tasks (their method names, as the feed classes name them;
#: a :class:`Stamped` delivery's with a leading underscore) -> the kind of input
#: each delivers (a test checks every feed class's tasks are here)
_FEED_TASKS: Mapping[str, str] = {
    "_deliver": "message",
    "_deliver_if": "message",
    "_fire_status": "status",
    "_fire_congestion": "congestion",
    "_deliver_request": "request",
    "_deliver_cancel": "cancel",
    "_deliver_reply": "reply",
}
#: the deliveries that run nothing once their feed is retracted or closed
_PLACED_ONLY = frozenset(("message", "status"))
#: the runtime's lifecycle tasks -> their kind
_LIFECYCLE_TASKS: Mapping[str, str] = {"_startup_task": "startup", "_shutdown_task": "shutdown"}
_ROLES: tuple[tuple[type[Feed], str], ...] = (
    (PublishFeed, "publish"),
    (SubscribeFeed, "subscribe"),
    (RequestFeed, "request"),
    (ReplyFeed, "reply"),
)


def class_path(cls: type) -> str:
    """``module:qualname`` of ``cls``: what a recording names its actor's class by."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _label(fn: object) -> str:
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__name__


def _encoded(message: object) -> bytes | None:
    return codec.encode(message) if isinstance(message, Message) else None


def describe(fn: Callable[[Any], object], arg: Any) -> dict[str, Any] | None:
    """The record of the task ``fn(arg)`` as the mailbox holds it (no clocks, no
    outputs); None for a message or status delivered after its feed was
    retracted or closed, which runs no callback (it is no input of the actor's)."""
    fn, args = unpack_task(fn, arg)
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    if isinstance(owner, Stamped):  # a delivery stamped with its publisher's Sender
        owner, name = owner.target_feed, f"_{name}"
    if isinstance(owner, TimerHandle):
        return {"kind": "timer", "timer": owner.label}
    if isinstance(owner, Feed) and name in _FEED_TASKS and len(args) == 1:
        kind = _FEED_TASKS[name]
        if kind in _PLACED_ONLY and not owner.is_placed:
            return None
        if (kind == "reply" and args[0][0].is_cancelled) or (
            kind == "request" and not args[0].is_active
        ):
            return None  # a reply to a request it cancelled, a request cancelled before it ran
        return _feed_record(owner, kind, args[0])
    lifecycle = _LIFECYCLE_TASKS.get(name)
    if lifecycle is not None:
        return {"kind": lifecycle}
    return {"kind": "task", "timer": _label(fn)}


def _feed_record(feed: Feed, kind: str, arg: Any) -> dict[str, Any]:
    key = feed.key
    record: dict[str, Any] = {
        "kind": kind,
        "role": next(role for cls, role in _ROLES if isinstance(feed, cls)),
        "type": key.type_name,
        "subject": key.subject,
        "scope": feed.scope.name,
    }
    if kind == "message":
        record["subject"] = arg.subject
        record["body"] = _encoded(arg)
    elif kind == "status":
        record["state"] = "UP" if arg else "DOWN"
    elif kind == "congestion":
        record["state"] = bool(arg)
    elif kind in ("request", "cancel"):
        record["body"] = _encoded(arg.request)
    else:  # reply: (handle, reply, remaining, sender)
        record["body"] = _encoded(arg[1])
        record["state"] = arg[2]
    return record


class ActorRecorder:
    """Watches one actor's mailbox (a :class:`~actorbus.actors.mailbox.TaskWatcher`):
    each delivered task becomes one record handed to ``sink``, with what it
    published, requested and replied.

    ``clock`` and ``wall`` (nanoseconds) stamp each record; a replay hands in
    its fake clock."""

    def __init__(
        self,
        actor: Actor,
        sink: Callable[[dict[str, Any]], object],
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        wall: Callable[[], int] = time.time_ns,
    ) -> None:
        self.actor = actor
        self.sink = sink
        self.clock = clock
        self.wall = wall
        #: records handed to the sink
        self.count = 0
        #: the wall time stamped on the task being run (``Actor.now_ms`` reads it)
        self.wall_ns: int | None = None
        self._outputs: list[list[Any]] | None = None
        self._requests: list[list[Any]] | None = None
        self._replies: list[list[Any]] | None = None
        #: the requests taken by its repliers: (type, subject, request id) -> number
        self._received: dict[tuple[str, str, int], int] = {}
        self._received_count: dict[tuple[str, str], int] = {}
        #: the requests it sent and still waits on: request id -> number
        self._sent: dict[int, int] = {}
        self._sent_count: dict[tuple[str, str], int] = {}
        if getattr(actor, "fsm_trace", False) is None:
            actor.fsm_trace = []  # type: ignore[attr-defined]  # an FsmActor: trace its steps

    def run(self, fn: Callable[[Any], object], arg: Any) -> object:
        """Record the task ``fn(arg)``, run it, hand the record to the sink."""
        record = describe(fn, arg)
        if record is None:
            return fn(arg)
        if record["kind"] in ("request", "cancel", "reply"):
            self._link(record, unpack_task(fn, arg)[1][0])
        record["mono"] = self.clock()
        record["wall"] = self.wall_ns = self.wall()
        outputs: list[list[Any]] = []
        requests: list[list[Any]] = []
        replies: list[list[Any]] = []
        self._outputs, self._requests, self._replies = outputs, requests, replies
        try:
            return fn(arg)
        finally:
            self._outputs = self._requests = self._replies = None
            self.wall_ns = None
            record["out"] = outputs
            if requests:
                record["req"] = requests
            if replies:
                record["rep"] = replies
            trace = getattr(self.actor, "fsm_trace", None)
            if trace:
                record["fsm"] = [[str(event), str(state)] for event, state in trace]
                trace.clear()
            else:
                record["fsm"] = []
            self.count += 1
            self.sink(record)

    def _link(self, record: dict[str, Any], arg: Any) -> None:
        """Number a request (per key, in order of arrival) and name by that
        number the request a cancel or a reply is about (the rule in the module notes)."""
        key = (record["type"], record["subject"])
        if record["kind"] == "reply":  # (handle, reply, remaining, sender) to a request sent
            handle, reply, remaining = arg[0], arg[1], arg[2]
            record["n"] = self._sent.get(handle.id)
            record["reply"] = type(reply).__type_name__
            record["status"] = reply.status.name
            if remaining == 0:
                self._sent.pop(handle.id, None)
        elif record["kind"] == "request":
            n = self._received_count.get(key, 0)
            self._received_count[key] = n + 1
            self._received[(*key, arg.id)] = n
            record["n"] = n
        else:  # a cancel of a request taken
            record["n"] = self._received.pop((*key, arg.id), None)

    def published(self, feed: PublishFeed[Any], message: Any) -> None:
        """(the actor's watched publish feeds) ``message`` is being published."""
        outputs = self._outputs
        if outputs is not None:  # else published outside its tasks: no task's output
            key = feed.key
            outputs.append([key.type_name, message.subject, codec.encode(message)])

    def requested(self, feed: RequestFeed[Any], handle: RequestHandle[Any]) -> None:
        """(the actor's watched request feeds) the request of ``handle`` was sent:
        it is numbered on its key, so the replies to it name it."""
        key = feed.key
        n = self._sent_count.get((key.type_name, key.subject), 0)
        self._sent_count[(key.type_name, key.subject)] = n + 1
        self._sent[handle.id] = n  # its replies may be in the mailbox already: keep it
        requests = self._requests
        if requests is not None:
            requests.append([key.type_name, key.subject, n, codec.encode(handle.request)])

    def replied(self, incoming: IncomingRequest[Any], reply: Reply) -> None:
        """(the actor's repliers) ``reply`` answers ``incoming``: an output of the
        task being run, naming the request by its number."""
        key = incoming.feed.key
        where = (key.type_name, key.subject, incoming.id)
        final = reply.status is not ReplyStatus.OK_CONTINUING
        n = self._received.pop(where, None) if final else self._received.get(where)
        replies = self._replies
        if replies is not None:
            replies.append(
                [
                    key.type_name,
                    key.subject,
                    n,
                    type(reply).__type_name__,
                    codec.encode(reply),
                    reply.status.name,
                ]
            )


def _frame(obj: object) -> bytes:
    body: bytes = msgpack.packb(obj, use_bin_type=True)
    return len(body).to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body


class RecordingFile:
    """The sink that writes a recording file (see the module notes): ``write``
    from the actor's thread, ``close`` once (flushes; later records are dropped)."""

    def __init__(
        self, path: str | os.PathLike[str], actor: Actor, kwargs: Mapping[str, Any] | None
    ) -> None:
        self.path = Path(path)
        header = {
            "version": FORMAT_VERSION,
            "actor": class_path(type(actor)),
            "name": actor.name,
            "kwargs": dict(kwargs) if kwargs is not None else None,
        }
        try:
            frame = _frame(header)
        except TypeError as exc:
            raise RecordingError(
                f"cannot record actor {actor.name!r} with kwargs={kwargs!r}: {exc}; give "
                f"constructor keywords that are strings, numbers, booleans or None"
            ) from exc
        self._lock = threading.Lock()
        self._file: BinaryIO | None = open(self.path, "wb", buffering=_BUFFER)  # noqa: SIM115
        self._file.write(MAGIC + frame)
        #: records written
        self.records = 0

    def write(self, record: dict[str, Any]) -> None:
        frame = _frame(record)
        with self._lock:
            if self._file is not None:
                self._file.write(frame)
                self.records += 1

    def close(self) -> None:
        """Flush and close the file.  Closing twice is harmless."""
        with self._lock:
            file, self._file = self._file, None
        if file is not None:
            file.close()

    @property
    def closed(self) -> bool:
        return self._file is None


@dataclass(frozen=True)
class RecordingHeader:
    """What a recording says of its actor."""

    version: int
    #: the actor's class, ``module:qualname``
    actor: str
    name: str
    #: the constructor keywords given to the recording, or None
    kwargs: dict[str, Any] | None


def _frames(data: bytes, where: str) -> Iterator[tuple[int, Any]]:
    offset = len(MAGIC)
    while offset < len(data):
        if len(data) - offset < _FRAME_HEAD:
            raise RecordingError(
                f"{where}: truncated at byte {offset}: {len(data) - offset} bytes left, "
                f"a frame needs an {_FRAME_HEAD}-byte head; the recording was cut short "
                f"(was it closed?)"
            )
        size = int.from_bytes(data[offset : offset + 4], "big")
        crc = int.from_bytes(data[offset + 4 : offset + 8], "big")
        start = offset + _FRAME_HEAD
        if size > _MAX_FRAME or start + size > len(data):
            raise RecordingError(
                f"{where}: truncated or damaged at byte {offset}: the frame there says "
                f"{size} bytes, {len(data) - start} are left; the file is damaged or was cut short"
            )
        body = data[start : start + size]
        if zlib.crc32(body) != crc:
            raise RecordingError(
                f"{where}: damaged at byte {offset}: the frame's CRC-32 is {crc:#010x}, its "
                f"body's is {zlib.crc32(body):#010x}; the file was altered"
            )
        try:
            obj = msgpack.unpackb(body, raw=False)
        except (ValueError, msgpack.UnpackException) as exc:
            raise RecordingError(f"{where}: damaged at byte {offset}: {exc}") from exc
        yield offset, obj
        offset = start + size


_RECORD_KEYS = ("kind", "mono", "wall", "out", "fsm")


def read_recording(path: str | Path) -> tuple[RecordingHeader, list[dict[str, Any]]]:
    """The header and records of a recording file.  Raises RecordingError naming the
    byte where it is damaged, truncated or not a recording."""
    where = str(path)
    data = Path(path).read_bytes()
    if not data.startswith(MAGIC):
        raise RecordingError(
            f"{where}: not an actor recording (it does not start with {MAGIC!r}); record "
            f"one with bus.record(actor, path) or actor.NAME.recordTo"
        )
    frames = _frames(data, where)
    first = next(frames, None)
    if first is None or not isinstance(first[1], dict):
        raise RecordingError(f"{where}: no header after the magic bytes; the file is damaged")
    head = first[1]
    if head.get("version") != FORMAT_VERSION:
        raise RecordingError(
            f"{where}: recording version {head.get('version')!r}; this actorbus reads "
            f"version {FORMAT_VERSION}"
        )
    kwargs = head.get("kwargs")
    header = RecordingHeader(
        version=FORMAT_VERSION,
        actor=str(head.get("actor")),
        name=str(head.get("name")),
        kwargs=dict(kwargs) if isinstance(kwargs, dict) else None,
    )
    records: list[dict[str, Any]] = []
    for offset, record in frames:
        if not isinstance(record, dict) or any(k not in record for k in _RECORD_KEYS):
            raise RecordingError(
                f"{where}: damaged at byte {offset}: record {len(records)} is not a task "
                f"record (it needs {', '.join(_RECORD_KEYS)})"
            )
        records.append(record)
    return header, records
