"""The ``actorbus`` command: run, demo, diagram; bad input exits 2 with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

from actorbus import Bus
from actorbus.bus import SYSTEM_SUBJECT, LinkLoggedOff, LinkLoggedOn
from actorbus.cli import main

ROOT = Path(__file__).resolve().parents[2]
SM = ROOT / "demos" / "calculator" / "calculator.sm"
#: the installed console script (its sys.path does not start with the working directory)
ACTORBUS = Path(sys.executable).with_name("actorbus")


@pytest.fixture(autouse=True)
def _logging_as_before() -> Iterator[None]:
    """``main()`` turns logging on to this test's captured stderr; later tests
    must not inherit a handler writing to a closed stream."""
    yield
    logger.remove()
    logger.add(sys.__stderr__)  # loguru's own default handler
    logger.disable("actorbus")


def test_diagram_writes_svg_and_mermaid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "calc.svg"
    assert main(["diagram", str(SM), "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert (
        main(["diagram", "demos.calculator.machine:CalculatorMachine", "--current", "Collecting"])
        == 0
    )
    text = capsys.readouterr().out
    assert "stateDiagram-v2" in text
    assert "Collecting" in text


def test_demo_with_diagram_of_the_live_actor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "live.dot"
    assert (
        main(["demo", "calculator", "--duration", "0.6", "--period", "10", "--diagram", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "averages published" in printed
    assert "Publishing" in out.read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diagram", "no/such/file.sm"], "no such .sm file"),
        (["diagram", "nomodule_xyz:Thing"], "cannot import"),
        (["demo", "calculator", "--window", "0"], "--window 0"),
        (["demo", "calculator", "--min", "5", "--max", "5"], "must be greater"),
        (["run", "missing.properties"], "no such properties file"),
        (["run", "app.properties", "--duration", "-1"], "--duration -1.0: expected seconds >= 0"),
        (["run", "app.properties", "--duration", "nan"], "--duration nan: expected seconds >= 0"),
        (["demo", "calculator", "--duration", "-2"], "--duration -2.0: expected seconds >= 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "actorbus.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert message in lines[0]
    assert "Traceback" not in proc.stderr


def test_bad_properties_file_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "app.properties"
    bad.write_text("actorbus.dispatchers = a\nactorbus.dispatcher.a.threadCount = four\n")
    proc = subprocess.run(
        [sys.executable, "-m", "actorbus.cli", "run", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{bad}:2:" in proc.stderr
    assert "threadCount" in proc.stderr


def test_run_starts_the_actors_a_properties_file_names(tmp_path: Path) -> None:
    app = tmp_path / "app.properties"
    app.write_text(
        "actorbus.dispatchers = main\n"
        "actorbus.actors = source, calc, sink\n"
        "actorbus.actor.source.class = demos.calculator.actors.Source\n"
        "actorbus.actor.source.period_ms = 5\n"
        "actorbus.actor.source.seed = 3\n"
        "actorbus.actor.calc.class = demos.calculator.actors.Calculator\n"
        "actorbus.actor.calc.window = 2\n"
        "actorbus.actor.sink.class = demos.calculator.actors.Sink\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "actorbus.cli", "run", str(app), "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "over 2" in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_stops_on_sigterm_or_sigint_and_its_links_log_off(
    tmp_path: Path, sig: signal.Signals
) -> None:
    # A service manager stops a node with SIGTERM; before, Python died of it at
    # once: no actor shutdown, and the peer saw a connection closed without a
    # logoff.  Now both signals stop it the orderly way, exit status 0.
    with Bus(node_id="watcher") as watcher:
        logged_on = watcher.inbox(LinkLoggedOn, SYSTEM_SUBJECT)
        logged_off = watcher.inbox(LinkLoggedOff, SYSTEM_SUBJECT)
        port = watcher.listen(0, "127.0.0.1").port
        app = tmp_path / "node.properties"
        app.write_text(
            "actorbus.nodeId = stopped-node\n"
            "actorbus.connections = watcher\n"
            "actorbus.connection.watcher.host = 127.0.0.1\n"
            f"actorbus.connection.watcher.port = {port}\n"
            "actorbus.actors = source\n"
            "actorbus.actor.source.class = demos.calculator.actors.Source\n"
            "actorbus.actor.source.period_ms = 5\n"
        )
        node = subprocess.Popen(
            [sys.executable, "-m", "actorbus", "run", str(app)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            on = logged_on.receive(30)
            assert on is not None, f"the node never logged on; exit status {node.poll()}"
            assert on.peer_node == "stopped-node"
            node.send_signal(sig)
            out, err = node.communicate(timeout=30)
        finally:
            if node.poll() is None:
                node.kill()
                node.communicate()
        assert node.returncode == 0, err
        off = logged_off.receive(10)
        assert off is not None
        assert off.reason.startswith("logged off by the peer: "), off.reason


# ------------------------------------------------- the console script, from any directory

USER_ACTORS = """
from actorbus import Actor


class Greeter(Actor):
    def __init__(self, name, greeting="hello"):
        super().__init__(name)
        self.greeting = greeting

    def startup(self):
        print(f"{self.name}: {self.greeting}", flush=True)
"""

USER_MACHINE = """
from statemachine import State

