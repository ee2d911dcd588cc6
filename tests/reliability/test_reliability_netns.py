"""Two hosts in network namespaces joined by a veth pair, nodes in subprocesses:
5 % random loss each way (iptables), a 3 s cable cut (``ip link set down``)
and a blackhole (an iptables DROP rule) while a publisher streams to a
subscriber.  The subscriber sees DOWN then UP, the link comes back within
heartbeat timeout + reconnect delay + 1 s of the network, and every message
is delivered once, in order, or counted as dropped."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from reliability_netns import Host, netns_unavailable, topology
from reliability_support import SEED, NodeProcess, record

_WHY_NOT = netns_unavailable()
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or ""),
]

HEARTBEAT = 0.5
HEARTBEAT_REPLY = 1.5
#: a side gives up after this much silence (a heartbeat, then its reply delay)
HEARTBEAT_TIMEOUT = HEARTBEAT + HEARTBEAT_REPLY
RECONNECT = 0.5
LOSS = 0.05
CUT = 3.0
PORT = 7411
RATE = 2_000
TOTAL = 40_000


def _props(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.properties"
    path.write_text(text)
    return path


def _secret(tmp_path: Path) -> Path:
    """The secret both nodes prove (the service listens beyond loopback)."""
    path = tmp_path / "link.secret"
    if not path.exists():
        path.write_text("veth-test-secret-0123456789abcdef\n")
        path.chmod(0o600)
    return path


def _subscriber_props(tmp_path: Path, b: Host) -> Path:
    return _props(
        tmp_path,
        "subscriber",
        "actorbus.services=main\n"
        f"actorbus.service.main.host={b.address}\n"
        f"actorbus.service.main.port={PORT}\n"
        f"actorbus.service.main.secretFile={_secret(tmp_path)}\n"
        f"actorbus.service.main.heartbeatDelay={int(HEARTBEAT * 1000)}\n"
        f"actorbus.service.main.heartbeatReplyDelay={int(HEARTBEAT_REPLY * 1000)}\n",
    )


def _publisher_props(tmp_path: Path, b: Host) -> Path:
    return _props(
        tmp_path,
        "publisher",
        "actorbus.connections=up\n"
        f"actorbus.connection.up.host={b.address}\n"
        f"actorbus.connection.up.port={PORT}\n"
        f"actorbus.connection.up.secretFile={_secret(tmp_path)}\n"
        "actorbus.connection.up.reconnect=true\n"
        f"actorbus.connection.up.reconnectDelay={int(RECONNECT * 1000)}\n"
        f"actorbus.connection.up.heartbeatDelay={int(HEARTBEAT * 1000)}\n"
        f"actorbus.connection.up.heartbeatReplyDelay={int(HEARTBEAT_REPLY * 1000)}\n",
    )


def _states(node: NodeProcess, after: float) -> list[tuple[float, bool]]:
    return [(e["t"], e["up"]) for e in node.of("state") if e["t"] >= after]


def _wait_state(node: NodeProcess, up: bool, after: float, timeout: float) -> float:
    event = node.wait_event("state", lambda e: e["up"] is up and e["t"] >= after, timeout)
    return float(event["t"])


@pytest.mark.slow
def test_loss_cut_and_blackhole_over_veth(tmp_path: Path) -> None:
    print(f"netns test: loss {LOSS:.0%} each way, cut {CUT} s, seed ACTORBUS_SEED={SEED}")
    pause = threading.Event()  # never set: waits below are fixed durations of a fault
    with topology("l") as net:
        a, b = net.hosts
        a.random_loss(LOSS)
        b.random_loss(LOSS)
        sub_args = [str(_subscriber_props(tmp_path, b)), "node-b", "subscriber", "/veth"]
        pub_args = [
            str(_publisher_props(tmp_path, b)),
            "node-a",
            "publisher",
            "/veth",
            str(TOTAL),
            str(RATE),
        ]
        subscriber = NodeProcess(sub_args, netns=b.netns, name="subscriber")
        publisher = NodeProcess(pub_args, netns=a.netns, name="publisher")
        with subscriber, publisher:
            subscriber.wait_event("ready")
            publisher.wait_event("ready")
            subscriber.wait_event("state", lambda e: e["up"], timeout=30)
            publisher.wait_event("pubstate", lambda e: e["up"], timeout=30)
            publisher.send("start")
            pause.wait(3.0)

            # -- a cable cut of CUT seconds on host a
            # (the nodes stamp events with time.monotonic(), a clock every
            # process on the machine shares)
            cut_at = time.monotonic()
            a.link(up=False)
            pause.wait(CUT)
            a.link(up=True)
            restored_at = time.monotonic()
            down_at = _wait_state(subscriber, False, cut_at, timeout=HEARTBEAT_TIMEOUT + 5)
            up_at = _wait_state(subscriber, True, down_at, timeout=HEARTBEAT_TIMEOUT + 15)
            cut_bound = HEARTBEAT_TIMEOUT + RECONNECT + 1.0

            # -- a blackhole: b drops everything from a for longer than the timeout
            pause.wait(2.0)
            hole_at = time.monotonic()
            b.blackhole(a, on=True)
            pause.wait(HEARTBEAT_TIMEOUT + 1.0)
            healed_at = time.monotonic()
            b.blackhole(a, on=False)
            hole_down = _wait_state(subscriber, False, hole_at, timeout=HEARTBEAT_TIMEOUT + 5)
            hole_up = _wait_state(subscriber, True, hole_down, timeout=HEARTBEAT_TIMEOUT + 20)

            done = publisher.wait_event("done", timeout=TOTAL / RATE * 3 + 60)
            publisher.send("fence")
            subscriber.wait_event("fence", timeout=60)
            publisher.send("report")
            subscriber.send("report")
            sent_report = publisher.wait_event("report")
            got_report = subscriber.wait_event("report")
    sender: dict[str, Any] = sent_report["links"]
    receiver: dict[str, Any] = got_report["links"]
    sent = done["sent"]
    delivered = got_report["delivered"]
    in_flight_lost = (sender["messages_out"] - 1) - (receiver["messages_in"] - 1)  # fence
    unrouted = sent_report["unrouted"]
    # `lost` is the sender's own count, from the receiver's RECEIPT at each logon
    dropped = (
        unrouted + sender["dropped"] + sender["lost"] + receiver["dropped"] + receiver["unexpected"]
    )
    all_states = _states(subscriber, 0.0)
    record(
        "netns_loss_cut_blackhole",
        loss_each_way=LOSS,
        faults=2,
        sent=sent,
        delivered=delivered,
        dropped_reported=dropped,
        unrouted=unrouted,
        dropped_unwritten=sender["dropped"],
        lost_in_flight=sender["lost"],
        duplicates=got_report["duplicates"],
        reordered=got_report["reordered"],
        cut_down_after_s=round(down_at - cut_at, 2),
        cut_up_after_restore_s=round(up_at - restored_at, 2),
        cut_bound_s=cut_bound,
        blackhole_down_after_s=round(hole_down - hole_at, 2),
        blackhole_up_after_heal_s=round(hole_up - healed_at, 2),
        reconnects=sender["reconnects"],
        down_up=f"{sum(1 for _, up in all_states if not up)}/{sum(1 for _, up in all_states if up)}",
    )
    assert sent == TOTAL
    assert down_at - cut_at <= HEARTBEAT_TIMEOUT + 1.0
    assert up_at - restored_at <= cut_bound, f"reconnected {up_at - restored_at:.2f} s after"
    assert hole_down - hole_at <= HEARTBEAT_TIMEOUT + 1.0
    assert got_report["duplicates"] == 0
    assert got_report["reordered"] == 0
    assert receiver["gaps"] == receiver["duplicates"] == receiver["corrupt_frames"] == 0
    # the sender's count agrees with the pair of nodes' counters
    assert sender["lost"] == in_flight_lost >= 0
    assert delivered + dropped == sent, (got_report, sender, receiver)
    assert got_report["missing"] + (sent - got_report["last"]) == dropped
    assert sender["reconnects"] >= 2
