"""Code generation for tables: their runtime ``tables.Table`` objects, keys, entries and actions,
and the apply function of a table without an action profile (``profile_codegen`` has the others).

A pass of code generation (``env.GenEnv``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frontend import ast
from ..frontend.types import BOOL, ERROR, BitsT, EnumT, Type, bit_width
from ..p4info import key_name, qualify
from . import ir, python
from . import profile_codegen as apgen
from . import v1model_codegen as v1m
from .generated import compiled
from .profiles import IndirectTable
from .storage import Scope
from .tables import DONT_CARE, ActionSpec, KeySpec, Table, exact, lpm, ternary, value_range

if TYPE_CHECKING:
    from .env import GenEnv


class TableGen:
    """Tables: one ``Table`` object and one apply function each."""

    def __init__(self, env: GenEnv) -> None:
        self.env = env

    def table(self, t: ast.TableDecl, scope: Scope, prefix: str) -> None:
        name = qualify(prefix, t)
        matched = [k for k in t.keys if k.match_kind != "selector"]  # selector keys are hashed (profiles.py)
        keys = [KeySpec(key_name(k), k.match_kind, _key_width(k.expr.type)) for k in matched]
        specs = []
        for ref in t.actions:
            fn = self.table_action(ref, scope)
            params = tuple((p.name, bit_width(p.type)) for p in ref.decl.params if not p.direction)
            scope_kind = ("default_only" if ast.find_annotation(ref.annotations, "defaultonly")
                          else "table_only" if ast.find_annotation(ref.annotations, "tableonly")
                          else "table_and_default")
            specs.append(ActionSpec(scope[ref.decl], fn, params, scope_kind))
        size = t.properties["size"].value if "size" in t.properties else 1024
        default = t.default_action
        default_args = tuple(int(a.value) for a, p in zip(default.args or [], default.decl.params) if not p.direction)
        counters = t.properties.get("counters")
        profile = apgen.table_profile(self.env, t, scope, name)
        if profile is not None:
            table: Table = IndirectTable(name, keys, specs, size, (scope[default.decl], default_args), profile,
                                         default_is_const=t.default_is_const)
        else:
            table = Table(name, keys, specs, size, (scope[default.decl], default_args),
                          default_is_const=t.default_is_const, is_const=t.entries is not None and t.entries_const,
                          has_direct_counter=counters is not None)
        for i, entry in enumerate(t.entries or []):
            match = [self.entry_match(ks, k) for ks, k in zip(entry.keyset, keys)]
            args = [int(a.value) for a, p in zip(entry.action.args or [], entry.action.decl.params) if not p.direction]
            prio = 0
            if table.needs_priority:
                prio = entry.priority.value if entry.priority is not None else len(t.entries) - i
            table.add(match, scope[entry.action.decl], args, prio, const_ok=True)
        self.env.out.tables[name] = table
        tname = self.env.gen.const(table, "T")
        # the apply function: key, lookup, run the action, report (hit, action name)
        fname = self.env.gen.fresh("apply")
        scope[t] = fname
        with self.env.build.define(fname, ir.Kind.APPLY):
            keys = tuple(self.table_key(k.expr, scope) for k in matched)  # a call in a key is inlined first
            if profile is not None:
                apgen.emit_indirect_apply(self.env, t, scope, self.env.gen.obj(tname), keys)
                return
            self.direct_apply(t, self.env.gen.obj(tname), keys, name, scope)

    def direct_apply(self, t: ast.TableDecl, table: ir.Obj, keys: tuple[ir.Expr, ...], name: str,
                     scope: Scope) -> None:
        e = ir.Var("e", ir.VarKind.ENTRY)
        self.env.build.emit(ir.Assign(e, ir.TableLookup(table, keys)))
        with self.env.build.if_(ir.IsNone(e)):
            self.env.build.emit(ir.Assign(e, ir.DefaultEntry(table)))
            self.env.build.emit(ir.RunAction(e))
            self.env.build.emit(ir.Return(ir.Tuple((ir.Const(False), ir.EntryAction(e)))))
        if t.properties.get("counters") is not None:
            self.env.build.emit(ir.AugAssign(ir.EntryCount(e, 0), "+", ir.Const(1)))
            self.env.build.emit(ir.AugAssign(ir.EntryCount(e, 1), "+", ir.slot(self.env.out.std["packet_length"])))
        meters = t.properties.get("meters")
        if meters is not None:
            mobj = self.env.gen.obj(self.env.gen.lookup(scope, meters.decl))
            mobj.value.table = name
            dst = v1m.direct_meter_destination(self.env, t, meters.decl, scope)
            if dst is not None:
                amount = ir.Const(1) if mobj.value.unit == "packets" else ir.IngressLength()
                self.env.out.uses_payload = self.env.out.uses_payload or mobj.value.unit != "packets"
                cell = ir.MethodCall(ir.Attr(mobj, "cell"), (e,))
                now = ir.MethodCall(ir.Attr(ir.Name("RT"), "micros"), ())
                execute = ir.MethodCall(ir.Attr(cell, "execute"), (now, amount))
                self.env.build.emit(ir.Assign(ir.slot(dst.base), execute))
        self.env.build.emit(ir.RunAction(e))
        self.env.build.emit(ir.Return(ir.Tuple((ir.Const(True), ir.EntryAction(e)))))

    def key_expr(self, e: ast.Expr, scope: Scope) -> ir.Expr:
        code = self.env.exprs.ex(e, scope)
        return ir.Select(code, ir.Const(1), ir.Const(0)) if e.type is BOOL else code

    def table_key(self, e: ast.Expr, scope: Scope) -> ir.Expr:
        """A key as the control plane writes it: the bits, so int<W> values as unsigned."""
        t = e.type.underlying if isinstance(e.type, EnumT) and e.type.underlying else e.type
        code = self.key_expr(e, scope)
        return ir.bin_("&", code, t.mask) if isinstance(t, BitsT) and t.signed else code

    def entry_match(self, ks: ast.Expr, key: KeySpec):
        if isinstance(ks, ast.Default):
            return DONT_CARE
        bits = (1 << key.width) - 1
        if isinstance(ks, ast.Range):
            return value_range(ks.lo.value & bits, ks.hi.value & bits)
        if isinstance(ks, ast.Mask):
            return ternary(ks.base.value & bits, ks.mask.value & bits)
        v = int(ks.value) & ((1 << key.width) - 1)
        if key.match_kind == "lpm":
            return lpm(v, key.width, key.width)
        return exact(v)

    def table_action(self, ref: ast.ActionRef, scope: Scope) -> Any:
        """One Python function per table action: action data become its parameters."""
        decl: ast.ActionDecl = ref.decl
        fname = self.env.gen.fresh("act")
        inner = Scope(scope)
        data = tuple(ir.Var(f"a{i}") for i, p in enumerate(p for p in decl.params if not p.direction))
        for p, var in zip((p for p in decl.params if not p.direction), data):
            inner[p] = var
        directional = [p for p in decl.params if p.direction]
        saved_ret, self.env.return_stmt = self.env.return_stmt, ir.Return()
        with self.env.build.define(fname, ir.Kind.ACTION, data):
            self.env.action_depth += 1
            if directional:  # bound in the actions list: copy-in/copy-out like a direct call
                self.env.calls.inline(directional, ref.args or [], decl.body, scope, inner)
            else:
                self.env.gen.stmt(decl.body, inner)
            self.env.action_depth -= 1
        self.env.return_stmt = saved_ret
        self.env.gen.run(compiled(python.function(self.env.build.module.functions[-1]), "<p4 action>"))
        return self.env.ns[fname]


def _key_width(t: Type) -> int:
    """A table key's width: an error is BMv2's 32-bit error code (p4c-bm2-ss's errorWidth)."""
    return 32 if t is ERROR else bit_width(t)
