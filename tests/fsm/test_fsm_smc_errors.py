"""A ``.sm`` file with a missing '}': the error points at the '{' left open.

Without its '}', the parser pairs the braces that follow wrongly and only fails
later, at a token that is fine where it stands; the error must instead name the
file, line and column of the unclosed '{', what it opens, and that a '}' is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actorbus.errors import SmSyntaxError
from actorbus.fsm import load_sm, parse_sm

HEAD = "%start M::A\n%map M\n%%\n"
TAIL = "%%\n"

# (name, text, line, column, what the brace opens)
UNCLOSED = [
    (
        "state body, next state follows",
        HEAD + "A\n{\n    go B {}\n\nB\n{\n    back A {}\n}\n" + TAIL,
        5,
        1,
        "the transitions of state 'A'",
    ),
    (
        "state body, same-line style",
        HEAD + "A {\n    go B {}\nB {\n    back A {}\n}\n" + TAIL,
        4,
        3,
        "the transitions of state 'A'",
    ),
    (
        "last state before %%",
        HEAD + "A\n{\n    go A {}\n" + TAIL,
        5,
        1,
        "the transitions of state 'A'",
    ),
    (
        "end of file",
        HEAD + "A\n{\n    go A {}\n",
        5,
        1,
        "the transitions of state 'A'",
    ),
    (
        "transition actions",
        HEAD + "A\n{\n    go B { x();\n}\nB { back A {} }\n" + TAIL,
        6,
        10,
        "the actions of transition 'go'",
    ),
    (
        "multi-line transition actions",
        HEAD + "A {\n    go B {\n        x();\n        y();\n}\nB { back A {} }\n" + TAIL,
        5,
        10,
        "the actions of transition 'go'",
    ),
    (
        "Entry actions",
        HEAD + "A\n    Entry { x();\n{\n    go B {}\n}\nB { back A {} }\n" + TAIL,
        5,
        11,
        "the Entry actions of state 'A'",
    ),
    (
        "Exit actions",
        HEAD + "A\n    Exit { x();\n{\n    go B {}\n}\nB { back A {} }\n" + TAIL,
        5,
        10,
        "the Exit actions of state 'A'",
    ),
    (
        "Default state",
        HEAD + "A { go A {} }\nDefault\n{\n    stop A {}\n" + TAIL,
        6,
        1,
        "the transitions of state 'Default'",
    ),
    (
        "braces in Python code do not count",
        HEAD
        + "A\n{\n    go(x) [x in {1, 2}] B { y({'}': x}); }\n"
        + "B\n{\n    back A { z = {}; }\n}\n"
        + TAIL,
        5,
        1,
        "the transitions of state 'A'",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "what"),
    [
        pytest.param(text, line, column, what, id=name)
        for name, text, line, column, what in UNCLOSED
    ],
)
def test_a_missing_brace_is_reported_at_the_open_one(
    text: str, line: int, column: int, what: str
) -> None:
    with pytest.raises(SmSyntaxError) as caught:
        parse_sm(text, "open.sm")
    error = caught.value
    assert (error.path, error.line, error.column) == ("open.sm", line, column), str(error)
    assert str(error).startswith(f"open.sm:{line}:{column}: found no '}}' for the '{{' ")
    assert f"opens {what}; expected a '}}' to close it" in str(error)


def test_the_error_names_the_file_and_where_the_parser_stopped(tmp_path: Path) -> None:
    path = tmp_path / "door.sm"
    path.write_text(HEAD + "A\n{\n    go B {}\n\nB\n{\n    back A {}\n}\n" + TAIL, encoding="utf-8")
    with pytest.raises(SmSyntaxError, match=rf"^{path}:5:1: found no '\}}'") as caught:
        load_sm(path)
    # what the parser ran into, for the reader who looks there
    assert "failed at line 9, column 1: found '{'" in str(caught.value)


def test_an_earlier_error_is_reported_as_it_is() -> None:
    # the state body is left open too, but the bad character comes first
    text = HEAD + "A\n{\n    go @ {}\n" + TAIL
    with pytest.raises(SmSyntaxError, match=r"^bad\.sm:6:8: found the character '@'"):
        parse_sm(text, "bad.sm")


def test_a_brace_too_many_is_not_blamed_on_an_open_one() -> None:
    text = HEAD + "A { go A {} } }\n" + TAIL
    with pytest.raises(SmSyntaxError, match=r"^bad\.sm:4:15: found '\}'; expected a state name"):
        parse_sm(text, "bad.sm")


def test_balanced_files_still_load() -> None:
    machine = parse_sm(
        HEAD + "A\n{\n    go(x) [x in {1}] B { y({'k': x}); }\n}\nB { back A {} }\n" + TAIL
    )
    assert [s.id for s in machine.spec.states] == ["A", "B"]
