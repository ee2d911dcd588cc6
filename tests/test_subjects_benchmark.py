"""benchmarks/subjects.py's deterministic rows still run and still say what the
design promises: wildcards that do not match a key add no bytecode to its
publish path, and a wildcard subscriber's delivery costs what an exact one's
does.

It runs in a subprocess: the script installs its own ``sys.settrace`` tracer,
which must not replace the test runner's.  Small counts and one round; the
cross-process rows (and NATS) are left to the benchmark itself.
"""

from __future__ import annotations

from benchmark_code import run_benchmark_code

CODE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import subjects
rows = subjects.publish_cost(1, n_count=200, n_wall=2_000, wildcards=1_000)
rows += subjects.delivery_rate(1, n=2_000, n_count=200)
print(json.dumps(rows))
"""


def test_the_deterministic_rows_run_and_meet_their_budgets() -> None:
    rows = {r["name"]: r for r in run_benchmark_code(CODE, timeout=120)}
    publish = rows["publish, bytecodes, 1 exact sub + 1,000 non-matching wildcards"]
    # joined at subscribe time: the publish path is the same code, to the instruction
    assert publish["unit"] == "ops" and publish["value"] > 0
    assert publish["value"] == publish["baseline_value"], publish
    assert publish["ok"] is True
    assert "(identical)" in publish["note"]
    wall = rows["publish, ns, 1 exact sub + 1,000 non-matching wildcards"]
    assert wall["value"] > 0 and wall["baseline_value"] > 0
    assert wall["ok"] is None  # reported, not judged
    delivery = rows["deliveries, bytecodes, sub actor on /fx/*/bid (levels wildcard)"]
    assert delivery["ok"] is True
    assert 0.95 <= delivery["ratio"] <= 1.05, delivery
    rate = rows["deliveries, sub actor on /fx/*/bid (levels wildcard)"]
    assert rate["value"] > 0 and rate["ok"] is None
