"""The fuzz targets under hypothesis (every run), and under atheris for the CI
budget through ``fuzz/run_ci.py`` (slow): zero crashes, executions per second
reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from reliability_support import SEED, record

from fuzz_targets import FUZZ, load, mutated

#: The CI budget for all targets together, in seconds.
CI_BUDGET = 60


codec_target = load("fuzz_codec", "reliability_fuzz_codec")
handshake_target = load("fuzz_handshake", "reliability_fuzz_handshake")
protocol_target = load("fuzz_protocol", "reliability_fuzz_protocol")
run_ci = load("run_ci", "reliability_run_ci")

PROPERTY = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(autouse=True)
def _print_seed() -> None:
    print(f"hypothesis seed: ACTORBUS_SEED={SEED}")


# ---------------------------------------------------------------- the codec


@seed(SEED)
@PROPERTY
@given(st.binary(max_size=2000))
def test_codec_target_on_arbitrary_bytes(data: bytes) -> None:
    codec_target.one_input(data)


@seed(SEED)
@PROPERTY
@given(mutated(codec_target.seeds()))
def test_codec_target_on_mutated_valid_bodies(data: bytes) -> None:
    codec_target.one_input(data)


def test_codec_target_seeds_decode() -> None:
    for data in codec_target.seeds():
        cls = codec_target.CLASSES[data[0]]
        message = codec_target._CODEC.decode(cls, data[2:])
        assert type(message) is cls
        codec_target.one_input(data)


# ------------------------------------------------------------ the handshake


@seed(SEED)
@PROPERTY
@given(st.binary(max_size=400))
def test_handshake_target_on_arbitrary_programs(data: bytes) -> None:
    handshake_target.one_input(data)


@seed(SEED)
@PROPERTY
@given(mutated(handshake_target.seeds()), st.binary(max_size=60))
def test_handshake_target_on_mutated_logons(data: bytes, more: bytes) -> None:
    handshake_target.one_input(data + more)


def test_handshake_seeds_reach_connected_and_exchange_data() -> None:
    trace = handshake_target.run(handshake_target.seeds()[1], split=False)
    finals = [entry for entry in trace if entry[0] == "final"]
    assert [state for _, _, state, _ in finals] == ["CONNECTED", "CONNECTED"]
    events = [entry[2] for entry in trace if entry[0] == "event"]
    assert any(e.startswith("NotificationReceived") for e in events)
    assert any(e.startswith("RequestReceived") for e in events)


# ----------------------------------------------------- the protocol decoder


@seed(SEED)
@PROPERTY
@given(mutated(run_ci._protocol_seeds()))
def test_protocol_target_on_mutated_valid_streams(data: bytes) -> None:
    protocol_target.one_input(data)


# ------------------------------------------------------------- atheris in CI


def _run_ci(
    tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    report = tmp_path / "fuzz.json"
    done = subprocess.run(
        [
            sys.executable,
            str(FUZZ / "run_ci.py"),
            "--json",
            str(report),
            "--seed",
            str(SEED),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=CI_BUDGET * 3 + 120,
        check=False,
    )
    results = json.loads(report.read_text()) if report.exists() else []
    return done, results


@pytest.mark.slow
def test_fuzz_targets_run_their_ci_budget_without_a_crash(tmp_path: Path) -> None:
    done, results = _run_ci(tmp_path, "--budget", str(CI_BUDGET))
    print(done.stdout)
    for result in results:
        record(
            f"fuzz_{result['target']}",
            fuzz_execs=result["executions"],
            execs_per_s=result["execs_per_second"],
            new_inputs=result["new_units"],
            fuzz_crashes=int(result["crashed"]),
            seconds=round(result["seconds"], 1),
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["target"] for r in results] == ["protocol", "handshake", "codec", "multicast"]
    for result in results:
        assert not result["crashed"], result["error"]
        assert result["executions"] > 0
        assert result["execs_per_second"] > 0


@pytest.mark.slow
def test_run_ci_exits_non_zero_and_names_the_input_on_a_crash(tmp_path: Path) -> None:
    target = tmp_path / "fuzz_planted.py"
    target.write_text(
        "def seeds():\n"
        "    return [b'ab']\n"
        "def one_input(data):\n"
        "    if data[:1] == b'Z' and len(data) > 2:\n"
        "        raise KeyError('planted bug')\n"
    )
    artifacts = tmp_path / "crashes"
    done, results = _run_ci(
        tmp_path, "--budget", "20", "--targets", str(target), "--artifacts", str(artifacts)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CRASH" in done.stdout
    assert "KeyError: 'planted bug'" in done.stdout
    [result] = results
    assert result["crashed"]
    [crash] = result["crash_files"]
    assert Path(crash).read_bytes()[:1] == b"Z"


def test_handshake_harness_bounds_its_simulated_network() -> None:
    """Regression: this program asks the simulated network to duplicate the bytes
    in flight 57 times; the harness once grew its buffer to 16 GB (libFuzzer OOM)."""
    import base64
    import resource

    program = base64.b64decode(
        "AAAH//8CAQ78/ywsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLCwsLA76"
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    handshake_target.one_input(program)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 256, f"RSS grew by {grown_mb:.0f} MB"
