"""Message codec: encode and decode time per message, against msgpack on plain dicts.

Two messages, each next to the equivalent plain dict (same field names and
values, nested dicts for structs) packed with ``msgpack.packb`` and unpacked
with ``msgpack.unpackb``, measured in the same run, interleaved round by round:

* ``small`` — a notification of 4 fields (int, float, str, bool) plus the base
  fields ``subject`` and ``timestamp``;
* ``nested`` — a notification with a nested Field struct and a list of 10 structs.

Our side does more than the baseline: ``decode`` validates every field's type
and builds an immutable typed message.  Rows are nanoseconds per message (best
of ``--repeat`` rounds); ``ratio`` is ours / msgpack's (lower is better).
Budget: the small message's encode+decode round trip within 2.5x of the
plain-dict msgpack round trip.

Run: ``.venv/bin/python benchmarks/codec.py [--number N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, print_table, row

from actorbus.bus import Codec, Field, Notification

__all__ = ["main"]

ROUND_TRIP_BUDGET = 2.5


class Reading(Notification, type_name="bench.Reading"):
    count: int
    ratio: float
    name: str
    flag: bool


class Stop(Field, type_name="bench.Stop"):
    x: int
    y: int
    label: str


class Route(Notification, type_name="bench.Route"):
    origin: Stop
    stops: list[Stop]
    speed: float


def _cases() -> list[tuple[str, Any, dict[str, Any]]]:
    small = Reading(
        "/demo/data", 1_700_000_000_000, count=42, ratio=0.75, name="sensor-7", flag=True
    )
    stops = [Stop(i, -i, f"stop {i}") for i in range(10)]
    nested = Route(
        "/demo/route", 1_700_000_000_000, origin=Stop(0, 0, "depot"), stops=stops, speed=12.5
    )
    return [("small", small, small._asdict()), ("nested", nested, _plain(nested))]


def _plain(value: Any) -> Any:
    """The plain-dict equivalent: structs become dicts, tuples lists."""
    if isinstance(value, (Field, Notification)):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _ns(stmt: Any, number: int, repeat: int) -> float:
    """Best per-call time in nanoseconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e9


def main(argv: list[str] | None = None) -> list[Row]:
    """Run the benchmark, print a table, return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20_000, help="calls per round")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (best is kept)")
    args = parser.parse_args(argv)

    codec = Codec()
    packb, unpackb = msgpack.packb, msgpack.unpackb
    rows: list[Row] = []
    for label, msg, plain in _cases():
        cls = type(msg)
        data = codec.encode(msg)
        plain_data = packb(plain)
        assert codec.decode(cls, data) == msg
        assert unpackb(plain_data) == plain

        best = {
            "enc": float("inf"),
            "dec": float("inf"),
            "penc": float("inf"),
            "pdec": float("inf"),
        }
        for _ in range(args.repeat):  # interleave ours and msgpack's, round by round
            best["enc"] = min(best["enc"], _ns(lambda: codec.encode(msg), args.number, 1))
            best["penc"] = min(best["penc"], _ns(lambda: packb(plain), args.number, 1))
            best["dec"] = min(best["dec"], _ns(lambda: codec.decode(cls, data), args.number, 1))
            best["pdec"] = min(best["pdec"], _ns(lambda: unpackb(plain_data), args.number, 1))

        note = f"{len(data)} bytes vs {len(plain_data)} as a dict"
        rows.append(
            row(
                f"{label}: encode",
                best["enc"],
                "ns/msg",
                baseline_name="msgpack.packb(dict)",
                baseline_value=best["penc"],
                note=note,
            )
        )
        rows.append(
            row(
                f"{label}: decode (validated)",
                best["dec"],
                "ns/msg",
                baseline_name="msgpack.unpackb(dict)",
                baseline_value=best["pdec"],
            )
        )
        ours, theirs = best["enc"] + best["dec"], best["penc"] + best["pdec"]
        judged = label == "small"
        rows.append(
            row(
                f"{label}: encode+decode",
                ours,
                "ns/msg",
                baseline_name="msgpack dict round trip",
                baseline_value=theirs,
                budget=f"<= {ROUND_TRIP_BUDGET}x msgpack" if judged else "",
                ok=(ours <= ROUND_TRIP_BUDGET * theirs) if judged else None,
            )
        )
    print_table(rows, title="message codec (ns per message, lower is better)")
    return rows


if __name__ == "__main__":
    main()
