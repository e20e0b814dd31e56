"""Units into stages: dependencies, one stage per register, list scheduling under per-stage budgets.

Unit B depends on an earlier unit A of its gress when B reads a field A writes or both write
one field, unless they are mutually exclusive: B goes in a later stage.  A unit run only when
table A hit (or ran a given action) is control dependent on A: the same stage or a later one
(a Tofino stage predicates its logical tables on the earlier ones' results).  Every unit executing one register sits in
the register's stage (its one stateful ALU), so they are one node; if one depends on
another, no stage can hold both (unless the later runs only on the earlier table's miss and
that table's const default action does not execute the register: the packet runs it once).
A node's earliest stage is the longest dependency path to it; nodes are then placed stage by
stage, longest remaining chain first, so no stage holds
more than 4 stateful ALUs or 16 logical tables, ingress and egress together (they share the
stages).  Sources: limits.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .limits import SALUS_PER_STAGE, STAGES, TABLES_PER_STAGE
from .refusal import over, refuse
from .units import RESULT, Unit


@dataclass(eq=False)
class Node:
    """Units that share a stage: one unit, or every unit executing one register."""

    units: list[Unit]
    registers: set[str] = field(default_factory=set)
    preds: set[int] = field(default_factory=set)  # node indexes: in an earlier stage
    after: set[int] = field(default_factory=set)  # node indexes: in the same stage or a later one
    stage: int = -1

    @property
    def gress(self) -> str:
        return self.units[0].gress


@dataclass
class Placement:
    nodes: list[Node]
    salus: list[int]  # per stage, both gresses
    tables: list[int]


def _depends(a: Unit, b: Unit) -> str | None:
    """Whether later unit ``b`` must be in a later stage than ``a`` ("data"), or may share its
    stage but not precede it ("control": b runs on a's table result), or neither (None)."""
    if a.excludes(b):
        return None
    shared = (b.reads | b.writes) & a.writes
    if not shared:
        return None
    return "control" if all(f.startswith(RESULT) for f in shared) else "data"


def _nodes(units: list[Unit]) -> list[Node]:
    """One node per unit, then the units of each register merged (union-find)."""
    parent = list(range(len(units)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, u in enumerate(units):
        for reg in u.registers:
            if reg in owner:
                parent[find(i)] = find(owner[reg])
            else:
                owner[reg] = i
    groups: dict[int, Node] = {}
    for i, u in enumerate(units):
        node = groups.setdefault(find(i), Node([]))
        node.units.append(u)
        node.registers |= set(u.registers)
    return list(groups.values())


def place(units: list[Unit]) -> Placement:
    """Every unit's stage; a P4Error when the program cannot fit Tofino 1's stages."""
    nodes = _nodes(units)
    index = {id(u): n for n, node in enumerate(nodes) for u in node.units}
    for j, b in enumerate(units):
        for a in units[:j]:
            kind = _depends(a, b) if a.gress == b.gress else None
            if kind is None:
                continue
            shared = set(a.registers) & set(b.registers)
            if kind == "control" and a.name in b.missed:  # b runs only when a ran its default action
                shared &= a.miss_registers
            if shared or (kind == "data" and index[id(a)] == index[id(b)]):
                reg = sorted(shared or nodes[index[id(b)]].registers)[0]
                raise refuse(b.loc, f"register {reg} is used by two dependent tables ({a.name} at line "
                             f"{a.loc.line} and {b.name})")
            if index[id(a)] == index[id(b)]:
                continue  # b runs on a's result: one stage holds both, a's register not run twice
            (nodes[index[id(b)]].preds if kind == "data" else nodes[index[id(b)]].after).add(index[id(a)])
    order = _topological(nodes)
    height = _heights(nodes, order)
    salus: list[int] = []
    tables: list[int] = []
    placed = 0
    stage = 0
    while placed < len(nodes):
        salus.append(0)
        tables.append(0)
        for n in _ready(nodes, order, height, stage):
            node = nodes[n]
            need_salus, need_tables = len(node.registers), len(node.units)
            if need_salus > SALUS_PER_STAGE:
                raise over(node.units[0].loc, "stateful ALUs one stage needs", need_salus, SALUS_PER_STAGE,
                           ", ".join(sorted(node.registers)))
            if need_tables > TABLES_PER_STAGE:
                raise over(node.units[0].loc, "logical tables one stage needs", need_tables, TABLES_PER_STAGE)
            if salus[stage] + need_salus > SALUS_PER_STAGE or tables[stage] + need_tables > TABLES_PER_STAGE:
                if stage == STAGES - 1:
                    _full_last_stage(node, salus[stage], tables[stage])
                continue
            node.stage = stage
            salus[stage] += need_salus
            tables[stage] += need_tables
            placed += 1
        stage += 1
    _check_stages(nodes, order)
    return Placement(nodes, salus, tables)


def _full_last_stage(node: Node, salus: int, tables: int) -> None:
    """A node that would leave the last stage because the stage is full: say which budget."""
    unit = node.units[0]
    if salus + len(node.registers) > SALUS_PER_STAGE:
        raise over(unit.loc, f"stateful ALUs in stage {STAGES - 1}", salus + len(node.registers), SALUS_PER_STAGE,
                   f"{unit.name} cannot move to a later stage")
    raise over(unit.loc, f"logical tables in stage {STAGES - 1}", tables + len(node.units), TABLES_PER_STAGE,
               f"{unit.name} cannot move to a later stage")


def _check_stages(nodes: list[Node], order: list[int]) -> None:
    for gress in ("ingress", "egress"):
        mine = [n for n in order if nodes[n].gress == gress]
        if not mine:
            continue
        needed = max(nodes[n].stage for n in mine) + 1
        if needed > STAGES:
            first = min((u for n in mine if nodes[n].stage >= STAGES for u in nodes[n].units),
                        key=lambda u: (u.loc.file, u.loc.line, u.loc.col))
            raise over(first.loc, f"{gress} stages", needed, STAGES, f"{first.name} is in stage {needed - 1} "
                       "of a dependency chain")


def _topological(nodes: list[Node]) -> list[int]:
    """Node indexes, each after its predecessors; a cycle means a register is used by two
    dependent tables through a third."""
    succs: dict[int, list[int]] = {n: [] for n in range(len(nodes))}
    missing = {n: len(node.preds | node.after) for n, node in enumerate(nodes)}
    for n, node in enumerate(nodes):
        for p in node.preds | node.after:
            succs[p].append(n)
    ready = [n for n in range(len(nodes)) if missing[n] == 0]
    order: list[int] = []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for s in succs[n]:
            missing[s] -= 1
            if missing[s] == 0:
                ready.append(s)
    if len(order) < len(nodes):
        stuck = next(node for n, node in enumerate(nodes) if missing[n] and node.registers)
        raise refuse(stuck.units[-1].loc, f"register {sorted(stuck.registers)[0]} is used by two dependent tables "
                     "(through a table between them)")
    return order


def _heights(nodes: list[Node], order: list[int]) -> dict[int, int]:
    """Longest chain of dependent nodes from each node on (its own stage included)."""
    height = {n: 1 for n in order}
    for n in reversed(order):
        for p in nodes[n].preds:
            height[p] = max(height[p], height[n] + 1)
        for p in nodes[n].after:
            height[p] = max(height[p], height[n])
    return height


def _ready(nodes: list[Node], order: list[int], height: dict[int, int], stage: int):
    """Unplaced nodes that may go in ``stage``, longest chain first; a node control dependent
    on one placed in this stage becomes ready as soon as that one is placed."""
    tried: set[int] = set()
    while True:
        ready = [n for n in order if nodes[n].stage < 0 and n not in tried
                 and all(0 <= nodes[p].stage < stage for p in nodes[n].preds)
                 and all(0 <= nodes[p].stage <= stage for p in nodes[n].after)]
        if not ready:
            return
        n = min(ready, key=lambda m: -height[m])
        tried.add(n)
        yield n
