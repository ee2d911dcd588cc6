"""One-call request/reply, behind :meth:`FeedOwner.serve`, :meth:`FeedOwner.ask`,
:meth:`FeedOwner.ask_all` and :meth:`FeedOwner.ask_blocking` (``bus/owner.py``).

* :class:`Server` / :class:`AsyncServer` turn a handler that *returns* (or
  yields) its replies into a request callback; what the handler raises goes on
  to the request machinery and the actor's failure contract, as a raw
  replier's would, after :func:`_tell` answered with the text when the replier
  chose ``error_detail="message"``.
* :class:`ReplierUp` is the status callback of the short-lived requestor of a
  one-call request, and holds the rule they share: wait, within the timeout,
  for a replier to come UP.
* :func:`refuse_blocking_deadlock` is the rule of the blocking forms
  (``ask_blocking``, ``Bus.request_all``): never block the only thread that
  could run a replier of the key.
* :class:`FirstAnswer` is what ``ask`` and ``ask_blocking`` keep of the replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, runtime_checkable

from ..errors import RequestError, RequestTimeoutError, UsageError
from .feeds import IncomingRequest, RequestFeed, RequestHandle
from .message import MessageKey, Reply, ReplyStatus, Request
from .scope import FeedState

__all__ = [
    "AsyncServer",
    "FirstAnswer",
    "ReplierUp",
    "Server",
    "is_end_marker",
    "refuse_blocking_deadlock",
    "timed_out",
]


class FirstAnswer:
    """What :meth:`FeedOwner.ask` and :meth:`FeedOwner.ask_blocking` keep of the
    replies: the first replier's final reply (a stream's last one); an ERROR
    reply is raised."""

    __slots__ = ("last", "request")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.last: Reply | None = None

    def take(self, reply: Reply) -> bool:
        """Keep ``reply``; True when the answer is complete."""
        if reply.status is ReplyStatus.ERROR:
            raise RequestError(
                f"{type(self.request).__qualname__} on {self.request.subject!r}: the replier "
                f"answered ERROR: {reply.reason}"
            )
        if not is_end_marker(reply):
            self.last = reply
        return reply.status is not ReplyStatus.OK_CONTINUING

    def result(self) -> Reply:
        if self.last is None:
            raise RequestError(
                f"{type(self.request).__qualname__} on {self.request.subject!r}: the replier "
                f"ended its stream without a reply"
            )
        return self.last


def timed_out(
    request: Request, timeout: float | None, *, stop_at_final: bool
) -> RequestTimeoutError:
    return RequestTimeoutError(
        f"{type(request).__qualname__} on {request.subject!r}: no "
        f"{'answer' if stop_at_final else 'end of replies'} within "
        f"{timeout:g} s; raise the timeout or check that the replier answers"
    )


@runtime_checkable
class _DispatchedOwner(Protocol):
    """What the blocking forms ask a replier's owner (``FeedOwner`` declares it,
    ``Actor`` answers it): the owner's dispatcher, when blocking here would stop it."""

    name: str

    def _ab_blocking_deadlock(self) -> str | None: ...


def refuse_blocking_deadlock(router: Any, key: MessageKey, asker: object, form: str) -> None:
    """Raise UsageError when a blocking request of ``key`` (by ``asker``, an actor
    or None, through ``form``) would wait for a replier that can only run on the
    calling thread: the asker itself, or a replier pinned to the dispatcher
    whose only thread is this one (``Dispatcher.blocking_here_would_deadlock``)."""
    for replier in router.repliers(key):
        owner = replier.owner
        if asker is not None and owner is asker:
            raise UsageError(
                f"{form}() of {key} by actor {getattr(asker, 'name', asker)!r}, which is "
                f"itself a replier of that key: its mailbox runs one task at a time, so "
                f"this would deadlock; answer the request directly instead of asking"
            )
        if not isinstance(owner, _DispatchedOwner):
            continue  # not an actor (a remote proxy, a script's replier)
        dispatcher = owner._ab_blocking_deadlock()
        if dispatcher is not None:
            raise UsageError(
                f"{form}() of {key} on the only thread of dispatcher {dispatcher!r}, "
                f"to which its replier {owner.name!r} is pinned: this would deadlock (the "
                f"replier could run only after this task). Pin the replier to another "
                f"dispatcher (or give {dispatcher!r} threadCount >= 2), or ask from an "
                f"asyncio dispatcher with await self.ask(...)"
            )


