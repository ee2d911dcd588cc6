"""Guard and action code from a ``.sm`` file, kept as source so the compiled engine can inline it.

The SMC loader compiles every guard and action list into a real Python function (what
python-statemachine calls) and attaches an :class:`InlineCode` to it.  The compiled
engine pastes ``code`` into its generated handler instead of calling the function,
renaming ``ctxt`` and the transition parameters to its own locals, which saves one
Python call per guard and per action list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class InlineCode:
    """Python source of one guard expression or one action list.

    Attributes:
        kind: ``"expr"`` for a guard (one expression), ``"stmts"`` for actions.
        code: normalised source (``ast.unparse``): one expression, or one statement
            per item.
        params: the transition parameters the code may use (besides ``ctxt``).
        label: the text as written in the ``.sm`` file, for diagrams and messages.
        where: ``path:line`` of the code in the ``.sm`` file.
        namespace: the globals the code runs with (``%import`` modules, builtins).
    """

    kind: Literal["expr", "stmts"]
    code: tuple[str, ...]
    params: tuple[str, ...]
    label: str
    where: str
    namespace: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
