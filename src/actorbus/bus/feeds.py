"""The four feeds — publish, subscribe, request, reply — and the request objects.

Theory of operation
-------------------
A feed binds an *owner* (normally an actor), a message key and a scope.  Its
life is::

    open ──▶ OPEN ──advertise()/subscribe()──▶ PLACED ──unadvertise()/unsubscribe()──▶ OPEN
              │                                   │
              └──────────────close()──────────────┴──▶ CLOSED (unusable)

Callables (``status_callback``, ``message_callback``, ...) may be set only while
OPEN.  Placing a feed resolves each callback once — the callable if one was set,
else the owner's role method (``on_feed_status``, ``on_message``, ...) if the
owner's class overrides it — and fails with :class:`~actorbus.CallbackError`
naming the missing one.  Required callbacks: publisher → publish status;
subscriber → message; requestor → reply; replier → request.  The others
(subscriber/requestor feed status, replier cancel) are optional.

Every callback runs as a task in the owner's mailbox (``self._post``), so an
actor's callbacks never overlap.  Feeds without an actor (inboxes, the
synchronous request helpers, remote proxies) have a direct poster that runs the
callback at once on the calling thread; their callbacks only enqueue.

State lives in the :class:`~actorbus.bus.router.Router`, which does all the
counting under its lock and posts status changes.  The publish path takes no
lock: the router keeps, per key and per publisher category, immutable tuples of
*routes* that it swaps atomically (copy on write).  A subscriber owned by an
actor is reached by inlining its mailbox's ``post`` in the publish loop
(``Mailbox.post_parts``: one Python call fewer per delivery); other
subscribers (inboxes, remote proxies) by calling their route.

Request/reply: :meth:`RequestFeed.request` picks the in-scope repliers that are
advertised, UP and whose condition accepts the request, and returns a
:class:`RequestHandle`.  Each replier gets an :class:`IncomingRequest` to answer
with :meth:`IncomingRequest.reply`.  ``remaining`` (repliers still active) is
kept under the handle's lock; every reply delivery carries the value after that
reply.  A remote peer counts as one replier until its acknowledgement says how
many of its repliers took the request.
"""

from __future__ import annotations

import abc
import enum
import inspect
import itertools
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import CallbackError, FeedStateError, RequestError, UsageError
from .message import Message, MessageKey, Notification, Reply, ReplyStatus, Request
from .scope import FeedState, Scope

if TYPE_CHECKING:
    from .router import Router

__all__ = [
    "Feed",
    "IncomingRequest",
    "PublishFeed",
    "ReplyFeed",
    "RequestFeed",
    "RequestHandle",
    "SubscribeFeed",
]

N = TypeVar("N", bound=Notification)
Q = TypeVar("Q", bound=Request)
Callback = Callable[..., Any]


class _Phase(enum.Enum):
    OPEN = "open"
    PLACED = "placed"
    CLOSED = "closed"


#: module-level alias: a global load is cheaper than ``_Phase.PLACED`` on hot paths.
_PLACED = _Phase.PLACED
_OK_CONTINUING = ReplyStatus.OK_CONTINUING


def _direct(fn: Callable[..., Any], *args: Any) -> None:
    fn(*args)


def _label(fn: object) -> str:
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else repr(fn)


