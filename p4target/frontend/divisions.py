"""Checker rules for ``/`` and ``%``: refused exactly where p4c-bm2-ss 1.2.5 refuses them.

p4c judges a division in four places (paths and lines of p4c v1.2.5.16):

1. ``frontends/common/constantFolding.cpp:406-432``: the first ConstantFolding runs before
   types are known (``frontends/p4/frontend.cpp:241``, ahead of TypeInference at :254), so two constant
   operands fold whatever their signedness (``8s6 / 8s3`` is 2), unless one is negative
   ("Division is not defined for negative numbers") or the divisor is zero ("Division by zero").
2. ``frontends/p4/typeChecking/typeCheckExpr.cpp:884-924`` (``unsBinaryArith``): otherwise an
   ``int<W>`` operand is refused ("Cannot operate on signed values"), then a negative unsized
   constant ("not defined on negative numbers"); a serializable enum operand stands for its
   underlying type (``binaryArith``, :806-870).
3. ``frontends/p4/strengthReduction.cpp:304-336``: a zero divisor ("Division by zero"; a
   ``bit<0>`` one too), ``x / 2^k`` becomes ``x >> k``, ``x % 2^k`` becomes ``x & (2^k - 1)``,
   ``0 / x`` and ``0 % x`` become 0 (once SideEffectOrdering took any call out of ``x``).
4. ``backends/bmv2/simple_switch/midend.cpp:102-120``: LocalCopyPropagation
   (``midend/local_copyprop.cpp``) puts the values assigned earlier in the same action,
   function, control apply block or parser state into the program, ConstantFolding and
   StrengthReduction run again, and CompileTimeOperations (``midend/compileTimeOps.h:23-31``)
   refuses every ``/`` and ``%`` left: "could not evaluate expression at compilation time".

The propagation here is a part of p4c's: straight-line code, into the branches of an ``if``
or ``switch`` (a value assigned inside a branch is dropped after it, as p4c's flow merge does),
forgotten over loops and over every call but a header's ``isValid`` (an extern's arguments
only).  A divisor that is an ``in`` parameter of a function or an action is decided at each
call (p4c inlines the call, and its RemoveActionParameters turns an action list's arguments
into assignments), a directionless parameter of an action in a table never (action data); a
division in a table key at each apply of the table (p4c's SimplifyKey computes the key there).
An action, a function or a table no applied table or call uses keeps no refusal: p4c's
RemoveAllUnusedDeclarations removes it before the midend.  A division p4c accepts only
through more of its dataflow (a value it keeps across a table apply or a call) is refused with
p4c's words and a note naming what p4c would need.

A pass of the checker (env.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from . import ast, limits
from .ast import text, type_text
from .env import Pass
from .errors import P4Error
from .types import INFINT, BitsT, EnumT, StackT, Type, fold_arith, wrap

# p4c's binaryArith operators (typeCheckExpr.cpp): a serializable enum operand is its underlying type
ARITH_OPS = ("+", "-", "*", "/", "%", "&", "|", "^", "|+|", "|-|")


class Known:
    """What p4c's LocalCopyPropagation holds for one name: the expression last assigned (its
    text, as p4c prints it), its constant value when it has one, and the names it reads (a
    write to one of them drops it, local_copyprop.cpp:dropValuesUsing).  Compared by identity
    when branches merge, as p4c compares its expression pointers."""

    __slots__ = ("value", "shown", "compound", "reads", "param", "pending")

    def __init__(self, value: int | None, shown: str, compound: bool, reads: frozenset[tuple],
                 param: ast.Param | None = None) -> None:
        self.value, self.shown, self.compound, self.reads = value, shown, compound, reads
        self.param = param  # an `in` parameter not yet written: its argument, once inlined
        self.pending: P4Error | None = None  # the refusal of `x /= e`, moved to where x is read


class ParamDivision:
    """A division by a parameter, decided where the function or action is called."""

    __slots__ = ("e", "param", "left", "left_value", "name")

    def __init__(self, e: ast.Binary, param: ast.Param, left: str, left_value: int | None, name: str) -> None:
        self.e, self.param, self.left, self.left_value, self.name = e, param, left, left_value, name


def value_key(e: Any) -> tuple | None:
    """p4c's ``expr_name`` (local_copyprop.cpp:41): a variable or parameter, a field of one,
    an element at a constant index.  A stack's ``next``/``last`` names no fixed element."""
    if isinstance(e, ast.PathExpr):
        return (e.decl,) if isinstance(e.decl, (ast.VarDecl, ast.Param)) else None
    if isinstance(e, ast.Member):
        if isinstance(e.base.type, StackT) and e.member in ("next", "last"):
            return None
        base = value_key(e.base)
        return None if base is None else (*base, e.member)
    if isinstance(e, ast.Index) and isinstance(e.index.value, int) and not isinstance(e.index.value, bool):
        base = value_key(e.base)
        return None if base is None else (*base, e.index.value)
    return None


