"""What every fuzz target shares: atheris when it is installed, coverage
instrumentation of the imports under test when the target runs as the fuzzer,
and the libFuzzer entry point.

Not a target (``run_ci.py`` runs only the ``fuzz_*.py`` scripts it names).  A
target puts its own folder on ``sys.path`` before importing this module, since
the tests load targets by file path.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from importlib import import_module
from typing import Any

__all__ = ["atheris", "fuzz", "instrumented"]

try:
    atheris: Any = import_module("atheris")
except ImportError:
    atheris = None


def instrumented(
    module_name: str, include: Sequence[str] | None = None
) -> AbstractContextManager[object]:
    """Coverage instrumentation of the imports made inside the ``with`` block
    (of the packages in ``include``; all when ``None``), but only when the target
    runs as the fuzzer (``module_name`` is ``"__main__"``), not when a test
    imports it."""
    if atheris is None or module_name != "__main__":
        return contextlib.nullcontext()
    hook: AbstractContextManager[object] = atheris.instrument_imports(include=include)
    return hook


def fuzz(one_input: Callable[[bytes], None]) -> None:
    """Run ``one_input`` under atheris (libFuzzer arguments in ``sys.argv``)."""
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris (tests drive one_input)")
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
