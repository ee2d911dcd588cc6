"""The Python of a ``.sm`` file: its namespace and its compiled guards and actions.

Part of the builder stage of :mod:`actorbus.fsm.smc`.  Each loaded file has one
namespace, like a Python module's: the builtins, the modules its ``%import`` lines
name, whatever its ``%{ ... %}`` blocks define, and the helpers of
``commit_on_error=True``.  :class:`_SmCode` owns it and compiles each guard (an
expression) and each action list (statements) into a function there, *once*, from an
AST whose line numbers are the file's, so tracebacks point into the ``.sm`` file.
Transition parameters named like an argument python-statemachine injects (``state``,
``event`` ...) are taken under an alias (:func:`_alias`).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import itertools
import keyword
from typing import Any, Literal

from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm._inline import InlineCode
from actorbus.fsm._smc_ast import _Action, _Code
from actorbus.fsm._smc_lexer import _Token
from actorbus.fsm.spec import INLINE_ATTR

#: Names python-statemachine injects into callbacks by parameter name.  A ``.sm``
#: transition parameter may use them (SMC allows any name): the generated function
#: takes it as ``_ARG_ALIAS_PREFIX + name``, which the reference engine passes too.
_INJECTED_BY_PSM = frozenset(
    {"model", "machine", "event", "source", "target", "state", "transition", "event_data"}
)
_ARG_ALIAS_PREFIX = "_ab_p_"


def _shift(tree: ast.AST, line: int) -> None:
    """Move ``tree``, parsed from a snippet, to where the snippet starts in the file."""
    node: Any
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno += line - 1
            end = getattr(node, "end_lineno", None)
            if end is not None:
                node.end_lineno = end + line - 1


def _fix_locations(module: ast.Module) -> None:
    """Give built nodes valid positions: ends never before starts (tracebacks use lines)."""
    ast.fix_missing_locations(module)
    nodes: list[Any] = [n for n in ast.walk(module) if hasattr(n, "lineno")]
    for node in nodes:
        end = getattr(node, "end_lineno", None)
        if end is None or end < node.lineno:
            node.end_lineno = node.lineno
        if (
            node.end_lineno == node.lineno
            and (getattr(node, "end_col_offset", None) or 0) < node.col_offset
        ):
            node.end_col_offset = node.col_offset
    for node in nodes:
        child: Any
        for child in ast.walk(node):
            child_end = getattr(child, "end_lineno", None)
            if child_end is not None and child_end > (node.end_lineno or 0):
                node.end_lineno = child_end
                node.end_col_offset = getattr(child, "end_col_offset", 0)


def _ctxt() -> ast.expr:
    return ast.Name("ctxt", ast.Load())


def _call(helper: str, line: int) -> ast.stmt:
    """``helper(ctxt)``: a call of one of ``_commit_helpers()``."""
    return ast.Expr(
        ast.Call(ast.Name(helper, ast.Load()), [_ctxt()], []), lineno=line, col_offset=0
    )


def _commit_helpers() -> dict[str, Any]:
    """What the code of a machine loaded with ``commit_on_error=True`` calls.

    SMC's generated transition runs the actions in a ``try`` whose ``finally`` sets the
    target state and runs its entry actions, so an exception of either leaves the
    machine in the target.  Both engines run python-statemachine's order instead
    (actions, state switch, entry actions, ``after``), where an exception before the
    switch rolls back.  So an external transition of such a machine begins with
    ``_ab_begin(ctxt)``, its actions and the entry actions of every state keep an
    exception (``_ab_defer``) instead of raising it, and the transition's ``after``
    callback, run once the target is entered, raises the last one kept, chained to the
    earlier one (``_ab_end``).  Entry actions outside a transition (the start) raise at
    once.  Keyed by the model, as one engine runs one model on one thread at a time.
    """
    pending: dict[int, list[BaseException]] = {}

    def begin(ctxt: object) -> None:
        pending[id(ctxt)] = []

    def defer(ctxt: object, error: BaseException) -> None:
        errors = pending.get(id(ctxt))
        if errors is None:
            raise error
        errors.append(error)

    def end(ctxt: object) -> None:
        errors = pending.pop(id(ctxt), None)
        if errors:
            for earlier, later in itertools.pairwise(errors):
                later.__context__ = earlier
            raise errors[-1]

    return {"_ab_begin": begin, "_ab_defer": defer, "_ab_end": end}


def _alias(param: str) -> str:
    """The name a generated function takes ``param`` under (see ``_INJECTED_BY_PSM``)."""
    return _ARG_ALIAS_PREFIX + param if param in _INJECTED_BY_PSM else param


class _SmCode:
    """The namespace of one ``.sm`` file and the functions compiled into it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.namespace: dict[str, Any] = {
            "__builtins__": builtins,
            "__name__": "actorbus.fsm.generated",
        }
        self.functions = 0

    def error(self, token: _Token | _Code, message: str) -> SmSyntaxError:
        return SmSyntaxError(message, path=self.path, line=token.line, column=token.column)

    def parse(self, code: _Code, prefix: str, what: str) -> ast.expr:
        """Parse ``prefix + code.text + ')'`` as an expression, mapping errors to the file."""
        source = f"{prefix}{code.text}\n)"
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            lineno = exc.lineno or 1
            offset = exc.offset or 1
            lines = code.text.split("\n")
            if lineno > len(lines):
                line = code.line + len(lines) - 1
                column = (code.column if len(lines) == 1 else 1) + len(lines[-1])
            elif lineno == 1:
                line, column = code.line, code.column + max(offset - 1 - len(prefix), 0)
            else:
                line, column = code.line + lineno - 1, offset
            raise SmSyntaxError(
                f"found invalid Python in {what}: {exc.msg}; expected {what} to be valid Python",
                path=self.path,
                line=line,
                column=column,
            ) from None
        _shift(tree, code.line)
        return tree.body

    def target_of(self, name: _Token) -> ast.expr:
        parts = name.text.split(".")
        if parts[0] == "ctxt":
            parts = parts[1:]
        for part in parts:
            if not part.isidentifier() or keyword.iskeyword(part):
                raise self.error(
                    name, f"found the action name {name.text!r}; expected a Python name"
                )
        where = {
            "lineno": name.line,
            "end_lineno": name.line,
            "col_offset": name.column - 1,
            "end_col_offset": name.column - 1 + len(name.text),
        }
        node: ast.expr = ast.Name("ctxt", ast.Load(), **where)
        for part in parts:
            node = ast.Attribute(node, part, ast.Load(), **where)
        return node

    def statements(self, actions: list[_Action]) -> list[ast.stmt]:
        statements: list[ast.stmt] = []
        for action in actions:
            target = self.target_of(action.name)
            if action.args is not None:
                call = self.parse(action.args, "_(", f"the arguments of {action.name.text}(...)")
                assert isinstance(call, ast.Call)
                call.func = target
                statements.append(ast.Expr(call, lineno=action.name.line, col_offset=0))
            else:
                assert action.value is not None
                value = self.parse(action.value, "(", f"the value assigned to {action.name.text}")
                assert isinstance(target, ast.Attribute)
                target.ctx = ast.Store()
                statements.append(
                    ast.Assign([target], value, lineno=action.name.line, col_offset=0)
                )
        return statements

    def function(
        self,
        name: str,
        params: list[str],
        body: ast.expr | list[ast.stmt],
        label: str,
        line: int,
        *,
        leading: tuple[str, ...] = ("model",),
    ) -> Any:
        """Compile one guard (an expression) or action list (statements) into a function.

        ``leading`` are the arguments before the transition's parameters; the compiled
        engine inlines the code only of functions whose sole leading argument is
        ``model``.
        """
        self.functions += 1
        fname = f"{name}_{self.functions}"
        # ctxt first: a parameter may be called model, and takes that name next
        prologue: list[ast.stmt] = [
            ast.Assign([ast.Name(p, ast.Store())], ast.Name(arg, ast.Load()), lineno=line)
            for p, arg in [("ctxt", "model"), *((p, _alias(p)) for p in params if _alias(p) != p)]
        ]
        if isinstance(body, list):
            kind: Literal["expr", "stmts"] = "stmts"
            statements: list[ast.stmt] = [*prologue, *body]
            code = tuple(ast.unparse(s) for s in body)
        else:
            kind = "expr"
            statements = [*prologue, ast.Return(body, lineno=line, col_offset=0)]
            code = (ast.unparse(body),)
        arguments = ast.arguments(
            posonlyargs=[],
            args=[*(ast.arg(a) for a in leading), *(ast.arg(_alias(p)) for p in params)],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        function = ast.FunctionDef(fname, arguments, statements, [], lineno=line, col_offset=0)
        module = ast.Module([function], [])
        _fix_locations(module)
        scope: dict[str, Any] = {}
        exec(compile(module, self.path, "exec"), self.namespace, scope)
        func = scope[fname]
        if leading == ("model",):
            setattr(
                func,
                INLINE_ATTR,
                InlineCode(kind, code, tuple(params), label, f"{self.path}:{line}", self.namespace),
            )
        return func

    def deferring(self, statements: list[ast.stmt], line: int) -> list[ast.stmt]:
        """``statements`` under SMC's commit rule: an exception is kept until the
        transition has entered its target (``_ab_end``), as SMC's ``finally`` does."""
        if not statements:
            return []
        error = ast.Name("_ab_error", ast.Load())
        handler = ast.ExceptHandler(
            ast.Name("BaseException", ast.Load()),
            "_ab_error",
            [ast.Expr(ast.Call(ast.Name("_ab_defer", ast.Load()), [_ctxt(), error], []))],
            lineno=line,
            col_offset=0,
        )
        return [ast.Try(statements, [handler], [], [], lineno=line, col_offset=0)]

    def run_raw_source(self, blocks: list[_Code]) -> None:
        """Run the ``%{ ... %}`` blocks, in file order, in the namespace guards and
        actions run in, so the helpers they define are in scope there (SMC pastes the
        blocks into the module it generates)."""
        for block in blocks:
            try:
                tree = ast.parse(block.text, self.path, "exec")
            except SyntaxError as exc:
                lineno = exc.lineno or 1
                offset = exc.offset or 1
                line = block.line + lineno - 1
                column = block.column + offset - 1 if lineno == 1 else offset
                raise SmSyntaxError(
                    f"found invalid Python in a '%{{ ... %}}' block: {exc.msg}; expected "
                    f"Python (the blocks of a .sm file run as Python when it is loaded)",
                    path=self.path,
                    line=line,
                    column=column,
                ) from None
            _shift(tree, block.line)
            try:
                exec(compile(tree, self.path, "exec"), self.namespace)
            except Exception as exc:
                raise FsmError(
                    f"{self.path}:{block.line}: the '%{{ ... %}}' block raised "
                    f"{type(exc).__name__}: {exc}; fix the block (it runs when the file is "
                    f"loaded, after the %import lines)"
                ) from exc

    def imports(self, lines: list[str]) -> None:
        """Import the Python modules ``%import`` lines name into the namespace; other
        lines (a Java import in a file shared with SMC's Java target) are skipped."""
        for line in lines:
            module = line.rstrip(";").strip()
            if module.startswith("import "):
                module = module[len("import ") :].strip()
            if not all(p.isidentifier() for p in module.split(".")):
                continue  # not a Python module path: kept as metadata only
            try:
                importlib.import_module(module)
            except ImportError:
                continue  # e.g. a Java import in a file shared with SMC's Java target
            top = module.split(".")[0]
            self.namespace[top] = importlib.import_module(top)
