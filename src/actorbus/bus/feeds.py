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
owner's class overrides it — and fails with :class:`~actorbus.errors.CallbackError`
naming the missing one.  Required callbacks: publisher → publish status;
subscriber → message; requestor → reply; replier → request.  The others
(subscriber/requestor feed status, replier cancel) are optional.

Every callback runs as a task in the owner's mailbox (``self.post``), so an
actor's callbacks never overlap.  Feeds without an actor (inboxes, the
synchronous request helpers, remote proxies) have a direct poster that runs the
callback at once on the calling thread; their callbacks only enqueue.

State lives in the :class:`~actorbus.bus.router.Router`, which does all the
counting under its lock and posts status changes.  The publish path takes no
lock: the router keeps, per key and per publisher category, immutable tuples of
*routes* that it swaps atomically (copy on write).  A subscriber owned by an
actor is reached by running its mailbox's post inline in the publish loop
(``Mailbox.post_parts``: no Python call per delivery); other subscribers
(inboxes, remote proxies) by calling their route.

Request/reply (:class:`RequestFeed`, :class:`ReplyFeed` and the request objects)
lives in :mod:`actorbus.bus.requests`, the life all four feeds share in
:mod:`actorbus.bus._feed`; both are re-exported here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol

from ..errors import FeedStateError, UsageError
from ._feed import _PLACED, Callback, Feed, N, _Phase

# re-exported (not in __all__) for the bus's own modules and the node, never users
from ._feed import _direct as _direct  # noqa: PLC0414
from ._feed import _refuse_async as _refuse_async  # noqa: PLC0414
from .message import Message, MessageKey
from .queues import QueueGroup, check_group_name
from .requests import IncomingRequest, ReplyFeed, RequestFeed, RequestHandle, WatchedRequestFeed
from .scope import FeedState
from .sender import Sender
from .subjects import Wildcard

__all__ = [
    "Feed",
    "IncomingRequest",
    "OutputWatch",
    "PublishFeed",
    "ReplyFeed",
    "RequestFeed",
    "RequestHandle",
    "Stamped",
    "SubscribeFeed",
    "WatchedPublishFeed",
    "WatchedRequestFeed",
]


# ==================================================================== publish feed


