"""Run a node until it is told to stop: :func:`wait_for_stop`.

A node's main thread usually has nothing to do once its actors are started; it
waits until the operator stops it and then shuts the actors down and closes the
bus, so that every link logs off with a reason and every actor's ``shutdown()``
runs.  Operators stop a process in two ways: Ctrl-C (SIGINT) at a terminal, and
SIGTERM from a service manager (systemd, Docker, Kubernetes, ``kill``).  Python
turns the first into ``KeyboardInterrupt`` wherever the main thread happens to
be, and by default dies on the second at once, with no shutdown at all: the
peers see a connection closed without a logoff, and work the actors held is
lost.  :func:`wait_for_stop` takes both as a request to stop: the handlers it
installs only set an event, and the caller's shutdown code runs on the main
thread as ordinary code after the wait returns.

While it waits, a second signal of the same kind is taken like the first.  The
previous handlers are back when it returns, so a signal that arrives while the
caller shuts down acts as it did before the wait (Ctrl-C raises
``KeyboardInterrupt``, SIGTERM ends the process): an operator can always cut a
shutdown that hangs.

The wait wakes at least every 0.25 s (``_SLICE``).  Python handlers run only
on the main thread, when it runs bytecode; a signal the kernel hands to another
thread (it does when the main thread already has one pending: two signals back
to back) only marks the handler to run and does not end the main thread's lock
wait, so without the slices such a stop could be *woken late*, at the end of
the duration or never.  Measured here: two signals a thread of the process sent
it back to back were handled after the whole timeout; with the slices, at the
next slice.

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

__all__ = ["wait_for_stop"]

#: what stops a node: Ctrl-C and a service manager's stop.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

#: the longest the main thread waits without running bytecode (see the module
#: docstring, "woken late")
_SLICE = 0.25


def wait_for_stop(
    duration: float | None = None,
    *,
    stop: threading.Event | None = None,
    signals: Iterable[signal.Signals] = STOP_SIGNALS,
) -> signal.Signals | None:
    """Block until one of ``signals`` arrives (SIGINT and SIGTERM by default),
    ``stop`` is set, or ``duration`` seconds pass (None: no limit).

    Returns the signal that ended the wait, or None when ``stop`` or the
    duration did.  ``stop`` is set in every case, so other threads waiting on
    it learn that the node is stopping.  Handlers are installed only when
    called on the main thread, and the previous ones are restored before it
    returns.  Raises :class:`ValueError` for a negative ``duration``.

    Typical use, on the main thread::

        with Bus.from_properties("node.properties") as bus:
            bus.register(MyActor())
            bus.startup_all().wait(10)
            wait_for_stop()
            bus.shutdown_all().wait(10)
    """
    if duration is not None and duration < 0:
        raise ValueError(f"wait_for_stop(duration={duration!r}): expected seconds >= 0 or None")
    event = stop if stop is not None else threading.Event()
    received: list[signal.Signals] = []
    waiting = [False]

    def handler(signum: int, frame: Any) -> None:
        # No lock may be taken here: the handler runs on the main thread between
        # two of its bytecodes, possibly inside Event.wait() while it holds the
        # event's lock, and event.set() would then wait for itself.  So the first
        # signal leaves the wait the way KeyboardInterrupt does, and the event is
        # set after the wait, in ordinary code.
        received.append(signal.Signals(signum))
        if waiting[0]:
            waiting[0] = False  # (at most one raise: none can land in the cleanup)
            raise _Stopped

    previous: dict[signal.Signals, Any] = {}
    try:
        try:
            if threading.current_thread() is threading.main_thread():
                for sig in signals:
                    if signal.getsignal(sig) is signal.SIG_IGN:
                        continue  # ignored when the process started: leave it so
                    previous[sig] = signal.signal(sig, handler)
            waiting[0] = True
            deadline = None if duration is None else time.monotonic() + duration
            while not received and not event.is_set():
                left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
                if left <= 0:
                    break
                event.wait(left)
        finally:
            waiting[0] = False
            _restore(previous)
    except _Stopped:
        _restore(previous)  # (the raise may have cut the first restore short)
    event.set()
    return received[0] if received else None


class _Stopped(BaseException):
    """Raised by the handler out of the wait, caught by wait_for_stop()."""


def _restore(previous: dict[signal.Signals, Any]) -> None:
    for sig, old in previous.items():
        # (None: a handler installed from C, which Python cannot reinstall)
        signal.signal(sig, signal.SIG_DFL if old is None else old)
