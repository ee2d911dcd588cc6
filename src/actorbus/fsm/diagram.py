"""Diagrams of state machines: Mermaid and Graphviz DOT text, SVG and PNG pictures.

Theory of operation
-------------------
Everything is drawn from the :class:`~actorbus.fsm.MachineSpec`, so a Python class and
a ``.sm`` file render the same way.  Text formats need nothing installed; pictures run
Graphviz's ``dot`` executable on the DOT text (python-statemachine's own diagram support
needs pydot, which actorbus does not depend on).

Conventions, identical in both text formats:

* the start state gets an arrow from the initial pseudo-state, final states one to the
  final pseudo-state (Mermaid ``[*]``) or a double border (DOT);
* an edge label reads ``event [guard] / actions`` (declared callbacks only; naming
  conventions such as ``on_enter_<state>`` depend on the model and are not drawn);
  ``*`` stands for "any event" (SMC ``Default`` transitions);
* loopbacks (internal / SMC ``nil``) are self-loops labelled ``... (internal)``,
  dashed in DOT; external self-transitions are plain self-loops;
* transitions of the Default pseudo-state are drawn once, from a dashed ``Default``
  node ("any state"), not once per state; a loopback there means "stay in whatever
  state is current";
* an SMC push edge goes to the pushed state, its label ending ``push(State)``; every
  pop edge goes to one ``pop`` node (where it returns depends on the state stack at
  run time), its label ending ``pop(transition, args)``;
* the current state, when given, is filled amber with a thick border.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Literal

from actorbus.errors import FsmError
from actorbus.fsm._declaration import machine_spec
from actorbus.fsm._errors import GraphvizNotFoundError
from actorbus.fsm._stack import HELPER_ATTR
from actorbus.fsm.spec import CallbackRef, MachineSpec, TransitionSpec

__all__ = ["DiagramFormat", "render", "render_dot", "write_diagram"]

DiagramFormat = Literal["mermaid", "dot", "svg", "png"]

_EXTENSIONS: dict[str, DiagramFormat] = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}
_CURRENT_FILL = "#ffd54f"
_CURRENT_STROKE = "#e65100"
_INTERNAL = "(internal)"
_SAFE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _labels(refs: tuple[CallbackRef, ...]) -> list[str]:
    """The callbacks the declaration names: no conventions, no push/pop machinery, no
    unnamed checks (a .sm Default transition's declared-events validator)."""
    return [
        r.label
        for r in refs
        if not r.convention and r.label and not getattr(r.target, HELPER_ATTR, False)
    ]


def transition_label(t: TransitionSpec) -> str:
    """``event [guard] / actions`` for one transition (``(internal)`` for loopbacks)."""
    events = ", ".join("*" if e == "*" else e for e in t.events) or "?"
    text = events
    guards = _labels(t.validators) + _labels(t.guards)
    if guards:
        text += " [" + " and ".join(guards) + "]"
    actions = _labels(t.before) + _labels(t.on) + _labels(t.after)
    if t.push is not None:
        # Next/push(P) puts Next on the stack; a plain push, the source itself
        end = f"{t.push}/" if t.push and t.push != t.source else ""
        actions.append(f"{end}push({t.target})")
    if t.pop is not None:
        actions.append(t.pop)
    if actions:
        text += " / " + "; ".join(actions)
    if t.loopback and t.pop is None:
        text += " " + _INTERNAL
    return text


def _entry_exit(spec: MachineSpec, state_id: str) -> list[str]:
    state = spec.state(state_id)
    lines: list[str] = []
    enter = _labels(state.enter)
    if enter:
        lines.append("entry / " + "; ".join(enter))
    leave = _labels(state.exit)
    if leave:
        lines.append("exit / " + "; ".join(leave))
    return lines


def _default_id(spec: MachineSpec) -> str:
    name = "Default"
    ids = {s.id for s in spec.states}
    while name in ids:
        name += "_"
    return name


def _pop_id(spec: MachineSpec) -> str | None:
    """The id of the node pop edges go to; ``None`` if the machine has no pop."""
    if not any(t.pop is not None for t in (*spec.transitions(), *spec.default_transitions)):
        return None
    name = "pop"
    ids = {s.id for s in spec.states} | {_default_id(spec)}
    while name in ids:
        name += "_"
    return name


def _edges(spec: MachineSpec) -> list[tuple[str, str, TransitionSpec, bool]]:
    """(source, target, transition, from_default_node) for every edge to draw."""
    edges: list[tuple[str, str, TransitionSpec, bool]] = []
    pop = _pop_id(spec)
    drawn: set[tuple[str, str]] = set()
    for state in spec.states:
        for t in state.transitions:
            if t.from_default:
                continue
            if t.pop is not None and pop is not None:
                # one edge for the copies a pop is run as (one per state it may return to)
                key = (state.id, transition_label(t))
                if key not in drawn:
                    drawn.add(key)
                    edges.append((state.id, pop, t, False))
                continue
            target = state.id if t.loopback or t.target is None else t.target
            edges.append((state.id, target, t, False))
    default = _default_id(spec)
    state_ids = {s.id for s in spec.states}
    for t in spec.default_transitions:
        if t.pop is not None and pop is not None:
            edges.append((default, pop, t, True))
            continue
        target = t.target if t.target in state_ids and not t.loopback else default
        edges.append((default, str(target), t, True))
    return edges


# ---------------------------------------------------------------------- mermaid


def _mermaid_text(text: str) -> str:
    """Escape what Mermaid would read as syntax, as ``#<code>;`` entities."""
    return "".join(f"#{ord(c)};" if c in '#;:"<>{}%\\' else c for c in text)


def to_mermaid(spec: MachineSpec, current: str | None = None) -> str:
    """The machine as a Mermaid ``stateDiagram-v2``."""
    lines = ["stateDiagram-v2"]
    ids: dict[str, str] = {}
    for number, state in enumerate(spec.states):
        if _SAFE_ID.match(state.id) and state.id != "end":
            ids[state.id] = state.id
        else:
            ids[state.id] = f"s{number}"
            lines.append(f'    state "{_mermaid_text(state.id)}" as s{number}')
    default = _default_id(spec)
    if spec.default_transitions:
        ids[default] = default
        lines.append(f'    state "Default (any state)" as {default}')
    pop = _pop_id(spec)
    if pop is not None:
        ids[pop] = pop
        lines.append(f'    state "pop (back to the pushing state)" as {pop}')
    lines.append(f"    [*] --> {ids[spec.start]}")
    for state in spec.states:
        for line in _entry_exit(spec, state.id):
            lines.append(f"    {ids[state.id]} : {_mermaid_text(line)}")
    for source, target, t, _ in _edges(spec):
        lines.append(f"    {ids[source]} --> {ids[target]} : {_mermaid_text(transition_label(t))}")
    for state in spec.states:
        if state.final:
            lines.append(f"    {ids[state.id]} --> [*]")
    pseudo = [n for n in (default if spec.default_transitions else None, pop) if n is not None]
    if pseudo:
        lines.append("    classDef pseudo stroke-dasharray: 5 5")
        lines.append(f"    class {','.join(pseudo)} pseudo")
    if current is not None:
        lines.append(
            f"    classDef current fill:{_CURRENT_FILL},stroke:{_CURRENT_STROKE},stroke-width:3px"
        )
        lines.append(f"    class {ids[current]} current")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------- dot


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(spec: MachineSpec, current: str | None = None) -> str:
    """The machine as a Graphviz ``digraph``."""
    out = [
        f"digraph {_dot_text(spec.name)} {{",
        "    rankdir=LR;",
        '    node [shape=box, style="rounded", fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
        '    "__start__" [shape=point, width=0.15, label=""];',
    ]
    for state in spec.states:
        attributes = [f"label={_dot_text(chr(10).join([state.id, *_entry_exit(spec, state.id)]))}"]
        if state.final:
            attributes.append("peripheries=2")
        if state.id == current:
            attributes.append(
                f'style="rounded,filled,bold", fillcolor="{_CURRENT_FILL}", '
                f'color="{_CURRENT_STROKE}", penwidth=3'
            )
        out.append(f"    {_dot_text(state.id)} [{', '.join(attributes)}];")
    default = _default_id(spec)
    if spec.default_transitions:
        out.append(
            f'    {_dot_text(default)} [shape=note, style=dashed, label="Default\\n(any state)"];'
        )
    pop = _pop_id(spec)
    if pop is not None:
        out.append(f'    {_dot_text(pop)} [shape=circle, style=dashed, label="pop"];')
    out.append(f'    "__start__" -> {_dot_text(spec.start)};')
    for source, target, t, from_default in _edges(spec):
        attributes = [f"label={_dot_text(transition_label(t))}"]
        if t.loopback:
            attributes.append('style=dashed, color="gray40", fontcolor="gray30"')
        elif from_default:
            attributes.append("style=dashed")
        out.append(f"    {_dot_text(source)} -> {_dot_text(target)} [{', '.join(attributes)}];")
    out.append("}")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------- public


def _spec_and_current(declaration: Any, current: str | None) -> tuple[MachineSpec, str | None]:
    spec_of = getattr(declaration, "spec", None)
    is_engine = hasattr(declaration, "current_state") and hasattr(declaration, "started")
    if is_engine:
        spec = declaration.spec
        if current is None and declaration.started:
            current = declaration.current_state
    elif isinstance(spec_of, MachineSpec):
        spec = spec_of
    else:
        spec = machine_spec(declaration)
    if current is not None:
        spec.state(current)  # raises FsmError naming the states
    return spec, current


def _run_dot(dot: str, fmt: str) -> bytes:
    executable = shutil.which("dot")
    if executable is None:
        raise GraphvizNotFoundError(
            f"rendering {fmt!r} needs Graphviz's 'dot' executable, which is not on PATH; "
            f"install Graphviz (e.g. 'apt-get install graphviz' or 'brew install graphviz'), "
            f"or render 'mermaid' or 'dot' text, which needs nothing installed"
        )
    try:
        done = subprocess.run(
            [executable, f"-T{fmt}"],
            input=dot.encode("utf-8"),
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FsmError(f"running {executable} -T{fmt} failed: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()
        raise FsmError(
            f"{executable} -T{fmt} exited with status {done.returncode}: {detail}; check the "
            f"Graphviz installation (the DOT text is available with render(..., 'dot'))"
        )
    return done.stdout


def render(
    declaration_or_path: Any, fmt: DiagramFormat = "mermaid", current: str | None = None
) -> str | bytes:
    """Draw a machine.

    Args:
        declaration_or_path: a ``StateMachine`` class, an :class:`~actorbus.fsm.SmMachine`,
            a :class:`~actorbus.fsm.MachineSpec`, the path of a ``.sm`` file, or a
            running engine (its current state is highlighted unless ``current`` says
            otherwise).
        fmt: ``"mermaid"`` or ``"dot"`` (text, always available), ``"svg"`` (text) or
            ``"png"`` (bytes), which need Graphviz's ``dot``.
        current: the id of the state to highlight.

    Returns:
        ``str`` for mermaid, dot and svg; ``bytes`` for png.

    Raises:
        FsmError: unknown format or state id.
        GraphvizNotFoundError: svg/png asked for and ``dot`` is not installed.
    """
    spec, current = _spec_and_current(declaration_or_path, current)
    if fmt == "mermaid":
        return to_mermaid(spec, current)
    if fmt == "dot":
        return to_dot(spec, current)
    if fmt == "svg":
        return _run_dot(to_dot(spec, current), "svg").decode("utf-8")
    if fmt == "png":
        return _run_dot(to_dot(spec, current), "png")
    raise FsmError(f"unknown diagram format {fmt!r}; use one of 'mermaid', 'dot', 'svg', 'png'")


def render_dot(dot: str, fmt: Literal["svg", "png"] = "svg") -> str | bytes:
    """Draw DOT text (``render(..., "dot")``, or the diagram a node's
    inspection carries) with Graphviz's ``dot``: ``str`` for svg, ``bytes``
    for png.

    Raises:
        FsmError: another format, or ``dot`` failed.
        GraphvizNotFoundError: ``dot`` is not installed.
    """
    if fmt == "svg":
        return _run_dot(dot, "svg").decode("utf-8")
    if fmt == "png":
        return _run_dot(dot, "png")
    raise FsmError(f"render_dot() draws 'svg' or 'png', not {fmt!r}; 'dot' text is the input")


def write_diagram(
    declaration_or_path: Any, out_path: str | os.PathLike[str], current: str | None = None
) -> Path:
    """Render to a file, the format chosen by its extension; returns the path written.

    Extensions: ``.mmd``/``.mermaid`` (Mermaid), ``.dot``/``.gv`` (DOT), ``.svg``,
    ``.png``.  Raises :class:`FsmError` for another extension, and as :func:`render`.
    """
    path = Path(out_path)
    fmt = _EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(_EXTENSIONS))
        raise FsmError(f"cannot tell the diagram format of {str(path)!r}; use one of: {known}")
    content = render(declaration_or_path, fmt, current)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path
