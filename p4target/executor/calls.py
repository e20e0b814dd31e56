"""Code generation for calls with P4-16 copy-in/copy-out semantics (spec 6.8).

Actions, functions and sub-controls are inlined at their call sites.  Arguments are
evaluated and copied in left to right; ``out``/``inout`` parameters are copied back
after the body on every exit (end, ``return``, ``exit``).  Copying costs per packet, so
a parameter is bound to the argument's own slots instead whenever that cannot be told
apart: the argument is a variable or field that the callee does not write through any
other name, no other argument overlaps it, and no argument has side effects.
A pass of code generation (``env.GenEnv``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frontend import ast
from ..frontend.errors import P4Error
from ..frontend.types import BOOL, VOID, BitsT, HeaderT, StackT
from . import ir
from .storage import Storage, member_storage, slot_count

if TYPE_CHECKING:
    from .env import GenEnv

_IN = ("in", "")
# A written expression we cannot place: it conflicts with every argument.
_EVERYWHERE = (0, 1 << 62)


_CONTAINS: dict[tuple[int, type], tuple[Any, bool]] = {}  # (id(node), kind): (node, answer): checked ASTs do not change


def contains(node: Any, kind: type) -> bool:
    """Whether ``kind`` occurs in this tree (not looking into called bodies)."""
    if isinstance(node, kind):
        return True
    known = _CONTAINS.get((id(node), kind))
    if known is not None and known[0] is node:
        return known[1]
    answer = any(contains(c, kind) for c in ast.children(node))
    _CONTAINS[id(node), kind] = (node, answer)
    return answer


_USER_CALLS: dict[int, tuple[Any, bool]] = {}  # id(node): (node, answer)


def has_user_call(node: Any) -> bool:
    if isinstance(node, ast.Call) and node.target is not None and node.target.kind == "user_function":
        return True
    known = _USER_CALLS.get(id(node))
    if known is not None and known[0] is node:
        return known[1]
    answer = any(has_user_call(c) for c in ast.children(node))
    _USER_CALLS[id(node)] = (node, answer)
    return answer


def has_side_effects(node: Any) -> bool:
    """A call other than ``isValid()`` anywhere in an expression."""
    if isinstance(node, ast.Call):
        tgt = node.target
        if not (tgt is not None and tgt.kind == "header_method" and tgt.name == "isValid"):
            return True
    return any(has_side_effects(c) for c in ast.children(node))


def call_params(tgt: Any, call: ast.Call) -> list[ast.Param] | None:
    """The parameters a resolved call binds, or None when unknown."""
    kind, decl = tgt.kind, tgt.decl
    if kind == "action":
        return decl.params
    if kind == "user_function":
        return decl.proto.params
    if kind == "function":
        return decl.proto.params
    if kind == "method" and isinstance(decl, ast.ExternDecl):
        return next((p.params for p in decl.methods if p.name == tgt.name and len(p.params) == len(call.args)), None)
    if kind in ("block_apply", "parser_apply"):
        inst_t = getattr(decl, "type", None)
        inner = getattr(inst_t, "decl", None)
        return getattr(inner, "params", None)
    if kind in ("header_method", "table_apply", "stack_method"):
        return []  # no parameters written (a stack method's instance is handled apart)
    return None


_MAY_EXIT: dict[int, tuple[Any, bool]] = {}  # id(node): (node, answer), for whole walks from a node


def may_exit(node: Any, seen: set[int] | None = None) -> bool:
    """Whether running this code can execute ``exit``: follows called actions, functions,
    tables' actions and applied sub-controls."""
    if seen is None:
        known = _MAY_EXIT.get(id(node))
        if known is None or known[0] is not node:
            known = _MAY_EXIT[id(node)] = (node, may_exit(node, set()))
        return known[1]
    if id(node) in seen:
        return False
    seen.add(id(node))
    if isinstance(node, ast.Exit):
        return True
    follow: list[Any] = []
    if isinstance(node, ast.Call) and node.target is not None:
        tgt = node.target
        if tgt.kind in ("action", "user_function"):
            follow.append(tgt.decl)
        elif tgt.kind == "table_apply":
            follow += [ref.decl for ref in tgt.decl.actions]
            if tgt.decl.default_action is not None:
                follow.append(tgt.decl.default_action.decl)
        elif tgt.kind in ("block_apply", "parser_apply"):
            follow.append(getattr(getattr(tgt.decl, "type", None), "decl", None))
        elif tgt.kind not in ("function", "method", "header_method", "stack_method"):
            return True  # unknown: assume the worst
    if isinstance(node, ast.ControlDecl):
        follow += node.locals
    return any(may_exit(x, seen) for x in [*follow, *ast.children(node)] if x is not None)


