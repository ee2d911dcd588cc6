"""Recording an actor and replaying it: the calculator demo byte for byte, a
timer-driven actor under the fake clock, a changed actor, damaged files, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import msgpack
import pytest
from demos.calculator.actors import Source
from demos.calculator.messages import DataPoint, MovingAverage
from demos.calculator.run import run

from actorbus.actors.recording import MAGIC, RecordingError, read_recording
from actorbus.bus import codec
from actorbus.node import Bus
from actorbus.replay import replay
from actorbus.testing import wait_until

ROOT = Path(__file__).resolve().parents[1]
POINTS = 200
WINDOW = 5


def record_calculator(path: Path, *, seed: int = 7) -> None:
    """The calculator demo in one process, its calculator recorded, for POINTS points."""
    stop = threading.Event()
    averages: list[str] = []

    def out(line: str) -> None:
        if " over " in line:
            averages.append(line)
            if len(averages) == POINTS - WINDOW + 1:
                stop.set()

    summary = run(
        period_ms=1,
        seed=seed,
        count=POINTS,
        window=WINDOW,
        out=out,
        stop=stop,
        duration=60,
        record_to=path,
    )
    assert summary["published"] == POINTS - WINDOW + 1, summary


@pytest.fixture(scope="module")
def calculator_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "calculator.rec"
    record_calculator(path)
    return path


def test_the_calculator_recorded_for_200_points_replays_byte_identically(
    calculator_recording: Path,
) -> None:
    header, records = read_recording(calculator_recording)
    assert header.actor == "demos.calculator.actors:Calculator"
    assert header.kwargs is not None and header.kwargs["window"] == WINDOW
    messages = [r for r in records if r["kind"] == "message"]
    assert len(messages) == POINTS
    assert [codec.decode(DataPoint, r["body"]).subject for r in messages] == ["/demo/data"] * POINTS
    published = [out for r in records for out in r["out"]]
    assert len(published) == POINTS - WINDOW + 1
    assert {t for t, _, _ in published} == {MovingAverage.__type_name__}

    result = replay(calculator_recording)

    assert result.matched, result.difference
    assert len(result.steps) == len(records)
    for step in result.steps:
        assert step.replayed is not None
        assert step.replayed["out"] == step.recorded["out"]  # the encoded bytes
        assert step.replayed["fsm"] == step.recorded["fsm"]
    states = [state for r in records for _, state in r["fsm"]]
    assert states[0] == "Initializing" and "Publishing" in states and states[-1] == "Shutdown"


def test_a_replay_of_a_changed_actor_names_the_first_differing_output(
    calculator_recording: Path,
) -> None:
    header, records = read_recording(calculator_recording)
    assert header.kwargs is not None
    # a window of 4 publishes its first average one point earlier
    result = replay(calculator_recording, kwargs={**header.kwargs, "window": 4})

    assert not result.matched
    first = next(
        i
        for i, r in enumerate(records)
        if r["kind"] == "message" and r["fsm"][0][1] != "Collecting"
    )
    assert result.difference is not None
    assert result.difference.startswith(f"input #{first - 1} (message subscribe ")
    assert "0 publishes recorded, 1 replayed" in result.difference
    assert result.steps[-1].index == first - 1


def test_a_timer_driven_actor_replays_with_the_same_firings_at_the_recorded_times(
    tmp_path: Path,
) -> None:
    path = tmp_path / "source.rec"
    kwargs = {"subject": "/t/data", "period_ms": 2, "seed": 11, "count": 30}
    with Bus() as bus:
        source = Source("source", **kwargs)  # type: ignore[arg-type]
        bus.register(source)
        recording = bus.record(source, path, kwargs=kwargs)
        inbox = bus.inbox(DataPoint, "/t/data")
        bus.startup(source).wait(5)
        got = [inbox.receive(5) for _ in range(30)]
        wait_until(lambda: source.timer is None, 5)  # the tick after the last stopped it
        bus.shutdown(source).wait(5)
        recording.close()
    assert [m.value for m in got if m is not None] == [
        codec.decode(DataPoint, out[2]).value for r in read_recording(path)[1] for out in r["out"]
    ]

    result = replay(path)

    assert result.matched, result.difference
    timers = [s for s in result.steps if s.recorded["kind"] == "timer"]
    assert len(timers) == 31  # 30 points, then the tick that stops the timer
    for step in timers:
        assert step.replayed is not None
        assert step.replayed["timer"] == step.recorded["timer"] == "Source.tick"
        assert step.replayed["mono"] == step.recorded["mono"]  # the fake clock's time
    assert sum(len(s.recorded["out"]) for s in timers) == 30


def test_a_truncated_recording_is_refused_naming_the_byte(
    calculator_recording: Path, tmp_path: Path
) -> None:
    data = calculator_recording.read_bytes()
    cut = tmp_path / "cut.rec"
    cut.write_bytes(data[:-3])

    with pytest.raises(RecordingError, match=r"cut\.rec: truncated or damaged at byte \d+"):
        replay(cut)
    refused = _cli("replay", str(cut), cwd=ROOT)
    assert refused.returncode == 2
    assert "cut.rec: truncated or damaged at byte" in refused.stderr


def test_a_tampered_recording_is_refused_naming_the_byte(
    calculator_recording: Path, tmp_path: Path
) -> None:
    data = bytearray(calculator_recording.read_bytes())
    header_end = len(MAGIC) + 8 + int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "big")
    data[header_end + 20] ^= 0xFF  # inside the first record's body
    bad = tmp_path / "bad.rec"
    bad.write_bytes(bytes(data))

    with pytest.raises(
        RecordingError, match=rf"bad\.rec: damaged at byte {header_end}: the frame's CRC-32"
    ):
        read_recording(bad)


def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.rec"
    other.write_bytes(b"hello")
    with pytest.raises(RecordingError, match="not an actor recording"):
        read_recording(other)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "actorbus", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actorbus_run_records_to_the_key_and_actorbus_replay_prints_the_run(tmp_path: Path) -> None:
    app = tmp_path / "app.properties"
    app.write_text(
        "actorbus.actors = source, calculator\n"
        "actorbus.actor.source.class = demos.calculator.actors.Source\n"
        "actorbus.actor.source.period_ms = 2\n"
        "actorbus.actor.source.seed = 5\n"
        "actorbus.actor.source.count = 40\n"
        "actorbus.actor.calculator.class = demos.calculator.actors.Calculator\n"
        "actorbus.actor.calculator.window = 3\n"
        "actorbus.actor.calculator.recordTo = calc.rec\n"
    )
    ran = _cli("run", str(app), "--duration", "1.5", cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    recording = tmp_path / "calc.rec"  # relative to the properties file
    header, records = read_recording(recording)
    assert header.kwargs == {"window": "3"}
    assert [r["kind"] for r in records][-1] == "shutdown"

    replayed = _cli("replay", str(recording), cwd=ROOT)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    lines = replayed.stdout.splitlines()
    assert lines[0].startswith(f"{recording}: demos.calculator.actors:Calculator 'calculator'")
    assert "startup" in lines[1] and "-> fsm <start> -> Initializing" in lines[2]
    assert lines[-1] == f"replayed {len(records)} inputs: the outputs match the recording"

    as_json = _cli("replay", str(recording), "--json", cwd=ROOT)
    assert as_json.returncode == 0, as_json.stderr
    run_json = json.loads(as_json.stdout)
    assert run_json["matched"] is True and run_json["inputs"] == len(records)


def test_actorbus_replay_exits_1_with_the_first_difference(tmp_path: Path) -> None:
    path = tmp_path / "calc.rec"
    record_calculator(path, seed=3)
    # the same recording, told the actor had a window of 4: an earlier first average
    data = path.read_bytes()
    changed = tmp_path / "changed.rec"
    body_start = len(MAGIC) + 8
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "big")
    head = msgpack.unpackb(data[body_start : body_start + size])
    head["kwargs"]["window"] = 4
    body = msgpack.packb(head)
    changed.write_bytes(
        MAGIC
        + len(body).to_bytes(4, "big")
        + zlib.crc32(body).to_bytes(4, "big")
        + body
        + data[body_start + size :]
    )

    result = _cli("replay", str(changed), cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("DIFFERENT: input #") and "0 publishes recorded, 1 replayed" in last
