"""Message types shared by the link tests and the subprocess node (same type names)."""

from __future__ import annotations

from actorbus import Notification, Reply, Request


class Counter(Notification, type_name="linktest.Counter"):
    """A counter published by a node; ``payload`` pads it to a chosen size."""

    n: int
    payload: bytes = b""


class Answer(Reply, type_name="linktest.Answer"):
    value: int


class Ask(Request, type_name="linktest.Ask", replies=(Answer,)):
    """Answered with ``Answer(value=q * 2)``; with ``hold`` the replier keeps it unanswered."""

    q: int
    hold: bool = False


class Blob(Reply, type_name="linktest.Blob"):
    """A reply of ``size`` bytes (large replies, direct writes, frame limits)."""

    data: bytes


class Fetch(Request, type_name="linktest.Fetch", replies=(Blob,)):
    size: int
