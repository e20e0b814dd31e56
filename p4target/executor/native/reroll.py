"""Find the runs of statements a program unrolled (a P4 program's value lanes: lane0 .. laneN, each the
same few statements) so that lower.py prints each run as one C loop.

A run is K groups of g statements, one after another, that are the same tree except for
* the slot numbers, each ``base + i * step`` in group i (``step`` may be 0),
* the register, each the column ``first + i * step`` of one bank (lower.py ``_bank``),
* the locals, each either the same in every group or used in its group only (codegen's fresh
  temporaries: ``_i815 = S[465]`` then ``lane[_i815]``).
Group i of the loop then runs exactly what group i of the unrolled statements ran, with group
0's locals standing for each group's own.  Groups that break or continue are left alone (in a
loop the jump would end the new loop), and so are slots the caller names (TNA's UNSET slots,
whose reads are not plain).  This module only reads the tree; ``rolled`` gives group 0 with the
varying parts as ``LoopSlot`` and ``LoopCell``, the two nodes lower.py prints for them, and
``fixed_slots`` which slots the loop may keep in C locals (plain arithmetic only: no calls, no exits).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import ir

MIN_GROUPS = 4  # fewer unrolled groups than this stay as they are
MAX_GROUP = 24  # statements per group, at most
MIN_STATEMENTS = 8  # a run covers at least this many statements

BankOf = Callable[[Any], "tuple[int, int] | None"]  # a register -> (its bank, its column), or None


@dataclass(frozen=True, slots=True)
class LoopSlot(ir.Expr):
    """``S[base + step * loop]``."""

    base: int
    step: int
    loop: str


@dataclass(frozen=True, slots=True)
class LoopCell(ir.Expr):
    """A cell of the register in column ``column + step * loop`` of ``reg``'s bank, at ``index``."""

    reg: ir.Obj
    index: ir.Expr
    column: int
    step: int
    loop: str


@dataclass(frozen=True)
class Run:
    start: int  # the first statement's position in its block
    size: int  # statements per group
    count: int  # groups
    slot_steps: dict[int, int]  # id of a Slot node of group 0 -> its step
    column_steps: dict[int, int]  # id of a RegCell node of group 0 -> its column's step


@dataclass
class _Flat:
    """One statement as a shape (all but the varying parts) and its varying parts, in tree order."""

    shape: tuple
    holes: list[tuple[str, Any, Any]]  # (kind, value, node): "slot" k, "col" (bank, column), "var" name
    jumps: bool  # a break or continue


def _flatten(stmt: ir.Stmt, bank_of: BankOf, fixed_slots: frozenset[int]) -> _Flat:
    shape: list[Any] = []
    holes: list[tuple[str, Any, Any]] = []
    jumps = False

    def visit(node: Any) -> None:
        nonlocal jumps
        if isinstance(node, (ir.Break, ir.Continue)):
            jumps = True
        shape.append(type(node).__name__)
        if isinstance(node, ir.Slot) and isinstance(node.index, ir.Const) and type(node.index.value) is int \
                and node.index.value not in fixed_slots:
            holes.append(("slot", node.index.value, node))
            return
        if isinstance(node, ir.RegCell) and isinstance(node.reg, ir.Obj):
            bank = bank_of(node.reg.value)
            if bank is not None:
                holes.append(("col", bank, node))
                visit(node.index)
                return
        if isinstance(node, ir.Var):
            shape.append(node.kind)
            holes.append(("var", node.name, node))
            return
        if isinstance(node, ir.Obj):
            shape.append(node.name)
            return
        for f in dataclasses.fields(node):
            v = getattr(node, f.name)
            if isinstance(v, (ir.Expr, ir.Stmt)):
                visit(v)
            elif isinstance(v, (list, tuple)):
                shape.append(len(v))
                for x in v:
                    visit(x) if isinstance(x, (ir.Expr, ir.Stmt)) else shape.append(repr(x))
            else:
                shape.append(repr(v))

    visit(stmt)
    return _Flat(tuple(shape), holes, jumps)


def var_uses(body: list[ir.Stmt], local: Container[str]) -> Counter[str]:
    """How often each of a function's locals (not its parameters: an action's data) is named in its body."""
    return Counter(n for n in _var_names(body) if n in local)


def _children(node: Any) -> Iterator[Any]:
    """The IR expressions and statements a node holds, directly or in a list."""
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, (ir.Expr, ir.Stmt)):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (x for x in v if isinstance(x, (ir.Expr, ir.Stmt)))


def _var_names(nodes: Sequence[Any]) -> Iterator[str]:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Var):
            yield node.name
            continue
        stack.extend(_children(node))


class _Matcher:
    """Whether groups 1, 2, ... go on the progression groups 0 and 1 start."""

    def __init__(self, groups: list[list[tuple[str, Any, Any]]], uses: Counter[str]) -> None:
        self.first, second = groups
        self.uses = uses
        self.steps: list[int | None] = []
        self.local: list[bool] = []
        for (kind, a, _), (_, b, _) in zip(self.first, second):
            if kind == "slot":
                self.steps.append(b - a)
            elif kind == "col":
                self.steps.append(b[1] - a[1] if a[0] == b[0] else None)
            else:
                self.steps.append(0)
            self.local.append(kind == "var" and a != b)
        self.ok = all(s is not None for s in self.steps) and self._locals_ok(self.first) and self.matches(1, second)

    def _locals_ok(self, holes: list[tuple[str, Any, Any]]) -> bool:
        names = Counter(v for (kind, v, _), local in zip(holes, self.local) if local)
        return all(self.uses[n] == c for n, c in names.items())  # a parameter has no uses: never local

    def matches(self, i: int, holes: list[tuple[str, Any, Any]]) -> bool:
        for (kind, a, _), (_, b, _), step, local in zip(self.first, holes, self.steps, self.local):
            if kind == "slot" and b != a + i * step:
                return False
            if kind == "col" and (b[0] != a[0] or b[1] != a[1] + i * step):
                return False
            if kind == "var" and not local and b != a:
                return False
        return not any(self.local) or self._locals_ok(holes)


