"""Run every benchmark and print one table of all results.

Every ``benchmarks/*.py`` that exposes ``main()`` is imported and its ``main()``
called with no arguments (``sys.argv`` is set to just the script's path while it
runs, for scripts that read their options from the command line); the rows it
returns are collected.  Files whose name starts with ``_``, this file and
``perf_doc.py`` (the tool that writes docs/performance.md from a run) are
skipped, and so is a module without ``main``.

The row format is documented in :mod:`_common`: ``name``, ``value``, ``unit``,
``baseline_name``, ``baseline_value``, ``ratio``, ``budget``, ``ok``, ``note``.
Rows that miss keys, or use another shape, are shown as well as they can be.

A module that raises (on import or in ``main()``), or returns something that is
not a list of dicts, becomes a failing row and the run goes on.  The exit
status is 1 when any module crashed, else 0: budgets are reported (``MISS``),
not enforced.

Run: ``.venv/bin/python benchmarks/run_all.py [--only NAME ...] [--isolate] [--json PATH]``.
``--isolate`` runs each module in its own fresh interpreter, so threads or
memory a benchmark leaves behind cannot slow the next one down.  ``--json PATH``
also writes the run to PATH: every row together with the run's metadata (see
:func:`run_metadata`), the input of ``benchmarks/perf_doc.py``, which writes the
figure tables of docs/performance.md from it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, normalise, print_table, row

__all__ = ["discover", "main", "run_metadata", "run_module"]

HERE = Path(__file__).resolve().parent


def discover(only: list[str] | None = None) -> list[Path]:
    """The benchmark scripts, sorted by name (optionally only those named)."""
    tools = {Path(__file__).resolve().name, "perf_doc.py"}
    paths = sorted(
        p for p in HERE.glob("*.py") if not p.name.startswith("_") and p.name not in tools
    )
    if only:
        wanted = {n.removesuffix(".py") for n in only}
        unknown = wanted - {p.stem for p in paths}
        if unknown:
            raise SystemExit(
                f"no benchmark named {', '.join(sorted(unknown))}; "
                f"have: {', '.join(p.stem for p in paths)}"
            )
        paths = [p for p in paths if p.stem in wanted]
    return paths


@contextlib.contextmanager
def _argv(path: Path) -> Iterator[None]:
    saved = sys.argv
    sys.argv = [str(path)]
    try:
        yield
    finally:
        sys.argv = saved


def _crash(module: str, what: str, exc: BaseException | None = None, detail: str = "") -> Row:
    text = detail or (f"{type(exc).__name__}: {exc}" if exc is not None else what)
    r = row(f"{module}: {what}", None, "", budget="runs", ok=False)
    r["error"] = text
    return r


def _collect(module: str, result: object) -> tuple[list[Row], bool]:
    """Rows from what ``main()`` returned; (rows, crashed)."""
    if not isinstance(result, list) or not all(isinstance(r, Mapping) for r in result):
        return [
            _crash(module, "main() did not return a list of dicts", detail=repr(result)[:200])
        ], True
    return [normalise(r, module) for r in result], False


def run_module(path: Path) -> tuple[list[Row], bool, float]:
    """Import ``path`` and call its ``main()``: (rows, crashed, seconds).  A module
    without ``main`` gives no rows."""
    module = path.stem
    start = time.perf_counter()
    try:
        spec = importlib.util.spec_from_file_location(module, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod
        spec.loader.exec_module(mod)
    except Exception as exc:
        traceback.print_exc()
        return [_crash(module, "import failed", exc)], True, time.perf_counter() - start
    fn = getattr(mod, "main", None)
    if not callable(fn):
        return [], False, time.perf_counter() - start
    try:
        with _argv(path):
            result = fn()
    except SystemExit as exc:  # argparse errors and the like
        if exc.code in (0, None):
            return [], False, time.perf_counter() - start
        traceback.print_exc()
        return [_crash(module, f"exited ({exc.code})", exc)], True, time.perf_counter() - start
    except Exception as exc:
        traceback.print_exc()
        return [_crash(module, "main() raised", exc)], True, time.perf_counter() - start
    rows, crashed = _collect(module, result)
    return rows, crashed, time.perf_counter() - start


def _run_isolated(path: Path) -> tuple[list[Row], bool, float]:
    """:func:`run_module` in a fresh interpreter; its output streams through."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = Path(tmp) / "rows.json"
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(path), str(rows_file)],
            check=False,
        )
        elapsed = time.perf_counter() - start
        if rows_file.exists():
            data = json.loads(rows_file.read_text())
            return [normalise(r) for r in data["rows"]], data["crashed"], elapsed
    detail = f"the interpreter exited with status {proc.returncode} before reporting rows"
    return [_crash(path.stem, "crashed", detail=detail)], True, elapsed


