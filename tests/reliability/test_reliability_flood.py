"""The unthrottled load test, with the defaults: a publisher process publishes
as fast as it can to a subscriber process whose callback takes 50 µs per
message.  The publisher's memory stays bounded by the output queue limit
(``message_queue_bytes``, 64 MiB) instead of growing until an out-of-memory
kill; a publisher that ignores congestion is reset at the limit, and every
message it lost that way is counted (delivered + dropped + lost ==
published), with no reconnect refused; one that waits while its feed is
congested (``feed.wait_ready``) is never reset and drops nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reliability_support import HERE, NodeProcess, record

pytestmark = pytest.mark.slow

FLOOD_SCRIPT = HERE / "flood_node.py"
SUBJECT = "/flood"
#: padding per message: the queue limit holds about 64 K of them, which the
#: slow subscriber (20 K a second) works through in a few seconds
PAD = 1_000
MIB = 1_048_576
#: the output queue limit (the default) and what else a publishing process may
#: hold over its baseline: message objects made but not yet encoded by the I/O
#: thread, allocator slack
LIMIT = 64 * MIB
MARGIN = 96 * MIB


def _report(node: NodeProcess, count: int) -> dict[str, Any]:
    """The node's ``count``-th report."""
    node.send("report")
    node.wait_event("report", lambda e: len(node.of("report")) >= count, 20)
    return node.of("report")[count - 1]


def _run(tmp_path: Path, mode: str, seconds: float) -> dict[str, Any]:
    slow_props = tmp_path / "slow.properties"
    slow_props.write_text(
        "actorbus.services = main\n"
        "actorbus.service.main.host = 127.0.0.1\n"
        "actorbus.service.main.port = 0\n"
    )
    slow = NodeProcess([str(slow_props), "slow", "slow", SUBJECT], name="slow", script=FLOOD_SCRIPT)
    with slow:
        port = slow.wait_event("ready")["ports"][0]
        flood_props = tmp_path / "flood.properties"
        flood_props.write_text(
            "actorbus.connections = slow\n"
            "actorbus.connection.slow.host = 127.0.0.1\n"
            f"actorbus.connection.slow.port = {port}\n"
            "actorbus.connection.slow.reconnect = true\n"
            "actorbus.connection.slow.reconnectDelay = 50\n"
        )
        args = [str(flood_props), "flood", "flood", SUBJECT, str(seconds), mode, str(PAD)]
        flood = NodeProcess(args, name="flood", script=FLOOD_SCRIPT)
        with flood:
            baseline = flood.wait_event("ready")["rss"]
            flood.wait_event("link", lambda e: e["on"])
            slow.wait_event("link", lambda e: e["on"])
            flood.send("start")
            done = flood.wait_event("done", timeout=seconds + 60)
            published = done["published"]
            # what a reset lost is learnt at the next logon: once the link is up
            # again, what is still queued reaches the subscriber
            flood.events.wait_for(
                lambda items: [e["on"] for e in items if e["ev"] == "link"][-1], 30
            )
            ours = _report(flood, 1)["links"]
            target = published - ours["dropped"] - ours["lost"]
            slow.send("report", until=target, timeout=60)
            theirs = slow.wait_event("report", timeout=70)
            ours = _report(flood, 2)["links"]
            peak = max(value for _, value in done["rss"])
            return {
                "mode": mode,
                "seconds": done["seconds"],
                "published": published,
                "unrouted": done["unrouted"],
                "delivered": theirs["delivered"],
                "dropped": ours["dropped"],
                "lost": ours["lost"],
                "resets": ours["over_limit"],
                "reconnects": ours["reconnects"],
                "congestions": ours["congestions"],
                "waits": done["waits"],
                "told": len(done["told"]),
                "refused_here": ours["refused_logons"],
                "refused_there": theirs["links"]["refused_logons"],
                "rss_baseline_mib": round(baseline / MIB, 1),
                "rss_peak_mib": round(peak / MIB, 1),
                "rss_growth_mib": round((peak - baseline) / MIB, 1),
                "rss": done["rss"],
            }


@pytest.mark.parametrize(("mode", "seconds"), [("ignore", 15.0), ("wait", 8.0)])
def test_an_unthrottled_publisher_stays_bounded(tmp_path: Path, mode: str, seconds: float) -> None:
    got = _run(tmp_path, mode, seconds)
    rss = got.pop("rss")
    record(f"flood_{mode}", **got, rss_last_mib=round(rss[-1][1] / MIB, 1))
    assert got["delivered"] + got["dropped"] + got["lost"] == got["published"], got
    assert got["refused_here"] == 0 and got["refused_there"] == 0, got
    assert got["rss_growth_mib"] * MIB <= LIMIT + MARGIN, got
    assert got["told"] >= 1 and got["congestions"] >= 1, got
    if mode == "wait":
        assert (got["dropped"], got["lost"], got["resets"]) == (0, 0, 0), got
    else:
        assert got["resets"] >= 1 and got["dropped"] > 0, got
