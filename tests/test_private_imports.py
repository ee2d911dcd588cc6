"""Tests, demos, benchmarks and fuzz targets use the public API, as a user would.

A private module (or a ``_name`` of a public one) may be imported only by the
tests of that module itself: ``tests/<dir>/test_<words>.py`` tests
``actorbus.<package>._<module>`` when ``<package>`` is the one ``<dir>``
mirrors (or a parent of it) and ``<module>`` is one or more of the ``<words>``
(``tests/net/test_wire_codes.py`` tests ``actorbus.net._wire``;
``tests/test_log_hygiene.py`` tests ``actorbus._log``).  What a user needs to
test their own actors and transports is public in :mod:`actorbus.testing`.

``ALLOWED`` lists the few other imports, each with the reason it reaches in."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("tests", "demos", "benchmarks", "fuzz")

#: the package each test directory mirrors (``tests/<dir>`` -> ``actorbus.<dir>`` otherwise)
MIRRORS = {"tests": "actorbus", "tests/jrep": "actorbus.net.jrep"}

#: (file pattern, private module) -> why that file needs it
ALLOWED: dict[tuple[str, str], str] = {
    ("tests/bus/test_codec_fuzz.py", "actorbus.bus._codegen"): (
        "holds the generated decoders to the reference decoder they are generated from"
    ),
    ("tests/journal/test_journal_*.py", "actorbus.journal._format"): (
        "writes torn, corrupt and foreign frames by hand to test recovery"
    ),
    ("tests/journal/test_journal_format.py", "actorbus.journal._segments"): (
        "walks crafted frames with the segment reader's cursor"
    ),
    ("tests/jrep/test_jrep_compiled.py", "actorbus.net.jrep._values"): (
        "holds the generated converters to the generic conversion rules"
    ),
    ("tests/jrep/test_jrep_compiled.py", "actorbus.net.jrep._parts"): (
        "the generic rules' error, which the generated converters must raise alike"
    ),
    ("tests/bus/test_bus_request.py", "actorbus.bus._timeouts"): (
        "bounds the request-timeout wheel's garbage by its slack constant"
    ),
    ("tests/bus/test_bus_request.py", "actorbus.bus.feeds._direct"): (
        "a request feed without a mailbox, as the node's own requestors have"
    ),
    ("tests/net/test_link_feeds.py", "actorbus.net._io_thread"): (
        "forces the plain asyncio loop where uvloop is installed"
    ),
    ("tests/net/test_link_queue_reset.py", "actorbus.net._inbound"): (
        "slows the inbound backlog re-check down to hold a link's queue full"
    ),
    ("tests/net/test_link_patterns_groups.py", "actorbus.net._connection"): (
        "drives a live link's connection's send methods directly"
    ),
    ("tests/net/test_link_limits.py", "actorbus.net._receipts"): (
        "checks a link's receipt accounting against the counter it uses"
    ),
    ("tests/net/test_*_patterns_groups.py", "actorbus.net._events"): (
        "the pattern and group events (not yet re-exported by net.protocol, at its size limit)"
    ),
    ("tests/net/test_protocol_sender.py", "actorbus.net._events"): (
        "the sender event (not yet re-exported by net.protocol, at its size limit)"
    ),
    ("tests/net/test_protocol_route.py", "actorbus.net._events"): (
        "the route and sender events (not yet re-exported by net.protocol, at its size limit)"
    ),
    ("tests/net/test_protocol_frames.py", "actorbus.bus._types"): (
        "the codec's wire form of a big int, which a frame must carry unchanged"
    ),
    ("tests/net/test_protocol_handshake.py", "actorbus.net._auth"): (
        "computes a proof by hand to play a client that deviates"
    ),
    ("tests/net/test_protocol_handshake.py", "actorbus.net._wire"): (
        "role and scope codes to write advertise frames by hand"
    ),
    ("tests/spark/test_spark_parts.py", "actorbus.spark._options"): (
        "the data source's option parsing, tested without a Spark session"
    ),
    ("tests/spark/test_spark_worker_python.py", "actorbus.spark._workers"): (
        "the worker-interpreter check, tested without a Spark session"
    ),
    ("tests/actors/test_actors_recording.py", "actorbus.actors.recording._FEED_TASKS"): (
        "holds the recorder's table of delivery tasks to every feed class's own"
    ),
    ("benchmarks/journal.py", "actorbus.journal._format"): (
        "measures frame encoding apart from the writer"
    ),
    ("benchmarks/remote_hops.py", "actorbus.net._connection"): (
        "times the hops inside a link's connection"
    ),
}


def private_imports(path: Path) -> list[tuple[int, str]]:
    """(line, private module or ``module._name``) of every import of one."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if not _is_private(node.module):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.startswith("actorbus") and _is_private(n)]
    return found


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def under_test(path: str, module: str) -> bool:
    """Whether ``module`` is the module that the test file at ``path`` tests."""
    directory, _, filename = path.rpartition("/")
    if not (directory.startswith("tests") and filename.startswith("test_")):
        return False
    mirrored = MIRRORS.get(directory, "actorbus." + directory.removeprefix("tests/"))
    parts = module.split(".")
    first = next(i for i, part in enumerate(parts) if part.startswith("_"))
    package, name = ".".join(parts[:first]), parts[first].lstrip("_")
    if not (mirrored == package or mirrored.startswith(package + ".")):
        return False
    return f"_{name}_" in "_" + filename.removesuffix(".py").removeprefix("test_") + "_"


def allowed(path: str, module: str) -> bool:
    return any(
        fnmatch.fnmatch(path, pattern) and module == allowed_module
        for pattern, allowed_module in ALLOWED
    )


def offenders() -> list[str]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, module in private_imports(path):
                if not (under_test(rel, module) or allowed(rel, module)):
                    found.append(f"{rel}:{line}: {module}")
    return found


def test_no_test_or_demo_imports_a_private_module_it_does_not_test() -> None:
    assert offenders() == [], (
        "import these from a public module (actorbus.testing has the test tools), "
        "or name the test file after the module it tests"
    )


def test_every_allowed_import_is_still_needed() -> None:
    used = set()
    for top in SCANNED:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            for _, module in private_imports(path):
                used.update(
                    key for key in ALLOWED if fnmatch.fnmatch(rel, key[0]) and module == key[1]
                )
    assert sorted(set(ALLOWED) - used) == []


def test_the_convention() -> None:
    assert under_test("tests/net/test_wire_codes.py", "actorbus.net._wire.FrameType")
    assert under_test("tests/net/test_link_io_thread.py", "actorbus.net._io_thread")
    assert under_test("tests/test_log_hygiene.py", "actorbus._log")
    assert under_test("tests/bus/test_bus_gc.py", "actorbus._gc")
    assert under_test("tests/jrep/test_jrep_compiled.py", "actorbus.net.jrep._compiled")
    assert not under_test("tests/net/test_link_limits.py", "actorbus.net._receipts")
    assert not under_test("tests/bus/test_wire.py", "actorbus.net._wire")
    assert not under_test("tests/net/nodes/protocol.py", "actorbus.net._events")
    assert not under_test("demos/calculator/run.py", "actorbus.net._wire")
