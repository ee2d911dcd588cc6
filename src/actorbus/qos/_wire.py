"""The QoS session protocol: ordinary bus requests and replies on the user's
subject, so it crosses links and forwarding hops like any request.

A consumer's :class:`QosSession` request is one long-lived session with each
publisher of the subject; the publisher answers with an OFFER, then streams
:class:`QosData` replies (OK_CONTINUING).  The consumer acknowledges with
:class:`QosAck` requests (cumulative), each answered at once with one OK_FINAL
reply.  A refused session gets an ERROR reply whose text is the refusal."""

from __future__ import annotations

from ..bus.message import Notification, Reply, Request

__all__ = [
    "ACK_DETACH",
    "ACK_OPEN",
    "DATA",
    "DEAD",
    "LOST",
    "OFFER",
    "DeadLetter",
    "QosAck",
    "QosData",
    "QosSession",
]

#: QosData.kind: messages from ``first`` on
DATA = 0
#: QosData.kind: the session is accepted; ``timestamps`` is (delivery, persistent,
#: ordered, next_seq) in force, ``first`` the seq a new consumer would start at
OFFER = 1
#: QosData.kind: seqs first .. first + len(timestamps) - 1 are no longer in the
#: publisher's log (``timestamps`` holds only their count when a range is long:
#: one entry, the count)
LOST = 2
#: QosData.kind: seq ``first`` was given up after max_attempts
DEAD = 3

#: QosAck.attempt of the consumer's opening acknowledgement (after the OFFER):
#: ``through`` is its saved watermark for the origin, -1 when it has none
ACK_OPEN = 0
#: QosAck.attempt of a consumer closed for good: the publisher forgets it
ACK_DETACH = -1


class QosData(Reply, type_name="actorbus.QosData"):
    """Items of one session, from one publisher (``origin``)."""

    origin: str
    first: int
    timestamps: list[int]
    bodies: list[bytes]
    attempt: int
    kind: int = DATA


class QosSession(Request, type_name="actorbus.QosSession", replies=(QosData,)):
    """A consumer asks for a session with every publisher of the subject."""

    consumer: str
    type_name: str
    delivery: int
    persistent: bool
    ordered: bool
    #: the consumer's acknowledged watermark for ``origin`` (-1: none saved)
    resume_after: int
    #: the publisher ``resume_after`` is for ("" = any: the publisher offers
    #: first and waits for the consumer's opening acknowledgement)
    origin: str
    start_kind: int
    start_value: int
    window: int
    #: a probe: a publisher with a session open for ``consumer`` answers at once
    #: (OK_FINAL) and keeps it; one without takes this request as its session
    join: bool = False


class QosAck(Request, type_name="actorbus.QosAck"):
    """Every seq <= ``through`` from ``origin`` is acknowledged by ``consumer``'s
    application; ``attempt`` is the session round the acknowledged items came in."""

    consumer: str
    origin: str
    through: int
    attempt: int


class DeadLetter(Notification, type_name="actorbus.DeadLetter"):
    """A QoS publisher gave up a message for one consumer after ``attempts``
    deliveries without an acknowledgement.  Published LOCAL_ONLY on the system
    subject of the publisher's bus."""

    #: the feed's key (``TypeName:"subject"``)
    key: str
    origin: str
    seq: int
    consumer: str
    attempts: int
    reason: str
