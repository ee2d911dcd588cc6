"""Polling dispatchers under the GIL: an idle worker that polls must not keep the
interpreter from the other Python threads, and a spin+yield worker past its spin
limit sleeps until a post wakes it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from actorbus.actors.dispatcher import make_dispatcher
from actorbus.actors.mailbox import Mailbox
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.testing import wait_until

#: The switch interval the starvation test sets: a worker that kept the GIL while
#: polling would hand it over only this often, so 20 hand-offs would take 10 s.
SLOW_SWITCH = 0.5
HAND_OFFS = 20


@pytest.fixture
def slow_switch() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(SLOW_SWITCH)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize(
    "kind", [DispatcherKind.SPINNING, DispatcherKind.SPIN_PARK, DispatcherKind.SPIN_YIELD]
)
def test_hand_offs_to_a_polling_worker_take_far_less_than_the_switch_interval(
    kind: DispatcherKind, slow_switch: None
) -> None:
    # a spin limit the test never gets past: the worker spins through every hand-off
    d = make_dispatcher(DispatcherConfig(name="poll", kind=kind, spin_limit=10**9))
    d.start()
    try:
        mailbox = Mailbox(d, name="echo")
        done = threading.Event()
        finished = threading.Event()
        timer = threading.Timer(HAND_OFFS * SLOW_SWITCH / 4, finished.set)
        timer.start()
        try:
            ran = 0
            for _ in range(HAND_OFFS):
                done.clear()
                mailbox.post(done.set)
                if not done.wait(HAND_OFFS * SLOW_SWITCH) or finished.is_set():
                    break
                ran += 1
        finally:
            timer.cancel()
            timer.join()
        # A worker that kept the GIL while it polled would give it up once per
        # switch interval: 20 hand-offs would take 10 s, not a quarter of that.
        assert ran == HAND_OFFS, (
            f"only {ran} of {HAND_OFFS} hand-offs in {HAND_OFFS * SLOW_SWITCH / 4} s"
        )
    finally:
        assert d.stop(5) == []


def _thread_state(native_id: int) -> str:
    """The kernel's scheduling state of a thread of this process (R, S, ...)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_spin_yield_worker_past_its_limit_sleeps_until_a_post_wakes_it() -> None:
    d = make_dispatcher(
        DispatcherConfig(name="sy", kind=DispatcherKind.SPIN_YIELD, spin_limit=1000)
    )
    d.start()
    try:
        worker = d._threads[0]
        assert worker.native_id is not None
        # 1000 empty polls, then it waits in the kernel (a polling thread is R)
        assert wait_until(lambda: _thread_state(worker.native_id) == "S", 5.0)  # type: ignore[arg-type]
        mailbox = Mailbox(d, name="echo")
        done = threading.Event()
        mailbox.post(done.set)
        assert done.wait(5)  # the post woke it
        assert d.stats().tasks_run == 1
        assert wait_until(lambda: _thread_state(worker.native_id) == "S", 5.0)  # type: ignore[arg-type]
    finally:
        assert d.stop(5) == []
