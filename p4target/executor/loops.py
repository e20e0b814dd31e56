"""Code generation for ``for`` loops and ``switch`` on values (P4-16 v1.2.2 / v1.2.4).

Kept apart from ``codegen`` because only programs that use these statements pay for
them: a loop becomes a Python ``while``/``for``, so P4 ``break`` and ``continue`` are the
Python statements of the same name.  A three-part loop that runs ``LOOP_LIMIT`` times in one
packet drops that packet (``loop_drops``): P4 does not require loops to end, and BMv2 would
hang on one that does not; a switch must not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frontend import ast
from ..frontend.errors import P4Error
from . import ir

if TYPE_CHECKING:
    from .env import GenEnv

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


def emit_loop(env: GenEnv, s: ast.For | ast.ForIn, scope: dict) -> None:
    # An inlined body implements `return` as a Python `break` out of a wrapper loop,
    # which a loop of our own would capture.
    if not isinstance(env.return_stmt, ir.Return) and contains_return(s.body):
        raise P4Error(s.loc, "'return' inside a for loop is not supported by the built-in target here")
    inner = type(scope)(scope)
    if isinstance(s, ast.ForIn):
        _for_in(env, s, inner)
        return
    for x in s.init:
        env.gen.stmt(x, inner)
    # `continue` jumps to the top of the while, so the update runs there, from the
    # second iteration on; `break` leaves without running it.
    again = ir.Var(env.gen.fresh("again")) if s.update else None
    if again is not None:
        env.build.emit(ir.Assign(again, ir.Const(False)))
    turns = ir.Var(env.gen.fresh("turns"))
    env.build.emit(ir.Assign(turns, ir.Const(0)))
    with env.build.loop():
        env.build.emit(ir.AugAssign(turns, "+", ir.Const(1)))
        with env.build.if_(ir.cmp(">", turns, LOOP_LIMIT)):
            env.build.emit(ir.Raise(ir.Exc.LOOP_LIMIT))
        if again is not None:
            with env.build.if_(again):
                for x in s.update:
                    env.gen.stmt(x, inner)
            env.build.emit(ir.Assign(again, ir.Const(True)))
        if s.cond is not None:
            with env.build.if_(ir.Not(ir.lift(env.exprs.ex(s.cond, inner)))):
                env.build.emit(ir.Break())
        env.gen.stmt(s.body, type(scope)(inner))


def _for_in(env: GenEnv, s: ast.ForIn, scope: dict) -> None:
    """``for (T x in lo .. hi)`` (the checker lets no other collection through: p4c's frontend
    refuses lists and p4c-bm2-ss every for-in, so this runs for TNA programs); the bounds are
    evaluated once, before the first iteration."""
    st = env.gen.alloc(s.var.type)
    scope[s.var] = st
    v = ir.Var(env.gen.fresh("v"))
    if s.hi is None:
        raise P4Error(s.loc, "for-in over anything but a range is not supported by the built-in target")
    lo = ir.lift(env.exprs.ex(s.collection, scope))
    hi = ir.bin_("+", ir.lift(env.exprs.ex(s.hi, scope)), 1)
    with env.build.for_range(v, lo, hi):
        env.build.emit(ir.Assign(ir.slot(st.base), v))
        env.gen.stmt(s.body, type(scope)(scope))
