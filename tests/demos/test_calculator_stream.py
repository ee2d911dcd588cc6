"""The calculator's moving average as a stream pipeline (demos/calculator/stream.py)
gives the same averages as the FSM calculator for the same points."""

from __future__ import annotations

import random

import pytest
from demos.calculator.actors import Calculator
from demos.calculator.messages import DataPoint, MovingAverage
from demos.calculator.stream import Slide, StreamCalculator

from actorbus import Bus
from actorbus.streams import PushStream
from actorbus.testing import wait_until

WAIT = 10.0


@pytest.mark.parametrize("window", [1, 3, 5])
def test_stream_and_fsm_publish_the_same_averages(window: int) -> None:
    rng = random.Random(window)
    print(f"seed {window}")
    values = [rng.randrange(0, 100) for _ in range(200)]
    with Bus() as bus:
        fsm = Calculator(
            "fsm", window=window, machine="sm", data_subject="/s/data", average_subject="/s/fsm"
        )
        stream = StreamCalculator(
            "stream", window=window, data_subject="/s/data", average_subject="/s/stream"
        )
        fsm_out = bus.inbox(MovingAverage, "/s/fsm")
        stream_out = bus.inbox(MovingAverage, "/s/stream")
        bus.register(fsm)
        bus.register(stream)
        bus.startup([fsm, stream]).wait(WAIT)
        data = bus.publisher(DataPoint, "/s/data")
        assert wait_until(data.is_feed_up, WAIT)
        assert wait_until(lambda: fsm.current_state == "Collecting", WAIT)
        for i, v in enumerate(values):
            data.publish(DataPoint("/s/data", 1_000 + i, value=v))
        expected = len(values) - window + 1
        got_fsm: list[MovingAverage] = []
        got_stream: list[MovingAverage] = []
        assert wait_until(
            lambda: (
                (got_fsm.extend(fsm_out.drain()) or got_stream.extend(stream_out.drain()) or True)
                and len(got_fsm) == len(got_stream) == expected
            ),
            WAIT,
        ), (len(got_fsm), len(got_stream), expected)

        def rows(ms: list[MovingAverage]) -> list[tuple[int, float, int]]:
            return [(m.timestamp, m.average, m.count) for m in ms]

        assert rows(got_stream) == rows(got_fsm)
        assert rows(got_fsm)[0][0] == 1_000 + window - 1


def test_slide_over_batches_is_the_plain_moving_average() -> None:
    points = [DataPoint("/d", i, value=v) for i, v in enumerate([4, 8, 6, 2, 10])]
    got = (
        PushStream.of(points)
        .window(1.0, list, max_count=2)
        .coalesce(Slide(3, "/a"))
        .flat_map(lambda xs: xs)
        .map(lambda m: (m.timestamp, m.average))
        .collect()
        .result()
    )
    assert got == [(2, 6.0), (3, 16 / 3), (4, 6.0)]