class ReplierUp:
    """The status callback of the short-lived requestor behind :meth:`FeedOwner.ask`,
    :meth:`FeedOwner.ask_all` and :meth:`FeedOwner.ask_blocking`, and the rule
    they share:

    **A one-call request waits, within its timeout, for a replier to come UP.**
    Actors on other dispatchers start concurrently, so a replier may come UP
    just after the asker's own ``startup`` ran; failing at once would make the
    first ask of a node a race.  The request is sent when a replier is UP (at
    once if one is); when none comes UP before the timeout ends, it fails with
    :class:`~actorbus.RequestTimeoutError` "no replier came up within N s".
    Repliers that are UP but whose conditions all refuse the request fail it at
    once, as ``RequestFeed.request`` does.  The timeout covers the wait and the
    answer together (None: no limit on either).  ``Bus.request_all`` and its
    kin keep failing at once: a script's ``bus.startup(...).wait()`` returns
    after every startup ran, and ``Bus.topics`` relies on it."""

    __slots__ = ("_is_up", "_loop", "_woken")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._is_up = threading.Event()
        self._loop = loop
        self._woken: asyncio.Event | None = asyncio.Event() if loop is not None else None

    def __call__(self, state: FeedState, feed: RequestFeed[Any]) -> None:
        # runs on whichever thread changed the repliers' state
        if state is FeedState.UP:
            self._is_up.set()
            if self._loop is not None and self._woken is not None:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                    self._loop.call_soon_threadsafe(self._woken.set)
        else:
            self._is_up.clear()

    async def request(
        self, feed: RequestFeed[Any], request: Request, timeout: float | None
    ) -> RequestHandle[Any]:
        """Send ``request`` once a replier is UP (see the rule above), awaiting it."""
        assert self._woken is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _left(deadline, request, timeout, feed)
            handle = _try_request(feed, request, left)
            if handle is not None:
                return handle
            self._woken.clear()
            if self._is_up.is_set():
                continue  # came UP since the try
            try:
                await asyncio.wait_for(self._woken.wait(), left)
            except TimeoutError:
                raise _no_replier(request, timeout, feed) from None

    def request_blocking(
        self, feed: RequestFeed[Any], request: Request, timeout: float | None
    ) -> RequestHandle[Any]:
        """Send ``request`` once a replier is UP (see the rule above), blocking."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _left(deadline, request, timeout, feed)
            handle = _try_request(feed, request, left)
            if handle is not None:
                return handle
            if not self._is_up.wait(left):
                raise _no_replier(request, timeout, feed)


def _left(
    deadline: float | None, request: Request, timeout: float | None, feed: RequestFeed[Any]
) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise _no_replier(request, timeout, feed)
    return left


def _try_request(
    feed: RequestFeed[Any], request: Request, timeout: float | None
) -> RequestHandle[Any] | None:
    """The request's handle, or None when no replier is UP to take it."""
    try:
        return feed.request(request, timeout=timeout)
    except RequestError:
        if feed.feed_state is FeedState.UP:
            raise  # repliers are up, and every one's condition refused it
        return None


def _no_replier(
    request: Request, timeout: float | None, feed: RequestFeed[Any]
) -> RequestTimeoutError:
    return RequestTimeoutError(
        f"{type(request).__qualname__} on {request.subject!r}: no replier came up within "
        f"{timeout:g} s (none advertised and UP in scope {feed.scope.name}); start the "
        f"replier, check the request's class and subject, or raise the timeout"
    )


def is_end_marker(reply: Reply) -> bool:
    """A bare Reply with status OK_FINAL: the end of a streamed answer (serve())."""
    return type(reply) is Reply and reply.status is ReplyStatus.OK_FINAL and reply.reason is None


def _final(reply: Reply) -> Reply:
    return reply if reply.status.is_final else reply._replace(status=ReplyStatus.OK_FINAL)


def _continuing(value: object, handler: object) -> Reply:
    if not isinstance(value, Reply):
        raise UsageError(
            f"handler {_name(handler)} yielded {value!r}; a streaming handler yields Reply "
            f"instances of a class its request allows"
        )
    if value.status is ReplyStatus.OK_CONTINUING:
        return value
    return value._replace(status=ReplyStatus.OK_CONTINUING)  # type: ignore[no-any-return]


