"""The order p4c evaluates an assignment in, as a rewrite of the checked assignment.

p4c's frontend orders side effects in its SideEffectOrdering pass (sideEffects.cpp), then
inlines function calls before the statement that makes them (functionsInlining.cpp), so for
``lhs = rhs``:

* a run-time header stack index in ``lhs`` that calls something is evaluated first, before
  ``rhs``, into a temporary: in ``h[f(x)].a = g(x)`` f runs before g, and the element written
  is the one f chose (corpus gauntlet_index_7-bmv2.p4);
* any other ``lhs`` stays in the assignment, after the calls of ``rhs``: in ``s[i].f = g(i)``,
  with g changing i, the element written is the one at the new i;
* ``lhs op= rhs`` (an OpAssignmentStatement since p4c 1.2.5.5) is ordered the same way, its
  index evaluated once, and only then becomes ``lhs = lhs op rhs`` (RemoveOpAssign): the read
  of ``lhs`` also comes after the calls of ``rhs`` (corpus opassign2-bmv2.p4).

The executor runs what it is given in order, so an assignment that needs it becomes a block:
temporaries holding the hoisted values, then the assignment reading them.  A temporary is
declared without a value and assigned, as p4c does, so a run-time index the hoisted
expression reads is guarded like any other statement's.
"""

from __future__ import annotations

from typing import Any

from . import ast
from .types import BOOL, BitsT, Type

# Calls that may write a variable of the caller (a table's actions may write anything).
_WRITERS = ("user_function", "table_apply")


def order_assignment(s: ast.Assign) -> ast.Stmt:
    """``s`` itself, or a block that evaluates its parts in p4c's order (see the module docstring)."""
    before: list[ast.Stmt] = []
    op = s.rhs if s.compound and isinstance(s.rhs, ast.Binary) else None  # `lhs = lhs' op operand`
    path = _lvalue_path(s.lhs)
    reread = _lvalue_path(op.left) if op is not None else []
    hoisted: set[int] = set()
    for k, node in enumerate(path):
        if isinstance(node, ast.Index) and node.index.value is None and _has_call(node.index, _effect):
            tmp = _temporary(node.index, before)
            node.index = _read(tmp)
            if len(reread) == len(path):  # the read of lhs' is of the same element
                reread[k].index = _read(tmp)
            hoisted.add(id(node))
    operand = op.right if op is not None else s.rhs
    runtime = any(isinstance(n, ast.Index) and n.index.value is None and id(n) not in hoisted for n in path)
    if (op is not None or runtime) and _has_call(operand, _writer):
        tmp = _temporary(operand, before)
        if op is not None:
            op.right = _read(tmp)
        else:
            s.rhs = _read(tmp)
    if not before:
        return s
    return ast.Block(s.loc, [*before, s])


def _lvalue_path(e: ast.Expr) -> list[ast.Expr]:
    """The members, indexes and slices of an lvalue, outermost first (``s[i].f[3:0]``)."""
    path = []
    while isinstance(e, (ast.Member, ast.Index, ast.Slice)):
        path.append(e)
        e = e.base
    return path


def _effect(call: ast.Call) -> bool:
    """p4c's SideEffects: every call but ``isValid()``."""
    t = call.target
    return not (t is not None and t.kind == "header_method" and t.name == "isValid")


def _writer(call: ast.Call) -> bool:
    return call.target is not None and call.target.kind in _WRITERS


def _has_call(node: Any, which) -> bool:
    if isinstance(node, ast.Call) and which(node):
        return True
    return any(_has_call(c, which) for c in ast.children(node))


def _temporary(value: ast.Expr, before: list[ast.Stmt]) -> ast.VarDecl:
    """``T tmp; tmp = value;`` appended to ``before``: p4c's temporaries are named tmp too."""
    decl = ast.VarDecl(value.loc, [], "tmp", _type_ref(value.type, value.loc), None)
    decl.type = value.type
    before += [decl, ast.Assign(value.loc, _read(decl), value)]
    return decl


def _read(decl: ast.VarDecl) -> ast.PathExpr:
    e = ast.PathExpr(decl.loc, decl.name)
    e.decl, e.type = decl, decl.type
    return e


def _type_ref(t: Type, loc: Any) -> ast.TypeRef:
    """The temporary's type as it would be written (no pass resolves it again)."""
    if isinstance(t, BitsT):
        width = ast.IntLit(loc, t.width, None, False)
        return ast.TypeRef(loc, "int" if t.signed else "bit", width=width)
    if t is BOOL:
        return ast.TypeRef(loc, "bool")
    return ast.TypeRef(loc, "named", name=str(t))
