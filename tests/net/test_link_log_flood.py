"""A stranger who connects 20,000 times, logging on each time with a new node
id, cannot flood the log of the node it connects to: the victim (a real
process, logging at INFO) writes at most a few dozen lines, and those lines
still account for every connection (the count of those held back)."""

from __future__ import annotations

import re
import socket
import struct
import time
from pathlib import Path

from nodes.support import RawPeer, VictimProcess

CONNECTIONS = 20_000
#: "a few dozen": one line per 10 s per kind while the flood lasts, plus a burst
MOST_LINES = 60
_SINCE = re.compile(r"\(([\d,]+) more like this since the last such line\)")
_SUMMARY = re.compile(r"\(([\d,]+) more like this in the last 10 s\)")
_AT_CLOSE = re.compile(r"\.\.\. and ([\d,]+) more like this")


def _accounted(lines: list[str], what: str) -> int:
    """The events the lines containing ``what`` account for: a line shown for
    one counts it and the ones held back before it ("since the last such
    line"); a summary ("in the last 10 s", "... and N more") counts the N it
    sums up (its text is the last of them)."""
    total = 0
    for line in lines:
        if what not in line:
            continue
        since = _SINCE.search(line)
        summary = _SUMMARY.search(line) or _AT_CLOSE.search(line)
        if summary:
            total += int(summary.group(1).replace(",", ""))
        else:
            total += 1 + (int(since.group(1).replace(",", "")) if since else 0)
    return total


def test_20000_logons_with_new_node_ids_write_a_few_dozen_lines(tmp_path: Path) -> None:
    log_path = tmp_path / "victim.log"
    with VictimProcess(log_path) as victim:
        started = time.monotonic()
        for i in range(CONNECTIONS):
            with RawPeer.connect(victim.port, f"stranger-{i}", run_id=f"run-{i}") as peer:
                assert peer.logon() == "victim"
                # reset, not close: 20,000 closes would fill the ephemeral
                # ports with TIME_WAIT on this side
                peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        took = time.monotonic() - started
        counters = victim.stop()
    assert counters["accepted"] == CONNECTIONS
    lines = log_path.read_text(errors="replace").splitlines()
    print(f"{CONNECTIONS} logons in {took:.1f} s: {len(lines)} log lines")
    for line in lines:
        print(line[:200])
    assert len(lines) <= MOST_LINES, len(lines)
    # few lines, and still honest: every logon and every close is shown or counted
    assert _accounted(lines, "logged on with node") == CONNECTIONS
    assert _accounted(lines, "): closed: ") == CONNECTIONS
