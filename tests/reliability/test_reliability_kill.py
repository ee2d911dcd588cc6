"""A replier node that dies (SIGKILL) or freezes (SIGSTOP) with 1,000 requests of
ours in flight: every request ends — with an ERROR reply naming the lost link —
within the heartbeat timeout, and nothing is left waiting."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from reliability_support import Asker, NodeProcess, ReplyStatus, record, start_actors

from actorbus import Bus
from actorbus.config import ConnectionSettings

HEARTBEAT = 0.2
HEARTBEAT_REPLY = 0.3
HEARTBEAT_TIMEOUT = HEARTBEAT + HEARTBEAT_REPLY
REQUESTS = 1_000


def _holder_props(tmp_path: Path) -> Path:
    path = tmp_path / "holder.properties"
    path.write_text(
        "actorbus.services=main\n"
        "actorbus.service.main.host=127.0.0.1\n"
        "actorbus.service.main.port=0\n"
        f"actorbus.service.main.heartbeatDelay={int(HEARTBEAT * 1000)}\n"
        f"actorbus.service.main.heartbeatReplyDelay={int(HEARTBEAT_REPLY * 1000)}\n"
    )
    return path


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_requests_in_flight_all_end_when_the_replier_node_dies(tmp_path: Path, how: str) -> None:
    node = NodeProcess(
        [str(_holder_props(tmp_path)), "holder-node", "holder", "/hold"], name="holder"
    )
    with node, Bus(node_id="asker-node") as bus:
        port = node.wait_event("ready")["ports"][0]
        asker = Asker("/hold")
        start_actors(bus, asker)
        link = bus.connect(
            "127.0.0.1",
            port,
            settings=ConnectionSettings(
                heartbeat_delay=HEARTBEAT, heartbeat_reply_delay=HEARTBEAT_REPLY
            ),
        )
        link.wait_logged_on(10)
        assert asker.up.wait(10), "the remote replier never came UP"
        asker.ask(REQUESTS)
        node.wait_event("held", lambda e: e["count"] >= REQUESTS, timeout=30)
        assert len(asker.ends) == 0  # all in flight
        killed_at = time.monotonic()
        node.kill(getattr(signal, how))
        try:
            ends = asker.ends.wait_for(lambda ev: len(ev) >= REQUESTS, HEARTBEAT_TIMEOUT + 5)
        finally:
            if how == "SIGSTOP":
                node.kill(signal.SIGKILL)
        link_reason = link.wait_closed(10)  # no reconnect: the link is over
        last = max(t for t, *_ in ends) - killed_at
        statuses = {status for _, _, status, _ in ends}
        reasons = {reason for *_, reason in ends}
        record(
            f"kill_{how.lower()}",
            requests=REQUESTS,
            requests_ended=len(ends),
            errors=sum(1 for e in ends if e[2] is ReplyStatus.ERROR),
            last_end_after_s=round(last, 3),
            heartbeat_timeout_s=HEARTBEAT_TIMEOUT,
            link_reason=link_reason,
        )
        assert len(ends) == REQUESTS
        assert len({handle_id for _, handle_id, _, _ in ends}) == REQUESTS
        assert statuses == {ReplyStatus.ERROR}
        assert all("holder-node" in reason and "lost" in reason for reason in reasons), reasons
        assert all(h.is_done for h in asker.handles)
        assert bus.router.outstanding_requests == 0
        # SIGKILL: the kernel closes the socket at once.  SIGSTOP: only the
        # heartbeat notices, after at most one heartbeat timeout of silence.
        assert last <= HEARTBEAT_TIMEOUT + 0.25, f"last request ended {last:.3f} s after {how}"
    assert node.proc is not None
    assert node.proc.returncode == -signal.SIGKILL
