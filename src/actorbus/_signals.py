"""Run a node until it is told to stop: :func:`wait_for_stop`, :class:`StopSignals`.

A node's main thread usually has nothing to do once its actors are started; it
waits until the operator stops it and then shuts the actors down and closes the
bus, so that every link logs off with a reason and every actor's ``shutdown()``
runs.  Operators stop a process in two ways: Ctrl-C (SIGINT) at a terminal, and
SIGTERM from a service manager (systemd, Docker, Kubernetes, ``kill``).  Python
turns the first into ``KeyboardInterrupt`` wherever the main thread happens to
be, and by default dies on the second at once, with no shutdown at all: the
peers see a connection closed without a logoff, and work the actors held is
lost.  :func:`wait_for_stop` takes both as a request to stop: the handlers it
installs only note the signal (a handler takes no lock), and the caller's
shutdown code runs on the main thread as ordinary code after the wait returns.

:class:`StopSignals` is the same in two steps, for a node that must not miss a
signal while it starts: its handlers are installed on ``__enter__`` (before the
bus opens), a signal that comes during the start is kept, and ``wait()``
returns at once with it.

While it waits, a second signal of the same kind is taken like the first.  The
previous handlers are back when the wait returns, so a signal that arrives
while the caller shuts down acts as it did before (Ctrl-C raises
``KeyboardInterrupt``, SIGTERM ends the process): an operator can always cut a
shutdown that hangs.

The wait looks at the noted signals every 0.05 s (``_SLICE``).  A handler
only appends to a list: it takes no lock and raises nothing, because it runs
on the main thread between two of its bytecodes, possibly while that thread
holds the wait's own event lock (inside ``Event.wait``), where taking the lock
would wait for itself and an exception could leave it held for good.  Python
resumes an interrupted lock wait after the handler, so the slices are what
ends the wait; they also catch a signal the kernel hands to another thread (it
does when the main thread already has one pending), which only marks the
handler to run and would not end the main thread's wait at all.

A ``KeyboardInterrupt`` or ``SystemExit`` raised by actor code on a
dispatcher thread stops the node the same way: the runtime hands it to
:func:`stop_with`, which wakes every wait in progress, and the wait raises it
in the main thread once its handlers are restored (the actors' failure
contract, docs/actors.md).  One nobody waited for is raised by the runtime's
``close()``, through :func:`take_fatal`.

Signals whose disposition is "ignore" stay ignored (a shell starts background
jobs with SIGINT ignored; ``nohup`` ignores SIGHUP), as Python itself leaves an
ignored SIGINT alone.  Only the main thread can install handlers; elsewhere the
function waits for the event or the duration alone.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["StopSignals", "stop_with", "take_fatal", "wait_for_stop"]

#: what stops a node: Ctrl-C and a service manager's stop.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

#: the longest the main thread waits without running bytecode (see the module
#: docstring, "woken late")
_SLICE = 0.05

_fatal_lock = threading.Lock()
#: fatal exceptions from actor code not raised anywhere yet, first first
_fatal: list[BaseException] = []
#: the stop events of the waits in progress
_waiting: set[threading.Event] = set()


def stop_with(exc: BaseException) -> None:
    """(any thread) Stop the node because actor code raised ``exc`` (a
    BaseException that is not an Exception): every wait in progress returns
    and raises it; :func:`take_fatal` gives it to whoever closes the node if
    nobody was waiting."""
    with _fatal_lock:
        _fatal.append(exc)
        waiting = list(_waiting)
    for event in waiting:
        event.set()


def take_fatal(candidates: Iterable[BaseException] | None = None) -> BaseException | None:
    """Remove and return the first fatal exception not raised yet (among
    ``candidates`` when given), or None."""
    with _fatal_lock:
        for i, exc in enumerate(_fatal):
            if candidates is None or any(exc is c for c in candidates):
                del _fatal[i]
                return exc
    return None


def wait_for_stop(
    duration: float | None = None,
    *,
    stop: threading.Event | None = None,
    signals: Iterable[signal.Signals] = STOP_SIGNALS,
) -> signal.Signals | None:
    """Block until one of ``signals`` arrives (SIGINT and SIGTERM by default),
    ``stop`` is set, or ``duration`` seconds pass (None: no limit).

    Returns the signal that ended the wait, or None when ``stop`` or the
    duration did.  Raises the ``KeyboardInterrupt`` or ``SystemExit`` that actor
    code raised (the failure contract: it stops the node).  ``stop`` is set in every case, so other threads waiting on
    it learn that the node is stopping.  Handlers are installed only when
    called on the main thread, and the previous ones are restored before it
    returns.  Raises :class:`ValueError` for a negative ``duration``.  A signal
    that comes *before* the call acts as it would without it: to catch the
    ones that come while the node starts too, use :class:`StopSignals`.

    Typical use, on the main thread::

        with Bus.from_properties("node.properties") as bus:
            bus.register(MyActor())
            bus.startup_all().wait(10)
            wait_for_stop()
            bus.shutdown_all().wait(10)
    """
    with StopSignals(stop=stop, signals=signals) as stopping:
        return stopping.wait(duration)


class StopSignals:
    """Take the stop signals from ``__enter__`` to the end of :meth:`wait`.

    A signal that arrives while the node is still starting is kept, and the
    :meth:`wait` that follows returns at once with it; the handlers stay in
    place only until then (or until the ``with`` block ends), so a second
    signal during the shutdown acts as it did before::

        with StopSignals() as stopping, Bus(config) as bus:
            ...                             # register and start the actors
            stopping.wait()                 # returns at once if a signal came already
            bus.shutdown_all().wait(10)
    """

    def __init__(
        self,
        *,
        stop: threading.Event | None = None,
        signals: Iterable[signal.Signals] = STOP_SIGNALS,
    ) -> None:
        #: set once the node is to stop (by a signal, :meth:`wait`'s end, or anyone)
        self.stop = stop if stop is not None else threading.Event()
        #: the signals taken so far, first first
        self.received: list[signal.Signals] = []
        self._signals = tuple(signals)
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self._signals:
                if signal.getsignal(sig) is signal.SIG_IGN:
                    continue  # ignored when the process started: leave it so
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _handler(self, signum: int, frame: Any) -> None:
        # Only note the signal: no lock, no raise (see the module docstring).
        # The wait sees it at its next slice and sets the event in ordinary code.
        self.received.append(signal.Signals(signum))

    def wait(self, duration: float | None = None) -> signal.Signals | None:
        """Block until a signal (or one came since ``__enter__``), ``stop`` is set,
        or ``duration`` seconds pass; then put the previous handlers back, set
        ``stop`` and return the first signal taken, or None.  When actor code
        raised a ``KeyboardInterrupt`` or ``SystemExit``, the wait ends at once
        and raises it."""
        if duration is not None and not duration >= 0:  # (NaN too)
            raise ValueError(f"wait(duration={duration!r}): expected seconds >= 0 or None")
        with _fatal_lock:
            _waiting.add(self.stop)
            if _fatal:
                self.stop.set()
        try:
            deadline = None if duration is None else time.monotonic() + duration
            while not self.received and not self.stop.is_set():
                left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
                if left <= 0:
                    break
                self.stop.wait(left)
        finally:
            self._restore()
            with _fatal_lock:
                _waiting.discard(self.stop)
        self.stop.set()
        fatal = take_fatal()
        if fatal is not None:
            raise fatal
        return self.received[0] if self.received else None

    def _restore(self) -> None:
        previous, self._previous = self._previous, {}
        for sig, old in previous.items():
            # (None: a handler installed from C, which Python cannot reinstall)
            signal.signal(sig, signal.SIG_DFL if old is None else old)
