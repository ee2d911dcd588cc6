"""The forwarding budget alone: a forwarder's process CPU per notification
against a direct link's receiver's, with more rounds than ``routing.py``.

This is ``routing.py``'s budget row (``routing.budget_row``), measured the
same way (``routing._one_way``: fresh processes on 127.0.0.1, each node's
``time.process_time()`` from just before the run until the sink counted the
last notification) on the two paths it compares, ``direct`` (source linked
to sink) and ``feed, 1 hop`` (source -- forwarder -- sink, feed forwarding),
and nothing else: no request/reply, source-route or NATS rows.  Use it to
look at the budget when the host is noisy (``--rounds``); ``routing.py`` is
where the row lives.

Run: ``PYTHONPATH=src python benchmarks/forwarding_cpu.py [--n 100000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, print_table

import routing

__all__ = ["main"]


def main(argv: list[str] | None = None) -> list[Row]:
    """Run both paths ``--rounds`` times; print and return the budget row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    direct: list[float] = []
    forwarder: list[float] = []
    for _ in range(args.rounds):
        direct.append(routing._one_way(args.n, 0, False)[1])
        forwarder.append(routing._one_way(args.n, 1, False)[2])
    rows = [routing.budget_row(min(forwarder), min(direct), f"N={args.n}, best of {args.rounds}")]
    print_table(rows, "forwarding budget (routing.py's budget row, alone)")
    return rows


if __name__ == "__main__":
    main()
