"""The SMC ``.sm`` loader: every construct, SMC's Default lookup order, and malformed files.

Behaviour tests run on both engines (``make`` fixture).
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm import (
    SmMachine,
    TransitionNotAllowed,
    compile_machine,
    load_sm,
    machine_spec,
    parse_sm,
)

from .conftest import MakeEngine

DOOR_SM = """\
// A door, exercising every construct the loader accepts.
/* block comment /* nested */ still comment */
%{
KEPT_AND_RUN = "the block is Python, run when the file loads"
%}
%class Door
%package demo.doors
%fsmclass DoorMachine
%fsmfile door_sm
%access public
%import math
%import java.util.List
%declare class Door;
%header door.h
%include <stdio.h>
%start DoorMap::Closed

%map DoorMap
%%
Closed
    Entry { log("enter Closed"); }
    Exit  { log("exit Closed"); }
{
    open(who: final String, tags: List<Map<String, Integer>>)
        [ctxt.allowed(who) and len(tags) >= 0]
        Opened
        { log("open by " + who); count = ctxt.count + 1; }
    open(who: String, tags)
        Locked
        { ctxt.log("refused"); }
    knock nil { log("knock; knock)"); }
    slam Closed { log("slam"); }
    measure(x: float) [math.floor(x) // 2 == 1 and "]" != ")"]
        jump(OtherMap::Far)
        { log("measure " + str(x)); }
    Default nil { log("closed default"); }
}

Opened { close Closed {} }     // trailing comment
Locked { unlock Closed {} }
%%

%map OtherMap
%%
Far { back jump(DoorMap::Closed) {} }
Gone Entry { log("gone"); } {}
Default {
    vanish  Gone  { log("vanish"); }
    Default nil   { log("far default"); }
}
%%
"""


class DoorModel:
    def __init__(self, allowed: bool = True) -> None:
        self.lines: list[str] = []
        self.count = 0
        self._allowed = allowed

    def log(self, text: str) -> None:
        self.lines.append(text)

    def allowed(self, who: str) -> bool:
        return self._allowed


@pytest.fixture
def door_file(tmp_path: Path) -> Path:
    path = tmp_path / "door.sm"
    path.write_text(DOOR_SM, encoding="utf-8")
    return path


def test_directives_are_kept(door_file: Path) -> None:
    door = load_sm(door_file)
    assert isinstance(door, SmMachine)
    assert door.path == str(door_file)
    assert (door.class_name, door.package) == ("Door", "demo.doors")
    assert (door.fsm_class, door.fsm_file) == ("DoorMachine", "door_sm")
    assert door.access == ("public",)
    assert door.imports == ("math", "java.util.List")
    assert door.declares == ("class Door;",)
    assert (door.headers, door.includes) == (("door.h",), ("<stdio.h>",))
    assert "KEPT_AND_RUN = " in door.raw_source[0]
    assert door.start == ("DoorMap", "Closed")
    assert door.maps == ("DoorMap", "OtherMap")
    assert door.machine_class.__name__ == "DoorMachine"
    assert door.spec.source_path == str(door_file)


def test_spec_of_a_loaded_file(door_file: Path) -> None:
    spec = load_sm(door_file).spec
    assert [s.id for s in spec.states] == ["Closed", "Opened", "Locked", "Far", "Gone"]
    assert spec.start == "Closed"
    assert [s.id for s in spec.states if s.final] == ["Gone"]
    closed = spec.state("Closed")
    summary = [(t.events, t.target, t.loopback) for t in closed.transitions]
    assert summary == [
        (("open",), "Opened", False),
        (("open",), "Locked", False),
        (("knock",), "Closed", True),
        (("slam",), "Closed", False),
        (("measure",), "Far", False),
        (("*",), "Closed", True),
    ]
    assert closed.transitions[0].guards[0].label == "ctxt.allowed(who) and len(tags) >= 0"
    assert closed.transitions[0].on[0].label == 'log("open by " + who); count = ctxt.count + 1'
    far = spec.state("Far")
    assert [(t.events, t.from_default) for t in far.transitions] == [
        (("back",), False),
        (("vanish",), True),
        (("*",), True),
    ]
    assert [t.events for t in spec.default_transitions] == [("vanish",), ("*",)]
    assert load_sm(door_file) is load_sm(str(door_file))  # cached while unchanged
    assert machine_spec(door_file) is spec


def test_behaviour_of_every_construct(make: MakeEngine, door_file: Path) -> None:
    model = DoorModel()
    engine = make(load_sm(door_file), model)
    engine.start()
    assert model.lines == ["enter Closed"]
    engine.send("knock")  # nil: no exit/entry; ';' and ')' inside a string argument
    engine.send("slam")  # explicit self-transition: exit and entry run
    engine.send("close")  # declared elsewhere: the state's own Default transition
    assert model.lines == [
        "enter Closed",
        "knock; knock)",
        "exit Closed",
        "slam",
        "enter Closed",
        "closed default",
    ]
    model.lines.clear()
    engine.send("open", who="ann", tags=[])
    assert engine.current_state == "Opened"
    assert model.lines == ["exit Closed", "open by ann"]
    assert model.count == 1  # 'count = ctxt.count + 1;' assigned on ctxt
    with pytest.raises(TransitionNotAllowed):
        engine.send("knock")  # DoorMap has no Default state
    engine.send("close")
    model.lines.clear()
    engine.send("measure", x=3.5)  # %import math in the guard, '//' is floor division
    assert engine.current_state == "Far"  # jump into the other map
    engine.send("knock")  # OtherMap's Default state's Default transition
    engine.send("vanish")
    assert engine.current_state == "Gone"
    assert engine.is_final  # no transitions: final, Default does not apply
    assert model.lines == ["exit Closed", "measure 3.5", "far default", "vanish", "gone"]


def test_guard_chooses_between_transitions_of_one_event(make: MakeEngine, door_file: Path) -> None:
    model = DoorModel(allowed=False)
    engine = make(load_sm(door_file), model)
    engine.start()
    engine.send("open", who="eve", tags=[])
    assert engine.current_state == "Locked"
    assert model.lines[-1] == "refused"


LOOKUP_SM = """\
%start M::S
%map M
%%
S {
    e [ctxt.flag("own")] T { note("own"); }
    Default [ctxt.flag("own-default")] nil { note("own-default"); }
}
T { back S {} }
Default {
    e [ctxt.flag("default-e")] nil { note("default-e"); }
    Default nil { note("default-default"); }
}
%%
"""


class FlagModel:
    def __init__(self, *enabled: str) -> None:
        self.enabled = set(enabled)
        self.notes: list[str] = []

    def flag(self, name: str) -> bool:
        return name in self.enabled

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.mark.parametrize(
    ("event", "enabled", "expected"),
    [
        ("e", ["own", "default-e", "own-default"], "own"),
        ("e", ["default-e", "own-default"], "default-e"),
        ("e", ["own-default"], "own-default"),
        ("e", [], "default-default"),
        ("back", ["default-e", "own-default"], "own-default"),
        ("back", ["default-e"], "default-default"),
    ],
)
def test_smc_lookup_order(make: MakeEngine, event: str, enabled: list[str], expected: str) -> None:
    """Own transitions, Default state's, own Default transition, Default's Default."""
    model = FlagModel(*enabled)
    engine = make(parse_sm(LOOKUP_SM), model)
    engine.start()
    engine.send(event)
    assert model.notes == [expected]


def test_action_errors_point_at_the_sm_line(make: MakeEngine, tmp_path: Path) -> None:
    path = tmp_path / "boom.sm"
    path.write_text(
        "%start M::A\n%map M\n%%\nA {\n    go nil {\n        explode(1);\n    }\n}\n%%\n",
        encoding="utf-8",
    )

    class Model:
        def explode(self, n: int) -> None:
            raise RuntimeError(f"boom {n}")

    engine = make(load_sm(path), Model())
    engine.start()
    with pytest.raises(RuntimeError, match="boom 1") as caught:
        engine.send("go")
    text = "".join(traceback.format_exception(caught.value))
    # the reference engine runs a function compiled with the .sm file name and lines; the
    # compiled engine inlines the code and notes where it came from
    assert f'"{path}", line 6' in text or f"{path}:6" in text


def test_missing_event_argument_in_sm_code(make: MakeEngine) -> None:
    machine = parse_sm("%start M::A\n%map M\n%%\nA { put(x: int) nil { store(x); } }\n%%\n")

    class Model:
        def store(self, x: int) -> None:
            raise AssertionError("must not run")

    engine = make(machine, Model())
    engine.start()
    with pytest.raises(TypeError, match="x"):
        engine.send("put")


def test_sm_machines_ignore_python_statemachine_naming_conventions(make: MakeEngine) -> None:
    """An actor method called on_enter_B or on_go must not run for a .sm machine."""
    machine = parse_sm("%start M::A\n%map M\n%%\nA { go B {} }\nB { back A {} }\n%%\n")

    class Model:
        def __init__(self) -> None:
            self.ran: list[str] = []

        def on_enter_B(self) -> None:
            self.ran.append("on_enter_B")

        def on_go(self) -> None:
            self.ran.append("on_go")

        def prepare_event(self) -> dict[str, Any]:
            self.ran.append("prepare_event")
            return {}

    model = Model()
    engine = make(machine, model)
    engine.start()
    engine.send("go")
    assert engine.current_state == "B"
    assert model.ran == []


def test_load_sm_reloads_a_changed_file_and_reports_unreadable_ones(tmp_path: Path) -> None:
    path = tmp_path / "m.sm"
    path.write_text("%start M::A\n%map M\n%%\nA { go A {} }\n%%\n", encoding="utf-8")
    first = load_sm(path)
    path.write_text("%start M::A\n%map M\n%%\nA { go B {} }\nB { go A {} }\n%%\n", encoding="utf-8")
    second = load_sm(path)
    assert second is not first
    assert [s.id for s in second.spec.states] == ["A", "B"]
    with pytest.raises(FsmError, match="cannot read"):
        load_sm(tmp_path / "absent.sm")


def test_machine_name_defaults() -> None:
    assert parse_sm("%class Pump\n%start M::A\n%map M\n%%\nA { go A {} }\n%%\n").spec.name == (
        "PumpContext"
    )
    assert parse_sm(
        "%start M::A\n%map M\n%%\nA { go A {} }\n%%\n", "x/tank_level.sm"
    ).spec.name == ("TankLevelContext")


def test_python_import_feeds_guards_and_foreign_imports_are_ignored(make: MakeEngine) -> None:
    machine = parse_sm(
        "%import os.path\n%import com.example.Thing\n%start M::A\n%map M\n%%\n"
        "A { check(p: str) [os.path.isabs(p)] B {} }\nB { back A {} }\n%%\n"
    )
    engine = make(machine, DoorModel())
    engine.start()
    engine.send("check", p="/abs")
    assert engine.current_state == "B"


def test_compiled_engine_inlines_sm_code() -> None:
    machine = parse_sm("%start M::A\n%map M\n%%\nA { go(n: int) [n > 1] nil { hit(n); } }\n%%\n")

    class Model:
        def __init__(self) -> None:
            self.hits: list[int] = []

        def hit(self, n: int) -> None:
            self.hits.append(n)

    model = Model()
    engine = compile_machine(machine, model)
    engine.start()
    engine.send("go", n=2)
    assert model.hits == [2]
    with pytest.raises(TransitionNotAllowed, match="guards"):
        engine.send("go", n=0)


# ---------------------------------------------------------------- malformed

BASE = "%start M::A\n%map M\n%%\n"
END = "%%\n"

MALFORMED: list[tuple[str, str, int, int, str]] = [
    (
        "unknown directive",
        "%bogus x\n" + BASE + "A { go A {} }\n" + END,
        1,
        1,
        "unknown directive '%bogus'",
    ),
    ("missing %start", "%map M\n%%\nA { go A {} }\n%%\n", 5, 1, "'%start Map::State'"),
    ("start without ::", "%start M\n%map M\n%%\nA { go A {} }\n%%\n", 2, 1, "expected '::'"),
    ("unknown start map", "%start N::A\n%map M\n%%\nA { go A {} }\n%%\n", 1, 8, "unknown map 'N'"),
    (
        "unknown start state",
        "%start M::B\n%map M\n%%\nA { go A {} }\n%%\n",
        1,
        11,
        "unknown state 'B'",
    ),
    (
        "second %start",
        "%start M::A\n%start M::A\n%map M\n%%\nA { go A {} }\n%%\n",
        2,
        1,
        "second '%start'",
    ),
    ("map without %%", "%start M::A\n%map M\nA { go A {} }\n%%\n", 3, 1, "'%%' to open map 'M'"),
    ("unclosed map", BASE + "A { go A {} }\n", 5, 1, "state name or '%%'"),
    ("state without brace", BASE + "A go A {}\n" + END, 4, 3, "found the word 'go'; expected '{'"),
    ("no next state", BASE + "A { go {} }\n" + END, 4, 8, "next state of transition 'go'"),
    ("unknown target", BASE + "A { go B {} }\n" + END, 4, 8, "unknown state 'B'"),
    ("unknown target map", BASE + "A { go N::A {} }\n" + END, 4, 8, "unknown map 'N'"),
    (
        "missing semicolon",
        BASE + "A { go A { act() } }\n" + END,
        4,
        18,
        "expected ';' after the action",
    ),
    (
        "action without parens",
        BASE + "A { go A { act; } }\n" + END,
        4,
        15,
        "'(' after the action name",
    ),
    ("unterminated guard", BASE + "A { go [x > 1\n", 4, 8, "end of the file inside a guard"),
    ("guard swallows braces", BASE + "A { go [x > 1 A {} }\n" + END, 4, 20, "unbalanced '}'"),
    ("unbalanced guard", BASE + "A { go [x)] A {} }\n" + END, 4, 10, "unbalanced ')'"),
    ("invalid guard", BASE + "A { go [x >] A {} }\n" + END, 4, 12, "invalid Python in the guard"),
    ("invalid guard line 2", BASE + "A { go [x and\n  y +] A {} }\n" + END, 5, 6, "invalid Python"),
    (
        "invalid action args",
        BASE + "A { go A { act(1 +, 2); } }\n" + END,
        4,
        19,
        "arguments of act",
    ),
    ("push to unknown state", BASE + "A { go push(M::Z) {} }\n" + END, 4, 16, "state 'Z'"),
    ("push to unknown map", BASE + "A { go push(N::A) {} }\n" + END, 4, 13, "map 'N'"),
    ("slash without push", BASE + "A { go A/jump(M::A) {} }\n" + END, 4, 10, "'push(Map"),
    (
        "pop of an undeclared transition",
        BASE + "A { go pop(nothing) {} }\n" + END,
        4,
        12,
        "no state declares a transition 'nothing'",
    ),
    ("pop missing argument", BASE + "A { go(x) pop(go) {} }\n" + END, 4, 15, "expected 1"),
    ("pop extra argument", BASE + "A { go pop(go, 1) {} }\n" + END, 4, 15, "expected 0"),
    ("pop invalid argument", BASE + "A { go pop(go, 1 +) {} }\n" + END, 4, 19, "arguments of pop"),
    ("unterminated comment", BASE + "A { go A {} }\n/* open\n" + END, 5, 1, "'*/'"),
    ("bad character", BASE + "A { go @ }\n" + END, 4, 8, "character '@'"),
    ("duplicate state", BASE + "A { go A {} }\nA { go A {} }\n" + END, 5, 1, "second state 'A'"),
    (
        "parameter mismatch",
        BASE + "A { go(x: int) A {} }\nB { go(y: int) A {} }\n" + END,
        5,
        5,
        "expected (x)",
    ),
    ("reserved parameter", BASE + "A { go(ctxt: str) A {} }\n" + END, 4, 8, "'ctxt'"),
    ("duplicate parameter", BASE + "A { go(x: int, x: int) A {} }\n" + END, 4, 16, "twice"),
    ("unreachable guard", BASE + "A { go A {} go [x] A {} }\n" + END, 4, 13, "unguarded one last"),
    (
        "Default with Entry",
        BASE + "A { go A {} }\nDefault Entry { x(); } { }\n" + END,
        5,
        1,
        "Entry/Exit",
    ),
    (
        "Default with params",
        BASE + "A { Default(x: int) nil {} }\n" + END,
        4,
        13,
        "parameters on a 'Default'",
    ),
    ("unterminated string", BASE + 'A { go A { say("hi); } }\n' + END, 4, 16, "inside a string"),
    ("missing type", BASE + "A { go(x: ) A {} }\n" + END, 4, 9, "no type after ':'"),
    (
        "empty %import",
        "%import\n" + BASE + "A { go A {} }\n" + END,
        1,
        8,
        "nothing after '%import'",
    ),
    ("Default as target", BASE + "A { go Default {} }\n" + END, 4, 8, "'Default' as a next state"),
    ("empty guard", BASE + "A { go [] A {} }\n" + END, 4, 8, "empty guard"),
    (
        "state name of StateMachine",
        BASE + "A { go send {} }\nsend { go A {} }\n" + END,
        5,
        1,
        "cannot use",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        pytest.param(text, line, column, fragment, id=name)
        for name, text, line, column, fragment in MALFORMED
    ],
)
def test_malformed_input_reports_line_and_column(
    text: str, line: int, column: int, fragment: str
) -> None:
    with pytest.raises(SmSyntaxError) as caught:
        parse_sm(text, "bad.sm")
    error = caught.value
    assert (error.path, error.line, error.column) == ("bad.sm", line, column), str(error)
    assert str(error).startswith(f"bad.sm:{line}:{column}: found ")
    assert fragment in str(error)
    assert "expected" in str(error)


def test_malformed_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.sm"
    path.write_text(BASE + "A { go A { act() } }\n" + END, encoding="utf-8")
    with pytest.raises(SmSyntaxError, match=rf"^{path}:4:18: found '\}}'"):
        load_sm(path)
