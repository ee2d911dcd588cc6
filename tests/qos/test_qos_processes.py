"""QoS between real processes (tests/qos/qos_process_node.py): exactly-once across a
SIGKILL and restart of the subscriber's process, and of a persistent
publisher's process; at-least-once through a proxy that resets the link.

The subscriber's application reports what it got (``got`` events) before it
acknowledges it by hand, so the numbers it acknowledged are exactly the
numbers it reported whose seq is at or below its acknowledged watermark; a
subscriber killed and restarted says which watermark its saved state holds
(``resume``), and what it reported above that is not committed: it comes
again, marked redelivered.  The tests check the committed numbers are 1..N,
each once, in order.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actorbus.testing_chaos import ChaosProxy, ChaosSchedule
from line_process import LineProcess

ROOT = Path(__file__).resolve().parents[2]
NODE = Path(__file__).resolve().parent / "qos_process_node.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
SEED = int(os.environ.get("ACTORBUS_SEED", "20261128"))
#: seconds any one wait may take on a loaded 2-core host
WAIT = 120.0


class Node(LineProcess):
    """A qos_process_node.py process; every ``got`` item it reported is kept in :attr:`items`."""

    def __init__(self, name: str, /, **config: Any) -> None:
        super().__init__(
            [sys.executable, str(NODE), json.dumps(config)],
            env=ENV,
            name=name,
            stdin=True,
        )
        self.items: list[list[int]] = []

    def wait_event(
        self,
        ev: str,
        pred: Callable[[dict[str, Any]], bool] = lambda e: True,
        timeout: float = WAIT,
    ) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def match(line: str) -> bool:
            event = json.loads(line)
            if event["ev"] == "got":
                self.items.extend(event["items"])
            if event["ev"] == "error":
                raise AssertionError(f"{self.name}: {event['text']}")
            if event["ev"] == ev and pred(event):
                found.append(event)
                return True
            return False

        self.wait_for(match, timeout)
        return found[0]

    def send(self, cmd: str, **fields: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.reap()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
        self.reap()


@pytest.fixture
def nodes() -> Iterator[list[Node]]:
    """Every node a test starts: closed (or reaped) at its end."""
    started: list[Node] = []
    yield started
    for node in started:
        node.close()


def _up(node: Node) -> None:
    node.wait_event("status", lambda e: e["qos"] is not None or e["refused"] is not None)


def _numbers(items: list[list[int]]) -> list[int]:
    return [n for _, n, _ in items]


def test_exactly_once_across_a_kill_and_restart_of_the_subscriber(
    tmp_path: Path, nodes: list[Node]
) -> None:
    total = 20_000
    pub = Node("pub", role="pub", node_id="pub", listen=True, delivery="EXACTLY_ONCE",
               total=total, chunk=50, interval=0.005)  # fmt: skip
    nodes.append(pub)
    ready = pub.wait_event("ready")
    sub_config: dict[str, Any] = {
        "role": "sub",
        "node_id": "sub",
        "connect": ready["port"],
        "delivery": "EXACTLY_ONCE",
        "name": "app",
        "state_dir": str(tmp_path / "state"),
        "origin": ready["origin"],
    }
    first = Node("sub-1", **sub_config)
    nodes.append(first)
    assert first.wait_event("resume")["through"] <= 0  # no saved state yet
    _up(first)
    pub.send("start")
    first.wait_event("got", lambda e: len(first.items) >= total // 3)
    first.kill()

    second = Node("sub-2", **sub_config)
    nodes.append(second)
    watermark = second.wait_event("resume")["through"]
    second.wait_event("got", lambda e: bool(second.items) and second.items[-1][0] >= total)
    second.send("report", origin=ready["origin"])
    assert second.wait_event("acked")["through"] == total

    reported = len(first.items)
    assert 0 < watermark <= max(seq for seq, _, _ in first.items), (watermark, reported)
    committed = [item for item in first.items if item[0] <= watermark]
    assert all(seq > watermark for seq, _, _ in second.items), "acknowledged ones came again"
    numbers = _numbers(committed) + _numbers(second.items)
    assert numbers == list(range(1, total + 1)), "lost, duplicated or out of order"
    assert all(seq == n for seq, n, _ in committed + second.items)
    # what the first one reported but had not saved as acknowledged comes again, marked so
    uncommitted = {seq for seq, _, _ in first.items if seq > watermark}
    again = {seq for seq, _, redelivered in second.items if redelivered}
    assert uncommitted <= again, sorted(uncommitted - again)[:10]
    print(f"[figures] subscriber kill: reported before the kill {reported}, watermark "
          f"{watermark}, reported but not saved {len(uncommitted)}, redelivered after the "
          f"restart {len(again)}")  # fmt: skip


def test_exactly_once_application_state_across_kills_of_the_subscriber(
    tmp_path: Path, nodes: list[Node]
) -> None:
    """The application keeps its effect in app_state, saved with the watermark
    in one write: killed with SIGKILL twice mid-stream and restarted, it has
    applied every number exactly once, in order (its tally counts a number that
    is not the last one + 1, so a duplicate or a gap shows)."""
    total = 20_000
    pub = Node("pub", role="pub", node_id="pub", listen=True, delivery="EXACTLY_ONCE",
               total=total, chunk=50, interval=0.005)  # fmt: skip
    nodes.append(pub)
    ready = pub.wait_event("ready")
    sub_config: dict[str, Any] = {
        "role": "sub",
        "node_id": "sub",
        "connect": ready["port"],
        "delivery": "EXACTLY_ONCE",
        "name": "app",
        "state_dir": str(tmp_path / "state"),
        "origin": ready["origin"],
        "app_state": True,
    }
    sub = Node("sub-1", **sub_config)
    nodes.append(sub)
    assert sub.wait_event("resume")["tally"] == [0, 0, 0, 0]
    _up(sub)
    pub.send("start")
    resumed = []
    for kill in (1, 2):
        sub.wait_event("got", lambda e: len(sub.items) >= total // 3)
        sub.kill()
        sub = Node(f"sub-{kill + 1}", **sub_config)
        nodes.append(sub)
        resume = sub.wait_event("resume")
        count, _, last, out_of_turn = resume["tally"]
        # the state and the watermark were saved together
        assert count == last == resume["through"] > 0 and out_of_turn == 0, resume
        resumed.append(last)
    assert resumed[1] > resumed[0]
    assert wait_for_tally(sub, ready["origin"], total) == [total, total * (total + 1) // 2,
                                                            total, 0]  # fmt: skip
    again = sum(redelivered for _, _, redelivered in sub.items)
    print(f"[figures] application state, two subscriber kills: resumed after {resumed}, "
          f"0 lost, 0 applied twice; {again} reported again as effects outside "
          f"the state (redelivered)")  # fmt: skip


def wait_for_tally(node: Node, origin: str, total: int) -> list[int]:
    """The node's tally once it acknowledged ``total``."""
    node.wait_event("got", lambda e: bool(node.items) and node.items[-1][0] >= total)
    for _ in range(100):
        node.send("report", origin=origin)
        event = node.wait_event("acked")
        if event["through"] >= total:
            tally: list[int] = event["tally"]
            return tally
    raise AssertionError(f"{node.name} never acknowledged {total}")


