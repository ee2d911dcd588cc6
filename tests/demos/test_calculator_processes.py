"""The calculator demo as three OS processes linked over loopback TCP by the
demo's own properties files (with the port rewritten to a free one)."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demos" / "calculator"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    """One `actorbus run` process whose stdout lines are read on a thread."""

    def __init__(self, properties: Path) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actorbus.cli", "run", str(properties)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, predicate: object, timeout: float = 20.0) -> str:
        import time

        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if predicate(line):  # type: ignore[operator]
                return line
        raise AssertionError(f"no matching line within {timeout}s; rc={self.proc.poll()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.reader.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def configs(tmp_path: Path) -> dict[str, Path]:
    port = str(free_port())
    out = {}
    for role in ("calculator", "source", "sink"):
        text = (DEMO / f"{role}-node.properties").read_text().replace("7701", port)
        path = tmp_path / f"{role}.properties"
        path.write_text(text)
        out[role] = path
    return out


def test_three_processes_compute_averages_and_survive_a_calculator_restart(
    configs: dict[str, Path],
) -> None:
    nodes: list[Node] = []
    try:
        calc = Node(configs["calculator"])
        nodes.append(calc)
        source = Node(configs["source"])
        sink = Node(configs["sink"])
        nodes += [source, sink]
        sink.wait_for(lambda line: line.endswith("over 5"))
        # kill the middle node: the sink sees its feed go DOWN, then UP again after restart
        calc.proc.kill()
        sink.wait_for(lambda line: line.endswith("feed DOWN"))
        calc.stop()
        calc2 = Node(configs["calculator"])
        nodes.append(calc2)
        sink.wait_for(lambda line: line.endswith("feed UP"))
        sink.wait_for(lambda line: line.endswith("over 5"))
    finally:
        for node in nodes:
            node.stop()
