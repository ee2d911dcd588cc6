"""Network namespaces for the reliability tests: hosts joined by veth pairs, with
iptables rules for loss and blackholes, all removed again whatever happens.

Only addresses inside the namespaces this module creates are used (10.231.N.0/24,
N derived from the process id); nothing outside them is touched.  Deleting a
namespace removes its veth ends and its iptables rules with it; processes still
running in it are killed first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Host", "Topology", "netns_unavailable", "topology"]

_PREFIX = f"abr{os.getpid() % 100_000}"
_SUBNET = f"10.231.{os.getpid() % 200 + 20}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def netns_unavailable() -> str | None:
    """Why network-namespace tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if shutil.which("ip") is None:
        return "iproute2 is not installed (no `ip` command)"
    probe = f"{_PREFIX}probe"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"`ip netns add` is not available here: {done.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One network namespace with one veth end and address."""

    netns: str
    interface: str
    address: str

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``command`` inside the namespace."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.netns, *command],
            capture_output=True,
            text=True,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"in {self.netns}: {' '.join(command)} failed ({done.returncode}): "
                f"{done.stderr.strip()}"
            )
        return done

    def iptables(self, *rule: str) -> None:
        if shutil.which("iptables") is None:
            raise AssertionError(
                "iptables is not installed; `make test` installs it (tools/ensure-system-tools.sh)"
            )
        self.run("iptables", "-w", *rule)

    def random_loss(self, probability: float) -> None:
        """Drop this share of every packet arriving here (on top of what TCP resends)."""
        self.iptables(
            "-A",
            "INPUT",
            "-i",
            self.interface,
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            f"{probability:.4f}",
            "-j",
            "DROP",
        )

    def blackhole(self, peer: Host, on: bool) -> None:
        """Drop (``on``) or stop dropping everything arriving from ``peer``."""
        self.iptables("-I" if on else "-D", "INPUT", "-s", peer.address, "-j", "DROP")

    def link(self, up: bool) -> None:
        """Take this host's veth end down (a cut cable) or up again."""
        self.run("ip", "link", "set", self.interface, "up" if up else "down")


@dataclass
class Topology:
    hosts: list[Host] = field(default_factory=list)


@contextlib.contextmanager
def topology(tag: str) -> Iterator[Topology]:
    """Two hosts, ``a`` and ``b``, joined by a veth pair: a = .1, b = .2 in the
    namespaces' own /24.  Everything is deleted on exit, also after a failure."""
    names = [f"{_PREFIX}{tag}a", f"{_PREFIX}{tag}b"]
    interfaces = [f"ab{os.getpid() % 10_000}{tag}a", f"ab{os.getpid() % 10_000}{tag}b"]
    made: list[str] = []
    try:
        for name in names:
            _ip("netns", "add", name)
            made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        _ip(
            "link",
            "add",
            interfaces[0],
            "netns",
            names[0],
            "type",
            "veth",
            "peer",
            "name",
            interfaces[1],
            "netns",
            names[1],
        )
        hosts = []
        for index, (name, interface) in enumerate(zip(names, interfaces, strict=True)):
            address = f"{_SUBNET}.{index + 1}"
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", interface)
            _ip("-n", name, "link", "set", interface, "up")
            hosts.append(Host(name, interface, address))
        yield Topology(hosts)
    finally:
        for name in made:
            _kill_inside(name)
            _ip("netns", "del", name, check=False)


def _kill_inside(netns: str) -> None:
    """SIGKILL whatever still runs in ``netns`` (the tests reap their own nodes
    first; this only guards a failure path)."""
    done = _ip("netns", "pids", netns, check=False)
    for pid in done.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
