"""``actorbus inspect HOST:PORT`` against the calculator demo's own nodes, each
``actorbus run`` in its own process (the demo's properties files with a free
port): the calculator actor and its machine's current state, which follows the
source node as it is stopped and started again; ``--diagram`` with the current
state highlighted; ``--json``; a wrong secret, a refused dial and a silent port,
each one line and exit status 1; a permissions rule on its key; TLS."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from calculator_nodes import ENV, Process, demo_configs, free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def configs(tmp_path: Path, port: int) -> dict[str, Path]:
    return demo_configs(tmp_path, port)


@pytest.fixture
def started() -> Iterator[Callable[..., Process]]:
    processes: list[Process] = []

    def start(*args: str) -> Process:
        p = Process(*args)
        processes.append(p)
        return p

    yield start
    for p in processes:
        p.stop()


def inspect(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorbus", "inspect", f"127.0.0.1:{port}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )


def calculator_listening(calc: Process, port: int) -> None:
    """Wait until the calculator node answers: its service is up once a dial logs on."""
    deadline = time.monotonic() + 30
    while True:
        done = inspect(port, "--json")
        if done.returncode == 0:
            return
        assert calc.proc.poll() is None, calc.proc.stderr.read() if calc.proc.stderr else ""
        assert time.monotonic() < deadline, done.stderr


def state_line(state: str) -> Callable[[str], bool]:
    """The state machines table's row of the calculator in ``state``."""
    pattern = re.compile(rf"^\s+calculator\s+{state}\s+compiled\s+\d+$")
    return lambda line: pattern.match(line) is not None


def test_inspect_follows_the_calculator_state_as_the_source_stops_and_starts(
    configs: dict[str, Path], port: int, started: Callable[..., Process]
) -> None:
    calc = started("run", str(configs["calculator"]))
    calculator_listening(calc, port)
    source = started("run", str(configs["source"]))
    started("run", str(configs["sink"]))
    watch = started("inspect", f"127.0.0.1:{port}", "--watch", "0.2", "--timeout", "20")
    watch.wait_for(state_line("Publishing"))
    source.proc.kill()  # the calculator's data feed goes DOWN with the source's link
    watch.wait_for(state_line("FeedDown"))
    watch.wait_for(lambda line: line.endswith("feed_down: Publishing -> FeedDown"))
    started("run", str(configs["source"]))
    watch.wait_for(state_line("Publishing"))
    watch.proc.send_signal(signal.SIGINT)  # Ctrl-C ends --watch
    assert watch.proc.wait(10) == 0


def test_tables_json_and_a_diagram_of_the_current_state(
    configs: dict[str, Path], port: int, started: Callable[..., Process], tmp_path: Path
) -> None:
    calc = started("run", str(configs["calculator"]))
    calculator_listening(calc, port)
    # no source yet: the machine waits for its data feed in its start state
    done = inspect(port)
    assert done.returncode == 0, done.stderr
    assert "node calculator at" in done.stdout
    assert re.search(r"^\s+calculator\s+demos\.calculator\.actors\.Calculator\s", done.stdout, re.M)
    assert any(state_line("Initializing")(line) for line in done.stdout.splitlines())

    done = inspect(port, "--json")
    snapshot = json.loads(done.stdout)
    assert snapshot["node"] == "calculator"
    (calculator,) = snapshot["actors"]
    assert calculator["machine"]["state"] == "Initializing"
    assert calculator["machine"]["transitions"][0]["target"] == "Initializing"

    done = inspect(port, "--diagram", "calculator")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stateDiagram-v2")
    assert "class Initializing current" in done.stdout

    done = inspect(port, "--diagram", "calculator", "--format", "dot")
    assert re.search(r"Initializing.*penwidth=3", done.stdout), done.stdout

    svg = tmp_path / "calculator.svg"
    done = inspect(port, "--diagram", "calculator", "--format", "svg", "-o", str(svg))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "<svg" in svg.read_text() and "Initializing" in svg.read_text()

    done = inspect(port, "--diagram", "nobody")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"actorbus: inspect: node calculator at 127.0.0.1:{port} has no actor 'nobody'; "
        "its FSM actors: calculator"
    )


