"""Run every fuzz target for a time budget and report executions per second and crashes.

Usage::

    .venv/bin/python fuzz/run_ci.py                     # CI: 60 s split across the targets
    .venv/bin/python fuzz/run_ci.py --budget 3600 --corpus fuzz/corpus   # a longer run
    .venv/bin/python fuzz/run_ci.py --targets codec --budget 600

Each target runs under atheris (libFuzzer) in its own subprocess with
``-max_total_time`` set to its share of the budget (coverage instrumented in
actorbus and msgpack only), starting from the valid
inputs its module's ``seeds()`` returns plus whatever the corpus directory
already holds.  Crashing inputs are written to ``--artifacts`` (a temporary
directory unless given) and named in the report; reproduce one with
``python fuzz/fuzz_<target>.py <crash file>``.

Exit status: 0 when every target ran its budget without a crash, 1 when any
crashed (or died), 2 when atheris is missing or the arguments are wrong.
``--json PATH`` also writes the results as JSON (the reliability tests read it).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
#: target name -> script, in the order they run.
TARGETS = {
    "protocol": HERE / "fuzz_protocol.py",
    "handshake": HERE / "fuzz_handshake.py",
    "codec": HERE / "fuzz_codec.py",
    "multicast": HERE / "fuzz_multicast.py",
}
#: Seconds allowed past ``-max_total_time`` for start-up and the final report.
_GRACE = 60.0


@dataclasses.dataclass
class Result:
    target: str
    budget: float
    seconds: float = 0.0
    executions: int = 0
    execs_per_second: int = 0
    new_units: int = 0
    corpus_size: int = 0
    crashed: bool = False
    exit_code: int | None = None
    crash_files: list[str] = dataclasses.field(default_factory=list)
    error: str = ""


def _script(name: str) -> Path:
    """The script of target ``name``: one of TARGETS, or a path to a .py file."""
    return TARGETS[name] if name in TARGETS else Path(name).resolve()


def _label(name: str) -> str:
    return name if name in TARGETS else Path(name).stem.removeprefix("fuzz_")


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"run_ci: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _protocol_seeds() -> list[bytes]:
    """Valid streams for fuzz_protocol.py (which has no ``seeds()``): what a
    correct server and client send, for each receiving mode of that target."""
    from actorbus.bus.message import ReplyStatus
    from actorbus.bus.router import Role
    from actorbus.bus.scope import FeedState, Scope
    from actorbus.testing import MemoryPipe

    pipe = MemoryPipe(client_id="cli")
    # the nonces fuzz_protocol.py's receivers use (CLIENT_NONCE, SERVER_NONCE),
    # so the seeds' proofs match
    pipe.client._nonce = b"c" * 32
    pipe.server._nonce = b"s" * 32
    pipe.client.logon()
    logon = pipe.client.data_to_send()
    pipe.server.receive_data(logon, 0.0)
    pipe.client.receive_data(pipe.server.data_to_send(), 0.0)  # CHALLENGE
    proof = pipe.client.data_to_send()
    pipe.server.receive_data(proof, 0.0)
    list(pipe.server.events())
    pipe.server.accept_logon()
    pipe.server.advertise(("T", "a"), Role.PUBLISHER, Scope.LOCAL_AND_REMOTE, FeedState.UP)
    pipe.server.complete_logon()
    accept = pipe.server.data_to_send()
    pipe.client.receive_data(accept, 0.0)
    list(pipe.client.events())
    pipe.client.complete_logon()
    pipe.client.data_to_send()
    pipe.server.notify(("T", "a"), (1, "x"))
    pipe.server.notify_many(("T", "a"), [(2, "y"), (3, "z")])  # a NOTIFY_RUN frame
    pipe.server.request(("T", "b"), 7, ("q",))
    pipe.server.reply(3, ("T", "c"), ReplyStatus.OK_FINAL, ())
    pipe.server.request_ack(7, 1)
    pipe.server.cancel(7)
    pipe.server.feed_status(("T", "a"), Role.PUBLISHER, False)
    pipe.server.logoff("bye")
    data = pipe.server.data_to_send()
    # byte 0: the receiving mode; byte 1: how the rest is split
    return [bytes([0, 5]) + logon + proof, bytes([1, 9]) + accept, bytes([3, 17]) + data]


def _write_seeds(name: str, corpus: Path) -> int:
    """Put the target's seed inputs into ``corpus``; return how many it has."""
    # fuzz_protocol.py has no seeds() (and instruments whatever it imports, which
    # is slow): its seeds are made here.
    if name == "protocol":
        seeds = _protocol_seeds()
    else:
        seeds = getattr(_load(_script(name)), "seeds", list)()
    for data in seeds:
        digest = hashlib.sha1(data).hexdigest()
        (corpus / f"seed-{digest}").write_bytes(data)
    return sum(1 for _ in corpus.iterdir())


