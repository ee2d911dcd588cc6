"""A node's network side: I/O threads ("selectors"), services, links, the one-link rule.

Theory of operation
-------------------
:class:`NodeNet` belongs to one :class:`~actorbus.node.Bus` (``bus.net``).  It
owns

* the **selectors**: each is a thread named ``actorbus-net-<name>`` running one
  asyncio event loop (uvloop when importable).  Every service and link is
  pinned to one selector for its whole life and runs only there.  The I/O
  threads never run actor code: a link hands what arrives to the router, which
  enqueues into mailboxes.  A selector configured with ``dispatcher`` starts no
  thread: it runs on that asyncio dispatcher's loop, so the dispatcher's actors
  and the selector's links share one thread and a message crosses none between
  socket and actor (the dispatcher owns the loop and stops it; the node only
  closes its links and services there).
* the **services** (:class:`~actorbus.net.service.Service`, listening ports)
  and **links** (:class:`~actorbus.net.link.Link`, dialled or accepted);
* the **one-link rule**: at most one link per remote node.  A link claims its
  peer's node id when the logon names it (``LogonRequested`` on the accepting
  side, ``LogonAccepted`` on the dialling side).  A second link to a node that
  already has one is refused at logon with a reason.  When two nodes dial each
  other at the same time both links may reach logon before either knows of
  the other; then, on both nodes, the link dialled by the node with the
  smaller node id (plain string order) is kept and the other is closed.  The
  accepting side of a link that is already logged on always refuses the
  newcomer, so an established link is never replaced by a later dial.

Polling selectors
-----------------
An idle event loop blocks in epoll, and on a small VM waking the sleeping vCPU
costs ~30-60 us per message.  A selector whose ``type`` is a spinning kind keeps
its loop polling instead: a :class:`_Poller` callback reschedules itself with
``call_soon``, and a loop with a ready callback polls with timeout 0, so
arriving bytes are seen on the next iteration without the thread ever going
to sleep.

* ``spinning`` polls for as long as the selector runs.
* ``spin+park`` polls until ``spin_limit`` polls in a row found nothing
  received, then reschedules with ``call_later(park time)``: the loop blocks in
  epoll for at most that long and still wakes at once on I/O.  The park time is
  ``park_time_ns`` rounded up to whole milliseconds (at least 1 ms), because an
  event loop's poll timeout counts milliseconds.  A read marks activity; the
  poller sees it at its next poll (a parked one: at most the park time later)
  and spins again.
* ``spin+yield`` polls and, past ``spin_limit`` idle polls, calls
  ``os.sched_yield()`` on each poll (which releases the GIL meanwhile).

"Activity" is a link of the selector having received bytes: ``_Session.
buffer_updated`` sets ``Selector.active`` (one attribute store, also on a
blocking selector, where nobody reads it) and the poller clears it.  One loop
has one poller: selectors sharing an asyncio dispatcher's loop must have the
same ``SelectorConfig.polling`` (kind, and the limit and park time their kind
uses), else start fails with a :class:`~actorbus.errors.ConfigError` (the
properties loader refuses it with file, line and key).  They share the poller
and its counters (:meth:`Selector.stats`: polls that spun, parked, yielded).
Stopping clears the poller's ``running`` flag from any thread: its next poll
does not reschedule, and a stopped loop exits ``run_forever`` whatever is
ready, so the poller never keeps a loop alive; a parked poller's pending timer
is dropped when the loop closes.

The GIL: a polling loop takes and drops the GIL on every iteration, and a
thread that drops it and takes it straight back nearly always wins it again,
so another Python thread of the process (a threaded dispatcher's worker, an
actor on another asyncio loop, the timer thread) waits for it up to the switch
interval (5 ms) at a time.  Measured (benchmarks/remote.py ``--gil``, 2-core
VM): actors on a blocking dispatcher whose nodes' selectors poll (on their own
threads, or on an asyncio loop that runs none of the actors) had a lower
request/reply p50 (85-122 us against 206-217 us blocking) but a p99 of
2.4-3.8 ms against ~0.43 ms (6-9x; up to 8-12 ms in other runs).  Actors on the
polled loop itself gain without that cost: spin+park on both nodes' shared
loops gave a p50 of 60-65 us against 165-191 us blocking.  So a polling
selector pays off only when the actors run on the loop it polls (a selector
sharing their asyncio dispatcher's loop, the latency configuration); it costs
a core per polling loop (all of it while spinning); and start logs a warning
when some dispatcher of the bus runs on another thread.

:meth:`NodeNet.close` logs off every link with the reason "node closing",
closes the services, stops the pollers and the loops and joins their threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import secrets
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._log import logger
from ..actors.dispatcher import AsyncioDispatcher, _release_gil
from ..config.schema import (
    POLLING_KINDS,
    ConnectionConfig,
    DispatcherKind,
    SelectorConfig,
    ServiceConfig,
)
from ..errors import ConfigError, Error, UsageError
from ._receipts import Receipts
from .link import Link, LinkSettings, _endpoint, _Session
from .service import Service

if TYPE_CHECKING:
    from ..bus.message import Notification
    from ..bus.router import Router
    from ..node import Bus

__all__ = ["DEFAULT_SELECTOR", "NodeNet", "Selector", "SelectorStats"]

#: Name of the selector made when the configuration names none.
DEFAULT_SELECTOR = "default"

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def _park_delay(park_time_ns: int) -> float:
    """The delay, in seconds, a parked spin+park poller asks ``call_later`` for:
    ``park_time_ns`` rounded up to whole milliseconds, at least 1 ms.  An event
    loop's poll timeout counts milliseconds (uvloop runs a ``call_later`` under
    0.5 ms as ``call_soon``, which would never park)."""
    return max(1, math.ceil(park_time_ns / 1_000_000)) / 1000


@dataclass(frozen=True, slots=True)
class SelectorStats:
    """How a selector's event loop has been polling (totals since it started).

    The counters are the loop's: selectors sharing one dispatcher's loop share
    one poller and report the same numbers.  All zero on a blocking selector."""

    name: str
    kind: DispatcherKind
    #: the asyncio dispatcher whose loop the selector shares (None: its own thread)
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
    with timeout 0 on every iteration (module docstring, "Polling selectors").

    ``selectors`` are the selectors on the loop; a link of theirs sets
    ``Selector.active`` when it reads, which is what "activity" means here."""

    def __init__(self, loop: asyncio.AbstractEventLoop, config: SelectorConfig) -> None:
        self.spin_limit = config.spin_limit
        self.park_delay = _park_delay(config.park_time_ns)
        self.selectors: tuple[Selector, ...] = ()
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


