"""Load state machines written in SMC's ``.sm`` language (the State Machine Compiler).

Theory of operation
-------------------
Three stages, each reporting errors as :class:`~actorbus.errors.SmSyntaxError` with
``path:line:column``, what was found and what was expected:

1. **Lexer** (:mod:`._smc_lexer`): turns text into tokens — words, ``%`` directives,
   ``%%``, ``::`` and punctuation — skipping whitespace, ``//`` line comments and
   (nested) ``/* */`` comments.  The parser asks it for *raw code* where SMC has target
   language code: a guard ``[...]``, action arguments ``(...)``, a parameter type, an
   assignment value, the rest of a ``%import`` line, a ``%{ ... %}`` block.  Raw code is
   scanned with Python's bracket and string rules and no comment rules (``//`` is floor
   division in Python).

2. **Parser** (:mod:`._smc_parser`, recursive descent) follows SMC's grammar and
   returns the syntax tree of :mod:`._smc_ast`::

       fsm        := (raw_source | directive)* map+
       directive  := %start Map::State | %class W | %fsmclass W | %fsmfile W | %package W
                   | %import LINE | %declare LINE | %access LINE | %header LINE | %include LINE
       map        := %map W %% state* %%
       state      := W (Entry {action*})? (Exit {action*})? { transition* }
       transition := W ( '(' param (, param)* ')' )? ( '[' guard ']' )? next { action* }
       param      := W (':' type)?          types are read and ignored
       next       := nil | W | Map::State | jump(Map::State)
                   | push(Map::State) | (W | Map::State)/push(Map::State)
                   | pop | pop '(' (W (, args)?)? ')'
       action     := W '(' args ')' ';' | W '=' value ';'

3. **Builder** (:mod:`._smc_builder`): checks names (start state, targets, parameters,
   clashes), compiles each guard and each action list to a Python function *once* (from
   the AST, so tracebacks point at the ``.sm`` line), and generates a
   python-statemachine ``StateMachine`` subclass.  The compiled engine inlines the same
   code (see :mod:`actorbus.fsm._inline`).

Semantics of the Python flavour (documented in ``docs/fsm.md``):

* A guard is a Python expression; ``ctxt`` (the model) and the transition's parameters
  are in scope, plus the modules named by ``%import`` lines that Python can import.
* An action ``name(args);`` calls ``ctxt.name(args)``, as SMC does; ``ctxt.name(args);``
  is accepted as well.  ``name = value;`` sets ``ctxt.name``.
* ``nil`` is a loopback: the actions run, the state's exit and entry actions do not.
  Naming the current state instead runs exit and entry actions (SMC rule).
* The ``Default`` state's transitions apply to every state of its map, after that
  state's own transitions for the same event (so also when all of its guards fail); a
  transition named ``Default`` answers any event the state does not otherwise handle.
  Lookup order: own transitions, Default state's transitions, own ``Default``
  transition, Default state's ``Default`` transition (SMC's generated code does this).
* A state whose body declares no transitions is *final* (as SMC's "OK {}" examples):
  Default transitions do not apply to it and every event there is rejected.  Give it a
  transition (a ``nil`` loopback will do) to keep it reacting.
* ``push``/``pop`` transitions run on a state stack both engines keep
  (:mod:`actorbus.fsm._stack`), with SMC's rules: a push skips the Exit actions of the
  state it leaves, a pop the Entry actions of the state it returns to, then issues its
  transition.  ``jump(Map::State)`` is a plain transition into another map.  A state
  name declared in several maps has the id ``Map::State``.
* ``%{ ... %}`` blocks are Python: they run once, when the file is loaded, in the
  namespace guards and actions run in (the builtins, the ``%import``ed modules), so
  guards and action arguments can call the helpers they define.
* Events may be named like a state or a python-statemachine attribute (``send``), and
  parameters like the arguments python-statemachine injects (``state``, ``event``):
  the builder gives python-statemachine other ids and argument names for them
  (``EVENT_IDS_ATTR``, ``ARG_ALIASES_ATTR`` in :mod:`actorbus.fsm.spec`); only
  ``ctxt`` and ``_ab_`` names are refused.
* A ``Default`` transition answers only the events the file declares (SMC generates
  one method per declared event); any other event is rejected.
* ``commit_on_error=True`` applies SMC's rule to exceptions of a transition's actions
  and the target's entry actions: the machine ends in the target state (a push in the
  pushed state, with the stack pushed; a pop in the state popped, without issuing its
  transition).
* ``%declare``, ``%access``, ``%header``, ``%include``, ``%package`` and non-Python
  ``%import`` lines are kept on :class:`SmMachine` and otherwise ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm._smc_builder import SmMachine, _Builder
from actorbus.fsm._smc_parser import _Parser

__all__ = ["SmMachine", "load_sm", "parse_sm"]


def parse_sm(text: str, path: str = "<string>", *, commit_on_error: bool = False) -> SmMachine:
    """Parse ``.sm`` source text and build its machine.

    Args:
        text: the file's content.
        path: the name used in error messages and tracebacks.
        commit_on_error: SMC's rule for exceptions: when a transition's actions or the
            target's entry actions raise, the machine is in the target state anyway
            (and the entry actions run even after the transition's actions raised),
            then the exception propagates.  By default the machine rolls back to the
            source state, as python-statemachine does (docs/fsm.md compares the two).

    Raises:
        SmSyntaxError: the text is malformed; ``str(err)`` is ``path:line:column: found
            ...; expected ...``.  For a missing '}' the position is that of the '{'
            left open.
        FsmError: python-statemachine rejected the resulting machine.
    """
    parser = _Parser(text, path)
    try:
        parsed = parser.parse()
    except SmSyntaxError as exc:
        unclosed = parser.unclosed_brace(exc)
        if unclosed is None:
            raise
        raise unclosed from None
    return _Builder(parsed, path, commit_on_error=commit_on_error).build()


_LOADED: dict[tuple[str, bool], tuple[tuple[int, int], SmMachine]] = {}


def load_sm(path: str | os.PathLike[str], *, commit_on_error: bool = False) -> SmMachine:
    """Read and build a ``.sm`` file; cached until the file changes (mtime or size).

    ``commit_on_error`` is :func:`parse_sm`'s.

    Raises:
        FsmError: the file cannot be read.
        SmSyntaxError: the file is malformed.
    """
    name = os.fspath(path)
    try:
        stat = os.stat(name)
    except OSError as exc:
        searched = "" if os.path.isabs(name) else f" (searched {os.path.abspath(name)})"
        raise FsmError(
            f"cannot read the state machine file {name!r}{searched}: {exc.strerror}; a "
            "relative path is relative to the working directory (give an absolute path, or "
            "name it in a properties file, whose directory relative paths follow)"
        ) from exc
    key = (os.path.realpath(name), commit_on_error)
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _LOADED.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FsmError(f"cannot read the state machine file {name!r}: {exc}") from exc
    machine = parse_sm(text, name, commit_on_error=commit_on_error)
    _LOADED[key] = (stamp, machine)
    return machine
