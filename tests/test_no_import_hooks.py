"""No module installs a collaborator into another one at import time.

Collaborators are handed in at construction (docs/architecture.md, "Why
collaborators are handed in"): a module never rebinds a global from inside a
function (``global x`` followed by ``x = ...``, the shape of every ``use_*`` /
``*_with`` installer), never assigns an attribute of an imported module, and
never calls a ``use_*`` / ``*_with`` function at module level.  The scan reads
the source with the AST; each rule is shown to catch its case.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "actorbus"

#: what an installer is called
_INSTALLER = re.compile(r"^(use_\w+|\w+_with)$")

#: module state that functions may rebind: process-wide switches that are this
#: module's own (counters and saved settings), not collaborators of other modules
_OWN_STATE = {
    "_gc.py": {"_holds", "_saved"},
    "net/_trim.py": {"_fixed"},
}


def _imported_modules(tree: ast.Module) -> set[str]:
    """Names bound to modules by ``import x`` / ``from . import x``."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is None:
            names.update(a.asname or a.name for a in node.names)
    return names


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements that run at import (``if`` and ``try`` bodies included)."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if not isinstance(node, ast.If | ast.Try):
            out.append(node)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return out


def hooks(source: str, name: str) -> list[str]:
    """What in ``source`` (the module ``name``, relative to src/actorbus) installs
    a collaborator at import, one line per finding."""
    tree = ast.parse(source)
    found: list[str] = []
    allowed = _OWN_STATE.get(name, set())
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for var in node.names:
                if var not in allowed:
                    found.append(f"{name}:{node.lineno}: a function rebinds the global {var!r}")
    modules = _imported_modules(tree)
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id in modules
            ):
                found.append(
                    f"{name}:{node.lineno}: assigns {target.value.id}.{target.attr} "
                    f"of another module"
                )
    for stmt in _module_level(tree):
        for node in ast.walk(stmt):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                break
            if isinstance(node, ast.Call):
                func = node.func
                called = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if _INSTALLER.match(called):
                    found.append(f"{name}:{node.lineno}: calls the installer {called}() at import")
    return found


def test_no_module_installs_a_collaborator_at_import() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        found += hooks(path.read_text(encoding="utf-8"), path.relative_to(SRC).as_posix())
    assert found == []


def test_a_global_installer_is_caught() -> None:
    source = "_f = None\n\ndef use_f(f):\n    global _f\n    _f = f\n"
    assert hooks(source, "bus/x.py") == ["bus/x.py:4: a function rebinds the global '_f'"]


def test_an_installer_call_at_import_is_caught() -> None:
    source = "from .message import use_codec_compiler\n\nuse_codec_compiler(print)\n"
    assert hooks(source, "bus/x.py") == [
        "bus/x.py:3: calls the installer use_codec_compiler() at import"
    ]
    inside = "if True:\n    owner.find_runtime_with(print)\n"
    assert hooks(inside, "node.py") == [
        "node.py:2: calls the installer find_runtime_with() at import"
    ]


def test_assigning_another_modules_attribute_is_caught() -> None:
    source = "from . import _types\n\n_types.records = object()\n"
    assert hooks(source, "bus/x.py") == ["bus/x.py:3: assigns _types.records of another module"]


def test_a_call_inside_a_function_is_not_an_import_time_install() -> None:
    source = "def later():\n    use_something(print)\n"
    assert hooks(source, "bus/x.py") == []