from actorbus.fsm import Machine


class Door(Machine):
    Closed = State(initial=True)
    Open = State()
    open = Closed.to(Open)
    close = Open.to(Closed)
"""


def _console_script(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``actorbus ARGV`` run by the installed script in ``cwd``; PYTHONPATH is left out so
    only the working directory can make the user's module importable."""
    assert ACTORBUS.is_file(), f"{ACTORBUS} is missing: pip install -e . installs it"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(ACTORBUS), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_console_script_runs_actors_from_a_module_in_the_working_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "user_actors.py").write_text(textwrap.dedent(USER_ACTORS))
    (tmp_path / "app.properties").write_text(
        "actorbus.actors = greeter\n"
        "actorbus.actor.greeter.class = user_actors.Greeter\n"
        "actorbus.actor.greeter.greeting = hello from the working directory\n"
    )
    proc = _console_script(tmp_path, "run", "app.properties", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert "greeter: hello from the working directory" in proc.stdout


def test_console_script_draws_a_machine_from_a_module_in_the_working_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "user_machine.py").write_text(textwrap.dedent(USER_MACHINE))
    proc = _console_script(tmp_path, "diagram", "user_machine:Door", "--current", "Open")
    assert proc.returncode == 0, proc.stderr
    assert "stateDiagram-v2" in proc.stdout
    assert "Closed" in proc.stdout
    assert "Open" in proc.stdout


def test_console_script_names_a_missing_module_the_directories_searched_and_the_fix(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.properties").write_text(
        "actorbus.actors = a\nactorbus.actor.a.class = no_such_user_module.Greeter\n"
    )
    for argv, module in [
        (["run", "app.properties"], "no_such_user_module"),
        (["diagram", "no_such_machines:Door"], "no_such_machines"),
    ]:
        proc = _console_script(tmp_path, *argv)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        line = lines[0]
        assert f"there is no module named {module!r} in the directories Python searched (" in line
        searched = line.split("searched (", 1)[1].split(")", 1)[0].split(", ")
        assert searched[0] == str(tmp_path), line  # the working directory first
        assert "add its directory to PYTHONPATH, or install its package" in line


@pytest.mark.parametrize("demo", ["spark", "calculator"])
def test_demo_help_names_the_actorbus_command(tmp_path: Path, demo: str) -> None:
    helped = _console_script(tmp_path, "demo", demo, "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith(f"usage: actorbus demo {demo} [-h]"), helped.stdout


def test_spark_demo_errors_name_the_actorbus_command(tmp_path: Path) -> None:
    # the Spark demo parses its own options: its errors carry the command typed
    refused = _console_script(tmp_path, "demo", "spark", "--no-such-option")
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: actorbus demo spark [-h]"), refused.stderr
    assert "actorbus demo spark: error: unrecognized arguments: --no-such-option" in (
        refused.stderr
    )


def test_demo_web_prints_the_page_url_and_stops_after_its_duration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "web", "--port", "0", "--duration", "0.2"]) == 0
    assert "web demo: open http://127.0.0.1:" in capsys.readouterr().out
    assert main(["demo", "web", "--port", "70000"]) == 2
    assert "--port 70000: expected 0..65535" in capsys.readouterr().err


OPTION_PROBE = """
from actorbus import Actor

class Probe(Actor):
    def __init__(self, name, *, some_key, feed_subject, window="5"):
        super().__init__(name)
        self.got = (some_key, feed_subject, window)

    def startup(self):
        print(f"{self.name} got {self.got!r}", flush=True)
"""


def _run_here(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m actorbus ARGV`` in ``cwd`` with this checkout's src/ first."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, "-m", "actorbus", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_passes_actor_keys_as_keyword_arguments_in_python_spelling(tmp_path: Path) -> None:
    # docs/configuration.md, "Actors": actor.NAME.KEY = value reaches the class as
    # the keyword argument KEY (a str), camelCase and dots spelled as a Python name
    (tmp_path / "option_probe.py").write_text(textwrap.dedent(OPTION_PROBE))
    (tmp_path / "app.properties").write_text(
        "actorbus.actors = probe\n"
        "actorbus.actor.probe.class = option_probe.Probe\n"
        "actorbus.actor.probe.someKey = some value\n"
        "actorbus.actor.probe.feed.subject = /prices\n"
        "actorbus.actor.probe.window = 7\n"
    )
    proc = _run_here(tmp_path, "run", "app.properties", "--duration", "0")
    assert proc.returncode == 0, proc.stderr
    assert "probe got ('some value', '/prices', '7')" in proc.stdout


def test_run_refuses_actor_keys_that_name_one_keyword_twice(tmp_path: Path) -> None:
    (tmp_path / "option_probe.py").write_text(textwrap.dedent(OPTION_PROBE))
    (tmp_path / "app.properties").write_text(
        "actorbus.actors = probe\n"
        "actorbus.actor.probe.class = option_probe.Probe\n"
        "actorbus.actor.probe.someKey = a\n"
        "actorbus.actor.probe.some_key = b\n"
        "actorbus.actor.probe.feed.subject = /prices\n"
    )
    proc = _run_here(tmp_path, "run", "app.properties")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "'someKey' and 'some_key' both give the keyword argument some_key" in line
