"""QosSubscriber: receives a feed with a delivery guarantee.

It holds one :class:`QosSession` request open with the subject's QoS
publishers (sent again whenever the last one ended and a publisher is up),
hands what they stream to ``on_message`` — in seq order per origin unless
unordered, each (origin, seq) once per watermark — and acknowledges
cumulatively: every ``window // 4`` messages, or 20 ms after the first one
not yet acknowledged.  For exactly-once the watermark is saved (fsync'd)
before the acknowledgement is sent.  Everything runs on the owning actor's
dispatcher; call :meth:`DeliveryInfo.ack` from that actor's callbacks."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from loguru import logger

from ..actors import current_actor
from ..bus.codec import decode
from ..bus.message import Notification, Reply, ReplyStatus
from ..bus.scope import FeedState
from ..errors import RequestError, UsageError
from ._levels import Delivery, Position, Qos, QosStatus
from ._negotiate import PREFIX
from ._state import ConsumerState
from ._wire import (
    ACK_CLOSING,
    ACK_DETACH,
    ACK_OPEN,
    DATA,
    DEAD,
    LOST,
    OFFER,
    QosAck,
    QosData,
    QosSession,
)

if TYPE_CHECKING:
    from ..actors.actor import Actor
    from ..actors.timers import TimerHandle
    from ..bus.requests import RequestHandle

__all__ = ["DeliveryInfo", "QosSubscriber", "QosSubscriberCounters"]

N = TypeVar("N", bound=Notification)

#: seconds after the first message not yet acknowledged that the
#: acknowledgement goes at the latest
ACK_DELAY = 0.02
#: seconds before a session is asked again after the last one ended
RETRY_DELAY = 0.05
#: seconds a closed subscriber waits for its last acknowledgements' answers
CLOSE_WAIT = 1.0
#: seconds between the probes for a publisher of the subject that came up
#: while the session was open (one request each, answered at once by the others)
PROBE_EVERY = 1.0


class _State(Protocol):
    @property
    def app_state(self) -> bytes | None: ...
    def acked(self, origin: str) -> int: ...
    def save(self, origin: str, through: int) -> None: ...
    def save_many(self, watermarks: dict[str, int], app_state: bytes | None = None) -> None: ...
    def close(self) -> None: ...


class _MemoryState:
    """The acknowledged watermarks of a consumer without ``state_dir``: for
    this run only."""

    def __init__(self) -> None:
        self._marks: dict[str, int] = {}
        self.app_state: bytes | None = None

    def acked(self, origin: str) -> int:
        return self._marks.get(origin, -1)

    def save(self, origin: str, through: int) -> None:
        self._marks[origin] = through

    def save_many(self, watermarks: dict[str, int], app_state: bytes | None = None) -> None:
        self._marks.update(watermarks)
        if app_state is not None:
            self.app_state = app_state

    def close(self) -> None:
        pass


@dataclass
class QosSubscriberCounters:
    """What a QoS subscriber did (a snapshot: :attr:`QosSubscriber.counters`)."""

    #: messages received, duplicates included
    received: int = 0
    #: messages handed to on_message
    delivered: int = 0
    #: of them, handed again (not acknowledged before)
    redelivered: int = 0
    #: messages dropped as already acknowledged
    duplicates: int = 0
    #: messages the publisher's log no longer had (LOST ranges)
    lost: int = 0
    #: messages the publisher gave up (DEAD items)
    dead: int = 0
    #: on_message calls that raised (not acknowledged: redelivered later)
    callback_errors: int = 0
    acks_sent: int = 0
    sessions: int = 0
    refused: int = 0


class DeliveryInfo:
    """What ``on_message(msg, delivery)`` is given besides the message.
    ``attempt`` counts the times this subscriber handed it to the application
    (1 the first time); ``redelivered`` is True when it was sent before
    (handed here before, or sent to this consumer before it resumed).  In
    ``ack="manual"`` mode call :meth:`ack` once its effect is committed."""

    __slots__ = ("_epoch", "_sub", "attempt", "origin", "redelivered", "seq", "timestamp")

    def __init__(  # noqa: PLR0917  (made in one place, _hand)
        self,
        sub: QosSubscriber[Any],
        origin: str,
        seq: int,
        attempt: int,
        redelivered: bool,
        timestamp: int,
        epoch: int,
    ) -> None:
        self._sub = sub
        #: the session round it came in: its acknowledgement carries it
        self._epoch = epoch
        self.origin = origin
        self.seq = seq
        self.attempt = attempt
        self.redelivered = redelivered
        self.timestamp = timestamp

    def ack(self) -> None:
        """Acknowledge this message (manual mode; in auto mode returning from
        on_message does it).  Call it on the subscriber's actor."""
        self._sub._app_ack(self.origin, self.seq, self._epoch)

    def __repr__(self) -> str:
        return (
            f"<DeliveryInfo {self.origin} #{self.seq} attempt={self.attempt}"
            f"{' redelivered' if self.redelivered else ''}>"
        )


