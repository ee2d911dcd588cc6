"""Forwarding nodes as real processes (tests/routing/node.py) and the test
process's own bus as one more node: start, command, read, stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actorbus import Bus
from actorbus.config import ConnectionSettings, ServiceSettings
from line_process import LineProcess

ROOT = Path(__file__).resolve().parents[2]
NODE = Path(__file__).with_name("node.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
#: heartbeat delay and reply delay of every link: a dead peer is noticed
#: within about twice this
BEAT = 0.5


class Node(LineProcess):
    """One node process; ``send`` writes a command line, ``expect`` reads."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = {"heartbeat": BEAT, **spec}
        self.id = spec["id"]
        super().__init__(
            [sys.executable, str(NODE), json.dumps(self.spec)],
            cwd=ROOT,
            env=ENV,
            name=f"node {self.id}",
            stdin=True,
        )
        self.expect(lambda line: line == f"READY {self.id}")

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, predicate: Callable[[str], bool], timeout: float = 60.0) -> str:
        return self.wait_for(predicate, timeout)

    def stats(self) -> dict[str, Any]:
        self.send("stats")
        line = self.expect(lambda x: x.startswith("STATS "))
        return json.loads(line[len("STATS ") :])  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        self.reap()


@contextmanager
def nodes(*specs: dict[str, Any]) -> Iterator[dict[str, Node]]:
    """Start the node processes in order (each one's services before the
    connections of those after it); all stopped on exit."""
    started: dict[str, Node] = {}
    try:
        for spec in specs:
            started[spec["id"]] = Node(spec)
        yield started
    finally:
        for node in started.values():
            node.stop()


def timers() -> dict[str, float]:
    return {"heartbeat_delay": BEAT, "heartbeat_reply_delay": BEAT}


def dial(bus: Bus, port: int, *, forward: bool = True) -> Any:
    """The test's bus dials a node process's service (dialling again after a loss)."""
    settings = ConnectionSettings(forward=forward, reconnect=True, reconnect_delay=0.2, **timers())
    return bus.connect("127.0.0.1", port, settings=settings)


def serve(bus: Bus, port: int) -> Any:
    return bus.listen(port, settings=ServiceSettings(forward=True, **timers()))
