"""The calculator demo over reliable multicast, as three OS processes: the
source publishes the data points once on a multicast channel (loopback, TTL 0,
a random group and port) and two calculator processes each compute and print
the moving averages; one calculator killed leaves the other going."""

from __future__ import annotations

import random
from pathlib import Path

from calculator_nodes import DEMO, Process


def configs(directory: Path) -> dict[str, Path]:
    rng = random.SystemRandom()
    group = f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}"
    port = str(rng.randrange(20_000, 60_000))
    out = {}
    for role, node_id in (("source", "source"), ("calculator", "calc1"), ("calculator", "calc2")):
        text = (DEMO / f"multicast-{role}-node.properties").read_text()
        text = text.replace("239.255.77.1", group).replace("7702", port)
        text = text.replace(
            f"nodeId = {'calculator1' if role == 'calculator' else role}", f"nodeId = {node_id}"
        )
        path = directory / f"{node_id}.properties"
        path.write_text(text)
        out[node_id] = path
    return out


def test_one_source_two_calculators_over_a_multicast_channel(tmp_path: Path) -> None:
    paths = configs(tmp_path)
    assert "nodeId = calc2" in paths["calc2"].read_text()
    nodes: list[Process] = []
    try:
        calcs = [Process("run", str(paths[name])) for name in ("calc1", "calc2")]
        nodes += calcs
        source = Process("run", str(paths["source"]))
        nodes.append(source)
        for calc in calcs:
            calc.wait_for(lambda line: line.endswith("feed UP"))
            calc.wait_for(lambda line: line.endswith("over 5"))
        calcs[0].proc.kill()
        calcs[1].wait_for(lambda line: line.endswith("over 5"))
        source.proc.kill()  # heartbeats stop: the remaining calculator's data feed goes DOWN
        calcs[1].wait_for(lambda line: line.endswith("feed DOWN"), timeout=30)
    finally:
        for node in nodes:
            node.stop()
