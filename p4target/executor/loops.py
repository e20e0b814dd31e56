"""Code generation for ``for`` loops and ``switch`` on values (P4-16 v1.2.2 / v1.2.4).

Kept apart from ``codegen`` because only programs that use these statements pay for
them: a loop becomes a Python ``while``/``for``, so P4 ``break`` and ``continue`` are the
Python statements of the same name.  A three-part loop that runs ``LOOP_LIMIT`` times in one
packet drops that packet (``loop_drops``): P4 does not require loops to end, and BMv2 would
hang on one that does not; a switch must not.
"""

from __future__ import annotations

from typing import Any

from ..frontend import ast
from ..frontend.errors import P4Error
from . import ir
from .emitter import Emitter

LOOP_LIMIT = 1 << 20  # iterations of one loop, per packet


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
    if not isinstance(gen.return_stmt, ir.Return) and contains_return(s.body):
        raise P4Error(s.loc, "'return' inside a for loop is not supported by the built-in target here")
    inner = type(scope)(scope)
    if isinstance(s, ast.ForIn):
        _for_in(gen, s, inner)
        return
    for x in s.init:
        gen.stmt(x, inner)
    # `continue` jumps to the top of the while, so the update runs there, from the
    # second iteration on; `break` leaves without running it.
    again = ir.Var(gen.fresh("again")) if s.update else None
    if again is not None:
        gen.emit(ir.Assign(again, ir.Const(False)))
    turns = ir.Var(gen.fresh("turns"))
    gen.emit(ir.Assign(turns, ir.Const(0)))
    with gen.loop():
        gen.emit(ir.AugAssign(turns, "+", ir.Const(1)))
        with gen.if_(ir.cmp(">", turns, LOOP_LIMIT)):
            gen.emit(ir.Raise(ir.Exc.LOOP_LIMIT))
        if again is not None:
            with gen.if_(again):
                for x in s.update:
                    gen.stmt(x, inner)
            gen.emit(ir.Assign(again, ir.Const(True)))
        if s.cond is not None:
            with gen.if_(ir.Not(ir.lift(gen.ex(s.cond, inner)))):
                gen.emit(ir.Break())
        gen.stmt(s.body, type(scope)(inner))


def _for_in(gen: Emitter, s: ast.ForIn, scope: dict) -> None:
    """``for (T x in lo .. hi)`` (the checker lets no other collection through: p4c's frontend
    refuses lists and p4c-bm2-ss every for-in, so this runs for TNA programs); the bounds are
    evaluated once, before the first iteration."""
    st = gen.alloc(s.var.type)
    scope[s.var] = st
    v = ir.Var(gen.fresh("v"))
    if s.hi is None:
        raise P4Error(s.loc, "for-in over anything but a range is not supported by the built-in target")
    lo = ir.lift(gen.ex(s.collection, scope))
    hi = ir.bin_("+", ir.lift(gen.ex(s.hi, scope)), 1)
    with gen.for_range(v, lo, hi):
        gen.emit(ir.Assign(ir.slot(st.base), v))
        gen.stmt(s.body, type(scope)(scope))
