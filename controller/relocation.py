"""Relocation on failure: each tree that crosses a dead switch or link moves onto the best single tree of
what survives, and back where the planner put it once that is whole again."""

from __future__ import annotations

import copy
import dataclasses
import logging

from controller import admission, plan
from controller.capacity import CapacityError
from controller.context import Context
from controller.entries import Allocation
from controller.p4runtime_client import SwitchError
from controller.reconcile import left_over
from controller.specs import Specs
from controller.state import JobRecord, TreeRecord
from controller.topology import TopologyError
from worker import protocol

log = logging.getLogger("ina.controller")


class Relocation:
    def __init__(self, ctx: Context, specs: Specs) -> None:
        self.ctx, self.specs = ctx, specs

    def failures(self) -> tuple[set[str], set[int]]:
        """The switches unreachable for ``dead_after`` seconds, and the links (indexes in the topology)
        that a reachable switch reports down."""
        return self.ctx.failover.failures(self.ctx.io, self.ctx.topology)

    def route_around(self, dead: set[str], links: set[int]) -> list[str]:
        """Move each tree that crosses a dead switch or link onto the best single tree of what survives;
        returns one line per tree moved (or left without a path).

        A moved tree keeps its job id, its share and its allocations on the switches it keeps (their
        cells hold its rounds), gets slots and a fresh epoch on the ones it gains, and its incarnation
        grows: its workers send their last window again (docs/protocol.md, "A switch restart"), and
        the rounds lost with the dead parts complete on the new path.  A packed job's trees may then
        share a root: each keeps its own slots, and the job runs at what the survivors carry."""
        if not dead and not links:
            return []
        lines = []
        ctx = self.ctx
        with ctx.lock:
            P = ctx.protocol()
            for job in ctx.state.jobs.values():
                for tree in job.trees:
                    crossed = ctx.failover.crossed(ctx.topology, job, tree, dead, links)
                    if crossed:
                        lines += self.move_tree(job, tree, crossed, dead, links, P)
        return lines

    def move_tree(self, job: JobRecord, tree: TreeRecord, crossed: list[str], dead: set[str], links: set[int],
                  P: protocol.Protocol) -> list[str]:
        topology = self.ctx.topology
        where = f"job {job.name}: tree {tree.job_id} (root {tree.tree.root}) crosses {', '.join(crossed)}, down"
        gone = links | {topology.host_link(s) for s in dead if s in topology.hosts}  # a dead server's link
        try:  # a server's tree in the job's lanes, a core each (its rate is the lanes')
            planned = plan.pack_trees(topology.without(dead, gone), job.members, P.MAX_CHILDREN, 1,
                                      P.wire_factor, lanes=job.lanes).trees[0]
        except (plan.PlanError, TopologyError) as e:
            if not self.ctx.failover.first_report((job.name, tree.job_id, frozenset(dead), frozenset(links))):
                return []
            return [f"{where}; no other tree joins its members ({e}): its workers will time out"]
        if tree.home is None:  # where the planner put it: it goes back once that is whole again
            tree.home, tree.home_rate = tree.tree, tree.rate
        # a tree's lanes cross the same switches, so they move together and share the new tree's rate
        return self.relocate(job, tree, planned.tree, planned.rate / job.lanes, dead, where, "moved to")

    def return_home(self, dead: set[str], links: set[int]) -> list[str]:
        """Move each tree that was moved off a failure back to where the planner put it, once every switch
        there answers and nothing down crosses it (the packing the planner prefers)."""
        lines = []
        ctx = self.ctx
        with ctx.lock:
            for job in ctx.state.jobs.values():
                for tree in job.trees:
                    home = tree.home
                    if home is None or not all(ctx.failover.reachable(ctx.io, s) for s in home.switches()):
                        continue
                    if ctx.failover.crossed(ctx.topology, job, dataclasses.replace(tree, tree=home), dead, links):
                        continue
                    where = f"job {job.name}: tree {tree.job_id} (root {tree.tree.root}): its planned tree is up again"
                    lines += self.relocate(job, tree, home, tree.home_rate, dead, where, "back at")
                    if tree.tree == home:
                        tree.home = None
                        ctx.store.save()
        return lines

    def relocate(self, job: JobRecord, tree: TreeRecord, new: plan.Tree, rate: float, dead: set[str], where: str,
                 verb: str) -> list[str]:
        """Put the tree on ``new``: slots and a fresh epoch on the switches it gains, its entries there, the old
        ones removed where it leaves, and a grown incarnation (its workers send their last window again)."""
        ctx = self.ctx
        before = copy.deepcopy(job)
        gained = [s for s in new.switches() if s not in tree.allocations]
        try:
            placed = admission.place_switches(gained, job.pool_size, ctx.pools(), ctx.held())
        except CapacityError as e:
            return [f"{where}; the tree (root {new.root}) does not fit: {e}"]
        tree.allocations = {s: tree.allocations.get(s) or Allocation(*placed[s], ctx.state.take_epoch(s))
                            for s in new.switches()}
        tree.tree, tree.rate = new, rate
        tree.incarnation += 1
        job.version += 1
        ctx.store.save()
        for switch in sorted(set(new.switches()) | (set(before.switches()) - dead)):
            try:  # each switch on its own: one that cannot be reached must not keep the others from the new tree
                self._rewrite(switch, job, before, new, gained)
            except SwitchError as e:
                ctx.failover.unsynced.add(switch)
                log.warning("job %s: moving tree %d: %s (watch provisions %s once it answers)", job.name, tree.job_id,
                            e, switch)
        self.specs.write(job.name)
        return [f"{where}; {verb} root {new.root} over {', '.join(new.switches())} "
                f"({rate:.3g} Mb/s alone): incarnation {tree.incarnation}, plan version {job.version}; "
                f"its workers send their last window again"]

    def _rewrite(self, switch: str, job: JobRecord, before: JobRecord, new: plan.Tree, gained: list[str]) -> None:
        """One switch of a moved tree: the high-water mark where it is new, the job's entries where the tree
        is, and what the job held there before and holds no more removed."""
        io, reconciler = self.ctx.io, self.ctx.reconciler
        if switch in gained:
            io.install(switch, [reconciler.high_water(switch)], [])
        if switch in new.switches():
            io.install(switch, *reconciler.job_entries(job, switch))
        if switch in before.switches():
            old = reconciler.job_entries(before, switch)
            kept = reconciler.job_entries(job, switch) if switch in job.switches() else ([], [])
            io.remove(switch, *left_over(*old, *kept))
