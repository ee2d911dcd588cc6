"""tools/private_reach.py: the rule it counts by, on small sources, and the
ceiling ``make lint`` holds, on src/ (run as ``make lint`` runs it)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "private_reach.py"
sys.path.insert(0, str(TOOL.parent))

import private_reach  # noqa: E402


def _reaches(source: str) -> list[str]:
    return [text for _line, text in private_reach.reaches(ast.parse(source))]


def test_a_private_name_of_another_module_counts() -> None:
    assert _reaches("def f(router):\n    return router._lock\n") == ["router._lock"]
    assert _reaches("import mod\nmod._helper()\n") == ["mod._helper"]
    assert _reaches("def f(a):\n    a.b._c = 1\n") == []  # assigned here: this module's


def test_self_cls_dunders_and_names_defined_here_do_not_count() -> None:
    source = (
        "class A:\n"
        "    __slots__ = ('_x',)\n"
        "    def f(self, other):\n"
        "        return self._y, cls._z, other._x, other.__dict__, other._helper\n"
        "def _helper():\n"
        "    pass\n"
    )
    assert _reaches(source) == []


def test_the_ceiling_make_lint_holds_is_met() -> None:
    ceiling = re.search(r"private_reach\.py --max (\d+)", (ROOT / "Makefile").read_text())
    assert ceiling is not None, "make lint runs tools/private_reach.py --max N"
    done = subprocess.run(
        [sys.executable, str(TOOL), "--max", ceiling.group(1)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_over_the_ceiling_exits_1() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--max", "0"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert "over the ceiling of 0" in done.stderr
