"""QosPublisher: publishes a feed with a delivery guarantee.

It keeps what it published in a :class:`PublisherLog` and answers each
consumer's :class:`QosSession` request by streaming the log to it as
OK_CONTINUING replies, at most the session's ``window`` unacknowledged at a
time.  Redelivery follows one rule: the oldest unacknowledged message of a
session is sent again (with everything after it, in a new round, ``attempt``)
when no acknowledgement covered it within ``ack_wait * 2**(attempt-1)``
seconds (capped at ``max_wait``), or at once when the consumer comes back
after its session ended; after ``max_attempts`` it is given up (a
:class:`DeadLetter` on the system subject, a DEAD item to the consumer).
Everything runs on the owning actor's dispatcher: the session and
acknowledgement callbacks, the timers and the flush, so nothing is locked;
call :meth:`QosPublisher.publish` from that actor's callbacks."""

from __future__ import annotations

import secrets
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..actors import current_actor
from ..bus.codec import encode
from ..bus.message import MessageKey, Notification, Reply, ReplyStatus
from ..bus.scope import FeedState
from ..errors import UsageError
from ._future import DeliveryFuture, DurableWaiters, PendingDelivery, delivered_to_none
from ._levels import Delivery, OutboxFull, Position, Qos
from ._log import MemoryLog, PublisherLog
from ._negotiate import session_refusal
from ._wire import (
    ACK_CLOSING,
    ACK_DETACH,
    ACK_OPEN,
    DATA,
    DEAD,
    LOST,
    OFFER,
    DeadLetter,
    QosAck,
    QosData,
    QosSession,
)

if TYPE_CHECKING:
    from ..actors.actor import Actor
    from ..actors.timers import TimerHandle
    from ..bus.requests import IncomingRequest

__all__ = ["QosPublisher", "QosPublisherCounters"]

N = TypeVar("N", bound=Notification)

#: messages per QosData reply at most
BATCH = 256
_CONTINUING = ReplyStatus.OK_CONTINUING
#: seconds between commits while the log says not all it holds is durable yet
COMMIT_RETRY = 0.01


@dataclass
class QosPublisherCounters:
    """What a QoS publisher did (a snapshot: :attr:`QosPublisher.counters`)."""

    published: int = 0
    #: messages sent to sessions, first sends and resends
    sent: int = 0
    #: messages sent again (a round after ``ack_wait``, or a resumed session)
    resent: int = 0
    acks: int = 0
    #: acknowledgements refused because their round was superseded
    late_acks: int = 0
    dead_letters: int = 0
    #: sessions refused (the publisher cannot give what they asked)
    refused: int = 0
    sessions_opened: int = 0
    #: sessions the bus ended (link lost, consumer closed)
    sessions_ended: int = 0
    #: messages a session asked for that the log no longer had
    lost: int = 0
    #: publishes refused with OutboxFull
    outbox_full: int = 0
    #: times a session's window was full (a slow consumer: it is waited for)
    window_full: int = 0


