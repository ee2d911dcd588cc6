"""Request/reply: the requestor's and the replier's feeds and the request objects.

:meth:`RequestFeed.request` picks the in-scope repliers that are advertised, UP
and whose condition accepts the request, and returns a :class:`RequestHandle`.
Each replier gets an :class:`IncomingRequest` to answer with
:meth:`IncomingRequest.reply`.  ``remaining`` (repliers still active) is kept
under the handle's lock; every reply delivery carries the value after that
reply.  A remote peer counts as one replier until its acknowledgement says how
many of its repliers took the request.  A replier that fails — its callback
raises, or it answers with a reply class the request does not allow — ends its
part with an ERROR reply at once.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Coroutine, Iterable
from time import perf_counter
from typing import TYPE_CHECKING, Any, Generic

from ..errors import CallbackError, RequestError, UsageError
from ._feed import _OK_CONTINUING, _PLACED, Callback, Feed, Q, _direct, _Phase, _refuse_async
from .message import Message, MessageKey, Reply, ReplyStatus
from .scope import FeedState
from .sender import Sender

if TYPE_CHECKING:
    from .history import RequestLatencies

__all__ = ["IncomingRequest", "ReplyFeed", "RequestFeed", "RequestHandle", "WatchedRequestFeed"]


def _fail_request(incoming: IncomingRequest[Any], exc: BaseException) -> None:
    """A request callback raised: end that replier's part with an ERROR reply, so
    the requestor learns it now rather than at its timeout.  The reason names the
    exception's class only; its text and traceback stay in the replier's log."""
    incoming._end_with_error(
        f"the replier's request callback failed with {type(exc).__name__}; "
        f"the replier's node reported it"
    )


async def _guarded(incoming: IncomingRequest[Any], coro: Coroutine[Any, Any, Any]) -> Any:
    """Await an ``async def`` request callback; a failure ends the replier's part
    with an ERROR reply, as a synchronous one does."""
    try:
        return await coro
    except Exception as exc:
        _fail_request(incoming, exc)
        raise


# ==================================================================== request side

_request_ids = itertools.count(1)


class IncomingRequest(Generic[Q]):
    """One replier's view of one request: answer it with :meth:`reply`.

    Replies may be sent from inside the request callback or later, from any
    thread.  OK_CONTINUING replies may be followed by more; OK_FINAL or ERROR end
    this replier's part.  After the requestor cancels (or the request timed out)
    :meth:`reply` returns False and sends nothing."""

    __slots__ = (
        "_final",
        "_remote_expected",
        "_remote_finals",
        "cancelled",
        "feed",
        "handle",
        "id",
        "request",
    )

    def __init__(self, handle: RequestHandle[Any], feed: ReplyFeed[Q], request: Q) -> None:
        self.handle = handle
        self.feed = feed
        self.request = request
        self.id = handle.id
        self.cancelled = False
        self._final = False
        self._remote_expected: int | None = None
        self._remote_finals = 0

    @property
    def is_active(self) -> bool:
        """True while this replier may still reply."""
        return not (self._final or self.cancelled)

    @property
    def sender(self) -> Sender:
        """Who sent the request: the requestor's node, actor, feed and hops."""
        handle = self.handle
        return handle.origin or handle.feed.stamp

    def reply(self, reply: Reply) -> bool:
        """Send ``reply`` to the requestor.  Returns False (and sends nothing) when the
        request was cancelled or timed out; raises when this replier already sent a
        final reply or the reply class is not allowed for the request."""
        if not isinstance(reply, Reply):
            self._end_with_error(
                f"the replier answered with {type(reply).__name__}, which is not a Reply"
            )
            raise RequestError(
                f"reply() takes a Reply, found {type(reply).__name__}; declare reply "
                f"classes as subclasses of actorbus.Reply"
            )
        request_cls = type(self.request)
        if type(reply) is not Reply and type(reply) not in request_cls.__replies__:
            allowed = sorted(c.__qualname__ for c in request_cls.__replies__)
            self._end_with_error(
                f"the replier answered with {type(reply).__qualname__}, which "
                f"{request_cls.__qualname__} does not allow (allowed: {', '.join(allowed)})"
            )
            raise RequestError(
                f"{type(reply).__qualname__} may not answer {request_cls.__qualname__}; "
                f"allowed: {allowed}; add it to replies=(...) in the request class"
            )
        return self.handle._reply_from(self, reply)

    def _end_with_error(self, reason: str) -> None:
        """The replier failed (its callback raised, or it answered with something
        the request does not allow): end its part with an ERROR reply carrying
        ``reason``, so the requestor does not wait for its timeout."""
        if self.is_active:
            self.handle._reply_from(
                self, Reply(self.request.subject, status=ReplyStatus.ERROR, reason=reason)
            )

    def __repr__(self) -> str:
        return f"<IncomingRequest #{self.id} {MessageKey.of(self.request)} active={self.is_active}>"


