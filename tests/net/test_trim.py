"""The node fixes glibc's mmap threshold once its network layer starts, unless
the operator chose one (``MALLOC_MMAP_THRESHOLD_``): checked in a fresh
process each, since the setting is the process's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
from actorbus import Bus
from actorbus.net import _trim
with Bus(node_id="trim") as bus:
    bus.listen(0, host="127.0.0.1")
    print(_trim.mmap_threshold_fixed())
"""


@pytest.mark.parametrize(
    ("env", "fixed"), [({}, "True"), ({"MALLOC_MMAP_THRESHOLD_": "65536"}, "False")]
)
def test_the_threshold_is_fixed_unless_the_environment_sets_it(
    env: dict[str, str], fixed: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split()[-1] == fixed, out
