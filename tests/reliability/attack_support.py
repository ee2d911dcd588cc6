"""Hostile peers for the memory tests: attackers that speak the link protocol by
hand over real sockets (plain or TLS), the victim's resident set read from
/proc, and a self-signed certificate for a TLS service.

Every attacker closes what it opens.  Many connections at once come from
different loopback source addresses (127.0.0.2, 127.0.0.3, ...), so the
victim's per-address cap (``max_connections_per_host``) stays at its default.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from actorbus.bus import Message
from actorbus.config import LinkSettings
from actorbus.errors import ProtocolError
from actorbus.net import LinkProtocol, Side
from actorbus.net.protocol import LogonAccepted, LogonComplete
from actorbus.testing import encode_frame

MIB = 1_048_576
#: connections per loopback source address (under the per-address cap, 128)
PER_SOURCE = 100
_fresh = itertools.count(1)


def rss(pid: int) -> int:
    """The resident set size (bytes) of process ``pid``, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key): (cert, key)."""
    cert, key = directory / "victim.pem", directory / "victim.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", "/CN=victim", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    key.chmod(0o600)
    return cert, key


def client_context(cert: Path | None) -> ssl.SSLContext | None:
    """A TLS client context trusting ``cert`` (None: plain TCP)."""
    if cert is None:
        return None
    return ssl.create_default_context(cafile=str(cert))


def _source(index: int) -> str:
    return f"127.0.0.{2 + index // PER_SOURCE}"


def open_socket(
    port: int, tls: ssl.SSLContext | None, index: int = 0, timeout: float = 20.0, rcvbuf: int = 0
) -> socket.socket:
    """A connection to the victim from the ``index``-th attacker's source address
    (through TLS when ``tls`` is set; the handshake done); ``rcvbuf``: a small
    receive buffer, for one that does not read."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(timeout)
        sock.bind((_source(index), 0))
        sock.connect(("127.0.0.1", port))
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
    except BaseException:
        sock.close()
        raise
    return sock


def _client(node_id: str, secret: bytes = b"") -> LinkProtocol:
    return LinkProtocol(
        Side.CLIENT,
        node_id,
        time.monotonic(),
        is_known_type=lambda name: True,
        settings=LinkSettings(logon_timeout=0),
        secret=secret,
    )


def _until_logged_on(sock: socket.socket, proto: LinkProtocol) -> None:
    """Answer the victim until both sides completed the logon."""
    while True:
        for event in proto.events():
            if isinstance(event, LogonAccepted):
                proto.complete_logon()
            elif isinstance(event, LogonComplete):
                sock.sendall(proto.data_to_send())
                return
        sock.sendall(proto.data_to_send())
        data = sock.recv(65536)
        if not data:
            raise AssertionError("the victim closed the connection during the logon")
        proto.receive_data(data, time.monotonic())


def logged_on(
    port: int, tls: ssl.SSLContext | None, secret: bytes, index: int = 0, rcvbuf: int = 0
) -> socket.socket:
    """A connection logged on with a fresh node id and the victim's secret (an
    attacker that holds it: a peer of the cluster gone bad)."""
    return logged_on_with(port, tls, secret, index, rcvbuf)[0]


def logged_on_with(
    port: int, tls: ssl.SSLContext | None, secret: bytes, index: int = 0, rcvbuf: int = 0
) -> tuple[socket.socket, LinkProtocol]:
    """:func:`logged_on`, and the protocol object that logged on (to send more)."""
    sock = open_socket(port, tls, index, rcvbuf=rcvbuf)
    try:
        proto = _client(f"insider-{next(_fresh)}", secret)
        proto.logon()
        _until_logged_on(sock, proto)
    except BaseException:
        sock.close()
        raise
    return sock, proto


def request_flood(
    sock: socket.socket, proto: LinkProtocol, message: Message, most: int, batch: int = 1_000
) -> int:
    """Send ``message`` as a request again and again (at most ``most`` bytes)
    and never read, until the victim resets the connection; returns the bytes
    sent."""
    cls = type(message)
    encode = cls.__wire_encode__
    body = message if encode is None else encode(message)
    key = (cls.__type_name__, message.subject)
    sent = 0
    request_id = 0
    sock.settimeout(30)
    try:
        while sent < most:
            for _ in range(batch):
                request_id += 1
                proto.request(key, request_id, body)
            data = proto.data_to_send()
            sock.sendall(data)
            sent += len(data)
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError, TimeoutError):
        pass
    return sent


def flood_without_reading(sock: socket.socket, data: bytes, most: int) -> int:
    """Send ``data`` again and again (at most ``most`` bytes) and never read,
    until the victim resets the connection; returns the bytes sent."""
    sent = 0
    sock.settimeout(30)
    try:
        while sent < most:
            sock.sendall(data)
            sent += len(data)
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError, TimeoutError):
        pass
    return sent


def _answer(sock: socket.socket, proto: LinkProtocol) -> bool:
    """Read the victim's first answer to a LOGON; True if it accepted it (then
    the logon is completed).  A victim with a secret answers with its
    CHALLENGE, which an attacker without the secret cannot meet."""
    try:
        data = sock.recv(65536)
    except (ConnectionResetError, TimeoutError, ssl.SSLError):
        return False
    if not data:
        return False
    proto.receive_data(data, time.monotonic())
    try:
        accepted = any(isinstance(event, LogonAccepted) for event in proto.events())
    except ProtocolError:
        return False
    if accepted:
        proto.complete_logon()
        with contextlib.suppress(OSError):
            sock.sendall(proto.data_to_send())
    return accepted


def logon_cycles(port: int, tls: ssl.SSLContext | None, count: int) -> int:
    """``count`` times: connect, log on with a fresh node id, close (once the
    victim answered).  Returns how many logons the victim accepted (none when
    it has a secret)."""
    accepted = 0
    for _ in range(count):
        proto = _client(f"attacker-{next(_fresh)}")
        with contextlib.closing(open_socket(port, tls)) as sock:
            proto.logon()
            sock.sendall(proto.data_to_send())
            accepted += _answer(sock, proto)
    return accepted


@contextlib.contextmanager
def held(port: int, tls: ssl.SSLContext | None, count: int, first: bytes) -> Iterator[int]:
    """``count`` connections that each send ``first`` and then hold still; yields
    how many the victim took (closed when the block ends)."""
    socks: list[socket.socket] = []
    try:
        for index in range(count):
            try:
                sock = open_socket(port, tls, index)
            except (OSError, ssl.SSLError):
                continue  # (the victim refused it: over a limit)
            socks.append(sock)
            with contextlib.suppress(OSError):
                sock.sendall(first)
        yield len(socks)
    finally:
        for sock in socks:
            sock.close()


def logon_frame(node_id: str) -> bytes:
    """The LOGON a fresh client sends first."""
    proto = _client(node_id)
    proto.logon()
    return proto.data_to_send()


def partial_frame(size: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a frame that says it is ``size`` bytes long."""
    return size.to_bytes(4, "big") + b"\x92" + b"\x00" * (sent - 5)


def heartbeat_frames(count: int) -> bytes:
    """``count`` HEARTBEAT frames back to back."""
    from actorbus.net.protocol import FrameType

    return encode_frame(int(FrameType.HEARTBEAT)) * count


__all__ = [
    "MIB",
    "client_context",
    "heartbeat_frames",
    "held",
    "logon_cycles",
    "flood_without_reading",
    "logged_on",
    "logged_on_with",
    "logon_frame",
    "make_certificate",
    "open_socket",
    "partial_frame",
    "request_flood",
    "rss",
]
