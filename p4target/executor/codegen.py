"""Translate a checked v1model program into the executor's representation (``ir``), once, at load time.

This is the one place that knows P4's semantics: it builds an ``ir.Module``, which ``python.py``
prints as the Python the switch runs (the reference) and ``native/lower.py`` prints as C, plus
the runtime objects (tables, registers ...) the code names (``generated.Generated``).  ``CodeGen``
is the main pass; it shares an environment (``env.GenEnv``) with the others (expressions, tables,
parsers and deparser, headers, calls, sub-parsers, the builder).

Every variable of the pipeline (headers, metadata, standard_metadata, locals, action
parameters) gets a fixed slot in one flat list ``S``, so a field access is a constant
list index and a packet's whole state is copied with ``S.copy()``.  Controls and directly
called actions are inlined at their call sites with their parameters bound to the
arguments' slots; actions run by tables become one function each.  The module defines
``parse``, ``verify_checksum``, ``ingress``, ``egress``, ``compute_checksum`` and
``deparse``; ``switch.Switch`` runs them.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from ..frontend import ast
from ..frontend.checker import PIPELINE_BLOCKS, CheckedProgram
from ..frontend.errors import P4Error, as_p4_errors
from ..frontend.types import (
    BOOL,
    ActionRunT,
    BitsT,
    ExternT,
    HeaderT,
    StackT,
    TupleT,
    Type,
    VarbitT,
    bit_width,
)
from ..p4info import qualify
from . import ir, loops, python
from . import profile_codegen as apgen
from . import v1model_codegen as v1m
from .calls import CallGen, may_exit
from .env import GenEnv
from .exprs import ExprGen
from .externs import Counter, Register, ValueSet
from .generated import Generated, compiled
from .headers import HeaderOps, contains_header
from .packet_codegen import PacketGen
from .storage import Scope, Storage, member_storage, slot_count
from .subparsers import SubParserGen
from .table_codegen import TableGen


def _initial(t: Type, out: list) -> None:
    if isinstance(t, HeaderT):
        if t.is_header:
            out.append(False)
        for ft in t.fields.values():
            _initial(ft, out)
    elif isinstance(t, StackT):
        for _ in range(t.size):
            _initial(t.elem, out)
        out.append(0)  # next index
    elif isinstance(t, VarbitT):
        out.append(b"")
    else:
        out.append(False if t is BOOL else 0)


@dataclass
class _ControlInstance:
    """A control instantiated inside another (or a sub-parser in a parser): its own
    parameter slots and objects."""

    decl: ast.ControlDecl | ast.ParserDecl
    scope: Scope
    params: list[Storage | None]  # None: a sub-parser's packet_in
    name: str = ""


class CodeGen:
    """The main pass: the program, its controls and statements.
    ``CodeGen(prog).generate()`` is the whole code generation; the other passes are ``self.env``'s."""

    EXPRS: type[ExprGen] = ExprGen  # the expressions pass (TNA's has its externs)
    PACKET: type[PacketGen] = PacketGen  # parsers and deparser (TNA's flags a select no case matches)

    def __init__(self, prog: CheckedProgram) -> None:
        self.env = GenEnv(prog, self, HeaderOps, CallGen, SubParserGen, self.EXPRS, TableGen, self.PACKET)

    # ================================================================ plumbing
    def fresh(self, stem: str) -> str:
        self.env.counter += 1
        return f"_{stem}{self.env.counter}"

    def const(self, value: Any, stem: str = "K") -> str:
        name = self.fresh(stem)
        self.env.ns[name] = value
        return name

    def obj(self, name: str) -> ir.Obj:
        """The node naming a runtime object ``const`` bound."""
        return ir.Obj(name, self.env.ns[name])

    def temp(self, stem: str) -> ir.Var:
        return ir.Var(self.fresh(stem))

    def run(self, code: types.CodeType) -> None:
        """Define generated functions in the namespace; ``Generated.copy`` runs the same code again."""
        exec(code, self.env.ns)  # noqa: S102 - compiler output
        self.env.out.code.append(code)

    def alloc(self, t: Type) -> Storage:
        st = Storage(len(self.env.template), t)
        _initial(t, self.env.template)
        return st

    # ================================================================ the program
    @as_p4_errors()
    def generate(self) -> Generated:
        pipe = self.env.prog.pipeline
        hdr = self.alloc(pipe.headers)
        meta = self.alloc(pipe.metadata)
        std = self.alloc(self.env.prog.standard_metadata)
        self.env.std_storage = std
        self.env.out.meta_storage = meta
        self.env.out.std = {name: member_storage(std, name).base for name in self.env.prog.standard_metadata.fields}
        bound = {"H": hdr, "M": meta, "S": std}
        self.declare_globals()
        shapes = {  # which pipeline storage each block parameter is bound to
            "parser": [None, "H", "M", "S"], "verify_checksum": ["H", "M"], "ingress": ["H", "M", "S"],
            "egress": ["H", "M", "S"], "compute_checksum": ["H", "M"], "deparser": [None, "H"],
        }
        for role in PIPELINE_BLOCKS:
            decl = self.env.prog.pipeline.blocks[role]
            scope = Scope(self.env.globals)
            for p, which in zip(decl.params, shapes[role]):
                scope[p] = bound[which] if which else "PKT"
            if role == "parser":
                self.env.packet.parser(decl, scope)
            else:
                self.control_function(role, decl, scope)
        self.finish()
        return self.env.out

    def finish(self) -> None:
        """Define the blocks' and applies' functions (the actions are defined as their tables are built)."""
        self.env.build.module.template = self.env.template
        rest = ir.Module([f for f in self.env.build.module.functions if f.kind is not ir.Kind.ACTION])
        self.run(compiled(python.module(rest), f"<p4 {self.env.prog.program.loc.file}>"))
        self.env.out.module = self.env.build.module
        self.env.out.source = python.module(self.env.build.module)

    # ================================================================ controls
    def control_function(self, role: str, decl: ast.ControlDecl, scope: Scope) -> None:
        self.declare_locals(decl, scope, qualify("", decl))
        kind = ir.Kind.DEPARSER if role.endswith("deparser") else ir.Kind.CONTROL
        with self.env.build.define(role, kind):
            with self.env.build.try_exit():
                self.init_locals(decl, scope)
                self.stmt(decl.body, scope)
            with self.env.build.on_exit():
                pass

    def declare_globals(self) -> None:
        """Extern instances declared at the top level (``register<bit<8>>(4) r;``): one object,
        named without a block prefix and shared by every block that uses it, as with p4c."""
        for d in self.env.prog.top_level:
            if isinstance(d, ast.Instantiation) and isinstance(d.type, ExternT):
                self.instance(d, self.env.globals, "")

    def declare_locals(self, decl: ast.ControlDecl | ast.ParserDecl, scope: Scope, prefix: str) -> None:
        """Bind an instance's own declarations once: variables get slots, externs and
        tables become runtime objects, actions get their qualified names."""
        for local in decl.locals:
            if isinstance(local, ast.ActionDecl):
                scope[local] = qualify(prefix, local)
        for local in decl.locals:
            if isinstance(local, ast.VarDecl):
                scope[local] = self.alloc(local.type)
            elif isinstance(local, ast.Instantiation):
                self.instance(local, scope, prefix)
            elif isinstance(local, ast.TableDecl):
                self.env.tables.table(local, scope, prefix)
            elif isinstance(local, ast.ValueSetDecl):
                t = local.type
                widths = [bit_width(f) for f in (t.fields.values() if isinstance(t, HeaderT) else [t])]
                vs = ValueSet(qualify(prefix, local), local.size.value, widths)
                self.env.out.value_sets[vs.name] = vs
                scope[local] = self.const(vs, "VS")

    def init_locals(self, decl: ast.ControlDecl | ast.ParserDecl, scope: Scope) -> None:
        """Per invocation: local variables start from their initializers."""
        for local in decl.locals:
            if isinstance(local, ast.VarDecl) and local.init is not None:
                self.assign_storage(scope[local], local.init, scope)

    def instance(self, decl: ast.Instantiation, scope: Scope, prefix: str) -> None:
        t = decl.type
        name = qualify(prefix, decl)
        if isinstance(t, BitsT) or not hasattr(t, "decl"):
            raise P4Error(decl.loc, f"cannot instantiate {t}")
        kind = t.decl.name
        if kind == "register":
            obj: Any = Register(name, decl.args[0].value, t.args[0])
            self.env.out.registers[name] = obj
        elif kind == "counter":
            obj = Counter(name, decl.args[0].value)
            self.env.out.counters[name] = obj
        elif kind == "direct_counter":
            obj = name  # counted by the table that names it; see table()
        elif kind in ("meter", "direct_meter"):
            obj = v1m.meter_instance(self.env, decl, name)
            self.env.out.meters[name] = obj
        elif kind in ("action_profile", "action_selector"):
            obj = apgen.profile_instance(decl, name)
            self.env.out.profiles[name] = obj
        elif isinstance(t.decl, (ast.ControlDecl, ast.ParserDecl)):
            inner = Scope(self.env.globals)
            for passed in t.decl.instance_args.values():  # a control passed as a constructor argument
                inner[passed] = self.lookup(scope, passed)
            params: list[Storage | None] = []
            for p in t.decl.params:
                if isinstance(t.decl, ast.ParserDecl) and isinstance(p.type, ExternT):
                    inner[p] = "PKT"  # bound per apply (subparsers.py)
                    params.append(None)
                    continue
                inner[p] = self.alloc(p.type)
                params.append(inner[p])
            self.declare_locals(t.decl, inner, name)
            scope[decl] = _ControlInstance(t.decl, inner, params, name)
            return
        else:
            raise P4Error(decl.loc, f"cannot instantiate {kind}")
        scope[decl] = self.const(obj, "X")

    def var_decl(self, decl: ast.VarDecl, scope: Scope) -> None:
        st = self.alloc(decl.type)
        scope[decl] = st
        if decl.init is not None:
            self.assign_storage(st, decl.init, scope)

    # ================================================================ statements
    def stmt(self, s: ast.Stmt, scope: Scope) -> None:
        indexes = [] if self.env.action_depth else _guarded_indexes(s)
        if indexes:
            self.guarded(s, scope, indexes)
        else:
            self.plain_stmt(s, scope)

    def guarded(self, s: ast.Stmt, scope: Scope, indexes: list[tuple[ast.Expr, int]]) -> None:
        """A statement of an apply block or parser state that names a header stack element at a
        run-time index runs only when each such index is within its stack (``if`` takes its else
        branch), as p4c's HSIndexSimplifier rewrites it (p4test; p4c-bm2-ss 1.2.5 does not run
        that pass, and simple_switch aborts on the index: tests/p4/builtin_only/
        stack_index_range.p4).  Each index is read once, before the statement."""
        saved = dict(self.env.index_temps)
        conds: list[ir.Expr] = []
        for ix, size in indexes:
            var = self.temp("ix")
            self.env.build.emit(ir.Assign(var, self.env.exprs.ex(ix, scope)))
            self.env.index_temps[id(ix)] = var
            conds += [ir.cmp(">=", var, 0), ir.cmp("<", var, size)]
        if isinstance(s, ast.If):
            with self.env.build.if_(ir.And((*conds, self.env.exprs.ex(s.cond, scope)))):
                self.block(s.then, scope)
            if s.other is not None:
                with self.env.build.else_():
                    self.block(s.other, scope)
        else:
            with self.env.build.if_(ir.And(tuple(conds))):
                self.plain_stmt(s, scope)
        self.env.index_temps = saved

    def plain_stmt(self, s: ast.Stmt, scope: Scope) -> None:
        if isinstance(s, ast.Block):
            inner = Scope(scope)
            for x in s.stmts:
                self.stmt(x, inner)
        elif isinstance(s, ast.Assign):
            self.assign(s.lhs, s.rhs, scope)
        elif isinstance(s, ast.CallStmt):
            self.call_stmt(s.call, scope)
        elif isinstance(s, ast.If):
            with self.env.build.if_(self.env.exprs.ex(s.cond, scope)):
                self.block(s.then, scope)
            if s.other is not None:
                with self.env.build.else_():
                    self.block(s.other, scope)
        elif isinstance(s, ast.Switch):
            self.switch(s, scope)
        elif isinstance(s, ast.VarDecl):
            self.var_decl(s, scope)
        elif isinstance(s, (ast.ConstDecl, ast.Empty)):
            pass
        elif isinstance(s, ast.Exit):
            self.env.build.emit(ir.Raise(ir.Exc.EXIT))
        elif isinstance(s, ast.Return):
            self.env.calls.return_value(s, scope)
            self.env.build.emit(self.env.return_stmt)
        elif isinstance(s, (ast.For, ast.ForIn)):
            loops.emit_loop(self.env, s, scope)
        elif isinstance(s, ast.Break):
            self.env.build.emit(ir.Break())
        elif isinstance(s, ast.Continue):
            self.env.build.emit(ir.Continue())
        else:
            raise P4Error(s.loc, f"{type(s).__name__} cannot be executed")

    def block(self, s: ast.Stmt, scope: Scope) -> None:
        """A nested statement, in the block just opened."""
        self.stmt(s, Scope(scope))

    def switch(self, s: ast.Switch, scope: Scope) -> None:
        """An if/elif chain over the labels, on `t.apply().action_run` or on a value;
        fall-through labels join the next case that has a body."""
        t = s.subject.type
        subject = self.temp("sw")
        if isinstance(t, ActionRunT):
            self.env.build.emit(ir.Assign(subject, ir.ApplyAction(self.env.exprs.ex(s.subject.base, scope))))
            names = {ref.decl.name: scope[ref.decl] for ref in t.table.actions}
            label_code = lambda label: ir.Const(names[label])  # noqa: E731
        else:
            self.env.build.emit(ir.Assign(subject, self.env.exprs.ex(s.subject, scope)))
            label_code = lambda label: ir.Const(label.value)  # noqa: E731
        pending: list[Any] = []
        first = True
        default_body = None
        for case in s.cases:
            pending += case.labels
            if case.body is None:
                continue
            if "default" in pending:
                default_body = case.body
            else:
                tests = [ir.Cmp("==", subject, label_code(label)) for label in pending]
                branch = self.env.build.if_ if first else self.env.build.elif_
                with branch(tests[0] if len(tests) == 1 else ir.Or(tuple(tests))):
                    self.block(case.body, scope)
                first = False
            pending = []
        if default_body is not None:
            if first:
                self.stmt(default_body, Scope(scope))
            else:
                with self.env.build.else_():
                    self.block(default_body, scope)

    # ---------------------------------------------------------------- assignment
    def storage(self, e: ast.Expr, scope: Scope) -> Storage:
        """The slots an lvalue-like expression (path, member, constant index) names."""
        if isinstance(e, ast.PathExpr):
            st = self.lookup(scope, e.decl)
            if not isinstance(st, Storage):
                raise P4Error(e.loc, f"'{e.name}' has no storage")
            return st
        if isinstance(e, ast.Member):
            base = self.storage(e.base, scope)
            if isinstance(base.type, StackT):
                if e.member == "last":
                    return self.env.headers.stack_last(base)
                raise P4Error(e.loc, f"header stack '.{e.member}' outside extract is not supported by the "
                              "built-in target")
            return member_storage(base, e.member)
        if isinstance(e, ast.ListExpr):  # `{a, b}` as a value (an argument, a tuple): a temporary
            st = self.alloc(e.type)
            self.assign_storage(st, e, scope)
            return st
        if isinstance(e, ast.Index) and isinstance(e.base.type, TupleT):  # t[i], i constant (checker)
            return member_storage(self.storage(e.base, scope), f"f{e.index.value}")
        if isinstance(e, ast.Index):
            base = self.storage(e.base, scope)
            t = base.type
            assert isinstance(t, StackT)
            if e.index.value is None:
                index = self.env.index_temps.get(id(e.index)) or self.env.exprs.ex(e.index, scope)
                return self.env.headers.element(base, index)
            return Storage(base.base + e.index.value * slot_count(t.elem), t.elem)
        if isinstance(e, ast.Call) and e.target.kind == "user_function":
            return self.env.calls.user_call(e, scope)
        if isinstance(e, ast.Call) and e.target.kind == "method" and e.target.name == "lookahead":
            return self.env.exprs.lookahead_header(e)
        raise P4Error(e.loc, "expected a variable, field or header")

    def lookup(self, scope: Scope, decl: Any) -> Any:
        try:
            return scope[decl]
        except KeyError:
            raise P4Error(decl.loc, f"'{decl.name}' is not available here (internal)") from None

    def assign(self, lhs: ast.Expr, rhs: ast.Expr, scope: Scope) -> None:
        if isinstance(lhs, ast.Slice):
            base = self.storage(lhs.base, scope)
            hi, lo = lhs.hi.value, lhs.lo.value
            m = ((1 << (hi - lo + 1)) - 1) << lo
            bt = base.type
            keep = bt.mask & ~m
            val: ir.Expr = ir.Bin("|", ir.bin_("&", ir.slot(base.base), keep),
                                  ir.bin_("&", ir.bin_("<<", self.env.exprs.ex(rhs, scope), lo), m))
            if bt.signed:
                val = self.env.exprs.wrap_code(val, bt)
            self.env.build.emit(ir.Assign(ir.slot(base.base), val))
            return
        self.assign_storage(self.storage(lhs, scope), rhs, scope)

    def assign_storage(self, st: Storage, rhs: ast.Expr, scope: Scope) -> None:
        n = st.size
        if isinstance(rhs, ast.ListExpr) and isinstance(st.type, HeaderT):
            if st.type.is_header:
                self.env.headers.mark_valid(st)
            for name, item in zip(st.type.fields, rhs.items):
                self.assign_storage(member_storage(st, name), item, scope)
            return
        if contains_header(st.type):
            self.env.headers.copy_value(st, self.storage(rhs, scope))
        elif isinstance(st.type, (HeaderT, StackT)):
            src = self.storage(rhs, scope)
            self.env.build.emit(ir.Assign(ir.slots(st.base, n), ir.slots(src.base, n)))
        else:
            self.env.build.emit(ir.Assign(ir.slot(st.base), self.env.exprs.ex(rhs, scope)))

    # ---------------------------------------------------------------- calls
    def call_stmt(self, call: ast.Call, scope: Scope) -> None:
        tgt = call.target
        if tgt.kind == "action":
            self.env.action_depth += 1
            self.env.calls.inline(tgt.decl.params, call.args, tgt.decl.body, scope, Scope(scope))
            self.env.action_depth -= 1
        elif tgt.kind == "table_apply":
            self.env.build.emit(ir.Do(ir.Apply(self.lookup(scope, tgt.decl))))
        elif tgt.kind == "block_apply":
            self.apply_control(self.lookup(scope, tgt.decl), call.args, scope)
        elif tgt.kind == "header_method":
            st = self.storage(tgt.instance, scope)
            v1m.length_register_update(self.env, st, tgt.name == "setValid")
            if tgt.name == "setValid":
                self.env.headers.set_valid(st)
            elif tgt.name == "setInvalid":
                self.env.headers.set_invalid(st)
        elif tgt.kind == "stack_method":
            self.env.headers.stack_shift(self.storage(tgt.instance, scope), tgt.name == "push_front",
                                         call.args[0].value)
        elif tgt.kind == "function":
            self.function(call, scope)
        elif tgt.kind == "method":
            self.method(call, scope)
        elif tgt.kind == "user_function":
            self.env.calls.user_call(call, scope)
        else:
            raise P4Error(call.loc, f"cannot call {tgt.kind}")

    def apply_control(self, inst: _ControlInstance, args: list[ast.Expr], scope: Scope) -> None:
        """Copy-in, run the body inline, copy-out (also after an exit): the instance's
        tables read its own slots."""
        outs = []
        for p, st, a in zip(inst.decl.params, inst.params, args):
            if isinstance(a, ast.Default):
                self.env.calls.init_out(st)
            elif p.direction == "out":
                self.env.calls.init_out(st)
                pinned = self.env.headers.pin(self.storage(a.base if isinstance(a, ast.Slice) else a, scope))
                outs.append((st, a, pinned))
            elif p.direction in ("in", "inout", ""):
                if p.direction == "inout":  # the l-value is fixed at the call (spec 6.8)
                    pinned = self.env.headers.pin(self.storage(a.base if isinstance(a, ast.Slice) else a, scope))
                    outs.append((st, a, pinned))
                self.assign_storage(st, a, scope)
        self.init_locals(inst.decl, inst.scope)

        def copy_out() -> None:
            for st, a, dst in outs:
                self.env.calls.copy_back(st, a, scope, dst)
        self.env.calls.run_body(inst.decl.body, Scope(inst.scope), copy_out, bool(outs) and may_exit(inst.decl))

    def function(self, call: ast.Call, scope: Scope) -> None:
        name, args = call.target.name, call.args
        std = self.env.out.std
        if name == "static_assert":
            return  # decided by the checker, at load time
        if name == "mark_to_drop":
            st = self.storage(args[0], scope)
            self.env.build.emit(ir.Assign(ir.slot(member_storage(st, "egress_spec").base), ir.Const(511)))
            self.env.build.emit(ir.Assign(ir.slot(member_storage(st, "mcast_grp").base), ir.Const(0)))
        elif name == "verify":
            with self.env.build.if_(ir.Not(self.env.exprs.ex(args[0], scope))):
                self.env.build.emit(self.env.packet.parser_return(self.env.exprs.ex(args[1], scope)))
        elif name == "hash":
            result = self.storage(args[0], scope)
            algo = args[1].type.members[args[1].value]
            data = self.hash_input(args[3], scope)
            base, size = self.env.exprs.ex(args[2], scope), self.env.exprs.ex(args[4], scope)
            value = ir.Call("hash_offset", (ir.Hash(algo), data, base, size))
            self.env.build.emit(ir.Assign(ir.slot(result.base), self.env.exprs.wrap_code(value, result.type)))
        elif name in ("verify_checksum", "update_checksum"):
            target = self.storage(args[2], scope)
            data = self.hash_input(args[1], scope)
            cond = self.env.exprs.ex(args[0], scope)
            checksum = ir.Call("csum16", (data,))
            if name == "verify_checksum":
                with self.env.build.if_(ir.And((cond, ir.Cmp("!=", checksum, ir.slot(target.base))))):
                    self.env.build.emit(ir.Assign(ir.slot(std["checksum_error"]), ir.Const(1)))
            else:
                with self.env.build.if_(cond):
                    self.env.build.emit(ir.Assign(ir.slot(target.base), checksum))
        elif name in v1m.V1MODEL_FUNCTIONS:
            v1m.v1model_function(self.env, call, scope)
        else:
            raise P4Error(call.loc, f"{name} is not supported")

    def hash_input(self, data: ast.Expr, scope: Scope) -> ir.Expr:
        """The byte string BMv2 would hash: fields of invalid headers are skipped,
        a varbit field (checksums only) adds the bits it was extracted with."""
        flat: list[tuple[ir.Expr, ir.Expr, ir.Expr | None]] = []

        def add(code: ir.Expr, t: Type, valid: ir.Expr | None) -> None:
            if isinstance(t, VarbitT):  # the slot holds the extracted bytes
                length = ir.MethodCall(ir.Name("len"), (code,))
                flat.append((ir.Call("int_of_bytes", (code,)), ir.bin_("*", length, 8), valid))
            else:
                value = ir.Select(code, ir.Const(1), ir.Const(0)) if t is BOOL else code
                flat.append((value, ir.Const(bit_width(t)), valid))

        def add_fields(st: Storage, valid: ir.Expr | None) -> None:
            """A header's fields, each present only while the header is valid; a struct's,
            tuple's or union's fields in order (p4c-bm2-ss's field lists flatten them)."""
            t = st.type
            if isinstance(t, HeaderT):
                inner = ir.slot(st.base) if t.is_header else valid
                for fname in t.fields:
                    add_fields(member_storage(st, fname), inner)
            else:
                add(ir.slot(st.base), t, valid)

        def add_item(item: ast.Expr) -> None:
            if isinstance(item, ast.ListExpr):
                for x in item.items:
                    add_item(x)
            elif isinstance(item.type, HeaderT):
                add_fields(self.storage(item, scope), None)
            else:
                valid = None
                if isinstance(item, ast.Member) and isinstance(item.base.type, HeaderT) and item.base.type.is_header:
                    valid = ir.slot(self.storage(item.base, scope).base)
                add(self.env.exprs.ex(item, scope), item.type, valid)

        add_item(data)
        guards = {v for _, _, v in flat}
        widths = ir.Tuple(tuple(w for _, w, _ in flat))
        if guards <= {None} or len(guards) == 1:
            packed = ir.Call("pack_bits", (ir.Tuple(tuple(c for c, _, _ in flat)), widths))
            guard = next(iter(guards))
            return packed if guard is None else ir.Select(guard, packed, ir.Const(b""))
        values = tuple(c if v is None else ir.Select(v, c, ir.Const(None)) for c, _, v in flat)
        return ir.Call("pack_bits", (ir.Tuple(values), widths))

    def method(self, call: ast.Call, scope: Scope) -> None:
        """A v1model extern method call as a statement (packet_in/out, register, counter, meter)."""
        tgt, args = call.target, call.args
        ext = tgt.decl.name
        if ext == "packet_in":
            self.env.packet.packet_in_method(call, scope)
            return
        if ext == "packet_out":
            self.env.packet.emit_header(self.storage(args[0], scope))
            return
        obj = self.lookup(scope, tgt.instance.decl)
        if ext == "register":
            self.register_method(self.obj(obj), call, scope)
        elif ext == "counter":
            counter = self.obj(obj)
            i = self.temp("i")
            self.env.build.emit(ir.Assign(i, self.env.exprs.ex(args[0], scope)))
            with self.env.build.if_(ir.cmp("<", i, counter.value.size)):
                self.count(counter, i, ir.slot(self.env.out.std["packet_length"]))
        elif ext in ("meter", "direct_meter"):
            v1m.meter_method(self.env, call, scope, obj)
        # direct_counter.count(): the table counts its hits itself

    def register_method(self, reg: ir.Obj, call: ast.Call, scope: Scope) -> None:
        """``read`` and ``write``: an index outside the register reads 0 and writes nothing (BMv2)."""
        tgt, args = call.target, call.args
        size = reg.value.size
        if tgt.name == "read":
            dst = self.storage(args[0], scope)
            idx = self.env.exprs.ex(args[1], scope)
            value: ir.Expr
            if args[1].value is not None:
                value = ir.RegCell(reg, idx) if idx_in(args[1].value, size) else ir.Const(0)
            else:
                i = self.temp("i")
                self.env.build.emit(ir.Assign(i, idx))
                value = ir.Select(ir.cmp("<", i, size), ir.RegCell(reg, i), ir.Const(0))
            self.env.build.emit(ir.Assign(ir.slot(dst.base), value))
        else:
            idx, value = self.env.exprs.ex(args[0], scope), self.env.exprs.ex(args[1], scope)
            if args[0].value is not None:
                if idx_in(args[0].value, size):
                    self.env.build.emit(ir.Assign(ir.RegCell(reg, idx), value))
            else:
                i = self.temp("i")
                self.env.build.emit(ir.Assign(i, idx))
                with self.env.build.if_(ir.cmp("<", i, size)):
                    self.env.build.emit(ir.Assign(ir.RegCell(reg, i), value))

    def count(self, counter: ir.Obj, index: ir.Expr, length: ir.Expr) -> None:
        """An indexed counter counts a packet of ``length`` bytes."""
        self.env.build.emit(ir.AugAssign(ir.CounterCell(counter, "packets", index), "+", ir.Const(1)))
        self.env.build.emit(ir.AugAssign(ir.CounterCell(counter, "bytes", index), "+", length))


