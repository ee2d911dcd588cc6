"""The forwarding tree in a simulated network (docs/routing.md, "Simulation").

Run: ``PYTHONPATH=src python benchmarks/routing_sim.py [--nodes 100] [--seeds 5]``

Each node is a real :class:`~actorbus.bus.router.Router` whose links are
forwarding parties joined through the transport seam alone (as
``actorbus.testing.InProcessLink`` joins two), but every frame goes through one
queue processed on one thread, so a run is deterministic and its frames can be
counted and ordered in *rounds* (a frame sent while handling a round-r frame is
of round r+1).  Graphs are random and connected: a random tree plus extra
edges, each of which closes a cycle.  Per graph it measures

* the routing state each node keeps: one record per forwarding link (the
  tree) and, per advertised key, one aggregate per forwarding link;
* the frames one advertisement change costs (a publisher going DOWN);
* the frames one notification costs, and that every subscriber gets it once;
* after a node leaves: the frames and rounds until the network is quiet again,
  and that the tree and the feeds are whole again.

and prints one markdown table row per graph (``--json``: the rows as JSON).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import row

from actorbus.bus.feeds import PublishFeed, SubscribeFeed
from actorbus.bus.message import MessageKey, Notification
from actorbus.bus.router import Router
from actorbus.bus.scope import FeedState, Scope


class SimTick(Notification, type_name="routingsim.Tick"):
    n: int


class _Transport:
    """PartyTransport of one direction of one link: every call becomes a frame
    in the network's queue, for the party of the sending node at the other end."""

    def __init__(self, net: SimNet, src: int, dst: int) -> None:
        self.net, self.src, self.dst = net, src, dst

    def __getattr__(self, name: str) -> Callable[..., None]:
        if not name.startswith("send_"):
            raise AttributeError(name)
        method = name[len("send_") :]
        if method.endswith("_from"):  # the sender goes as the transport's last argument
            method = method[: -len("_from")]

            def send_from(sender: Any, *args: Any) -> None:
                self.net.frame(self, method, args)

            return send_from
        return lambda *args: self.net.frame(self, method, args)


