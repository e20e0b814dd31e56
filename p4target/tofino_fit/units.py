"""A checked TNA control's apply block as MAU units: what each logical table reads, writes and runs.

Every table apply is a unit; so is every statement run directly in an apply block (an
assignment, a direct action call, an extern call such as ``RegisterAction.execute``), as
bf-p4c makes a keyless table for each.  Consecutive independent assignments of one block are
merged into one unit, as p4c's SynthesizeActions puts them into one action.  Sub-controls and
functions are inlined with their parameters bound to the caller's arguments, so fields are
named by their real paths (``hdr.bridge.op``, ``meta.cell``).  A unit also reads what the
conditions of the ``if``s and ``switch``es around it read (its gateway), and remembers which
branch of each it sits in, so two units in different branches are mutually exclusive.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from ..frontend import ast
from ..frontend.errors import Location
from ..frontend.types import ApplyResultT, BitsT, EnumT, HeaderT, StackT, bit_width

# A parameter is bound to a field path, or (an expression argument) to the fields it reads.
Binding = str | frozenset[str]
TEMP = "~"  # paths of action/function locals: temporaries of one unit, never a dependency
PSEUDO = "$"  # table results and condition values: dependencies, never PHV
RESULT = f"{PSEUDO}apply:"  # a table's hit/miss/action_run, read by the gateways of what it controls


@dataclass(eq=False)
class RegisterUse:
    """A register a unit executes, and the RegisterAction it runs."""

    name: str  # instance path, e.g. TnaIngress.lane_0.sums
    register: ast.Instantiation
    action: ast.Instantiation


@dataclass(eq=False)
class Unit:
    """One logical table (or keyless table for statements) of a gress."""

    gress: str
    name: str
    loc: Location
    kind: str  # table | statement
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    registers: dict[str, RegisterUse] = field(default_factory=dict)
    branches: dict[int, int] = field(default_factory=dict)  # if/switch (walk id) -> branch taken
    missed: frozenset[str] = frozenset()  # tables this unit runs only when they missed
    miss_registers: frozenset[str] = frozenset()  # a table's: what its default action may execute

    def excludes(self, other: Unit) -> bool:
        """Whether the two never run for one packet: different branches of one if/switch."""
        return any(other.branches.get(k, v) != v for k, v in self.branches.items())


@dataclass
class Acc:
    """What one unit (or one condition) reads, writes and executes, while it is walked."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    registers: dict[str, RegisterUse] = field(default_factory=dict)


@dataclass(frozen=True)
class Fork:
    """An if-else of the gress control's own apply block: a packet takes one side or the other."""

    id: int  # its walk id (Unit.branches' key)
    cond: str  # the condition, as the program wrote it
    within: dict[int, int]  # the branches it sits in


@dataclass
class Ctx:
    env: dict[int, Binding]
    prefix: str  # the control instance's path, naming its locals and registers
    controls: tuple[tuple[ast.ControlDecl, str], ...]  # enclosing control instances, innermost last
    guard: frozenset[str] = frozenset()
    branches: dict[int, int] = field(default_factory=dict)

    def inside(self, reads: set[str] | frozenset[str], branch: tuple[int, int]) -> Ctx:
        return Ctx(self.env, self.prefix, self.controls, self.guard | reads, {**self.branches, branch[0]: branch[1]})


def _is_field(decl: Any) -> bool:
    return isinstance(decl, (ast.Param, ast.VarDecl))


def path_of(e: ast.Expr, env: dict[int, Binding]) -> str | None:
    """The field path an lvalue-like expression names, or None (a constant, an instance, a value)."""
    if isinstance(e, ast.PathExpr):
        if not _is_field(e.decl):
            return None
        b = env.get(id(e.decl))
        return b if isinstance(b, str) else (None if b is not None else f"{TEMP}{e.name}")
    if isinstance(e, ast.Member):
        if isinstance(e.base.type, (HeaderT, StackT)):
            base = path_of(e.base, env)
            return None if base is None else f"{base}.{e.member}"
        return None
    if isinstance(e, ast.Index):
        base = path_of(e.base, env)
        if base is None:
            return None
        return f"{base}[{e.index.value}]" if isinstance(e.index.value, int) else base
    if isinstance(e, ast.Slice):
        return path_of(e.base, env)
    return None


