"""A connection whose peer is not there is never silent: each failed dial is
reported at WARNING (visible with no logging set up), at most once per interval
per link with a count of the ones held back; ``actorbus run`` exits 1 naming the
connection and the reason when a configured connection without reconnect fails."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ACTORBUS = Path(sys.executable).with_name("actorbus")


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _properties(tmp_path: Path, port: int, reconnect: bool) -> Path:
    app = tmp_path / "app.properties"
    app.write_text(
        "actorbus.actors = source\n"
        "actorbus.actor.source.class = demos.calculator.actors.Source\n"
        "actorbus.actor.source.period_ms = 50\n"
        "actorbus.connections = upstream\n"
        f"actorbus.connection.upstream.host = 127.0.0.1\n"
        f"actorbus.connection.upstream.port = {port}\n"
        f"actorbus.connection.upstream.reconnect = {'true' if reconnect else 'false'}\n"
        "actorbus.connection.upstream.reconnectDelay = 20\n"
    )
    return app


def test_run_exits_1_with_the_reason_when_a_configured_connection_fails(tmp_path: Path) -> None:
    app = _properties(tmp_path, _free_port(), reconnect=False)
    started = time.monotonic()
    proc = subprocess.run(
        [str(ACTORBUS), "run", str(app), "--duration", "60"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started < 30  # stopped by the failure, not by --duration
    line = [x for x in proc.stderr.splitlines() if x.startswith("actorbus run:")]
    assert len(line) == 1, proc.stderr
    assert "connection 'upstream' failed" in line[0]
    assert "nothing listens" in line[0] or "refused" in line[0]
    assert "reconnect = true" in line[0]  # the fix


def test_a_reconnecting_connection_reports_failed_dials_rate_limited(tmp_path: Path) -> None:
    app = _properties(tmp_path, _free_port(), reconnect=True)
    proc = subprocess.run(
        [str(ACTORBUS), "run", str(app), "--duration", "1.5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr  # it keeps trying: not a failure of the node
    warnings = [x for x in proc.stderr.splitlines() if "link upstream: cannot connect" in x]
    assert len(warnings) == 1, proc.stderr  # dials every ~20-80 ms, reported once per 30 s
    assert "WARNING" in warnings[0] and "retrying" in warnings[0]


def test_a_library_user_sees_a_failed_dial_on_stderr_with_no_logging_set_up() -> None:
    script = f"""
        from actorbus import Bus
        with Bus() as bus:
            link = bus.connect("127.0.0.1", {_free_port()}, name="peer")
            link.wait_closed(10)
            print("status", link.status.value, flush=True)
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "status closed" in proc.stdout
    assert "link peer: cannot connect to 127.0.0.1:" in proc.stderr
    assert "not retrying" in proc.stderr
