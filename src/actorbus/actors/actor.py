"""The :class:`Actor` base class: a named object whose every callback is a mailbox task.

Theory of operation
-------------------
An actor is inert until an :class:`~actorbus.actors.runtime.ActorRuntime`
registers it: registration pins it to one dispatcher and gives it a mailbox.
From then on everything that calls into the actor (its ``startup`` and
``shutdown``, timer expiries, feed callbacks, :meth:`Actor.post`) is a task in
that mailbox, run one at a time on the dispatcher's threads.  So actor code
needs no locks as long as only the runtime calls into it.

All of the runtime's state on an actor lives in attributes prefixed ``_ab_``
with class-level defaults.  A subclass that defines ``__init__`` should call
``super().__init__()`` (to pass ``name``), but an actor whose ``__init__`` never
ran is still registered correctly: it gets its default name ``ClassName-N`` at
registration instead of at construction.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, TypeVarTuple

from actorbus.actors._context import bus_runtimes
from actorbus.actors.errors import NotRegisteredError
from actorbus.actors.failure import FailedTask, report_failure
from actorbus.bus.owner import FeedOwner
from actorbus.bus.scope import Scope
from actorbus.errors import RegistrationError, UsageError

if TYPE_CHECKING:
    from actorbus.actors.dispatcher import Dispatcher
    from actorbus.actors.machine_view import MachineView
    from actorbus.actors.mailbox import Mailbox
    from actorbus.actors.runtime import ActorRuntime
    from actorbus.actors.timers import TimerHandle
    from actorbus.bus.feeds import OutputWatch, PublishFeed, ReplyFeed, RequestFeed, SubscribeFeed
    from actorbus.bus.message import Notification, Request
    from actorbus.bus.queues import QueueGroup
    from actorbus.bus.router import Router
    from actorbus.bus.subjects import Wildcard

__all__ = ["Actor", "ActorContext"]

Ts = TypeVarTuple("Ts")
N = TypeVar("N", bound="Notification")
Q = TypeVar("Q", bound="Request")

_name_counters: dict[str, itertools.count[int]] = {}
_name_lock = threading.Lock()


def _default_name(cls: type) -> str:
    with _name_lock:
        counter = _name_counters.get(cls.__name__)
        if counter is None:
            counter = _name_counters[cls.__name__] = itertools.count(1)
        return f"{cls.__name__}-{next(counter)}"


class Actor(FeedOwner):
    """Base class for application objects: one mailbox, one dispatcher, no locks.

    Override :meth:`startup` and :meth:`shutdown` (both no-ops by default); they
    run as tasks on the actor's own dispatcher, so ``startup`` completes before
    any task posted after it.  Registration may supply callables instead.

    **Failure contract**

    * An :class:`Exception` raised by a task (a feed callback, a timer callback,
      a callback given to :meth:`post`, or an awaitable one of them returned on
      an asyncio dispatcher) is passed to :meth:`on_failure` on the actor's
      dispatcher, with a :class:`~actorbus.actors.failure.FailedTask` naming
      the callback, the feed key and the message.  The default
      :meth:`on_failure` reports it once, traceback included: to stderr when
      the application configured no logging (docs/actors.md, "Logging").  The
      actor keeps running and receiving tasks; the dispatcher's
      ``task_failures`` counts it.
    * A request callback that raises also ends that replier's part of the
      request with an ERROR reply (naming the exception's class), so the
      requestor does not wait for its timeout; a :meth:`serve` handler that
      raises is such a callback (``serve(..., error_detail="message")`` sends
      the exception's text too).  A reply of a class the request
      does not allow does the same, and ``reply()`` raises
      :class:`~actorbus.RequestError` to the replier.
    * An exception raised by ``startup()`` leaves the actor *not started*; it is
      reported, and whoever waits on the startup
      (:meth:`~actorbus.actors.runtime.Completion.wait`) gets it raised.
      Starting it again later runs ``startup()`` again.
    * An exception raised by ``shutdown()`` is reported likewise; the actor is
      considered stopped anyway, and its timers are cancelled.
    * A :class:`BaseException` that is not an :class:`Exception`
      (``KeyboardInterrupt``, ``SystemExit``) is never swallowed: it is
      reported at CRITICAL and stops the node — :func:`~actorbus.wait_for_stop`
      returns and raises it in the main thread (or ``Bus.close()`` /
      ``ActorRuntime.close()`` raises it if nothing was waiting), after which
      the usual shutdown runs the actors' ``shutdown()``.  Dispatcher threads
      survive it, so that shutdown can still run.
    * Tasks run whether or not the actor is started; started/stopped is the
      lifecycle state that ``startup``/``shutdown`` move between (starting a
      started actor, or stopping a stopped one, is a no-op).
    """

    # Runtime state, all with class-level defaults so a subclass that forgets
    # super().__init__() still works.  Never touch these from user code.
    _ab_name: str | None = None
    _ab_runtime: ActorRuntime | None = None
    _ab_mailbox: Mailbox | None = None
    _ab_started: bool = False
    _ab_startup_fn: Callable[[], object] | None = None
    _ab_shutdown_fn: Callable[[], object] | None = None
    _ab_timers: set[TimerHandle] | None = None
    _ab_context: ActorContext | None = None

    def __init__(self, name: str | None = None) -> None:
        super().__init__()
        if name is None:
            self._ab_name = _default_name(type(self))
        elif isinstance(name, str) and name:
            self._ab_name = name
        else:
            raise UsageError(
                f"actor name {name!r} is not allowed; give a non-empty str, "
                f"or None for the default {type(self).__name__}-N"
            )

    # -------------------------------------------------------------------- lifecycle

    def startup(self) -> None:
        """Called on the actor's dispatcher when the actor is started.  No-op by default.

        Open feeds and schedule timers here.  Raise to refuse to start.
        """

    def shutdown(self) -> None:
        """Called on the actor's dispatcher when the actor is stopped.  No-op by default.

        Close feeds here.  The actor's timers are cancelled right after.
        """

    def on_failure(self, exc: Exception, task: FailedTask) -> None:
        """Called on the actor's dispatcher when one of its tasks raised ``exc``.

        The default reports it (see the failure contract above).  Override to
        handle failures yourself — count them, stop the actor, raise an alarm;
        call ``super().on_failure(exc, task)`` to keep the report.  It must not
        block, and what it raises is reported along with ``exc``.
        """
        report_failure(exc, task, outcome="the actor keeps running")

    def inspect_machine(self, diagram: str | None = None) -> MachineView | None:
        """What a node's inspection (``Bus.inspect()``, ``actorbus inspect``)
        shows of this actor beyond its mailbox: its state machine, or None (the
        default: a plain actor has none).

        An actor driven by a machine overrides it (``actorbus.fsm.FsmActor``
        does) and returns a :class:`~actorbus.actors.machine_view.MachineView`:
        its current state, its last transitions and, when ``diagram`` names a
        format of :data:`~actorbus.actors.machine_view.DIAGRAM_FORMATS`, its
        diagram with the current state highlighted.  It is called on the
        inspecting thread, not the actor's dispatcher, so it must only read (a
        snapshot that may be one event old) and never block.
        """
        return None

    # ------------------------------------------------------------------- properties

    @property
    def name(self) -> str:
        """The actor's name (given to the constructor, else ``ClassName-N``).

        It may be assigned until the actor is registered; after that it is
        fixed, since stats and log records use it.
        """
        name = self._ab_name
        if name is None:
            name = self._ab_name = _default_name(type(self))
        return name

    @name.setter
    def name(self, value: str) -> None:
        if self._ab_runtime is not None:
            raise UsageError(
                f"actor {self.name!r} is registered; its name cannot change to {value!r}. "
                f"Set the name before registering (Actor.__init__(name=...))"
            )
        if not isinstance(value, str) or not value:
            raise UsageError(f"actor name {value!r} is not allowed; give a non-empty str")
        self._ab_name = value

    @property
    def is_started(self) -> bool:
        """True after a successful ``startup()`` and until ``shutdown()`` ran."""
        return self._ab_started

    @property
    def actor_context(self) -> ActorContext:
        """Where the actor runs and the long forms of its feeds: the runtime, the
        dispatcher, whether it is registered, ``open_*_feed``.  Most actors never
        need it (docs/actors.md, "The actor context")."""
        context = self._ab_context
        if context is None:
            context = self._ab_context = ActorContext(self)
        return context

    # deprecated: one release, then only actor_context has them
    @property
    def is_registered(self) -> bool:
        """Deprecated: ``actor_context.is_registered``."""
        _moved("is_registered")
        return self.actor_context.is_registered

    @property
    def runtime(self) -> ActorRuntime:
        """Deprecated: ``actor_context.runtime``."""
        _moved("runtime")
        return self.actor_context.runtime

    @property
    def dispatcher(self) -> Dispatcher:
        """Deprecated: ``actor_context.dispatcher``."""
        _moved("dispatcher")
        return self.actor_context.dispatcher

    @property
    def dispatcher_name(self) -> str | None:
        """Deprecated: ``actor_context.dispatcher_name``."""
        _moved("dispatcher_name")
        return self.actor_context.dispatcher_name

    # ------------------------------------------------------------------------ tasks

    def post(self, fn: Callable[[*Ts], object], /, *args: *Ts) -> None:
        """Run ``fn(*args)`` later as a task in this actor's own mailbox.

        Thread-safe and non-blocking.  Raises :class:`NotRegisteredError` when
        the actor is not registered.
        """
        mailbox = self._ab_mailbox
        if mailbox is None:
            mailbox = self._mailbox_or_raise("post tasks to it")
        mailbox.post(fn, *args)

    def now_ms(self) -> int:
        """The wall-clock time in epoch milliseconds, for a message's timestamp.

        While the actor is recorded (or replayed) it is the time stamped on the
        task being run, the same for the whole task, so a replay reproduces
        it; read the time this way, not with ``time.time()``, in an actor you
        mean to replay (docs/replay.md)."""
        mailbox = self._ab_mailbox
        watcher = mailbox.watcher if mailbox is not None else None
        wall = watcher.wall_ns if watcher is not None else None
        return (wall if wall is not None else time.time_ns()) // 1_000_000

    def schedule(self, delay_s: float, fn: Callable[[*Ts], object], /, *args: *Ts) -> TimerHandle:
        """Run ``fn(*args)`` as a task of this actor once, ``delay_s`` seconds from now.

        Returns a handle to cancel it.  The actor must be registered.
        """
        return self._schedule(delay_s, None, fn, args)

    def schedule_every(
        self, period_s: float, fn: Callable[[*Ts], object], /, *args: *Ts
    ) -> TimerHandle:
        """Run ``fn(*args)`` as a task of this actor every ``period_s`` seconds.

        Fixed rate without drift; the first run is one period from now.  If the
        actor is still busy with the previous run, the next one is skipped
        rather than queued.  Returns a handle to cancel it.  The actor must be
        registered.
        """
        return self._schedule(period_s, period_s, fn, args)

    def _schedule(
        self,
        delay_s: float,
        period_s: float | None,
        fn: Callable[..., object],
        args: tuple[object, ...],
    ) -> TimerHandle:
        mailbox = self._mailbox_or_raise("schedule timers")
        return self.actor_context.runtime.timers.schedule(
            mailbox, delay_s, fn, args, period_s=period_s, owner=self._ab_timers
        )

    def _ab_feed_context(self) -> tuple[Router, Callable[..., None]]:
        """(FeedOwner's interface) The router of the actor's bus and its mailbox's
        ``post_one``; an actor not registered yet is registered with the single
        open bus first (without running ``startup``)."""
        mailbox = self._ab_mailbox
        if mailbox is None:
            runtime = bus_runtimes.single()
            if runtime is None:
                raise RegistrationError(
                    f"{self!r} opened a feed but is not registered and no single open "
                    f"Bus exists; call bus.register(actor) first"
                )
            runtime.ensure_registered(self)
            mailbox = self._mailbox_or_raise("open a feed")
        router = self.actor_context.runtime.router
        if router is None:
            raise RegistrationError(
                f"{self!r} opened a feed but its runtime serves no bus; register the "
                f"actor with a Bus (bus.register(actor)) to open feeds"
            )
        return router, mailbox.post_one

    def _ab_output_watch(self) -> OutputWatch | None:
        """(FeedOwner's interface) The recorder while this actor's mailbox is
        watched (:meth:`ActorRuntime.watch`), else None."""
        mailbox = self._ab_mailbox
        return mailbox.watcher if mailbox is not None else None

    def _ab_dispatcher_info(self) -> tuple[str, str, bool] | None:
        """(FeedOwner's interface) (name, kind, awaits callbacks) of the actor's
        dispatcher; None when not registered.  Feeds use it to refuse ``async
        def`` callbacks nothing awaits."""
        mailbox = self._ab_mailbox
        if mailbox is None:
            return None
        d = mailbox.dispatcher
        return d.name, d.kind.value, d.is_async

    def _ab_blocking_deadlock(self) -> str | None:
        """(FeedOwner's interface) The dispatcher's name when blocking the calling
        thread would deadlock it (``Dispatcher.blocking_here_would_deadlock``)."""
        mailbox = self._ab_mailbox
        if mailbox is None:
            return None
        d = mailbox.dispatcher
        return d.name if d.blocking_here_would_deadlock() else None

    def _mailbox_or_raise(self, what: str) -> Mailbox:
        mailbox = self._ab_mailbox
        if mailbox is None:
            raise NotRegisteredError(
                f"actor {self.name!r} is not registered with a runtime, so it cannot "
                f"{what}; call runtime.register(actor) first"
            )
        return mailbox

    def __repr__(self) -> str:
        mailbox = self._ab_mailbox
        where = f" on {mailbox.dispatcher.name!r}" if mailbox is not None else ""
        state = "started" if self._ab_started else "stopped"
        return f"<{type(self).__qualname__} {self.name!r} {state}{where}>"


def _moved(name: str) -> None:
    warnings.warn(
        f"Actor.{name} moved to Actor.actor_context.{name} (the old name goes away in "
        f"the next release)",
        DeprecationWarning,
        stacklevel=3,
    )


class ActorContext:
    """``actor.actor_context``: the plumbing of one actor, apart from the API an
    actor's own code uses (feeds, ``serve``/``ask``, timers, ``post``, lifecycle).

    * :attr:`runtime`, :attr:`dispatcher`, :attr:`dispatcher_name`,
      :attr:`is_registered` — where the actor runs;
    * ``open_publish_feed`` / ``open_subscribe_feed`` / ``open_request_feed`` /
      ``open_reply_feed`` — the long form of ``publisher`` / ``subscribe`` /
      ``requestor`` / ``replier``: an OPEN feed, not yet advertised or
      subscribed, to wire (callbacks) and place yourself.
    """

    __slots__ = ("_actor",)

    def __init__(self, actor: Actor) -> None:
        self._actor = actor

    @property
    def is_registered(self) -> bool:
        """True while the actor is registered with a runtime."""
        return self._actor._ab_runtime is not None

    @property
    def runtime(self) -> ActorRuntime:
        """The runtime the actor is registered with.

        Raises :class:`NotRegisteredError` when it is not registered.
        """
        runtime = self._actor._ab_runtime
        if runtime is None:
            raise NotRegisteredError(
                f"actor {self._actor.name!r} is not registered with a runtime; "
                f"call runtime.register(actor) first"
            )
        return runtime

    @property
    def dispatcher(self) -> Dispatcher:
        """The dispatcher the actor is pinned to (raises :class:`NotRegisteredError`)."""
        return self._actor._mailbox_or_raise("use its dispatcher").dispatcher

    @property
    def dispatcher_name(self) -> str | None:
        """The name of the actor's dispatcher, ``None`` when not registered."""
        mailbox = self._actor._ab_mailbox
        return mailbox.dispatcher.name if mailbox is not None else None

    @property
    def mailbox(self) -> Mailbox | None:
        """The actor's mailbox (its depth and counters), ``None`` when not registered."""
        return self._actor._ab_mailbox

    def open_publish_feed(
        self,
        message_class: type[N],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        *,
        discoverable: bool = True,
    ) -> PublishFeed[N]:
        """Open (not yet advertise) a publish feed for ``message_class:subject``
        (``discoverable=False``: discovery never lists it)."""
        return self._actor._open_publish_feed(
            message_class, subject, scope, discoverable=discoverable
        )

    def open_subscribe_feed(
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
        return self._actor._open_subscribe_feed(
            message_class, subject, scope, condition, queue=queue, discoverable=discoverable
        )

    def open_request_feed(
        self,
        message_class: type[Q],
        subject: str,
        scope: Scope = Scope.LOCAL_AND_REMOTE,
        *,
        discoverable: bool = True,
    ) -> RequestFeed[Q]:
        """Open (not yet subscribe) a request feed (``discoverable=False``:
        discovery never lists it)."""
        return self._actor._open_request_feed(
            message_class, subject, scope, discoverable=discoverable
        )

    def open_reply_feed(
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
        return self._actor._open_reply_feed(
            message_class, subject, scope, condition, discoverable=discoverable
        )

    def __repr__(self) -> str:
        return f"<ActorContext of {self._actor!r}>"
