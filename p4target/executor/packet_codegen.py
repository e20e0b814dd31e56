"""Code generation for what reads and writes the packet: parsers (states, transitions, ``extract``,
``advance``, ``lookahead``) and the deparser's ``emit``.

A pass of code generation (``env.GenEnv``); TNA's parser flags a select no case matches
(``tna_codegen.TnaPacketGen``).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ..frontend import ast
from ..frontend.errors import P4Error
from ..frontend.types import BOOL, BitsT, EnumT, HeaderT, StackT, Type, bit_width, wire_fields
from ..p4info import qualify
from . import ir
from .exprs import POS
from .storage import Scope, Storage, member_storage, slot_count

if TYPE_CHECKING:
    from .env import GenEnv

STATE = ir.Var("st")  # a parser's state number


class PacketGen:
    """Parsers and the deparser: the packet's bytes in and out."""

    def __init__(self, env: GenEnv) -> None:
        self.env = env

    # ---------------------------------------------------------------- parsers
    def parser(self, decl: ast.ParserDecl, scope: Scope, fname: str = "parse") -> None:
        """``fname``: TNA has two parsers."""
        self.env.gen.declare_locals(decl, scope, qualify("", decl))
        states = {s.name: i for i, s in enumerate(decl.states)}
        self.env.state_ids = states
        self.env.state_count, self.env.later_states = len(states), []  # sub-parser applies add states
        with self.env.build.define(fname, ir.Kind.PARSER):
            self.env.gen.init_locals(decl, scope)
            self.env.build.emit(ir.Assign(POS, ir.Const(0)))
            self.env.build.emit(ir.Assign(STATE, ir.Const(states["start"])))
            with self.env.build.loop():
                for i, state in enumerate(decl.states):
                    with (self.env.build.if_ if i == 0 else self.env.build.elif_)(ir.cmp("==", STATE, i)):
                        self.env.build.emit(ir.Comment(f"state {state.name}"))
                        self.env.subparsers.state_body(decl, state.stmts, state.transition, Scope(scope))
                self.env.subparsers.emit_later_states()

    def goto(self, state: str) -> None:
        if state not in self.env.state_ids:  # BMv2: an explicit reject ends parsing, no error
            self.env.build.emit(self.parser_return(0))  # (a sub-parser's accept is in state_ids: its caller goes on)
            return
        self.env.build.emit(ir.Assign(STATE, ir.Const(self.env.state_ids[state])))
        self.env.build.emit(ir.Continue())

    def parser_return(self, error: ir.Expr | int | str) -> ir.Return:
        """End parsing here with this error code (0: none)."""
        if isinstance(error, str):
            error = self.env.error_codes[error]
        return ir.Return(ir.Tuple((POS, ir.lift(error))))

    def transition(self, tr: ast.Transition, scope: Scope) -> None:
        if tr.select is None:
            self.goto(tr.state)
            return
        keys = []
        for e in tr.select:
            k = self.env.gen.temp("k")
            self.env.build.emit(ir.Assign(k, self.env.tables.key_expr(e, scope)))
            keys.append((k, e.type))
        first = True
        for case in tr.cases:
            conds: list[ir.Expr | None] = []
            keyset = case.keyset
            if len(keyset) == 1 and len(keys) > 1 and isinstance(keyset[0], ast.Default):
                keyset = keyset * len(keys)
            if len(keyset) == 1 and isinstance(getattr(keyset[0], "decl", None), ast.ValueSetDecl):
                conds.append(ir.VsetMatches(self.env.gen.obj(scope[keyset[0].decl]), tuple(k for k, _ in keys)))
            else:
                conds.extend(self.keyset_cond(ks, k, t) for ks, (k, t) in zip(keyset, keys))
            tests = [c for c in conds if c is not None]
            if not tests:  # matches everything: the last case that can be taken
                if first:
                    self.goto(case.state)
                else:
                    with self.env.build.else_():
                        self.goto(case.state)
                return
            branch = self.env.build.if_ if first else self.env.build.elif_
            with branch(tests[0] if len(tests) == 1 else ir.And(tuple(tests))):
                self.goto(case.state)
            first = False
        if first:
            self.env.build.emit(self.no_match())
        else:
            with self.env.build.else_():
                self.env.build.emit(self.no_match())

    def no_match(self) -> ir.Stmt:
        """A select that no case matches.  The spec says error.NoMatch; BMv2 (what p4c-bm2-ss emits has
        no transition for it) ends parsing with no error, the headers so far valid, and so do we."""
        return self.parser_return(0)

    def keyset_cond(self, ks: ast.Expr, k: ir.Var, t: Type) -> ir.Expr | None:
        """The test of one key against one keyset; None: it always matches."""
        if isinstance(ks, ast.Default):
            return None
        if isinstance(ks, ast.Mask):
            m = ks.mask.value
            return ir.cmp("==", ir.bin_("&", k, m), ks.base.value & m)
        if isinstance(ks, ast.Range):
            return ir.And((ir.cmp("<=", ks.lo.value, k), ir.cmp("<=", k, ks.hi.value)))
        return ir.cmp("==", k, int(ks.value))

    def extract(self, st: Storage, call: ast.Call, scope: Scope | None = None) -> None:
        t = st.type
        nbits = t.width
        if nbits % 8:
            raise P4Error(call.loc, f"header {t.name} is {nbits} bits: headers must be a whole number of bytes")
        if len(call.args) == 2:
            self.env.headers.extract_varbit(st, self.env.exprs.ex(call.args[1], scope))
            return
        n = nbits // 8
        self.need_bytes(n)
        fmt = _struct_format(t)
        first = st.base + 1
        if fmt is not None:
            unpack = ir.Unpack(self.env.gen.obj(self.env.gen.const(struct.Struct(fmt), "ST")), POS)
            self.env.build.emit(ir.Assign(ir.slots(first, len(wire_fields(t))), unpack))
        else:
            raw = ir.Var("_x")
            self.env.build.emit(ir.Assign(raw, ir.PacketInt(POS, ir.Const(n))))
            shift = nbits
            for i, ft in enumerate(wire_fields(t)):
                w = bit_width(ft)
                shift -= w
                val = ir.bin_("&", ir.bin_(">>", raw, shift) if shift else raw, (1 << w) - 1)
                self.env.build.emit(ir.Assign(ir.slot(first + i), self.from_raw(val, ft)))
        self.env.headers.mark_valid(st)
        self.env.build.emit(ir.AugAssign(POS, "+", ir.Const(n)))

    def need_bytes(self, n: ir.Expr | int) -> None:
        """Fewer than ``n`` bytes left: the parser ends with PacketTooShort."""
        with self.env.build.if_(ir.cmp("<", ir.bin_("-", ir.PacketLength(), POS), n)):
            self.env.build.emit(self.parser_return("PacketTooShort"))

    def from_raw(self, val: ir.Expr, t: Type) -> ir.Expr:
        if t is BOOL:
            return ir.Call("bool", (val,))
        signed = t.signed if isinstance(t, BitsT) else (isinstance(t, EnumT) and t.underlying.signed)
        if signed:
            half = 1 << (bit_width(t) - 1)
            return ir.bin_("-", ir.bin_("^", val, half), half)
        return val

    # ---------------------------------------------------------------- deparser
    def emit_header(self, st: Storage) -> None:
        t = st.type
        if isinstance(t, StackT):
            size = slot_count(t.elem)
            for i in range(t.size):
                self.emit_header(Storage(st.base + i * size, t.elem))
            return
        if not t.is_header:
            for name in t.fields:
                sub = member_storage(st, name)
                if isinstance(sub.type, (HeaderT, StackT)):
                    self.emit_header(sub)
            return
        if t.varbit_field is not None:
            self.env.headers.emit_varbit_header(st)
            return
        first = st.base + 1
        fmt = _struct_format(t)
        with self.env.build.if_(ir.slot(st.base)):
            if fmt is not None:
                packer = self.env.gen.obj(self.env.gen.const(struct.Struct(fmt), "ST"))
                self.env.build.emit(ir.Emit(ir.Pack(packer, ir.slots(first, len(wire_fields(t))))))
                return
            value: ir.Expr | None = None
            shift = t.width
            for i, ft in enumerate(wire_fields(t)):
                w = bit_width(ft)
                shift -= w
                part: ir.Expr = ir.bin_("&", ir.slot(first + i), (1 << w) - 1)
                part = ir.bin_("<<", part, shift) if shift else part
                value = part if value is None else ir.Bin("|", value, part)
            self.env.build.emit(ir.Emit(ir.ToBytes(value, ir.Const(t.width // 8))))

    def packet_in_method(self, call: ast.Call, scope: Scope) -> None:
        """``extract`` (into a header, a stack's next element or ``_``), ``advance``, ``lookahead``."""
        tgt, args = call.target, call.args
        target = args[0] if tgt.name == "extract" else None
        nxt = target if isinstance(target, ast.Member) and target.member != "next" else None
        nxt = nxt.base if nxt is not None and isinstance(nxt.base.type, HeaderT) else target  # s.next.member
        if isinstance(nxt, ast.Member) and nxt.member == "next" and isinstance(nxt.base.type, StackT):
            stack = self.env.headers.pin(self.env.gen.storage(nxt.base, scope))
            nx = ir.slot(self.env.headers.stack_next_slot(stack))
            with self.env.build.if_(ir.cmp(">=", nx, stack.type.size)):
                self.env.build.emit(self.parser_return("StackOutOfBounds"))
            elem = self.env.headers.stack_next(stack)
            self.extract(elem if nxt is target else member_storage(elem, target.member), call, scope)
            self.env.build.emit(ir.AugAssign(nx, "+", ir.Const(1)))
        elif tgt.name == "extract" and isinstance(args[0], ast.Default):
            self.extract(self.env.gen.alloc(args[0].type), call, scope)  # `_`: as p4c, into a temporary
        elif tgt.name == "extract":
            self.extract(self.env.headers.pin(self.env.gen.storage(args[0], scope)), call, scope)
        elif tgt.name == "advance":
            bits = self.env.exprs.ex(args[0], scope)
            if args[0].value is None or args[0].value % 8:  # BMv2: not whole bytes is an error
                with self.env.build.if_(ir.bin_("%", bits, 8)):
                    self.env.build.emit(self.parser_return("ParserInvalidArgument"))
            self.need_bytes(ir.bin_("//", bits, 8))
            self.env.build.emit(ir.AugAssign(POS, "+", ir.bin_("//", bits, 8)))
        elif tgt.name == "lookahead":  # its value unused: p4c-bm2-ss still reads it (a temporary),
            if isinstance(call.type, HeaderT):  # so a short packet is still PacketTooShort
                self.env.exprs.lookahead_header(call)
            else:
                self.env.exprs.lookahead_bits(call.type)


def _struct_format(t: HeaderT) -> str | None:
    """A struct format for headers whose fields are all whole bytes (the fast path)."""
    codes = {8: "b", 16: "h", 32: "i", 64: "q"}
    fmt = ">"
    for ft in wire_fields(t):
        if not isinstance(ft, BitsT) or ft.width not in codes:
            return None
        c = codes[ft.width]
        fmt += c if ft.signed else c.upper()
    return fmt
