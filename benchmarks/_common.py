"""Shared helpers for the benchmark scripts: the row format, timing, the table.

The row format
--------------
Every ``benchmarks/<name>.py`` that :mod:`run_all` runs exposes
``main() -> list[dict]`` and returns one dict per measurement.  These keys are
understood (build rows with :func:`row` to get them all):

=================  ==========  ====================================================
key                type        meaning
=================  ==========  ====================================================
``name``           str         what was measured, e.g. ``"pub->sub 1:1 (blocking)"``
                               — the only required key
``value``          float       our number
``unit``           str         its unit: ``"msg/s"``, ``"us"``, ``"MB"``, ...
``baseline_name``  str | None  the peer (or bare-Python ceiling) measured in the
                               same run, e.g. ``"pykka tell"``
``baseline_value`` float|None  the peer's number, in the same unit
``ratio``          float|None  ``value / baseline_value`` (so for a rate, higher
                               is better; for a latency, lower is better)
``budget``         str         the target in words, e.g. ``">= 4x pykka"``
``ok``             bool|None   within budget?  ``None``: no budget, or not judged
``note``           str         optional: anything a reader needs (rounds, caveats)
``error``          str         set by :mod:`run_all` on the row standing for a
                               script that crashed (the exception); shown as CRASH
=================  ==========  ====================================================

Only ``name`` is required; :mod:`run_all` tolerates rows that miss any other key
(and rows in older shapes, see :func:`normalise`).  Budgets are *reported*, not
enforced: a missed budget prints ``MISS``, it does not fail the run.

Timing: noise on a shared machine only ever slows a run down, so take the best
of several rounds (:func:`best_of`), and interleave our rounds with the peer's
so that a burst of background load hits both alike.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypedDict, TypeVar

__all__ = [
    "RoleProc",
    "Row",
    "best_of",
    "format_table",
    "normalise",
    "percentile",
    "print_table",
    "row",
]

T = TypeVar("T")


class RoleProc:
    """A role of a benchmark script in a subprocess (``python SCRIPT --role
    ARGS...``), its stdout read line by line; on exit its stdin is closed (the
    role's cue to finish), then it is waited for, killed if it lingers, and reaped.

    A script subclasses it and sets :attr:`script` to its own ``__file__``.
    """

    #: The benchmark script whose ``--role`` entry point the subprocess runs.
    script: ClassVar[str]

    def __init__(self, *args: object, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, self.script, "--role", *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
        )

    def expect(self, word: str) -> list[str]:
        """The words after ``word`` on the role's next line; raises when the
        line starts with anything else (or the role exited: an empty line)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        parts = line.split()
        if not parts or parts[0] != word:
            raise RuntimeError(f"{self.proc.args[3:]}: expected {word}, got {line!r}")
        return parts[1:]

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> RoleProc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Row(TypedDict, total=False):
    """One measurement (see the module docstring)."""

    name: str
    value: float | None
    unit: str
    baseline_name: str | None
    baseline_value: float | None
    ratio: float | None
    budget: str
    ok: bool | None
    note: str
    error: str


def row(
    name: str,
    value: float | None,
    unit: str,
    *,
    baseline_name: str | None = None,
    baseline_value: float | None = None,
    budget: str = "",
    ok: bool | None = None,
    note: str = "",
) -> Row:
    """A row with every key set; ``ratio`` is ``value / baseline_value`` when both exist."""
    ratio = None
    if value is not None and baseline_value:
        ratio = value / baseline_value
    return Row(
        name=name,
        value=value,
        unit=unit,
        baseline_name=baseline_name,
        baseline_value=baseline_value,
        ratio=ratio,
        budget=budget,
        ok=ok,
        note=note,
    )


def best_of(results: Iterable[T], key: Callable[[T], float], *, lowest: bool = False) -> T:
    """The best of several rounds' results: highest ``key`` (lowest with ``lowest``)."""
    items = list(results)
    return min(items, key=key) if lowest else max(items, key=key)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of already sorted values, nearest rank."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


# ------------------------------------------------------------------ normalising

_NAME_KEYS = ("name", "case", "engine", "what", "benchmark")


def normalise(raw: Mapping[str, Any], module: str = "") -> Row:
    """Any dict a benchmark returned, as a :class:`Row`.

    Rows in the documented shape pass through (missing keys become ``None``/``""``).
    Rows in another shape keep their first name-like key as ``name``; ``value``
    is their first rate field (``*_per_s``), else first float, else first number,
    and its key becomes ``unit``; ``baseline`` (a str) and ``baseline_<that
    key>`` become the peer; the other fields go into ``note`` so nothing is lost.
    """
    out = Row()
    name = next((raw[k] for k in _NAME_KEYS if isinstance(raw.get(k), str)), None)
    if name is None:
        name = next((v for v in raw.values() if isinstance(v, str)), "?")
    out["name"] = f"{module}: {name}" if module else str(name)
    documented = any(k in raw for k in ("value", "ok", "budget", "error"))
    if documented:
        out["value"] = _num(raw.get("value"))
        out["unit"] = str(raw.get("unit") or "")
        out["baseline_name"] = raw.get("baseline_name")
        out["baseline_value"] = _num(raw.get("baseline_value"))
        ratio = _num(raw.get("ratio"))
        if ratio is None and out["value"] is not None and out["baseline_value"]:
            ratio = out["value"] / out["baseline_value"]
        out["ratio"] = ratio
        out["budget"] = str(raw.get("budget") or "")
        ok = raw.get("ok")
        out["ok"] = ok if isinstance(ok, bool) else None
        out["note"] = str(raw.get("note") or "")
        if raw.get("error"):
            out["error"] = str(raw["error"])
        return out
    numeric = [
        k
        for k, v in raw.items()
        if isinstance(v, int | float)
        and not isinstance(v, bool)
        and k != "ratio"
        and not k.startswith("baseline")
    ]
    # the value: a rate if there is one, else the first float, else the first number
    value_key = next(
        (k for k in numeric if k.endswith(("_per_s", "_s_per", "per_second"))),
        next((k for k in numeric if isinstance(raw[k], float)), numeric[0] if numeric else None),
    )
    out["value"] = _num(raw[value_key]) if value_key is not None else None
    out["unit"] = value_key or ""
    base_name = raw.get("baseline") if isinstance(raw.get("baseline"), str) else None
    base_value = _num(raw.get(f"baseline_{value_key}")) if value_key else None
    out["baseline_name"] = base_name
    out["baseline_value"] = base_value
    ratio = _num(raw.get("ratio"))
    if ratio is None and out["value"] is not None and base_value:
        ratio = out["value"] / base_value
    out["ratio"] = ratio
    out["budget"] = ""
    out["ok"] = raw["ok"] if isinstance(raw.get("ok"), bool) else None
    used = {value_key, "ratio", "baseline", f"baseline_{value_key}", *_NAME_KEYS}
    rest = {k: v for k, v in raw.items() if k not in used and v is not name}
    out["note"] = ", ".join(f"{k}={_short(v)}" for k, v in rest.items())
    return out


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _short(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# ------------------------------------------------------------------ printing


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    if a >= 100_000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:,.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def format_table(rows: Iterable[Mapping[str, Any]], *, notes: bool = True) -> str:
    """The rows as a fixed-width text table (rows are :func:`normalise`-d first)."""
    table = [normalise(r) for r in rows]
    head = ("benchmark", "value", "unit", "peer", "peer value", "ratio", "budget", "result")
    lines: list[tuple[str, ...]] = [head]
    for r in table:
        ok = r.get("ok")
        ratio = r.get("ratio")
        result = "-" if ok is None else ("ok" if ok else "MISS")
        lines.append(
            (
                r.get("name", "?"),
                _fmt(r.get("value")),
                r.get("unit", ""),
                r.get("baseline_name") or "-",
                _fmt(r.get("baseline_value")),
                "-" if ratio is None else f"{ratio:.2f}x",
                r.get("budget") or "-",
                "CRASH" if r.get("error") else result,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    right = {1, 4, 5}
    out = []
    for n, line in enumerate(lines):
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(line)
        ]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    if notes:
        extra = [(r.get("name", "?"), r.get("note", "")) for r in table if r.get("note")]
        if extra:
            out.append("")
            out.extend(f"  {name}: {note}" for name, note in extra)
    return "\n".join(out)


def print_table(rows: Iterable[Mapping[str, Any]], title: str = "", *, notes: bool = True) -> None:
    """Print :func:`format_table` under an optional title, and flush."""
    if title:
        print(title)
    print(format_table(rows, notes=notes))
    sys.stdout.flush()
