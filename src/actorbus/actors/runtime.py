"""The actor runtime: dispatchers, the timer thread, the registry and actor lifecycle.

Theory of operation
-------------------
An :class:`ActorRuntime` is built from a :class:`~actorbus.config.BusConfig`.
It makes and starts every configured dispatcher and the single timer thread at
once.  ``register`` pins an actor to a dispatcher (by argument, else by its
class as configured in ``DispatcherConfig.classes``, nearest base class in MRO
order first, else the default dispatcher) and gives it a mailbox; it runs
nothing.

Starting and stopping are tasks too: ``startup(actors)`` posts one lifecycle
task per actor into its own mailbox and returns a :class:`Completion` that
finishes when all of them ran.  Because the mailbox is FIFO, ``startup()``
completes before any task posted after the call, and a ``shutdown`` posted
after a pending ``startup`` runs after it.  The started flag is only ever
changed by these tasks, on the actor's own dispatcher, so it needs no lock.

``close()`` stops every registered actor (running its ``shutdown``), then the
timer thread and the dispatchers, joins their threads and closes the asyncio
loops.  Nothing survives it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any

from actorbus._log import logger, report
from actorbus._signals import stop_with, take_fatal
from actorbus.actors._context import bus_runtimes
from actorbus.actors.actor import Actor
from actorbus.actors.dispatcher import Dispatcher, DispatcherStats, make_dispatcher
from actorbus.actors.errors import NotRegisteredError, RuntimeClosedError, UnknownDispatcherError
from actorbus.actors.mailbox import Mailbox, TaskWatcher
from actorbus.actors.timers import TimerService
from actorbus.bus.router import Router
from actorbus.config.schema import BusConfig
from actorbus.errors import ConfigError, RegistrationError, UsageError

__all__ = ["ActorRuntime", "Completion"]

_DEFAULT_CONFIG = BusConfig()


class Completion:
    """The outcome of starting or stopping a set of actors; finishes when all ran.

    Wait with :meth:`wait` (blocking, with a timeout) or ``await completion``
    from asyncio code, or get called back with :meth:`add_done_callback`.
    """

    def __init__(self, action: str, actors: Iterable[tuple[Actor, Dispatcher]]) -> None:
        #: ``"startup"`` or ``"shutdown"``.
        self.action = action
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Actor, Dispatcher]] = {id(a): (a, d) for a, d in actors}
        self._total = len(self._pending)
        self._errors: list[BaseException] = []
        self._event = threading.Event()
        self._callbacks: list[Callable[[Completion], object]] = []
        if not self._pending:
            self._event.set()

    def done(self) -> bool:
        """True when every actor's task has run (successfully or not)."""
        return self._event.is_set()

    @property
    def pending(self) -> tuple[str, ...]:
        """Names of the actors whose task has not run yet."""
        with self._lock:
            return tuple(a.name for a, _ in self._pending.values())

    @property
    def errors(self) -> tuple[BaseException, ...]:
        """The exceptions raised so far, in the order they happened."""
        with self._lock:
            return tuple(self._errors)

    def wait(self, timeout: float | None = None) -> None:
        """Block until done; then raise the failure, if any.

        One failed actor: its exception is raised (with a note naming the
        actor).  Several: an :class:`ExceptionGroup` of them.  Not done within
        ``timeout`` seconds: :class:`TimeoutError` naming the actors still
        pending.  Waiting on a single-threaded dispatcher's own thread for one
        of its actors would deadlock, and raises :class:`UsageError` instead.
        """
        if not self._event.is_set():
            self._check_deadlock()
            if not self._event.wait(timeout):
                with self._lock:
                    pending = [
                        f"{a.name!r} (dispatcher {d.name!r})" for a, d in self._pending.values()
                    ]
                raise TimeoutError(
                    f"{self.action} of {len(pending)} of {self._total} actors not finished "
                    f"after {timeout} s: {', '.join(pending)}; their dispatcher may be busy or "
                    f"blocked in a task (see dispatcher.stats()); wait longer or find the blocker"
                )
        self._raise_errors()

    def exception(self) -> BaseException | None:
        """The failure :meth:`wait` would raise (``None`` if none, or not done yet)."""
        with self._lock:
            errors = list(self._errors)
        if not errors:
            return None
        if len(errors) == 1:
            return errors[0]
        return BaseExceptionGroup(f"{self.action} failed for {len(errors)} actors", errors)

    def add_done_callback(self, fn: Callable[[Completion], object]) -> None:
        """Call ``fn(self)`` when done: at once if done already, else on the
        thread that finishes the last actor (a dispatcher thread: keep it short)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def __await__(self) -> Generator[Any, None, None]:
        if not self._event.is_set():
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()

            def wake(_: Completion) -> None:
                try:
                    loop.call_soon_threadsafe(_resolve, future)
                except RuntimeError:  # the awaiting loop is closed; nobody to wake
                    pass

            self.add_done_callback(wake)
            yield from future.__await__()
        self._raise_errors()

    def _raise_errors(self) -> None:
        error = self.exception()
        if error is not None:
            raise error

    def _check_deadlock(self) -> None:
        with self._lock:
            dispatchers = {id(d): d for _, d in self._pending.values()}
        for d in dispatchers.values():
            if d.blocking_here_would_deadlock():
                raise UsageError(
                    f"Completion.wait() called on the only thread of dispatcher {d.name!r}, "
                    f"which must run the pending {self.action} itself: this would deadlock. "
                    f"Use add_done_callback() (or await it on an asyncio dispatcher) instead"
                )

    def _finish(self, actor: Actor, error: BaseException | None = None) -> None:
        with self._lock:
            if self._pending.pop(id(actor), None) is None:
                return
            if error is not None:
                self._errors.append(error)
            if self._pending:
                return
            callbacks, self._callbacks = self._callbacks, []
            self._event.set()
        for fn in callbacks:
            try:
                fn(self)
            except Exception as exc:
                logger.opt(exception=exc).error(
                    "a done-callback of {} raised {}: {}", self, type(exc).__name__, exc
                )

    def __repr__(self) -> str:
        with self._lock:
            left = len(self._pending)
        return f"<Completion {self.action} {self._total - left}/{self._total} done>"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ActorRuntime:
    """Dispatchers + timer thread + actor registry, built from a :class:`BusConfig`.

    ``ActorRuntime()`` is the default: one blocking dispatcher named
    ``default`` with one thread.  Use it as a context manager, or call
    :meth:`close` when done.  ``owner`` is the object that owns the runtime
    (the ``Bus``), available as :attr:`owner`.
    """

    def __init__(
        self,
        config: BusConfig = _DEFAULT_CONFIG,
        *,
        owner: object | None = None,
        router: Router | None = None,
        timer_clock: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        #: the object that owns this runtime (the Bus), or None.
        self.owner = owner
        #: the bus's router, which the actors' feeds join; None: a runtime without
        #: a bus, whose actors cannot open feeds
        self.router = router
        self._lock = threading.RLock()
        self._close_lock = threading.Lock()
        self._closing = False
        self._closed = False
        self._actors: dict[int, Actor] = {}
        self._class_map, self._default_name = _class_map(config)
        self._class_cache: weakref.WeakKeyDictionary[type, str] = weakref.WeakKeyDictionary()
        dispatchers: dict[str, Dispatcher] = {}
        #: ``timer_clock`` (monotonic ns): timers run on it, fired by ``timers.fire_due()``
        self._timers = TimerService(clock=timer_clock)
        #: BaseExceptions (not Exceptions) raised by actor code: they stop the node
        self._fatal: list[BaseException] = []
        try:
            for cfg in config.dispatchers:
                d = make_dispatcher(cfg)
                d.on_fatal = self._stop_with
                dispatchers[cfg.name] = d
                d.start()
            self._timers.start()
        except BaseException:
            for d in dispatchers.values():
                d.stop(1.0)
            self._timers.stop(1.0)
            raise
        self._dispatchers = dispatchers
        self._dispatchers_view: Mapping[str, Dispatcher] = MappingProxyType(dispatchers)
        if router is not None:
            bus_runtimes.add(self)

    def _stop_with(self, exc: BaseException) -> None:
        """(a dispatcher thread) Actor code raised ``exc``, a BaseException that is
        not an Exception: stop the node and raise it in the thread waiting for it."""
        self._fatal.append(exc)
        stop_with(exc)

    # ------------------------------------------------------------------- lookups

    @property
    def dispatchers(self) -> Mapping[str, Dispatcher]:
        """Every dispatcher by name (read-only)."""
        return self._dispatchers_view

    @property
    def default_dispatcher(self) -> Dispatcher:
        """The dispatcher actors get when nothing else pins them."""
        return self._dispatchers[self._default_name]

    @property
    def timers(self) -> TimerService:
        """The runtime's timer service (one thread)."""
        return self._timers

    @property
    def actors(self) -> tuple[Actor, ...]:
        """The registered actors, in registration order."""
        with self._lock:
            return tuple(self._actors.values())

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` has begun."""
        return self._closing

    def dispatcher(self, name: str) -> Dispatcher:
        """The dispatcher called ``name``; :class:`UnknownDispatcherError` lists the known ones."""
        d = self._dispatchers.get(name)
        if d is None:
            raise UnknownDispatcherError(
                f"unknown dispatcher {name!r}; known dispatchers: {self._known()}"
            )
        return d

    def stats(self) -> dict[str, DispatcherStats]:
        """A snapshot of every dispatcher's counters, by name."""
        return {name: d.stats() for name, d in self._dispatchers.items()}

    def _known(self) -> str:
        return ", ".join(repr(n) for n in self._dispatchers)

    # -------------------------------------------------------------- registration

    def register(
        self,
        actor: Actor,
        dispatcher: str | None = None,
        startup: Callable[[], object] | None = None,
        shutdown: Callable[[], object] | None = None,
    ) -> None:
        """Pin ``actor`` to a dispatcher and give it a mailbox.  Runs nothing.

        The dispatcher is ``dispatcher`` if given, else the one whose
        ``classes`` lists the actor's class or its nearest base, else the
        default.  ``startup``/``shutdown`` callables, when given, run instead
        of the actor's methods.  Raises :class:`RegistrationError` if the
        actor is registered already, :class:`UnknownDispatcherError` for an
        unknown dispatcher name, :class:`RuntimeClosedError` after close.
        """
        _check_actor(actor, "register")
        for what, fn in (("startup", startup), ("shutdown", shutdown)):
            if fn is not None and not callable(fn):
                raise RegistrationError(
                    f"register(actor {actor.name!r}): {what}={fn!r} is not callable; "
                    f"pass a function taking no arguments, or None to use the actor's method"
                )
        with self._lock:
            self._check_open(f"register actor {actor.name!r}")
            self._register_locked(actor, dispatcher, startup, shutdown)

    def ensure_registered(self, actor: Actor) -> None:
        """Register ``actor`` with defaults unless it is registered here already."""
        _check_actor(actor, "ensure_registered")
        with self._lock:
            if actor._ab_runtime is self:
                return
            self._check_open(f"register actor {actor.name!r}")
            self._register_locked(actor, None, None, None)

    def watch(self, actor: Actor, watcher: TaskWatcher) -> None:
        """Run every task of registered, not yet started ``actor`` through
        ``watcher`` (:meth:`Mailbox.watch`): how an actor is recorded.  Raises
        NotRegisteredError if it is not registered here, UsageError if it was
        started or is watched already."""
        _check_actor(actor, "watch")
        with self._lock:
            mailbox = actor._ab_mailbox
            if actor._ab_runtime is not self or mailbox is None:
                raise NotRegisteredError(
                    f"actor {actor.name!r} is not registered with this runtime; "
                    f"register it first (bus.register(actor)), then record it"
                )
            if actor._ab_started:
                raise UsageError(
                    f"actor {actor.name!r} is started; a recording must begin before its "
                    f"startup (record it after register() and before startup())"
                )
            mailbox.watch(watcher)

    def unregister(self, actor: Actor) -> None:
        """Forget a stopped actor: its mailbox is detached and its timers cancelled.

        Tasks already in its mailbox still run.  Raises
        :class:`NotRegisteredError` if it is not registered here, and
        :class:`RegistrationError` if it is started (stop it first).
        """
        _check_actor(actor, "unregister")
        with self._lock:
            if actor._ab_runtime is not self:
                raise NotRegisteredError(
                    f"actor {actor.name!r} is not registered with this runtime; nothing to unregister"
                )
            if actor._ab_started:
                raise RegistrationError(
                    f"actor {actor.name!r} is started; stop it first "
                    f"(runtime.shutdown(actor).wait()), then unregister it"
                )
            self._detach(actor)

    def _register_locked(
        self,
        actor: Actor,
        dispatcher: str | None,
        startup: Callable[[], object] | None,
        shutdown: Callable[[], object] | None,
    ) -> None:
        name = actor.name
        if actor._ab_runtime is self:
            raise RegistrationError(
                f"actor {name!r} is already registered with this runtime on dispatcher "
                f"{actor.actor_context.dispatcher_name!r}; register each actor once "
                f"(ensure_registered() registers only if needed)"
            )
        if actor._ab_runtime is not None:
            raise RegistrationError(
                f"actor {name!r} is registered with another runtime; "
                f"unregister it there before registering it here"
            )
        d = self._choose(actor, dispatcher)
        actor._ab_mailbox = Mailbox(d, actor=actor, name=name)
        actor._ab_startup_fn = startup
        actor._ab_shutdown_fn = shutdown
        actor._ab_timers = set()
        actor._ab_runtime = self
        self._actors[id(actor)] = actor

    def _choose(self, actor: Actor, name: str | None) -> Dispatcher:
        if name is not None:
            d = self._dispatchers.get(name)
            if d is None:
                raise UnknownDispatcherError(
                    f"cannot register actor {actor.name!r} on unknown dispatcher {name!r}; "
                    f"known dispatchers: {self._known()}; pick one of them or configure "
                    f"dispatcher.{name}.*"
                )
            return d
        cls = type(actor)
        chosen = self._class_cache.get(cls)
        if chosen is None:
            chosen = self._default_name
            for klass in cls.__mro__:
                pinned = self._class_map.get(f"{klass.__module__}.{klass.__qualname__}")
                if pinned is not None:
                    chosen = pinned
                    break
            self._class_cache[cls] = chosen
        return self._dispatchers[chosen]

    def _detach(self, actor: Actor) -> None:
        timers = actor._ab_timers
        if timers:
            for handle in list(timers):
                handle.cancel()
        mailbox = actor._ab_mailbox
        if mailbox is not None:
            mailbox.detach()
        actor._ab_runtime = None
        actor._ab_mailbox = None
        actor._ab_startup_fn = None
        actor._ab_shutdown_fn = None
        actor._ab_timers = None
        self._actors.pop(id(actor), None)

    def _check_open(self, what: str) -> None:
        if self._closing:
            raise RuntimeClosedError(f"cannot {what}: the runtime is closed; make a new one")

    # ----------------------------------------------------------------- lifecycle

    def startup(self, actors: Actor | Iterable[Actor]) -> Completion:
        """Start one actor or several; unregistered ones are registered with defaults.

        Each actor's ``startup`` runs as a task on its own dispatcher.
        Starting a started actor is a no-op that succeeds.  Wait on the
        returned :class:`Completion` to learn about failures.
        """
        targets = _as_actors(actors, "startup")
        with self._lock:
            self._check_open("start actors")
            for a in targets:
                if a._ab_runtime is not self:
                    self._register_locked(a, None, None, None)
            return self._post_lifecycle("startup", targets)

    def startup_all(self) -> Completion:
        """Start every registered actor that is not started."""
        with self._lock:
            self._check_open("start actors")
            targets = [a for a in self._actors.values() if not a._ab_started]
            return self._post_lifecycle("startup", targets)

    def shutdown(self, actors: Actor | Iterable[Actor]) -> Completion:
        """Stop one actor or several (each must be registered here).

        Each actor's ``shutdown`` runs as a task on its own dispatcher, after
        the tasks already queued.  Stopping a stopped actor is a no-op.
        """
        targets = _as_actors(actors, "shutdown")
        with self._lock:
            for a in targets:
                if a._ab_runtime is not self:
                    raise NotRegisteredError(
                        f"cannot shut down actor {a.name!r}: it is not registered with this runtime"
                    )
            return self._post_lifecycle("shutdown", targets)

    def shutdown_all(self) -> Completion:
        """Stop every registered actor (the stopped ones are no-ops)."""
        with self._lock:
            return self._post_lifecycle("shutdown", list(self._actors.values()))

    def _post_lifecycle(self, action: str, targets: list[Actor]) -> Completion:
        # Called with the lock held, so every target is registered right now.
        boxes: list[tuple[Actor, Mailbox]] = []
        for a in targets:
            mailbox = a._ab_mailbox
            assert mailbox is not None
            boxes.append((a, mailbox))
        completion = Completion(action, ((a, m.dispatcher) for a, m in boxes))
        task = self._startup_task if action == "startup" else self._shutdown_task
        for a, mailbox in boxes:
            mailbox.post(task, a, completion)
        return completion

    def _startup_task(self, actor: Actor, completion: Completion) -> object:
        if actor._ab_runtime is not self:
            completion._finish(
                actor,
                NotRegisteredError(
                    f"actor {actor.name!r} was unregistered before its startup ran; "
                    f"register it again and start it"
                ),
            )
            return None
        if actor._ab_started:
            completion._finish(actor)
            return None
        hook = actor._ab_startup_fn or actor.startup
        try:
            result = hook()
        except Exception as exc:
            self._lifecycle_failed(actor, completion, "startup", exc)
            return None
        except BaseException as exc:  # not swallowed: the dispatcher stops the node
            completion._finish(actor, exc)
            raise
        if isinstance(result, Coroutine):
            return self._await_lifecycle(actor, completion, "startup", result)
        actor._ab_started = True
        completion._finish(actor)
        return None

    def _shutdown_task(self, actor: Actor, completion: Completion) -> object:
        if actor._ab_runtime is not self or not actor._ab_started:
            completion._finish(actor)
            return None
        hook = actor._ab_shutdown_fn or actor.shutdown
        try:
            result = hook()
        except Exception as exc:
            self._stopped(actor)
            self._lifecycle_failed(actor, completion, "shutdown", exc)
            return None
        except BaseException as exc:  # not swallowed: the dispatcher stops the node
            self._stopped(actor)
            completion._finish(actor, exc)
            raise
        if isinstance(result, Coroutine):
            return self._await_lifecycle(actor, completion, "shutdown", result)
        self._stopped(actor)
        completion._finish(actor)
        return None

    def _await_lifecycle(
        self,
        actor: Actor,
        completion: Completion,
        action: str,
        coro: Coroutine[Any, Any, Any],
    ) -> Coroutine[Any, Any, None] | None:
        mailbox = actor._ab_mailbox
        if mailbox is None or not mailbox.dispatcher.is_async:
            coro.close()
            if action == "shutdown":
                self._stopped(actor)
            where = actor.actor_context.dispatcher_name
            self._lifecycle_failed(
                actor,
                completion,
                action,
                UsageError(
                    f"{action}() of actor {actor.name!r} is async def, but its dispatcher "
                    f"{where!r} is not an asyncio dispatcher; pin the actor to a dispatcher "
                    f"with runQueueType=asyncio, or make {action}() synchronous"
                ),
            )
            return None
        return self._finish_async(actor, completion, action, coro)

    async def _finish_async(
        self,
        actor: Actor,
        completion: Completion,
        action: str,
        coro: Coroutine[Any, Any, Any],
    ) -> None:
        try:
            await coro
        except Exception as exc:
            if action == "shutdown":
                self._stopped(actor)
            self._lifecycle_failed(actor, completion, action, exc)
            return
        except BaseException as exc:  # cancelled, or not swallowed (see above)
            if action == "shutdown":
                self._stopped(actor)
            completion._finish(actor, exc)
            raise
        if action == "startup":
            actor._ab_started = True
        else:
            self._stopped(actor)
        completion._finish(actor)

    @staticmethod
    def _stopped(actor: Actor) -> None:
        actor._ab_started = False
        timers = actor._ab_timers
        if timers:
            for handle in list(timers):
                handle.cancel()

    @staticmethod
    def _lifecycle_failed(
        actor: Actor, completion: Completion, action: str, exc: BaseException
    ) -> None:
        outcome = "the actor is not started" if action == "startup" else "the actor is stopped"
        exc.add_note(f"raised by {action}() of actor {actor.name!r}")
        report(
            "ERROR",
            f"actor {actor.name!r}: {action}() raised {type(exc).__name__}: {exc}; {outcome}",
            exception=exc,
            actor=actor.name,
        )
        completion._finish(actor, exc)

    # --------------------------------------------------------------------- close

    def owns_current_thread(self) -> bool:
        """True on one of the runtime's dispatcher threads or its timer thread."""
        return self._timers.owns_current_thread() or any(
            d.owns_current_thread() for d in self._dispatchers.values()
        )

    def close(self, timeout: float = 5.0) -> None:
        """Stop every actor, then the timer thread and the dispatchers; join them all.

        Actors' ``shutdown`` runs first (errors are logged, not raised).
        Calling it again does nothing.  Raises :class:`UsageError` when called
        from one of the runtime's own threads (it would have to join itself),
        and :class:`TimeoutError` naming the threads that did not stop within
        ``timeout`` seconds (a task is blocking them).  When actor code raised
        a ``KeyboardInterrupt`` or ``SystemExit`` that no
        :func:`~actorbus.wait_for_stop` raised yet, it is raised here, once
        everything is closed.
        """
        if self.owns_current_thread():
            raise UsageError(
                f"close() called on the runtime's own thread "
                f"{threading.current_thread().name!r}; it cannot join itself. Call close() "
                f"from another thread (e.g. signal the main thread from the actor)"
            )
        with self._close_lock:
            if self._closed:
                return
            deadline = time.monotonic() + timeout
            bus_runtimes.discard(self)
            with self._lock:
                self._closing = True
                actors = list(self._actors.values())
                completion = self._post_lifecycle("shutdown", actors)
            try:
                completion.wait(timeout)
            except TimeoutError as exc:
                logger.warning("close(): {}", exc)
            except BaseException as exc:
                logger.warning("close(): actor shutdown failed: {}", exc)
            alive: list[str] = []
            if not self._timers.stop(max(0.0, deadline - time.monotonic())):
                alive.append(self._timers.thread_name)
            for d in self._dispatchers.values():
                alive.extend(d.stop(max(0.0, deadline - time.monotonic())))
            with self._lock:
                for a in actors:
                    if a._ab_runtime is self:
                        a._ab_started = False
                        self._detach(a)
            self._closed = True
        fatal = take_fatal(self._fatal)
        if fatal is not None:
            raise fatal
        if alive:
            raise TimeoutError(
                f"close(): threads still running after {timeout} s: {', '.join(alive)}; "
                f"a task is blocking them (a callback that never returns)"
            )

    def __enter__(self) -> ActorRuntime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closing else "open"
        return (
            f"<ActorRuntime {state} dispatchers={list(self._dispatchers)} "
            f"actors={len(self._actors)}>"
        )


def _check_actor(actor: object, what: str) -> None:
    if not isinstance(actor, Actor):
        raise RegistrationError(
            f"{what}() expects an Actor, got {type(actor).__qualname__} {actor!r}; "
            f"make the class a subclass of actorbus.Actor"
        )


def _as_actors(actors: Actor | Iterable[Actor], what: str) -> list[Actor]:
    if isinstance(actors, Actor):
        return [actors]
    result: list[Actor] = []
    seen: set[int] = set()
    for a in actors:
        _check_actor(a, what)
        if id(a) not in seen:
            seen.add(id(a))
            result.append(a)
    return result


def _class_map(config: BusConfig) -> tuple[dict[str, str], str]:
    """(class path -> dispatcher name, default dispatcher name); validates the config."""
    if not config.dispatchers:
        raise ConfigError(
            "the configuration defines no dispatchers; define at least one "
            "(BusConfig() has a default one)",
            path=config.source,
        )
    seen: set[str] = set()
    defaults: list[str] = []
    classes: dict[str, str] = {}
    for d in config.dispatchers:
        if d.name in seen:
            raise ConfigError(
                f"dispatcher {d.name!r} is defined twice; dispatcher names must be unique",
                path=config.source,
            )
        seen.add(d.name)
        if d.is_default:
            defaults.append(d.name)
        for path in d.classes:
            other = classes.get(path)
            if other is not None:
                raise ConfigError(
                    f"class {path!r} is pinned to two dispatchers, {other!r} and {d.name!r}; "
                    f"list it under one",
                    path=config.source,
                )
            classes[path] = d.name
    if len(defaults) > 1:
        raise ConfigError(
            f"dispatchers {', '.join(map(repr, defaults))} are all marked isDefault; "
            f"mark exactly one",
            path=config.source,
        )
    return classes, config.default_dispatcher.name