class Selector:
    """One network I/O thread running an asyncio event loop, or the loop of an
    asyncio dispatcher that the selector shares (``SelectorConfig.dispatcher``).

    ``config.kind`` says how the loop waits for I/O (module docstring, "Polling
    selectors"); :meth:`stats` shows it working."""

    def __init__(
        self,
        name: str,
        dispatcher: AsyncioDispatcher | None = None,
        config: SelectorConfig | None = None,
    ) -> None:
        self.name = name
        #: the asyncio dispatcher whose loop this selector runs on (None: its own thread)
        self.dispatcher = dispatcher
        self.config = config if config is not None else SelectorConfig(name)
        #: set by a link of this selector when it reads (``_Session.buffer_updated``),
        #: cleared by the poller: the "activity" that keeps a spin+park loop spinning
        self.active = False
        #: what keeps the loop polling (None: it blocks in epoll when idle); shared
        #: by the selectors on one dispatcher's loop
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
        return f"<Selector {self.name!r} {self.config.kind.value}{on}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the selector has not started"
        return self._loop

    @property
    def polls(self) -> bool:
        """True when the loop polls instead of blocking in epoll (a spinning kind)."""
        return self.config.kind in POLLING_KINDS

    def start(self, poller: _Poller | None = None) -> None:
        """Start the loop's thread, or join the dispatcher's loop.  A selector on a
        loop that already has a poller (another selector of the same dispatcher)
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

    def stats(self) -> SelectorStats:
        """The poller's counters (any thread; see :class:`SelectorStats`)."""
        poller = self.poller
        dispatcher = self.dispatcher.name if self.dispatcher is not None else None
        if poller is None:
            return SelectorStats(self.name, self.config.kind, dispatcher)
        return SelectorStats(
            self.name,
            self.config.kind,
            dispatcher,
            spins=poller.spins,
            parks=poller.parks,
            yields=poller.yields,
            parked=poller.parked and poller.running,
        )

    def on_loop_thread(self) -> bool:
        """True when called from this selector's own thread."""
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
        the thread).  A selector sharing a dispatcher's loop stops its poller and
        leaves the loop to the dispatcher."""
        if self.poller is not None:
            self.poller.stop()
        if self._thread is not None and self._thread.is_alive():
            self.call(self.loop.stop)
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.error(
                    "selector {}: its thread did not stop within {:g} s", self.name, timeout
                )


class NodeNet:
    """The network side of one bus (see the module docstring).

    Made by the bus when its configuration names services or connections, or
    on the first :meth:`Bus.listen` / :meth:`Bus.connect`."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.node_id: str = bus.node_id
        self.router: Router = bus.router
        #: This incarnation of the node, sent in LOGON / LOGON_ACCEPT: a peer
        #: that sees it change knows the node restarted (receipts start afresh).
        self.session_id: str = secrets.token_hex(8)
        #: Per peer node: data frames written and read, for RECEIPT frames.
        self.receipts = Receipts()
        #: True once close() began: no reconnects, no new links.
        self.closing = False
        self._lock = threading.Lock()
        self._selectors: dict[str, Selector] = {}
        self._default: str = DEFAULT_SELECTOR
        self._links: list[Link] = []
        self._services: list[Service] = []
        self._peers: dict[str, _Session] = {}
        #: client links that ended without retrying before they ever logged on
        self._failed: list[tuple[str, str]] = []
        #: called with (link name, reason) for each of those (CLI: stop the node)
        self._failure_listeners: list[Callable[[str, str], object]] = []
        self._started = False
        self._closed = False
        self._counter = 0

    def __repr__(self) -> str:
        return f"<NodeNet {self.node_id} links={len(self._links)} services={len(self._services)}>"

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Start the selectors, then the configured services and connections."""
        if self._started:
            return
        self._started = True
        config = self.bus.config
        try:
            self._start_selectors(config.selectors)
            for service in config.services:
                self._listen_config(service)
            for connection in config.connections:
                self._connect_config(connection)
        except BaseException:
            self.close()
            raise

    def _start_selectors(self, configs: Iterable[SelectorConfig]) -> None:
        configs = tuple(configs) or (SelectorConfig(name=DEFAULT_SELECTOR, is_default=True),)
        defaults = [c.name for c in configs if c.is_default]
        self._default = defaults[0] if defaults else configs[0].name
        first_on: dict[str, Selector] = {}  # per shared dispatcher: its first selector
        for c in configs:
            dispatcher = self._shared_dispatcher(c)
            first = first_on.get(c.dispatcher) if c.dispatcher is not None else None
            if first is not None and first.config.polling != c.polling:
                raise ConfigError(
                    f"selectors {first.name!r} and {c.name!r} share the event loop of "
                    f"dispatcher {c.dispatcher!r} but poll it differently ({first.name}: "
                    f"{first.config.polling}; {c.name}: {c.polling}); one loop polls one "
                    "way: give every selector of that dispatcher the same kind, spin_limit "
                    "and park_time_ns",
                    key=f"net.selector.{c.name}.type",
                )
            selector = Selector(c.name, dispatcher, c)
            self._selectors[c.name] = selector
            selector.start(first.poller if first is not None else None)
            if dispatcher is not None:
                dispatcher.add_stop_hook(functools.partial(self._loop_stopping, selector))
            if c.dispatcher is not None and first is None:
                first_on[c.dispatcher] = selector
            if selector.polls:
                self._log_polling(selector)

    def _log_polling(self, selector: Selector) -> None:
        """Say how a polling selector polls, and warn when Python threads other than
        its loop's will wait for the GIL it keeps taking (module docstring)."""
        c = selector.config
        where = (
            f"on the loop of dispatcher {c.dispatcher!r}"
            if c.dispatcher is not None
            else f"on its own thread actorbus-net-{c.name}"
        )
        parks = ""
        if c.kind is DispatcherKind.SPIN_PARK:
            parks = f"; parked, it polls every {_park_delay(c.park_time_ns) * 1000:g} ms"
        logger.info("selector {}: {} {}{}", c.name, c.polling, where, parks)
        # every dispatcher but the one whose loop the selector polls runs other threads
        others = sorted(n for n in self.bus.runtime.dispatchers if n != c.dispatcher)
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
            "switch interval ({:g} ms) at a time (measured: their request/reply p99 went "
            "from ~0.4 ms to 2.4-3.8 ms); {} or leave the selector's type blocking "
            "(docs/links.md, Polling selectors)",
            c.name,
            c.kind.value,
            what,
            ", ".join(map(repr, others)),
            sys.getswitchinterval() * 1000,
            fix,
        )

    def _shared_dispatcher(self, c: SelectorConfig) -> AsyncioDispatcher | None:
        """The asyncio dispatcher whose loop selector ``c`` shares, if it names one."""
        if c.dispatcher is None:
            return None
        dispatchers = self.bus.runtime.dispatchers
        dispatcher = dispatchers.get(c.dispatcher)
        if dispatcher is None:
            known = ", ".join(sorted(dispatchers))
            raise ConfigError(
                f"selector {c.name!r}: dispatcher={c.dispatcher!r} names no dispatcher; "
                f"this bus has {known}"
            )
        if not isinstance(dispatcher, AsyncioDispatcher):
            raise ConfigError(
                f"selector {c.name!r}: dispatcher {c.dispatcher!r} is a {dispatcher.kind.value} "
                "dispatcher, which has no event loop to share; name an asyncio dispatcher"
            )
        return dispatcher

    def _selector(self, name: str | None, what: str) -> Selector:
        selector = self._selectors.get(name or self._default)
        if selector is None:
            known = ", ".join(sorted(self._selectors))
            raise UsageError(
                f"{what}: there is no selector named {name!r}; this node has {known} "
                "(configure it under actorbus.net.selectors)"
            )
        return selector

    def _listen_config(self, c: ServiceConfig) -> None:
        settings = _settings_of(c)
        self.listen(
            c.port,
            c.host,
            name=c.name,
            address_filter=c.address_filter,
            settings=settings,
            service_selector=c.service_selector,
            connection_selector=c.connection_selector,
        )

    def _connect_config(self, c: ConnectionConfig) -> None:
        settings = _settings_of(c)
        self.connect(
            c.host,
            c.port,
            name=c.name,
            settings=settings,
            bind_port=c.bind_port,
            reconnect=c.reconnect,
            reconnect_delay=c.reconnect_delay_ms / 1000,
            connect_timeout=c.connect_timeout_ms / 1000,
            selector=c.selector,
        )

    # ----------------------------------------------------------- services, links

    def listen(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        name: str | None = None,
        address_filter: Iterable[str] = (),
        settings: LinkSettings | None = None,
        service_selector: str | None = None,
        connection_selector: str | None = None,
    ) -> Service:
        """Open a listening service; see :meth:`Bus.listen`."""
        self._check_open("listen()")
        if name is None:
            name = f"service-{self._next()}"
        selector = self._selector(service_selector, f"service {name!r}")
        conn_selector = self._selector(connection_selector or service_selector, f"service {name!r}")
        service = Service(
            self,
            name=name,
            host=host,
            port=port,
            address_filter=tuple(address_filter),
            settings=settings or LinkSettings(),
            selector=selector,
            connection_selector=conn_selector,
        )
        with self._lock:
            self._services.append(service)
        try:
            service._open()
        except BaseException:
            with self._lock:
                self._services.remove(service)
            raise
        return service

    def connect(
        self,
        host: str,
        port: int,
        *,
        name: str | None = None,
        settings: LinkSettings | None = None,
        bind_host: str | None = None,
        bind_port: int = 0,
        reconnect: bool = False,
        reconnect_delay: float = 5.0,
        connect_timeout: float = 10.0,
        selector: str | None = None,
    ) -> Link:
        """Dial a remote node's service; see :meth:`Bus.connect`."""
        self._check_open("connect()")
        if type(port) is not int or not 0 < port <= 65535:
            raise UsageError(f"connect({host!r}, {port!r}): expected a port from 1 to 65535")
        if type(bind_port) is not int or not 0 <= bind_port <= 65535:
            raise UsageError(f"connect(bind_port={bind_port!r}): expected a port from 0 to 65535")
        for key, seconds, zero in (
            ("reconnect_delay", reconnect_delay, ""),
            ("connect_timeout", connect_timeout, " (0: wait as long as the operating system does)"),
        ):
            if type(seconds) not in (int, float) or not 0 <= seconds < float("inf"):
                raise UsageError(
                    f"connect({key}={seconds!r}): expected a finite number of seconds >= 0{zero}"
                )
        if name is None:
            name = _endpoint(host, port)  # "[::1]:7001" for an IPv6 host
        sel = self._selector(selector, f"connection {name!r}")
        link = Link(
            self,
            sel,
            settings or LinkSettings(),
            name=name,
            initiator=True,
            host=host,
            port=port,
            bind_host=bind_host,
            bind_port=bind_port,
            reconnect=reconnect,
            reconnect_delay=float(reconnect_delay),
            connect_timeout=float(connect_timeout),
        )
        with self._lock:
            self._links.append(link)
        sel.call(link._start)
        return link

    @property
    def failed_links(self) -> tuple[tuple[str, str], ...]:
        """(name, reason) of every client link without reconnect whose dial
        failed: it is closed and will not try again."""
        with self._lock:
            return tuple(self._failed)

    def on_link_failed(self, listener: Callable[[str, str], object]) -> None:
        """Call ``listener(name, reason)`` (on the link's I/O thread) for each
        client link without reconnect whose dial fails from now on."""
        with self._lock:
            self._failure_listeners.append(listener)

    def _link_failed(self, link: Link, reason: str) -> None:
        with self._lock:
            self._failed.append((link.name, reason))
            listeners = list(self._failure_listeners)
        for listener in listeners:
            listener(link.name, reason)

    def _accepted(self, service: Service, sock: Any, host: str, port: int, address: str) -> None:
        """(service loop) A service accepted ``sock``: make its link on the
        connection selector."""
        selector = service.connection_selector
        link = Link(
            self,
            selector,
            service.settings,
            name=f"{service.name}<-{address}",
            initiator=False,
            host=host,
            port=port,
            service=service,
        )
        with self._lock:
            if self.closing:
                sock.close()
                return
            self._links.append(link)
        if selector.on_loop_thread():
            link._adopt(sock)
        elif not selector.call(link._adopt, sock):
            sock.close()

    @property
    def links(self) -> tuple[Link, ...]:
        """Every link that is not closed for good (dialled and accepted)."""
        with self._lock:
            return tuple(self._links)

    @property
    def services(self) -> tuple[Service, ...]:
        with self._lock:
            return tuple(self._services)

    def link_to(self, node_id: str) -> Link | None:
        """The link logged on (or logging on) with node ``node_id``, if any."""
        with self._lock:
            session = self._peers.get(node_id)
        return session.link if session is not None else None

    @property
    def selectors(self) -> tuple[Selector, ...]:
        """The node's selectors (network I/O threads or shared loops), once started."""
        return tuple(self._selectors.values())

    def stats(self) -> dict[str, Any]:
        """Counters of every selector, service and link, for monitoring (any thread)."""
        return {
            "node": self.node_id,
            "selectors": {s.name: s.stats() for s in self.selectors},
            "services": {s.name: s.counters for s in self.services},
            "links": {link.name: link.counters for link in self.links},
        }

    # ------------------------------------------------------ used by links/services

    def _next(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _check_open(self, what: str) -> None:
        if self.closing:
            raise UsageError(f"{what} on node {self.node_id} whose network is closed")

    def _claim(self, session: _Session, peer: str, peer_session: str = "") -> str | None:
        """Claim ``peer`` for ``session`` (the one-link rule); the refusal reason, or None.

        A logon whose session id differs from the one of the link already held
        to ``peer`` comes from a new run of that node (a restart, with its node
        id fixed by configuration): the held link is to a run that is gone
        (its end may not have noticed yet, without heartbeats maybe never), so
        the new link replaces it rather than being refused."""
        if peer == self.node_id:
            return f"node {peer!r} cannot link to itself (both ends have the same node id)"
        victim: _Session | None = None
        reason = ""
        with self._lock:
            if self.closing:
                return "the node is closing"
            old = self._peers.get(peer)
            if (
                old is not None
                and not old.ended
                and peer_session
                and old.peer_session
                and old.peer_session != peer_session
            ):
                victim = old
                reason = (
                    f"node {peer!r} restarted (new session {peer_session!r}); its new link "
                    "replaces this one"
                )
            elif old is not None and not old.ended:
                ours = session.link.initiator
                if old.link.initiator == ours or (not ours and old.logged_on):
                    return (
                        f"node {peer!r} already has a link to node {self.node_id!r}; only one "
                        "link may exist between two nodes"
                    )
                # The two nodes dialled each other: both keep the link dialled by the
                # node with the smaller id.
                winner = min(self.node_id, peer)
                reason = (
                    f"nodes {self.node_id!r} and {peer!r} dialled each other; the link "
                    f"dialled by {winner!r} is kept"
                )
                if ours != (winner == self.node_id):
                    return reason
                victim = old
            self._peers[peer] = session
        if victim is not None:
            selector = victim.link.selector
            if selector.on_loop_thread():
                victim.logoff(reason)
            else:
                selector.call(victim.logoff, reason)
        return None

    def _release(self, session: _Session) -> None:
        peer = session.peer
        if peer is None:
            return
        with self._lock:
            if self._peers.get(peer) is session:
                del self._peers[peer]

    def _forget(self, link: Link) -> None:
        with self._lock:
            if link not in self._links:
                return
            self._links.remove(link)
            if link.service is not None:
                # under the same lock, so the service's counters never miss it
                link.service._retire(link)

    def _publish(self, message: Notification) -> None:
        try:
            self.bus._publish_system(message)
        except Error as exc:  # the bus is closing under us: nobody is listening
            logger.debug("node {}: system notification not published: {}", self.node_id, exc)

    # ------------------------------------------------------------------ close

    async def _loop_stopping(self, selector: Selector) -> None:
        """(loop) The asyncio dispatcher whose loop ``selector`` shares is stopping
        (a stop hook; :meth:`close` has usually run already and this finds nothing):
        close the services and links on the loop while it still runs, so the peers
        are told (a logoff, or at least a closed socket) instead of finding out by
        heartbeat timeout, and no socket is left open on a dead loop."""
        assert selector.dispatcher is not None
        why = f"dispatcher {selector.dispatcher.name!r}, whose event loop it runs on, was stopped"
        with self._lock:
            services = [s for s in self._services if s.selector is selector]
            links = [link for link in self._links if link.selector is selector]
        for service in services:
            await service._close_on_loop(why)
        if links:
            logger.warning(
                "node {}: {} link(s) closed because {}; stop the bus (Bus.close) rather "
                "than the dispatcher to close them in order",
                self.node_id,
                len(links),
                why,
            )
            await _close_links(links, why, _STOP_HOOK_WAIT)
        if selector.poller is not None:
            selector.poller.stop()

    def close(self, timeout: float = 5.0) -> None:
        """Log off every link ("node closing"), close the services, stop the I/O
        threads.  Waits at most about ``timeout`` seconds.  Idempotent."""
        for selector in self._selectors.values():
            if selector.on_loop_thread():
                raise UsageError(
                    "Bus.close() from a network I/O thread would wait for itself; close "
                    "the bus from another thread"
                )
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.closing = True
            services = list(self._services)
            links = list(self._links)
        for service in services:
            service._close(timeout)
        by_selector: dict[Selector, list[Link]] = {}
        for link in links:
            by_selector.setdefault(link.selector, []).append(link)
        futures = []
        for selector, group in by_selector.items():
            coro = _close_links(group, "node closing", timeout)
            try:
                futures.append(asyncio.run_coroutine_threadsafe(coro, selector.loop))
            except RuntimeError:
                coro.close()
        for future in futures:
            try:
                future.result(timeout + 2 * _ABORT_WAIT)
            except concurrent.futures.TimeoutError:
                future.cancel()
        for selector in self._selectors.values():
            selector.stop(timeout)
        with self._lock:
            self._links.clear()
            self._peers.clear()


#: How long close waits for aborted sockets to report they are gone.
_ABORT_WAIT = 1.0
#: How long a stopping dispatcher's hook waits for the links on its loop to log off
#: before aborting them (the dispatcher's stop() timeout defaults to 5 s).
_STOP_HOOK_WAIT = 1.0


async def _close_links(links: list[Link], reason: str, timeout: float) -> None:
    """(loop) Log off ``links``, wait for their sockets to close, abort stragglers."""
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[None]] = []
    for link in links:
        future: asyncio.Future[None] = loop.create_future()
        waits.append(future)
        link._close_on_loop(reason, _setter(future))
    if waits:
        await asyncio.wait(waits, timeout=timeout)
    stragglers: list[asyncio.Future[None]] = []
    for link in links:
        session = link._session
        if session is not None and not session.lost and session.transport is not None:
            future = loop.create_future()
            session.on_closed.append(_setter(future))
            stragglers.append(future)
            session.abort()
    if stragglers:
        await asyncio.wait(stragglers, timeout=_ABORT_WAIT)
    # Give cancelled dials one turn of the loop to let go of their sockets.
    await asyncio.sleep(0)


def _setter(future: asyncio.Future[None]) -> Callable[[], None]:
    def done() -> None:
        if not future.done():
            future.set_result(None)

    return done


def _byte_order(value: str) -> Any:
    order = value.lower()
    if order not in ("big", "little"):
        raise ConfigError(f"byteOrder={value!r}: expected big or little")
    return order


def _settings_of(c: ServiceConfig | ConnectionConfig) -> LinkSettings:
    """The link settings a configured service or connection gives its links."""
    return LinkSettings(
        heartbeat_delay=c.heartbeat_delay_ms / 1000,
        heartbeat_reply_delay=c.heartbeat_reply_delay_ms / 1000,
        message_queue_size=c.message_queue_size,
        input_buffer_size=c.input_buffer_size,
        output_buffer_size=c.output_buffer_size,
        byte_order=_byte_order(c.byte_order),
        input_backlog=c.input_backlog,
    )
