"""What a peer can make a node log, over real loopback links: a flood of
warnings becomes a bounded number of lines with how many more were held back,
text the peer chose (node id, logoff reason) cannot forge a line or an escape
sequence, and a service out of file descriptors says so once per period."""

from __future__ import annotations

import errno
import threading
from typing import Any

import pytest
from nodes.messages import Counter
from nodes.support import RawPeer, SystemLog, buses, wait_for

from actorbus.config import ServiceSettings
from actorbus.net.protocol import LogonRejected
from actorbus.net.service import Service

COUNTER = Counter.__type_name__


def test_65536_warnings_from_a_peer_make_a_few_lines_and_a_count(log_lines: list[str]) -> None:
    """Half the keys name types this node does not define (unknown_types), half
    are keys the peer never advertised (unexpected): each used to log a line."""
    half = 32_768
    with buses("here") as (here,):
        # above the default key-table limit, which would close the link first
        service = here.listen(0, settings=ServiceSettings(max_keys=2 * half + 16))
        with RawPeer.connect(service.port, "flood") as raw:
            raw.logon()
            for i in range(half):
                raw.proto.notify((f"nowhere.T{i}", "/s"), 0)
                raw.proto.notify((COUNTER, f"/k{i}"), (f"/k{i}", 1, i, b""))
                if i % 4096 == 4095:
                    raw.send()
            raw.send()

            def counted() -> bool:
                c = service.counters.links
                return c.unknown_types == half and c.unexpected == half

            wait_for(counted, "the node has read every frame", 30)
        during = [
            line
            for line in log_lines
            if "flood" in line and "closed" not in line and "logged on" not in line
        ]
        assert len(during) == 2, during  # one per kind of warning, in the period
    # closing the bus says what was held back
    summaries = [line for line in log_lines if "more like this" in line]
    assert len(summaries) == 2, summaries
    assert all(line.endswith(f"... and {half - 1:,} more like this") for line in summaries)
    assert len([line for line in log_lines if "flood" in line]) <= 8


def test_a_node_id_and_a_logoff_reason_cannot_forge_log_lines(log_lines: list[str]) -> None:
    node_id = "evil\n12:00:00.000 INFO    actorbus: forged\x1b[31m"
    reason = "bye\r\nFORGED LINE\x1b[2J" + "x" * 200
    with buses("here") as (here,):
        system = SystemLog(here)
        service = here.listen(0)
        with RawPeer.connect(service.port, node_id) as raw:
            raw.logon()
            raw.proto.logoff(reason)
            raw.send()
            raw.read_until_closed()
        off = SystemLog.next(system.logged_off)
        assert off.peer_node == node_id  # the notification keeps the node id as it is
        assert "\n" not in off.reason and "\x1b" not in off.reason
        assert len(off.reason) < 300  # the reason is cut
    assert log_lines
    for line in log_lines:
        assert "\n" not in line and "\r" not in line and "\x1b" not in line, line
    closed = [line for line in log_lines if "logged off by the peer" in line]
    assert len(closed) == 1
    assert "'bye\\r\\nFORGED LINE\\x1b[2J" in closed[0]
    assert "'...(100 more characters)" in closed[0]  # cut after 120
    assert "'evil\\n12:00:00.000 INFO    actorbus: forged\\x1b[31m'" in closed[0]


def test_strangers_failing_authentication_log_once_per_period(log_lines: list[str]) -> None:
    key = b"0123456789abcdef0123456789abcdef"
    with buses("here") as (here,):
        service = here._start_net().listen(0, secret=key)
        for i in range(20):
            with RawPeer.connect(service.port, f"x{i}\nforged", secret=b"w" * 32) as raw:
                raw.proto.logon()
                raw.send()
                assert raw.expect(LogonRejected).reason == "authentication failed"
                raw.read_until_closed()
        wait_for(lambda: service.counters.auth_failures == 20, "every failure is counted")
        failed = [line for line in log_lines if "did not prove" in line and "closed" not in line]
        assert len(failed) == 1, failed
        assert "claiming to be node 'x0\\nforged'" in failed[0]
    summaries = [line for line in log_lines if "did not prove" in line and "more like this" in line]
    assert len(summaries) == 2  # the warning, and the line saying each link closed
    warning, closed = sorted(summaries, key=lambda line: "closed" in line)
    assert warning.endswith("... and 19 more like this")
    # connections ending are shown whole while few (a burst of 8), then counted
    shown_closed = [line for line in log_lines if "did not prove" in line and "): closed: " in line]
    assert len(shown_closed) == 8 + 1
    assert closed.endswith("... and 12 more like this")


def test_accept_failing_for_want_of_descriptors_logs_once_per_period(
    log_lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = 0
    enough = threading.Event()

    async def no_descriptors(loop: Any, listener: Any) -> Any:
        nonlocal failures
        failures += 1
        if failures >= 200:
            enough.set()
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Service, "_accept_one", staticmethod(no_descriptors))
    monkeypatch.setattr("actorbus.net.service._ACCEPT_RETRY", 0.001)
    with buses("here") as (here,):
        here.listen(0)
        assert enough.wait(10)
        failed = [line for line in log_lines if "accept failed" in line]
        assert failed == [
            "service service-1: accept failed (Too many open files); trying again every "
            "0.001 s (too many open files: raise the limit, ulimit -n, or close idle links)"
        ]
    summary = [line for line in log_lines if "accept failed" in line][-1]
    assert summary.endswith("more like this")
    assert int(summary.rsplit("and ", 1)[1].split()[0].replace(",", "")) >= 199
