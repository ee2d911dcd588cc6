"""The network's I/O threads: asyncio event loops that run links and services.

An :class:`IOThread` is what the configuration calls a *selector*
(``actorbus.net.selectors``, :class:`~actorbus.config.schema.SelectorConfig`):
a thread named ``actorbus-net-<name>`` running one asyncio event loop (uvloop
when importable).  Every service and link is pinned to one I/O thread for its
whole life and runs only there.  The I/O threads never run actor code: a link
hands what arrives to the router, which enqueues into mailboxes.  One
configured with ``dispatcher`` starts no thread: it runs on that asyncio
dispatcher's loop, so the dispatcher's actors and its links share one thread and
a message crosses none between socket and actor (the dispatcher owns the loop
and stops it; the node only closes its links and services there).

Polling
-------
An idle event loop blocks in epoll, and waking a sleeping CPU costs each
message that arrives then.  An I/O thread whose ``type`` is a spinning kind
keeps its loop polling instead: a :class:`_Poller` callback reschedules itself
with ``call_soon``, and a loop with a ready callback polls with timeout 0, so
arriving bytes are seen on the next iteration without the thread ever going to
sleep.

* ``spinning`` polls for as long as the I/O thread runs.
* ``spin+park`` polls until ``spin_limit`` polls in a row found nothing
  received, then reschedules with ``call_later(park time)``: the loop blocks in
  epoll for at most that long and still wakes at once on I/O.  The park time is
  ``park_time_ns`` rounded up to whole milliseconds (at least 1 ms), because an
  event loop's poll timeout counts milliseconds.  A read marks activity; the
  poller sees it at its next poll (a parked one: at most the park time later)
  and spins again.
* ``spin+yield`` polls and, past ``spin_limit`` idle polls, calls
  ``os.sched_yield()`` on each poll (which releases the GIL meanwhile).

"Activity" is a link of the I/O thread having received bytes:
``_Connection.buffer_updated`` sets :attr:`IOThread.active` (one attribute store,
also on a blocking loop, where nobody reads it) and the poller clears it.  One
loop has one poller: I/O threads sharing an asyncio dispatcher's loop must have
the same ``SelectorConfig.polling`` (kind, and the limit and park time their
kind uses), else start fails with a :class:`~actorbus.errors.ConfigError` (the
properties loader refuses it with file, line and key).  They share the poller
and its counters (:meth:`IOThread.stats`: polls that spun, parked, yielded).
Stopping clears the poller's ``running`` flag from any thread: its next poll
does not reschedule, and a stopped loop exits ``run_forever`` whatever is
ready, so the poller never keeps a loop alive; a parked poller's pending timer
is dropped when the loop closes.

The GIL: a polling loop takes and drops the GIL on every iteration, and a
thread that drops it and takes it straight back nearly always wins it again,
so another Python thread of the process (a threaded dispatcher's worker, an
actor on another asyncio loop, the timer thread) waits for it up to the switch
interval at a time: the median round trip of actors on other threads drops,
their tail grows many times over.  Actors on the polled loop itself gain
without that cost.  So polling pays off only when the actors run on the loop
it polls (an I/O thread sharing their asyncio dispatcher's loop, the latency
configuration); it costs a core per polling loop (all of it while spinning);
and the node logs a warning at start when some dispatcher of the bus runs on
another thread (docs/links.md, "Polling selectors", has the figures).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._log import logger
from ..config.schema import POLLING_KINDS, DispatcherKind, SelectorConfig
from ..errors import UsageError

if TYPE_CHECKING:
    from ..actors.asyncio_dispatcher import AsyncioDispatcher

#: An empty poll's release of the GIL: ``os.sched_yield()`` lets whichever thread
#: waits for the interpreter run (a poll that kept it would make every other
#: Python thread wait up to the switch interval).
_release_gil: Callable[[], object] = getattr(os, "sched_yield", None) or functools.partial(
    time.sleep, 0
)

__all__ = ["IOThread", "IOThreadStats", "log_polling", "park_delay"]

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def park_delay(park_time_ns: int) -> float:
    """The delay, in seconds, a parked spin+park poller asks ``call_later`` for:
    ``park_time_ns`` rounded up to whole milliseconds, at least 1 ms.  An event
    loop's poll timeout counts milliseconds (uvloop runs a ``call_later`` under
    0.5 ms as ``call_soon``, which would never park)."""
    return max(1, math.ceil(park_time_ns / 1_000_000)) / 1000


@dataclass(frozen=True, slots=True)
class IOThreadStats:
    """How an I/O thread's event loop has been polling (totals since it started).

    The counters are the loop's: I/O threads sharing one dispatcher's loop share
    one poller and report the same numbers.  All zero on a blocking one.
    ``name`` and ``kind`` are those of its ``SelectorConfig``."""

    name: str
    kind: DispatcherKind
    #: the asyncio dispatcher whose loop the I/O thread shares (None: its own thread)
    dispatcher: str | None
    #: polls after which the loop polled again at once (``call_soon``: no sleep)
    spins: int = 0
    #: (spin+park) polls after which the loop could block in epoll up to the park time
    parks: int = 0
    #: (spin+yield) polls that gave the CPU away (``os.sched_yield``) and polled again
    yields: int = 0
    #: (spin+park) parked now: ``spin_limit`` polls in a row found nothing received
    parked: bool = False


class _Poller:
    """(loop thread) Keeps one event loop polling instead of blocking in epoll:
    a callback that reschedules itself with ``call_soon`` makes the loop poll
    with timeout 0 on every iteration (module docstring, "Polling").

    ``selectors`` are the I/O threads on the loop; a link of theirs sets
    ``IOThread.active`` when it reads, which is what "activity" means here."""

    def __init__(self, loop: asyncio.AbstractEventLoop, config: SelectorConfig) -> None:
        self.spin_limit = config.spin_limit
        self.park_delay = park_delay(config.park_time_ns)
        self.selectors: tuple[IOThread, ...] = ()
        self.spins = 0
        self.parks = 0
        self.yields = 0
        #: consecutive polls that found nothing received
        self.idle = 0
        self.parked = False
        #: cleared (from any thread) to stop: the next poll does not reschedule
        self.running = False
        self._call_soon = loop.call_soon
        self._call_later = loop.call_later
        polls: dict[DispatcherKind, Callable[[], None]] = {
            DispatcherKind.SPINNING: self._spin,
            DispatcherKind.SPIN_PARK: self._spin_park,
            DispatcherKind.SPIN_YIELD: self._spin_yield,
        }
        self._poll = polls[config.kind]

    def start(self) -> None:
        """(loop thread) Begin polling."""
        if not self.running:
            self.running = True
            self._call_soon(self._poll)

    def stop(self) -> None:
        """(any thread) Stop polling: the loop blocks in epoll again when idle.  A
        parked poller's timer runs once more (at most the park time later) and
        ends; a closed loop drops it."""
        self.running = False

    def _active(self) -> bool:
        """A link on the loop received bytes since the last poll (clears the marks)."""
        active = False
        for selector in self.selectors:
            if selector.active:
                selector.active = False
                active = True
        return active

    def _spin(self) -> None:
        if self.running:
            self.spins += 1
            self._call_soon(self._spin)

    def _spin_park(self) -> None:
        if not self.running:
            return
        if self._active():
            self.idle = 0
        elif self.idle < self.spin_limit:
            self.idle += 1
        else:
            self.parks += 1
            self.parked = True
            self._call_later(self.park_delay, self._spin_park)
            return
        self.parked = False
        self.spins += 1
        self._call_soon(self._spin_park)

    def _spin_yield(self) -> None:
        if not self.running:
            return
        if self._active():
            self.idle = 0
        elif self.idle < self.spin_limit:
            self.idle += 1
        else:
            self.yields += 1
            _release_gil()  # sched_yield(): releases the GIL while it yields
            self._call_soon(self._spin_yield)
            return
        self.spins += 1
        self._call_soon(self._spin_yield)


class IOThread:
    """One network I/O thread running an asyncio event loop, or the loop of an
    asyncio dispatcher that it shares (``SelectorConfig.dispatcher``).  The
    configuration calls it a *selector*; ``name`` and ``config`` are its
    ``SelectorConfig``'s.

    ``config.kind`` says how the loop waits for I/O (module docstring,
    "Polling"); :meth:`stats` shows it working."""

    def __init__(
        self,
        name: str,
        dispatcher: AsyncioDispatcher | None = None,
        config: SelectorConfig | None = None,
    ) -> None:
        self.name = name
        #: the asyncio dispatcher whose loop this I/O thread runs on (None: its own thread)
        self.dispatcher = dispatcher
        self.config = config if config is not None else SelectorConfig(name)
        #: set by a link of this I/O thread when it reads (``_Connection.buffer_updated``),
        #: cleared by the poller: the "activity" that keeps a spin+park loop spinning
        self.active = False
        #: what keeps the loop polling (None: it blocks in epoll when idle); shared
        #: by the I/O threads on one dispatcher's loop
        self.poller: _Poller | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ident: int | None = None
        self._thread: threading.Thread | None = None
        if dispatcher is None:
            self._thread = threading.Thread(
                target=self._run, name=f"actorbus-net-{name}", daemon=True
            )

    def __repr__(self) -> str:
        on = f" on dispatcher {self.dispatcher.name!r}" if self.dispatcher is not None else ""
        return f"<IOThread {self.name!r} {self.config.kind.value}{on}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the I/O thread has not started"
        return self._loop

    @property
    def ident(self) -> int | None:
        """The thread id of the loop's thread, once started."""
        return self._ident

    @property
    def polls(self) -> bool:
        """True when the loop polls instead of blocking in epoll (a spinning kind)."""
        return self.config.kind in POLLING_KINDS

    def start(self, poller: _Poller | None = None) -> None:
        """Start the loop's thread, or join the dispatcher's loop.  An I/O thread on
        a loop that already has a poller (another one of the same dispatcher)
        passes it as ``poller``."""
        if self.dispatcher is not None:
            loop = self.dispatcher.loop
            if loop is None or not self.dispatcher.is_running:
                raise UsageError(
                    f"selector {self.name!r}: dispatcher {self.dispatcher.name!r} is not "
                    "running, so there is no event loop to share; start the bus before its "
                    "network"
                )
            self._loop = loop
            self._ident = self.dispatcher.loop_thread_ident
            if poller is None and self.polls:
                poller = _Poller(loop, self.config)
            if poller is not None:
                self.poller = poller
                poller.selectors += (self,)
                self.run(poller.start)
            return
        assert self._thread is not None
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        loop = _new_loop()
        self._loop = loop
        self._ident = threading.get_ident()
        asyncio.set_event_loop(loop)
        if self.polls:
            poller = self.poller = _Poller(loop, self.config)
            poller.selectors = (self,)
            poller.start()
        loop.call_soon(self._ready.set)
        try:
            loop.run_forever()
        finally:
            if self.poller is not None:
                self.poller.stop()
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def stats(self) -> IOThreadStats:
        """The poller's counters (any thread; see :class:`IOThreadStats`)."""
        poller = self.poller
        dispatcher = self.dispatcher.name if self.dispatcher is not None else None
        if poller is None:
            return IOThreadStats(self.name, self.config.kind, dispatcher)
        return IOThreadStats(
            self.name,
            self.config.kind,
            dispatcher,
            spins=poller.spins,
            parks=poller.parks,
            yields=poller.yields,
            parked=poller.parked and poller.running,
        )

    def on_loop_thread(self) -> bool:
        """True when called from this I/O thread's own thread."""
        return threading.get_ident() == self._ident

    def call(self, fn: Callable[..., object], *args: Any) -> bool:
        """Run ``fn(*args)`` on the loop soon; False when the loop is closed."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            return False
        return True

    def run(self, fn: Callable[..., T], *args: Any, timeout: float = 10.0) -> T:
        """Run ``fn(*args)`` on the loop and return its result (or raise its error)."""
        if self.on_loop_thread():
            return fn(*args)
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the caller, who re-raises it
                future.set_exception(exc)

        if not self.call(job):
            raise UsageError(f"selector {self.name!r} is stopped; the node's network is closed")
        return future.result(timeout)

    def run_coroutine(self, coro: Any, timeout: float) -> None:
        """Run a coroutine on the loop and wait for it, at most ``timeout`` seconds.
        Raises RuntimeError (and closes ``coro``, which never runs) when the loop is
        closed."""
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:
            coro.close()
            raise
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()

    def stop(self, timeout: float) -> None:
        """Stop polling, stop the loop and join the thread (the loop is closed by
        the thread).  An I/O thread sharing a dispatcher's loop stops its poller
        and leaves the loop to the dispatcher."""
        if self.poller is not None:
            self.poller.stop()
        if self._thread is not None and self._thread.is_alive():
            self.call(self.loop.stop)
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.error(
                    "selector {}: its thread did not stop within {:g} s", self.name, timeout
                )


def log_polling(selector: IOThread, dispatchers: Iterable[str]) -> None:
    """Say how a polling I/O thread polls, and warn when Python threads other
    than its loop's (the ``dispatchers``' but the one it shares) will wait for
    the GIL it keeps taking."""
    c = selector.config
    where = (
        f"on the loop of dispatcher {c.dispatcher!r}"
        if c.dispatcher is not None
        else f"on its own thread actorbus-net-{c.name}"
    )
    parks = ""
    if c.kind is DispatcherKind.SPIN_PARK:
        parks = f"; parked, it polls every {park_delay(c.park_time_ns) * 1000:g} ms"
    logger.info("selector {}: {} {}{}", c.name, c.polling, where, parks)
    # every dispatcher but the one whose loop the selector polls runs other threads
    others = sorted(n for n in dispatchers if n != c.dispatcher)
    if not others:
        return
    if c.dispatcher is None:
        what = "on its own thread, while actors run on other threads"
        fix = (
            f"run the actors on the selector's loop (an asyncio dispatcher named in "
            f"net.selector.{c.name}.dispatcher)"
        )
    else:
        what = (
            f"on the loop of dispatcher {c.dispatcher!r}, while the actors of other "
            "dispatchers run on their own threads"
        )
        fix = f"pin those actors to dispatcher {c.dispatcher!r}"
    logger.warning(
        "selector {} polls ({}) {} (dispatchers {}): a polling loop takes the GIL on "
        "every poll, so those threads and the timer thread wait for it up to the "
        "switch interval ({:g} ms) at a time (their request/reply tail grows many "
        "times over); {} or leave the selector's type blocking "
        "(docs/links.md, Polling selectors)",
        c.name,
        c.kind.value,
        what,
        ", ".join(map(repr, others)),
        sys.getswitchinterval() * 1000,
        fix,
    )