def test_a_wrong_secret_and_a_refused_dial_are_one_line_and_status_1(
    configs: dict[str, Path], port: int, started: Callable[..., Process], tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the calculator's own secret, 32+ bytes\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("somebody else's secret, also long enough\n")
    for path in (secret, wrong):
        path.chmod(0o600)
    props = configs["calculator"]
    props.write_text(props.read_text() + f"actorbus.service.calc.secretFile = {secret}\n")
    calc = started("run", str(props))

    deadline = time.monotonic() + 30
    while (done := inspect(port, "--secret-file", str(secret))).returncode != 0:
        assert calc.proc.poll() is None and time.monotonic() < deadline, done.stderr
    assert "node calculator at" in done.stdout

    done = inspect(port, "--secret-file", str(wrong))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"actorbus: inspect: no node at 127.0.0.1:{port}: logon rejected")
    assert "this link's secret is not the peer's" in line, line
    assert done.stdout == ""

    nobody = free_port()
    done = inspect(nobody, "--timeout", "5")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"actorbus: inspect: cannot connect to 127.0.0.1:{nobody}: "), line
    assert "nothing listens there" in line

    # a port that takes the connection and never answers the logon
    with socket.create_server(("127.0.0.1", 0)) as silent:
        mute = silent.getsockname()[1]
        done = inspect(mute, "--timeout", "1")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line == (
        f"actorbus: inspect: no node at 127.0.0.1:{mute} logged on within 1 s; start the node "
        "there, check HOST:PORT (its service's port), or raise --timeout"
    )


def test_a_permissions_rule_on_its_key_keeps_inspection_to_the_operators(
    configs: dict[str, Path], port: int, started: Callable[..., Process], tmp_path: Path
) -> None:
    rules = tmp_path / "permissions"
    rules.write_text(
        "role ops = ops-console\n"
        "allow request @ops actorbus.system actorbus.InspectNode\n"
        "deny  request *    actorbus.system actorbus.InspectNode\n"
        "allow * * *\n"
    )
    props = configs["calculator"]
    props.write_text(props.read_text() + f"actorbus.service.calc.permissionsFile = {rules}\n")
    calc = started("run", str(props))

    deadline = time.monotonic() + 30
    while (done := inspect(port, "--node-id", "ops-console")).returncode != 0:
        assert calc.proc.poll() is None and time.monotonic() < deadline, done.stderr
    assert "node calculator at" in done.stdout

    done = inspect(port, "--node-id", "somebody")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"actorbus: inspect: the node at 127.0.0.1:{port} could not be")
    assert "permissions may refuse this node's requests on actorbus.InspectNode" in line


def openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def test_inspect_speaks_tls_with_the_files_given(
    configs: dict[str, Path], port: int, started: Callable[..., Process], tmp_path: Path
) -> None:
    for name in ("ca", "server"):
        openssl(tmp_path, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-out", f"{name}.key")  # fmt: skip
        (tmp_path / f"{name}.key").chmod(0o600)
    openssl(tmp_path, "req", "-x509", "-new", "-key", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    (tmp_path / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    openssl(tmp_path, "req", "-new", "-key", "server.key", "-out", "server.csr",
            "-subj", "/CN=server")  # fmt: skip
    openssl(tmp_path, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext")  # fmt: skip
    props = configs["calculator"]
    props.write_text(
        props.read_text()
        + f"actorbus.service.calc.tlsCertFile = {tmp_path / 'server.pem'}\n"
        + f"actorbus.service.calc.tlsKeyFile = {tmp_path / 'server.key'}\n"
    )
    calc = started("run", str(props))

    ca = str(tmp_path / "ca.pem")
    deadline = time.monotonic() + 30
    while (done := inspect(port, "--tls-ca-file", ca)).returncode != 0:
        assert calc.proc.poll() is None and time.monotonic() < deadline, done.stderr
    assert "node calculator at" in done.stdout

    done = inspect(port, "--timeout", "3")  # plain TCP to a TLS service
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"actorbus: inspect: no node at 127.0.0.1:{port}: "), line
    assert "a service that speaks TLS closes plain connections" in line, line