def _refuse_async(feed: Feed, fn: Callable[..., Any], what: str, *, streams: bool = False) -> None:
    """Raise CallbackError when ``fn`` is ``async def`` (or, with ``streams``, an
    async generator) but the feed's callbacks run where nothing awaits them; an
    async generator is refused everywhere unless ``streams``."""
    is_agen = inspect.isasyncgenfunction(fn)
    if is_agen and not streams:
        raise CallbackError(
            f"{feed._place_verb}() on {type(feed).__name__} {feed._key}: the {what} callback "
            f"{_label(fn)} is an async generator, which a feed cannot run; make it a plain "
            f"or async def function (a replier that streams its replies: Actor.serve())"
        )
    if not (is_agen or inspect.iscoroutinefunction(fn)):
        return
    info = getattr(feed._owner, "_ab_dispatcher_info", None)
    where = info() if info is not None else None
    if where is not None and where[2]:
        return  # an asyncio dispatcher: it awaits
    place = (
        f"actor {getattr(feed._owner, 'name', feed._owner)!r} runs on dispatcher {where[0]!r} "
        f"of kind {where[1]!r}, which does not await"
        if where is not None
        else "this feed has no actor, so its callbacks run on the calling thread, unawaited"
    )
    raise CallbackError(
        f"{feed._place_verb}() on {type(feed).__name__} {feed._key}: the {what} callback "
        f"{_label(fn)} is async def, but {place}; pin the actor to an asyncio dispatcher "
        f"(runQueueType=asyncio, or bus.register(actor, dispatcher=NAME) with an asyncio "
        f"one), or make the callback a plain def"
    )


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


def _overrides(owner: object, name: str) -> Callable[..., Any] | None:
    """The owner's role method ``name`` if its class overrides the Actor default."""
    method = getattr(type(owner), name, None)
    if method is None or getattr(method, "_ab_default_callback", False):
        return None
    bound: Callable[..., Any] = getattr(owner, name)
    return bound


class Feed(abc.ABC):
    """Common life of the four feeds: open → place → retract → close."""

    __slots__ = (
        "__weakref__",
        "_cat",
        "_condition",
        "_entry",
        "_key",
        "_owner",
        "_phase",
        "_post",
        "_remote",
        "_reported",
        "_router",
        "_scope",
    )

    #: the verb that places this kind of feed ("advertise" or "subscribe").
    _place_verb = "place"
    _retract_verb = "retract"

    def __init__(
        self,
        router: Router,
        owner: object,
        key: MessageKey,
        scope: Scope,
        *,
        post: Callable[..., None] | None = None,
        remote: object | None = None,
        condition: Callable[[Any], bool] | None = None,
    ) -> None:
        if not isinstance(scope, Scope):
            raise UsageError(f"scope must be a Scope, found {scope!r}; use Scope.LOCAL_ONLY etc.")
        self._router = router
        self._owner = owner
        self._key = key
        self._scope = scope
        self._remote = remote
        self._cat = 3 if remote is not None else int(scope)
        self._post: Callable[..., None] = post if post is not None else _direct
        self._phase = _Phase.OPEN
        self._reported = False
        self._condition = condition
        self._entry = router._entry(key)

    # ---------------------------------------------------------------- properties
    @property
    def key(self) -> MessageKey:
        """The (message class, subject) this feed is for."""
        return self._key

    @property
    def scope(self) -> Scope:
        return self._scope

    @property
    def owner(self) -> object:
        return self._owner

    @property
    def is_open(self) -> bool:
        """True until :meth:`close`."""
        return self._phase is not _Phase.CLOSED

    @property
    def is_placed(self) -> bool:
        """True while advertised (publisher/replier) or subscribed (subscriber/requestor)."""
        return self._phase is _Phase.PLACED

    @property
    def feed_state(self) -> FeedState:
        """UP when the other side is there (see each role)."""
        return FeedState.UP if self._reported else FeedState.DOWN

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._key} {self._scope.name} {self._phase.value}>"

    # ---------------------------------------------------------------- life
    def _require(self, phase: _Phase, action: str) -> None:
        if self._phase is phase:
            return
        if self._phase is _Phase.CLOSED:
            raise FeedStateError(
                f"{action} on {type(self).__name__} {self._key}: the feed is closed; open a new feed"
            )
        if phase is _Phase.OPEN:
            raise FeedStateError(
                f"{action} on {type(self).__name__} {self._key}: the feed is already "
                f"{'advertised' if self._place_verb == 'advertise' else 'subscribed'}; "
                f"call {self._retract_verb}() first"
            )
        raise FeedStateError(
            f"{action} on {type(self).__name__} {self._key}: the feed is not "
            f"{'advertised' if self._place_verb == 'advertise' else 'subscribed'}; "
            f"call {self._place_verb}() first"
        )

    def _require_settable(self, what: str) -> None:
        if self._phase is not _Phase.OPEN:
            state = "closed" if self._phase is _Phase.CLOSED else "already placed"
            raise CallbackError(
                f"cannot set the {what} callback of {type(self).__name__} {self._key}: the "
                f"feed is {state}; set callbacks after opening and before "
                f"{self._place_verb}()"
            )

    def _resolve(
        self, given: Callback | None, method: str, what: str, required: bool
    ) -> Callback | None:
        found = given
        if found is None and self._owner is not None:
            found = _overrides(self._owner, method)
        if found is None:
            if required:
                raise CallbackError(
                    f"{self._place_verb}() on {type(self).__name__} {self._key}: no {what} "
                    f"callback; override {type(self._owner).__name__}.{method}() or call "
                    f"feed.{what.replace(' ', '_')}_callback(fn) before {self._place_verb}()"
                )
            return None
        _refuse_async(self, found, what)
        return found

    def callback_for(self, task: object) -> Callable[..., Any] | None:
        """The application callback that ``task`` — one of this feed's delivery
        tasks, as queued in its owner's mailbox — runs; None for anything else.
        Failure reports use it to name the callback that raised."""
        name = getattr(task, "__name__", None)
        if getattr(task, "__self__", None) is not self or not isinstance(name, str):
            return None
        attr = self._task_callbacks.get(name)
        return getattr(self, attr, None) if attr is not None else None

    #: delivery task method name -> the attribute holding the callback it runs
    _task_callbacks: dict[str, str] = {"_fire_status": "_cb_status"}

    @abc.abstractmethod
    def _retract(self) -> None:
        """Take the feed out of the router (each role retracts differently)."""

    def _enter_placed(self, place: Callable[[Any], None]) -> None:
        """Mark the feed placed and tell the router; undo the mark if it refuses."""
        self._phase = _Phase.PLACED
        try:
            place(self)
        except BaseException:
            self._phase = _Phase.OPEN
            raise

    def close(self) -> None:
        """Retract if placed and make the feed unusable.  Closing twice is harmless."""
        if self._phase is _Phase.CLOSED:
            return
        if self._phase is _Phase.PLACED:
            self._retract()
        self._phase = _Phase.CLOSED
        self._router._forget(self)

    def __enter__(self) -> Feed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ==================================================================== publish feed


