"""End-to-end back-pressure across a real link between two processes.

A publisher node offers 50 000 msg/s on ``/fast``; the consumer node streams
it into a consumer that takes 10 ms per event, through a 256-slot buffer.
With BLOCK the stream's push-back travels to the publisher as ``Pressure``
notifications and it holds: nothing is lost, and neither node's memory grows
with the offered load.  With DISCARD_OLDEST no push-back is asked: what the
consumer cannot take is dropped and counted, exactly.  In both, ``/other``,
published at 1 000 msg/s on the same link, keeps flowing: with BLOCK the link
itself is never stopped (``input_pauses == 0``).  Figures are printed (docs/streams.md,
docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

NODE = Path(__file__).with_name("stream_node.py")
SECONDS = 4.0


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(policy: str) -> tuple[dict[str, Any], dict[str, Any]]:
    consumer = subprocess.Popen(
        [sys.executable, str(NODE), "consumer", policy, str(SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    publisher = None
    try:
        assert consumer.stdout is not None
        first = consumer.stdout.readline()
        assert first.startswith("port "), first
        publisher = subprocess.Popen(
            [sys.executable, str(NODE), "publisher", first.split()[1], str(SECONDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        assert publisher.stdout is not None and publisher.stdin is not None
        pub = json.loads(publisher.stdout.readline())
        con = json.loads(consumer.stdout.readline())
        publisher.stdin.close()
        assert publisher.wait(30) == 0
        assert consumer.wait(30) == 0
        return pub, con
    finally:
        for proc in (publisher, consumer):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()


def _other_keeps_flowing(con: dict[str, Any]) -> None:
    # every /other message arrived, at a rate near the 1 000/s offered
    assert con["other_received"] == con["other_published"] > 0
    assert con["other_rate"] > 300, con


def test_without_pressure_the_backstop_stops_the_whole_link() -> None:
    """The contrast: a BLOCK stream that tells its publisher nothing
    (``pressure=False``).  Its events pile up in the actor's mailbox until the
    link's input_backlog (10 000) stops reading the link: from then on every
    feed of the link waits, ``/other`` too."""
    pub, con = _run("block-unpaced")
    print(f"\nunpaced: publisher {pub}\nunpaced: consumer {con}")
    assert pub["pressure"] == 0
    assert con["input_pauses"] >= 1
    assert 10_000 <= con["mailbox_max_depth"] < 20_000, con
    assert con["other_received"] < pub["other"] / 2, (pub, con)


@pytest.mark.parametrize("policy", ["block", "discard"])
def test_a_slow_stream_across_a_link(policy: str) -> None:
    pub, con = _run(policy)
    print(f"\n{policy}: publisher {pub}\n{policy}: consumer {con}")
    assert con["published"] == pub["fast"]
    assert con["max_fill"] <= 256
    # memory: bounded by the buffer and the pressure, not by the offered load
    assert pub["rss_mb"] < 150 and con["rss_mb"] < 150, (pub, con)
    for node in (pub, con):  # 200 000 messages held anywhere would be tens of MiB
        assert node["rss_end_mb"] - node["rss_start_mb"] < 25, node
    _other_keeps_flowing(con)
    if policy == "block":
        # the publisher is paced: the link never stops reading, the mailbox stays short
        assert con["input_pauses"] == 0 and con["mailbox_max_depth"] < 1_000, con
        assert pub["pressure"] > 0 and pub["held"] > 0
        assert con["received"] == pub["fast"] and con["contiguous"]
        assert con["discarded"] == 0
        # held to about what 10 ms per event drains (100/s), not 50 000/s
        assert pub["fast"] < 100 * SECONDS + 256 + 2_000, pub
    else:
        assert pub["pressure"] == 0
        # 50 000/s of deliveries into one actor that also sleeps 10 ms per event:
        # its mailbox is bounded by the link's input_backlog (10 000) at worst
        assert con["mailbox_max_depth"] < 12_000, con
        assert con["in_order"]
        assert con["discarded"] == pub["fast"] - con["received"] > 0
        assert pub["fast"] > 20 * con["received"], (pub, con)
