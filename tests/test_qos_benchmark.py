"""benchmarks/qos.py still runs end to end: every row (at-least-once and
exactly-once across a link against a plain feed, persistent publish+ack against
JetStream pipelined, sequential and fsyncing, and the publish -> ack latencies)
is printed and measured.

Small counts, one round, in a subprocess (the script starts its node processes
and the nats-servers itself); the figures are the benchmark's business, not
this test's: it checks that each row is there with a positive value and peer
value (each run itself checks every message arrived once and in order, and
every JetStream publish was acknowledged and stored).
"""

from __future__ import annotations

from benchmark_code import run_benchmark_code

CODE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import qos
rows = qos.main(["--n", "2000", "--latency-n", "50", "--rounds", "1"])
print(json.dumps(rows))
"""

ROWS = [
    "at-most-once (plain feed), 1 link",
    "at-least-once, 1 link",
    "exactly-once, 1 link",
    "persistent publish+ack (journal, SyncPolicy.batch)",
    "persistent publish+ack vs sequential JetStream",
    "persistent publish+ack vs JetStream fsync always",
    "persistent publish -> ack p50",
    "persistent publish -> ack p99",
    "persistent publish -> ack p50 vs JetStream fsync always",
    "persistent publish -> ack p99 vs JetStream fsync always",
]


def test_every_row_of_the_qos_benchmark_is_printed_and_measured() -> None:
    rows = run_benchmark_code(CODE)
    assert [r["name"] for r in rows] == ROWS
    for r in rows:
        assert r["value"] > 0, r
        if r["name"] != ROWS[0]:
            assert r["baseline_name"] and r["baseline_value"] > 0, r
    assert rows[3]["budget"] == ">= 2x JetStream" and isinstance(rows[3]["ok"], bool)
