"""Replaying a recording into a fresh actor, and comparing what it does.

Theory of operation
-------------------
:func:`replay` reads a recording (:mod:`actorbus.actors.recording`), makes a
fresh instance of the recorded actor's class (its constructor keywords from
the file, or given) and registers it with a private :class:`~actorbus.Bus`: no
links, no gateway, and a :class:`FakeClock` instead of the timer thread.  The
actor is recorded again, into memory, with the same recorder.  Then each
recorded input is reproduced, one at a time, the way it first arrived — so
the actor's own feeds and callbacks do the work, as live:

* startup and shutdown: ``bus.startup(actor)`` / ``bus.shutdown(actor)``;
* a subscriber's status UP/DOWN: a private publisher on the key declares
  UP/DOWN; a message: that publisher publishes the recorded message;
* a publisher's status UP/DOWN: a private subscriber (an inbox) on the key
  subscribes / closes;
* a timer firing: the actor's armed timer that runs the recorded callback and
  is due first expires (``timers.expire_next(label)``), whatever its deadline:
  the timer thread's lateness, which decided live when it fired and which
  periods it skipped, is in the recording's order of inputs, not in the clock.

Before each input the fake clock is set to the input's recorded monotonic
time, so the actor's timers are armed, and its code reads the time, as live.  The replay waits
(with a timeout) for the actor to have taken the input, then compares the
replayed record with the recorded one: the input, what it published (encoded,
byte for byte) and the machine's steps.  The first difference ends the replay
and is named: the input's number, what was recorded, what came.

* a request to one of the actor's repliers: a private requestor on the key
  sends it (it is the recorded request #n on its key: requests are numbered
  per key in order, see :mod:`actorbus.actors.recording`); a cancel cancels
  that request; what the actor replies is compared as its outputs;
* a requestor's status: a private replier on the key declares UP/DOWN; it
  takes the actor's requests, numbering them per key in the order they come,
  and a recorded reply to request #n is sent as the answer to the actor's
  n-th request on that key — an ERROR or a timeout's end as recorded.

Congestion and tasks posted by code are recorded but not reproduced: a replay
reaching one stops there and says so.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .actors.actor import Actor
from .actors.recording import ActorRecorder, RecordingError, RecordingHeader, read_recording
from .bus.codec import decode
from .bus.feeds import IncomingRequest, PublishFeed, ReplyFeed, RequestFeed, RequestHandle
from .bus.inbox import Inbox
from .bus.message import Message, Notification, Reply, Request, lookup_type
from .bus.owner import checked_key
from .bus.scope import FeedState, Scope
from .errors import CodecError, RequestError, UsageError
from .node import Bus

__all__ = ["FakeClock", "ReplayResult", "ReplayStep", "replay"]

#: what is compared between a recorded input and its replay (not the clocks)
_COMPARED = (
    "kind",
    "role",
    "type",
    "subject",
    "scope",
    "n",
    "reply",
    "status",
    "body",
    "state",
    "timer",
    "out",
    "req",
    "rep",
    "fsm",
)
_REPRODUCED = ("startup", "shutdown", "message", "status", "timer", "request", "cancel", "reply")


class FakeClock:
    """A monotonic clock in nanoseconds that moves only when told: the replay's
    timers run on it.  ``set`` never moves it back."""

    def __init__(self, start_ns: int = 0) -> None:
        self.ns = start_ns

    def now(self) -> int:
        return self.ns

    def set(self, ns: int) -> None:
        self.ns = max(self.ns, ns)


@dataclass(frozen=True)
class ReplayStep:
    """One recorded input, and the record its replay gave (None: none came)."""

    index: int
    recorded: Mapping[str, Any]
    replayed: Mapping[str, Any] | None


@dataclass
class ReplayResult:
    """What :func:`replay` did: the header, each step, and the first difference."""

    path: str
    header: RecordingHeader
    steps: list[ReplayStep] = field(default_factory=list)
    #: the first difference, in words; None when the replay matched the recording
    difference: str | None = None
    #: inputs in the file
    total: int = 0

    @property
    def matched(self) -> bool:
        """True when every input was reproduced and gave the recorded outputs."""
        return self.difference is None and len(self.steps) == self.total

    def lines(self) -> list[str]:
        """The run as text: each input and what it caused, with the time since the first."""
        out = [f"{self.path}: {self.header.actor} {self.header.name!r}, {self.total} inputs"]
        start = self.steps[0].recorded["mono"] if self.steps else 0
        for step in self.steps:
            r = step.recorded
            out.append(f"{(r['mono'] - start) / 1e6:10.3f} ms  #{step.index} {_input_text(r)}")
            out.extend(f"{'':16}{line}" for line in _output_lines(r))
        if self.matched:
            out.append(f"replayed {self.total} inputs: the outputs match the recording")
        else:
            out.append(f"DIFFERENT: {self.difference}")
        return out

    def to_json(self) -> dict[str, Any]:
        """The run as JSON-ready values (bodies as hex)."""
        return {
            "path": self.path,
            "actor": self.header.actor,
            "name": self.header.name,
            "kwargs": self.header.kwargs,
            "inputs": self.total,
            "matched": self.matched,
            "difference": self.difference,
            "steps": [
                {"index": s.index, **_jsonable(s.recorded), "replayed": s.replayed is not None}
                for s in self.steps
            ],
        }


def _jsonable(record: Mapping[str, Any]) -> dict[str, Any]:
    def value(v: Any) -> Any:
        if isinstance(v, bytes):
            return v.hex()
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return {k: value(v) for k, v in record.items()}


def _input_text(r: Mapping[str, Any]) -> str:
    kind = str(r["kind"])
    if kind in ("startup", "shutdown"):
        return kind
    if kind in {"timer", "task"}:
        return f"{kind} {r.get('timer')}"
    text = f"{kind} {r.get('role')} {r.get('type')}:{r.get('subject')!r}"
    if "n" in r:
        text += f" #{r['n']}"
    if kind == "reply":
        text += f" remaining {r.get('state')}"
    elif "state" in r:
        text += f" {r['state']}"
    if "status" in r:
        text += f" {r['status']}"
    body = r.get("body")
    if isinstance(body, bytes):
        text += f" {_shown(r.get('reply', r.get('type')), body)}"
    return text


def _shown(type_name: Any, body: bytes) -> str:
    cls = lookup_type(str(type_name))
    if cls is None:
        return f"<{len(body)} bytes>"
    try:
        return repr(decode(cls, body))
    except CodecError:  # for display only: a body that does not decode shows as bytes
        return f"<{len(body)} bytes>"


def _output_lines(r: Mapping[str, Any]) -> list[str]:
    lines = [f"-> publish {t}:{s!r} {_shown(t, b)}" for t, s, b in r.get("out", [])]
    lines += [f"-> {_request_text(request)}" for request in r.get("req", [])]
    lines += [f"-> {_reply_text(reply)}" for reply in r.get("rep", [])]
    lines += [f"-> fsm {event} -> {state}" for event, state in r.get("fsm", [])]
    return lines


def _request_text(request: list[Any]) -> str:
    t, s, n, body = request
    return f"request {t}:{s!r} #{n} {_shown(t, body)}"


def _reply_text(reply: list[Any]) -> str:
    t, s, n, reply_type, body, status = reply
    return f"reply {status} to request {t}:{s!r} #{n} {_shown(reply_type, body)}"


def _load_class(path: str) -> type[Actor]:
    module, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise RecordingError(
            f"the recording's actor class {path!r} cannot be imported: {exc}; run the "
            f"replay where that class is importable (PYTHONPATH)"
        ) from exc
    if not (isinstance(obj, type) and issubclass(obj, Actor)):
        raise RecordingError(f"the recording's actor class {path!r} is not an Actor subclass")
    return obj


def _difference(index: int, recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> str | None:
    for key in _COMPARED:
        want, got = recorded.get(key), replayed.get(key)
        if want == got:
            continue
        if key == "rep" and [_comparable(r) for r in want or []] == [
            _comparable(r) for r in got or []
        ]:
            continue
        if key in ("req", "rep"):
            return _sent_difference(index, recorded, key, want or [], got or [])
        if key == "out":
            for n, (w, g) in enumerate(zip(want or [], got or [], strict=False)):
                if w != g:
                    return (
                        f"input #{index} ({_input_text(recorded)}): publish #{n} differs: "
                        f"recorded {_output_lines({'out': [w]})[0][3:]}, "
                        f"replayed {_output_lines({'out': [g]})[0][3:]}"
                    )
            return (
                f"input #{index} ({_input_text(recorded)}): {len(want or [])} publishes "
                f"recorded, {len(got or [])} replayed"
            )
        return (
            f"input #{index} ({_input_text(recorded)}): {key} recorded {want!r}, replayed {got!r}"
        )
    return None


def _comparable(reply: list[Any]) -> list[Any]:
    """A reply sent, as compared: byte for byte, but for a bare ``Reply`` (what the
    bus sends for a replier: a failing callback's ERROR, ``serve()``'s end of a
    stream), made with the clock's time, compared without its timestamp."""
    if reply[3] != Reply.__type_name__:
        return reply
    try:
        bare = decode(Reply, reply[4])
    except CodecError:  # a body that does not decode is compared as bytes
        return reply
    return [*reply[:4], (bare.subject, bare.status, bare.reason), reply[5]]


