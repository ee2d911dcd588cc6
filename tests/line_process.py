"""A subprocess whose stdout lines are read on a thread, so that every wait for
a line has a deadline: the base of the tests' process helpers
(tests/calculator_nodes.py's ``Process``, tests/routing/routing_procs.py's
``Node``).

Imported as ``line_process`` (tests/ is on sys.path: tests/conftest.py's
directory)."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


class LineProcess:
    """``argv`` started with stdout and stderr piped (and stdin, if ``stdin``);
    ``name`` says which process in a failed wait's message."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str],
        name: str,
        stdin: bool = False,
    ) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env),
        )
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # end of output: the process exited

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
        """The first line from now on that ``predicate`` accepts; raises
        AssertionError (with the last lines seen, and stderr if the process has
        exited) when none comes within ``timeout`` seconds or the process ends
        its output first."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.lines.put(None)  # for any later wait
                self.proc.wait(10)
                break
            if predicate(line):
                return line
            seen = [*seen[-30:], line]
        err = ""
        if self.proc.poll() is not None and self.proc.stderr is not None:
            err = self.proc.stderr.read()[-3000:]
        raise AssertionError(
            f"{self.name}: no matching line within {timeout} s; rc={self.proc.poll()}; "
            "last lines:\n" + "\n".join(seen) + (f"\nstderr: {err}" if err else "")
        )

    def reap(self) -> None:
        """After the process has exited: join the reader, close the pipes."""
        self.reader.join(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
