"""docs/fsm.md's complete programs run as written and print what the text says.

Which code blocks are programs is said by the document itself, with an HTML comment
(invisible once rendered) on the line just above a block's opening fence:

* ``<!-- test: run -->``: the block is a complete Python program.  It runs in a
  subprocess, in a fresh directory, and must exit 0 with nothing on stderr; every line
  of it of the form ``print(...)  # text`` says the program prints the line ``text``,
  and those lines must appear on stdout in that order.
* ``<!-- test: file NAME -->``: the block is a file the programs need (the
  ``turnstile.sm`` the ``.sm`` example loads by a relative path); it is written as
  ``NAME`` into every program's directory, which is its working directory.

Blocks without a marker are fragments (they use names defined elsewhere, or elide
parts with ``...``) and are not run.  A marker the test does not know fails it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import actorbus

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fsm.md"
#: the actorbus the tests import, so the programs run the same code
SRC = Path(actorbus.__file__).resolve().parents[1]
TIMEOUT = 60.0

_MARKED = re.compile(
    r"^<!-- test: (?P<marker>[^\n]*?) -->\n```[^\n]*\n(?P<body>.*?)^```", re.S | re.M
)
_PRINTS = re.compile(r"^\s*print\(.*\)\s+#\s*(?P<text>.+?)\s*$", re.M)


@dataclass(frozen=True)
class Program:
    line: int  # of the marker in docs/fsm.md
    code: str
    prints: tuple[str, ...]


def doc_blocks() -> tuple[list[Program], dict[str, str]]:
    """The programs and the files marked in docs/fsm.md, in document order."""
    text = DOC.read_text()
    programs: list[Program] = []
    files: dict[str, str] = {}
    for match in _MARKED.finditer(text):
        marker, body = match["marker"].split(), match["body"]
        line = text.count("\n", 0, match.start()) + 1
        if marker == ["run"]:
            prints = tuple(m["text"] for m in _PRINTS.finditer(body))
            programs.append(Program(line, body, prints))
        elif len(marker) == 2 and marker[0] == "file":
            files[marker[1]] = body
        else:
            raise AssertionError(
                f"docs/fsm.md:{line}: unknown test marker {match['marker']!r}; use "
                f"'<!-- test: run -->' or '<!-- test: file NAME -->'"
            )
    return programs, files


PROGRAMS, FILES = doc_blocks()


def test_the_fsm_actor_examples_are_marked_to_run() -> None:
    # both turnstile examples (Python class, .sm file) and the file the second loads
    turnstiles = [p for p in PROGRAMS if "class Gate(FsmActor):" in p.code]
    assert len(turnstiles) == 2, [p.line for p in PROGRAMS]
    assert ['machine = "turnstile.sm"' in p.code for p in turnstiles] == [False, True]
    assert all(p.prints == ("Stopped 50 20",) for p in turnstiles)
    assert "%map Turnstile" in FILES["turnstile.sm"]


@pytest.mark.parametrize("program", PROGRAMS, ids=[f"fsm.md:{p.line}" for p in PROGRAMS])
def test_a_program_of_the_doc_runs_as_written(program: Program, tmp_path: Path) -> None:
    for name, body in FILES.items():
        (tmp_path / name).write_text(body)
    script = tmp_path / "program.py"
    script.write_text(program.code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,  # the .sm example reads turnstile.sm from the current directory
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    where = f"docs/fsm.md:{program.line}"
    assert proc.returncode == 0, f"{where} exited {proc.returncode}:\n{proc.stderr}"
    assert proc.stderr == "", f"{where} wrote to stderr:\n{proc.stderr}"
    out = proc.stdout.splitlines()
    # the lines the doc says it prints, in order (other lines may come between)
    rest = iter(out)
    missing = [line for line in program.prints if line not in rest]
    assert missing == [], f"{where} did not print {missing} (in that order); it printed {out}"