def written_root(e: Any) -> tuple | None:
    """The longest name a write to ``e`` stays inside (a slice or a run-time index writes
    part of its base); None for an expression that is no location."""
    if isinstance(e, ast.NamedArg):
        return written_root(e.arg)
    key = value_key(e)
    if key is not None:
        return key
    if isinstance(e, (ast.Member, ast.Index, ast.Slice)):
        return written_root(e.base)
    return None


def _overlap(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def early_const(e: Any) -> bool:
    """Folded by p4c's first ConstantFolding, before types are known: literals, ``const``
    names of bit<W>/int<W>/int type, casts of those to bit<W>/int<W>, their arithmetic.  A
    serializable enum member or a header's size method waits for the type checker."""
    v = e.value
    if isinstance(v, bool) or not isinstance(v, int):
        return False
    if isinstance(e, ast.IntLit):
        return True
    if isinstance(e, ast.PathExpr):
        d = e.decl  # a constructor parameter is a constant only after p4c's SpecializeAll
        return (isinstance(d, ast.ConstDecl) and not d.ctor_param
                and (isinstance(d.type, BitsT) or d.type is INFINT) and early_const(d.init))
    if isinstance(e, ast.Cast):
        return isinstance(e.type, BitsT) and early_const(e.operand)
    if isinstance(e, ast.Unary):
        return early_const(e.operand)
    if isinstance(e, ast.Binary):
        return early_const(e.left) and early_const(e.right)
    if isinstance(e, ast.Slice):
        return early_const(e.base)
    if isinstance(e, ast.Cond) and isinstance(e.cond.value, bool):
        return early_const(e.then if e.cond.value else e.other)  # p4c folds the branch taken
    return False


def _power_of_two(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _shown(e: Any, subst: Callable[[Any], str | None]) -> str:
    """An expression as p4c prints it in a message (its dbprint, ir/dbprint-expression.cpp):
    ``subst`` gives what p4c has put in place of a part by then (a folded constant prints as
    its decimal value, without a width)."""
    s = subst(e)
    if s is not None:
        return s
    if isinstance(e, ast.Binary):
        return f"{_operand(e.left, subst)} {e.op} {_operand(e.right, subst)}"
    if isinstance(e, ast.Unary):
        return f"{e.op}{_operand(e.operand, subst)}"
    if isinstance(e, ast.Cast):
        return f"({type_text(e.type_ref)}){_operand(e.operand, subst)}"
    return text(e)


def _operand(e: Any, subst: Callable[[Any], str | None]) -> str:
    s = subst(e)
    if s is not None:
        return s
    return f"({_shown(e, subst)})" if isinstance(e, (ast.Binary, ast.Cond)) else _shown(e, subst)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _early_text(e: Any) -> str | None:
    """After p4c's first ConstantFolding (the type checker's messages)."""
    return limits.shown(e.value) if early_const(e) else None


def _typed_text(e: Any) -> str | None:
    """After the frontend's typed ConstantFolding (StrengthReduction's messages)."""
    v = _int(e.value)
    return None if v is None else limits.shown(v)


class Divisions(Pass):
    """``/`` and ``%`` and the values p4c's LocalCopyPropagation knows."""

    # ---------------------------------------------------------------- refusals left for the end
    def defer(self, stage: int, err: P4Error) -> None:
        """A refusal p4c makes in its midend (stage 0: BMv2's CheckUnsupported, 1: its
        ConstantFolding and StrengthReduction after LocalCopyPropagation, 2: CompileTimeOperations)."""
        self.env.midend.append((stage, err, self.env.owner))

    # ---------------------------------------------------------------- the values known
    @contextmanager
    def fresh_values(self, owner: Any = None, params: Sequence[ast.Param] = ()) -> Iterator[None]:
        """A body p4c's LocalCopyPropagation treats on its own: an action, a function, a
        control's apply block (with its locals), a parser state, a table's properties.  The
        ``in`` parameters of an action or a function (``owner``) stand for their arguments."""
        saved = self.env.known, self.env.blurred, self.env.owner
        self.env.known, self.env.blurred = {}, set()
        if owner is not None:
            self.env.owner = owner
        for p in params:
            if p.direction in ("in", "") and isinstance(p.type, BitsT):
                self.env.known[(p,)] = Known(None, p.name, False, frozenset(), param=p)
        try:
            yield
        finally:
            self.env.known, self.env.blurred, self.env.owner = saved

    def forget_all(self) -> None:
        """Where p4c may keep values (a call it sees into, a loop): every one is forgotten here."""
        self.env.blurred |= set(self.env.known)
        self.env.known = {}

    def _reads(self, e: Any) -> frozenset[tuple] | None:
        """The names an expression reads once p4c put the known values in; None when p4c would
        not copy it (a call may have side effects; a list is never propagated,
        local_copyprop.cpp postorder(AssignmentStatement))."""
        if isinstance(e, (ast.Call, ast.ListExpr)):
            return None
        key = value_key(e)
        if key is not None:
            hit = self.env.known.get(key)
            return frozenset([key]) if hit is None else hit.reads
        if isinstance(e, ast.PathExpr):
            return frozenset() if e.value is not None else None  # a constant; else an instance, a table...
        parts = {ast.Member: ("base",), ast.Slice: ("base",), ast.Index: ("base", "index"),
                 ast.Binary: ("left", "right"), ast.Unary: ("operand",), ast.Cast: ("operand",),
                 ast.Cond: ("cond", "then", "other")}.get(type(e), ())
        out: set[tuple] = set()
        for name in parts:
            r = self._reads(getattr(e, name))
            if r is None:
                return None
            out |= r
        return frozenset(out)

    def forget(self, e: Any) -> None:
        """A write to ``e``: what was known of it, and every copy reading it, is dropped."""
        root = (e,) if isinstance(e, ast.VarDecl) else written_root(e)
        if root is None:
            return
        self.env.known = {k: v for k, v in self.env.known.items()
                      if not _overlap(k, root) and not any(_overlap(r, root) for r in v.reads)}
        self.env.blurred = {k for k in self.env.blurred if not _overlap(k, root)}

    def note_write(self, lhs: Any, rhs: Any | None, assigned_op: bool = False) -> None:
        """An assignment, or a declaration (``lhs`` the VarDecl) with or without an initializer:
        p4c keeps the value for later reads.  ``assigned_op``: written ``lhs op= e``."""
        reads = None if rhs is None else self._reads(rhs)
        shown = None if rhs is None else _shown(rhs, self._midend_text)
        value = None if rhs is None else self.pvalue(rhs)
        self.forget(lhs)
        key = (lhs,) if isinstance(lhs, ast.VarDecl) else value_key(lhs)
        t = lhs.type
        if key is None or reads is None or shown is None or not isinstance(t, (BitsT, EnumT)):
            return
        if value is None and any(_overlap(r, key) for r in reads):
            return  # defined in terms of itself (p4c: exprUses)
        number = t if isinstance(t, BitsT) else t.underlying  # a serializable enum is a number (EliminateSerEnums)
        if value is not None and number is not None:

            value, reads = wrap(value, number), frozenset()
            shown = limits.shown(value)
        else:
            value = None
        compound = isinstance(rhs, (ast.Binary, ast.Cond)) and value is None
        source = self.env.known.get(value_key(rhs)) if value_key(rhs) is not None else None
        known = Known(value, shown, compound, reads, source.param if source is not None else None)
        self.env.known[key] = known
        if assigned_op:  # p4c's RemoveOpAssign makes `lhs / e` with no location of its own
            known.pending = next((err for _, err, _ in self.env.midend if err.loc is rhs.loc), None)

    def merge_values(self, before: dict[tuple, Known], branches: list[dict[tuple, Known]]) -> None:
        """After an if or a switch: what no branch changed (p4c's flow_merge keeps a value only
        where every path holds the same expression)."""
        self.env.known = {k: v for k, v in before.items() if all(b.get(k) is v for b in branches)}

    def forget_after_call(self, e: ast.Call) -> None:
        """A call may write: an extern its arguments (p4c assumes no more, local_copyprop.cpp
        postorder(MethodCallExpression)); anything else (an action, a table, a function, a
        control) is taken to write everything."""
        tgt = e.target
        kind = tgt.kind if tgt is not None else None
        if kind == "header_method":
            if tgt.name in ("setValid", "setInvalid"):
                self.forget(tgt.instance)
        elif kind == "stack_method":
            self.forget(tgt.instance)
        elif kind in ("function", "method"):
            for a in e.args:
                self.forget(a)
        else:
            self.forget_all()

    def pvalue(self, e: Any) -> int | None:
        """The constant ``e`` is once p4c's midend propagated the values known and folded."""
        v = _int(e.value)
        if v is not None or isinstance(e.value, bool):
            return v
        key = value_key(e)
        if key is not None:
            hit = self.env.known.get(key)
            return None if hit is None else hit.value

        t = e.type
        if isinstance(e, ast.Cast) and isinstance(t, BitsT) and isinstance(e.operand.type, (BitsT, EnumT)):
            v = self.pvalue(e.operand)
            return None if v is None else wrap(v, t)
        if isinstance(e, ast.Unary) and isinstance(t, BitsT) and e.op in ("-", "~", "+"):
            v = self.pvalue(e.operand)
            return None if v is None else wrap({"-": -v, "~": ~v, "+": v}[e.op], t)
        if isinstance(e, ast.Binary) and isinstance(t, BitsT) and e.op not in ("++",):
            a, b = self.pvalue(e.left), self.pvalue(e.right)
            if a is None or b is None:
                return None
            if e.op in ("<<", ">>"):
                return wrap(a << b if e.op == "<<" else a >> b, t)
            if e.op in ("/", "%"):
                return None if a < 0 or b <= 0 else wrap(a // b if e.op == "/" else a % b, t)
            if e.op in ("+", "-", "*", "&", "|", "^", "|+|", "|-|"):
                return fold_arith(e.op, a, b, t)
            return None
        if isinstance(e, ast.Slice) and isinstance(e.lo.value, int) and isinstance(e.hi.value, int):
            v = self.pvalue(e.base)
            return None if v is None else (v >> e.lo.value) & ((1 << (e.hi.value - e.lo.value + 1)) - 1)
        return None

    def _midend_text(self, e: Any) -> str | None:
        """After LocalCopyPropagation and the midend's ConstantFolding (CompileTimeOperations'
        messages): a propagated copy prints as the expression copied."""
        v = self.pvalue(e)
        if v is not None:
            return limits.shown(v)
        key = value_key(e)
        hit = self.env.known.get(key) if key is not None else None
        if hit is None:
            return None
        if hit.pending is not None:  # p4c reports the copy put here, at this read
            self._relocate(hit.pending, e.loc)
            hit.pending = None
        return f"({hit.shown})" if hit.compound else hit.shown

    def _relocate(self, err: P4Error, loc: Any) -> None:
        self.env.midend = [(stage, P4Error(loc, e.message) if e is err else e, owner)
                           for stage, e, owner in self.env.midend]

    # ---------------------------------------------------------------- / and %
    def ser_enum_operands(self, e: ast.Binary) -> None:
        """p4c's binaryArith: a serializable enum operand is cast to its underlying type."""
        for side in ("left", "right"):
            x = getattr(e, side)
            t = x.type
            if isinstance(t, EnumT) and t.underlying is not None:
                u = t.underlying
                width = ast.IntLit(x.loc, u.width, None, False)
                width.type, width.value = INFINT, u.width
                cast = ast.Cast(x.loc, ast.TypeRef(x.loc, "int" if u.signed else "bit", width=width), x)
                cast.type, cast.value = u, x.value
                setattr(e, side, cast)

    def division_before_types(self, e: ast.Binary) -> bool:
        """p4c's first ConstantFolding and its type checker; True when p4c folds the division
        before types are known (the caller folds it too)."""
        left, right = e.left, e.right
        lt, rt = (x.type.underlying if isinstance(x.type, EnumT) and x.type.underlying else x.type
                  for x in (left, right))
        name = "Division" if e.op == "/" else "Modulo"
        shown = f"{_operand(left, _early_text)} {e.op} {_operand(right, _early_text)}"
        if early_const(left) and early_const(right):
            if isinstance(lt, BitsT) and isinstance(rt, BitsT) and lt != rt:
                return False  # "operands have different types": the caller refuses the mix
            a, b = left.value, right.value

            if lt is INFINT and isinstance(rt, BitsT):  # the unsized operand takes the other's type
                a = wrap(a, rt)
            if rt is INFINT and isinstance(lt, BitsT):
                b = wrap(b, lt)
            if a < 0 or b < 0:
                raise P4Error(e.loc, f"{shown}: {name} is not defined for negative numbers")
            if b == 0:
                raise P4Error(e.loc, f"{shown}: {name} by zero")
            return True
        if any(isinstance(t, BitsT) and t.signed for t in (lt, rt)):
            raise P4Error(e.loc, f"{shown}: Cannot operate on signed values")
        if any(x.type is INFINT and early_const(x) and x.value < 0 for x in (left, right)):
            raise P4Error(e.loc, f"{shown}: not defined on negative numbers")
        return False

    def division(self, e: ast.Binary, t: Type, lv: Any, rv: Any) -> bool:
        """StrengthReduction, then the midend's: True when the value is known only at run time
        (the executor divides; a divisor or dividend the midend knows is put in as a constant)."""
        name = "Division" if e.op == "/" else "Modulo"
        if rv == 0 or (isinstance(t, BitsT) and t.width == 0):
            raise P4Error(e.loc, f"{_operand(e.left, _typed_text)} {e.op} {_operand(e.right, _typed_text)}: "
                          f"{name} by zero")
        if lv is not None and rv is not None:
            return False  # folded by the caller
        if (rv is not None and _power_of_two(rv)) or lv == 0:  # 0 / f(x): SideEffectOrdering hoists the call
            return True
        if self.env.key_table is not None:  # p4c's SimplifyKey computes the key before each apply
            self.env.key_divisions.setdefault(self.env.key_table, []).append(e)
            return True
        self._midend(e, lv, rv, substitute=True)
        return True

    def _midend(self, e: ast.Binary, lv: Any, rv: Any, substitute: bool) -> None:
        """LocalCopyPropagation, ConstantFolding and StrengthReduction, then CompileTimeOperations."""
        name = "Division" if e.op == "/" else "Modulo"
        shown = f"{_operand(e.left, self._midend_text)} {e.op} {_operand(e.right, self._midend_text)}"
        plv, prv = self.pvalue(e.left), self.pvalue(e.right)
        if prv == 0:
            self.defer(1, P4Error(e.loc, f"{shown}: {name} by zero"))
            return
        if (prv is not None and (plv is not None or _power_of_two(prv))) or plv == 0:
            if substitute and prv is not None and rv is None:
                e.right = _constant(e.right, prv)
            if substitute and plv is not None and lv is None:
                e.left = _constant(e.left, plv)
            return
        key = value_key(e.right)
        hit = self.env.known.get(key) if key is not None else None
        if substitute and hit is not None and hit.param is not None and self.env.owner is not None:
            left = _operand(e.left, self._midend_text)
            self.env.param_divisions.setdefault(self.env.owner, []).append(ParamDivision(e, hit.param, left, plv, name))
            return
        note = ""
        call = e.right.target if isinstance(e.right, ast.Call) else None
        if call is not None and call.kind == "user_function":
            note = (f" (p4c-bm2-ss inlines {call.name} and accepts it if the call returns a constant power of "
                    "two: the built-in target does not look into the function)")
        param = key[0] if key is not None and len(key) == 1 and isinstance(key[0], ast.Param) else None
        if param is not None and param.direction == "in" and self.env.owner is None:
            note = (f" (p4c-bm2-ss inlines the control where an instance of it is applied and accepts it if "
                    f"every apply passes a constant power of two as {param.name}: the built-in target checks "
                    "the control once)")
        if key is not None and key in self.env.blurred:
            note = (f" (p4c-bm2-ss accepts it if {text(e.right)} still holds a constant power of two assigned "
                    "before a call or a loop that does not write it: its LocalCopyPropagation follows values "
                    "through those, the built-in target does not)")
        self.defer(2, P4Error(e.loc, f"{shown}: could not evaluate expression at compilation time{note}"))

    def apply_key_divisions(self, table: ast.TableDecl) -> None:
        """``table.apply()``: p4c's SimplifyKey computed a key with a division just before it, so
        the values known here decide it (at every apply)."""
        for e in self.env.key_divisions.get(table, []):
            self._midend(e, e.left.value, e.right.value, substitute=False)

    def bind_params(self, owner: Any, params: Sequence[ast.Param], args: Sequence[Any] | None, data: bool) -> None:
        """A call of ``owner`` (or a table's action list naming it): each division by an ``in``
        parameter becomes a division by its argument, as once p4c inlined it.  ``data``: an
        action in a table, whose directionless parameters are action data, never constants."""
        for pd in self.env.param_divisions.get(owner, []):
            e, p = pd.e, pd.param
            if p.direction == "" and data:
                arg = None
            else:
                bound = [q for q in params if q.direction or not data]
                i = next((i for i, q in enumerate(bound) if q is p), None)
                arg = args[i] if args is not None and i is not None and i < len(args) else None
            if isinstance(arg, ast.NamedArg):
                arg = arg.arg
            v = None if arg is None else self.pvalue(arg)
            right = p.name if arg is None else _operand(arg, self._midend_text)
            shown = f"{pd.left} {e.op} {right}"
            if v == 0:
                self.defer(1, P4Error(e.loc, f"{shown}: {pd.name} by zero"))
            elif v is None or not (_power_of_two(v) or pd.left_value is not None):
                self.defer(2, P4Error(e.loc, f"{shown}: could not evaluate expression at compilation time"))


def _constant(e: ast.Expr, v: int) -> ast.IntLit:
    """The constant p4c's LocalCopyPropagation put where ``e`` was read."""
    t = e.type
    n = ast.IntLit(e.loc, v, t.width, t.signed)
    n.type, n.value = t, v
    return n


def used_closure(used: set[Any]) -> set[Any]:
    """What p4c's RemoveAllUnusedDeclarations keeps: what is called or applied, and the
    actions of an applied table."""
    out = set(used)
    for t in used:
        if isinstance(t, ast.TableDecl):
            refs = [*t.actions, t.default_action, *(x.action for x in t.entries or [])]
            out |= {r.decl for r in refs if r is not None}
    return out
