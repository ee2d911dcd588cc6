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

Requests, cancels, replies, congestion and tasks posted by code are recorded
but not reproduced: a replay reaching one stops there and says so.
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
from .bus.feeds import PublishFeed
from .bus.inbox import Inbox
from .bus.message import Notification, lookup_type
from .bus.scope import FeedState, Scope
from .errors import CodecError, UsageError
from .node import Bus

__all__ = ["FakeClock", "ReplayResult", "ReplayStep", "replay"]

#: what is compared between a recorded input and its replay (not the clocks)
_COMPARED = ("kind", "role", "type", "subject", "scope", "body", "state", "timer", "out", "fsm")
_REPRODUCED = ("startup", "shutdown", "message", "status", "timer")


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
    if "state" in r:
        text += f" {r['state']}"
    body = r.get("body")
    if isinstance(body, bytes):
        text += f" {_shown(r.get('type'), body)}"
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
    lines += [f"-> fsm {event} -> {state}" for event, state in r.get("fsm", [])]
    return lines


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


class _Injector:
    """The private feeds that reproduce the inputs on the replay's bus."""

    def __init__(self, bus: Bus, actor: Actor) -> None:
        self.bus = bus
        self.actor = actor
        self.publishers: dict[tuple[str, str], PublishFeed[Any]] = {}
        self.inboxes: dict[tuple[str, str], Inbox[Any]] = {}

    def _class(self, r: Mapping[str, Any]) -> type[Notification]:
        cls = lookup_type(str(r.get("type")))
        if cls is None or not issubclass(cls, Notification):
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
        elif kind == "message":
            feed = self.publishers.get(key)
            if feed is None or not feed.is_feed_up():
                return f"the actor has no subscriber on {key[0]}:{key[1]!r}"
            feed.publish(decode(self._class(r), r["body"]))
        else:
            raise RecordingError(f"a {_input_text(r)} cannot be replayed yet")
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
