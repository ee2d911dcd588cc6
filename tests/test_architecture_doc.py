"""docs/architecture.md lists every module of src/actorbus, and only those: the
page's module tree is the code's (a module added, moved or removed without
updating the page fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "actorbus"
DOC = ROOT / "docs" / "architecture.md"


def listed_modules() -> set[str]:
    """The modules the second code block of "Layout" names, as paths under src/actorbus."""
    text = DOC.read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", layout, flags=re.S)
    assert len(blocks) == 2, "Layout holds the repository block, then the module tree"
    found: set[str] = set()
    #: the packages open at each indentation (two spaces a level)
    packages: list[str] = []
    for line in blocks[1].splitlines():
        if not line.strip():
            continue
        name = line.split()[0]
        depth = (len(line) - len(line.lstrip(" "))) // 2
        del packages[depth:]
        if name.endswith("/"):
            packages.append(name)
        else:
            found.add("".join(packages) + name)
    return found


def test_the_module_tree_names_every_module_and_nothing_else() -> None:
    actual = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "__pycache__" not in p.parts}
    listed = listed_modules()
    undocumented = {m for m in actual - listed if not m.endswith("__init__.py")}
    assert not undocumented, f"modules missing from docs/architecture.md: {sorted(undocumented)}"
    assert not listed - actual, (
        f"docs/architecture.md lists modules that do not exist: {sorted(listed - actual)}"
    )


def test_no_module_is_over_800_lines() -> None:
    sizes = {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
        for p in SRC.rglob("*.py")
    }
    over = {name: n for name, n in sizes.items() if n > 800}
    assert not over, f"split these by idea: {over}"