class UnitWalker:
    """Walks one gress's control (and what it inlines) into units, in program order."""

    def __init__(self, gress: str) -> None:
        self.gress = gress
        self.units: list[Unit] = []
        self.locals: dict[str, int] = {}  # control-local variables (PHV metadata): path -> bits
        self.forks: list[Fork] = []  # the gress control's own if-else statements (passes.py)
        self.validated: set[str] = set()  # headers the control may make valid (phv.py)
        self._on_miss: dict[tuple[int, int], str] = {}  # (if walk id, branch) -> table it runs on a miss of
        self._ids = itertools.count()

    # ------------------------------------------------------------ entry
    def control(self, decl: ast.ControlDecl) -> list[Unit]:
        env: dict[int, Binding] = {id(p): p.name for p in decl.params}
        ctx = Ctx(env, decl.name, ((decl, decl.name),))
        self._control_locals(decl, ctx)
        self.block(decl.body.stmts, ctx)
        return self.units

    def _control_locals(self, decl: ast.ControlDecl, ctx: Ctx) -> None:
        for local in decl.locals:
            if isinstance(local, ast.VarDecl):
                self._local_var(local, ctx)

    def _local_var(self, decl: ast.VarDecl, ctx: Ctx) -> str:
        path = f"{ctx.prefix}.{decl.name}"
        ctx.env[id(decl)] = path
        self.locals[path] = bit_width(decl.type) if isinstance(decl.type, (BitsT, EnumT)) else 1
        return path

    # ------------------------------------------------------------ statements
    def block(self, stmts: list[ast.Stmt], ctx: Ctx) -> None:
        pending: Unit | None = None  # the unit the next simple statement may join
        for s in stmts:
            if isinstance(s, ast.Block):
                self.block(s.stmts, ctx)
                pending = None
                continue
            simple = self._simple(s)
            if simple is None:
                self.stmt(s, ctx)
                pending = None
                continue
            acc = Acc()
            self.simple_stmt(s, ctx, acc)
            if pending is not None and not acc.registers and pending.writes.isdisjoint(acc.reads | acc.writes):
                pending.reads |= _kept(acc.reads)
                pending.writes |= _kept(acc.writes)
                continue
            pending = self.unit(ctx, acc, f"{ctx.prefix}.{ast.text(simple)}", s.loc, "statement")

    def _simple(self, s: ast.Stmt) -> Any:
        """Assignments and header methods: statements one synthesized action can hold."""
        if isinstance(s, ast.Assign):
            return s.lhs
        if isinstance(s, ast.VarDecl) and s.init is not None:
            return ast.PathExpr(s.loc, s.name)
        if isinstance(s, ast.CallStmt) and s.call.target is not None and s.call.target.kind == "header_method":
            return s.call
        return None

    def simple_stmt(self, s: ast.Stmt, ctx: Ctx, acc: Acc) -> None:
        if isinstance(s, ast.VarDecl):
            path = self._local_var(s, ctx)
            self.expr(s.init, ctx, acc)
            acc.writes.add(path)
        elif isinstance(s, ast.Assign):
            self.assign(s, ctx.env, ctx, acc)
        else:
            self.expr(s.call, ctx, acc)

    def stmt(self, s: ast.Stmt, ctx: Ctx) -> None:
        if isinstance(s, ast.If) and isinstance(s.cond.value, bool):  # folded away, as p4c does
            taken = s.then if s.cond.value else s.other
            if taken is not None:
                self.block([taken], ctx)
        elif isinstance(s, ast.If):
            acc = Acc()
            self.expr(s.cond, ctx, acc)
            reads = self._condition(acc, ctx, s.cond.loc)
            branch = next(self._ids)
            missed = self._miss_branch(s.cond, ctx)
            if missed is not None:
                self._on_miss[(branch, missed[1])] = missed[0]
            if s.other is not None and len(ctx.controls) == 1:
                self.forks.append(Fork(branch, ast.text(s.cond), dict(ctx.branches)))
            self.block([s.then], ctx.inside(reads, (branch, 0)))
            if s.other is not None:
                self.block([s.other], ctx.inside(reads, (branch, 1)))
        elif isinstance(s, ast.Switch):
            acc = Acc()
            self.expr(s.subject, ctx, acc)
            reads = self._condition(acc, ctx, s.subject.loc)
            branch = next(self._ids)
            for i, case in enumerate(s.cases):
                if case.body is not None:
                    self.block(case.body.stmts, ctx.inside(reads, (branch, i)))
        elif isinstance(s, ast.CallStmt):
            self.call_stmt(s.call, ctx)
        elif isinstance(s, (ast.For, ast.ForIn)):
            self.block([*(s.init if isinstance(s, ast.For) else []), s.body], ctx)
        elif isinstance(s, ast.VarDecl):
            self._local_var(s, ctx)
        # exit, return, empty, declarations: no unit

    @staticmethod
    def _miss_branch(cond: ast.Expr, ctx: Ctx) -> tuple[str, int] | None:
        """``t.apply().miss`` or ``!t.apply().hit`` (then) and ``t.apply().hit`` (else): the
        table and the branch that runs only when it missed."""
        negated = isinstance(cond, ast.Unary) and cond.op == "!"
        e = cond.operand if negated else cond
        if not (isinstance(e, ast.Member) and e.member in ("hit", "miss") and isinstance(e.base, ast.Call)):
            return None
        tgt = e.base.target
        if tgt is None or tgt.kind != "table_apply":
            return None
        return f"{ctx.prefix}.{tgt.decl.name}", 0 if (e.member == "miss") != negated else 1

    def _condition(self, acc: Acc, ctx: Ctx, loc: Location) -> set[str]:
        """A gateway's reads; a condition with effects (an extern call) is a unit of its own."""
        if not acc.writes and not acc.registers:
            return acc.reads
        result = f"{PSEUDO}cond@{loc}"
        acc.writes.add(result)
        self.unit(ctx, acc, f"condition at {loc.line}:{loc.col}", loc, "statement")
        return {result}

    def call_stmt(self, call: ast.Call, ctx: Ctx) -> None:
        tgt = call.target
        if tgt is not None and tgt.kind == "block_apply" and isinstance(tgt.decl.type.decl, ast.ControlDecl):
            self.inline_control(call, tgt.decl, ctx)
            return
        if tgt is not None and tgt.kind == "table_apply":
            self.table(call, tgt.decl, ctx)
            return
        acc = Acc()
        self.expr(call, ctx, acc)
        self.unit(ctx, acc, f"{ctx.prefix}.{ast.text(call.func)}", call.loc, "statement")

    def inline_control(self, call: ast.Call, inst: ast.Instantiation, ctx: Ctx) -> None:
        sub: ast.ControlDecl = inst.type.decl
        env = dict(ctx.env)
        for p, a in zip(sub.params, call.args):
            env[id(p)] = self.binding(p, a, ctx)
        prefix = f"{ctx.prefix}.{inst.name}"
        inner = Ctx(env, prefix, (*ctx.controls, (sub, prefix)), ctx.guard, ctx.branches)
        self._control_locals(sub, inner)
        self.block(sub.body.stmts, inner)

    def binding(self, p: ast.Param, a: ast.Expr, ctx: Ctx) -> Binding:
        """A parameter bound to the caller's field, or to the fields its argument reads."""
        path = path_of(a, ctx.env) if not isinstance(a, ast.Default) else None
        if path is not None:
            return path
        acc = Acc()
        self.expr(a, ctx, acc)
        return frozenset(self._condition(acc, ctx, a.loc))

    # ------------------------------------------------------------ tables and units
    def unit(self, ctx: Ctx, acc: Acc, name: str, loc: Location, kind: str,
             miss_registers: frozenset[str] = frozenset()) -> Unit:
        missed = frozenset(self._on_miss[b] for b in ctx.branches.items() if b in self._on_miss)
        u = Unit(self.gress, name, loc, kind, _kept(acc.reads | ctx.guard), _kept(acc.writes), dict(acc.registers),
                 dict(ctx.branches), missed, miss_registers)
        self.units.append(u)
        return u

    def table(self, call: ast.Call, t: ast.TableDecl, ctx: Ctx) -> Unit:
        acc = Acc()
        for k in t.keys:
            self.expr(k.expr, ctx, acc)
        refs = [*t.actions, *([t.default_action] if t.default_action is not None else [])]
        executes: dict[int, set[str]] = {}  # action -> the registers it executes
        for ref in refs:
            if isinstance(ref.decl, ast.ActionDecl) and id(ref.decl) not in executes:
                before = dict(acc.registers)
                acc.registers = {}
                self.action_body(ref.decl, ref.args or [], ctx, acc)
                executes[id(ref.decl)] = set(acc.registers)
                acc.registers = {**before, **acc.registers}
        default = t.default_action
        if t.default_is_const and default is not None and id(default.decl) in executes:
            on_miss = executes[id(default.decl)]
        else:  # the control plane may set any of its actions as the default
            on_miss = set(acc.registers)
        name = f"{ctx.prefix}.{t.name}"
        acc.writes.add(f"{RESULT}{name}")
        return self.unit(ctx, acc, name, call.loc, "table", frozenset(on_miss))

    def action_body(self, d: ast.ActionDecl | ast.FunctionDecl, args: list[ast.Expr], ctx: Ctx, acc: Acc) -> None:
        """An action's (or function's) effects, its parameters bound to ``args`` (action data
        beyond them reads nothing the pipeline wrote)."""
        params = d.params if isinstance(d, ast.ActionDecl) else d.proto.params
        env = dict(ctx.env)
        for i, p in enumerate(params):
            if i < len(args):
                env[id(p)] = self.binding(p, args[i], ctx) if p.direction in ("inout", "out") else \
                    self._value(args[i], ctx, acc)
            else:
                env[id(p)] = frozenset()  # action data from the table entry
        inner = Ctx(env, ctx.prefix, ctx.controls, ctx.guard, ctx.branches)
        self.body(d.body.stmts, inner, acc)

    def _value(self, a: ast.Expr, ctx: Ctx, acc: Acc) -> Binding:
        path = path_of(a, ctx.env)
        if path is not None:
            return path
        inner = Acc()
        self.expr(a, ctx, inner)
        acc.writes |= inner.writes
        acc.registers.update(inner.registers)
        return frozenset(inner.reads)

    def body(self, stmts: list[ast.Stmt], ctx: Ctx, acc: Acc) -> None:
        """Statements inside an action or function: all one unit's."""
        for s in stmts:
            if isinstance(s, ast.Block):
                self.body(s.stmts, ctx, acc)
            elif isinstance(s, ast.Assign):
                self.assign(s, ctx.env, ctx, acc)
            elif isinstance(s, ast.VarDecl):
                ctx.env[id(s)] = f"{TEMP}{s.name}"
                if s.init is not None:
                    self.expr(s.init, ctx, acc)
            elif isinstance(s, ast.If):
                self.expr(s.cond, ctx, acc)
                self.body([s.then, *([s.other] if s.other is not None else [])], ctx, acc)
            elif isinstance(s, ast.Switch):
                self.expr(s.subject, ctx, acc)
                self.body([c.body for c in s.cases if c.body is not None], ctx, acc)
            elif isinstance(s, ast.CallStmt):
                self.expr(s.call, ctx, acc)
            elif isinstance(s, ast.Return) and s.value is not None:
                self.expr(s.value, ctx, acc)
            elif isinstance(s, (ast.For, ast.ForIn)):
                self.body([*(s.init if isinstance(s, ast.For) else []), s.body], ctx, acc)

    def assign(self, s: ast.Assign, env: dict[int, Binding], ctx: Ctx, acc: Acc) -> None:
        self.expr(s.rhs, ctx, acc)
        path = path_of(s.lhs, env)
        if path is not None:
            acc.writes.add(path)
        for part in ast.children(s.lhs):  # indexes read to find the lvalue
            if isinstance(part, ast.Expr) and path_of(part, env) is None:
                self.expr(part, ctx, acc)

    # ------------------------------------------------------------ expressions
    def expr(self, e: Any, ctx: Ctx, acc: Acc) -> None:
        if not isinstance(e, ast.Expr) or (e.value is not None and not isinstance(e, ast.Call)):
            return
        if isinstance(e, ast.PathExpr) and _is_field(e.decl) and isinstance(ctx.env.get(id(e.decl)), frozenset):
            acc.reads |= ctx.env[id(e.decl)]
            return
        path = path_of(e, ctx.env)
        if path is not None:
            acc.reads.add(path)
            if isinstance(e, ast.Index) and not isinstance(e.index.value, int):
                self.expr(e.index, ctx, acc)
            return
        if isinstance(e, ast.Member) and isinstance(e.base.type, ApplyResultT):
            self.expr(e.base, ctx, acc)
            return
        if isinstance(e, ast.Call) and e.target is not None:
            self.call(e, ctx, acc)
            return
        for c in ast.children(e):
            self.expr(c, ctx, acc)

    def call(self, e: ast.Call, ctx: Ctx, acc: Acc) -> None:
        tgt = e.target
        if tgt.kind == "table_apply":  # `if (t.apply().hit)`: the table runs first, its result is read
            t = self.table(e, tgt.decl, ctx)
            acc.reads.add(f"{RESULT}{t.name}")
            return
        if tgt.kind in ("action", "user_function"):
            self.action_body(tgt.decl, e.args, ctx, acc)
            return
        if tgt.kind in ("header_method", "stack_method"):
            base = path_of(tgt.instance, ctx.env)
            if base is not None:
                if tgt.name == "isValid":
                    acc.reads.add(f"{base}.$valid")
                elif tgt.name in ("setValid", "setInvalid"):
                    acc.writes.add(f"{base}.$valid")
                    if tgt.name == "setValid":
                        self.validated.add(base)
                elif tgt.kind == "stack_method":  # push_front / pop_front move every element
                    acc.reads.add(base)
                    acc.writes.add(base)
            return
        if tgt.kind == "method" and isinstance(tgt.decl, ast.ExternDecl):
            if tgt.decl.name == "packet_out":  # a deparser's emit: the deparser, not a unit
                return
            if tgt.decl.name == "RegisterAction" and tgt.name == "execute":
                self.register_execute(tgt.instance.decl, ctx, acc)
        for a in e.args:
            self.expr(a, ctx, acc)

    def register_execute(self, ra: ast.Instantiation, ctx: Ctx, acc: Acc) -> None:
        """The register the RegisterAction runs on, and what its body reads of the pipeline."""
        reg = ra.args[0].decl
        acc.registers[self.instance_name(reg, ctx)] = RegisterUse(self.instance_name(reg, ctx), reg, ra)
        apply = ra.initializer[0] if ra.initializer else None
        if apply is None:
            return
        env = dict(ctx.env)
        for p in apply.proto.params:
            env[id(p)] = f"{TEMP}{p.name}"  # the cell and rv live in the stateful ALU
        inner = Acc()
        self.body(apply.body.stmts, Ctx(env, ctx.prefix, ctx.controls, ctx.guard, ctx.branches), inner)
        acc.reads |= inner.reads

    def instance_name(self, decl: ast.Instantiation, ctx: Ctx) -> str:
        """An extern instance's path: under the control instance that declares it."""
        for ctrl, prefix in reversed(ctx.controls):
            if any(local is decl for local in ctrl.locals):
                return f"{prefix}.{decl.name}"
        return decl.name


def _kept(paths: set[str]) -> set[str]:
    """Paths that outlive one unit (not the temporaries of an action, function or RegisterAction)."""
    return {p for p in paths if not p.startswith(TEMP)}