def _fuzz_in_this_process(name: str, libfuzzer_args: list[str]) -> None:
    """Run target ``name`` under atheris here (the subprocess side of run_target).

    Coverage instrumentation is limited to actorbus and msgpack, imported first,
    so a target's own ``instrument_imports()`` block finds them loaded already:
    start-up takes seconds instead of instrumenting asyncio, loguru and the rest.
    """
    import atheris

    with atheris.instrument_imports(include=["actorbus", "msgpack"]):
        pass
    module = _load(_script(name))
    atheris.Setup([sys.argv[0], *libfuzzer_args], module.one_input)
    atheris.Fuzz()


_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)


def run_target(name: str, budget: float, corpus: Path, artifacts: Path, seed: int) -> Result:
    """Fuzz one target for ``budget`` seconds; the result says what happened."""
    result = Result(_label(name), budget)
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    result.corpus_size = _write_seeds(name, corpus)
    before = set(artifacts.iterdir())
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--run-target",
        name,
        "--",
        f"-max_total_time={max(1, int(budget))}",
        "-print_final_stats=1",
        f"-seed={seed}",
        f"-artifact_prefix={artifacts}{os.sep}{_label(name)}-",
        "-rss_limit_mb=2048",
        "-timeout=30",
        "-max_len=4096",
        str(corpus),
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=budget + _GRACE,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        result.seconds = time.monotonic() - started
        result.crashed = True
        result.error = f"did not finish within {budget + _GRACE:g} s (hung?)"
        tail = exc.stderr if isinstance(exc.stderr, str) else ""
        result.error += "\n" + tail[-2000:]
        return result
    result.seconds = time.monotonic() - started
    result.exit_code = done.returncode
    stats = {key: int(value) for key, value in _STAT.findall(done.stderr)}
    result.executions = stats.get("number_of_executed_units", 0)
    result.execs_per_second = stats.get("average_exec_per_sec", 0) or int(
        result.executions / max(result.seconds, 1e-3)
    )
    result.new_units = stats.get("new_units_added", 0)
    result.crash_files = sorted(str(p) for p in set(artifacts.iterdir()) - before)
    if done.returncode != 0 or result.crash_files or not stats:
        result.crashed = True
        # atheris prints the Python traceback on stdout, libFuzzer its report on stderr
        lines = (done.stdout + "\n" + done.stderr).splitlines()
        start = next(
            (i for i, line in enumerate(lines) if "Uncaught Python exception" in line),
            max(0, len(lines) - 40),
        )
        result.error = "\n".join(lines[start : start + 60])
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run-target"] and len(argv) >= 3 and argv[2] == "--":
        _fuzz_in_this_process(argv[1], argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=60.0, help="total seconds (default 60)")
    parser.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help=f"comma list of {', '.join(TARGETS)} or paths of target scripts",
    )
    parser.add_argument("--corpus", type=Path, help="keep corpora here (default: a temp dir)")
    parser.add_argument("--artifacts", type=Path, help="write crashing inputs here")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in TARGETS and not Path(n).is_file()]
    if unknown or not names or args.budget <= 0:
        print(f"run_ci: unknown targets {unknown} or bad budget", file=sys.stderr)
        return 2
    if importlib.util.find_spec("atheris") is None:
        print(
            "run_ci: atheris is not installed in this Python; pip install atheris "
            "(it is in the dev extra)",
            file=sys.stderr,
        )
        return 2
    share = args.budget / len(names)
    print(f"fuzzing {', '.join(names)}: {share:.0f} s each, libFuzzer seed {args.seed}")
    with tempfile.TemporaryDirectory(prefix="actorbus-fuzz-") as scratch:
        base = args.corpus or Path(scratch) / "corpus"
        artifacts = args.artifacts or Path(scratch) / "artifacts"
        results = []
        for name in names:
            result = run_target(name, share, base / _label(name), artifacts, args.seed)
            results.append(result)
            status = "CRASH" if result.crashed else "ok"
            print(
                f"  {result.target:<10} {status:<5} {result.executions:>9} execs in {result.seconds:5.1f} s "
                f"= {result.execs_per_second:>6} execs/s, {result.new_units} new inputs "
                f"(corpus started with {result.corpus_size})",
                flush=True,
            )
            if result.crashed:
                print(f"    exit code {result.exit_code}; crash inputs: {result.crash_files}")
                for path in result.crash_files:
                    print(f"    {Path(path).name}: {Path(path).read_bytes()[:256].hex()}")
                print("    " + result.error.replace("\n", "\n    "))
                if args.artifacts is None:
                    print("    (rerun with --artifacts DIR to keep the crashing inputs)")
        if args.json is not None:
            args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
    crashes = sum(1 for r in results if r.crashed)
    total = sum(r.executions for r in results)
    print(f"{len(results)} targets, {total} executions, {crashes} crashed")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