class PublishFeed(Feed, Generic[N]):
    """Publishes notifications of one key.

    Told UP (``on_publish_status``) when at least one in-scope subscriber exists,
    DOWN when the last leaves.  Declare your own state with
    :meth:`update_feed_state` before publishing; publishing while your declared
    state is DOWN is an error."""

    __slots__ = ("_cb_status", "_declared", "_given_status", "_mcls", "_subject")
    _place_verb = "advertise"
    _retract_verb = "unadvertise"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given_status: Callback | None = None
        self._cb_status: Callback | None = None
        self._declared = False
        self._mcls: type = self._key.message_class
        self._subject: str = self._key.subject

    def status_callback(self, fn: Callable[[FeedState, PublishFeed[N]], object]) -> None:
        """Set the publish-status callback ``fn(state, feed)`` (only while not advertised)."""
        self._require_settable("status")
        self._given_status = fn

    def advertise(self) -> None:
        """Tell the bus this feed publishes its key.  Its declared state starts DOWN."""
        self._require(_Phase.OPEN, "advertise()")
        self._cb_status = self._resolve(
            self._given_status, "on_publish_status", "status", required=True
        )
        self._enter_placed(self._router._place_publisher)

    def unadvertise(self) -> None:
        """Retract the advertisement; the feed may be advertised again."""
        self._require(_Phase.PLACED, "unadvertise()")
        self._retract()

    def _retract(self) -> None:
        self._router._retract_publisher(self)
        self._phase = _Phase.OPEN
        self._declared = False

    def update_feed_state(self, state: FeedState) -> None:
        """Declare this publisher's own state (its source is up or down)."""
        self._require(_Phase.PLACED, "update_feed_state()")
        if not isinstance(state, FeedState):
            raise UsageError(f"update_feed_state() takes a FeedState, found {state!r}")
        up = state is FeedState.UP
        if up != self._declared:
            self._declared = up
            self._router._publisher_state(self)

    @property
    def declared_state(self) -> FeedState:
        """The state this publisher declared with :meth:`update_feed_state`."""
        return FeedState.UP if self._declared else FeedState.DOWN

    def is_feed_up(self) -> bool:
        """True when advertised, declared UP, and at least one subscriber is there."""
        return self._declared and self._reported

    def publish(self, message: N) -> int:
        """Send ``message`` to every in-scope subscriber of this key.

        Returns how many subscribers took it (local subscribers, inboxes and remote
        links — before subscriber conditions run): 0 means nobody was there, e.g.
        between the last subscriber leaving and this publisher's DOWN status."""
        if (
            not self._declared
            or type(message) is not self._mcls
            or message.subject != self._subject
        ):
            self._publish_refused(message)
        # One atomic read of this category's routes (see the router): subscribers
        # posting to a mailbox get Mailbox.post inlined (``post_parts``), the
        # others (inboxes, remote proxies) are called.
        local, other = self._entry.routes[self._cat]
        for put, claim, schedule, mailbox, deliver in local:
            put((deliver, message))
            if claim(0, False):
                schedule(mailbox)
        if other:
            for route in other:
                route(message)
            return len(local) + len(other)
        return len(local)

    def _publish_refused(self, message: object) -> None:
        key = self._key
        if self._phase is not _Phase.PLACED:
            self._require(_Phase.PLACED, "publish()")
        if not self._declared:
            raise FeedStateError(
                f"publish() on feed {key} while its state is DOWN; call "
                f"update_feed_state(FeedState.UP) (typically after publish status reports UP)"
            )
        if not isinstance(message, Message):
            raise UsageError(
                f"publish() on feed {key} takes a {key.message_class.__qualname__}, found {message!r}"
            )
        raise UsageError(
            f"publish() on feed {key} got {MessageKey.of(message)}; a feed publishes "
            f"only its own key — open a feed for that key"
        )

    def _fire_status(self, up: bool) -> object:
        if self._phase is _Phase.PLACED and self._cb_status is not None:
            return self._cb_status(FeedState.UP if up else FeedState.DOWN, self)
        return None


