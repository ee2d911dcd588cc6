"""The life every feed shares (open, placed, closed) and the rules for its callbacks.

:class:`Feed` is the base of the four feeds (:mod:`actorbus.bus.feeds`,
:mod:`actorbus.bus.requests`): its owner, key and scope, whether discovery
lists it (``discoverable``), the open → placed → closed life, and how callbacks
are resolved when a feed is placed — the callable given, else the owner's role
method — including the refusal of ``async def`` callbacks where nothing awaits
them.

The feed as the bus core's shared record
----------------------------------------
The router, the parties, the queue groups and discovery read and write a feed's
state; those fields are plain attributes without a leading underscore (one
attribute load on the hot paths, like the ``_name`` they replace), which makes
them part of the bus core's internal interface, not of the public API (the
public names of a feed are its methods and properties).  Who writes what:

=================  ===========================================================
``cat``            the feed category (0-2 :class:`Scope`, 3-4 from a remote
                   peer); set here once.  The router indexes counters and
                   routes with it.
``remote``         the :class:`~actorbus.bus.party.RemoteParty` of a proxy
                   feed, else None; set here once.
``post``           how a task reaches the owner (its mailbox's ``post_one``,
                   or a direct call); set here once; the router, queues and
                   requests post through it.
``entry``          the router's per-key record (``router._Entry``) this feed
                   is counted in; set here once.
``stamp``          the :class:`~actorbus.bus.sender.Sender` this feed stamps on
                   what it sends; set here when the feed is placed.
``phase``          open / placed / closed; written here and by the feed
                   classes, read by the queue groups.
``reported``       the state last reported to the owner; written by the
                   router under its lock, read by discovery.
``condition``      a subscriber's or replier's filter, or None; set here once.
``declared``       (publishers, repliers) the state the owner declared; written
                   by the feed under the router lock.
``routes``         (publishers) the stamped routes the publish loop reads;
                   written by the router under its lock (``bus/_stamp.py``).
``route``          (subscribers, repliers) a proxy's transport call, or None;
                   set once.
``group``,         (subscribers) the queue group's name and this member's turns
``weight``         in its rotation; set once.
``wild``           (subscribers) the :class:`Wildcard`, or None; set once.
=================  ===========================================================

Everything else of a feed keeps its ``_name`` and is its own module's.
"""

from __future__ import annotations

import abc
import enum
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import CallbackError, FeedStateError, UsageError
from .message import MessageKey, Notification, ReplyStatus, Request
from .scope import FeedState, Scope
from .sender import Sender, sender_of

if TYPE_CHECKING:
    from .router import Router

__all__ = ["Feed"]

N = TypeVar("N", bound=Notification)
Q = TypeVar("Q", bound=Request)
Callback = Callable[..., Any]


class _Phase(enum.Enum):
    OPEN = "open"
    PLACED = "placed"
    CLOSED = "closed"


#: the sender of a feed not placed yet
_NO_SENDER = Sender("", None, 0, 0)

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
        "_discoverable",
        "_id",
        "_key",
        "_owner",
        "_router",
        "_scope",
        "cat",
        "condition",
        "entry",
        "phase",
        "post",
        "remote",
        "reported",
        "stamp",
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
        discoverable: bool = True,
    ) -> None:
        if not isinstance(scope, Scope):
            raise UsageError(f"scope must be a Scope, found {scope!r}; use Scope.LOCAL_ONLY etc.")
        if type(discoverable) is not bool:
            raise UsageError(
                f"discoverable must be True or False, found {discoverable!r}; pass "
                f"discoverable=False to keep the feed out of discovery (Bus.topics)"
            )
        self._router = router
        #: unique per bus; what a :class:`~actorbus.bus.sender.Sender` names
        self._id = next(router.feed_ids)
        #: what this feed stamps on what it sends (set when it is placed)
        self.stamp: Sender = _NO_SENDER
        self._owner = owner
        #: False keeps the feed out of discovery (:mod:`actorbus.bus.discovery`)
        self._discoverable = discoverable
        self._key = key
        self._scope = scope
        self.remote = remote
        self.cat = int(getattr(remote, "category", 3)) if remote is not None else int(scope)
        self.post: Callable[..., None] = post if post is not None else _direct
        self.phase = _Phase.OPEN
        self.reported = False
        self.condition = condition
        # a wildcard subscription (``wild``, set by SubscribeFeed first) has no
        # key of its own: its entry is a loose one the router never looks up
        if getattr(self, "wild", None) is None:
            self.entry = router.entry_for(key)
        else:
            self.entry = router.loose_entry(key)

    # ---------------------------------------------------------------- properties
    @property
    def key(self) -> MessageKey:
        """The (message class, subject) this feed is for."""
        return self._key

    @property
    def id(self) -> int:
        """This feed's id, unique on its bus (the ``feed`` of its :class:`Sender`)."""
        return self._id

    @property
    def scope(self) -> Scope:
        return self._scope

    @property
    def owner(self) -> object:
        return self._owner

    @property
    def discoverable(self) -> bool:
        """False when the feed was opened with ``discoverable=False``: discovery
        (:meth:`Bus.topics <actorbus.Bus.topics>`) never lists it."""
        return self._discoverable

    @property
    def is_open(self) -> bool:
        """True until :meth:`close`."""
        return self.phase is not _Phase.CLOSED

    @property
    def is_placed(self) -> bool:
        """True while advertised (publisher/replier) or subscribed (subscriber/requestor)."""
        return self.phase is _Phase.PLACED

    @property
    def feed_state(self) -> FeedState:
        """UP when the other side is there (see each role)."""
        return FeedState.UP if self.reported else FeedState.DOWN

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._key} {self._scope.name} {self.phase.value}>"

    # ---------------------------------------------------------------- life
    def _require(self, phase: _Phase, action: str) -> None:
        if self.phase is phase:
            return
        if self.phase is _Phase.CLOSED:
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
        if self.phase is not _Phase.OPEN:
            state = "closed" if self.phase is _Phase.CLOSED else "already placed"
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
        self.stamp = sender_of(self._router.node_id, self._owner, self._id, self.remote)
        self.phase = _Phase.PLACED
        try:
            place(self)
        except BaseException:
            self.phase = _Phase.OPEN
            raise

    def close(self) -> None:
        """Retract if placed and make the feed unusable.  Closing twice is harmless."""
        if self.phase is _Phase.CLOSED:
            return
        if self.phase is _Phase.PLACED:
            self._retract()
        self.phase = _Phase.CLOSED
        self._router.forget(self)

    def __enter__(self) -> Feed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