class SimNet:
    """Routers joined by simulated forwarding links (see the module doc)."""

    def __init__(self, n: int, max_hops: int = 8) -> None:
        self.max_hops = max_hops
        self.routers: list[Router] = []
        for i in range(n):
            router = Router()
            router.node_id = f"n{i:03d}"
            self.routers.append(router)
        #: (at node, of peer) -> the party
        self.parties: dict[tuple[int, int], Any] = {}
        self.queue: collections.deque[tuple[int, _Transport, str, tuple[Any, ...]]] = (
            collections.deque()
        )
        self.frames: collections.Counter[str] = collections.Counter()
        self.round = 0
        self.edges: set[tuple[int, int]] = set()

    def frame(self, transport: _Transport, method: str, args: tuple[Any, ...]) -> None:
        self.frames[method] += 1
        self.queue.append((self.round + 1, transport, method, args))

    def link(self, a: int, b: int) -> None:
        self.edges.add((min(a, b), max(a, b)))
        ra, rb = self.routers[a], self.routers[b]
        hops = self.max_hops
        self.parties[a, b] = ra.attach(
            rb.node_id, _Transport(self, a, b), forward=True, max_hops=hops
        )
        self.parties[b, a] = rb.attach(
            ra.node_id, _Transport(self, b, a), forward=True, max_hops=hops
        )

    def cut(self, a: int, b: int) -> None:
        """The link a-b is lost: both ends detach (frames in flight on it are lost)."""
        self.edges.discard((min(a, b), max(a, b)))
        pa, pb = self.parties.pop((a, b)), self.parties.pop((b, a))
        self.queue = collections.deque(
            item for item in self.queue if {item[1].src, item[1].dst} != {a, b}
        )
        pa.detach("cut")
        pb.detach("cut")

    def leave(self, node: int) -> None:
        for a, b in sorted(self.edges):
            if node in (a, b):
                self.cut(a, b)

    def run(self) -> int:
        """Deliver frames until none is left; the rounds it took."""
        start, rounds = self.round, 0
        while self.queue:
            r, transport, method, args = self.queue.popleft()
            self.round = r
            rounds = max(rounds, r - start)
            party = self.parties.get((transport.dst, transport.src))
            if party is not None:
                getattr(party, method)(*args)
        self.round = start
        return rounds

    def measure(self, fn: Callable[[], object]) -> tuple[collections.Counter[str], int, float]:
        """Frames by kind, rounds and seconds until quiet after ``fn()``."""
        before = collections.Counter(self.frames)
        began = time.perf_counter()
        fn()
        rounds = self.run()
        return self.frames - before, rounds, time.perf_counter() - began

    # ---------------------------------------------------------------- checks
    def carrying(self) -> int:
        """Links carrying feeds (counted once, both ends agreeing)."""
        views = [r.spanning.view() for r in self.routers]
        ends = sum(len(v.carrying) for v in views)
        return ends // 2

    def connected(self, without: int | None = None) -> bool:
        nodes = [i for i in range(len(self.routers)) if i != without]
        adj = collections.defaultdict(set)
        for a, b in self.edges:
            if without not in (a, b):
                adj[a].add(b)
                adj[b].add(a)
        seen, todo = {nodes[0]}, [nodes[0]]
        while todo:
            for nxt in adj[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return len(seen) == len(nodes)


def random_graph(net: SimNet, extra: int, rng: random.Random) -> None:
    n = len(net.routers)
    for i in range(1, n):
        net.link(i, rng.randrange(i))
    added = 0
    while added < extra:
        a, b = rng.sample(range(n), 2)
        if (min(a, b), max(a, b)) not in net.edges:
            net.link(a, b)
            added += 1


def simulate(n: int = 100, extra: int = 50, seed: int = 1, max_hops: int = 8) -> dict[str, Any]:
    """One random graph of ``n`` nodes and ``n - 1 + extra`` links, every link's
    ``maxHops`` as given (see the module doc)."""
    rng = random.Random(seed)
    net = SimNet(n, max_hops)
    tree_frames, tree_rounds, tree_s = net.measure(lambda: random_graph(net, extra, rng))
    key = MessageKey(SimTick, "/sim")
    got = [0] * n
    subs = []
    for i, router in enumerate(net.routers):
        sub: SubscribeFeed[SimTick] = SubscribeFeed(router, None, key, Scope.LOCAL_AND_REMOTE)
        sub.message_callback(lambda m, f, i=i: got.__setitem__(i, got[i] + 1))
        sub.status_callback(lambda state, feed: None)
        sub.subscribe()
        subs.append(sub)
    origin = rng.randrange(n)
    pub: PublishFeed[SimTick] = PublishFeed(net.routers[origin], None, key, Scope.LOCAL_AND_REMOTE)
    pub.status_callback(lambda state, feed: None)
    adv_frames, adv_rounds, _ = net.measure(pub.advertise)
    up_frames, _, _ = net.measure(lambda: pub.update_feed_state(FeedState.UP))
    all_up = all(s.feed_state is FeedState.UP for j, s in enumerate(subs) if j != origin)
    notify_frames, _, _ = net.measure(lambda: pub.publish(SimTick("/sim", n=1)))
    once = got[:origin] + got[origin + 1 :] == [1] * (n - 1)
    degree = [len(r.spanning.view().carrying) + len(r.spanning.view().blocked) for r in net.routers]
    key_state = [len(r.entries[key].fwd_pub) for r in net.routers]
    # the hardest leaving that keeps the rest connected: the root (every node
    # elects again) or else the node carrying the most tree links
    views = [r.spanning.view() for r in net.routers]
    order = sorted(range(n), key=lambda i: (views[i].parent != "", -len(views[i].carrying), i))
    leaving = next(i for i in order if i != origin and net.connected(without=i))
    leaving_links = len(views[leaving].carrying)
    edges_before = set(net.edges)
    tree_links = net.carrying()
    leave_frames, leave_rounds, leave_s = net.measure(lambda: net.leave(leaving))
    left_ok = net.carrying() == n - 2 and all(
        s.feed_state is FeedState.UP for j, s in enumerate(subs) if j not in (origin, leaving)
    )
    got[:] = [0] * n
    net.measure(lambda: pub.publish(SimTick("/sim", n=2)))
    once_after = all(got[j] == 1 for j in range(n) if j not in (origin, leaving))
    return {
        "nodes": n,
        "links": n - 1 + extra,
        "seed": seed,
        "tree_links": tree_links,
        "degree_max": max(degree),
        "degree_mean": sum(degree) / n,
        "key_state_max": max(key_state),
        "form_route_frames": tree_frames["route"],
        "form_rounds": tree_rounds,
        "form_s": tree_s,
        "advertise_frames": adv_frames["advertise"],
        "advertise_rounds": adv_rounds,
        "state_change_frames": up_frames["feed_status"],
        "notify_frames": notify_frames["notify"],
        "all_up": all_up,
        "once": once,
        "leaving": f"{net.routers[leaving].node_id}"
        + (" (root)" if views[leaving].parent == "" else "")
        + f", {leaving_links} tree links",
        "leaving_degree": len([e for e in edges_before if leaving in e]),
        "links_before": len(edges_before),
        "leave_frames": sum(leave_frames.values()),
        "leave_route_frames": leave_frames["route"],
        "leave_rounds": leave_rounds,
        "leave_s": leave_s,
        "after_leave_ok": left_ok and once_after,
    }


COLUMNS = [
    ("nodes", "nodes"),
    ("links", "links"),
    ("degree_max", "max links/node (tree records)"),
    ("key_state_max", "max aggregates/key/node"),
    ("form_route_frames", "ROUTE frames to form"),
    ("form_rounds", "rounds to form"),
    ("advertise_frames", "ADVERTISE frames, 1 new key"),
    ("state_change_frames", "FEED_STATUS frames, 1 change"),
    ("notify_frames", "NOTIFY frames, 1 message"),
    ("leaving", "node that leaves"),
    ("leave_frames", "frames after it leaves"),
    ("leave_rounds", "rounds to converge"),
    ("leave_ms", "ms to converge"),
    ("ok", "once, UP, whole again"),
]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        shown = {
            **r,
            "leave_ms": f"{r['leave_s'] * 1000:.0f}",
            "ok": "yes" if r["once"] and r["all_up"] and r["after_leave_ok"] else "NO",
        }
        lines.append("| " + " | ".join(str(shown[k]) for k, _ in COLUMNS) + " |")
    return "\n".join(lines)


def main() -> list[dict[str, Any]]:
    """Print the table (or the rows as JSON); the rows ``run_all.py`` reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [
        simulate(args.nodes, extra, seed)
        for extra in (args.nodes // 4, args.nodes)
        for seed in range(1, args.seeds + 1)
    ]
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    out = []
    for r in rows:
        what = f"routing sim, {r['nodes']} nodes, {r['links']} links"
        out.append(
            row(
                f"{what}: frames per notification",
                r["notify_frames"],
                "frames",
                baseline_name="tree links (nodes - 1)",
                baseline_value=r["nodes"] - 1,
                budget="= 1.0x",
                ok=r["notify_frames"] == r["nodes"] - 1 and r["once"],
            )
        )
        out.append(
            row(
                f"{what}: frames until quiet after {r['leaving']} leaves",
                r["leave_frames"],
                "frames",
                note=f"{r['leave_rounds']} rounds; tree and feeds whole again: "
                f"{'yes' if r['after_leave_ok'] else 'NO'}",
                ok=r["after_leave_ok"],
            )
        )
    return out


if __name__ == "__main__":
    main()
