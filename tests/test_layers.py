"""The import-linter contracts in pyproject.toml hold for src/, and they catch what
they are for: an upward import (even inside a function), a cycle between
sibling modules, and a transport reaching past the bus's seam, each added to a
temporary copy of the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contracts on the package under ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT), "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "actorbus", src / "actorbus")
    return src


def test_the_contracts_hold_for_src() -> None:
    done = _lint(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_an_upward_import_inside_a_function_breaks_the_layers(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    router = src / "actorbus" / "bus" / "router.py"
    router.write_text(
        router.read_text() + "\n\ndef _sneaky() -> object:\n"
        "    from actorbus.node import Bus\n\n    return Bus\n"
    )
    done = _lint(src)
    assert done.returncode != 0
    assert "layers" in done.stdout and "BROKEN" in done.stdout
    assert "actorbus.bus.router -> actorbus.node" in done.stdout


def test_a_cycle_between_siblings_is_refused(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    scope = src / "actorbus" / "bus" / "scope.py"  # the router imports scope
    scope.write_text(scope.read_text() + "\n\nimport actorbus.bus.router  # noqa: E402\n")
    done = _lint(src)
    assert done.returncode != 0
    assert "No cycles are allowed in actorbus.bus" in done.stdout


def test_a_transport_that_reaches_past_the_seam_is_refused(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    inbound = src / "actorbus" / "net" / "_inbound.py"
    inbound.write_text(
        inbound.read_text() + "\n\ndef _peek() -> object:\n"
        "    from actorbus.bus.router import Router\n\n    return Router\n"
    )
    done = _lint(src)
    assert done.returncode != 0
    assert "actorbus.net is not allowed to import actorbus.bus.router" in done.stdout