def _contains_return(node: Any) -> bool:
    return contains(node, ast.Return)


def _tail_returns_only(s: Any, tail: bool = True) -> bool:
    """Whether every ``return`` in ``s`` is its last action (needs no jump out)."""
    if isinstance(s, ast.Return):
        return tail
    if isinstance(s, ast.Block):
        return all(_tail_returns_only(x, tail and i == len(s.stmts) - 1) for i, x in enumerate(s.stmts))
    if isinstance(s, ast.If):
        return _tail_returns_only(s.then, tail) and (s.other is None or _tail_returns_only(s.other, tail))
    return not _contains_return(s)


class CallGen:
    """Calls: argument binding, inlined bodies, copy-back: a pass over ``env``."""

    def __init__(self, env: GenEnv) -> None:
        self.env = env

    # ---------------------------------------------------------------- analysis
    def written_ranges(self, body: Any, scope: Any) -> list[tuple[int, int]]:
        """Slot ranges the code may write through names visible in ``scope`` (the caller):
        the callee's own parameters and locals are not bound there, so they drop out."""
        out: list[tuple[int, int]] = []
        self._collect_writes(body, scope, out, set())
        return out

    def _collect_writes(self, node: Any, scope: Any, out: list, seen: set[int]) -> None:
        lhs = getattr(node, "lhs", None)
        if isinstance(lhs, ast.Expr):
            self._add_write(lhs, scope, out)
        if isinstance(node, ast.Call) and node.target is not None:
            tgt = node.target
            params = call_params(tgt, node)
            if params is None:
                for a in node.args:
                    self._add_write(a, scope, out)
            else:
                for p, a in zip(params, node.args):
                    if p.direction in ("out", "inout") and not isinstance(a, ast.Default):
                        self._add_write(a, scope, out)
            inst = getattr(tgt, "instance", None)
            if inst is not None and not (tgt.kind == "header_method" and tgt.name == "isValid") \
                    and tgt.kind != "method":
                self._add_write(inst, scope, out)
            if tgt.kind in ("action", "user_function") and id(tgt.decl) not in seen:
                seen.add(id(tgt.decl))
                body = tgt.decl.body
                self._collect_writes(body, scope, out, seen)
            elif tgt.kind not in ("function", "method", "header_method", "stack_method", "block_apply",
                                  "parser_apply", "action", "user_function"):
                out.append(_EVERYWHERE)
        for c in ast.children(node):
            self._collect_writes(c, scope, out, seen)

    def touched_ranges(self, body: Any, scope: Any) -> list[tuple[int, int]]:
        """Slot ranges the code may read or write through names visible in ``scope``: an
        ``out``/``inout`` parameter bound to its argument's slots would show its new value
        (or an ``out`` parameter's reset) to such a read."""
        out: list[tuple[int, int]] = []
        self._collect_touches(body, scope, out, set())
        return out

    def _collect_touches(self, node: Any, scope: Any, out: list, seen: set[int]) -> None:
        if isinstance(node, (ast.PathExpr, ast.Member, ast.Index, ast.Slice)):
            found = self.lvalue_range(node, scope)
            if found is not None:
                if found[0] is not None:
                    out.append(found[0])
                e = node
                while isinstance(e, (ast.Member, ast.Index, ast.Slice)):  # run-time indexes are reads
                    if isinstance(e, ast.Index):
                        self._collect_touches(e.index, scope, out, seen)
                    e = e.base
                return
        if isinstance(node, ast.Call) and node.target is not None:
            tgt = node.target
            inst = getattr(tgt, "instance", None)
            if isinstance(inst, ast.Expr):
                self._collect_touches(inst, scope, out, seen)
            if tgt.kind in ("action", "user_function") and id(tgt.decl) not in seen:
                seen.add(id(tgt.decl))
                self._collect_touches(tgt.decl.body, scope, out, seen)
            elif tgt.kind not in ("function", "method", "header_method", "stack_method", "action",
                                  "user_function"):
                out.append(_EVERYWHERE)
        for c in ast.children(node):
            self._collect_touches(c, scope, out, seen)

    def _add_write(self, e: ast.Expr, scope: Any, out: list) -> None:
        if isinstance(e, ast.Default):
            return
        found = self.lvalue_range(e, scope)
        if found is None:
            out.append(_EVERYWHERE)  # not a shape we can place
        elif found[0] is not None:
            out.append(found[0])

    def lvalue_range(self, e: ast.Expr, scope: Any) -> tuple[tuple[int, int] | None, bool] | None:
        """(slots an lvalue may touch, whether they are exactly its slots); the range is None
        when the root is not bound in ``scope`` (a callee's own parameter or local).
        None when ``e`` is not a variable, field, constant index or slice of one."""
        exact = True
        while isinstance(e, ast.Slice):
            e, exact = e.base, False
        chain = []
        while isinstance(e, (ast.Member, ast.Index)):
            chain.append(e)
            e = e.base
        if not isinstance(e, ast.PathExpr):
            return None
        st = scope.get(e.decl)
        if not isinstance(st, Storage):
            return (None, False)
        if not isinstance(st.base, int):
            return (_EVERYWHERE, False)
        for node in reversed(chain):
            t = st.type
            if isinstance(node, ast.Member) and isinstance(t, HeaderT) and node.member in t.fields:
                st = member_storage(st, node.member)
            elif isinstance(node, ast.Index) and isinstance(t, StackT) and isinstance(node.index.value, int) \
                    and 0 <= node.index.value < t.size:
                st = Storage(st.base + node.index.value * slot_count(t.elem), t.elem)
            else:  # a run-time index or a stack member such as .next: the whole stack may be touched
                exact = False
                break
        return ((st.base, st.base + st.size), exact)

    # ---------------------------------------------------------------- binding
    def bind_params(self, params: list[ast.Param], args: list[ast.Expr], caller: Any, callee: Any,
                    body: Any = None) -> list[tuple[Storage, ast.Expr, Storage]]:
        """Bind each parameter in ``callee``; return the copy-backs to run after the body."""
        writes = self.written_ranges(body, caller) if body is not None else [_EVERYWHERE]
        touched: list[tuple[int, int]] | None = None  # reads too: only for out/inout, when needed
        effects = any(has_side_effects(a) for a in args if not isinstance(a, ast.Default))
        ranges: list[tuple[int, int] | None] = []  # what each argument names, for overlaps
        exact: list[bool] = []  # whether it may be bound by reference
        for a in args:
            found = None if isinstance(a, ast.Default) else self.lvalue_range(a, caller)
            if found is None or found[0] is None:
                ranges.append(_EVERYWHERE if effects else None)
                exact.append(False)
            else:
                ranges.append(_EVERYWHERE if effects else found[0])
                exact.append(found[1] and not effects)
        plan: list[tuple[Storage, ast.Expr, Storage]] = []
        for i, (p, a) in enumerate(zip(params, args)):
            if isinstance(a, ast.Default):  # '_' for an out parameter: a scratch slot
                tmp = self.env.gen.alloc(p.type)
                self.init_out(tmp)
                callee[p] = tmp
                continue
            r = ranges[i]
            ok = exact[i] and r is not None and not any(_overlap(r, w) for w in writes) and not any(
                _overlap(r, ranges[j]) for j in range(len(args))
                if j != i and ranges[j] is not None and not (p.direction in _IN and params[j].direction in _IN))
            if p.direction in _IN:
                if a.value is not None and not isinstance(a.value, str) and not isinstance(a.type, (HeaderT, StackT)):
                    callee[p] = self.env.exprs.ex(a, caller)  # a constant: nothing to copy
                elif ok:
                    callee[p] = self.env.gen.storage(a, caller)
                else:
                    tmp = self.env.gen.alloc(p.type)
                    self.env.gen.assign_storage(tmp, a, caller)
                    callee[p] = tmp
                continue
            if ok:
                if touched is None:
                    touched = self.touched_ranges(body, caller) if body is not None else [_EVERYWHERE]
                ok = not any(_overlap(r, w) for w in touched)
            if ok:
                st = self.env.gen.storage(a, caller)
                if p.direction == "out":
                    self.init_out(st)
                callee[p] = st
                continue
            # spec 6.8: the l-value is fixed at the call (a run-time stack index the callee
            # changes does not move the copy-out)
            dst = self.env.headers.pin(self.env.gen.storage(a.base if isinstance(a, ast.Slice) else a, caller))
            tmp = self.env.gen.alloc(p.type)
            if p.direction == "inout":
                self.env.gen.assign_storage(tmp, a, caller)
            else:
                self.init_out(tmp)
            callee[p] = tmp
            plan.append((tmp, a, dst))
        return plan

    def init_out(self, st: Storage) -> None:
        """An ``out`` parameter starts uninitialised: headers invalid (p4c invalidates
        header variables at declaration); scalars 0, as BMv2's fresh locals are."""
        t = st.type
        if isinstance(t, StackT):
            n = slot_count(t.elem)
            for i in range(t.size):
                self.init_out(Storage(st.base + i * n, t.elem))
            self.env.build.emit(ir.Assign(ir.slot(self.env.headers.stack_next_slot(st)), ir.Const(0)))
        elif isinstance(t, HeaderT):
            if t.is_header:
                self.env.headers.set_invalid(st)
                return
            for name in t.fields:
                self.init_out(member_storage(st, name))
        else:
            zero = False if t is BOOL else b"" if type(t).__name__ == "VarbitT" else 0
            self.env.build.emit(ir.Assign(ir.slot(st.base), ir.Const(zero)))

    def copy_back(self, src: Storage, arg: ast.Expr, scope: Any, dst: Storage | None = None) -> None:
        """``arg = src``; ``dst``: the argument's (or a slice's base's) slots pinned at the call."""
        if isinstance(arg, ast.Slice):
            base = dst if dst is not None else self.env.gen.storage(arg.base, scope)
            hi, lo = arg.hi.value, arg.lo.value
            m = ((1 << (hi - lo + 1)) - 1) << lo
            bt = base.type
            val = ir.bin_("|", ir.bin_("&", ir.slot(base.base), bt.mask & ~m),
                          ir.bin_("&", ir.bin_("<<", ir.slot(src.base), lo), m))
            if isinstance(bt, BitsT) and bt.signed:
                val = ir.lift(self.env.exprs.wrap_code(val, bt))
            self.env.build.emit(ir.Assign(ir.slot(base.base), val))
            return
        self.env.headers.copy_value(dst if dst is not None else self.env.gen.storage(arg, scope), src)

    # ---------------------------------------------------------------- bodies
    def inline(self, params: list[ast.Param], args: list[ast.Expr], body: ast.Block, caller: Any,
               callee: Any) -> None:
        plan = self.bind_params(params, args, caller, callee, body)
        self.run_body(body, callee, lambda: [self.copy_back(src, a, caller, dst) for src, a, dst in plan], bool(plan))

    def run_body(self, body: Any, scope: Any, copy_out, has_copy_out: bool) -> None:
        """The body, with ``return`` leaving it and ``exit`` still copying out."""
        guard = has_copy_out and may_exit(body)
        if not guard:
            self._run_body(body, scope)
            copy_out()
            return
        with self.env.build.try_exit():
            self._run_body(body, scope)
        with self.env.build.on_exit():
            copy_out()
            self.env.build.emit(ir.Raise(None))
        copy_out()

    def _run_body(self, body: Any, scope: Any) -> None:
        """The body; a ``return`` inside it leaves it (a ``while True`` to break out of, unless
        every return is the body's last action)."""
        has_return = _contains_return(body)
        saved = self.env.return_stmt
        if has_return and _tail_returns_only(body):
            has_return = False
            self.env.return_stmt = ir.Pass()
        if has_return:
            with self.env.build.loop():
                self.env.return_stmt = ir.Break()
                self.env.gen.stmt(body, scope)
                self.env.build.emit(ir.Break())
        else:
            self.env.gen.stmt(body, scope)
        self.env.return_stmt = saved

    def user_call(self, call: ast.Call, scope: Any) -> Storage | None:
        """Inline a function call; its value is left in a fresh slot."""
        d: ast.FunctionDecl = call.target.decl
        ret = self.env.gen.alloc(d.type) if d.type is not VOID else None
        saved, self.env.return_slot = self.env.return_slot, ret
        self.inline(d.proto.params, call.args, d.body, scope, type(scope)(scope))
        self.env.return_slot = saved
        return ret

    def return_value(self, s: ast.Return, scope: Any) -> None:
        if s.value is not None:
            if self.env.return_slot is None:
                raise P4Error(s.loc, "return with a value outside a function")
            self.env.gen.assign_storage(self.env.return_slot, s.value, scope)

    # ---------------------------------------------------------------- lazy operands
    def lazy_logic(self, e: ast.Binary, scope: Any) -> ir.Expr:
        """``a && f()`` / ``a || f()``: the call runs only when the right side is evaluated."""
        v = ir.Var(self.env.gen.fresh("v"))
        self.env.build.emit(ir.Assign(v, ir.lift(self.env.exprs.ex(e.left, scope))))
        with self.env.build.if_(v if e.op == "&&" else ir.Not(v)):
            self.env.build.emit(ir.Assign(v, ir.lift(self.env.exprs.ex(e.right, scope))))
        return v

    def lazy_cond(self, e: ast.Cond, scope: Any) -> ir.Expr:
        v = ir.Var(self.env.gen.fresh("v"))
        with self.env.build.if_(ir.lift(self.env.exprs.ex(e.cond, scope))):
            self.env.build.emit(ir.Assign(v, ir.lift(self.env.exprs.ex(e.then, scope))))
        with self.env.build.else_():
            self.env.build.emit(ir.Assign(v, ir.lift(self.env.exprs.ex(e.other, scope))))
        return v


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]
