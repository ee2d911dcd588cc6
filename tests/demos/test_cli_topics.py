"""``actorbus topics HOST:PORT``: the installed command links to a real node in
another process and prints its topics as one table; a node that cannot be
reached is one line on stderr and exit status 2."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the installed console script
ACTORBUS = Path(sys.executable).with_name("actorbus")

NODE = textwrap.dedent(
    """
    import sys

    from actorbus import Actor, Bus, Notification, Reply, Request


    class Tick(Notification, type_name="clitopics.Tick"):
        n: int


    class Ping(Request, type_name="clitopics.Ping"):
        pass


    class Secret(Actor):
        def startup(self) -> None:
            self.serve(Ping, "/secret", lambda r: Reply(r.subject), discoverable=False)


    with Bus(node_id="topics-node") as bus:
        bus.publisher(Tick, "/ticks")
        bus.inbox(Tick, "/jobs", queue="workers")
        bus.inbox(Tick, "/jobs", queue="workers")
        secret = Secret("secret")
        bus.register(secret)
        bus.startup(secret).wait(10)
        service = bus.listen(0)
        print(f"READY {service.port}", flush=True)
        sys.stdin.read()  # until the test closes it
    """
)


class NodeProcess:
    """The node above in its own process; its stdout lines are read on a thread."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.stderr = ""
        self.reader = threading.Thread(target=self._read, name="topics-node-stdout")
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def port(self, timeout: float = 30.0) -> int:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None or not line.startswith("READY "):
            self.stop()
            raise AssertionError(f"the node did not start: {line!r}; stderr: {self.stderr}")
        return int(line.split()[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the node closes its bus and exits
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.reader.join(10)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[int]:
    script = tmp_path / "node.py"
    script.write_text(NODE)
    process = NodeProcess(script)
    try:
        yield process.port()
    finally:
        process.stop()
    assert process.proc.returncode == 0, (
        f"the node exited {process.proc.returncode}: {process.stderr}"
    )


def topics(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ACTORBUS), "topics", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_the_table_lists_the_nodes_topics_and_not_its_hidden_replier(node: int) -> None:
    proc = topics(f"127.0.0.1:{node}", "--timeout", "10")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    header = lines[0]
    assert header.split() == ["NODE", "ROLE", "TYPE", "SUBJECT", "SCOPE", "QUEUE", "COUNT", "UP"]
    assert [" ".join(line.split()) for line in lines[1:]] == [
        "topics-node subscriber clitopics.Tick /jobs LOCAL_AND_REMOTE workers 2 0",
        "topics-node publisher clitopics.Tick /ticks LOCAL_AND_REMOTE - 1 1",
    ]
    assert "/secret" not in proc.stdout
    assert "clitopics.Ping" not in proc.stdout
    # the columns line up under the header
    for line in lines[1:]:
        assert line.index("clitopics.Tick") == header.index("TYPE")
        assert line.index("LOCAL_AND_REMOTE") == header.index("SCOPE")


def test_a_closed_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = topics(f"127.0.0.1:{port}", "--timeout", "5")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "start the peer node's service or check the port" in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["localhost"], "'localhost' is not an address: expected HOST:PORT"),
        (["127.0.0.1:0"], "'127.0.0.1:0' is not an address"),
        (["127.0.0.1:7701", "--timeout", "0"], "--timeout 0.0: expected seconds > 0"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], message: str) -> None:
    proc = topics(*argv)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert message in lines[0]


def test_auth_none_reaches_a_node_whose_service_has_auth_none() -> None:
    from actorbus import Bus
    from actorbus.config import ServiceSettings

    with Bus(node_id="open-node") as bus:
        service = bus.listen(0, settings=ServiceSettings(auth="none"))
        refused = topics(f"127.0.0.1:{service.port}", "--timeout", "10")
        assert refused.returncode == 2
        assert "authentication failed" in refused.stderr  # it proved this user's secret
        proc = topics(f"127.0.0.1:{service.port}", "--timeout", "10", "--auth", "none")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split()[:8] == [
            "NODE",
            "ROLE",
            "TYPE",
            "SUBJECT",
            "SCOPE",
            "QUEUE",
            "COUNT",
            "UP",
        ]