# ================================================================== subscribe feed


class SubscribeFeed(Feed, Generic[N]):
    """Receives the notifications of one key.

    Told UP (``on_feed_status``) when at least one in-scope publisher has declared
    UP, DOWN when none has.  A condition, if given, is checked on the owner's
    dispatcher just before each delivery.  After :meth:`unsubscribe` (or close)
    returns, notifications still queued for this feed are dropped when their task
    runs, so none is delivered after an unsubscribe made on the owner's own thread;
    one made from another thread may race with a delivery already running."""

    __slots__ = (
        "_backlog",
        "_cb_message",
        "_cb_status",
        "_given_message",
        "_given_status",
        "_inline",
        "_route",
    )
    _place_verb = "subscribe"
    _retract_verb = "unsubscribe"
    _task_callbacks = {
        "_fire_status": "_cb_status",
        "_deliver": "_cb_message",
        "_deliver_if": "_cb_message",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given_status: Callback | None = None
        self._given_message: Callback | None = None
        self._cb_status: Callback | None = None
        self._cb_message: Callback | None = None
        # How a publisher reaches this feed.  When the poster is a mailbox's
        # ``post``, ``_inline`` is ``(put, claim, schedule, mailbox, deliver)``
        # and the publish loop inlines the post (see ``Mailbox.post_parts``);
        # otherwise ``_route(message)`` is called: the delivery itself for a
        # direct poster (remote proxies replace it with their transport), or a
        # partial that posts it.  Exactly one of the two is set.
        deliver = self._deliver if self._condition is None else self._deliver_if
        post = self._post
        mailbox = getattr(post, "__self__", None)
        parts = getattr(mailbox, "post_parts", None) if post is not _direct else None
        self._inline: tuple[Any, ...] | None = None
        self._route: Callable[[Any], object] | None = None
        #: what holds this feed's undelivered messages when it is not a mailbox
        #: (an :class:`~actorbus.bus.inbox.Inbox`): anything with a ``depth``, which
        #: a link's input back-pressure watches as it watches mailboxes
        self._backlog: Any = None
        if parts is not None:
            put, claim, schedule = parts()
            self._inline = (put, claim, schedule, mailbox, deliver)
        elif post is _direct:
            self._route = deliver
        else:
            import functools

            self._route = functools.partial(post, deliver)

    def status_callback(self, fn: Callable[[FeedState, SubscribeFeed[N]], object]) -> None:
        """Set the feed-status callback ``fn(state, feed)`` (only while not subscribed)."""
        self._require_settable("status")
        self._given_status = fn

    def message_callback(self, fn: Callable[[N, SubscribeFeed[N]], object]) -> None:
        """Set the notification callback ``fn(message, feed)`` (only while not subscribed)."""
        self._require_settable("message")
        self._given_message = fn

    def subscribe(self) -> None:
        """Start receiving this key's notifications."""
        self._require(_Phase.OPEN, "subscribe()")
        self._cb_message = self._resolve(self._given_message, "on_message", "message", True)
        self._cb_status = self._resolve(self._given_status, "on_feed_status", "status", False)
        self._enter_placed(self._router._place_subscriber)

    def unsubscribe(self) -> None:
        """Stop receiving; the feed may subscribe again."""
        self._require(_Phase.PLACED, "unsubscribe()")
        self._retract()

    def _retract(self) -> None:
        self._router._retract_subscriber(self)
        self._phase = _Phase.OPEN

    # The delivery task, run on the owner's dispatcher: drop the message if the
    # feed was retracted since it was queued; check the condition just before
    # delivering.  While placed, ``_cb_message`` is set (subscribe() resolved it).
    # The callback's result is the task's: an awaitable is awaited by an asyncio
    # dispatcher before the actor's next task.
    def _deliver(self, message: Any) -> object:
        if self._phase is _PLACED:
            return self._cb_message(message, self)  # type: ignore[misc]
        return None

    def _deliver_if(self, message: Any) -> object:
        if self._phase is _PLACED and self._condition(message):  # type: ignore[misc]
            return self._cb_message(message, self)  # type: ignore[misc]
        return None

    def _fire_status(self, up: bool) -> object:
        if self._phase is _Phase.PLACED and self._cb_status is not None:
            return self._cb_status(FeedState.UP if up else FeedState.DOWN, self)
        return None


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
        if type(reply) is not Reply and not request_cls.allows_reply(type(reply)):
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
        "request",
        "timed_out",
    )

    def __init__(self, feed: RequestFeed[Q], request: Q) -> None:
        self.id = next(_request_ids)
        self.feed = feed
        self.request = request
        #: True when the request ended because its timeout passed.
        self.timed_out = False
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
        self.feed._router._requests.pop(self.id, None)

    def _reply_from(self, incoming: IncomingRequest[Q], reply: Reply) -> bool:
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
                if incoming.feed._remote is None:
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
        feed = self.feed
        post = feed._post
        if post is _direct:  # a link's proxy: straight on, one call less per reply
            feed._deliver_reply((self, reply, remaining))
        else:
            post(feed._deliver_reply, (self, reply, remaining))
        if remaining == 0:
            self._finish()
        return True

    def _retire(self, incoming: IncomingRequest[Q], count: bool = True) -> None:
        incoming._final = True
        if incoming in self._active:
            self._active.remove(incoming)
        if count:
            self._remaining -= 1
        incoming.feed._done_with(incoming)

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
                    reason=f"no replier at remote node {incoming.feed._remote} took the request",
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
        self.feed._post(self.feed._deliver_reply, (self, error, max(remaining, 0)))
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
        self.feed._post(self.feed._deliver_reply, (self, error, 0))
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
        self._enter_placed(self._router._place_requestor)

    def unsubscribe(self) -> None:
        """Stop; outstanding requests are cancelled."""
        self._require(_Phase.PLACED, "unsubscribe()")
        self._retract()

    def _retract(self) -> None:
        self._router._retract_requestor(self)
        self._phase = _Phase.OPEN

    def request(self, message: Q, *, timeout: float | None = None) -> RequestHandle[Q]:
        """Send ``message`` to every in-scope replier that is up and whose condition
        accepts it.  Raises :class:`~actorbus.RequestError` at once when there is
        none.  With ``timeout`` (seconds), the request ends with an ERROR reply
        "timed out after …" if repliers are still active then."""
        if self._phase is not _PLACED:
            self._require(_PLACED, "request()")
        if type(message) is not self._mcls or message.subject != self._subject:
            key = self._key
            raise UsageError(
                f"request() on feed {key} got {MessageKey.of(message) if isinstance(message, Message) else message!r}; "
                f"a request feed sends only its own key"
            )
        if timeout is not None and timeout <= 0:
            raise UsageError(f"request() timeout must be > 0 seconds, found {timeout!r}")
        return self._router._request(self, message, timeout)

    def _deliver_reply(self, item: tuple[RequestHandle[Q], Reply, int]) -> object:
        # one argument, (handle, reply, remaining): a one-argument task is the
        # mailbox's cheapest kind
        handle, reply, remaining = item
        if handle._cancelled:
            return None
        cb = self._reply_by_class.get(type(reply), self._cb_reply)
        if cb is None:
            cb = self._reply_by_class.get(Reply)
        if cb is not None:
            return cb(remaining, reply, handle)
        return None

    def _fire_status(self, up: bool) -> object:
        if self._phase is _Phase.PLACED and self._cb_status is not None:
            return self._cb_status(FeedState.UP if up else FeedState.DOWN, self)
        return None


