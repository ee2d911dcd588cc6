"""benchmarks/routing.py still runs end to end: every path it measures (a
direct link, feed forwarding and source routes through one forwarder) carries
every message and round trip, each node process reports its CPU time, and the
2-server NATS cluster forms and carries its messages.

Small counts, one round, in a subprocess (the script starts its node processes
and the NATS servers itself); the figures are the benchmark's business, not this
test's: it checks counts and that the measures are there.
"""

from __future__ import annotations

from benchmark_code import run_benchmark_code

CODE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import routing
out = {}
for name, hops, routed in (("direct", 0, False), ("feed1", 1, False), ("route2", 2, True)):
    rate, receiver, forwarder = routing._one_way(2_000, hops, routed)
    p50, p99, lost = routing._round_trip(50, hops, routed)
    out[name] = [rate, receiver, forwarder, p50, lost]
out["nats"] = list(routing._nats_round(2_000, 50))
print(json.dumps(out))
"""


def test_every_path_of_the_routing_benchmark_runs_and_is_measured() -> None:
    out = run_benchmark_code(CODE)
    for name in ("direct", "feed1", "route2"):
        rate, receiver, forwarder, p50, lost = out[name]
        # (the sink counted all 2,000 for a rate to exist; every round trip came back)
        assert rate > 0 and p50 > 0 and lost == 0, (name, out[name])
        assert receiver > 0, (name, out[name])
        assert (forwarder > 0) == (name != "direct"), (name, out[name])
    nats_rate, nats_p50 = out["nats"]
    assert nats_rate > 0 and nats_p50 > 0


BUDGET_CODE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import forwarding_cpu, routing
(budget,) = forwarding_cpu.main(["--n", "2000", "--rounds", "1"])
print(json.dumps({"row": budget, "name": routing.budget_row(1e-6, 2e-6, "x")["name"]}))
"""


def test_forwarding_cpu_reports_the_routing_benchmarks_budget_row() -> None:
    """benchmarks/forwarding_cpu.py is routing.py's budget row alone: the same
    row (name, budget), measured on both paths."""
    out = run_benchmark_code(BUDGET_CODE)
    row = out["row"]
    assert row["name"] == out["name"] == "CPU per message, forwarder (feed, 1 hop)"
    assert row["budget"] == "<= 1.5x"
    assert row["value"] > 0 and row["baseline_value"] > 0
