"""Control-plane names, computed once here for both P4Info and the executor's tables.

p4c names an object by its fully qualified path: the top-level control's *type* name,
then instance names of nested controls, then the object's local name.  ``@name("x")``
replaces the local name; ``@name(".x")`` makes the name absolute.
"""

from __future__ import annotations

from .frontend import ast


def qualified_name(prefix: str, decl: ast.Decl) -> str:
    ann = ast.find_annotation(decl.annotations, "name")
    local = ann.args[0].value if ann and ann.args and isinstance(ann.args[0], ast.StringLit) else decl.name
    if local.startswith("."):
        return local[1:]
    return f"{prefix}.{local}" if prefix else local


def key_field_name(key: ast.KeyElement) -> str:
    """The match field name p4c derives from a key expression (or its @name)."""
    ann = ast.find_annotation(key.annotations, "name")
    if ann and ann.args and isinstance(ann.args[0], ast.StringLit):
        return ann.args[0].value
    return _expr_name(key.expr)


def _expr_name(e: ast.Expr) -> str:
    if isinstance(e, ast.PathExpr):
        return e.name
    if isinstance(e, ast.Member):
        return f"{_expr_name(e.base)}.{e.member}"
    if isinstance(e, ast.Index):
        return f"{_expr_name(e.base)}[{e.index.value}]"
    if isinstance(e, ast.Slice):
        return f"{_expr_name(e.base)}[{e.hi.value}:{e.lo.value}]"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Member) and e.func.member == "isValid":
        return f"{_expr_name(e.func.base)}.$valid$"
    return f"key@{e.loc.line}:{e.loc.col}"  # p4c requires @name here; the checker could enforce it
