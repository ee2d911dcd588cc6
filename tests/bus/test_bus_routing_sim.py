"""benchmarks/routing_sim.py's simulated networks (docs/routing.md,
"Simulation"): random connected graphs with cycles, real routers joined through
the transport seam, every frame counted.  The counts are those the forwarding
tree predicts: one frame per tree link for a new key, a state change and a
notification; every subscriber gets each notification once; after a node
leaves, at most two frames per link for each link-state announcement the
change makes (and one per link that changes state), and the tree and the feeds
are whole again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import routing_sim  # noqa: E402


@pytest.mark.parametrize(("nodes", "extra", "seed"), [(60, 15, 1), (60, 60, 2)])
def test_counts_grow_no_worse_than_the_tree_predicts(nodes: int, extra: int, seed: int) -> None:
    row = routing_sim.simulate(nodes, extra, seed)
    n = row["nodes"]
    assert row["tree_links"] == n - 1
    assert row["once"] and row["all_up"] and row["after_leave_ok"]
    # one frame per tree link, whatever the cycles
    assert row["advertise_frames"] == n - 1
    assert row["state_change_frames"] == n - 1
    assert row["notify_frames"] == n - 1
    # per node: one record per link, one aggregate per key and forwarding link
    assert row["key_state_max"] <= row["degree_max"]
    # a node leaving: its k neighbours' new LSAs cross each remaining link at
    # most once per direction; each link says when it joins or leaves the tree
    k, remaining = row["leaving_degree"], row["links_before"] - row["leaving_degree"]
    assert row["leave_route_frames"] <= 2 * remaining * k + 2 * remaining
    assert row["leave_rounds"] <= n