class _Origin:
    """What the subscriber knows of one publisher."""

    __slots__ = (
        "ack_due",
        "ack_epoch",
        "acked_above",
        "attempts",
        "epoch",
        "expected",
        "handed",
        "held",
        "name",
        "sent",
        "sent_before",
        "unacked",
        "watermark",
    )

    def __init__(self, name: str, watermark: int) -> None:
        self.name = name
        #: every seq <= watermark is acknowledged by the application
        self.watermark = watermark
        #: acknowledged seqs above the watermark (unordered, or manual acks out of order)
        self.acked_above: set[int] = set()
        #: the next seq to hand (in order)
        self.expected = watermark + 1
        #: the highest seq handed to the application
        self.handed = watermark
        #: the publisher's highest seq sent to this consumer before the session
        self.sent_before = 0
        #: times handed, for seqs above the watermark
        self.attempts: dict[int, int] = {}
        #: (timestamp, body) waiting for a gap below them to fill (in order)
        self.held: dict[int, tuple[int, bytes]] = {}
        #: the round of the last items received (acknowledgements carry it)
        self.epoch = 0
        #: the round the next acknowledgement is for: the round of the last
        #: message the application acknowledged, or of a duplicate received
        self.ack_epoch = 0
        #: the last watermark sent in an acknowledgement
        self.sent = watermark
        #: messages acknowledged by the application since the last acknowledgement
        self.unacked = 0
        #: an acknowledgement is owed even without progress (duplicates came)
        self.ack_due = False