# ====================================================================== reply feed


class ReplyFeed(Feed, Generic[Q]):
    """Answers requests of one key.

    Declare UP/DOWN with :meth:`update_feed_state` like a publisher; a DOWN
    replier gets no requests.  A condition, if given, is checked before the
    request is posted, so the requestor's replier count is exact.  Retracting or
    closing with outstanding requests sends an ERROR reply for each."""

    __slots__ = (
        "_cb_cancel",
        "_cb_request",
        "_declared",
        "_given_cancel",
        "_given_request",
        "_outstanding",
    )
    _place_verb = "advertise"
    _retract_verb = "unadvertise"
    _task_callbacks = {"_deliver_request": "_cb_request", "_deliver_cancel": "_cb_cancel"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given_request: Callback | None = None
        self._given_cancel: Callback | None = None
        self._cb_request: Callback | None = None
        self._cb_cancel: Callback | None = None
        self._declared = False
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
        self._enter_placed(self._router._place_replier)

    def unadvertise(self) -> None:
        """Retract; outstanding requests get an ERROR reply."""
        self._require(_Phase.PLACED, "unadvertise()")
        self._retract()

    def _retract(self) -> None:
        self._router._retract_replier(self)
        self._phase = _Phase.OPEN
        self._declared = False
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
        if up != self._declared:
            self._declared = up
            self._router._replier_state(self)

    @property
    def declared_state(self) -> FeedState:
        return FeedState.UP if self._declared else FeedState.DOWN

    @property
    def outstanding(self) -> int:
        """Requests this replier has not finished."""
        return len(self._outstanding)

    def _accepts(self, message: Any) -> bool:
        cond = self._condition
        return cond is None or bool(cond(message))

    def _send_request(self, incoming: IncomingRequest[Q]) -> None:
        self._outstanding[incoming.id] = incoming
        post = self._post
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
        self._post(self._deliver_cancel, incoming)

    def _deliver_cancel(self, incoming: IncomingRequest[Q]) -> object:
        cb = self._cb_cancel
        if cb is not None:
            return cb(incoming)
        return None

    def _done_with(self, incoming: IncomingRequest[Q]) -> None:
        self._outstanding.pop(incoming.id, None)
