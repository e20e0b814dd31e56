"""p4c's CreateBuiltins (an early FrontEnd pass, before its type checker): a table with no
``default_action`` gets ``NoAction()``, which must then be core.p4's: a top-level action with no
parameters and an empty body.  p4c checks it only when it adds such a default, so a program
that never needs NoAction may leave core.p4 out."""

from __future__ import annotations

from . import ast
from .errors import P4Error
from .source_text import find_after


def check_global_noaction(program: ast.Program) -> None:
    # an action listed twice is refused before, by p4c's parser (tables.py)
    table = next((t for t in _tables(program) if t.default_action is None and _distinct(t.actions)), None)
    if table is None:
        return
    noaction = next((d for d in program.decls if getattr(d, "name", None) == "NoAction"), None)
    if noaction is None:  # p4c names no line
        raise P4Error(table.loc, "Declaration of the action NoAction not found; did you include core.p4?")
    where = find_after(noaction.loc, r"\bNoAction\b")
    if not isinstance(noaction, ast.ActionDecl):
        raise P4Error(where, "NoAction: expected to be an action; did you include core.p4?")
    if noaction.params:
        raise P4Error(where, "NoAction: Expected an action with no parameters; did you include core.p4?")
    if noaction.body.stmts:
        raise P4Error(where, "NoAction: Expected an action with no body; did you include core.p4?")


def _tables(program: ast.Program) -> list[ast.TableDecl]:
    """The tables of every control, in source order."""
    return [t for d in program.decls if isinstance(d, ast.ControlDecl)
            for t in d.locals if isinstance(t, ast.TableDecl)]


def _distinct(refs: list[ast.ActionRef]) -> bool:
    names = [r.name for r in refs]
    return len(set(names)) == len(names)
