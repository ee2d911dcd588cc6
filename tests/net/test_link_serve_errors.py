"""A ``serve()`` handler that raises, asked across a real TCP link: the failure is
reported on the replier's node, and the requestor's ERROR reply carries the
exception's class only unless the replier chose ``error_detail="message"``."""

from __future__ import annotations

import threading

import pytest
from nodes.messages import Answer, Ask
from nodes.support import buses, linked, started, wait_for

from actorbus import Actor, Bus, MessageKey, ReplyStatus
from actorbus.actors import FailedTask

WAIT = 10.0


class Failing(Actor):
    """Serves Ask on ``/fails`` (the default detail) and ``/tells`` (the message)."""

    def __init__(self) -> None:
        super().__init__("failing")
        self.failures: list[tuple[Exception, FailedTask]] = []

    def startup(self) -> None:
        self.serve(Ask, "/fails", self.answer)
        self.serve(Ask, "/tells", self.answer, error_detail="message")

    def answer(self, request: Ask) -> Answer:
        raise LookupError(f"secret table row {request.q} is missing")

    def on_failure(self, exc: Exception, task: FailedTask) -> None:
        self.failures.append((exc, task))


def _remote_up(bus: Bus, subject: str) -> None:
    wait_for(lambda: bus.router.feeds(MessageKey(Ask, subject))["repliers"] == 1, subject)


@pytest.mark.parametrize(
    ("subject", "reason"),
    [
        ("/fails", "LookupError"),
        ("/tells", "LookupError: secret table row 3 is missing"),
    ],
)
def test_a_serve_failure_across_a_link_is_reported_there_and_sends_its_class(
    subject: str, reason: str
) -> None:
    with buses("replier", "requestor") as (a, b):
        linked(a, b)
        failing = Failing()
        started(a, failing)
        _remote_up(b, subject)
        (reply,) = b.request_all(Ask(subject, q=3), timeout=WAIT)
        assert reply.status is ReplyStatus.ERROR
        assert reply.reason is not None
        if subject == "/fails":
            assert "LookupError" in reply.reason and "secret" not in reply.reason
        else:
            assert reply.reason == reason
        drained = threading.Event()
        failing.post(drained.set)
        assert drained.wait(WAIT)
        ((exc, task),) = failing.failures  # reported on the replier's node
        assert isinstance(exc, LookupError)
        assert task.key == MessageKey(Ask, subject) and task.actor == "failing"
        assert task.callback == "Failing.answer"