def _sent_difference(
    index: int, recorded: Mapping[str, Any], key: str, want: list[Any], got: list[Any]
) -> str:
    """The first request (``req``) or reply (``rep``) sent that differs, named."""
    what, text = ("request", _request_text) if key == "req" else ("reply", _reply_text)
    where = f"input #{index} ({_input_text(recorded)})"
    for n, (w, g) in enumerate(zip(want, got, strict=False)):
        if (w != g) if key == "req" else (_comparable(w) != _comparable(g)):
            return f"{where}: {what} #{n} sent differs: recorded {text(w)}, replayed {text(g)}"
    return f"{where}: {len(want)} {what}s sent recorded, {len(got)} replayed"


class _Injector:
    """The private feeds that reproduce the inputs on the replay's bus."""

    def __init__(self, bus: Bus, actor: Actor) -> None:
        self.bus = bus
        self.actor = actor
        self.publishers: dict[tuple[str, str], PublishFeed[Any]] = {}
        self.inboxes: dict[tuple[str, str], Inbox[Any]] = {}
        #: the requestors that ask the actor's repliers, and the requests they
        #: made, by key and number
        self.requestors: dict[tuple[str, str], RequestFeed[Any]] = {}
        self.asked: dict[tuple[str, str, int], RequestHandle[Any]] = {}
        #: the repliers that answer the actor's requests, and the requests they
        #: took, by key and number (the n-th on a key is the actor's n-th request)
        self.repliers: dict[tuple[str, str], ReplyFeed[Any]] = {}
        self.taken: dict[tuple[str, str, int], IncomingRequest[Any]] = {}
        self.counts: dict[tuple[str, str], int] = {}

    def _class(self, r: Mapping[str, Any], base: type[Message] = Notification) -> type[Any]:
        cls = lookup_type(str(r.get("type")))
        if cls is None or not issubclass(cls, base):
            raise RecordingError(
                f"the recording names message type {r.get('type')!r}, which no imported "
                f"module defines; import the module that declares it before replaying"
            )
        return cls

    def _scope(self, r: Mapping[str, Any]) -> Scope:
        scope = Scope[str(r.get("scope"))]
        # the actor's feed hears local feeds of its own scope; a remote-only one
        # cannot be reached from a private bus
        if scope is Scope.REMOTE_ONLY:
            raise RecordingError(
                f"input on {r.get('type')}:{r.get('subject')!r} came to a REMOTE_ONLY feed; "
                f"a replay has no link to bring it"
            )
        return scope

    def give(self, r: Mapping[str, Any]) -> str | None:
        """Reproduce the input ``r``; a difference when the actor cannot take it
        (it has no feed on the key: its behaviour changed)."""
        kind = r["kind"]
        key = (str(r.get("type")), str(r.get("subject")))
        if kind == "startup":
            self.bus.startup(self.actor)
        elif kind == "shutdown":
            self.bus.shutdown(self.actor)
        elif kind == "timer":
            label = str(r.get("timer"))
            if self.bus.runtime.timers.expire_next(label) is None:
                return f"the actor has no timer armed that runs {label}"
        elif kind == "status" and r.get("role") == "subscribe":
            feed = self.publishers.get(key)
            if feed is None:
                feed = self.publishers[key] = self.bus.publisher(
                    self._class(r), key[1], scope=self._scope(r), up=False
                )
            feed.update_feed_state(FeedState[str(r["state"])])
            if r["state"] == "UP" and not feed.is_feed_up():
                return f"the actor has no subscriber on {key[0]}:{key[1]!r}"
        elif kind == "status" and r.get("role") == "publish":
            if r["state"] == "UP":
                self.inboxes[key] = self.bus.inbox(self._class(r), key[1], scope=self._scope(r))
            else:
                inbox = self.inboxes.pop(key, None)
                if inbox is not None:
                    inbox.close()
        elif kind == "status" and r.get("role") == "request":
            replier = self.repliers.get(key)
            if replier is None:
                cls = self._class(r, Request)
                replier = ReplyFeed(
                    self.bus.router, None, checked_key(cls, key[1], Request), self._scope(r)
                )
                replier.request_callback(partial(self._take, key))
                replier.advertise()
                self.repliers[key] = replier
            replier.update_feed_state(FeedState[str(r["state"])])
        elif kind == "request":
            return self._ask(r, key)
        elif kind == "cancel":
            handle = self.asked.pop((*key, r.get("n")), None)  # type: ignore[arg-type]
            if handle is None:
                return f"no request #{r.get('n')} on {key[0]}:{key[1]!r} was replayed to cancel"
            handle.cancel()
        elif kind == "reply":
            return self._answer(r, key)
        elif kind == "message":
            feed = self.publishers.get(key)
            if feed is None or not feed.is_feed_up():
                return f"the actor has no subscriber on {key[0]}:{key[1]!r}"
            feed.publish(decode(self._class(r), r["body"]))
        else:
            raise RecordingError(f"a {_input_text(r)} cannot be replayed yet")
        return None

    def _ask(self, r: Mapping[str, Any], key: tuple[str, str]) -> str | None:
        """Send the recorded request to the actor's replier, as request #n on its key."""
        feed = self.requestors.get(key)
        if feed is None:
            cls = self._class(r, Request)
            feed = RequestFeed(
                self.bus.router, None, checked_key(cls, key[1], Request), self._scope(r)
            )
            feed.reply_callback(_ignore_reply)
            feed.subscribe()
            self.requestors[key] = feed
        try:
            handle = feed.request(decode(self._class(r, Request), r["body"]))
        except RequestError:
            return f"the actor has no replier UP on {key[0]}:{key[1]!r}"
        self.asked[(*key, r["n"])] = handle
        return None

    def _take(self, key: tuple[str, str], incoming: IncomingRequest[Any]) -> None:
        """(the private replier) the actor sent its next request on ``key``."""
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        self.taken[(*key, n)] = incoming

    def _answer(self, r: Mapping[str, Any], key: tuple[str, str]) -> str | None:
        """Answer the actor's request #n on ``key`` with the recorded reply."""
        n = r.get("n")
        incoming = self.taken.get((*key, n))  # type: ignore[arg-type]
        if incoming is None:
            return f"the actor sent no request #{n} on {key[0]}:{key[1]!r} for this reply"
        cls = lookup_type(str(r.get("reply")))
        if cls is None or not issubclass(cls, Reply):
            raise RecordingError(
                f"the recording names reply type {r.get('reply')!r}, which no imported "
                f"module defines; import the module that declares it before replaying"
            )
        try:
            sent = incoming.reply(decode(cls, r["body"]))
        except RequestError:
            return (
                f"its request #{n} had its final reply already: the recorded replies came "
                f"from more than one replier, and a replay answers with one"
            )
        if not sent:
            return f"the actor's request #{n} was over (cancelled or timed out) before this reply"
        if not incoming.is_active:
            del self.taken[(*key, n)]  # type: ignore[arg-type]
        return None


