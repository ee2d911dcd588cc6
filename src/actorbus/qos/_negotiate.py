"""Negotiation: every QoS combination that cannot be given is refused with a
text naming the key, what was asked, what is offered, and the fix — at
``qos_subscribe`` / ``qos_publisher`` time when the caller alone decides it,
else by the publisher when the session arrives (an ERROR reply whose text
the subscriber's status shows).  Nothing is ever silently degraded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bus.message import MessageKey
from ._levels import Delivery, Position, Qos, QosRefused
from ._wire import QosSession

__all__ = ["check_publisher", "check_subscriber", "refused", "session_refusal"]

#: every refusal's text starts with it (the subscriber tells a refusal from a
#: lost session by it)
PREFIX = "QoS refused for "


def refused(key: str, key_name: str, asked: object, offered: object, fix: str) -> str:
    """The refusal text: the key, what was asked and offered for ``key_name``, the fix."""
    return f"{PREFIX}{key}: {key_name} asked {asked}, offered {offered}; {fix}"


def _key(message_class: type, subject: Any) -> str:
    if isinstance(subject, str):
        return str(MessageKey(message_class, subject))
    return f"{getattr(message_class, '__type_name__', message_class)}:{subject!s}"


def _check_subject(key: str, subject: Any, who: str) -> None:
    if not isinstance(subject, str) or "*" in subject or ">" in subject:
        raise QosRefused(
            refused(
                key,
                "subject",
                f"the wildcard {subject!s}",
                "one exact subject per QoS feed",
                f"call {who} once for each exact subject",
            )
        )


def check_window(key: str, window: int) -> None:
    if not isinstance(window, int) or window < 1:
        raise QosRefused(
            refused(
                key,
                "window",
                repr(window),
                "1 or more unacknowledged messages",
                "pass window=1024 (the default) or another positive count",
            )
        )


def check_subscriber(  # noqa: PLR0917  (qos_subscribe's arguments, checked together)
    message_class: type,
    subject: Any,
    qos: Qos,
    name: str | None,
    state_dir: str | Path | None,
    start: Position,
    window: int,
) -> str:
    """Refuse at ``qos_subscribe`` what the subscriber alone decides; returns the key."""
    key = _key(message_class, subject)
    _check_subject(key, subject, "qos_subscribe()")
    check_window(key, window)
    if qos.delivery is Delivery.EXACTLY_ONCE and state_dir is None:
        raise QosRefused(
            refused(
                key,
                "delivery",
                "exactly-once without state_dir",
                "exactly-once only with a durable watermark",
                "pass state_dir= (a directory the consumer keeps its acknowledged "
                "seqs in) and name=, or ask Delivery.AT_LEAST_ONCE",
            )
        )
    if qos.persistent and not name:
        raise QosRefused(
            refused(
                key,
                "persistent",
                "a persistent feed without name=",
                "persistent sessions only for a named (durable) consumer",
                "pass name= (the consumer's durable name)",
            )
        )
    if state_dir is not None and not name:
        raise QosRefused(
            refused(
                key,
                "state_dir",
                f"state_dir={str(state_dir)!r} without name=",
                "saved state only for a named (durable) consumer",
                "pass name= (the consumer's durable name)",
            )
        )
    if not start.is_latest and not qos.persistent:
        raise QosRefused(
            refused(
                key,
                "start",
                str(start),
                "Position.latest() only for a feed that is not persistent",
                "ask Qos(persistent=True) of a persistent publisher, or start at Position.latest()",
            )
        )
    if name is not None and (not name or name.startswith("~")):
        raise QosRefused(
            refused(
                key,
                "name",
                repr(name),
                "a non-empty name not starting with '~' (generated names do)",
                "choose another name",
            )
        )
    return key


def check_publisher(
    message_class: type, subject: Any, offer: Qos, journal: str | Path | None, window: int
) -> str:
    """Refuse at ``qos_publisher`` what the publisher alone decides; returns the key."""
    key = _key(message_class, subject)
    _check_subject(key, subject, "qos_publisher()")
    check_window(key, window)
    if journal is not None and not offer.persistent:
        raise QosRefused(
            refused(
                key,
                "journal",
                f"journal={str(journal)!r}",
                f"an offer that is not persistent ({offer})",
                "offer Qos(persistent=True) with the journal, or drop journal=",
            )
        )
    if offer.persistent and journal is None:
        raise QosRefused(
            refused(
                key,
                "persistent",
                f"an offer {offer}",
                "no journal to keep it in",
                "pass journal= (the journal directory), or offer Qos(persistent=False)",
            )
        )
    return key


def session_refusal(req: QosSession, key: str, message_class: type, offer: Qos) -> str | None:
    """Why the publisher refuses ``req`` (None: accepted)."""
    own = getattr(message_class, "__type_name__", "")
    if req.type_name != own:
        return refused(
            key,
            "message type",
            req.type_name,
            own,
            f"subscribe with the publisher's type {own} on this subject, or use another subject",
        )
    try:
        asked = Delivery(req.delivery)
    except ValueError:
        return refused(
            key,
            "delivery",
            f"level {req.delivery}",
            offer.delivery.text,
            "upgrade the consumer's actorbus to the publisher's version",
        )
    if req.persistent and not offer.persistent:
        return refused(
            key,
            "persistent",
            "a persistent session",
            f"{offer} (no journal)",
            "make the publisher persistent (qos_publisher(offer=Qos(persistent=True), "
            "journal=...)), or subscribe with Qos(persistent=False)",
        )
    if asked.value > offer.delivery.value:
        return refused(
            key,
            "delivery",
            asked.text,
            offer.delivery.text,
            f"offer Qos(delivery=Delivery.{asked.name}) at the publisher, or ask "
            f"Delivery.{offer.delivery.name} at the subscriber",
        )
    return None
