"""How much of a burst of connections a node keeps for good.

A victim node in a child process (a service with a secret, plain or TLS, whose
publisher sends 500 notifications a second to a healthy subscriber in this
process); COUNT connections at once that each send 2,000 bytes of a 4 KiB
frame before logging on (tests/reliability/attack_support.py's attackers),
held 3 s, then closed.  Printed for the victim, before the attack, at its
peak and 4 s after the end: the resident set, and the interpreter's arenas
and the bytes in use in them (``sys._debugmallocstats``), each after a full
collection and ``malloc_trim`` in the victim, so "settled" is what stays for
good.  docs/reliability.md, "What stays", has the figures.

Usage: ``PYTHONPATH=src python tools/burst_memory.py [plain|tls] [COUNT]``
(defaults: plain, 1500).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

SECRET = b"burst-memory-secret-0123456789abcdef"
SUBJECT = "/healthy"


def _mallocstats() -> str:
    """``sys._debugmallocstats()``'s text (it writes to the C stderr)."""
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    os.close(write)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    os.set_blocking(read, False)
    out = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(read, 65536):
            out += chunk
    os.close(read)
    return out.decode()


def _stats() -> dict[str, int]:
    """This process, after a full collection and malloc_trim."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)
    text = _mallocstats()

    def field(name: str) -> int:
        match = re.search(rf"# {name}\s*=\s*([\d,]+)", text)
        return int(match.group(1).replace(",", "")) if match else -1

    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))
    return {
        "rss_mb": rss,
        "arenas": field("arenas allocated current"),
        "in_use_mb": field("bytes in allocated blocks") // 1_048_576,
    }


def victim(properties: str) -> None:
    """The child: the node, then one stats line per line on stdin."""
    from reliability_support import CountingPublisher

    from actorbus import Bus

    bus = Bus.from_properties(properties, node_id="victim")
    publisher = CountingPublisher(bus, SUBJECT, total=100_000_000, rate=500.0)
    assert bus.net is not None
    print(json.dumps({"port": bus.net.services[0].port}), flush=True)
    publisher.start()
    try:
        for _ in sys.stdin:
            print(json.dumps(_stats()), flush=True)
    finally:
        publisher.close()
        bus.close()


def main(kind: str, count: int) -> None:
    from attack_support import client_context, held, make_certificate, partial_frame
    from reliability_support import SeqSubscriber, start_actors

    from actorbus import Bus
    from actorbus.config import ConnectionSettings

    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "link.secret"
        secret.write_bytes(SECRET + b"\n")
        secret.chmod(0o600)
        cert, key = make_certificate(Path(tmp))
        lines = [
            "actorbus.services = main",
            "actorbus.service.main.host = 127.0.0.1",
            "actorbus.service.main.port = 0",
            f"actorbus.service.main.secretFile = {secret}",
            f"actorbus.service.main.maxConnections = {count + 500}",
        ]
        if kind == "tls":
            lines += [
                f"actorbus.service.main.tlsCertFile = {cert}",
                f"actorbus.service.main.tlsKeyFile = {key}",
            ]
        properties = Path(tmp) / "victim.properties"
        properties.write_text("\n".join(lines) + "\n")
        child = subprocess.Popen(
            [sys.executable, __file__, "--victim", str(properties)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None
        assert child.stdout is not None
        healthy = Bus(node_id="healthy")
        try:
            port = json.loads(child.stdout.readline())["port"]
            subscriber = SeqSubscriber(SUBJECT)
            start_actors(healthy, subscriber)
            settings = ConnectionSettings(
                secret_file=str(secret), tls_ca_file=str(cert) if kind == "tls" else None
            )
            healthy.connect("127.0.0.1", port, settings=settings).wait_logged_on(10)

            def stats(when: str) -> None:
                assert child.stdin is not None
                assert child.stdout is not None
                child.stdin.write("\n")
                child.stdin.flush()
                print(f"{when:>8}: {child.stdout.readline().strip()}", flush=True)

            time.sleep(2)  # the healthy link's traffic under way
            stats("before")
            tls = client_context(cert) if kind == "tls" else None
            with held(port, tls, count, partial_frame(4_096, 2_000)) as taken:
                time.sleep(3)  # the victim reads what every connection sent
                stats("peak")
            time.sleep(4)  # the node's trims: 1.5 s after the links close, and 1.5 s later
            stats("settled")
            print(f"{taken} connections; healthy link: {subscriber.stats}")
        finally:
            healthy.close()
            child.stdin.close()
            child.wait(30)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--victim"]:
        victim(sys.argv[2])
    else:
        main(
            sys.argv[1] if len(sys.argv) > 1 else "plain",
            int(sys.argv[2]) if len(sys.argv) > 2 else 1500,
        )