def replay(
    path: str | Path, *, kwargs: Mapping[str, Any] | None = None, timeout: float = 10.0
) -> ReplayResult:
    """Replay the recording at ``path`` into a fresh instance of its actor's class
    (made with ``kwargs``, else the keywords the file holds) and compare.

    Returns a :class:`ReplayResult`: ``matched``, or the first ``difference``.
    Raises RecordingError for a file that is damaged or names a class that
    cannot be imported; ``timeout`` bounds the wait for each input."""
    header, records = read_recording(path)
    cls = _load_class(header.actor)
    given = dict(kwargs if kwargs is not None else header.kwargs or {})
    try:
        actor = cls(name=header.name, **given)
    except TypeError as exc:
        raise UsageError(
            f"cannot make {header.actor}(name={header.name!r}, **{given!r}): {exc}; give "
            f"the constructor's keywords (replay(path, kwargs=...), or record with kwargs=)"
        ) from exc
    result = ReplayResult(str(path), header, total=len(records))
    clock = FakeClock(records[0]["mono"] if records else 0)
    got: list[dict[str, Any]] = []
    arrived = threading.Condition()
    wall = [records[0]["wall"] if records else 0]

    def sink(record: dict[str, Any]) -> None:
        with arrived:
            got.append(record)
            arrived.notify_all()

    with Bus(timer_clock=clock.now, gc_threshold=None) as bus:
        bus.register(actor)
        recorder = ActorRecorder(actor, sink, clock=clock.now, wall=lambda: wall[0])
        bus.runtime.watch(actor, recorder)
        injector = _Injector(bus, actor)
        for index, recorded in enumerate(records):
            if recorded["kind"] not in _REPRODUCED:
                result.difference = (
                    f"input #{index} ({_input_text(recorded)}): replaying a "
                    f"{recorded['kind']} is not supported yet; the replay stops here"
                )
                break
            clock.set(recorded["mono"])
            wall[0] = recorded["wall"]
            refused = injector.give(recorded)
            if refused is not None:
                result.difference = f"input #{index} ({_input_text(recorded)}): {refused}"
                break
            with arrived:
                arrived.wait_for(partial(_longer, got, index), timeout)
                replayed = got[index] if len(got) > index else None
            result.steps.append(ReplayStep(index, recorded, replayed))
            if replayed is None:
                result.difference = (
                    f"input #{index} ({_input_text(recorded)}): the actor was given it but "
                    f"ran nothing within {timeout} s"
                )
                break
            difference = _difference(index, recorded, replayed)
            if difference is not None:
                result.difference = difference
                break
        recorder.sink = _ignore  # closing the bus may stop the actor: not an input of the file
        with arrived:
            extra = got[len(records) :] if len(got) > len(records) else []
        if result.difference is None and extra:
            result.difference = (
                f"the replay gave the actor {len(extra)} input(s) beyond the recording's "
                f"{len(records)}, the first: {_input_text(extra[0])}"
            )
    return result


def _longer(records: list[dict[str, Any]], n: int) -> bool:
    return len(records) > n


def _ignore(record: dict[str, Any]) -> None:
    pass


def _ignore_reply(remaining: int, reply: Reply, handle: RequestHandle[Any]) -> None:
    """(the private requestors) the actor's replies are compared as its outputs."""
