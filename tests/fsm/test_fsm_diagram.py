"""Diagrams: Mermaid and DOT text, SVG and PNG through the real Graphviz ``dot``.

The picture tests need Graphviz installed (CI installs it); without ``dot`` they fail
with a message saying so, they are never skipped.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from actorbus.errors import FsmError
from actorbus.fsm import (
    GraphvizNotFoundError,
    MachineSpec,
    compile_machine,
    load_sm,
    machine_spec,
    reference_machine,
    render,
    write_diagram,
)
from actorbus.fsm.diagram import transition_label

from .test_fsm_calculator import CALCULATOR_SM, CalculatorMachine, RecordingCalculator
from .test_fsm_engine import Phone, PhoneModel


@pytest.fixture
def graphviz() -> str:
    dot = shutil.which("dot")
    if dot is None:
        pytest.fail(
            "Graphviz's 'dot' is not installed; the SVG/PNG diagram tests need it "
            "(apt-get install graphviz)"
        )
    return dot


# ------------------------------------------------------- mermaid round trip

_ENTITY = re.compile(r"#(\d+);")
_EDGE = re.compile(r"^\s*(\S+) --> (\S+)(?: : (.*))?$")
_ALIAS = re.compile(r'^\s*state "(.*)" as (\S+)$')


def parse_mermaid(text: str) -> tuple[set[str], set[tuple[str, str, str]], str, set[str]]:
    """Read back states, (source, target, label) edges, the start and the final states."""
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    names: dict[str, str] = {}
    edges: set[tuple[str, str, str]] = set()
    start = ""
    finals: set[str] = set()
    for line in lines[1:]:
        alias = _ALIAS.match(line)
        if alias:
            names[alias.group(2)] = _ENTITY.sub(lambda m: chr(int(m.group(1))), alias.group(1))
            continue
        edge = _EDGE.match(line)
        if not edge:
            continue
        source, target, label = edge.group(1), edge.group(2), edge.group(3) or ""
        label = _ENTITY.sub(lambda m: chr(int(m.group(1))), label)
        if source == "[*]":
            start = names.get(target, target)
        elif target == "[*]":
            finals.add(names.get(source, source))
        else:
            edges.add((names.get(source, source), names.get(target, target), label))
    states = {a for a, _, _ in edges} | {b for _, b, _ in edges} | {start} | finals
    return states, edges, start, finals


def expected_edges(spec: MachineSpec) -> set[tuple[str, str, str]]:
    edges: set[tuple[str, str, str]] = set()
    for state in spec.states:
        for t in state.transitions:
            if not t.from_default:
                target = state.id if t.loopback else str(t.target)
                edges.add((state.id, target, transition_label(t)))
    ids = {s.id for s in spec.states}
    for t in spec.default_transitions:
        target = str(t.target) if t.target in ids and not t.loopback else "Default (any state)"
        edges.add(("Default (any state)", target, transition_label(t)))
    return edges


@pytest.mark.parametrize("declaration", ["sm", "python", "phone"])
def test_mermaid_round_trip_matches_the_spec(declaration: str) -> None:
    sources: dict[str, Any] = {"sm": CALCULATOR_SM, "python": CalculatorMachine, "phone": Phone}
    source = sources[declaration]
    spec = machine_spec(source)
    text = render(source, "mermaid")
    assert isinstance(text, str)
    states, edges, start, finals = parse_mermaid(text)
    assert start == spec.start
    assert finals == {s.id for s in spec.states if s.final}
    assert states - {"Default (any state)"} == {s.id for s in spec.states}
    assert edges == expected_edges(spec)


def test_mermaid_shows_guards_loopbacks_default_and_the_current_state() -> None:
    text = render(load_sm(CALCULATOR_SM), "mermaid", current="Collecting")
    assert isinstance(text, str)
    assert "    [*] --> Initializing\n" in text
    assert "Collecting --> Publishing : data [ctxt.window_full_after(msg)] / add(msg)\n" in text
    assert "Collecting --> Collecting : data / add(msg) (internal)\n" in text
    assert 'state "Default (any state)" as Default\n' in text
    assert "Default --> FeedDown : feed_down\n" in text
    assert "Default --> Default : feed_up (internal)\n" in text
    assert "Initializing : entry / open_feeds()\n" in text
    assert "Shutdown --> [*]\n" in text
    assert "class Collecting current\n" in text
    assert "class Default pseudo\n" in text
    assert "current" not in render(load_sm(CALCULATOR_SM), "mermaid")


def test_mermaid_escapes_syntax_characters() -> None:
    text = render(
        load_sm(CALCULATOR_SM).spec,
        "mermaid",
    )
    assert isinstance(text, str)
    # 'add(msg); publish_average()' carries a ';' that Mermaid would treat as a separator
    assert "add(msg)#59; publish_average()" in text


# ---------------------------------------------------------------------- dot


def test_dot_text_marks_current_state_loopbacks_and_default() -> None:
    text = render(CalculatorMachine, "dot", current="Publishing")
    assert isinstance(text, str)
    assert text.startswith('digraph "CalculatorMachine" {')
    assert '"__start__" -> "Initializing";' in text
    assert '"Shutdown" [label="Shutdown\\nentry / close_feeds", peripheries=2];' in text
    assert re.search(
        r'"Publishing" \[label="[^"]*", style="rounded,filled,bold", fillcolor="#ffd54f"', text
    )
    assert '"Collecting" -> "Collecting" [label="data / add (internal)", style=dashed' in text
    assert '"Default" [shape=note, style=dashed' in text
    assert '"Default" -> "FeedDown" [label="feed_down", style=dashed];' in text


def test_svg_and_png_come_from_real_graphviz(graphviz: str) -> None:
    svg = render(CALCULATOR_SM, "svg", current="FeedDown")
    assert isinstance(svg, str)
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "FeedDown" in svg and "#ffd54f" in svg
    png = render(CALCULATOR_SM, "png")
    assert isinstance(png, bytes)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_running_engine_highlights_its_current_state(graphviz: str) -> None:
    for factory in (compile_machine, reference_machine):
        engine = factory(Phone, PhoneModel())
        engine.start()
        engine.send("call")
        text = render(engine, "mermaid")
        assert isinstance(text, str) and "class Ringing current" in text
        assert "class Idle current" in str(render(engine, "mermaid", current="Idle"))
        svg = render(engine, "svg")
        assert isinstance(svg, str) and "#ffd54f" in svg


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("calc.mmd", lambda data: data.startswith(b"stateDiagram-v2")),
        ("calc.mermaid", lambda data: data.startswith(b"stateDiagram-v2")),
        ("calc.dot", lambda data: data.startswith(b"digraph")),
        ("calc.gv", lambda data: data.startswith(b"digraph")),
        ("calc.svg", lambda data: b"<svg" in data),
        ("calc.PNG", lambda data: data.startswith(b"\x89PNG")),
    ],
)
def test_write_diagram_picks_the_format_from_the_extension(
    graphviz: str, tmp_path: Path, name: str, check: object
) -> None:
    written = write_diagram(CALCULATOR_SM, tmp_path / name, current="Collecting")
    assert written == tmp_path / name
    assert callable(check) and check(written.read_bytes())


def test_unknown_extension_format_or_state_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FsmError, match=r"\.svg"):
        write_diagram(CALCULATOR_SM, tmp_path / "calc.jpeg")
    with pytest.raises(FsmError, match="unknown diagram format"):
        render(CALCULATOR_SM, "gif")  # type: ignore[arg-type]
    with pytest.raises(FsmError, match="no state 'Nowhere'.*Initializing"):
        render(CALCULATOR_SM, "mermaid", current="Nowhere")


def test_missing_graphviz_says_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no 'dot' on PATH
    with pytest.raises(GraphvizNotFoundError, match="apt-get install graphviz") as caught:
        render(CALCULATOR_SM, "png")
    assert "'mermaid' or 'dot' text" in str(caught.value)
    text = render(CALCULATOR_SM, "dot")  # text still works
    assert isinstance(text, str) and text.startswith("digraph")


def test_picture_of_a_loaded_calculator_with_recorded_run(graphviz: str) -> None:
    engine = compile_machine(CALCULATOR_SM, RecordingCalculator())
    engine.start()
    engine.send("feed_up")
    svg = render(engine, "svg")
    assert isinstance(svg, str) and "Collecting" in svg
