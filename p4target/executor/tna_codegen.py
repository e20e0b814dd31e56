"""Code generation for TNA programs: six blocks over one state list, and Tofino's externs.

The ingress blocks and the egress blocks have their own header and metadata storage (a
Tofino egress pipeline sees only what the ingress deparser emitted); every intrinsic
metadata struct gets one storage that all blocks naming it share.  The generated module
defines ``ig_parse``, ``ingress``, ``ig_deparser``, ``eg_parse``, ``egress`` and
``eg_deparser``; ``tna_switch.TnaSwitch`` runs them with the traffic manager between.

Externs: ``RegisterAction.execute`` inlines the ``apply`` body on a copy of the cell
(read, apply, write back, return rv); ``Hash.get`` (IDENTITY, CRC16, CRC32),
``Checksum`` (a per-packet ones' complement sum), ``Counter``/``DirectCounter``.
The v1model path (codegen.CodeGen) is untouched: this is a subclass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..frontend import ast
from ..frontend.errors import P4Error, as_p4_errors
from ..frontend.tna import TNA_BLOCKS, TNA_EXTERNS
from ..frontend.types import BOOL, BitsT, ExternT, HeaderT, Type, bit_width
from ..p4info import qualify
from . import ir
from .codegen import CodeGen
from .exceptions import RegisterConflict
from .exprs import ExprGen
from .externs import Counter, Register
from .generated import Generated
from .ir import UNSET
from .packet_codegen import PacketGen
from .storage import Scope, Storage, member_storage

# Which storage each template parameter binds to, per block (tna.p4's parameter order).
SHAPES = {
    "ingress_parser": ["PKT", "IH", "IM", "ig_intr_md", "ig_tm_md", "ig_prsr_md"],
    "ingress": ["IH", "IM", "ig_intr_md", "ig_prsr_md", "ig_dprsr_md", "ig_tm_md"],
    "ingress_deparser": ["PKT", "IH", "IM", "ig_dprsr_md", "ig_intr_md"],
    "egress_parser": ["PKT", "EH", "EM", "eg_intr_md", "eg_prsr_md"],
    "egress": ["EH", "EM", "eg_intr_md", "eg_prsr_md", "eg_dprsr_md", "eg_oport_md"],
    "egress_deparser": ["PKT", "EH", "EM", "eg_dprsr_md", "eg_intr_md", "eg_prsr_md"],
}
FUNCTIONS = dict(zip(TNA_BLOCKS, ("ig_parse", "ingress", "ig_deparser", "eg_parse", "egress", "eg_deparser")))


class TnaRegister(Register):
    """``Register<T, I>(size[, initial])``: a struct T keeps a tuple of field values per cell."""

    def __init__(self, name: str, size: int, elem: Type, initial: Any, bit: int) -> None:
        super().__init__(name, size, elem)
        self.width = len(elem.fields) if isinstance(elem, HeaderT) else 1
        self.initial = initial
        self.bit = bit  # this register's bit in the per-packet access mask
        self.reset()

    def reset(self) -> None:
        self.cells[:] = [self.initial] * self.size


@dataclasses.dataclass
class RegisterActionObj:
    name: str
    register: TnaRegister
    reg_const: str  # the register's name in the generated module
    apply: ast.FunctionDecl
    scope: Scope  # the declaring control's: the apply body may read its headers and metadata


def csum_add(acc: int, data: bytes) -> int:
    """Ones' complement sum of ``acc`` and the 16-bit words of ``data`` (odd length: padded)."""
    if len(data) % 2:
        data += b"\0"
    total = acc + sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def csum_sub(acc: int, data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    words = [0xFFFF ^ int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]
    total = acc + sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _initial_cell(decl: ast.Instantiation, elem: Type) -> Any:
    """The initial value of every cell: the constructor's, else 0 (bf-p4c zeroes them)."""
    if isinstance(elem, HeaderT):
        if len(decl.args) > 1:
            items = decl.args[1].items if isinstance(decl.args[1], ast.ListExpr) else None
            if items is None or len(items) != len(elem.fields):
                raise P4Error(decl.args[1].loc, "a struct register's initial value must list every field")
            return tuple(int(i.value) if elem_t is not BOOL else bool(i.value)
                         for i, elem_t in zip(items, elem.fields.values()))
        return tuple(False if t is BOOL else 0 for t in elem.fields.values())
    if len(decl.args) > 1:
        return decl.args[1].value
    return False if elem is BOOL else 0


class TnaExprGen(ExprGen):
    """``ExprGen`` with TNA's externs' calls that have a value (``TnaCodeGen.tna_call``)."""

    def _x_Call(self, e: ast.Call, scope: Scope) -> ir.Expr:
        tgt = e.target
        if tgt.kind == "method" and tgt.decl.name in TNA_EXTERNS:
            code = self.env.gen.tna_call(e, scope)
            if code is None:
                raise P4Error(e.loc, f"{tgt.name}() has no value")
            return code
        return ir.lift(super()._x_Call(e, scope))


class TnaPacketGen(PacketGen):
    """``PacketGen`` with Tofino's parser: a select that no case matches is an error."""

    def no_match(self) -> ir.Stmt:
        """Tofino's parser flags a select that no case matches (``NoMatch``, the parser_err bit 0x1)."""
        return ir.Return(ir.Tuple((ir.Var("pos"), ir.Const(self.env.error_codes["NoMatch"]))))


class TnaCodeGen(CodeGen):
    """CodeGen for a ``Switch(Pipeline(...))`` program."""

    EXPRS = TnaExprGen
    PACKET = TnaPacketGen

    def __init__(self, prog: Any) -> None:
        super().__init__(prog)
        self.env.ns.update({"RegisterConflict": RegisterConflict, "csum_add": csum_add, "csum_sub": csum_sub,
                            "UNSET": UNSET})

    def hidden_slot(self, value: Any) -> int:
        self.env.template.append(value)
        return len(self.env.template) - 1

    @as_p4_errors()
    def generate(self) -> Generated:
        pipe = self.env.prog.pipeline
        self.env.out.std = {"packet_length": self.hidden_slot(0)}  # what counters count as bytes
        self.env.acc_slot = self.hidden_slot(0)  # registers executed so far for this packet (bit mask)
        bound = self.env.bound
        for which, t in (("IH", pipe.headers), ("IM", pipe.metadata), ("EH", pipe.egress_headers),
                         ("EM", pipe.egress_metadata)):
            bound[which] = self.alloc(t)
        self.env.out.meta_storage = bound["IM"]
        for role in TNA_BLOCKS:
            decl = pipe.blocks[role]
            scope = Scope(self.env.globals)
            for p, which in zip(decl.params, SHAPES[role]):
                if which == "PKT":
                    scope[p] = "PKT"
                    continue
                if which not in bound:
                    bound[which] = self.alloc(p.type)
                scope[p] = bound[which]
            if isinstance(decl, ast.ParserDecl):
                self.env.packet.parser(decl, scope, FUNCTIONS[role])
            else:
                self.control_function(FUNCTIONS[role], decl, scope)
        if "ig_tm_md" in bound:
            self.env.template[member_storage(bound["ig_tm_md"], "ucast_egress_port").base] = UNSET
        self.finish()
        return self.env.out

    def slot(self, which: str, fname: str) -> int | None:
        """The slot of an intrinsic metadata field, None if no block declares the struct."""
        st = self.env.bound.get(which)
        return None if st is None else member_storage(st, fname).base

    # ================================================================ instances
    def instance(self, decl: ast.Instantiation, scope: Scope, prefix: str) -> None:
        t = decl.type
        kind = t.decl.name if isinstance(t, ExternT) else None
        if kind not in TNA_EXTERNS:
            super().instance(decl, scope, prefix)
            return
        name = qualify(prefix, decl)
        if kind == "Register":
            elem = t.args[0]
            reg = TnaRegister(name, decl.args[0].value, elem, _initial_cell(decl, elem), len(self.env.out.registers))
            self.env.out.registers[name] = reg
            scope[decl] = self.const(reg, "X")
        elif kind == "RegisterAction":
            reg_const = self.lookup(scope, decl.args[0].decl)
            scope[decl] = RegisterActionObj(name, self.env.ns[reg_const], reg_const, decl.initializer[0], scope)
        elif kind == "Hash":
            algo = decl.args[0]
            scope[decl] = (algo.type.members[algo.value], t.args[0])
        elif kind == "Checksum":
            scope[decl] = Storage(self.hidden_slot(0), BitsT(16))  # the running sum, per packet
        elif kind == "Counter":
            counter = Counter(name, decl.args[0].value)
            self.env.out.counters[name] = counter
            scope[decl] = self.const(counter, "X")
        else:  # DirectCounter: the table that names it counts
            scope[decl] = name

    # ================================================================ calls
    def method(self, call: ast.Call, scope: Scope) -> None:
        if call.target.decl.name in TNA_EXTERNS:
            self.tna_call(call, scope)
        else:
            super().method(call, scope)

    def tna_call(self, call: ast.Call, scope: Scope) -> ir.Expr | None:
        tgt, args = call.target, call.args
        ext, m = tgt.decl.name, tgt.name
        obj = self.lookup(scope, tgt.instance.decl)
        if ext == "RegisterAction":
            return self.register_execute(obj, call, scope)
        if ext == "Hash":
            algo, width = obj
            data = ir.lift(self.hash_input(args[0], scope))
            if algo == "IDENTITY":
                bits = sum(_flat_width(a) for a in (args[0].items if isinstance(args[0], ast.ListExpr) else [args[0]]))
                return ir.bin_("&", ir.bin_(">>", ir.Call("int_of_bytes", (data,)), -bits % 8), width.mask)
            return ir.bin_("&", ir.Hash(algo.lower(), data), width.mask)
        if ext == "Checksum":
            acc = ir.slot(obj.base)
            if m in ("add", "subtract"):
                data = ir.lift(self.hash_input(args[0], scope))
                self.env.build.emit(ir.Assign(acc, ir.Call("csum_add" if m == "add" else "csum_sub", (acc, data))))
                return None
            if m == "get":
                return ir.bin_("^", 0xFFFF, acc)
            if m == "verify":
                return ir.cmp("==", acc, 0xFFFF)
            value: ir.Expr = ir.Call("csum16", (ir.lift(self.hash_input(args[0], scope)),))
            if len(args) > 1 and args[1].value:
                value = ir.Or((value, ir.Const(0xFFFF)))
            return value
        if ext == "Counter":
            i = ir.Var(self.fresh("i"))
            counter = ir.Obj(obj, self.env.ns[obj])
            length: ir.Expr = ir.slot(self.env.out.std["packet_length"])
            if len(args) > 1:
                length = ir.Call("max", (ir.bin_("-", length, ir.lift(self.env.exprs.ex(args[1], scope))), ir.Const(0)))
            self.env.build.emit(ir.Assign(i, ir.lift(self.env.exprs.ex(args[0], scope))))
            with self.env.build.if_(ir.cmp("<", i, counter.value.size)):
                self.env.build.emit(ir.AugAssign(ir.CounterCell(counter, "packets", i), "+", ir.Const(1)))
                self.env.build.emit(ir.AugAssign(ir.CounterCell(counter, "bytes", i), "+", length))
            return None
        return None  # DirectCounter.count(): the table counts its hits

    def register_execute(self, ra: RegisterActionObj, call: ast.Call, scope: Scope) -> ir.Expr:
        """Read the cell, run ``apply`` on it, write it back; the value is rv.  An index
        outside the register reads 0 and changes nothing (as this target's v1model registers)."""
        reg = ra.register
        params = ra.apply.proto.params
        value = self.alloc(params[0].type)
        rv = self.alloc(call.type) if isinstance(call.type, (BitsT, HeaderT)) or call.type is BOOL else None
        i = ir.Var(self.fresh("i"))
        cell = ir.RegCell(ir.Obj(ra.reg_const, reg), i)
        self.env.build.emit(ir.Assign(i, ir.lift(self.env.exprs.ex(call.args[0], scope))))
        if rv is not None:
            self.env.calls.init_out(rv)
        with self.env.build.if_(ir.cmp("<", i, reg.size)):
            acc = ir.slot(self.env.acc_slot)
            bit = 1 << reg.bit
            with self.env.build.if_(ir.bin_("&", acc, bit)):
                self.env.build.emit(ir.Raise(ir.Exc.REGISTER_CONFLICT, reg.name))
            self.env.build.emit(ir.AugAssign(acc, "|", ir.Const(bit)))
            n = value.size
            self.env.build.emit(ir.Assign(ir.slot(value.base) if n == 1 else ir.slots(value.base, n), cell))
            inner = Scope(ra.scope)
            inner[params[0]] = value
            if len(params) > 1:
                inner[params[1]] = rv if rv is not None else self.alloc(params[1].type)
            saved_ret, saved_slot = self.env.return_stmt, self.env.return_slot
            self.env.return_slot = None
            self.env.calls.run_body(ra.apply.body, inner, lambda: None, False)
            self.env.return_stmt, self.env.return_slot = saved_ret, saved_slot
            written = ir.slot(value.base) if n == 1 else ir.SlotsTuple(ir.slots(value.base, n))
            self.env.build.emit(ir.Assign(cell, written))
        return ir.slot(rv.base) if rv is not None else ir.Const(0)


def _flat_width(e: ast.Expr) -> int:
    t = e.type
    if isinstance(t, HeaderT):
        return sum(bit_width(f) for f in t.fields.values())
    return bit_width(t)
