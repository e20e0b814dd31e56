"""Where a job's trees go on the switches, and what a job gets when they are full: pure functions of what
live trees hold (``Held``), each switch's room (``Pools``) and the topology.

A tree needs, on every switch it crosses, ``pool_size`` consecutive free slots and a job cell
(``capacity``).  ``admit`` tries the job as planned; if it does not fit, the job planned again around
the switches that are full (the planner knows links, not slots) and the most aggregation that fits
(``capacity.fallbacks``: fewer trees, then a smaller pool) are weighed by the model's time for a DDP
bucket (``job_plan.REFERENCE_SIZES``), and the faster is taken; if neither fits, the ring alone (a job
with trees still chooses the ring for each call where it is faster, so it never loses by them).  It
never fails for lack of room, and says what the job got and why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller import capacity
from controller.capacity import CapacityError
from controller.job_plan import REFERENCE_SIZES, JobError, JobPlan
from controller.plan import Tree
from controller.topology import Topology, TopologyError

Pools = dict[str, tuple[int, int]]  # switch: (pool slots, job cells) its program has
Held = dict[str, list[tuple[int, int, int]]]  # switch: (first slot, pool size, cell) of every tree on it
Placement = dict[str, tuple[int, int]]  # one tree's (first slot, cell) on each of its switches
# (topology, most planned trees, mode, pool size of each installed tree) -> plan
Replan = Callable[[Topology, int | None, str, int], JobPlan]


@dataclass(frozen=True)
class Admitted:
    plan: JobPlan  # what the job runs (maybe fewer trees than asked, or none)
    pool_size: int
    placements: list[Placement]  # per tree of the plan
    note: str = ""  # what the job got and why, when it is less than it asked for


def place(trees: Sequence[Tree], pool_size: int, pools: Pools, held: Held, pool_base: int | None = None
          ) -> list[Placement]:
    """Each tree's slots and cell on each of its switches (``pool_base``: the first tree's first slot on
    every switch, the next tree's right after it); CapacityError naming the tree that does not fit."""
    pending: Held = defaultdict(list)
    placed = []
    for i, tree in enumerate(trees):
        both = {s: held.get(s, []) + pending[s] for s in tree.switches()}
        try:
            here = place_switches(tree.switches(), pool_size, pools, both,
                                  None if pool_base is None else pool_base + i * pool_size)
        except CapacityError as e:
            if len(trees) == 1:
                raise
            raise CapacityError(f"tree {i + 1} of {len(trees)} (root {tree.root}): {e}") from None
        for switch, (base, cell) in here.items():
            pending[switch].append((base, pool_size, cell))
        placed.append(here)
    return placed


def place_switches(switches: Sequence[str], pool_size: int, pools: Pools, held: Held, pool_base: int | None = None
                   ) -> Placement:
    """A pool and a cell on each of these switches (one tree's, or the switches a moved tree gains)."""
    here: Placement = {}
    for switch in switches:
        slots, cells = pools[switch]
        mine = held.get(switch, [])
        here[switch] = (capacity.free_pool(switch, pool_size, slots, [(a, n) for a, n, _ in mine], pool_base),
                        capacity.free_cell(switch, cells, {c for _, _, c in mine}))
    return here


def has_room(switch: str, pool_size: int, pools: Pools, held: Held) -> bool:
    """Whether one more tree with this pool fits the switch (slots and a job cell)."""
    try:
        place_switches([switch], pool_size, pools, held)
    except CapacityError:
        return False
    return True


def admit(planned: JobPlan, pool_size: int, topology: Topology, pools: Pools, held: Held, replan: Replan
          ) -> Admitted:
    """The job as planned if it fits; else the fastest of what fits (see the module's docstring)."""
    trees = [p.tree for p in planned.tree_plan.trees]
    try:
        return Admitted(planned, pool_size, place(trees, pool_size, pools, held))
    except CapacityError as e:
        short = e
    candidates = []
    full = {s for s in topology.devices if not has_room(s, pool_size, pools, held)}
    servers = full & set(topology.servers)  # cut off by their one link
    try:  # the planner knows links, not slots: show it only the switches (and servers) that have room
        around = replan(topology.without(full - servers, {topology.host_link(s) for s in servers}), None,
                        planned.mode, pool_size)
        placed = place([p.tree for p in around.tree_plan.trees], pool_size, pools, held)
        candidates.append(Admitted(around, pool_size, placed, f"planned around full switch(es) "
                                                              f"{', '.join(sorted(full))} ({short})"))
    except (JobError, CapacityError, TopologyError):
        pass
    count = len(trees) // planned.lanes  # planned trees: ``replan`` makes each in the job's lanes again
    for most, size in capacity.fallbacks(count, pool_size):
        # fewer trees take less of each member's link: the rest may go round the ring
        smaller = replan(topology, most, "auto" if planned.mode == "ina" else planned.mode, size)
        try:
            placed = place([p.tree for p in smaller.tree_plan.trees], size, pools, held)
        except CapacityError:
            continue
        got = len(placed) // smaller.lanes
        candidates.append(Admitted(smaller, size, placed, f"{got} of {count} tree(s), pool {size} of "
                                                          f"{pool_size} asked ({short}); mode {smaller.mode}"))
        break  # the most aggregation that fits: fewer trees or a smaller pool than this would only be slower
    if not candidates:
        return Admitted(replan(topology, None, "ring", pool_size), pool_size, [], f"ring alone: no tree fits ({short})")
    return min(candidates, key=lambda a: a.plan.choose(REFERENCE_SIZES[-1]).seconds)
