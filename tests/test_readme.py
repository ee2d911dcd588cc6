"""The README's tour runs as written: its Python blocks, joined in order, make one
program that prints what the text says, reports the failing callback on stderr,
stops in order on Ctrl-C, and then runs the script helpers."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAIT = 30.0


def readme_program() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) >= 8, "the tour's Python blocks went missing"
    return "\n\n".join(blocks)


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "tour.py"
    script.write_text(readme_program())
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=ROOT,  # the tour loads demos/calculator/calculator.sm by a relative path
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, name="readme-stdout")
    reader.start()
    seen: list[str] = []

    def next_line(deadline: float) -> str | None:
        # one deadline per phase: the Printer's lines must not keep a stuck phase alive
        left = deadline - time.monotonic()
        assert left > 0, f"the tour did not get there in time: {seen[-5:]}"
        return lines.get(timeout=left)

    try:
        deadline = time.monotonic() + WAIT
        while "tick 10: ACME at 12.5" not in seen:  # the async Trader's first answer
            line = next_line(deadline)
            assert line is not None, f"the tour ended early: {seen}\n{proc.stderr}"
            seen.append(line)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the node stops in order
        deadline = time.monotonic() + WAIT
        while (line := next_line(deadline)) is not None:
            seen.append(line)
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=WAIT)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.stdout is not None
    proc.stdout.close()
    assert "/demo: 1" in seen and "/demo: 10" in seen  # the Printer
    # the failing callback, once, with the actor's callback, the feed and the traceback
    assert err.count("raised ValueError: 3 is not allowed here") == 1, err
    assert "Fragile.check" in err and "/demo" in err and "Traceback" in err
    assert "/demo: 4" in seen  # the Fragile actor failed; the others ran on
    # after the node stopped, the script helpers ran
    assert any(line.startswith("[Quote(") and "price=12.5" in line for line in seen), seen
    assert any(line.startswith("DataPoint(") and "value=7" in line for line in seen), seen
