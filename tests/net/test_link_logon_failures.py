"""A connection that reaches its peer but is refused there (the wrong secret; a
plain client dialling a TLS service: see test_link_tls.py) is never silent, as a
refused dial is not: ``actorbus run`` exits 1 naming the connection, the reason
and the fix when it does not reconnect, and reports it at WARNING, once per
link, when it does.  The node under test is ``actorbus run`` in a subprocess;
its peer is a bus of this process listening on a loopback socket."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from nodes.support import buses

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"0123456789abcdef0123456789abcdef"


def node_properties(tmp_path: Path, port: int, *, reconnect: bool, extra: str = "") -> Path:
    """An ``actorbus run`` node with one actor and a connection 'upstream'."""
    app = tmp_path / "app.properties"
    app.write_text(
        "actorbus.actors = sink\n"
        "actorbus.actor.sink.class = demos.calculator.actors.Sink\n"
        "actorbus.connections = upstream\n"
        "actorbus.connection.upstream.host = 127.0.0.1\n"
        f"actorbus.connection.upstream.port = {port}\n"
        f"actorbus.connection.upstream.reconnect = {'true' if reconnect else 'false'}\n"
        "actorbus.connection.upstream.reconnectDelay = 20\n" + extra
    )
    return app


def wrong_secret(tmp_path: Path) -> str:
    secret = tmp_path / "upstream.secret"
    secret.write_bytes(b"not-the-service-secret-0123456789\n")
    secret.chmod(0o600)
    return f"actorbus.connection.upstream.secretFile = {secret}\n"


def run_node(app: Path, duration: float) -> subprocess.CompletedProcess[str]:
    """``python -m actorbus run APP`` with this checkout's src/ first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "actorbus", "run", str(app), "--duration", str(duration)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_run_exits_1_naming_a_connection_refused_for_its_secret(tmp_path: Path) -> None:
    with buses("service") as (peer,):
        service = peer.listen(0, secret=SECRET)
        app = node_properties(tmp_path, service.port, reconnect=False, extra=wrong_secret(tmp_path))
        started = time.monotonic()
        proc = run_node(app, 15)
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started < 12  # stopped by the refusal, not by --duration
    lines = [x for x in proc.stderr.splitlines() if x.startswith("actorbus run:")]
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert "connection 'upstream' failed" in line
    assert "authentication failed" in line  # the reason
    assert "give both the same secret" in line  # the fix
    assert "actorbus.connection.upstream.reconnect = true" in line


def test_a_reconnecting_connection_reports_a_refused_logon_once(tmp_path: Path) -> None:
    with buses("service") as (peer,):
        service = peer.listen(0, secret=SECRET)
        app = node_properties(tmp_path, service.port, reconnect=True, extra=wrong_secret(tmp_path))
        proc = run_node(app, 3)
        assert service.counters.auth_failures >= 2  # it kept trying
    assert proc.returncode == 0, proc.stderr  # it keeps trying: not a failure of the node
    warnings = [x for x in proc.stderr.splitlines() if "link upstream:" in x]
    assert len(warnings) == 1, proc.stderr  # logons every ~20-80 ms, reported once per 30 s
    assert "WARNING" in warnings[0]
    assert "authentication failed" in warnings[0] and "give both the same secret" in warnings[0]
    assert "retrying" in warnings[0]