class _Session:
    """One consumer's state at this publisher; kept while it is detached."""

    __slots__ = (
        "acked",
        "closing",
        "delivery",
        "detached_at",
        "epoch",
        "high_sent",
        "incoming",
        "name",
        "next_send",
        "opened",
        "pending",
        "timer",
        "tries",
        "window",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.incoming: IncomingRequest[QosSession] | None = None
        #: the consumer said it is closing: the end of its session is not a lost link
        self.closing = False
        self.delivery = Delivery.AT_LEAST_ONCE
        #: every seq <= acked is acknowledged (or given up, or lost)
        self.acked = -1
        self.next_send = 0
        self.high_sent = 0
        #: the round: +1 at each resend and each new session
        self.epoch = 0
        #: rounds the oldest unacknowledged message was resent in
        self.tries = 0
        self.opened = False
        self.window = 1
        self.timer: TimerHandle | None = None
        self.detached_at: float | None = None
        #: notified publishes this consumer is to acknowledge, in seq order
        self.pending: deque[PendingDelivery] = deque()


def _durable(name: str) -> bool:
    """Generated consumer names start with "~": such a consumer never comes back
    after its subscriber closed."""
    return not name.startswith("~")


class QosPublisher(Generic[N]):
    """See the module docstring; made by :func:`~actorbus.qos.qos_publisher`."""

    def __init__(
        self,
        actor: Actor,
        message_class: type[N],
        subject: str,
        *,
        offer: Qos,
        log: PublisherLog,
        ack_wait: float,
        max_wait: float,
        max_attempts: int,
        window: int,
        outbox_messages: int,
        outbox_bytes: int,
        forget_after: float,
        on_congestion: Any = None,
    ) -> None:
        self._actor = actor
        self._mcls = message_class
        self._subject = subject
        self._key = str(MessageKey(message_class, subject))
        self.offer = offer
        self._log = log
        self._ack_wait = ack_wait
        self._max_wait = max_wait
        self._max_attempts = max_attempts
        self._window = window
        self._outbox_messages = outbox_messages
        self._outbox_bytes = outbox_bytes
        self._forget_after = forget_after
        self._on_congestion = on_congestion
        self._congested = False
        router = actor.actor_context.runtime.router
        assert router is not None  # opening the feeds below registered the actor
        self._system_publish = router.system_publish
        self._counters = QosPublisherCounters()
        self._sessions: dict[str, _Session] = {}
        self._flush_pending = False
        self._commit_timer: TimerHandle | None = None
        #: every seq at or below it is durable in the log
        self._durable_seq = log.next_seq - 1
        self._durable_waiters = DurableWaiters()
        self._closed = False
        ctx = actor.actor_context
        self._feed = ctx.open_publish_feed(message_class, subject)
        self._feed.status_callback(_ignore)
        self._feed.congestion_callback(_ignore)
        self._feed.advertise()
        self._feed.update_feed_state(FeedState.UP)
        base = f"{router.node_id}/{actor.name}/{subject}"
        self.origin = base if offer.persistent else f"{base}/{secrets.token_hex(6)}"
        self._session_feed = ctx.open_reply_feed(QosSession, subject, discoverable=False)
        self._session_feed.request_callback(self._on_session)
        self._session_feed.cancel_callback(self._on_cancel)
        self._ack_feed = ctx.open_reply_feed(QosAck, subject, discoverable=False)
        self._ack_feed.request_callback(self._on_ack)
        for feed in (self._session_feed, self._ack_feed):
            feed.advertise()
            feed.update_feed_state(FeedState.UP)

    # ------------------------------------------------------------ the public face
    @property
    def last_seq(self) -> int:
        """The seq of the last message published (0 before the first)."""
        return self._log.next_seq - 1

    @property
    def durable_seq(self) -> int:
        """Every message up to this seq is durable: committed to the journal
        per its sync policy (a persistent publisher), or held in memory (one
        that is not).  A consumer is never sent a message above it."""
        return self._durable_seq

    @property
    def sessions(self) -> tuple[str, ...]:
        """The consumers attached now."""
        return tuple(s.name for s in self._sessions.values() if s.incoming is not None)

    @property
    def consumers(self) -> dict[str, int]:
        """Every consumer known, attached or detached, with its acknowledged seq."""
        return {s.name: s.acked for s in self._sessions.values()}

    @property
    def counters(self) -> QosPublisherCounters:
        return replace(self._counters)

    def publish(self, message: N) -> int:
        """Publish ``message`` (plain subscribers get it too, at-most-once) and
        return its seq.  Raises :class:`OutboxFull` when the in-memory log is full."""
        if self._closed:
            raise UsageError(f"publish() on the closed QoS publisher of {self._key}")
        if current_actor() is not self._actor:
            raise UsageError(
                f"publish() on the QoS publisher of {self._key} from outside its actor "
                f"{self._actor.name!r} (it runs on that actor only, unlocked); call it from "
                f"the actor's callbacks, or actor.post(publisher.publish, message)"
            )
        if type(message) is not self._mcls or message.subject != self._subject:
            raise UsageError(
                f"publish() on the QoS publisher of {self._key} got "
                f"{MessageKey.of(message) if isinstance(message, Notification) else message!r}; "
                f"it publishes only its own key"
            )
        body = encode(message)
        log = self._log
        if isinstance(log, MemoryLog):
            self._check_outbox(log, len(body))
        seq = log.append(message.timestamp, body)
        self._counters.published += 1
        self._feed.publish(message)
        if not self._flush_pending:
            self._flush_pending = True
            self._actor.post(self._flush)
        return seq

    def publish_with_notification(self, message: N) -> DeliveryFuture:
        """Publish ``message``; the future resolves once every consumer attached
        now acknowledged it (at once when none is), or fails naming each one
        whose session ended (or that gave it up) first."""
        seq = self.publish(message)
        attached = [s for s in self._sessions.values() if s.incoming is not None]
        if not attached:
            if self.offer.persistent:  # (not before it is durable)
                return self._when_durable(seq)
            return delivered_to_none(seq)
        future = DeliveryFuture(seq)
        pending = PendingDelivery(future, [s.name for s in attached])
        for s in attached:
            s.pending.append(pending)
        return future

    def publish_durable(self, message: N) -> DeliveryFuture:
        """Publish ``message``; the future resolves (a :class:`DeliveryReport`
        with no consumers) once it is durable: for a persistent publisher, once
        the journal frame holding it was written and synced per the sync
        policy (the publisher's acknowledgement, as a JetStream PubAck); for
        one that is not, at once.  It fails if the publisher closes first."""
        return self._when_durable(self.publish(message))

    def _when_durable(self, seq: int) -> DeliveryFuture:
        if seq <= self._durable_seq or not self.offer.persistent:
            return delivered_to_none(seq)
        future = DeliveryFuture(seq)
        self._durable_waiters.add(future)
        return future

    def _commit(self) -> int:
        """Commit the log; resolve what became durable.  Returns the durable seq."""
        durable = self._log.commit()
        if durable > self._durable_seq:
            self._durable_seq = durable
            self._durable_waiters.settle(durable)
        return durable

    def forget(self, consumer: str) -> bool:
        """Forget a detached consumer (its unacknowledged messages are no longer
        kept for it).  Returns False when it is unknown or attached."""
        s = self._sessions.get(consumer)
        if s is None or s.incoming is not None:
            return False
        self._drop(s, "forgotten by the publisher")
        return True

    def close(self) -> None:
        """Stop: sessions end (their consumers see the publisher go), the log closes."""
        if self._closed:
            return
        self._closed = True
        if self._commit_timer is not None:
            self._commit_timer.cancel()
        self._commit()
        self._durable_waiters.fail(
            "the publisher closed before its journal said it was durable (with an "
            "interval or os sync policy it may be on disk: read the journal)"
        )
        for s in list(self._sessions.values()):
            self._drop(s, "the publisher closed")
        for feed in (self._session_feed, self._ack_feed, self._feed):
            feed.close()
        self._log.close()

    # ------------------------------------------------------------------ sessions
    def _on_session(self, incoming: IncomingRequest[QosSession]) -> None:
        req = incoming.request
        refusal = session_refusal(req, self._key, self._mcls, self.offer)
        if refusal is not None:
            self._counters.refused += 1
            incoming.reply(Reply(self._subject, status=ReplyStatus.ERROR, reason=refusal))
            return
        s = self._sessions.get(req.consumer)
        if req.join and s is not None and s.incoming is not None and s.incoming.is_active:
            incoming.reply(Reply(self._subject, reason="this consumer has a session here"))
            return
        known = s is not None
        if s is None:
            s = self._sessions[req.consumer] = _Session(req.consumer)
        old = s.incoming
        if old is not None and old is not incoming:  # the consumer replaced it
            old.reply(Reply(self._subject, reason="replaced by a new session"))
        s.incoming = incoming
        s.closing = False
        s.detached_at = None
        s.delivery = Delivery(req.delivery)
        s.window = max(1, min(req.window, self._window))
        s.epoch += 1
        s.tries = 0
        log = self._log
        position = Position(req.start_kind, req.start_value)
        start = s.acked + 1 if known else self._start_of(position)
        if req.origin == self.origin and req.resume_after >= 0:
            start = max(start, req.resume_after + 1) if known else req.resume_after + 1
            s.opened = True
        else:
            s.opened = known
        s.acked = start - 1
        s.next_send = start
        self._counters.sessions_opened += 1
        offer = self.offer
        incoming.reply(
            QosData(
                self._subject,
                origin=self.origin,
                first=start,
                timestamps=[
                    offer.delivery.value,
                    int(offer.persistent),
                    int(offer.ordered),
                    log.next_seq,
                    s.high_sent,
                    int(s.opened),
                ],
                bodies=[],
                attempt=s.epoch,
                kind=OFFER,
                status=_CONTINUING,
            )
        )
        if s.opened:
            self._send(s, self._commit())

    def _start_of(self, position: Position) -> int:
        log = self._log
        kind = position.kind
        if kind == Position.latest().kind:
            return log.next_seq
        if kind == Position.earliest().kind:
            return log.first_seq
        if kind == Position.time(0).kind:
            return log.seq_at_time(position.value)
        return position.value

    def _on_cancel(self, incoming: IncomingRequest[QosSession]) -> None:
        s = self._sessions.get(incoming.request.consumer)
        if s is None or s.incoming is not incoming:
            return
        self._counters.sessions_ended += 1
        # a closing consumer says so first (its acknowledgement comes before the
        # cancel, on the same link and mailbox); a local one can only close
        closing, s.closing = s.closing, False
        remote = incoming.handle.feed.remote is not None
        self._detach(s, "link lost" if remote and not closing else "consumer closed")

    def _detach(self, s: _Session, reason: str) -> None:
        s.incoming = None
        s.detached_at = time.monotonic()
        self._cancel_timer(s)
        self._settle_all(s, reason)
        if s.delivery is Delivery.AT_MOST_ONCE:
            self._sessions.pop(s.name, None)
        elif not _durable(s.name):
            self._actor.schedule(self._forget_after, self._forget_if_away, s)
        self._release()

    def _forget_if_away(self, s: _Session) -> None:
        if s.incoming is None and self._sessions.get(s.name) is s:
            self._drop(s, "gone longer than forget_after")

    def _drop(self, s: _Session, reason: str) -> None:
        self._sessions.pop(s.name, None)
        incoming, s.incoming = s.incoming, None
        self._cancel_timer(s)
        self._settle_all(s, reason)
        if incoming is not None and incoming.is_active:
            incoming.reply(Reply(self._subject, status=ReplyStatus.ERROR, reason=reason))
        self._release()

    def _settle_all(self, s: _Session, reason: str) -> None:
        pending, s.pending = s.pending, deque()
        for p in pending:
            p.settle(s.name, reason)

    # ---------------------------------------------------------------------- acks
    def _on_ack(self, incoming: IncomingRequest[QosAck]) -> None:
        req = incoming.request
        incoming.reply(Reply(self._subject))
        if req.origin != self.origin:
            return
        s = self._sessions.get(req.consumer)
        if s is None:
            return
        attempt = req.attempt
        if attempt == ACK_DETACH:
            self._drop(s, "consumer closed")
            return
        if attempt == ACK_CLOSING:
            s.closing = True
            return
        if attempt == ACK_OPEN:
            if not s.opened and s.incoming is not None:
                s.opened = True
                if req.through >= 0:  # the consumer's saved watermark: resume after it
                    s.acked = min(req.through, self._log.next_seq - 1)
                    s.next_send = s.acked + 1
                self._send(s, self._commit())
            return
        if attempt < s.epoch:
            self._counters.late_acks += 1
            return
        through = min(req.through, s.next_send - 1)
        if through <= s.acked:
            return
        self._counters.acks += 1
        s.acked = through
        s.tries = 0
        pending = s.pending
        while pending and pending[0].future.seq <= through:
            pending.popleft().settle(s.name, None)
        if s.incoming is not None:
            self._send(s, self._commit())
        self._release()

    # ------------------------------------------------------------------- sending
    def _flush(self) -> None:
        self._flush_pending = False
        if self._closed:
            return
        durable = self._commit()
        if durable < self._log.next_seq - 1 and self._commit_timer is None:
            # a sync policy with an interval: commit again until all is durable
            self._commit_timer = self._actor.schedule(COMMIT_RETRY, self._commit_tick)
        for s in self._sessions.values():
            if s.incoming is not None and s.opened:
                self._send(s, durable)
        self._release()

    def _commit_tick(self) -> None:
        self._commit_timer = None
        self._flush()

    def _lost(
        self, incoming: IncomingRequest[QosSession], first: int, count: int, epoch: int
    ) -> bool:
        """Tell the session seqs ``first`` .. ``first + count - 1`` are no longer
        in the log (a LOST item); False when its session is gone."""
        return incoming.reply(
            QosData(
                self._subject,
                origin=self.origin,
                first=first,
                timestamps=[count],
                bodies=[],
                attempt=epoch,
                kind=LOST,
                status=_CONTINUING,
            )
        )

    def _send(self, s: _Session, durable: int) -> None:
        """Send ``s`` what it has credit for, up to ``durable``."""
        incoming = s.incoming
        if incoming is None:
            return
        log = self._log
        subject, origin, epoch = self._subject, self.origin, s.epoch
        limit = min(durable, s.acked + s.window)
        counters = self._counters
        while s.next_send <= limit:
            start = s.next_send
            first_held = log.first_seq
            if start < first_held:  # no longer in the log: say so, never silently
                end = min(first_held - 1, limit)
                counters.lost += end - start + 1
                if not self._lost(incoming, start, end - start + 1, epoch):
                    return
                s.next_send = end + 1
                s.acked = max(s.acked, end)
                continue
            items = log.read(start, min(BATCH, limit - start + 1))
            if not items:
                break
            if items[0][0] != start:  # retention took them meanwhile: a LOST range first
                s.next_send = items[0][0]
                counters.lost += s.next_send - start
                if not self._lost(incoming, start, s.next_send - start, epoch):
                    return
                s.acked = max(s.acked, s.next_send - 1)
            ok = incoming.reply(
                QosData(
                    subject,
                    origin=origin,
                    first=items[0][0],
                    timestamps=[item[1] for item in items],
                    bodies=[item[2] for item in items],
                    attempt=epoch,
                    kind=DATA,
                    status=_CONTINUING,
                )
            )
            if not ok:
                return
            last = items[-1][0]
            counters.sent += len(items)
            if start <= s.high_sent:
                counters.resent += min(last, s.high_sent) - start + 1
            s.high_sent = max(s.high_sent, last)
            s.next_send = last + 1
        if s.delivery is Delivery.AT_MOST_ONCE:
            s.acked = s.next_send - 1
            return
        if s.next_send - 1 >= s.acked + s.window and durable > s.next_send - 1:
            counters.window_full += 1
        if s.next_send - 1 > s.acked and s.timer is None:
            self._arm(s)

    def _arm(self, s: _Session) -> None:
        delay = min(self._ack_wait * 2**s.tries, self._max_wait)
        s.timer = self._actor.schedule(delay, self._expire, s, s.acked, s.epoch)

    def _cancel_timer(self, s: _Session) -> None:
        if s.timer is not None:
            s.timer.cancel()
            s.timer = None

    def _expire(self, s: _Session, acked: int, epoch: int) -> None:
        """No acknowledgement covered the oldest unacknowledged message in time."""
        s.timer = None
        if s.incoming is None or self._sessions.get(s.name) is not s:
            return
        if s.acked >= s.next_send - 1:  # everything sent is acknowledged
            return
        if s.acked > acked or s.epoch != epoch:  # progress since: wait for the new oldest
            self._arm(s)
            return
        if s.tries + 1 >= self._max_attempts:
            self._dead_letter(s)
        else:
            s.tries += 1
        s.epoch += 1
        s.next_send = s.acked + 1
        self._send(s, self._commit())

    def _dead_letter(self, s: _Session) -> None:
        seq = s.acked + 1
        attempts = s.tries + 1
        reason = f"not acknowledged after {attempts} attempts"
        self._counters.dead_letters += 1
        publish = self._system_publish
        if publish is not None:
            publish(
                DeadLetter(
                    "actorbus.system",
                    key=self._key,
                    origin=self.origin,
                    seq=seq,
                    consumer=s.name,
                    attempts=attempts,
                    reason=reason,
                )
            )
        s.acked = seq
        s.tries = 0
        pending = s.pending
        while pending and pending[0].future.seq <= seq:
            p = pending.popleft()
            p.settle(s.name, f"dead-lettered: {reason}" if p.future.seq == seq else None)
        assert s.incoming is not None
        s.incoming.reply(
            QosData(
                self._subject,
                origin=self.origin,
                first=seq,
                timestamps=[attempts],
                bodies=[],
                attempt=s.epoch + 1,
                kind=DEAD,
                status=_CONTINUING,
            )
        )
        self._release()

    # -------------------------------------------------------------------- memory
    def _release(self) -> None:
        log = self._log
        if self._sessions:
            through = min(s.acked for s in self._sessions.values())
        else:
            through = log.next_seq - 1
        if through >= log.first_seq:
            log.release(through)
        if isinstance(log, MemoryLog):
            self._congestion(log)

    def _congestion(self, log: MemoryLog) -> None:
        fill = max(log.held / self._outbox_messages, log.held_bytes / self._outbox_bytes)
        congested = fill >= 0.5 if not self._congested else fill >= 0.25
        if congested != self._congested:
            self._congested = congested
            if self._on_congestion is not None:
                self._on_congestion(congested, self)

    def _check_outbox(self, log: MemoryLog, size: int) -> None:
        held, held_bytes = log.held, log.held_bytes
        if held < self._outbox_messages and held_bytes + size <= self._outbox_bytes:
            if (
                self._congested
                or held * 2 >= self._outbox_messages
                or held_bytes * 2 >= self._outbox_bytes
            ):
                self._congestion(log)
            return
        self._release()
        if log.held < self._outbox_messages and log.held_bytes + size <= self._outbox_bytes:
            return
        self._counters.outbox_full += 1
        slowest = min(self._sessions.values(), key=lambda s: s.acked, default=None)
        who = (
            f"consumer {slowest.name!r} ({'attached' if slowest.incoming else 'detached'}) "
            f"acknowledged through {slowest.acked}"
            if slowest is not None
            else "no consumer"
        )
        raise OutboxFull(
            f"the QoS publisher of {self._key} holds {log.held} unacknowledged messages "
            f"({log.held_bytes} bytes; limits outbox_messages={self._outbox_messages}, "
            f"outbox_bytes={self._outbox_bytes}); the slowest is {who} of {log.next_seq - 1}; "
            f"publish more slowly (watch on_congestion), raise the limits, or forget() a "
            f"consumer that is gone for good"
        )

    def __repr__(self) -> str:
        return f"<QosPublisher {self._key} origin={self.origin} last_seq={self.last_seq}>"


def _ignore(*args: object) -> None:
    """A feed callback with nothing to do."""