class PublishFeed(Feed, Generic[N]):
    """Publishes notifications of one key.

    Told UP (``on_publish_status``) when at least one in-scope subscriber exists,
    DOWN when the last leaves.  Declare your own state with
    :meth:`update_feed_state` before publishing; publishing while your declared
    state is DOWN is an error."""

    __slots__ = (
        "_cb_congestion",
        "_cb_status",
        "_congested",
        "_given_congestion",
        "_given_status",
        "_mcls",
        "_ready",
        "_subject",
        "_waiters",
        "declared",
        "routes",
    )
    _place_verb = "advertise"
    _retract_verb = "unadvertise"
    _task_callbacks = {"_fire_status": "_cb_status", "_fire_congestion": "_cb_congestion"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given_status: Callback | None = None
        self._cb_status: Callback | None = None
        self.declared = False
        self._mcls: type = self._key.message_class
        self._subject: str = self._key.subject
        #: this publisher's routes: its category's in the entry, each delivery
        #: stamped with this feed's sender (the router keeps them; see there)
        self.routes: tuple[tuple[Any, ...], tuple[Callable[[Any], object], ...]] = ((), ())
        #: publisher back-pressure: a link this feed publishes to is over its
        #: output queue's high-water mark (the router sets it, under its lock)
        self._congested = False
        self._given_congestion: Callback | None = None
        self._cb_congestion: Callback | None = None
        #: made by the first wait_ready(): set while not congested
        self._ready: threading.Event | None = None
        #: ready() awaiting: (loop, future)
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]] = []

    def status_callback(self, fn: Callable[[FeedState, PublishFeed[N]], object]) -> None:
        """Set the publish-status callback ``fn(state, feed)`` (only while not advertised)."""
        self._require_settable("status")
        self._given_status = fn

    def congestion_callback(self, fn: Callable[[bool, PublishFeed[N]], object]) -> None:
        """Set the congestion callback ``fn(congested, feed)`` (only while not
        advertised): called when a link this feed publishes to goes over its
        output queue's high-water mark (True) and when it has drained (False)."""
        self._require_settable("congestion")
        self._given_congestion = fn

    def advertise(self) -> None:
        """Tell the bus this feed publishes its key.  Its declared state starts DOWN."""
        self._require(_Phase.OPEN, "advertise()")
        self._cb_status = self._resolve(
            self._given_status, "on_publish_status", "status", required=True
        )
        self._cb_congestion = self._resolve(
            self._given_congestion, "on_congestion", "congestion", required=False
        )
        self._enter_placed(self._router.place_publisher)

    def unadvertise(self) -> None:
        """Retract the advertisement; the feed may be advertised again."""
        self._require(_Phase.PLACED, "unadvertise()")
        self._retract()

    def _retract(self) -> None:
        self._router.retract_publisher(self)
        self.phase = _Phase.OPEN
        self.declared = False

    def update_feed_state(self, state: FeedState) -> None:
        """Declare this publisher's own state (its source is up or down)."""
        self._require(_Phase.PLACED, "update_feed_state()")
        if not isinstance(state, FeedState):
            raise UsageError(f"update_feed_state() takes a FeedState, found {state!r}")
        up = state is FeedState.UP
        if up != self.declared:
            self.declared = up
            self._router.publisher_state(self)

    @property
    def declared_state(self) -> FeedState:
        """The state this publisher declared with :meth:`update_feed_state`."""
        return FeedState.UP if self.declared else FeedState.DOWN

    def is_feed_up(self) -> bool:
        """True when advertised, declared UP, and at least one subscriber is there."""
        return self.declared and self.reported

    def publish(self, message: N, *, route_to: Iterable[str] | None = None) -> int:
        """Send ``message`` to every in-scope subscriber of this key.

        Returns how many subscribers took it (local subscribers, inboxes and remote
        links — before subscriber conditions run): 0 means nobody was there, e.g.
        between the last subscriber leaving and this publisher's DOWN status.

        ``route_to`` (node ids) sends it along that source route instead, to the
        subscribers on the route's last node (docs/routing.md, "Source routes and
        bounces"): 1 when it left this node, 0 when it bounced here at once (the
        :class:`~actorbus.bus.system.Undeliverable` is on the system subject);
        an empty route delivers to this node's subscribers alone."""
        if not self.declared or type(message) is not self._mcls or message.subject != self._subject:
            self._publish_refused(message)
        if route_to is not None:
            return self._router.source_routes.publish(self.stamp, message, route_to)
        # One atomic read of this category's routes (see the router): subscribers
        # posting to a mailbox get its post inlined (``Mailbox.post_parts``: the
        # one place outside the mailbox that queues a task), the others
        # (inboxes, remote proxies) are called.
        local, other = self.routes
        for put, claim, schedule, mailbox, deliver in local:
            put((deliver, message))
            if claim(0, False):
                schedule(mailbox)
        if other:
            for route in other:
                route(message)
            return len(local) + len(other)
        return len(local)

    # ----------------------------------------------------- publisher back-pressure

    @property
    def congested(self) -> bool:
        """True while a link this feed publishes to holds more than its output
        queue's high-water mark (``message_queue_high_water``) waiting for its
        peer; False again once it drained below half of it.  Publishing goes on
        working meanwhile (up to the link's hard limit, where the link resets and
        drops): slow down, or wait with :meth:`wait_ready` / :meth:`ready`."""
        return self._congested

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until no link this feed publishes to is congested; True at once
        when none is, False if ``timeout`` seconds passed first.  This blocks the
        calling thread (an actor's dispatcher thread too): on an asyncio
        dispatcher, ``await feed.ready()`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UsageError(
                f"wait_ready() on feed {self._key} would block the event loop this thread "
                "runs (and the links on it may be the ones to drain); use "
                "'await feed.ready(timeout)' there"
            )
        with self._router.lock:
            if not self._congested:
                return True
            ready = self._ready
            if ready is None:
                ready = self._ready = threading.Event()
        return ready.wait(timeout)

    async def ready(self, timeout: float | None = None) -> bool:
        """``await`` until no link this feed publishes to is congested (see
        :meth:`wait_ready`); False if ``timeout`` seconds passed first."""
        loop = asyncio.get_running_loop()
        with self._router.lock:
            if not self._congested:
                return True
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter[1], timeout)
        except TimeoutError:
            return False
        finally:
            with self._router.lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def congestion_changed(self, congested: bool) -> None:
        """(under the router lock) The router's mark changed: wake the waiters,
        post the callback."""
        self._congested = congested
        ready = self._ready
        if ready is not None:
            if congested:
                ready.clear()
            else:
                ready.set()
        if not congested:
            waiters, self._waiters = self._waiters, []
            for loop, future in waiters:
                try:
                    loop.call_soon_threadsafe(_resolve_ready, future)
                except RuntimeError:  # its loop is closed
                    pass
        if self.phase is _PLACED and self._cb_congestion is not None:
            self.post(self._fire_congestion, congested)

    def _fire_congestion(self, congested: bool) -> object:
        if self.phase is _PLACED and self._cb_congestion is not None:
            return self._cb_congestion(congested, self)
        return None

    def _publish_refused(self, message: object) -> None:
        key = self._key
        if self.phase is not _Phase.PLACED:
            self._require(_Phase.PLACED, "publish()")
        if not self.declared:
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
        if self.phase is _Phase.PLACED and self._cb_status is not None:
            return self._cb_status(FeedState.UP if up else FeedState.DOWN, self)
        return None


def _resolve_ready(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)


class WatchedPublishFeed(PublishFeed[N]):
    """A publish feed that shows each message it publishes to ``watch(feed,
    message)`` first, on the publishing thread: the feeds of a recorded actor
    (``FeedOwner._ab_output_watch``).  Every other feed is a plain
    :class:`PublishFeed`, whose publish loop stays as it is."""

    __slots__ = ("_watch",)

    def __init__(
        self, *args: Any, watch: Callable[[PublishFeed[N], N], None], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._watch = watch

    def publish(self, message: N, *, route_to: Iterable[str] | None = None) -> int:
        """Show ``message`` to the watch, then :meth:`PublishFeed.publish` it."""
        if self.declared and type(message) is self._mcls and message.subject == self._subject:
            self._watch(self, message)
        return super().publish(message, route_to=route_to)


class OutputWatch(Protocol):
    """What watches a recorded owner's outputs (``FeedOwner._ab_output_watch``):
    each is called on the thread that sends, before it goes."""

    def published(self, feed: PublishFeed[Any], message: Any) -> None:
        """``message`` is being published on ``feed``."""

    def requested(self, feed: RequestFeed[Any], handle: RequestHandle[Any]) -> None:
        """``feed`` sent the request of ``handle``."""

    def replied(self, incoming: IncomingRequest[Any], reply: Any) -> None:
        """The owner's replier answered ``incoming`` with ``reply``."""


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
        "_from",
        "_given_message",
        "_given_status",
        "_group_config",
        "_inline",
        "_joined",
        "_ups",
        "group",
        "route",
        "weight",
        "wild",
    )
    _place_verb = "subscribe"
    _retract_verb = "unsubscribe"
    _task_callbacks = {
        "_fire_status": "_cb_status",
        "_deliver": "_cb_message",
        "_deliver_if": "_cb_message",
    }

    def __init__(
        self,
        *args: Any,
        route: Callable[[Any], object] | None = None,
        wildcard: Wildcard | None = None,
        queue: str | QueueGroup | None = None,
        weight: int = 1,
        **kwargs: Any,
    ) -> None:
        # A wildcard subscription matches many keys: the router joins it to the
        # entry of each matching key (``_joined``: entry -> UP there; ``_ups``
        # counts the UP ones).  A queue member (``group``, its name) is reached
        # through its group's rotation, never by a route of its own
        # (:mod:`actorbus.bus.queues`); ``weight`` is how many turns it takes
        # (a remote node's proxy: its member count).
        self.wild = wildcard
        #: the sender of the message being delivered (see ``sender``)
        self._from: Sender | None = None
        self._joined: dict[Any, bool] = {}
        self._ups = 0
        self.group: str | None = None
        self._group_config: QueueGroup | None = None
        self.weight = weight
        if queue is not None:
            config = QueueGroup.of(queue) if not isinstance(queue, str) else None
            check_group_name(queue if isinstance(queue, str) else queue.name)
            self.group = queue if isinstance(queue, str) else queue.name
            self._group_config = config
            if wildcard is not None:
                raise UsageError(
                    f"queue group {self.group!r}: a queue subscription takes one subject, "
                    f"not a wildcard ({wildcard}); subscribe the members to an exact subject"
                )
            if kwargs.get("condition") is not None:
                raise UsageError(
                    f"queue group {self.group!r}: a queue member cannot have a condition (a "
                    f"notification it refused would reach nobody); filter in the callback"
                )
        super().__init__(*args, **kwargs)
        self._given_status: Callback | None = None
        self._given_message: Callback | None = None
        self._cb_status: Callback | None = None
        self._cb_message: Callback | None = None
        # How a publisher reaches this feed.  When the poster is a mailbox's
        # ``post``, ``_inline`` is ``(put, claim, schedule, mailbox, deliver)``
        # and the publish loop runs the post inline (``Mailbox.post_parts``);
        # otherwise ``route(message)`` is
        # called: ``route`` when given (a remote proxy's transport), else the
        # delivery itself for a direct poster, or a partial that posts it.
        # Exactly one of ``_inline`` and ``route`` is set.
        deliver = self._deliver if self.condition is None else self._deliver_if
        post = self.post
        mailbox = getattr(post, "__self__", None)
        parts = getattr(mailbox, "post_parts", None) if post is not _direct else None
        self._inline: tuple[Any, ...] | None = None
        self.route: Callable[[Any], object] | None = None
        #: what holds this feed's undelivered messages when it is not a mailbox
        #: (an :class:`~actorbus.bus.inbox.Inbox`): anything with a ``depth``, which
        #: a link's input back-pressure watches as it watches mailboxes
        self._backlog: Any = None
        if route is not None:
            self.route = route
        elif parts is not None:
            put, claim, schedule = parts()
            self._inline = (put, claim, schedule, mailbox, deliver)
        elif post is _direct:
            self.route = deliver
        else:
            import functools

            self.route = functools.partial(post, deliver)

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
        self._enter_placed(self._router.place_subscriber)

    def unsubscribe(self) -> None:
        """Stop receiving; the feed may subscribe again."""
        self._require(_Phase.PLACED, "unsubscribe()")
        self._retract()

    def _retract(self) -> None:
        self._router.retract_subscriber(self)
        self.phase = _Phase.OPEN

    # The delivery task, run on the owner's dispatcher: drop the message if the
    # feed was retracted since it was queued; check the condition just before
    # delivering.  While placed, ``_cb_message`` is set (subscribe() resolved it).
    # The callback's result is the task's: an awaitable is awaited by an asyncio
    # dispatcher before the actor's next task.
    def _deliver(self, message: Any) -> object:
        if self.phase is _PLACED:
            return self._cb_message(message, self)  # type: ignore[misc]
        return None

    def _deliver_if(self, message: Any) -> object:
        if self.phase is _PLACED and self.condition(message):  # type: ignore[misc]
            return self._cb_message(message, self)  # type: ignore[misc]
        return None

    @property
    def sender(self) -> Sender | None:
        """Who sent the message being delivered (read it in the message
        callback): node, actor, feed and hops; None before the first one."""
        return self._from

    @property
    def wildcard(self) -> Wildcard | None:
        """The pattern this feed subscribes to, or None for an exact subject."""
        return self.wild

    @property
    def queue(self) -> str | None:
        """The queue group this feed is a member of, or None."""
        return self.group

    def _fire_status(self, up: bool) -> object:
        if self.phase is _Phase.PLACED and self._cb_status is not None:
            return self._cb_status(FeedState.UP if up else FeedState.DOWN, self)
        return None


class Stamped:
    """A subscriber's delivery with one publisher's :class:`Sender`: what that
    publisher's routes hold (the router stamps each publisher's routes, so the
    sender costs no look-up per message).  A bound method of this small object
    is cheaper to call than a ``functools.partial``."""

    __slots__ = ("sender", "target_feed")

    def __init__(self, feed: SubscribeFeed[Any], sender: Sender) -> None:
        #: the subscriber (failure reports name its callback)
        self.target_feed = feed
        self.sender = sender

    def deliver(self, message: Any) -> object:
        feed = self.target_feed
        if feed.phase is _PLACED:
            feed._from = self.sender
            return feed._cb_message(message, feed)  # type: ignore[misc]
        return None

    def deliver_if(self, message: Any) -> object:
        feed = self.target_feed
        if feed.phase is _PLACED and feed.condition(message):  # type: ignore[misc]
            feed._from = self.sender
            return feed._cb_message(message, feed)  # type: ignore[misc]
        return None
