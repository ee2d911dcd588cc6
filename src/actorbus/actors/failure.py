"""What a failed task was, and the default report of a failure in actor code.

A dispatcher that catches an exception from a task builds a :class:`FailedTask`
(which actor, which dispatcher, which application callback, which feed key and
message) and hands it with the exception to the actor's
:meth:`~actorbus.Actor.on_failure`.  The default ``on_failure`` calls
:func:`report_failure`, which reports it through :func:`actorbus._log.report`:
to stderr when the application configured no logging at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actorbus._log import report
from actorbus.actors.mailbox import WatchedTask, _apply
from actorbus.bus.feeds import Feed, IncomingRequest, RequestHandle
from actorbus.bus.message import Message, MessageKey

__all__ = ["FailedTask", "callback_label", "describe_task", "report_failure"]


@dataclass(frozen=True, slots=True)
class FailedTask:
    """The task whose callback raised, as :meth:`~actorbus.Actor.on_failure` is told."""

    #: the actor's name.
    actor: str
    #: the name of the actor's dispatcher.
    dispatcher: str
    #: the application callback that raised (qualified name), e.g. ``"Printer.show"``.
    callback: str
    #: the feed's key when the task was a feed callback, else None.
    key: MessageKey | None = None
    #: the message the callback was given (notification, request or reply), if any.
    message: Message | None = None

    def __str__(self) -> str:
        where = f" on feed {self.key}" if self.key is not None else ""
        return f"callback {self.callback}{where} of actor {self.actor!r}"


def callback_label(fn: object) -> str:
    """A readable name for a task's callable, for log records and errors.

    Runtime components that post their own bound methods (timers) give a better
    name through a ``_ab_label`` string attribute on the instance.
    """
    owner = getattr(fn, "__self__", None)
    label = getattr(owner, "_ab_label", None) if owner is not None else None
    if isinstance(label, str):
        return label
    name = getattr(fn, "__qualname__", None)
    if isinstance(name, str):
        return name
    return repr(fn)


def _message_of(arg: Any) -> Message | None:
    if isinstance(arg, Message):
        return arg
    if isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[1], Message):
        return arg[1]  # a queue member's (sender, message)
    if isinstance(arg, IncomingRequest):
        request: Message = arg.request
        return request
    if isinstance(arg, tuple) and len(arg) == 4 and isinstance(arg[0], RequestHandle):
        reply = arg[1]  # a reply delivery: (handle, reply, remaining, sender)
        return reply if isinstance(reply, Message) else None
    return None


def describe_task(actor: str, dispatcher: str, fn: object, arg: Any) -> FailedTask:
    """The :class:`FailedTask` for the queued task ``fn(arg)`` (a packed task when
    ``fn`` is the mailbox's ``_apply``; a recorded actor's task, unwrapped)."""
    if isinstance(fn, WatchedTask):
        fn = fn.fn
    if fn is _apply:
        fn, arg = arg[0], (arg[1] if len(arg) == 2 else arg[1:])
    owner = getattr(fn, "__self__", None)
    # a delivery stamped with its sender, or a queue member's: the subscriber's
    member = getattr(owner, "target_feed", None)
    if isinstance(member, Feed):
        owner = member
    if isinstance(owner, Feed):
        callback = owner.callback_for(fn) if member is None else getattr(owner, "_cb_message", None)
        return FailedTask(
            actor,
            dispatcher,
            callback_label(callback if callback is not None else fn),
            owner.key,
            _message_of(arg),
        )
    return FailedTask(actor, dispatcher, callback_label(fn), None, _message_of(arg))


def report_failure(exc: BaseException, task: FailedTask, *, outcome: str) -> None:
    """Report ``exc`` raised by ``task`` at ERROR, with its traceback (once)."""
    report(
        "ERROR",
        f"{task} on dispatcher {task.dispatcher!r} raised {type(exc).__name__}: {exc}; {outcome}",
        exception=exc,
        actor=task.actor,
        dispatcher=task.dispatcher,
    )
