"""``make test`` on a fresh machine: it first runs tools/ensure-system-tools.sh, which
installs the Debian packages the suite needs (Graphviz, iproute2, iptables,
Chromium) or names what is missing on one line; CI runs nothing but ``make test``.

The script runs for real with a PATH of stand-in commands, in its ``--check`` mode
or where it cannot install (no apt-get on that PATH), so nothing is installed here.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "ensure-system-tools.sh"
BASH = "/bin/bash"


def _path_with(tmp_path: Path, *commands: str) -> str:
    """A directory holding only executable stand-ins named ``commands``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in commands:
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    return str(bin_dir)


def _script(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        [BASH, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_make_test_runs_the_setup_script_before_lint_and_pytest() -> None:
    done = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    setup = [i for i, line in enumerate(lines) if "tools/ensure-system-tools.sh" in line]
    assert setup, done.stdout
    later = [i for i, line in enumerate(lines) if "ruff" in line or "pytest" in line]
    assert later, done.stdout
    assert setup[0] < min(later), done.stdout


def test_ci_runs_only_make_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [
        line.strip()
        for line in ci.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert "make test" in commands
    assert not any("apt-get" in line or "command -v" in line for line in commands), ci
    assert os.access(SCRIPT, os.X_OK), f"{SCRIPT} is not executable"


def test_check_lists_graphviz_when_dot_is_missing(tmp_path: Path) -> None:
    done = _script(_path_with(tmp_path, "ip", "iptables", "chromium", "openssl"), "--check")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "needed: graphviz ('dot', for SVG/PNG state machine diagrams and the tests of them)"
    ]


def test_check_lists_every_package_when_nothing_is_there(tmp_path: Path) -> None:
    done = _script(_path_with(tmp_path), "--check")
    assert done.returncode == 1, done.stderr
    packages = [line.split()[1] for line in done.stdout.splitlines()]
    assert packages == ["graphviz", "iproute2", "iptables", "chromium", "openssl"]


def test_check_is_quiet_when_everything_is_there(tmp_path: Path) -> None:
    done = _script(_path_with(tmp_path, "dot", "ip", "iptables", "chromium", "openssl"), "--check")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize("present", [("ip", "iptables", "chromium", "openssl"), ()])
def test_without_apt_get_one_line_names_what_is_missing_and_make_goes_on(
    tmp_path: Path, present: tuple[str, ...]
) -> None:
    done = _script(_path_with(tmp_path, *present))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("ensure-system-tools: missing graphviz ('dot', for SVG/PNG")
    assert "cannot install (no apt-get)" in line
    assert "the tests that need them will fail" in line
    wanted = (
        ["graphviz"] if present else ["graphviz", "iproute2", "iptables", "chromium", "openssl"]
    )
    assert line.endswith("install with: apt-get install " + " ".join(wanted))


def test_unknown_argument_is_refused(tmp_path: Path) -> None:
    done = _script(_path_with(tmp_path), "--install-everything")
    assert done.returncode == 2
    assert "usage:" in done.stderr
