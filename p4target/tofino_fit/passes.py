"""A program's passes: the paths a packet can take through its gress control's own if-else.

A recirculating program (p4src/tofino/ina_tna.p4) writes each pass as a branch of its top
control, so the paths through that control's if-else statements are its passes, and each
path's units are what one pass uses: its stages, stateful ALUs and tables.  Only the top
control's own if-else statements split paths (those of the controls it applies would
multiply them without naming a pass); an if without an else does not split, its units are
counted on every path it sits on.
"""

from __future__ import annotations

from dataclasses import dataclass

from .placement import Node
from .units import Fork, Unit


@dataclass
class PassUse:
    """One path through a gress control: the conditions that choose it and what it uses."""

    conditions: list[str]  # as the program wrote them; "!(...)" for an else
    chain: int  # stages its own units' dependencies need (its dependency chain)
    stages: int  # the deepest stage the placement put one of its units in, plus one
    salus: list[int]  # stateful ALUs it executes, per stage
    tables: int  # its units (logical tables)


def paths(forks: list[Fork]) -> list[tuple[dict[int, int], list[str]]]:
    """Every consistent choice of sides, with its conditions, in program order."""
    found: list[tuple[dict[int, int], list[str]]] = [({}, [])]
    for fork in forks:
        grown = []
        for choice, conds in found:
            if all(choice.get(k, v) == v for k, v in fork.within.items()):
                cond = f"({fork.cond})" if " " in fork.cond else fork.cond
                grown.append(({**choice, fork.id: 0}, [*conds, cond]))
                grown.append(({**choice, fork.id: 1}, [*conds, f"!({fork.cond})"]))
            else:
                grown.append((choice, conds))
        found = grown
    return found


def pass_use(forks: list[Fork], units: list[Unit], nodes: list[Node]) -> list[PassUse]:
    """What each path uses, given the placement's nodes (their stages and dependencies)."""
    out = []
    mine = {id(u) for u in units}
    for choice, conds in paths(forks):
        on = [u for u in units if all(choice.get(k, v) == v for k, v in u.branches.items())]
        ids = {id(u) for u in on}
        depth: dict[int, int] = {}
        salus: list[int] = []
        for i in sorted(range(len(nodes)), key=lambda i: nodes[i].stage):
            node = nodes[i]
            if not any(id(u) in ids for u in node.units):
                continue
            depth[i] = max([depth[p] + 1 for p in node.preds if p in depth]
                           + [depth[a] for a in node.after if a in depth] + [0])
            salus += [0] * (node.stage + 1 - len(salus))
            salus[node.stage] += len(node.registers)
        stages = max((n.stage for n in nodes if any(id(u) in ids and id(u) in mine for u in n.units)), default=-1)
        out.append(PassUse(conds, max(depth.values(), default=-1) + 1, stages + 1, salus, len(on)))
    return out
