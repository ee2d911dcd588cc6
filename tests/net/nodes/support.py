"""Helpers for the link tests: buses, system-notification logs, raw protocol peers,
subprocess nodes.  Everything here closes what it opens."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from actorbus import Bus
from actorbus.bus import (
    SYSTEM_SUBJECT,
    ConnectionAccepted,
    Inbox,
    LinkLoggedOff,
    LinkLoggedOn,
    ServiceStarted,
)
from actorbus.config import LinkSettings
from actorbus.net import LinkProtocol, Side
from actorbus.net.protocol import Event, LogonAccepted, LogonComplete, LogonRequested
from actorbus.testing import Recorder, wait_until

NODE_SCRIPT = Path(__file__).with_name("node.py")
E = TypeVar("E", bound=Event)


@contextlib.contextmanager
def buses(*node_ids: str, **kwargs: Any) -> Iterator[list[Bus]]:
    """Buses with the given node ids, all closed on exit."""
    made: list[Bus] = []
    try:
        for node_id in node_ids:
            made.append(Bus(node_id=node_id, **kwargs))
        yield made
    finally:
        for bus in reversed(made):
            bus.close()


def started(bus: Bus, *actors: Recorder) -> None:
    """Register and start ``actors`` on ``bus``."""
    for actor in actors:
        bus.register(actor)
    bus.startup(list(actors)).wait(5)


def linked(a: Bus, b: Bus, **connect: Any) -> Any:
    """``b`` dials a service of ``a``; returns (service, link) once logged on."""
    service = a.listen(0)
    link = b.connect("127.0.0.1", service.port, **connect)
    link.wait_logged_on(5)
    # the accepting side logs on when the dialler's LOGON_COMPLETE arrives
    wait_for(lambda: any(x.is_logged_on for x in service.links), "the accepted link logs on")
    return service, link


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Wait until ``predicate()`` holds (for state that has no event to wait on)."""
    if not wait_until(predicate, timeout):
        raise AssertionError(f"timed out after {timeout} s waiting until {what}")


class SystemLog:
    """Inboxes on a bus's system notifications."""

    def __init__(self, bus: Bus) -> None:
        self.logged_on: Inbox[LinkLoggedOn] = bus.inbox(LinkLoggedOn, SYSTEM_SUBJECT)
        self.logged_off: Inbox[LinkLoggedOff] = bus.inbox(LinkLoggedOff, SYSTEM_SUBJECT)
        self.accepted: Inbox[ConnectionAccepted] = bus.inbox(ConnectionAccepted, SYSTEM_SUBJECT)
        self.started: Inbox[ServiceStarted] = bus.inbox(ServiceStarted, SYSTEM_SUBJECT)

    @staticmethod
    def next(inbox: Inbox[Any], timeout: float = 5.0) -> Any:
        message = inbox.receive(timeout)
        assert message is not None, f"no {inbox.key} within {timeout} s"
        return message


# ====================================================================== raw peers


def user_key() -> bytes:
    """This user's secret, which nodes with no secret configured prove: the
    file tests/conftest.py made for this run (never the real user's)."""
    with open(os.environ["ACTORBUS_USER_SECRET_FILE"], "rb") as file:
        return file.read().strip()


class RawPeer:
    """One protocol end driven by hand over a blocking socket: a peer that can
    complete the logon and then misbehave (stop reading, send garbage, ...).
    It proves ``secret``; None: this user's (as a node with none configured)."""

    def __init__(
        self,
        sock: socket.socket,
        side: Side,
        node_id: str,
        run_id: str = "",
        secret: bytes | None = None,
    ) -> None:
        self.sock = sock
        if secret is None:
            secret = user_key()
        self.proto = LinkProtocol(
            side,
            node_id,
            time.monotonic(),
            is_known_type=lambda name: True,
            settings=LinkSettings(logon_timeout=0),
            run_id=run_id,
            secret=secret,
        )
        self.seen: list[Event] = []
        #: every byte read from the node
        self.received = bytearray()

    @classmethod
    def connect(
        cls,
        port: int,
        node_id: str,
        *,
        host: str = "127.0.0.1",
        rcvbuf: int | None = None,
        run_id: str = "",
        secret: bytes | None = None,
    ) -> RawPeer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if rcvbuf is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.settimeout(5)
            sock.connect((host, port))
        except BaseException:
            sock.close()
            raise
        return cls(sock, Side.CLIENT, node_id, run_id, secret)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self) -> None:
        data = self.proto.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def expect(self, kind: type[E], timeout: float = 5.0) -> E:
        """Read until an event of ``kind`` arrives (others are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.proto.events():
                self.seen.append(event)
                if isinstance(event, kind):
                    self.send()
                    return event
            self.send()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {kind.__name__} within {timeout} s; saw {self.seen}")
            self.sock.settimeout(remaining)
            data = self.sock.recv(65536)
            self.received += data
            self.proto.receive_data(data, time.monotonic())
            if not data:
                self.seen.extend(self.proto.events())
                found = [e for e in self.seen if isinstance(e, kind)]
                if found:
                    return found[-1]
                raise AssertionError(f"EOF before {kind.__name__}; saw {self.seen}")

    def answer_challenge(self, timeout: float = 5.0) -> None:
        """(client, after ``proto.logon()`` was sent) Read the node's CHALLENGE and
        send the PROOF the protocol answers it with."""
        self.sock.settimeout(timeout)
        while not self.proto.has_output:
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError(f"EOF before the CHALLENGE; saw {list(self.proto.events())}")
            self.received += data
            self.proto.receive_data(data, time.monotonic())
        self.send()

    def read_until_closed(self, timeout: float = 5.0) -> bytes:
        """Every byte the node sends until it closes the connection."""
        chunks = []
        self.sock.settimeout(timeout)
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
        self.received += b"".join(chunks)
        return b"".join(chunks)

    def logon(self, receipt: int | None = None) -> str:
        """(client) Log on to the node and complete the handshake (sending
        ``RECEIPT(receipt)`` first unless it is None); the node's id."""
        self.proto.logon()
        self.send()
        accepted = self.expect(LogonAccepted)
        if receipt is not None:
            self.proto.receipt(receipt)
        self.proto.complete_logon()
        self.send()
        self.expect(LogonComplete)
        return accepted.peer_node_id

    def serve_logon(self, complete: bool = True) -> str:
        """(server) Accept the node's logon; with ``complete`` also finish it."""
        requested = self.expect(LogonRequested)
        self.proto.accept_logon()
        if complete:
            self.proto.complete_logon()
        self.send()
        return requested.peer_node_id