def _name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else repr(fn)


def _tell(incoming: IncomingRequest[Any], exc: Exception, detail: str) -> None:
    """The handler failed with ``exc``, which its caller re-raises for the failure
    contract (the request machinery then answers ERROR naming the class only, if
    the request is still active, and reports it).  With ``error_detail="message"``
    answer first, with the class and the text."""
    if detail == "message" and incoming.is_active:
        text = str(exc)
        incoming.reply(
            Reply(
                incoming.request.subject,
                status=ReplyStatus.ERROR,
                reason=f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
            )
        )


def _returned_none(incoming: IncomingRequest[Any], handler: object) -> UsageError:
    problem = (
        f"handler {_name(handler)} returned None for {incoming.request!r}; return a Reply "
        f"(or yield Replies to stream them, or raise to answer ERROR)"
    )
    if incoming.is_active:
        incoming.reply(
            Reply(incoming.request.subject, status=ReplyStatus.ERROR, reason="replier failed")
        )
    return UsageError(problem)


class Server:
    """The request callback of :meth:`FeedOwner.serve` for a plain or generator
    handler.  What the handler raises propagates (after :func:`_tell`) to the
    request machinery and the actor's failure contract, as a raw replier's would."""

    __slots__ = ("__qualname__", "detail", "handler")

    def __init__(self, handler: Callable[[Any], Any], detail: str) -> None:
        self.handler = handler
        self.detail = detail
        self.__qualname__ = _name(handler)  # failure reports name the handler

    def __call__(self, incoming: IncomingRequest[Any]) -> None:
        try:
            result = self.handler(incoming.request)
        except Exception as exc:
            _tell(incoming, exc, self.detail)
            raise
        if inspect.isgenerator(result):
            self._stream(incoming, result)
        else:
            _answer(incoming, self.handler, result, self.detail)

    def _stream(self, incoming: IncomingRequest[Any], gen: Any) -> None:
        try:
            while True:
                try:
                    value = next(gen)
                except StopIteration as stop:
                    end = stop.value
                    incoming.reply(
                        _final(end)
                        if isinstance(end, Reply)
                        else Reply(incoming.request.subject, status=ReplyStatus.OK_FINAL)
                    )
                    return
                if not incoming.reply(_continuing(value, self.handler)):
                    return  # cancelled: stop the generator
        except Exception as exc:
            _tell(incoming, exc, self.detail)
            raise
        finally:
            gen.close()


class AsyncServer(Server):
    """The request callback of :meth:`FeedOwner.serve` for an ``async def`` handler
    or an async generator (run by an asyncio dispatcher, which awaits it)."""

    __slots__ = ()

    def __call__(self, incoming: IncomingRequest[Any]) -> Coroutine[Any, Any, None]:  # type: ignore[override]
        return self._serve(incoming)

    async def _serve(self, incoming: IncomingRequest[Any]) -> None:
        try:
            result = self.handler(incoming.request)
            if not inspect.isasyncgen(result):
                result = await result
        except Exception as exc:
            _tell(incoming, exc, self.detail)
            raise
        if inspect.isasyncgen(result):
            await self._astream(incoming, result)
        else:
            _answer(incoming, self.handler, result, self.detail)

    async def _astream(self, incoming: IncomingRequest[Any], agen: Any) -> None:
        try:
            async for value in agen:
                if not incoming.reply(_continuing(value, self.handler)):
                    return
            incoming.reply(Reply(incoming.request.subject, status=ReplyStatus.OK_FINAL))
        except Exception as exc:
            _tell(incoming, exc, self.detail)
            raise
        finally:
            await agen.aclose()


def _answer(incoming: IncomingRequest[Any], handler: object, result: object, detail: str) -> None:
    """Send what a (non-streaming) handler returned as the final reply."""
    if result is None:
        raise _returned_none(incoming, handler)
    try:
        if not isinstance(result, Reply):
            raise _not_a_reply(handler, result)
        incoming.reply(_final(result))
    except Exception as exc:
        _tell(incoming, exc, detail)
        raise


def _not_a_reply(handler: object, result: object) -> UsageError:
    return UsageError(
        f"handler {_name(handler)} returned {type(result).__name__} {result!r}, not a Reply; "
        f"return an instance of a reply class the request allows"
    )