class QosSubscriber(Generic[N]):
    """See the module docstring; made by :func:`~actorbus.qos.qos_subscribe`."""

    def __init__(
        self,
        actor: Actor,
        message_class: type[N],
        subject: str,
        *,
        key: str,
        qos: Qos,
        on_message: Callable[[N, DeliveryInfo], object],
        name: str | None,
        state_dir: str | Path | None,
        start: Position,
        manual: bool,
        window: int,
        on_status: Callable[[QosStatus, QosSubscriber[N]], object] | None,
    ) -> None:
        self._actor = actor
        self._mcls = message_class
        self._subject = subject
        self._key = key
        self._qos = qos
        self._on_message = on_message
        self._durable = name is not None
        self.name = name if name is not None else f"~{actor.name}/{secrets.token_hex(6)}"
        self._state: _State = ConsumerState(state_dir) if state_dir is not None else _MemoryState()
        self._state_dir = state_dir
        #: the application's state (app_state), saved with every watermark once set
        self._app_state = self._state.app_state
        self._app_state_set = False
        self._start = start
        self._manual = manual
        self._ordered = qos.ordered
        self._window = window
        self._ack_every = max(1, window // 4)
        self._on_status = on_status
        self._status = QosStatus(FeedState.DOWN)
        self._counters = QosSubscriberCounters()
        self._origins: dict[str, _Origin] = {}
        #: the session requests not ended: the one that opened the sessions,
        #: and probes a publisher that came up since took as its session
        self._handles: set[RequestHandle[QosSession]] = set()
        self._ack_timer: TimerHandle | None = None
        self._retry_timer: TimerHandle | None = None
        self._probe_timer: TimerHandle | None = None
        #: acknowledgements not yet answered
        self._acks_out = 0
        self._closed = False
        self._up = False
        ctx = actor.actor_context
        self._ack_feed = ctx.open_request_feed(QosAck, subject, discoverable=False)
        self._ack_feed.reply_callback(self._on_ack_reply)
        self._ack_feed.status_callback(_ignore_reply)
        self._ack_feed.subscribe()
        self._session_feed = ctx.open_request_feed(QosSession, subject, discoverable=False)
        self._session_feed.reply_callback(self._on_reply)
        self._session_feed.status_callback(self._on_feed_status)
        self._session_feed.subscribe()

    # ------------------------------------------------------------ the public face
    @property
    def status(self) -> QosStatus:
        return self._status

    @property
    def counters(self) -> QosSubscriberCounters:
        return replace(self._counters)

    def acked(self, origin: str) -> int:
        """The seq through which every message from ``origin`` is acknowledged
        (-1 when none is)."""
        o = self._origins.get(origin)
        return o.watermark if o is not None else self._state.acked(origin)

    @property
    def app_state(self) -> bytes | None:
        """The application's own state, saved with the watermarks in one write.

        Set it in ``on_message`` once the message is applied to it (bytes, at
        most 1 MiB: a summary, a position, a running total).  After a restart
        on the same ``state_dir`` it holds the value saved with the watermarks
        the subscriber resumes after: every message at or below them applied
        to it, none above — so what the application keeps here sees each
        message exactly once, crash or not.  Needs ``state_dir``, automatic
        acknowledgement and in-order delivery (an out-of-order or manual
        acknowledgement would save a state ahead of its watermark)."""
        return self._app_state

    @app_state.setter
    def app_state(self, value: bytes) -> None:
        if current_actor() is not self._actor:
            raise UsageError(
                f"app_state of the QoS subscriber of {self._key} set from outside its actor "
                f"{self._actor.name!r}; set it in on_message"
            )
        problem = None
        if self._state_dir is None:
            problem = "it has no state_dir to save it in; pass state_dir=DIR"
        elif self._manual:
            problem = (
                'with ack="manual" an acknowledgement may lag what the state holds; '
                'use ack="auto" (the default) with app_state'
            )
        elif not self._ordered:
            problem = (
                "unordered, a message acknowledged above a gap would be in the state but "
                "not under the watermark; use Qos(ordered=True) with app_state"
            )
        elif type(value) is not bytes:
            problem = f"expected bytes, found {type(value).__name__}"
        if problem is not None:
            raise UsageError(f"app_state of the QoS subscriber of {self._key}: {problem}")
        self._app_state = value
        self._app_state_set = True

    @property
    def origins(self) -> tuple[str, ...]:
        """The publishers seen."""
        return tuple(self._origins)

    def close(self) -> None:
        """Acknowledge what the application acknowledged, then stop.  A consumer
        without a name is forgotten by the publishers; a named one is kept for
        its return."""
        if self._closed:
            return
        self._send_acks()
        for o in self._origins.values():
            self._ack(o.name, o.watermark, ACK_CLOSING if self._durable else ACK_DETACH)
        self._closed = True
        for timer in (self._ack_timer, self._retry_timer, self._probe_timer):
            if timer is not None:
                timer.cancel()
        self._session_feed.close()
        self._state.close()
        # closing the acknowledgements' feed would cancel the last ones in
        # flight: it closes once they are answered (or after CLOSE_WAIT)
        if self._acks_out:
            self._actor.schedule(CLOSE_WAIT, self._ack_feed_done)
        else:
            self._ack_feed_done()

    def _ack_feed_done(self) -> None:
        self._ack_feed.close()  # (closing twice is harmless)

    def _on_ack_reply(self, remaining: int, reply: Reply, handle: Any) -> None:
        if remaining == 0:
            self._acks_out -= 1
            if self._closed and self._acks_out == 0:
                self._ack_feed_done()

    # ------------------------------------------------------------------ sessions
    def _on_feed_status(self, state: FeedState, feed: Any) -> None:
        self._up = state is FeedState.UP
        if self._up and not self._handles:
            self._open_session()

    def _probe(self) -> None:
        """Ask the publishers that came up since the session opened (the
        others answer at once that this consumer has a session with them)."""
        if self._handles and self._up and self._status.refused is None and not self._closed:
            self._open_session(join=True)

    def _open_session(self, join: bool = False) -> None:
        if not join:
            self._retry_timer = None
            if self._closed or self._handles or not self._up:
                return
        if self._status.refused is not None:
            return
        origin, resume = "", -1
        if len(self._origins) == 1 and not join:
            o = next(iter(self._origins.values()))
            origin, resume = o.name, o.watermark
        qos = self._qos
        request = QosSession(
            self._subject,
            consumer=self.name,
            type_name=getattr(self._mcls, "__type_name__", ""),
            delivery=qos.delivery.value,
            persistent=qos.persistent,
            ordered=qos.ordered,
            resume_after=resume,
            origin=origin,
            start_kind=self._start.kind,
            start_value=self._start.value,
            window=self._window,
            join=join,
        )
        try:
            handle = self._session_feed.request(request)
        except RequestError:  # the publisher went meanwhile: its return sends it
            return
        self._handles.add(handle)  # (its replies, the last included, come after this task)
        if not join:
            self._counters.sessions += 1
        if self._probe_timer is None:
            self._probe_timer = self._actor.schedule_every(PROBE_EVERY, self._probe)

    def _on_reply(self, remaining: int, reply: Reply, handle: RequestHandle[QosSession]) -> None:
        if handle not in self._handles or self._closed:
            return
        if isinstance(reply, QosData):
            kind = reply.kind
            if kind == DATA:
                self._data(reply)
            elif kind == OFFER:
                self._offer(reply)
            elif kind == LOST:
                self._skip(reply, reply.first, reply.first + reply.timestamps[0] - 1, lost=True)
            elif kind == DEAD:
                self._skip(reply, reply.first, reply.first, lost=False)
        elif reply.status is ReplyStatus.ERROR and (reply.reason or "").startswith(PREFIX):
            # sessions another publisher of the subject accepted go on (UP, with
            # the refusal shown); none is asked again
            self._counters.refused += 1
            up = self._status.state is FeedState.UP
            status = self._status
            self._set_status(QosStatus(status.state, status.qos if up else None, reply.reason))
        if remaining == 0:
            self._handles.discard(handle)
            if not self._handles:  # every session ended
                refused = self._status.refused
                self._set_status(
                    QosStatus(FeedState.DOWN, None if refused else self._status.qos, refused)
                )
                if refused is None:
                    self._retry_timer = self._actor.schedule(RETRY_DELAY, self._open_session)

    def _set_status(self, status: QosStatus) -> None:
        if status == self._status:
            return
        self._status = status
        if self._on_status is not None:
            self._on_status(status, self)

    def _origin(self, name: str) -> _Origin:
        o = self._origins.get(name)
        if o is None:
            o = self._origins[name] = _Origin(name, self._state.acked(name))
        return o

    def _offer(self, reply: QosData) -> None:
        o = self._origin(reply.origin)
        o.epoch = reply.attempt
        o.held.clear()
        if len(reply.timestamps) > 4:
            o.sent_before = reply.timestamps[4]
        # a new consumer starts where the publisher put it; one with a watermark
        # resumes after it
        opened = len(reply.timestamps) > 5 and reply.timestamps[5] == 1
        if (o.watermark < 0 or opened) and reply.first - 1 > o.watermark:
            # (opened: the publisher holds this consumer's acknowledgement
            # through first - 1, from before its state here)
            self._adopt(o, reply.first - 1)
        o.expected = o.watermark + 1
        self._ack(o.name, o.watermark, ACK_OPEN)
        self._set_status(QosStatus(FeedState.UP, self._qos))

    def _adopt(self, o: _Origin, mark: int) -> None:
        """Every seq <= ``mark`` counts as acknowledged."""
        o.watermark = o.sent = mark
        o.handed = max(o.handed, mark)
        o.acked_above = {seq for seq in o.acked_above if seq > mark}
        for seq in [seq for seq in o.attempts if seq <= mark]:
            del o.attempts[seq]

    # ---------------------------------------------------------------- receiving
    def _data(self, reply: QosData) -> None:
        o = self._origin(reply.origin)
        o.epoch = reply.attempt
        counters = self._counters
        seq = reply.first
        counters.received += len(reply.bodies)
        for timestamp, body in zip(reply.timestamps, reply.bodies, strict=True):
            self._item(o, seq, timestamp, body)
            seq += 1
        self._ack_soon(o)

    def _item(self, o: _Origin, seq: int, timestamp: int, body: bytes) -> None:
        if seq <= o.watermark or seq in o.acked_above:
            self._counters.duplicates += 1
            o.ack_due = True
            o.ack_epoch = o.epoch
            return
        if not self._ordered:
            if self._manual and seq in o.attempts and seq <= o.handed:
                self._counters.duplicates += 1  # handed, its ack() is awaited
                return
            self._hand(o, seq, timestamp, body)
            return
        if seq < o.expected:  # handed, its manual ack() is awaited
            self._counters.duplicates += 1
            return
        if seq > o.expected:
            if len(o.held) < self._window:
                o.held[seq] = (timestamp, body)
            return
        self._hand(o, seq, timestamp, body)
        held = o.held
        while held and o.expected in held and o.expected > seq:
            nxt = o.expected
            ts, b = held.pop(nxt)
            if not self._hand(o, nxt, ts, b):
                break
        if held:
            for stale in [s for s in held if s <= o.watermark]:
                del held[stale]

    def _hand(self, o: _Origin, seq: int, timestamp: int, body: bytes) -> bool:
        """Hand one message to the application; True when it was taken (auto:
        returned without raising; manual: handed)."""
        # (attempts are kept only for messages handed and not yet acknowledged)
        attempts = o.attempts
        attempt = attempts.get(seq, 0) + 1 if attempts else 1
        redelivered = attempt > 1 or seq <= o.sent_before
        counters = self._counters
        counters.delivered += 1
        if redelivered:
            counters.redelivered += 1
        o.handed = max(o.handed, seq)
        info = DeliveryInfo(self, o.name, seq, attempt, redelivered, timestamp, o.epoch)
        try:
            self._on_message(decode(self._mcls, body), info)
        except Exception as exc:
            counters.callback_errors += 1
            if self._qos.delivery is not Delivery.AT_MOST_ONCE:
                attempts[seq] = attempt
                logger.opt(exception=exc).warning(
                    "on_message of the QoS subscriber {} raised on {} #{}: not "
                    "acknowledged, it is delivered again",
                    self.name,
                    o.name,
                    seq,
                )
                return False
            logger.opt(exception=exc).warning(
                "on_message of the QoS subscriber {} raised on {} #{}: at-most-once, it "
                "is not delivered again",
                self.name,
                o.name,
                seq,
            )
        if self._ordered:
            o.expected = seq + 1
        if self._manual:
            attempts[seq] = attempt
        else:
            o.ack_epoch = o.epoch
            self._acked(o, seq)
        return True

    def _skip(self, reply: QosData, first: int, last: int, *, lost: bool) -> None:
        """Seqs first..last will never come (lost, or given up): move past them."""
        o = self._origin(reply.origin)
        o.epoch = reply.attempt
        if lost:
            self._counters.lost += last - first + 1
        else:
            self._counters.dead += 1
        if first <= o.watermark + 1:
            if last > o.watermark:
                o.unacked += 1
                o.watermark = last
                o.acked_above = {seq for seq in o.acked_above if seq > last}
                for seq in [seq for seq in o.attempts if seq <= last]:
                    del o.attempts[seq]
                if last + 1 in o.acked_above:
                    self._acked(o, last + 1)
        else:
            for seq in range(first, last + 1):
                self._acked(o, seq)
        if self._ordered and o.expected <= last:
            o.expected = last + 1
            while o.expected in o.held:
                nxt = o.expected
                ts, b = o.held.pop(nxt)
                if not self._hand(o, nxt, ts, b):
                    break
        o.ack_due = True
        o.ack_epoch = reply.attempt
        self._ack_soon(o)

    # ------------------------------------------------------------ acknowledging
    def _app_ack(self, origin: str, seq: int, epoch: int) -> None:
        if current_actor() is not self._actor:
            raise UsageError(
                f"ack() of {origin} #{seq} from outside the subscriber's actor "
                f"{self._actor.name!r} (it runs on that actor only, unlocked); call it from "
                f"the actor's callbacks, or actor.post(delivery.ack)"
            )
        o = self._origins.get(origin)
        if o is None or self._closed:
            return
        o.ack_epoch = epoch
        self._acked(o, seq)
        if self._manual:
            self._ack_soon(o)

    def _acked(self, o: _Origin, seq: int) -> None:
        if seq <= o.watermark:
            return
        if seq in o.acked_above:
            if seq != o.watermark + 1:
                return
            o.acked_above.discard(seq)
        else:
            o.unacked += 1
        if seq != o.watermark + 1:
            o.acked_above.add(seq)
            return
        mark = seq
        above = o.acked_above
        while mark + 1 in above:
            mark += 1
            above.discard(mark)
        attempts = o.attempts
        if attempts:
            for s in range(o.watermark + 1, mark + 1):
                attempts.pop(s, None)
        o.watermark = mark

    def _ack_soon(self, o: _Origin) -> None:
        if o.unacked >= self._ack_every:
            self._send_ack(o)
        elif (o.unacked or o.ack_due) and self._ack_timer is None and not self._closed:
            self._ack_timer = self._actor.schedule(ACK_DELAY, self._send_acks)

    def _send_acks(self) -> None:
        self._ack_timer = None
        for o in self._origins.values():
            if o.unacked or o.ack_due:
                self._send_ack(o)

    def _send_ack(self, o: _Origin) -> None:
        o.unacked = 0
        o.ack_due = False
        if o.watermark < 0:
            return
        # the watermark is saved before the publisher may forget what it covers
        if self._app_state_set:
            # with every origin's: the state holds what each one handed
            marks = {x.name: x.watermark for x in self._origins.values() if x.watermark >= 0}
            self._state.save_many(marks, self._app_state)
        elif o.watermark != self._state.acked(o.name):
            self._state.save(o.name, o.watermark)
        o.sent = o.watermark
        self._ack(o.name, o.watermark, o.ack_epoch)

    def _ack(self, origin: str, through: int, attempt: int) -> None:
        if self._closed:
            return
        self._acks_out += 1
        try:
            self._ack_feed.request(
                QosAck(
                    self._subject,
                    consumer=self.name,
                    origin=origin,
                    through=through,
                    attempt=attempt,
                )
            )
        except RequestError:
            self._acks_out -= 1
            return  # no publisher up: the session's end resends from the watermark
        if attempt > 0:
            self._counters.acks_sent += 1

    def __repr__(self) -> str:
        return f"<QosSubscriber {self._key} {self.name} {self._status.state.name}>"


def _ignore_reply(*args: object) -> None:
    """The acknowledgements' replies and feed status say nothing."""
