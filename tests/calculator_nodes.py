"""The calculator demo's nodes as ``python -m actorbus run`` processes, for the
tests that drive them (tests/demos/test_calculator_processes.py,
tests/demos/test_cli_inspect.py, the inspect page's
tests/web/test_inspect_page_processes_chromium.py): the demo's properties files
copied with a free port, and a process whose stdout lines are read on a thread.

Imported as ``calculator_nodes`` (tests/ is on sys.path: tests/conftest.py's
directory)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from line_process import LineProcess

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demos" / "calculator"
#: this checkout's src/ first, then the demos
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    "PYTHONUNBUFFERED": "1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_configs(directory: Path, port: int) -> dict[str, Path]:
    """Copies of the demo's three properties files in ``directory``, the calculator
    node's service on ``port``: ``{"calculator": ..., "source": ..., "sink": ...}``."""
    out = {}
    for role in ("calculator", "source", "sink"):
        text = (DEMO / f"{role}-node.properties").read_text().replace("7701", str(port))
        path = directory / f"{role}.properties"
        path.write_text(text)
        out[role] = path
    return out


class Process(LineProcess):
    """A ``python -m actorbus ...`` process whose stdout lines are read on a thread."""

    def __init__(self, *args: str) -> None:
        super().__init__(
            [sys.executable, "-m", "actorbus", *args], cwd=ROOT, env=ENV, name=" ".join(args)
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.reap()