class RequestHandle(Generic[Q]):
    """The requestor's handle on one request it made.

    ``remaining`` is the number of repliers still active; 0 means the request is
    complete.  The same handle object is passed to every reply callback, so code
    that requests from outside the requestor's dispatcher (where a reply can be
    delivered before :meth:`RequestFeed.request` returns) must use the handle it
    is given in the callback rather than one it stored after the call."""

    __slots__ = (
        "_active",
        "_cancelled",
        "_done",
        "_lock",
        "_remaining",
        "feed",
        "id",
        "origin",
        "peer_id",
        "request",
        "sender",
        "started",
        "timed_out",
    )

    def __init__(
        self, feed: RequestFeed[Q], request: Q, latencies: RequestLatencies | None = None
    ) -> None:
        self.id = next(_request_ids)
        self.feed = feed
        self.request = request
        #: True when the request ended because its timeout passed.
        self.timed_out = False
        #: perf_counter() when made, while the router times requests, for this
        #: node's own requestors (a peer's request forwarded here is timed there)
        self.started = perf_counter() if latencies is not None and feed.remote is None else 0.0
        #: who sent the reply being delivered (read it in the reply callback):
        #: the replier's node, actor, feed and hops; None for an ERROR reply the
        #: bus made itself (a timeout, a lost link)
        self.sender: Sender | None = None
        #: who sent the request when a transport said so (a peer's actor and
        #: feed); else it is its requestor feed's sender
        self.origin: Sender | None = None
        #: the requestor's own id for it when the request came from a remote peer
        self.peer_id = 0
        self._lock = threading.Lock()
        self._remaining = 0
        self._active: list[IncomingRequest[Q]] = []
        self._done = False
        self._cancelled = False

    @property
    def remaining(self) -> int:
        """Repliers still active."""
        return self._remaining

    @property
    def is_done(self) -> bool:
        """True when every replier finished, or the request was cancelled or timed out."""
        return self._done

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Cancel: each replier still working is told; later replies are refused.
        Cancelling a finished request is harmless."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._cancelled = True
            active, self._active = self._active, []
            self._remaining = 0
            for incoming in active:
                incoming.cancelled = True
        self._finish()
        for incoming in active:
            incoming.feed._send_cancel(incoming)

    def _finish(self) -> None:
        # The router forgets it; its timeout (if any) is dropped lazily
        # (bus/_timeouts.py): nothing to cancel, no reference back to the handle.
        router = self.feed._router
        if router.requests.pop(self.id, None) is not None and self.started:
            latencies = router.request_latencies
            if latencies is not None:
                latencies.observe(perf_counter() - self.started)

    def _reply_from(
        self, incoming: IncomingRequest[Q], reply: Reply, sender: Sender | None = None
    ) -> bool:
        """Account for one reply and post it to the requestor.

        A local replier contributes 1 to ``remaining`` until its final reply.  A
        remote peer contributes 1 until its acknowledgement says how many of its
        repliers took the request, then (taken - finals received)."""
        with self._lock:
            if incoming._final:
                raise RequestError(
                    f"reply() on request #{self.id} {MessageKey.of(self.request)}: this "
                    f"replier already sent its final reply; send OK_CONTINUING replies "
                    f"before the last one"
                )
            if incoming.cancelled or self._done:
                return False
            if reply.status is not _OK_CONTINUING:
                if incoming.feed.remote is None:
                    self._retire(incoming)
                else:
                    incoming._remote_finals += 1
                    expected = incoming._remote_expected
                    if expected is not None:
                        self._remaining -= 1
                        if incoming._remote_finals >= expected:
                            self._retire(incoming, count=False)
            remaining = self._remaining
            if remaining <= 0:
                self._done = True
                remaining = 0
        watch = incoming.feed._watch
        if watch is not None:  # the replier's actor is recorded: its reply is an output
            watch(incoming, reply)
        self._pass_on(reply, remaining, sender or incoming.feed.stamp)
        return True

    def _pass_on(self, reply: Reply, remaining: int, sender: Sender | None) -> None:
        """Post ``reply`` (with ``remaining`` after it, from ``sender``) to the
        requestor; forget the request when it was the last."""
        feed = self.feed
        remote: Any = feed.remote
        if remote is not None:  # a peer's request: straight back to its party
            remote._proxy_reply(remaining, reply, self, sender)
        else:
            post = feed.post
            if post is _direct:  # no mailbox: straight on, one call less per reply
                feed._deliver_reply((self, reply, remaining, sender))
            else:
                post(feed._deliver_reply, (self, reply, remaining, sender))
        if remaining == 0:
            self._finish()

    def _remote_reply(
        self,
        incoming: IncomingRequest[Q],
        reply: Reply,
        taken: int,
        sender: Sender | None = None,
    ) -> bool:
        """A remote peer's reply that carries the request's acknowledgement
        (``taken`` of its repliers took it): exactly ``_remote_ack(incoming,
        taken)`` then ``_reply_from(incoming, reply)``, under one lock when the
        acknowledgement is the first word from the peer (the usual case)."""
        if taken <= 0 or incoming._remote_expected is not None or incoming._remote_finals:
            self._remote_ack(incoming, taken)
            return self._reply_from(incoming, reply, sender)
        with self._lock:
            if self._done or incoming._final or incoming.cancelled:
                return False
            # the acknowledgement: ``taken`` repliers where the peer counted one
            incoming._remote_expected = taken
            remaining = self._remaining + taken - 1
            if reply.status is not _OK_CONTINUING:
                incoming._remote_finals = 1
                remaining -= 1
                if taken == 1:  # every replier of the peer has answered
                    self._retire(incoming, count=False)
            self._remaining = remaining
            if remaining <= 0:
                self._done = True
                remaining = 0
        self._pass_on(reply, remaining, sender or incoming.feed.stamp)
        return True

    def _retire(self, incoming: IncomingRequest[Q], count: bool = True) -> None:
        incoming._final = True
        try:
            self._active.remove(incoming)
        except ValueError:
            pass  # the request was cancelled or ended meanwhile
        if count:
            self._remaining -= 1
        incoming.feed._outstanding.pop(incoming.id, None)

    def _remote_ack(self, incoming: IncomingRequest[Q], taken: int) -> None:
        """A remote peer said ``taken`` of its repliers took the request."""
        synthetic = False
        with self._lock:
            if (
                self._done
                or incoming._remote_expected is not None
                or incoming._final  # not incoming.is_active, without the property
                or incoming.cancelled
            ):
                return
            if taken <= 0 and incoming._remote_finals == 0:
                incoming._remote_expected = 1  # ended by the synthetic ERROR below
                synthetic = True
            else:
                incoming._remote_expected = taken
                contribution = max(taken - incoming._remote_finals, 0)
                self._remaining += contribution - 1
                if contribution == 0:
                    self._retire(incoming, count=False)
                if self._remaining <= 0:
                    self._done = True
            done = self._done
        if synthetic:
            self._reply_from(
                incoming,
                Reply(
                    self.request.subject,
                    status=ReplyStatus.ERROR,
                    reason=f"no replier at remote node {incoming.feed.remote} took the request",
                ),
            )
        elif done:
            self._finish()

    def _fail_remote(self, incoming: IncomingRequest[Q], reason: str) -> None:
        """The link to a remote replier group dropped: end its part with one ERROR."""
        with self._lock:
            if self._done or not incoming.is_active:
                return
            expected = incoming._remote_expected
            contribution = 1 if expected is None else max(expected - incoming._remote_finals, 0)
            self._remaining -= contribution
            self._retire(incoming, count=False)
            remaining = self._remaining
            if remaining <= 0:
                self._done = True
        error = Reply(self.request.subject, status=ReplyStatus.ERROR, reason=reason)
        self.feed.post(self.feed._deliver_reply, (self, error, max(remaining, 0), None))
        if remaining <= 0:
            self._finish()

    def _time_out(self, timeout: float) -> None:
        """Its deadline passed (on the timer thread, see bus/_timeouts.py): end
        with "timed out"."""
        self._end_with_error(f"timed out after {timeout:g} s", timed_out=True)

    def _end_with_error(self, reason: str, *, timed_out: bool = False) -> None:
        """Time out (or otherwise abandon) the request: cancel the repliers still
        working and deliver one ERROR reply with remaining 0."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self.timed_out = timed_out
            active, self._active = self._active, []
            self._remaining = 0
            for incoming in active:
                incoming.cancelled = True
        for incoming in active:
            incoming.feed._send_cancel(incoming)
        error = Reply(self.request.subject, status=ReplyStatus.ERROR, reason=reason)
        self.feed.post(self.feed._deliver_reply, (self, error, 0, None))
        self._finish()

    def __repr__(self) -> str:
        return f"<RequestHandle #{self.id} {MessageKey.of(self.request)} remaining={self._remaining} done={self._done}>"


class RequestFeed(Feed, Generic[Q]):
    """Sends requests of one key and receives their replies.

    Told UP (``on_feed_status``) when at least one in-scope replier is advertised
    and UP."""

    __slots__ = (
        "_cb_reply",
        "_cb_status",
        "_given_reply",
        "_given_status",
        "_mcls",
        "_reply_by_class",
        "_subject",
    )
    _place_verb = "subscribe"
    _retract_verb = "unsubscribe"
    _task_callbacks = {"_fire_status": "_cb_status", "_deliver_reply": "_cb_reply"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given_status: Callback | None = None
        self._given_reply: Callback | None = None
        self._cb_status: Callback | None = None
        self._cb_reply: Callback | None = None
        self._reply_by_class: dict[type, Callback] = {}
        self._mcls: type = self._key.message_class
        self._subject: str = self._key.subject

    def status_callback(self, fn: Callable[[FeedState, RequestFeed[Q]], object]) -> None:
        """Set the feed-status callback ``fn(state, feed)``."""
        self._require_settable("status")
        self._given_status = fn

    def reply_callback(
        self,
        fn: Callable[[int, Reply, RequestHandle[Q]], object],
        reply_class: type[Reply] | None = None,
    ) -> None:
        """Set the reply callback ``fn(remaining, reply, handle)``; with ``reply_class``
        it handles only that class and overrides the generic one for it."""
        self._require_settable("reply")
        if reply_class is None:
            self._given_reply = fn
            return
        request_cls = self._key.message_class
        if not (isinstance(reply_class, type) and issubclass(reply_class, Reply)):
            raise CallbackError(
                f"reply_callback(reply_class=...) takes a Reply subclass, found {reply_class!r}"
            )
        if reply_class is not Reply and not request_cls.allows_reply(reply_class):  # type: ignore[attr-defined]
            raise CallbackError(
                f"{reply_class.__qualname__} cannot answer {request_cls.__qualname__}; its "
                f"replies= lists {sorted(c.__qualname__ for c in request_cls.__replies__)}"
            )
        self._reply_by_class[reply_class] = fn

    def subscribe(self) -> None:
        """Start tracking the repliers' state; requests may be sent while subscribed."""
        self._require(_Phase.OPEN, "subscribe()")
        generic = self._resolve(
            self._given_reply, "on_reply", "reply", required=not self._reply_by_class
        )
        for fn in self._reply_by_class.values():
            _refuse_async(self, fn, "reply")
        self._cb_reply = generic
        self._cb_status = self._resolve(self._given_status, "on_feed_status", "status", False)
        self._enter_placed(self._router.place_requestor)

    def unsubscribe(self) -> None:
        """Stop; outstanding requests are cancelled."""
        self._require(_Phase.PLACED, "unsubscribe()")
        self._retract()

    def _retract(self) -> None:
        self._router.retract_requestor(self)
        self.phase = _Phase.OPEN

    def request(
        self,
        message: Q,
        *,
        timeout: float | None = None,
        route_to: Iterable[str] | None = None,
    ) -> RequestHandle[Q]:
        """Send ``message`` to every in-scope replier that is up and whose condition
        accepts it.  Raises :class:`~actorbus.RequestError` at once when there is
        none.  With ``timeout`` (seconds), the request ends with an ERROR reply
        "timed out after …" if repliers are still active then.

        ``route_to`` (node ids) sends it along that source route instead, to the
        repliers on the route's last node, whose replies come back the same way
        (docs/routing.md, "Source routes and bounces"); where it cannot go on, the
        request ends with an ERROR reply naming the node and the reason (at once,
        :class:`~actorbus.RequestError`, when it cannot leave this node)."""
        if self.phase is not _PLACED:
            self._require(_PLACED, "request()")
        if type(message) is not self._mcls or message.subject != self._subject:
            key = self._key
            raise UsageError(
                f"request() on feed {key} got {MessageKey.of(message) if isinstance(message, Message) else message!r}; "
                f"a request feed sends only its own key"
            )
        if timeout is not None and timeout <= 0:
            raise UsageError(f"request() timeout must be > 0 seconds, found {timeout!r}")
        if route_to is not None:
            return self._router.source_routes.request(self, message, route_to, timeout)
        return self._router.request(self, message, timeout)

    def _deliver_reply(self, item: tuple[RequestHandle[Q], Reply, int, Sender | None]) -> object:
        # one argument, (handle, reply, remaining, sender): a one-argument task
        # is the mailbox's cheapest kind
        handle, reply, remaining, sender = item
        if handle._cancelled:
            return None
        handle.sender = sender
        cb = self._reply_by_class.get(type(reply), self._cb_reply)
        if cb is None:
            cb = self._reply_by_class.get(Reply)
        if cb is not None:
            return cb(remaining, reply, handle)
        return None

    def _fire_status(self, up: bool) -> object:
        if self.phase is _Phase.PLACED and self._cb_status is not None:
            return self._cb_status(FeedState.UP if up else FeedState.DOWN, self)
        return None