def test_exactly_once_across_a_kill_and_restart_of_a_persistent_publisher(
    tmp_path: Path, nodes: list[Node]
) -> None:
    total = 20_000
    sub = Node("sub", role="sub", node_id="sub", listen=True, delivery="EXACTLY_ONCE",
               persistent=True, name="app", state_dir=str(tmp_path / "state"))  # fmt: skip
    nodes.append(sub)
    port = sub.wait_event("ready")["port"]
    pub_config: dict[str, Any] = {
        "role": "pub",
        "node_id": "pub",
        "connect": port,
        "delivery": "EXACTLY_ONCE",
        "persistent": True,
        "journal": str(tmp_path / "journal"),
        "total": total,
        "chunk": 50,
        "interval": 0.005,
    }
    first = Node("pub-1", **pub_config)
    nodes.append(first)
    ready = first.wait_event("ready")
    assert ready["last_seq"] == 0
    _up(sub)
    first.send("start")
    sub.wait_event("got", lambda e: len(sub.items) >= total // 3)
    first.kill()
    before = len(sub.items)

    second = Node("pub-2", **pub_config)
    nodes.append(second)
    again = second.wait_event("ready")
    resumed = again["last_seq"]
    assert again["origin"] == ready["origin"] and resumed >= 1
    second.send("start")
    sub.wait_event("got", lambda e: bool(sub.items) and sub.items[-1][1] >= total)
    sub.send("report", origin=ready["origin"])
    assert sub.wait_event("acked")["through"] == total
    assert _numbers(sub.items) == list(range(1, total + 1)), "lost, duplicated or out of order"
    assert all(seq == n for seq, n, _ in sub.items)
    print(f"[figures] publisher kill: delivered before the kill {before}, the restarted "
          f"publisher's journal held {resumed}")  # fmt: skip


def test_at_least_once_through_link_resets_loses_nothing_and_keeps_order(
    nodes: list[Node],
) -> None:
    total = 100_000
    sub = Node("sub", role="sub", node_id="sub", listen=True, delivery="AT_LEAST_ONCE",
               name="chaos")  # fmt: skip
    nodes.append(sub)
    port = sub.wait_event("ready")["port"]
    schedule = ChaosSchedule(seed=SEED, reset_interval=0.15)
    with ChaosProxy(("127.0.0.1", port), schedule, name="qos") as proxy:
        pub = Node("pub", role="pub", node_id="pub", connect=proxy.port, delivery="AT_LEAST_ONCE",
                   total=total, chunk=200, interval=0.005)  # fmt: skip
        nodes.append(pub)
        origin = pub.wait_event("ready")["origin"]
        _up(sub)
        before = proxy.counts.resets
        pub.send("start")
        sub.wait_event(
            "got", lambda e: bool(sub.items) and max(n for _, n, _ in e["items"]) >= total
        )
        pub.wait_event("done")
        sub.send("report", origin=origin)
        assert sub.wait_event("acked")["through"] == total, "not every message was acknowledged"
        resets = proxy.counts.resets - before
    seen = 0
    duplicates = 0
    for _, n, _ in sub.items:
        if n <= seen:
            duplicates += 1
        else:
            assert n == seen + 1, f"{seen + 1}..{n - 1} lost (or out of order)"
            seen = n
    assert seen == total
    assert resets >= 3, f"the proxy reset the link {resets} times while it carried the messages"
    redelivered = sum(r for _, _, r in sub.items)
    print(f"[figures] at-least-once through resets: {total} delivered, resets {resets}, "
          f"handed over again {duplicates}, marked redelivered {redelivered}")  # fmt: skip
