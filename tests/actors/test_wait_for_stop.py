"""``actorbus.wait_for_stop`` and ``StopSignals``: SIGINT and SIGTERM end the
wait (no KeyboardInterrupt, no death), a signal that comes before the wait is
kept, the previous handlers come back, ignored signals stay ignored, and off the
main thread it waits on the event alone.  The signals
are real ones, sent to this process with ``os.kill``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from actorbus import StopSignals, wait_for_stop
from actorbus.testing import wait_until

ORIGINAL = signal.getsignal(signal.SIGTERM)


@pytest.fixture(autouse=True)
def _handlers_restored() -> Iterator[None]:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)  # even when the test failed half-way


def _when_installed(action: object, watched: signal.Signals = signal.SIGINT) -> threading.Thread:
    """Run ``action()`` on a thread once wait_for_stop has replaced the handler
    of ``watched`` (so a signal sent then reaches it)."""
    before = signal.getsignal(watched)

    def run() -> None:
        assert wait_until(lambda: signal.getsignal(watched) is not before, 10.0)
        action()  # type: ignore[operator]

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_the_wait_and_the_old_handler_comes_back(
    sig: signal.Signals,
) -> None:
    before = signal.getsignal(sig)
    stop = threading.Event()
    sender = _when_installed(lambda: os.kill(os.getpid(), sig))
    got = wait_for_stop(30.0, stop=stop)
    sender.join(10)
    assert got is sig
    assert stop.is_set()  # other threads waiting on it learn of the stop
    assert signal.getsignal(sig) is before


CHILD = """
import signal, sys, threading
from actorbus import StopSignals, wait_for_stop
from actorbus.testing import wait_until

before = signal.getsignal(signal.SIGTERM)

def announce():
    assert wait_until(lambda: signal.getsignal(signal.SIGTERM) is not before, 10.0)
    print("waiting", flush=True)

threading.Thread(target=announce, daemon=True).start()
got = wait_for_stop(30.0)
print(got.name if got else None, signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      flush=True)
"""


def test_a_second_signal_while_waiting_is_taken_like_the_first() -> None:
    # From another process, as a service manager sends them.
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "waiting"
        child.send_signal(signal.SIGTERM)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    assert out.split() in (["SIGTERM", "True"], ["SIGINT", "True"])


def test_two_signals_a_thread_sends_back_to_back_end_the_wait_within_a_slice() -> None:
    # The kernel hands the second to the sending thread, which does not wake the
    # main thread's lock wait; the wait's slices let the handlers run (a single
    # 30 s wait returned only after 30 s).
    def twice() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)

    sender = _when_installed(twice, signal.SIGTERM)
    started = time.monotonic()
    got = wait_for_stop(30.0)
    sender.join(10)
    assert got in (signal.SIGTERM, signal.SIGINT)
    assert time.monotonic() - started < 10.0


def test_the_stop_event_or_the_duration_end_it_with_none() -> None:
    stop = threading.Event()
    setter = _when_installed(stop.set)
    assert wait_for_stop(30.0, stop=stop) is None
    setter.join(10)
    elapsed = threading.Event()
    assert wait_for_stop(0.01, stop=elapsed) is None
    assert elapsed.is_set()
    assert signal.getsignal(signal.SIGTERM) is ORIGINAL


def test_an_ignored_signal_stays_ignored() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop = threading.Event()
    seen: list[object] = []

    def look() -> None:
        seen.append(signal.getsignal(signal.SIGTERM))
        stop.set()

    watcher = _when_installed(look)  # SIGINT's handler changed: installation is done
    assert wait_for_stop(30.0, stop=stop) is None
    watcher.join(10)
    assert seen == [signal.SIG_IGN]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_off_the_main_thread_it_installs_nothing_and_waits_on_the_event() -> None:
    stop = threading.Event()
    results: list[object] = []
    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=lambda: results.append(wait_for_stop(30.0, stop=stop)))
    thread.start()
    stop.set()
    thread.join(10)
    assert results == [None]
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize("duration", [-1, float("nan")])
def test_a_negative_duration_is_refused(duration: float) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ValueError, match=r"duration=.*: expected seconds >= 0"):
        wait_for_stop(duration)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_signals_keep_a_signal_that_comes_before_the_wait(sig: signal.Signals) -> None:
    # (a node stopped while its actors still start: it stops in order right after)
    before = signal.getsignal(sig)
    with StopSignals() as stopping:
        os.kill(os.getpid(), sig)  # the node is still "starting"
        started = time.monotonic()
        assert stopping.wait(30.0) is sig
        assert time.monotonic() - started < 10.0
        assert stopping.stop.is_set() and stopping.received == [sig]
        # back already: a second signal during the shutdown acts as before
        assert signal.getsignal(sig) is before
    assert signal.getsignal(sig) is before


def test_stop_signals_put_the_handlers_back_when_the_block_ends_without_a_wait() -> None:
    before = signal.getsignal(signal.SIGTERM)
    inside: list[object] = []

    def failing_start() -> None:
        with StopSignals():
            inside.append(signal.getsignal(signal.SIGTERM))
            raise RuntimeError("start failed")

    with pytest.raises(RuntimeError, match="start failed"):
        failing_start()
    assert inside and inside[0] is not before
    assert signal.getsignal(signal.SIGTERM) is before