class WatchedRequestFeed(RequestFeed[Q]):
    """A request feed that shows each request it sent to ``watch(feed, handle)``,
    on the requesting thread: the request feeds of a recorded actor
    (``FeedOwner._ab_output_watch``).  Every other one is a plain :class:`RequestFeed`."""

    __slots__ = ("_watch",)

    def __init__(
        self, *args: Any, watch: Callable[[RequestFeed[Q], RequestHandle[Q]], None], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._watch = watch

    def request(
        self,
        message: Q,
        *,
        timeout: float | None = None,
        route_to: Iterable[str] | None = None,
    ) -> RequestHandle[Q]:
        """:meth:`RequestFeed.request`, then show the handle to the watch."""
        handle = super().request(message, timeout=timeout, route_to=route_to)
        self._watch(self, handle)
        return handle


# ====================================================================== reply feed


class ReplyFeed(Feed, Generic[Q]):
    """Answers requests of one key.

    Declare UP/DOWN with :meth:`update_feed_state` like a publisher; a DOWN
    replier gets no requests.  A condition, if given, is checked before the
    request is posted, so the requestor's replier count is exact.  Retracting or
    closing with outstanding requests sends an ERROR reply for each.  With
    ``watch`` (a recorded actor's replier), every reply it sends — its own, and
    the ERROR replies the bus sends for it — is shown to ``watch(incoming,
    reply)`` first."""

    __slots__ = (
        "_cb_cancel",
        "_cb_request",
        "_given_cancel",
        "_given_request",
        "_outstanding",
        "_watch",
        "declared",
        "route",
    )
    _place_verb = "advertise"
    _retract_verb = "unadvertise"
    _task_callbacks = {"_deliver_request": "_cb_request", "_deliver_cancel": "_cb_cancel"}

    def __init__(
        self,
        *args: Any,
        route: Callable[[IncomingRequest[Q]], object] | None = None,
        watch: Callable[[IncomingRequest[Q], Reply], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        #: shown each reply this replier sends, before it goes (a recorded
        #: actor's replier, ``FeedOwner._ab_output_watch``); None for the others
        self._watch = watch
        #: where a request goes instead of the request callback: a remote
        #: proxy's transport (the peer's repliers answer it)
        self.route = route
        self._given_request: Callback | None = None
        self._given_cancel: Callback | None = None
        self._cb_request: Callback | None = None
        self._cb_cancel: Callback | None = None
        self.declared = False
        self._outstanding: dict[int, IncomingRequest[Q]] = {}

    def request_callback(self, fn: Callable[[IncomingRequest[Q]], object]) -> None:
        """Set the request callback ``fn(incoming)``."""
        self._require_settable("request")
        self._given_request = fn

    def cancel_callback(self, fn: Callable[[IncomingRequest[Q]], object]) -> None:
        """Set the cancel callback ``fn(incoming)``."""
        self._require_settable("cancel")
        self._given_cancel = fn

    def advertise(self) -> None:
        """Offer to answer this key's requests.  The declared state starts DOWN."""
        self._require(_Phase.OPEN, "advertise()")
        self._cb_request = self._resolve(self._given_request, "on_request", "request", True)
        self._cb_cancel = self._resolve(self._given_cancel, "on_cancel", "cancel", False)
        self._enter_placed(self._router.place_replier)

    def unadvertise(self) -> None:
        """Retract; outstanding requests get an ERROR reply."""
        self._require(_Phase.PLACED, "unadvertise()")
        self._retract()

    def _retract(self) -> None:
        self._router.retract_replier(self)
        self.phase = _Phase.OPEN
        self.declared = False
        self._fail_outstanding(f"replier for {self._key} retracted")

    def _fail_outstanding(self, reason: str) -> None:
        pending = list(self._outstanding.values())
        self._outstanding.clear()
        for incoming in pending:
            if incoming.is_active:
                incoming.handle._reply_from(
                    incoming,
                    Reply(incoming.request.subject, status=ReplyStatus.ERROR, reason=reason),
                )

    def update_feed_state(self, state: FeedState) -> None:
        """Declare whether this replier takes requests."""
        self._require(_Phase.PLACED, "update_feed_state()")
        if not isinstance(state, FeedState):
            raise UsageError(f"update_feed_state() takes a FeedState, found {state!r}")
        up = state is FeedState.UP
        if up != self.declared:
            self.declared = up
            self._router.replier_state(self)

    @property
    def declared_state(self) -> FeedState:
        return FeedState.UP if self.declared else FeedState.DOWN

    @property
    def outstanding(self) -> int:
        """Requests this replier has not finished."""
        return len(self._outstanding)

    def _accepts(self, message: Any) -> bool:
        cond = self.condition
        return cond is None or bool(cond(message))

    def _send_request(self, incoming: IncomingRequest[Q]) -> None:
        self._outstanding[incoming.id] = incoming
        route = self.route
        if route is not None:
            route(incoming)
            return
        post = self.post
        if post is _direct:  # a link's proxy: straight on, one call less per request
            self._deliver_request(incoming)
        else:
            post(self._deliver_request, incoming)

    def _deliver_request(self, incoming: IncomingRequest[Q]) -> object:
        if incoming._final or incoming.cancelled:
            self._outstanding.pop(incoming.id, None)
            return None
        cb = self._cb_request
        if cb is None:
            return None
        try:
            result = cb(incoming)
        except Exception as exc:
            _fail_request(incoming, exc)
            raise
        if result is not None and isinstance(result, Coroutine):
            return _guarded(incoming, result)
        return result

    def _send_cancel(self, incoming: IncomingRequest[Q]) -> None:
        self._outstanding.pop(incoming.id, None)
        self.post(self._deliver_cancel, incoming)

    def _deliver_cancel(self, incoming: IncomingRequest[Q]) -> object:
        cb = self._cb_cancel
        if cb is not None:
            return cb(incoming)
        return None
