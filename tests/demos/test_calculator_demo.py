"""The calculator demo through the real bus: FSM behaviour, both machine
declarations and both engines, shutdown from every state, the runner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from demos.calculator.actors import Calculator
from demos.calculator.messages import DataPoint, MovingAverage
from demos.calculator.run import run

from actorbus import Bus, FeedState, PublishFeed

UP, DOWN = FeedState.UP, FeedState.DOWN
VARIANTS = [
    ("sm", "compiled"),
    ("python", "compiled"),
    ("sm", "reference"),
    ("python", "reference"),
]


class Rig:
    """A bus with the calculator, a scripted data publisher and an average inbox."""

    def __init__(self, machine: str, engine: str, window: int = 3) -> None:
        self.bus = Bus()
        self.calc = Calculator(
            "calc",
            window=window,
            machine=machine,
            engine=engine,
            data_subject="/t/data",
            average_subject="/t/avg",
        )
        self.calc.fsm_trace = []
        self.averages = self.bus.inbox(MovingAverage, "/t/avg")
        self.bus.register(self.calc)
        self.bus.startup(self.calc).wait(5)
        self.data: PublishFeed[DataPoint] = self.bus.publisher(DataPoint, "/t/data", up=False)

    def state(self) -> str | None:
        # read on the actor's own dispatcher, after everything posted so far ran
        box: list[str | None] = []
        done = __import__("threading").Event()
        self.calc.post(lambda: (box.append(self.calc.current_state), done.set()))
        assert done.wait(5)
        return box[0]

    def up(self) -> None:
        self.data.update_feed_state(UP)

    def down(self) -> None:
        self.data.update_feed_state(DOWN)

    def send(self, *values: int) -> None:
        for v in values:
            self.data.publish(DataPoint("/t/data", value=v))

    def averages_now(self) -> list[tuple[float, int]]:
        self.state()  # barrier: the calculator handled everything sent
        return [(m.average, m.count) for m in self.averages.drain()]

    def close(self) -> None:
        self.data.close()
        self.averages.close()
        self.bus.close()


@pytest.fixture(params=VARIANTS, ids=lambda v: f"{v[0]}-{v[1]}")
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    r = Rig(*request.param)
    yield r
    r.close()


def test_starts_in_initializing_and_collects_after_up(rig: Rig) -> None:
    assert rig.state() == "Initializing"
    rig.up()
    assert rig.state() == "Collecting"


def test_window_boundary_then_average_on_every_point(rig: Rig) -> None:
    rig.up()
    rig.send(1, 2)
    assert rig.state() == "Collecting"
    assert rig.averages_now() == []
    rig.send(3)  # window (3) full: Publishing publishes on entry
    assert rig.state() == "Publishing"
    assert rig.averages_now() == [(2.0, 3)]
    rig.send(10)  # window slides: 2, 3, 10
    assert rig.averages_now() == [(5.0, 3)]


def test_feed_down_from_collecting_and_from_publishing(rig: Rig) -> None:
    rig.up()
    rig.send(1)
    rig.down()
    assert rig.state() == "FeedDown"
    rig.up()
    rig.send(5, 5)
    assert rig.averages_now() == []  # the window was cleared: needs 3 new points
    rig.send(5)
    assert rig.averages_now() == [(5.0, 3)]
    rig.down()
    assert rig.state() == "FeedDown"
    assert rig.calc.average_feed is not None
    assert rig.calc.average_feed.declared_state is DOWN
    rig.up()
    rig.send(7, 8)
    assert rig.averages_now() == []  # averages resume only after the window refills
    rig.send(9)
    assert rig.averages_now() == [(8.0, 3)]


def test_unexpected_data_and_repeated_up_are_ignored(rig: Rig) -> None:
    p2 = rig.bus.publisher(DataPoint, "/t/data", up=True)  # a second publisher: repeated UP
    rig.up()
    assert rig.state() == "Collecting"
    p2.close()
    rig.up()
    assert rig.state() == "Collecting"
    trace = [s for _, s in rig.calc.fsm_trace or []]
    assert "FeedDown" not in trace


@pytest.mark.parametrize("where", ["Initializing", "Collecting", "Publishing", "FeedDown"])
def test_shutdown_from_every_state_closes_both_feeds(where: str) -> None:
    r = Rig("sm", "compiled")
    try:
        if where != "Initializing":
            r.up()
        if where in ("Publishing",):
            r.send(1, 2, 3)
        if where == "FeedDown":
            r.down()
        assert r.state() == where
        r.bus.shutdown(r.calc).wait(5)
        assert r.calc.current_state == "Shutdown"
        assert r.calc.data_feed is not None and not r.calc.data_feed.is_open
        assert r.calc.average_feed is not None and not r.calc.average_feed.is_open
    finally:
        r.close()


def test_sm_and_python_machines_behave_identically() -> None:
    script = ["up", 4, 8, 15, 16, "down", "up", 23, 42, 1, 2, 3, "down", "up", 9, 9, 9]
    results = []
    for machine, engine in VARIANTS:
        r = Rig(machine, engine)
        try:
            for step in script:
                if step == "up":
                    r.up()
                elif step == "down":
                    r.down()
                else:
                    r.send(int(step))
                r.state()
            results.append((r.averages_now(), [s for _, s in r.calc.fsm_trace or []]))
        finally:
            r.close()
    assert all(res == results[0] for res in results), results
    assert results[0][0]  # something was published


def test_runner_prints_averages_and_stops_cleanly() -> None:
    lines: list[str] = []
    summary = run(duration=1.0, period_ms=10, window=4, seed=7, out=lines.append)
    assert summary["final_state"] == "Shutdown"
    assert summary["received"] and summary["received"] > 10
    # counted once the source and the calculator stopped: nothing in flight
    assert summary["received"] == summary["published"]
    assert any(line.endswith("over 4") for line in lines)
