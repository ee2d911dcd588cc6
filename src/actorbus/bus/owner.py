"""The feed side of an actor: role callbacks and helpers to open feeds.

:class:`FeedOwner` is a mixin of :class:`actorbus.Actor`.  It gives each actor

* the **role methods** the bus calls when a feed has no callable of its own —
  ``on_publish_status``, ``on_feed_status``, ``on_message``, ``on_request``,
  ``on_cancel``, ``on_reply`` — which a subclass overrides;
* the **long form** ``open_publish_feed`` / ``open_subscribe_feed`` /
  ``open_request_feed`` / ``open_reply_feed``, returning an OPEN feed to wire
  and place yourself;
* the **short form** ``publisher`` / ``subscribe`` / ``requestor`` / ``replier``,
  which open, wire and place in one call.

Opening a feed registers the actor with its bus if it is not registered yet
(without running ``startup``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import RegistrationError, UsageError
from .feeds import (
    IncomingRequest,
    PublishFeed,
    ReplyFeed,
    RequestFeed,
    RequestHandle,
    SubscribeFeed,
)
from .message import Message, MessageKey, Notification, Reply, Request
from .scope import FeedState, Scope

if TYPE_CHECKING:
    from .bus import Bus

__all__ = ["FeedOwner"]

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
        raise UsageError(f"subject must be a str, found {type(subject).__name__} {subject!r}")
    return MessageKey(cls, subject)


class FeedOwner:
    """Mixin: role callbacks and feed helpers (see the module docstring)."""

    __slots__ = ()

    # -------------------------------------------------------------- role methods
    @_default_callback
    def on_publish_status(self, state: FeedState, feed: PublishFeed[Any]) -> None:
        """A publisher's subscribers appeared (UP) or all left (DOWN)."""

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
    def _ab_feed_context(self) -> tuple[Any, Callable[..., None]]:
        """The router and the mailbox poster of this actor, registering it if needed."""
        from .bus import Bus

        runtime: Any = getattr(self, "_ab_runtime", None)
        if runtime is None:
            bus = Bus.current()
            if bus is None:
                raise RegistrationError(
                    f"{self!r} opened a feed but is not registered and no single open "
                    f"Bus exists; call bus.register(actor) first"
                )
            bus.runtime.ensure_registered(self)  # type: ignore[arg-type]
            runtime = getattr(self, "_ab_runtime", None)
        owner: Bus = runtime.owner
        mailbox = self._ab_mailbox  # type: ignore[attr-defined]
        return owner.router, mailbox.post

    # -------------------------------------------------------------- long form
    def open_publish_feed(
        self, message_class: type[N], subject: str, scope: Scope = Scope.LOCAL_AND_REMOTE
    ) -> PublishFeed[N]:
        """Open (not yet advertise) a publish feed for ``message_class:subject``."""
        key = checked_key(message_class, subject, Notification)
        router, post = self._ab_feed_context()
        return PublishFeed(router, self, key, scope, post=post)

    def open_subscribe_feed(
        self,
        message_class: type[N],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[N], bool] | None = None,
    ) -> SubscribeFeed[N]:
        """Open (not yet subscribe) a subscribe feed."""
        key = checked_key(message_class, subject, Notification)
        router, post = self._ab_feed_context()
        return SubscribeFeed(router, self, key, scope, post=post, condition=condition)

    def open_request_feed(
        self, message_class: type[Q], subject: str, scope: Scope = Scope.LOCAL_AND_REMOTE
    ) -> RequestFeed[Q]:
        """Open (not yet subscribe) a request feed."""
        key = checked_key(message_class, subject, Request)
        router, post = self._ab_feed_context()
        return RequestFeed(router, self, key, scope, post=post)

    def open_reply_feed(
        self,
        message_class: type[Q],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[Q], bool] | None = None,
    ) -> ReplyFeed[Q]:
        """Open (not yet advertise) a reply feed."""
        key = checked_key(message_class, subject, Request)
        router, post = self._ab_feed_context()
        return ReplyFeed(router, self, key, scope, post=post, condition=condition)

    # -------------------------------------------------------------- short form
    def publisher(
        self,
        message_class: type[N],
        subject: str,
        *,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        on_status: Callable[[FeedState, PublishFeed[N]], object] | None = None,
        up: bool = False,
    ) -> PublishFeed[N]:
        """Open and advertise a publish feed; with ``up=True`` also declare it UP."""
        feed = self.open_publish_feed(message_class, subject, scope)
        if on_status is not None:
            feed.status_callback(on_status)
        feed.advertise()
        if up:
            feed.update_feed_state(FeedState.UP)
        return feed

    def subscribe(
        self,
        message_class: type[N],
        subject: str,
        *,
        on_message: Callable[[N, SubscribeFeed[N]], object] | None = None,
        on_status: Callable[[FeedState, SubscribeFeed[N]], object] | None = None,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        condition: Callable[[N], bool] | None = None,
    ) -> SubscribeFeed[N]:
        """Open and subscribe a subscribe feed."""
        feed = self.open_subscribe_feed(message_class, subject, scope, condition)
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
    ) -> RequestFeed[Q]:
        """Open and subscribe a request feed."""
        feed = self.open_request_feed(message_class, subject, scope)
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
    ) -> ReplyFeed[Q]:
        """Open and advertise a reply feed, declared UP unless ``up=False``."""
        feed = self.open_reply_feed(message_class, subject, scope, condition)
        if on_request is not None:
            feed.request_callback(on_request)
        if on_cancel is not None:
            feed.cancel_callback(on_cancel)
        feed.advertise()
        if up:
            feed.update_feed_state(FeedState.UP)
        return feed
