"""A multicast LAN segment in network namespaces: a bridge in a hub namespace
and one namespace per host, each joined to the bridge by a veth pair, with a
route for 224.0.0.0/4 on its veth end.  Multicast sent there reaches every
host on the segment and nothing else: the namespaces have no other interface
but their loopback, so no datagram leaves the machine.  Everything is deleted
on exit, also after a failure (deleting a namespace removes its veth ends and
iptables rules; processes still in it are killed first).

Addresses: 10.232.N.0/24 (N derived from the process id), host i = .(i+1).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reliability_netns import Host, _ip, _kill_inside

__all__ = ["NODE", "McNode", "segment"]

NODE = Path(__file__).resolve().parent / "multicast_node.py"
ROOT = Path(__file__).resolve().parents[2]
_PREFIX = f"amc{os.getpid() % 100_000}"
_SUBNET = f"10.232.{os.getpid() % 200 + 20}"


@contextlib.contextmanager
def segment(tag: str, hosts: int) -> Iterator[list[Host]]:
    hub = f"{_PREFIX}{tag}h"
    made: list[str] = []
    try:
        _ip("netns", "add", hub)
        made.append(hub)
        _ip("-n", hub, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        _ip("-n", hub, "link", "set", "br0", "up")
        out = []
        for i in range(hosts):
            name = f"{_PREFIX}{tag}{i}"
            _ip("netns", "add", name)
            made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
            inside, outside = f"mc{i}", f"p{os.getpid() % 10_000}{tag}{i}"
            _ip("link", "add", inside, "netns", name, "type", "veth", "peer", "name", outside,
                "netns", hub)  # fmt: skip
            _ip("-n", hub, "link", "set", outside, "master", "br0", "up")
            address = f"{_SUBNET}.{i + 1}"
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", inside)
            _ip("-n", name, "link", "set", inside, "up", "multicast", "on")
            _ip("-n", name, "route", "add", "224.0.0.0/4", "dev", inside)
            out.append(Host(name, inside, address))
        yield out
    finally:
        for name in made:
            _kill_inside(name)
            _ip("netns", "del", name, check=False)


class McNode:
    """A multicast_node.py process in a host's namespace, read line by line."""

    def __init__(self, host: Host, role: str, node_id: str, group: str, port: int, *extra: str):
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{NODE.parent}"}
        self.proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                host.netns,
                sys.executable,
                str(NODE),
                role,
                node_id,
                group,
                str(port),
                host.address,
                *extra,
            ],  # fmt: skip
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.stderr = ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def expect(self, ev: str, timeout: float = 30.0) -> dict[str, Any]:
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {ev!r} within {timeout} s") from None
            if line is None:
                self.stop()
                raise AssertionError(f"node exited before {ev!r}: {self.stderr[-3000:]}")
            item: dict[str, Any] = json.loads(line)
            if item["ev"] == ev:
                return item

    def kill(self) -> None:
        """SIGKILL (``ip netns exec`` execs the node: the pid is the node's)."""
        self.proc.kill()
        self.stop()

    def stop(self) -> None:
        """Close stdin (the node exits), wait, collect stderr, close the pipes."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read()
            self.proc.stderr.close()
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
