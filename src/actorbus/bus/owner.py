"""The feed side of an actor: role callbacks and helpers to open feeds.

:class:`FeedOwner` is a mixin of :class:`actorbus.Actor`.  It gives each actor

* the **role methods** the bus calls when a feed has no callable of its own —
  ``on_publish_status``, ``on_feed_status``, ``on_message``, ``on_request``,
  ``on_cancel``, ``on_reply`` — which a subclass overrides;
* the **long form** ``_open_publish_feed`` / ``_open_subscribe_feed`` /
  ``_open_request_feed`` / ``_open_reply_feed``, returning an OPEN feed to wire
  and place yourself (public as ``Actor.actor_context.open_*_feed``);
* the **short form** ``publisher`` / ``subscribe`` / ``requestor`` / ``replier``,
  which open, wire and place in one call;
* **request/reply in one line**: :meth:`FeedOwner.serve` advertises a replier
  whose handler *returns* its reply (or yields a stream of them), and, in
  ``async def`` code on an asyncio dispatcher, ``await self.ask(request)``
  returns the answer and ``async for reply in self.ask_all(request)`` iterates
  over every replier's replies.

Why ``ask`` does not go through the actor's mailbox: the coroutine that awaits
the answer *is* the actor's current task, and the mailbox runs one task at a
time, so a reply queued there would wait for the task that waits for it.  The
replies go to the loop the coroutine runs on instead, and the coroutine
resumes there (as the actor: ``current_actor()`` is right at every step).

Opening a feed registers the actor with its bus if it is not registered yet
(without running ``startup``).

Every form takes ``discoverable`` (default True): with False, discovery
(``Bus.topics()``, ``actorbus topics``) never lists the feed.  A feed on a
private subject (``.``-prefixed) is never listed, whatever the option.  The
short-lived requestor behind :meth:`FeedOwner.ask` / :meth:`FeedOwner.ask_all`
is not listed either.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import queue
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import RegistrationError, UsageError
from ._oneshot import (
    AsyncServer,
    FirstAnswer,
    ReplierUp,
    Server,
    is_end_marker,
    refuse_blocking_deadlock,
    timed_out,
)
from .feeds import (
    IncomingRequest,
    OutputWatch,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    SubscribeFeed,
    WatchedPublishFeed,
    WatchedRequestFeed,
    _direct,
    _refuse_async,
)
from .message import Message, MessageKey, Notification, Reply, ReplyStatus, Request
from .queues import QueueGroup
from .scope import FeedState, Scope
from .subjects import Wildcard, warn_if_star_in_exact_subject

if TYPE_CHECKING:
    from .router import Router

__all__ = ["FeedOwner", "refuse_blocking_deadlock"]

N = TypeVar("N", bound=Notification)
Q = TypeVar("Q", bound=Request)


def _default_callback(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn._ab_default_callback = True  # type: ignore[attr-defined]
    return fn


def checked_key(cls: Any, subject: Any, family: type[Message]) -> MessageKey:
    """The key for ``cls``/``subject``, or UsageError when they cannot make one."""
    if not (isinstance(cls, type) and issubclass(cls, family)):
        raise UsageError(
            f"expected a {family.__name__} subclass, found {cls!r}; this feed carries "
            f"{family.__name__.lower()}s"
        )
    if not isinstance(subject, str):
        hint = (
            "; only a subscription takes a wildcard (a publisher, requestor or replier "
            "names one subject)"
            if isinstance(subject, Wildcard)
            else ""
        )
        raise UsageError(f"subject must be a str, found {type(subject).__name__} {subject!r}{hint}")
    return MessageKey(cls, subject)


def subscription_key(cls: Any, subject: Any) -> tuple[MessageKey, Wildcard | None]:
    """The key of a subscription to ``subject`` (a str or a :class:`Wildcard`),
    and the wildcard if it is one."""
    if isinstance(subject, Wildcard):
        return checked_key(cls, subject.text, Notification), subject
    key = checked_key(cls, subject, Notification)
    warn_if_star_in_exact_subject(subject)
    return key, None


class FeedOwner:
    """Mixin: role callbacks and feed helpers (see the module docstring)."""

    __slots__ = ()

    # -------------------------------------------------------------- role methods
    @_default_callback
    def on_publish_status(self, state: FeedState, feed: PublishFeed[Any]) -> None:
        """A publisher's subscribers appeared (UP) or all left (DOWN)."""

    @_default_callback
    def on_congestion(self, congested: bool, feed: PublishFeed[Any]) -> None:
        """A link a publisher sends to went over its output queue's high-water
        mark (True), or drained (False): optional (``feed.congested``)."""

    @_default_callback
    def on_feed_status(self, state: FeedState, feed: Any) -> None:
        """A subscribe or request feed went UP or DOWN."""

    @_default_callback
    def on_message(self, message: Any, feed: SubscribeFeed[Any]) -> None:
        """A notification arrived."""

    @_default_callback
    def on_request(self, request: IncomingRequest[Any]) -> None:
        """A request arrived; answer with ``request.reply(...)`` now or later."""

    @_default_callback
    def on_cancel(self, request: IncomingRequest[Any]) -> None:
        """The requestor cancelled (or the request timed out)."""

    @_default_callback
    def on_reply(self, remaining: int, reply: Reply, request: RequestHandle[Any]) -> None:
        """A reply arrived; ``remaining`` repliers are still active."""

    # -------------------------------------------------------------- plumbing
    # What the class that mixes FeedOwner in provides (the actors layer's Actor
    # does): the bus core asks the owner of a feed only these two questions, and
    # never reads the actors layer's own attributes.

    def _ab_feed_context(self) -> tuple[Router, Callable[..., None]]:
        """The router this owner's feeds join and the poster of its mailbox
        (``post(fn, *args)``), registering the owner first if it must.  Raises
        RegistrationError when there is no bus to register with."""
        raise RegistrationError(
            f"{self!r} opened a feed, but {type(self).__name__} does not say which bus "
            f"it belongs to; derive from actorbus.Actor"
        )

    def _ab_dispatcher_info(self) -> tuple[str, str, bool] | None:
        """(name, kind, awaits callbacks) of the dispatcher this owner's callbacks
        run on; None when it has none (callbacks run on the calling thread).
        Feeds use it to refuse ``async def`` callbacks nothing awaits."""
        return None

    def _ab_output_watch(self) -> OutputWatch | None:
        """What watches this owner's outputs when it is recorded: the messages it
        publishes (its publish feeds are then opened as
        :class:`~actorbus.bus.feeds.WatchedPublishFeed`), the requests it sends
        (:class:`~actorbus.bus.feeds.WatchedRequestFeed`) and the replies its
        repliers send.  None (the default): nothing watches, and the feeds are
        plain ones."""
        return None

    def _ab_blocking_deadlock(self) -> str | None:
        """The name of the dispatcher this owner's callbacks run on when a blocking
        wait on the calling thread would keep them from ever running (the caller
        is that dispatcher's only thread); None otherwise, and when the owner has
        no dispatcher.  The blocking one-call requests use it to refuse a
        deadlock (``refuse_blocking_deadlock``)."""
        return None

    # -------------------------------------------------------------- long form
    def _open_publish_feed(
        self,
        message_class: type[N],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        *,
        discoverable: bool = True,
    ) -> PublishFeed[N]:
        """Open (not yet advertise) a publish feed for ``message_class:subject``
        (``discoverable=False``: discovery never lists it)."""
        key = checked_key(message_class, subject, Notification)
        router, post = self._ab_feed_context()
        watch = self._ab_output_watch()
        if watch is not None:
            return WatchedPublishFeed(
                router,
                self,
                key,
                scope,
                post=post,
                discoverable=discoverable,
                watch=watch.published,
            )
        return PublishFeed(router, self, key, scope, post=post, discoverable=discoverable)

    def _open_subscribe_feed(
        self,
        message_class: type[N],
        subject: str | Wildcard,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[N], bool] | None = None,
        *,
        queue: str | QueueGroup | None = None,
        discoverable: bool = True,
    ) -> SubscribeFeed[N]:
        """Open (not yet subscribe) a subscribe feed.  ``subject`` may be a
        :class:`~actorbus.Wildcard`; ``queue`` makes the feed a member of that
        queue group (each notification goes to one member);
        ``discoverable=False``: discovery never lists it."""
        key, wildcard = subscription_key(message_class, subject)
        router, post = self._ab_feed_context()
        return SubscribeFeed(
            router,
            self,
            key,
            scope,
            post=post,
            condition=condition,
            wildcard=wildcard,
            queue=queue,
            discoverable=discoverable,
        )

    def _open_request_feed(
        self,
        message_class: type[Q],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        *,
        discoverable: bool = True,
    ) -> RequestFeed[Q]:
        """Open (not yet subscribe) a request feed (``discoverable=False``:
        discovery never lists it)."""
        key = checked_key(message_class, subject, Request)
        router, post = self._ab_feed_context()
        watch = self._ab_output_watch()
        if watch is not None:
            return WatchedRequestFeed(
                router,
                self,
                key,
                scope,
                post=post,
                discoverable=discoverable,
                watch=watch.requested,
            )
        return RequestFeed(router, self, key, scope, post=post, discoverable=discoverable)

    def _open_reply_feed(
        self,
        message_class: type[Q],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[Q], bool] | None = None,
        *,
        discoverable: bool = True,
    ) -> ReplyFeed[Q]:
        """Open (not yet advertise) a reply feed (``discoverable=False``:
        discovery never lists it)."""
        key = checked_key(message_class, subject, Request)
        router, post = self._ab_feed_context()
        watch = self._ab_output_watch()
        return ReplyFeed(
            router,
            self,
            key,
            scope,
            post=post,
            condition=condition,
            discoverable=discoverable,
            watch=watch.replied if watch is not None else None,
        )

    # -------------------------------------------------------------- short form
    def publisher(
        self,
        message_class: type[N],
        subject: str,
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        on_status: Callable[[FeedState, PublishFeed[N]], object] | None = None,
        up: bool | None = None,
        discoverable: bool = True,
        on_congestion: Callable[[bool, PublishFeed[N]], object] | None = None,
    ) -> PublishFeed[N]:
        """Open and advertise a publish feed, declared UP unless ``up=False`` (as
        ``Bus.publisher`` and ``replier`` do; ``discoverable=False``: discovery
        never lists it; ``on_congestion``: told when a link it publishes to is
        congested, and when it drained).

        The default was ``up=False`` until this release: leaving ``up`` out
        warns until the next one; pass it."""
        if up is None:
            shown = getattr(message_class, "__name__", message_class)
            warnings.warn(
                f"publisher({shown}, {subject!r}) now declares the feed UP "
                f"by default, as Bus.publisher() and replier() do (it was up=False); pass "
                f"up=True to keep the new default, or up=False to declare UP yourself with "
                f"feed.update_feed_state()",
                DeprecationWarning,
                stacklevel=2,
            )
            up = True
        feed = self._open_publish_feed(message_class, subject, scope, discoverable=discoverable)
        if on_status is not None:
            feed.status_callback(on_status)
        if on_congestion is not None:
            feed.congestion_callback(on_congestion)
        feed.advertise()
        if up:
            feed.update_feed_state(FeedState.UP)
        return feed

    def subscribe(
        self,
        message_class: type[N],
        subject: str | Wildcard,
        *,
        on_message: Callable[[N, SubscribeFeed[N]], object] | None = None,
        on_status: Callable[[FeedState, SubscribeFeed[N]], object] | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[N], bool] | None = None,
        queue: str | QueueGroup | None = None,
        discoverable: bool = True,
    ) -> SubscribeFeed[N]:
        """Open and subscribe a subscribe feed (``subject`` may be a
        :class:`~actorbus.Wildcard`; ``queue``: join that queue group;
        ``discoverable=False``: discovery never lists it)."""
        feed = self._open_subscribe_feed(
            message_class, subject, scope, condition, queue=queue, discoverable=discoverable
        )
        if on_message is not None:
            feed.message_callback(on_message)
        if on_status is not None:
            feed.status_callback(on_status)
        feed.subscribe()
        return feed

    def requestor(
        self,
        message_class: type[Q],
        subject: str,
        *,
        on_reply: Callable[[int, Reply, RequestHandle[Q]], object] | None = None,
        on_status: Callable[[FeedState, RequestFeed[Q]], object] | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        discoverable: bool = True,
    ) -> RequestFeed[Q]:
        """Open and subscribe a request feed (``discoverable=False``: discovery
        never lists it)."""
        feed = self._open_request_feed(message_class, subject, scope, discoverable=discoverable)
        if on_reply is not None:
            feed.reply_callback(on_reply)
        if on_status is not None:
            feed.status_callback(on_status)
        feed.subscribe()
        return feed

    def replier(
        self,
        message_class: type[Q],
        subject: str,
        *,
        on_request: Callable[[IncomingRequest[Q]], object] | None = None,
        on_cancel: Callable[[IncomingRequest[Q]], object] | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[Q], bool] | None = None,
        up: bool = True,
        discoverable: bool = True,
    ) -> ReplyFeed[Q]:
        """Open and advertise a reply feed, declared UP unless ``up=False``
        (``discoverable=False``: discovery never lists it)."""
        feed = self._open_reply_feed(
            message_class, subject, scope, condition, discoverable=discoverable
        )
        if on_request is not None:
            feed.request_callback(on_request)
        if on_cancel is not None:
            feed.cancel_callback(on_cancel)
        feed.advertise()
        if up:
            feed.update_feed_state(FeedState.UP)
        return feed

    # ------------------------------ deprecated: the long form is actor_context.open_*
    def open_publish_feed(self, *args: Any, **kwargs: Any) -> PublishFeed[Any]:
        _moved("open_publish_feed")
        return self._open_publish_feed(*args, **kwargs)

    def open_subscribe_feed(self, *args: Any, **kwargs: Any) -> SubscribeFeed[Any]:
        _moved("open_subscribe_feed")
        return self._open_subscribe_feed(*args, **kwargs)

    def open_request_feed(self, *args: Any, **kwargs: Any) -> RequestFeed[Any]:
        _moved("open_request_feed")
        return self._open_request_feed(*args, **kwargs)

    def open_reply_feed(self, *args: Any, **kwargs: Any) -> ReplyFeed[Any]:
        _moved("open_reply_feed")
        return self._open_reply_feed(*args, **kwargs)

    # -------------------------------------------------------- request/reply, short
    def serve(
        self,
        message_class: type[Q],
        subject: str,
        handler: Callable[[Q], Any],
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[Q], bool] | None = None,
        discoverable: bool = True,
        error_detail: Literal["class", "message"] = "class",
    ) -> ReplyFeed[Q]:
        r"""Advertise (UP) a replier whose ``handler(request)`` *returns* the reply.

        * A returned :class:`~actorbus.Reply` is sent as the final reply.
        * A generator handler streams: each value it yields is sent as an
          ``OK_CONTINUING`` reply; a Reply it ``return``\ s is the final one, else
          a bare ``Reply`` with status ``OK_FINAL`` ends the stream (:meth:`ask`
          and :meth:`ask_all` leave that marker out).  ``async def`` handlers and
          async generators do the same on an asyncio dispatcher.
        * An exception is a failure of the request callback, as for any
          replier (the failure contract of :class:`~actorbus.Actor`): it is
          reported on the replier's node (``on_failure``, by default logged
          with the actor, the handler and the key; the actor keeps running),
          and the requestor gets an ``ERROR`` reply (:meth:`ask` raises it as
          :class:`~actorbus.RequestError`).  What that reply tells the
          requestor, which may be a remote node or a browser, is
          ``error_detail``: ``"class"`` (the default) names the exception's
          class only, its text staying in the replier's log; ``"message"``
          sends ``"Class: text"``, for handlers whose messages are meant for
          the requestor.  Returning None, or something that is not a Reply,
          is a mistake reported the same way.

        ``discoverable=False``: discovery never lists the replier.

        Returns the reply feed (close it, or let ``shutdown`` close it, to stop)."""
        if not callable(handler):
            raise UsageError(f"serve() takes a callable handler(request), found {handler!r}")
        if error_detail not in ("class", "message"):
            raise UsageError(
                f"serve(error_detail={error_detail!r}): expected 'class' (the requestor is "
                f"told the exception's class only, the default) or 'message' (its class "
                f"and text)"
            )
        feed = self._open_reply_feed(
            message_class, subject, scope, condition, discoverable=discoverable
        )
        _refuse_async(feed, handler, "request", streams=True)
        if inspect.iscoroutinefunction(handler) or inspect.isasyncgenfunction(handler):
            feed.request_callback(AsyncServer(handler, error_detail))
        else:
            feed.request_callback(Server(handler, error_detail))
        feed.advertise()
        feed.update_feed_state(FeedState.UP)
        return feed

    def ask(
        self,
        request: Request,
        *,
        timeout: float | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
    ) -> Coroutine[Any, Any, Reply]:
        """``await`` the answer to ``request`` (in ``async def`` code on an asyncio
        dispatcher, or any running event loop).

        Returns the first replier's final reply (for a streaming replier, its
        last reply); once it has it, the request is cancelled for any other
        replier.  When no replier is UP yet, it waits for one within
        ``timeout`` (actors on other dispatchers start concurrently; with
        ``timeout=None`` it waits as long as it takes).  Raises
        :class:`~actorbus.RequestError` with the replier's reason when the
        answer is an ERROR reply, and :class:`~actorbus.RequestTimeoutError`
        (a :class:`TimeoutError`) when ``timeout`` seconds pass first: "no
        replier came up within N s" if none came UP, else "no answer".

        Called where no event loop runs (a thread dispatcher's callback), it
        raises :class:`~actorbus.UsageError` at once, naming
        :meth:`ask_blocking`, rather than return a coroutine nobody awaits."""
        loop = self._ab_loop_for(request, "ask")
        return self._ab_ask(request, timeout, scope, loop)

    async def _ab_ask(
        self,
        request: Request,
        timeout: float | None,
        scope: Scope,
        loop: asyncio.AbstractEventLoop,
    ) -> Reply:
        answer = FirstAnswer(request)
        replies = self._replies(request, timeout, scope, loop, stop_at_final=True)
        async with contextlib.aclosing(replies):  # closing it cancels the request
            async for reply in replies:
                if answer.take(reply):
                    break
        return answer.result()

    def ask_all(
        self,
        request: Request,
        *,
        timeout: float | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
    ) -> AsyncIterator[Reply]:
        """``async for reply in self.ask_all(request)``: every reply of every
        replier, as they arrive, until all finished (a replier's ERROR reply
        included: check ``reply.status``).  Waits within ``timeout`` for a
        replier to come UP, as :meth:`ask` does; raises
        :class:`~actorbus.RequestTimeoutError` when ``timeout`` seconds pass
        before one came UP or before every replier finished.  Closing the
        iterator early (``contextlib.aclosing``, or leaving the loop and letting
        it go) cancels the request.  Called where no event loop runs, it raises
        :class:`~actorbus.UsageError` at once, as :meth:`ask` does."""
        loop = self._ab_loop_for(request, "ask_all")
        return self._replies(request, timeout, scope, loop, stop_at_final=False)

    def ask_blocking(
        self,
        request: Request,
        *,
        timeout: float | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
    ) -> Reply:
        """Block until the answer to ``request`` arrives and return it: the form
        of :meth:`ask` for code that is not ``async def``, such as an actor's
        callbacks on a thread dispatcher.

        Same answer, waiting rule and errors as :meth:`ask`.  The actor's own
        mailbox is blocked meanwhile (its other tasks wait), so keep
        ``timeout`` short.  Raises :class:`~actorbus.UsageError` instead of
        blocking when that would deadlock: when a replier of the request's key
        is this actor itself, or is pinned to the dispatcher whose only thread
        is the calling one (the rule of
        ``Dispatcher.blocking_here_would_deadlock``), and when called on a
        running event loop (use ``await self.ask(...)`` there)."""
        if not isinstance(request, Request):
            raise UsageError(f"expected a Request message, found {request!r}")
        key = MessageKey.of(request)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UsageError(
                f"ask_blocking() of {key} called on a running event loop, which it would "
                f"block; in async def code use await self.ask(request, timeout=...)"
            )
        router, _ = self._ab_feed_context()
        refuse_blocking_deadlock(router, key, self, "ask_blocking")
        replies: queue.SimpleQueue[tuple[int, Reply, RequestHandle[Any]]] = queue.SimpleQueue()
        feed: RequestFeed[Any] = RequestFeed(
            router, self, key, scope, post=_direct, discoverable=False
        )
        up = ReplierUp()
        feed.reply_callback(
            lambda remaining, reply, handle: replies.put((remaining, reply, handle))
        )
        feed.status_callback(up)
        feed.subscribe()
        answer = FirstAnswer(request)
        try:
            handle = up.request_blocking(feed, request, timeout)
            while True:
                # the request's own timeout ends it with an ERROR reply
                remaining, reply, _h = replies.get()
                if reply.status is ReplyStatus.ERROR and handle.timed_out:
                    raise timed_out(request, timeout, stop_at_final=True)
                if answer.take(reply) or remaining == 0:
                    break
        finally:
            feed.close()  # cancels what is still outstanding
        return answer.result()

    def _ab_loop_for(self, request: Request, form: str) -> asyncio.AbstractEventLoop:
        """The running loop ``ask``/``ask_all`` resume on, or UsageError naming the fix."""
        if not isinstance(request, Request):
            raise UsageError(f"expected a Request message, found {request!r}")
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            where = self._ab_dispatcher_info()
            place = f" on dispatcher {where[0]!r} (kind {where[1]!r})" if where else ""
            raise UsageError(
                f"{form}() of {request!r} needs a running event loop, and none runs here"
                f"{place}: call it with await from an async def callback of an actor on an "
                f"asyncio dispatcher; in a plain def callback (a thread dispatcher) use "
                f"self.ask_blocking(request, timeout=...)"
            ) from None

    async def _replies(
        self,
        request: Request,
        timeout: float | None,
        scope: Scope,
        loop: asyncio.AbstractEventLoop,
        *,
        stop_at_final: bool,
    ) -> AsyncGenerator[Reply, None]:
        arrived: asyncio.Queue[tuple[int, Reply, RequestHandle[Any]]] = asyncio.Queue()
        put = arrived.put_nowait
        on_loop = loop.call_soon_threadsafe

        def deliver(remaining: int, reply: Reply, handle: RequestHandle[Any]) -> None:
            on_loop(put, (remaining, reply, handle))

        router, _ = self._ab_feed_context()
        feed: RequestFeed[Any] = RequestFeed(
            router, self, MessageKey.of(request), scope, post=_direct, discoverable=False
        )
        up = ReplierUp(loop)
        feed.reply_callback(deliver)
        feed.status_callback(up)
        feed.subscribe()
        try:
            handle = await up.request(feed, request, timeout)
            while True:
                remaining, reply, _h = await arrived.get()
                if reply.status is ReplyStatus.ERROR and handle.timed_out:
                    raise timed_out(request, timeout, stop_at_final=stop_at_final)
                if not is_end_marker(reply):
                    yield reply
                elif stop_at_final:
                    yield reply  # ask() needs to see the end of the stream
                if remaining == 0:
                    return
        finally:
            feed.close()  # cancels what is still outstanding


def _moved(name: str) -> None:
    warnings.warn(
        f"Actor.{name}() moved to Actor.actor_context.{name}(), with the same "
        f"arguments (the old name goes away in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
