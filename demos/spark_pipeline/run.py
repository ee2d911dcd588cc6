"""Run the Spark pipeline demo: ``actorbus demo spark`` (or ``python -m demos.spark_pipeline``).

One process is the bus node: a source actor publishes a data point on each of
100 subjects every 100 ms, a recorder journals them, a printer prints what
comes back.  The same process drives Spark (``local[2]`` by default, or the
cluster ``actorbus.spark.master`` names): a streaming query reads the journal,
computes per-subject averages over 5-second event-time windows with a 2-second
watermark, and publishes them back to this node.  When the demo stops (after
``duration`` seconds, on ``stop``, or Ctrl-C / SIGTERM) a batch job prints per-subject
statistics of the whole journal.
"""

from __future__ import annotations

import argparse
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from actorbus import StopSignals
from actorbus.bus.message import MessageKey
from actorbus.config import load_config
from actorbus.node import Bus
from actorbus.spark import Recorder

from . import SPARK_PROPERTIES
from .actors import PointSource, Printer, subjects
from .messages import DataPoint
from .pipeline import (
    build_session,
    data_points,
    publish_to_bus,
    subject_statistics,
    windowed_averages,
)


def run(
    *,
    config: str | Path | None = None,
    duration: float | None = 30.0,
    subject_count: int = 100,
    period_ms: float = 100,
    window: str = "5 seconds",
    watermark: str = "2 seconds",
    trigger: str = "1 second",
    journal: str | Path | None = None,
    checkpoint: str | Path | None = None,
    fresh: bool = False,
    seed: int | None = None,
    spark: Any = None,
    out: Callable[[str], object] = print,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Run the demo until ``duration`` seconds pass, ``stop`` is set, or Ctrl-C / SIGTERM.

    ``config`` is the properties file (default ``spark.properties`` here);
    ``journal``/``checkpoint`` override its ``actorbus.spark.journal`` /
    ``.checkpoint``; ``fresh`` deletes both first (otherwise the journal grows
    and the query resumes from its checkpoint).  ``spark`` is a session to use
    instead of building one from the file (it is then left running).  Returns a
    summary of what flowed."""
    cfg = load_config(config if config is not None else SPARK_PROPERTIES)
    settings = dict(cfg.spark)
    journal_dir = str(journal or settings.get("journal") or "/tmp/actorbus-spark-demo/journal")
    checkpoint_dir = str(checkpoint or settings.get("checkpoint") or f"{journal_dir}-checkpoint")
    if fresh:
        for path in (journal_dir, checkpoint_dir):
            shutil.rmtree(path, ignore_errors=True)
    names = subjects(subject_count)
    stop = stop or threading.Event()
    own_session = spark is None
    summary: dict[str, Any] = {"journal": journal_dir, "checkpoint": checkpoint_dir}
    with StopSignals(stop=stop) as stopping, Bus(cfg) as bus:
        host = settings.get("sink.host", "127.0.0.1")
        service = bus.listen(int(settings.get("sink.port", "0")), host)
        recorder = Recorder(journal_dir, [MessageKey(DataPoint, s) for s in names])
        printer = Printer(names, out=out)
        source = PointSource(names, period_ms=period_ms, seed=seed)
        for actor in (recorder, printer, source):
            bus.register(actor)
        bus.startup([recorder, printer]).wait(30)
        if spark is None:
            out(f"starting Spark (master {settings.get('master', 'local[2]')}) ...")
            spark = build_session(settings)
        averages = windowed_averages(
            data_points(spark, journal_dir), window=window, watermark=watermark
        )
        query = publish_to_bus(
            averages, host=host, port=service.port, checkpoint=checkpoint_dir, trigger=trigger
        )
        out(
            f"streaming query {query.id} reads {journal_dir}; {len(names)} subjects, one "
            f"point each every {period_ms:g} ms; averages over {window} windows"
        )
        try:
            bus.startup(source).wait(30)
            stopping.wait(duration)
            bus.shutdown(source).wait(30)
            last = recorder.flush_and_wait()
            query.processAllAvailable()
            summary["batches"] = query.lastProgress["batchId"] + 1 if query.lastProgress else 0
        finally:
            query.stop()
        summary.update(
            sent=source.sent,
            recorded=recorder.recorded,
            journal_end=last + 1,
            averages=len(printer.received),
            duplicates=printer.duplicates,
            windows=len({m.window_start for m in printer.received}),
            received=list(printer.received),
        )
        stats = subject_statistics(spark, journal_dir)
        summary["statistics"] = stats
        _print_statistics(stats, out)
        bus.shutdown_all().wait(30)
    if own_session:
        spark.stop()
    out(
        f"{summary['sent']} points sent, {summary['recorded']} journaled; "
        f"{summary['averages']} window averages back on the bus "
        f"({summary['duplicates']} duplicates dropped) from {summary['batches']} micro-batches"
    )
    return summary


def _print_statistics(stats: Sequence[dict[str, Any]], out: Callable[[str], object]) -> None:
    out(f"batch job over the whole journal: {len(stats)} subjects")
    out(f"{'subject':<14} {'points':>7} {'mean':>9} {'stddev':>8} {'min':>9} {'max':>9}")
    shown = list(stats[:5]) + (list(stats[-5:]) if len(stats) > 10 else list(stats[5:]))
    for i, row in enumerate(shown):
        if i == 5 and len(stats) > 10:
            out(f"{'...':<14}")
        out(
            f"{row['subject']:<14} {row['points']:>7} {row['mean']:>9.3f} "
            f"{(row['stddev'] or 0.0):>8.3f} {row['min']:>9.3f} {row['max']:>9.3f}"
        )


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m demos.spark_pipeline") -> int:
    """``python -m demos.spark_pipeline [--duration S] [--subjects N] ...``; ``prog`` is
    the command as the user typed it (``actorbus demo spark``), for usage and errors."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--config", type=Path, default=None, help="properties file")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    parser.add_argument("--subjects", type=int, default=100, help="subjects (default 100)")
    parser.add_argument("--period", type=float, default=100, help="ms between points")
    parser.add_argument("--window", default="5 seconds", help="window length")
    parser.add_argument("--watermark", default="2 seconds", help="watermark delay")
    parser.add_argument("--journal", default=None, help="journal directory (overrides file)")
    parser.add_argument("--fresh", action="store_true", help="delete journal and checkpoint")
    args = parser.parse_args(argv)
    run(
        config=args.config,
        duration=args.duration,
        subject_count=args.subjects,
        period_ms=args.period,
        window=args.window,
        watermark=args.watermark,
        journal=args.journal,
        fresh=args.fresh,
    )
    return 0
