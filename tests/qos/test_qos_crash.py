"""Exactly-once through a consumer crash: a consumer process killed with
SIGKILL mid-stream and started again on its state_dir resumes after the
watermark it saved; the only effects repeated are those of the messages its
application took after that save (at most one acknowledgement's worth), and
no message is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from qos_support import WAIT, Pub, start

from actorbus import Bus
from actorbus.qos import Delivery, Qos
from actorbus.testing import wait_until

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
TOTAL = 20_000
#: the subscriber's window is 1024: it acknowledges (and saves) every 256
ACK_EVERY = 256


def _lines(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    text = path.read_text(encoding="ascii")
    # a line being written when the process was killed is not an effect yet
    return [
        (int(a), int(b))
        for a, b in (line.split() for line in text.splitlines(keepends=True) if line.endswith("\n"))
    ]


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus(node_id="qos-crash-pub") as b:
        yield b


def _consumer(port: int, state: Path, effects: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{HERE}"}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "qos_node.py"), str(port), str(state), str(effects)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "up"
    return proc


def _close(proc: subprocess.Popen[str]) -> None:
    if proc.stdout is not None:
        proc.stdout.close()


def test_a_killed_consumer_resumes_after_its_saved_watermark(bus: Bus, tmp_path: Path) -> None:
    offer = Qos(Delivery.EXACTLY_ONCE, persistent=True)
    pub = Pub("/crash", offer=offer, journal=tmp_path / "journal")
    start(bus, pub)
    service = bus.listen(0)
    state = tmp_path / "state"
    first, second = tmp_path / "effects-1", tmp_path / "effects-2"
    proc = _consumer(service.port, state, first)
    try:
        pub.stream(TOTAL, 50, 0.01)
        assert wait_until(lambda: len(_lines(first)) >= 5_000, 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT)
        _close(proc)
        proc = _consumer(service.port, state, second)
        assert wait_until(lambda: len(_lines(second)) and _lines(second)[-1][0] >= TOTAL, 120)
        assert wait_until(lambda: pub.read(lambda p: p.consumers) == {"x": TOTAL}, WAIT)
    finally:
        proc.kill()
        proc.wait(WAIT)
        _close(proc)
    run1, run2 = [s for s, _ in _lines(first)], [s for s, _ in _lines(second)]
    # each run hands seqs in order, once
    assert run1 == list(range(1, len(run1) + 1))
    assert run2 == list(range(run2[0], TOTAL + 1))
    # nothing lost; what is repeated is what run 1 took after its last save
    assert run2[0] <= run1[-1] + 1
    repeated = run1[-1] - run2[0] + 1
    print(f"run 1 took {len(run1)}, run 2 resumed at {run2[0]}: {max(repeated, 0)} repeated")
    assert 0 <= repeated <= ACK_EVERY
    assert all(n == s for s, n in _lines(first) + _lines(second))
