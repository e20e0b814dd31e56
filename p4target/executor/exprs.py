"""Code generation for expressions: a P4 expression becomes an ``ir.Expr`` (``ExprGen.ex``).

A pass of code generation (``env.GenEnv``); TNA's extern calls in expressions are
``tna_codegen.TnaExprGen``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..frontend import ast
from ..frontend.errors import P4Error
from ..frontend.types import BOOL, ApplyResultT, BitsT, EnumT, HeaderT, StackT, Type, bit_width
from . import ir
from .calls import has_user_call
from .storage import Scope, Storage, member_storage, slot_count

if TYPE_CHECKING:
    from .env import GenEnv

POS = ir.Var("pos")  # a parser's position in the packet


class ExprGen:
    """Expressions: values at their widths, operators, casts, slices, calls with a value."""

    def __init__(self, env: GenEnv) -> None:
        self.env = env

    def wrap_code(self, code: ir.Expr | str, t: Type) -> ir.Expr:
        """The value at ``t``'s width: unsigned by a mask, signed by two's complement."""
        code = ir.lift(code)
        if not isinstance(t, BitsT):
            return code
        if t.signed:
            half = 1 << (t.width - 1)
            return ir.bin_("-", ir.bin_("&", ir.bin_("+", code, half), t.mask), half)
        return ir.bin_("&", code, t.mask)

    def ex(self, e: ast.Expr, scope: Scope) -> ir.Expr:
        if e.value is not None and not isinstance(e.value, str):
            return ir.Const(e.value)
        m = getattr(self, "_x_" + type(e).__name__)
        return ir.lift(m(e, scope))

    def _x_PathExpr(self, e: ast.PathExpr, scope: Scope) -> ir.Expr:
        b = self.env.gen.lookup(scope, e.decl)
        if isinstance(b, Storage):
            return ir.slot(b.base)
        return b

    def _x_Member(self, e: ast.Member, scope: Scope) -> ir.Expr:
        bt = e.base.type
        if isinstance(bt, ApplyResultT):
            hit = ir.ApplyHit(self.ex(e.base, scope))
            return hit if e.member == "hit" else ir.Not(hit)
        if isinstance(bt, StackT) and e.member == "lastIndex":
            return ir.lift(self.env.headers.last_index_code(self.env.gen.storage(e.base, scope)))
        return ir.slot(self.env.gen.storage(e, scope).base)

    def _x_Index(self, e: ast.Index, scope: Scope) -> ir.Expr:
        return ir.slot(self.env.gen.storage(e, scope).base)

    def _x_Slice(self, e: ast.Slice, scope: Scope) -> ir.Expr:
        lo, hi = e.lo.value, e.hi.value
        base = self.ex(e.base, scope)
        if lo:
            return ir.bin_("&", ir.bin_(">>", base, lo), (1 << (hi - lo + 1)) - 1)
        return ir.bin_("&", base, (1 << (hi + 1)) - 1)

    def _x_Call(self, e: ast.Call, scope: Scope) -> ir.Expr:
        tgt = e.target
        if tgt.kind == "header_method" and tgt.name == "isValid":
            return ir.lift(self.env.headers.valid_code(self.env.gen.storage(tgt.instance, scope)))
        if tgt.kind == "table_apply":
            return ir.Apply(self.env.gen.lookup(scope, tgt.decl))
        if tgt.kind == "method" and tgt.decl.name == "packet_in" and tgt.name == "length":
            return ir.PacketLength()
        if tgt.kind == "user_function":
            return ir.slot(self.env.calls.user_call(e, scope).base)
        if tgt.kind == "method" and tgt.decl.name == "packet_in" and tgt.name == "lookahead":
            if isinstance(e.type, HeaderT) and e.type.is_header and e.type.varbit_field is None:
                return ir.slot(self.lookahead_header(e).base)
            if not (isinstance(e.type, (BitsT, EnumT)) or e.type is BOOL):
                raise P4Error(e.loc, f"lookahead<{e.type}> is not supported by the built-in target")
            return self.lookahead_bits(e.type)
        raise P4Error(e.loc, f"{tgt.name}() cannot be used in an expression")

    def lookahead_bits(self, t: Type) -> ir.Expr:
        """``lookahead<bit<W>>()``: the next W bits, not consumed; too few is PacketTooShort."""
        w = bit_width(t)
        n = (w + 7) // 8
        self.env.packet.need_bytes(n)
        raw = ir.bin_(">>", ir.PacketInt(POS, ir.Const(n)), n * 8 - w)
        if t is BOOL:
            return ir.Call("bool", (raw,))
        return self.env.packet.from_raw(raw, t)

    def lookahead_header(self, e: ast.Call) -> Storage:
        """``lookahead<H>()``: a valid copy of the next header, the position kept."""
        st = self.env.gen.alloc(e.type)
        saved = self.env.gen.temp("pos")
        self.env.build.emit(ir.Assign(saved, POS))
        self.env.packet.extract(st, e)
        self.env.build.emit(ir.Assign(POS, saved))
        return st

    def _x_Cast(self, e: ast.Cast, scope: Scope) -> ir.Expr:
        src, dst = e.operand.type, e.type
        v = self.ex(e.operand, scope)
        if dst is BOOL:
            return ir.cmp("!=", v, 0)
        if src is BOOL:
            return ir.Select(v, ir.Const(1), ir.Const(0))
        target = dst.underlying if isinstance(dst, EnumT) else dst
        source = src.underlying if isinstance(src, EnumT) else src
        if isinstance(target, BitsT) and isinstance(source, BitsT):
            if source == target or (not source.signed and not target.signed and target.width >= source.width):
                return v
            if source.signed and target.signed and target.width >= source.width:
                return v
            return self.wrap_code(v, target)
        return v

    def _x_Unary(self, e: ast.Unary, scope: Scope) -> ir.Expr:
        v = self.ex(e.operand, scope)
        t = e.type
        if e.op == "!":
            return ir.Not(v)
        if e.op == "+":
            return v
        if e.op == "~":
            return ir.Invert(v) if t.signed else ir.bin_("^", v, t.mask)
        return self.wrap_code(ir.Neg(v), t)

    def _x_Cond(self, e: ast.Cond, scope: Scope) -> ir.Expr:
        if has_user_call(e.then) or has_user_call(e.other):
            return ir.lift(self.env.calls.lazy_cond(e, scope))
        return ir.Select(self.ex(e.cond, scope), self.ex(e.then, scope), self.ex(e.other, scope))

    def _x_Binary(self, e: ast.Binary, scope: Scope) -> ir.Expr:
        op, t = e.op, e.type
        if op in ("&&", "||") and has_user_call(e.right):
            return ir.lift(self.env.calls.lazy_logic(e, scope))
        if op in ("==", "!=") and isinstance(e.left.type, (HeaderT, StackT)):
            same = self.equal_code(self.env.gen.storage(e.left, scope), self.env.gen.storage(e.right, scope))
            return same if op == "==" else ir.Not(same)
        a = self.ex(e.left, scope)
        if e.left.value is None and has_user_call(e.right):  # p4c/spec: the left operand is
            v = self.env.gen.temp("l")  # read before a call on the right can change it
            self.env.build.emit(ir.Assign(v, a))
            a = v
        b = self.ex(e.right, scope)
        if op in ("/", "%", "<<") and has_user_call(e.right):  # b appears twice below: its call runs once
            v = self.env.gen.temp("r")
            self.env.build.emit(ir.Assign(v, b))
            b = v
        if op == "&&":
            return ir.And((a, b))
        if op == "||":
            return ir.Or((a, b))
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return ir.Cmp(op, a, b)
        if op in ("&", "|", "^", ">>"):
            return ir.Bin(op, a, b)
        if op == "++":
            lt, rt = e.left.type, e.right.type
            code = ir.Bin("|", ir.bin_("<<", ir.bin_("&", a, lt.mask), rt.width), ir.bin_("&", b, rt.mask))
            return self.wrap_code(code, t) if t.signed else code
        if op == "<<":
            shifted = self.wrap_code(ir.Bin("<<", a, b), t)
            if e.right.value is not None:
                return shifted if e.right.value < t.width else ir.Const(0)
            return ir.Select(ir.cmp("<", b, t.width), shifted, ir.Const(0))
        if op in ("|+|", "|-|"):
            raw = ir.Bin("+" if op == "|+|" else "-", a, b)
            lo, hi = (-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed else (0, t.mask)
            if op == "|+|" and not t.signed:
                return ir.Call("min", (raw, ir.Const(hi)))
            if op == "|-|" and not t.signed:
                return ir.Call("max", (raw, ir.Const(0)))
            return ir.Call("min", (ir.Call("max", (raw, ir.Const(lo))), ir.Const(hi)))
        if op in ("+", "-", "*"):
            return self.wrap_code(ir.Bin(op, a, b), t)
        if op in ("/", "%"):  # bit<W> only (checker); BMv2 would abort on a zero divisor
            return ir.Select(b, ir.Bin("//" if op == "/" else "%", a, b), ir.Const(0))
        raise P4Error(e.loc, f"operator {op} cannot be executed")

    def equal_code(self, a: Storage, b: Storage) -> ir.Expr:
        """P4 equality of headers, structs and stacks: two invalid headers are equal
        whatever their fields hold; a valid and an invalid one never are."""
        t = a.type
        if isinstance(t, StackT):
            size = slot_count(t.elem)
            parts = [self.equal_code(Storage(a.base + i * size, t.elem), Storage(b.base + i * size, t.elem))
                     for i in range(t.size)]
        elif isinstance(t, HeaderT) and t.is_header:
            n = a.size
            valid = ir.Cmp("==", ir.slot(a.base), ir.slot(b.base))
            fields = ir.Cmp("==", ir.slots(a.base + 1, n - 1), ir.slots(b.base + 1, n - 1))
            return ir.And((valid, ir.Or((ir.Not(ir.slot(a.base)), fields))))
        elif isinstance(t, HeaderT):
            parts = [self.equal_code(member_storage(a, name), member_storage(b, name)) for name in t.fields]
        else:
            return ir.Cmp("==", ir.slot(a.base), ir.slot(b.base))
        return ir.And(tuple(parts)) if parts else ir.Const(True)

    def _x_TypeMember(self, e: ast.TypeMember, scope: Scope) -> ir.Expr:
        return ir.Const(e.value)