def _guarded_indexes(s: ast.Stmt) -> list[tuple[ast.Expr, int]]:
    """The run-time stack indexes HSIndexSimplifier would guard in this statement, with their stack
    sizes: anywhere in an assignment or call statement, in an if's condition or a switch's subject."""
    if isinstance(s, (ast.Assign, ast.CallStmt)):
        roots: list[Any] = [s]
    elif isinstance(s, ast.If):
        roots = [s.cond]
    elif isinstance(s, ast.Switch):
        roots = [s.subject]
    else:
        return []
    found: list[tuple[ast.Expr, int]] = []
    while roots:
        node = roots.pop()
        if isinstance(node, ast.Index) and node.index.value is None and isinstance(node.base.type, StackT):
            found.append((node.index, node.base.type.size))
        roots += list(ast.children(node))
    return found[::-1]


def idx_in(i: int, size: int) -> bool:
    return 0 <= i < size


def _contains_return(s: Any) -> bool:
    if isinstance(s, (ast.For, ast.ForIn)):
        return loops.contains_return(s)
    if isinstance(s, ast.Return):
        return True
    if isinstance(s, ast.Block):
        return any(_contains_return(x) for x in s.stmts)
    if isinstance(s, ast.If):
        return _contains_return(s.then) or (s.other is not None and _contains_return(s.other))
    if isinstance(s, ast.Switch):
        return any(c.body is not None and _contains_return(c.body) for c in s.cases)
    return False