def _child(path: Path, rows_file: Path) -> int:
    rows, crashed, _ = run_module(path)
    payload = {"rows": [dict(r) for r in rows], "crashed": crashed}
    rows_file.write_text(json.dumps(payload, default=str))
    return 0


# the peers the benchmarks measure against, and the libraries on our own hot paths
_PACKAGES = ("msgpack", "uvloop", "pykka", "python-statemachine", "pyspark")


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _git_commit() -> str | None:
    """The checkout's commit, with ``+dirty`` when tracked files differ from it."""
    root = HERE.parent

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit}+dirty" if dirty else commit


def _uvloop_used() -> bool:
    """Whether the event loops of this run were uvloop's: the asyncio dispatchers, the
    node's I/O loop and the raw baselines all take uvloop when it imports."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def run_metadata(started: datetime.datetime | None = None) -> dict[str, Any]:
    """Where and when a run happened: the ``date`` (ISO 8601, UTC), the ``machine``
    (hostname, CPU model, cores, Python, OS kernel, uvloop used or not), the git
    ``commit`` of the code measured and the ``packages`` (versions of the peers
    and of our hot-path libraries; ``None`` for one not installed)."""
    when = started or datetime.datetime.now(datetime.UTC)
    packages: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    uname = platform.uname()
    return {
        "date": when.astimezone(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "hostname": socket.gethostname(),
            "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "os": f"{uname.system} {uname.release}",
            "arch": uname.machine,
            "uvloop": _uvloop_used(),
            "loadavg_start": _loadavg(),
        },
        "commit": _git_commit(),
        "packages": packages,
    }


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def write_json(
    path: Path,
    meta: Mapping[str, Any],
    rows: list[Row],
    timings: list[tuple[str, float, bool]],
    argv: list[str],
) -> None:
    """The run as one JSON document: :func:`run_metadata`'s keys, the options the run
    was given, the load average at its end, the seconds each script took and every
    row (:mod:`_common`'s format)."""
    doc = dict(meta)
    doc["machine"] = dict(meta["machine"], loadavg_end=_loadavg())
    doc["argv"] = argv
    doc["scripts"] = [{"name": n, "seconds": round(s, 1), "crashed": c} for n, s, c in timings]
    doc["rows"] = [dict(r) for r in rows]
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the combined table; 1 if any module crashed."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these (file stems)")
    parser.add_argument(
        "--isolate", action="store_true", help="run each module in a fresh interpreter"
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the run (every row, date, machine, git commit) to PATH as JSON",
    )
    parser.add_argument("--child", nargs=2, metavar=("PATH", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(Path(args.child[0]), Path(args.child[1]))

    paths = discover(args.only)
    meta = run_metadata()
    all_rows: list[Row] = []
    timings: list[tuple[str, float, bool]] = []
    crashes = 0
    for path in paths:
        print(f"\n=== {path.name} ===", flush=True)
        rows, crashed, seconds = (_run_isolated if args.isolate else run_module)(path)
        crashes += crashed
        timings.append((path.stem, seconds, crashed))
        all_rows.extend(rows)
        sys.stdout.flush()

    print("\n=== all benchmarks ===")
    print_table(all_rows, notes=False)
    judged = [r for r in all_rows if r.get("ok") is not None and not r.get("error")]
    missed = [r for r in judged if r.get("ok") is False]
    print(
        f"\n{len(all_rows)} rows from {len(paths)} scripts; {len(judged)} with a budget: "
        f"{len(judged) - len(missed)} ok, {len(missed)} missed"
        + (f"; {crashes} script(s) CRASHED" if crashes else "")
    )
    for r in all_rows:
        if r.get("error"):
            print(f"  CRASH {r.get('name')}: {r.get('error')}")
    print("time per script: " + ", ".join(f"{n} {s:.0f} s" for n, s, _ in timings))
    if args.json:
        write_json(Path(args.json), meta, all_rows, timings, sys.argv[1:] if argv is None else argv)
        print(f"wrote {args.json}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
