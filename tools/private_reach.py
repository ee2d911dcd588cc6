"""Count the private reaches across modules in src/actorbus.

The rule, per module (one ``.py`` file):

* A *reach* is an attribute access ``X._name`` (read, write or delete) where
  ``_name`` starts with exactly one underscore (dunders such as ``__slots__``
  and mangled ``__name`` are not counted) and ``X`` is anything but the bare
  names ``self`` and ``cls``.
* It is *across modules* unless ``_name`` is defined in the same module: as a
  function, class or method name, a name assigned or annotated at any level
  (module, class body, function), an attribute assigned on any object
  (``obj._name = ...``, ``self._name: int = ...``), a string in a
  ``__slots__`` tuple or list, or an ``import ... as _name`` alias.

So ``entry._routes`` counts in feeds.py when ``_routes`` is only written by
router.py, and ``mod._helper()`` counts when ``_helper`` is defined in
``mod``; ``other._count`` in the module that defines ``_count`` does not.
Private names of the standard library (``sys._getframe``) count too: the rule
does not ask where a name comes from, only whether this module defines it.

Usage::

    python tools/private_reach.py [--max N] [--by-name] [ROOT]

prints the total, then the count per top-level package (``bus``, ``net``,
...) and per module, largest first.  With ``--max N`` it exits 1 when the
total is over ``N`` (``make lint`` holds the ceiling).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "src" / "actorbus"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_names(tree: ast.AST) -> set[str]:
    """The private names a module defines (see the module docstring)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
                value = node.value
                if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
                    for elt in value.elts:
                        if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                            names.add(elt.value)
    return {n for n in names if _is_private(n)}


def reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, ``X._name``) of every private reach across modules in ``tree``."""
    own = defined_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        if node.attr in own:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        found.append((node.lineno, f"{ast.unparse(value)}.{node.attr}"))
    return found


def count(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Module path (relative to ``root``) -> its reaches."""
    result: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        result[path.relative_to(root).as_posix()] = reaches(tree)
    return result


def _top(module: str) -> str:
    head, _, rest = module.partition("/")
    return head if rest else "(top level)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--max", type=int, default=None, help="exit 1 when the total is over N")
    parser.add_argument("--by-name", action="store_true", help="also list each reach")
    args = parser.parse_args(argv)
    per_module = count(args.root)
    total = sum(len(v) for v in per_module.values())
    print(f"private reaches across modules: {total}")
    per_top: Counter[str] = Counter()
    for module, found in per_module.items():
        per_top[_top(module)] += len(found)
    for top, n in per_top.most_common():
        if n:
            print(f"  {top:<28} {n:5d}")
    print()
    for module, found in sorted(per_module.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if not found:
            continue
        print(f"  {module:<40} {len(found):5d}")
        if args.by_name:
            for line, text in found:
                print(f"      {line:5d}  {text}")
    if args.max is not None and total > args.max:
        print(
            f"private_reach: {total} reaches, over the ceiling of {args.max}; reach the other "
            f"module's state through a documented record or interface instead",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
