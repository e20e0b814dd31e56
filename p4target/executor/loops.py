"""Code generation for ``for`` loops and ``switch`` on values (P4-16 v1.2.2 / v1.2.4).

Kept apart from ``codegen`` because only programs that use these statements pay for
them: a loop becomes a Python ``while``/``for``, so P4 ``break`` and ``continue`` are the
Python statements of the same name.
"""

from __future__ import annotations

from typing import Any

from ..frontend import ast
from ..frontend.errors import P4Error
from .emitter import Emitter


def contains_return(s: Any) -> bool:
    """Whether a ``return`` sits anywhere inside ``s``, loops and switches included."""
    if isinstance(s, ast.Return):
        return True
    if isinstance(s, ast.Block):
        return any(contains_return(x) for x in s.stmts)
    if isinstance(s, ast.If):
        return contains_return(s.then) or (s.other is not None and contains_return(s.other))
    if isinstance(s, ast.Switch):
        return any(c.body is not None and contains_return(c.body) for c in s.cases)
    if isinstance(s, (ast.For, ast.ForIn)):
        return contains_return(s.body)
    return False


def emit_loop(gen: Emitter, s: ast.For | ast.ForIn, scope: dict) -> None:
    # An inlined body implements `return` as a Python `break` out of a wrapper loop,
    # which a loop of our own would capture.
    if gen.return_stmt != "return" and contains_return(s.body):
        raise P4Error(s.loc, "'return' inside a for loop is not supported by the built-in target here")
    inner = type(scope)(scope)
    if isinstance(s, ast.ForIn):
        _for_in(gen, s, inner)
        return
    for x in s.init:
        gen.stmt(x, inner)
    # `continue` jumps to the top of the while, so the update runs there, from the
    # second iteration on; `break` leaves without running it.
    again = gen.fresh("again") if s.update else None
    if again:
        gen.emit(f"{again} = False")
    gen.emit("while True:")
    gen.indent += 1
    if again:
        gen.emit(f"if {again}:")
        gen.indent += 1
        for x in s.update:
            gen.stmt(x, inner)
        gen.indent -= 1
        gen.emit(f"{again} = True")
    if s.cond is not None:
        gen.emit(f"if not {gen.ex(s.cond, inner)}:")
        gen.emit("    break")
    mark = len(gen.lines)
    gen.stmt(s.body, type(scope)(inner))
    if len(gen.lines) == mark and not again and s.cond is None:
        gen.emit("pass")
    gen.indent -= 1


def _for_in(gen: Emitter, s: ast.ForIn, scope: dict) -> None:
    """The collection is evaluated once, before the first iteration."""
    st = gen.alloc(s.var.type)
    scope[s.var] = st
    v = gen.fresh("v")
    if s.hi is not None:
        gen.emit(f"for {v} in range({gen.ex(s.collection, scope)}, {gen.ex(s.hi, scope)} + 1):")
    else:
        assert isinstance(s.collection, ast.ListExpr)
        items = "".join(f"{gen.ex(i, scope)}, " for i in s.collection.items)
        gen.emit(f"for {v} in ({items}):")
    gen.indent += 1
    gen.emit(f"S[{st.base}] = {v}")
    gen.stmt(s.body, type(scope)(scope))
    gen.indent -= 1