def find_runs(stmts: list[ir.Stmt], bank_of: BankOf, fixed_slots: frozenset[int], uses: Counter[str]) -> list[Run]:
    """The runs in one block's statements, first to last, none overlapping."""
    flats = [_flatten(s, bank_of, fixed_slots) for s in stmts]
    ids: dict[tuple, int] = {}
    shapes = [ids.setdefault(f.shape, len(ids)) for f in flats]
    runs: list[Run] = []
    p, n = 0, len(stmts)
    while p < n:
        best: Run | None = None
        for g in range(1, min(MAX_GROUP, (n - p) // MIN_GROUPS) + 1):
            run = _run_at(flats, shapes, p, g, uses)
            if run is not None and (best is None or run.size * run.count > best.size * best.count):
                best = run
        if best is None:
            p += 1
        else:
            runs.append(best)
            p += best.size * best.count
    return runs


def _run_at(flats: list[_Flat], shapes: list[int], p: int, g: int, uses: Counter[str]) -> Run | None:
    n = len(flats)
    head = shapes[p:p + g]
    count = 1
    while p + (count + 1) * g <= n and shapes[p + count * g:p + (count + 1) * g] == head:
        count += 1
    if count < MIN_GROUPS or count * g < MIN_STATEMENTS:
        return None
    if any(f.jumps for f in flats[p:p + g]):
        return None

    def holes(i: int) -> list[tuple[str, Any, Any]]:
        return [h for f in flats[p + i * g:p + (i + 1) * g] for h in f.holes]

    matcher = _Matcher([holes(0), holes(1)], uses)
    if not matcher.ok:
        return None
    good = 2
    while good < count and matcher.matches(good, holes(good)):
        good += 1
    if good < MIN_GROUPS or good * g < MIN_STATEMENTS:
        return None
    slot_steps: dict[int, int] = {}
    column_steps: dict[int, int] = {}
    for (kind, _, node), step in zip(matcher.first, matcher.steps):
        into = slot_steps if kind == "slot" else column_steps if kind == "col" else None
        if into is None or (kind == "slot" and step == 0):
            continue
        if into.setdefault(id(node), step) != step:  # one node at two places that step differently
            return None
    return Run(p, g, good, slot_steps, column_steps)


def rolled(stmts: list[ir.Stmt], run: Run, loop: str, bank_of: BankOf) -> list[ir.Stmt]:
    """Group 0 of ``run`` with its varying slots and cells written in terms of the loop counter ``loop``."""

    def sub(node: Any) -> Any:
        if isinstance(node, ir.Slot) and id(node) in run.slot_steps:
            return LoopSlot(node.index.value, run.slot_steps[id(node)], loop)
        if isinstance(node, ir.RegCell) and id(node) in run.column_steps:
            _, column = bank_of(node.reg.value)
            return LoopCell(node.reg, sub(node.index), column, run.column_steps[id(node)], loop)
        if not isinstance(node, (ir.Expr, ir.Stmt)) or isinstance(node, (ir.Obj, ir.Const, ir.Var)):
            return node
        changes = {}
        for f in dataclasses.fields(node):
            v = getattr(node, f.name)
            if isinstance(v, (ir.Expr, ir.Stmt)):
                changes[f.name] = sub(v)
            elif isinstance(v, list):
                changes[f.name] = [sub(x) for x in v]
            elif isinstance(v, tuple):
                changes[f.name] = tuple(sub(x) for x in v)
        return dataclasses.replace(node, **changes)

    return [sub(s) for s in stmts[run.start:run.start + run.size]]


# What a loop body may hold for its fixed slots to live in C locals during the loop: nothing that reads
# or writes S other than by a constant slot or a LoopSlot (no calls, slices, computed slots, exits).
_PLAIN = (ir.Assign, ir.AugAssign, ir.If, ir.Pass, ir.Comment, ir.Const, ir.Var, ir.Obj, ir.RegCell,
          ir.CounterCell, ir.Bin, ir.Cmp, ir.Not, ir.Neg, ir.Invert, ir.And, ir.Or, ir.Select, LoopSlot, LoopCell)


def fixed_slots(body: list[ir.Stmt], count: int) -> tuple[list[int], set[int]] | None:
    """The constant slots a rolled loop body names, and which of them it writes, if they may live in
    locals for the loop (None: the body does more than plain arithmetic on slots and cells).  A slot
    inside one of the body's LoopSlot ranges stays in S: the loop reaches it through both."""
    named: dict[int, None] = {}
    written: set[int] = set()
    ranges: list[tuple[int, int]] = []
    stack: list[Any] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Slot):
            if not (isinstance(node.index, ir.Const) and type(node.index.value) is int):
                return None
            named[node.index.value] = None
            continue
        if not isinstance(node, _PLAIN):
            return None
        if isinstance(node, LoopSlot):
            ends = (node.base, node.base + node.step * (count - 1))
            ranges.append((min(ends), max(ends)))
            continue
        if isinstance(node, (ir.Assign, ir.AugAssign)) and isinstance(node.target, ir.Slot) \
                and isinstance(node.target.index, ir.Const):
            written.add(node.target.index.value)
        stack.extend(_children(node))
    keep = sorted(k for k in named if not any(lo <= k <= hi for lo, hi in ranges))
    return keep, written & set(keep)
