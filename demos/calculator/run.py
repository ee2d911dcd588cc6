"""Run the calculator demo: in one process, or one role of it per process.

``actorbus demo calculator`` calls :func:`run`.  Ctrl-C or ``--duration`` stops
it cleanly: every actor's shutdown runs (the calculator's machine takes its
``shutdown`` transition, which closes both feeds), then the bus closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from actorbus import StopSignals
from actorbus.actors import Actor
from actorbus.config import load_config
from actorbus.config.schema import BusConfig
from actorbus.node import Bus
from actorbus.testing import wait_until

from . import CALCULATOR_PROPERTIES
from .actors import AVERAGE_SUBJECT, DATA_SUBJECT, Calculator, Sink, Source

ROLES = ("source", "calculator", "sink")


def run(
    *,
    config: str | Path | None = None,
    duration: float | None = None,
    window: int = 5,
    period_ms: float = 100,
    minimum: int = 0,
    maximum: int = 100,
    subject: str = "/demo",
    machine: str = "sm",
    engine: str = "compiled",
    roles: Sequence[str] = ROLES,
    seed: int | None = None,
    count: int | None = None,
    out: Callable[[str], object] | None = None,
    diagram: str | Path | None = None,
    stop: threading.Event | None = None,
    record_to: str | Path | None = None,
) -> dict[str, Any]:
    """Run the demo until ``duration`` seconds pass, ``stop`` is set, or Ctrl-C / SIGTERM.

    ``count``: the source sends that many points at most.  ``record_to``: the
    calculator is recorded to that file (``actorbus replay`` replays it).

    Returns a summary: points sent, averages published and received (counted
    once the source and the calculator stopped, so nothing is in flight), final states."""
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"unknown role(s) {unknown}; choose from {list(ROLES)}")
    cfg: BusConfig = (
        load_config(config) if config is not None else load_config(CALCULATOR_PROPERTIES)
    )
    data_subject = f"{subject}{DATA_SUBJECT.removeprefix('/demo')}"
    average_subject = f"{subject}{AVERAGE_SUBJECT.removeprefix('/demo')}"
    stop = stop or threading.Event()
    actors: dict[str, Actor] = {}
    with StopSignals(stop=stop) as stopping, Bus(cfg) as bus:
        if "source" in roles:
            actors["source"] = Source(
                "source",
                subject=data_subject,
                period_ms=period_ms,
                minimum=minimum,
                maximum=maximum,
                seed=seed,
                count=count,
            )
        if "calculator" in roles:
            actors["calculator"] = Calculator(
                "calculator",
                window=window,
                data_subject=data_subject,
                average_subject=average_subject,
                machine=machine,
                engine=engine,
            )
        if "sink" in roles:
            actors["sink"] = Sink("sink", subject=average_subject, out=out)
        for actor in actors.values():
            bus.register(actor)
        calculator = actors.get("calculator")
        if record_to is not None and calculator is not None:
            bus.record(
                calculator,
                record_to,
                kwargs={
                    "window": window,
                    "data_subject": data_subject,
                    "average_subject": average_subject,
                    "machine": machine,
                    "engine": engine,
                },
            )
        bus.startup(list(actors.values())).wait(10)
        stopping.wait(duration)
        if diagram is not None and isinstance(calculator, Calculator):
            from actorbus.fsm import write_diagram

            write_diagram(calculator.fsm, diagram)
        calculator_state = calculator.current_state if isinstance(calculator, Calculator) else None
        _settle(bus, actors)
        summary = {
            "sent": getattr(actors.get("source"), "sent", None),
            "published": getattr(calculator, "published", None),
            "received": len(getattr(actors.get("sink"), "received", []))
            if "sink" in actors
            else None,
            "calculator_state": calculator_state,
        }
        bus.shutdown_all().wait(10)
        if isinstance(calculator, Calculator):
            summary["final_state"] = calculator.current_state
    return summary


def _settle(bus: Bus, actors: dict[str, Actor]) -> None:
    """Stop the source, then the calculator (its shutdown runs after the points
    queued before it), and give the sink a moment to take the averages still in
    flight: the summary then counts settled numbers, and published = received
    in one process unless something was lost.  (Counted while everything ran,
    an average in flight showed as published but not received.)"""
    for role in ("source", "calculator"):
        actor = actors.get(role)
        if actor is not None:
            bus.shutdown(actor).wait(10)
    calculator, sink = actors.get("calculator"), actors.get("sink")
    if isinstance(calculator, Calculator) and isinstance(sink, Sink):
        wait_until(lambda: len(sink.received) >= calculator.published, 5.0)