@contextlib.contextmanager
def raw_listener(host: str = "127.0.0.1") -> Iterator[socket.socket]:
    """A plain listening socket (a node that speaks the protocol by hand)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        sock.listen(8)
        sock.settimeout(5)
        yield sock
    finally:
        sock.close()


def accept_raw(listener: socket.socket, node_id: str, *, rcvbuf: int | None = None) -> RawPeer:
    sock, _ = listener.accept()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    return RawPeer(sock, Side.SERVER, node_id)


# ============================================================== subprocess nodes


class NodeProcess:
    """A bus node in a subprocess (tests/net/nodes/node.py), killed and reaped on exit."""

    def __init__(
        self,
        tmp_path: Path,
        node_id: str,
        roles: str,
        subject: str,
        props: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.node_id = node_id
        #: environment variables set for it (on top of this process's)
        self.env = env or {}
        self.config = tmp_path / f"{node_id}.properties"
        self.config.write_text(props)
        self.log = tmp_path / f"{node_id}.log"
        self.args = [sys.executable, str(NODE_SCRIPT), str(self.config), node_id, roles, subject]
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None

    def start(self, timeout: float = 20.0) -> None:
        """Start the process and wait for its READY line."""
        assert self.proc is None
        self._stderr = self.log.open("ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(remaining, 0))
            if not ready:
                self.kill()
                raise AssertionError(f"node {self.node_id} not ready in {timeout} s: {self.tail()}")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                self.kill()
                raise AssertionError(f"node {self.node_id} exited before READY: {self.tail()}")
            line += chunk
        assert line.decode().split() == ["READY", self.node_id], line

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL and reap."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None

    def stop(self, timeout: float = 10.0) -> int:
        """Close its stdin (it closes its bus and exits); kill if it does not."""
        proc = self.proc
        assert proc is not None
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            code = proc.wait(timeout)
        finally:
            self.kill()
        return code

    def __enter__(self) -> NodeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def client_props(port: int, *, reconnect_delay_ms: int = 50, extra: str = "") -> str:
    """Properties of a node that dials 127.0.0.1:port (with reconnect)."""
    return (
        "actorbus.connections = test\n"
        "actorbus.connection.test.host = 127.0.0.1\n"
        f"actorbus.connection.test.port = {port}\n"
        "actorbus.connection.test.reconnect = true\n"
        f"actorbus.connection.test.reconnectDelay = {reconnect_delay_ms}\n" + extra
    )


VICTIM_SCRIPT = Path(__file__).with_name("victim_node.py")


class VictimProcess:
    """A node in a subprocess that only listens, logging at INFO to ``log``
    (tests/net/nodes/victim_node.py); killed and reaped on exit."""

    def __init__(self, log: Path, node_id: str = "victim", env: dict[str, str] | None = None):
        self.log = log
        self._log_file = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(VICTIM_SCRIPT), node_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
        )
        #: every line it printed
        self.printed: list[str] = []
        try:
            self.port = int(self.line(20).split()[1])
        except BaseException:
            self.kill()
            raise

    def line(self, timeout: float) -> str:
        """The next line it prints."""
        assert self.proc.stdout is not None
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n"):
            remaining = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.proc.stdout], [], [], remaining)
            if not ready:
                raise AssertionError(f"the victim said nothing within {timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                raise AssertionError("the victim exited")
            line += chunk
        self.printed.append(line.decode())
        return self.printed[-1]

    def stop(self) -> dict[str, int]:
        """Close its stdin (it closes its bus and exits); its service's counters."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        words = self.line(60).split()
        assert words[0] == "COUNTERS", words
        assert self.proc.wait(60) == 0
        self.kill()
        accepted, open_links, auth_failures = map(int, words[1:])
        return {"accepted": accepted, "open_links": open_links, "auth_failures": auth_failures}

    def kill(self) -> None:
        proc = self.proc
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        self._log_file.close()

    def __enter__(self) -> VictimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
