"""The calculator demo as three OS processes linked over loopback TCP by the
demo's own properties files (with the port rewritten to a free one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from calculator_nodes import Process, demo_configs, free_port


def run(properties: Path) -> Process:
    return Process("run", str(properties))


@pytest.fixture
def configs(tmp_path: Path) -> dict[str, Path]:
    return demo_configs(tmp_path, free_port())


def test_three_processes_compute_averages_and_survive_a_calculator_restart(
    configs: dict[str, Path],
) -> None:
    nodes: list[Process] = []
    try:
        calc = run(configs["calculator"])
        nodes.append(calc)
        source = run(configs["source"])
        sink = run(configs["sink"])
        nodes += [source, sink]
        sink.wait_for(lambda line: line.endswith("over 5"))
        # kill the middle node: the sink sees its feed go DOWN, then UP again after restart
        calc.proc.kill()
        sink.wait_for(lambda line: line.endswith("feed DOWN"))
        calc.stop()
        calc2 = run(configs["calculator"])
        nodes.append(calc2)
        sink.wait_for(lambda line: line.endswith("feed UP"))
        sink.wait_for(lambda line: line.endswith("over 5"))
    finally:
        for node in nodes:
            node.stop()
