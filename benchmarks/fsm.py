"""FSM speed: transitions/s per engine, and the calculator pipeline with the
compiled FSM versus a hand-written if/else calculator, measured in one run.

    python benchmarks/fsm.py

Budgets: compiled transition within 3x of if/else;
pipeline with the compiled FSM at least 70% of the if/else pipeline.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demos.calculator.actors import Calculator
from demos.calculator.messages import DataPoint, MovingAverage

from actorbus import Bus, FeedState
from actorbus.config.schema import BusConfig, DispatcherConfig

POINTS = 60_000
WINDOW = 10


class IfElseCalculator(Calculator):
    """The same calculator with its behaviour hand-written as if/else on a state
    string (the baseline the compiled FSM is compared with)."""

    def startup(self) -> None:
        self.state = "Initializing"
        self.open_feeds()

    def shutdown(self) -> None:
        if self.state != "Shutdown":
            self.state = "Shutdown"
            self.close_feeds()

    def on_feed_status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            if self.state in ("Initializing", "FeedDown"):
                self.state = "Collecting"
        elif self.state != "Shutdown":
            self.state = "FeedDown"
            self.mark_average_down()
            self.clear_window()

    def on_message(self, message: Any, feed: Any) -> None:
        state = self.state
        if state == "Publishing":
            self.add(message)
            self.publish_average()
        elif state == "Collecting":
            if self.window_full_after(message):
                self.add(message)
                self.state = "Publishing"
                self.mark_average_up()
                self.publish_average()
            else:
                self.add(message)


def pipeline(cls: type[Calculator]) -> float:
    """Data points/s: publisher → calculator actor → sink inbox, on two dispatchers."""
    config = BusConfig(
        dispatchers=(
            DispatcherConfig(name="calc", is_default=True),
            DispatcherConfig(name="sink"),
        )
    )
    with Bus(config) as bus:
        calc = cls("calc", window=WINDOW, data_subject="/b/data", average_subject="/b/avg")
        done = threading.Event()
        expected = POINTS - WINDOW + 1
        count = [0]

        def on_avg(msg: MovingAverage, feed: Any) -> None:
            count[0] += 1
            if count[0] == expected:
                done.set()

        from actorbus import Actor

        class Sink(Actor):
            def startup(self) -> None:
                self.subscribe(MovingAverage, "/b/avg", on_message=on_avg)

        sink = Sink("sink")
        bus.register(calc, dispatcher="calc")
        bus.register(sink, dispatcher="sink")
        bus.startup([calc, sink]).wait(5)
        pub = bus.publisher(DataPoint, "/b/data", up=False)
        pub.update_feed_state(FeedState.UP)
        points = [DataPoint("/b/data", value=i % 100) for i in range(POINTS)]
        start = time.perf_counter()
        publish = pub.publish
        for p in points:
            publish(p)
        if not done.wait(120):
            raise RuntimeError(f"pipeline stalled at {count[0]}/{expected}")
        elapsed = time.perf_counter() - start
        pub.close()
        return POINTS / elapsed


def main() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        import fsm_engine

        engine_rows = fsm_engine.main()
        hand = next(r for r in engine_rows if r["engine"].startswith("hand-written"))
        for r in engine_rows:
            if r is hand:
                continue
            ratio = hand["transitions_per_s"] / r["transitions_per_s"]
            compiled = r["engine"].startswith("compiled")
            rows.append(
                {
                    "name": f"transition, {r['engine']}",
                    "value": round(r["transitions_per_s"]),
                    "unit": "transitions/s",
                    "baseline_name": "hand-written if/else",
                    "baseline_value": round(hand["transitions_per_s"]),
                    "ratio": round(ratio, 2),
                    "budget": "<= 3x slower than if/else" if compiled else "reference only",
                    "ok": ratio <= 3.0 if compiled else None,
                }
            )
    except ImportError:
        pass
    fsm_runs, ifelse_runs = [], []
    for _ in range(3):  # interleaved rounds: the machine is shared and noisy
        ifelse_runs.append(pipeline(IfElseCalculator))
        fsm_runs.append(pipeline(Calculator))
    fsm_rate, ifelse_rate = statistics.median(fsm_runs), statistics.median(ifelse_runs)
    ratio = fsm_rate / ifelse_rate
    rows.append(
        {
            "name": "calculator pipeline, compiled FSM",
            "value": round(fsm_rate),
            "unit": "points/s",
            "baseline_name": "if/else calculator pipeline",
            "baseline_value": round(ifelse_rate),
            "ratio": round(ratio, 3),
            "budget": ">= 0.70 of if/else",
            "ok": ratio >= 0.70,
        }
    )
    return rows


if __name__ == "__main__":
    for row in main():
        print(
            f"{row['name']:<45} {row['value']:>12} {row.get('unit', ''):<14} "
            f"vs {row.get('baseline_name', '')}: {row.get('baseline_value', '')} "
            f"ratio {row.get('ratio', '')} budget {row.get('budget', '')} ok={row.get('ok')}"
        )
