"""The fuzz targets of fuzz/ as the tests drive them: loaded by file path (fuzz/
is not a package), and their seed inputs mutated under hypothesis.

Imported as ``fuzz_targets`` (tests/ is on sys.path: tests/conftest.py's
directory)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import strategies as st

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"


def load(script: str, as_name: str) -> ModuleType:
    """fuzz/``script``.py imported as module ``as_name`` (a name of the caller's
    own, so that two test files loading one script do not share the module)."""
    spec = importlib.util.spec_from_file_location(as_name, FUZZ / f"{script}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def mutate(base: bytes, edits: list[tuple[int, int, int]], *, keep: int = 0) -> bytes:
    """``base`` with each ``(kind, where, value)`` edit applied in turn: kind 0
    overwrites the byte at ``where`` with ``value``, 1 inserts ``value`` there, 2
    cuts the input off there.  Positions fall after the first ``keep`` bytes,
    which stay as they are (a target whose first byte picks its mode keeps it);
    an input no longer than ``keep`` gets ``value`` appended instead."""
    data = bytearray(base)
    for kind, where, value in edits:
        if len(data) <= keep:
            data.append(value)
            continue
        at = keep + where % (len(data) - keep)
        if kind == 0:
            data[at] = value
        elif kind == 1:
            data.insert(at, value)
        else:
            del data[at:]
    return bytes(data)


def mutated(seeds: list[bytes], *, keep: int = 0) -> st.SearchStrategy[bytes]:
    """A seed input with up to six edits (see :func:`mutate`)."""
    edit = st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.integers(0, 255))
    return st.builds(
        lambda base, edits: mutate(base, edits, keep=keep),
        st.sampled_from(seeds),
        st.lists(edit, max_size=6),
    )
