"""Planning and admission against the fabric as it is now: a new job's plan where running jobs leave links
and servers free, its window where auto-sized jobs meet, and what it gets when the switches are full or a
switch does not answer.  Nothing here writes to a switch or the state."""

from __future__ import annotations

import dataclasses
from collections import Counter

from controller import admission, plan
from controller.admission import Admitted
from controller.capacity import MIN_POOL
from controller.context import Context
from controller.job_plan import JobError, JobPlan, in_lanes, plan_job, sized, tree_count, with_trees
from controller.p4runtime_client import SwitchError
from controller.servers import RunningServerTree, contributions_pps, server_loads
from controller.shared_fabric import RunningTree, fabric_loads, new_job_trees, view
from controller.topology import Topology
from controller.windows import fair_windows


class Planning:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def plan(self, members: list[str], trees: int | str | plan.Plan | None = "auto", mode: str = "auto",
             alpha: float | None = None, ring_sum: str = "native", pool_size: int | str | None = None,
             ring_layout: str | None = None, lanes: int | str = 1) -> JobPlan:
        """The job's plan (``job_plan.plan_job``) with this controller's options, without touching a switch, on the
        fabric as a new job finds it: its trees where running jobs leave links free, its model on its fair share of
        the links they use (``shared_fabric``)."""
        seen, found = self.new_job_trees(members, trees, mode)
        return plan_job(seen, members, self.ctx.protocol(), found or trees, mode, alpha, ring_sum, pool_size,
                        ring_layout, self.ctx.host_latency, host_cost=self.ctx.host_cost, lanes=lanes)

    def new_job_fabric(self) -> Topology:
        """The topology as a new job finds it: each link between switches offers what running jobs' trees leave
        of it, at least a fair share beside them (``shared_fabric``)."""
        topology = self.ctx.topology
        return view(topology, fabric_loads(topology, self.running_trees()),
                    server_loads(self.running_servers()), fair=True)

    def running_trees(self) -> list[RunningTree]:
        with self.ctx.lock:
            return [(job.name, t.tree, t.rate) for job in self.ctx.state.jobs.values() for t in job.trees]

    def running_servers(self) -> list[RunningServerTree]:
        frame = self.ctx.protocol().frame_bytes
        with self.ctx.lock:
            return [(job.name, t.tree.root, contributions_pps(t.rate, len(job.members), frame))
                    for job in self.ctx.state.jobs.values() for t in job.trees
                    if plan.is_server_tree(self.ctx.topology, t.tree)]

    def new_job_trees(self, members: list[str], trees: int | str | plan.Plan | None,
                      mode: str) -> tuple[Topology, plan.Plan | None]:
        """The fabric a new job finds (its links and servers as running jobs leave them), and its trees where running
        jobs leave links free (None: the planner's own packing of that fabric, or the trees given)."""
        if mode == "ring" or isinstance(trees, plan.Plan):
            return self.new_job_fabric(), None
        P = self.ctx.protocol()
        try:
            seen, found = new_job_trees(self.ctx.topology, self.running_trees(), members, P.MAX_CHILDREN,
                                        tree_count(trees), P.wire_factor, server_loads(self.running_servers()))
        except plan.PlanError as e:
            raise JobError(str(e)) from None
        if found is not None and any(plan.is_server_tree(seen, t.tree) for t in found.trees):
            return seen, None  # packed in the job's lanes (a core each) by the planner itself, on the fair view
        return seen, found

    def admit(self, name: str, planned: JobPlan, members: list[str], trees: int | str | None, pool_size: int,
              alpha: float | None, ring_sum: str, ring_layout: str | None) -> Admitted:
        """Admission (``admission.admit``) on the switches that answer: a job planned over one known to be
        down is planned again without it, or refused naming it (SwitchError) when nothing else joins its
        members."""
        replan = self.replan(members, alpha, ring_sum, ring_layout, planned.lanes)
        down = self.down()
        seen = self.new_job_fabric()
        topology = seen.without(down) if down else seen
        crossed = sorted(down & {s for p in planned.tree_plan.trees for s in p.tree.switches()})
        if crossed:
            try:
                planned = replan(topology, None if trees in (None, "auto") else int(trees), planned.mode, pool_size)
            except JobError as e:
                raise SwitchError(f"job {name}: switch(es) {', '.join(crossed)} do not answer, and no tree joins "
                                  f"its members without them ({e}); the watch provisions them once they answer"
                                  ) from None
        admitted = admission.admit(planned, pool_size, topology, self.ctx.pools(), self.ctx.held(), replan)
        if crossed:
            around = f"planned around unreachable switch(es) {', '.join(crossed)}"
            admitted = dataclasses.replace(admitted, note=f"{around}; {admitted.note}" if admitted.note else around)
        return admitted

    def auto_windows(self, extra: dict[str, tuple[int, dict[str, int]]] | None = None) -> dict[str, int]:
        """Each auto-sized job's fair window now (``windows.fair_windows``): its need where the switches have
        room, else its max-min share of the slots that jobs of an asked size leave; ``extra``: a job not
        created yet, name: (need, its trees on each switch)."""
        state = self.ctx.state
        demands = {j.name: j.auto_window for j in state.jobs.values() if j.auto_window is not None}
        uses = {name: dict(Counter(s for t in state.jobs[name].trees for s in t.allocations)) for name in demands}
        for name, (need, on) in (extra or {}).items():
            demands[name], uses[name] = need, on
        room = {s: slots for s, (slots, _) in self.ctx.pools().items()}
        for job in state.jobs.values():
            if job.auto_window is None:
                for t in job.trees:
                    for switch in t.allocations:
                        room[switch] -= job.pool_size
        return fair_windows(demands, uses, room)

    def fair_sized(self, name: str, planned: JobPlan) -> JobPlan:
        """An auto-sized job's plan at its fair window (``auto_windows``), within the slots its switches have
        free now (jobs already running keep theirs: their workers hold their window for the job's life)."""
        on = dict(Counter(s for p in planned.tree_plan.trees for s in p.tree.switches()))
        fair = self.auto_windows({name: (planned.pool_size, on)})[name]
        held = self.ctx.held()
        pools = self.ctx.pools()
        free = min((pools[s][0] - sum(n for _, n, _ in held.get(s, []))) // trees for s, trees in on.items())
        window = min(fair, free)
        if window == planned.pool_size or window < MIN_POOL:  # too small a window: admission's fallbacks decide
            return planned
        return sized(self.new_job_fabric(), planned, self.ctx.protocol(), window, self.ctx.host_latency,
                     host_cost=self.ctx.host_cost)

    def down(self) -> set[str]:
        """The switches known not to answer now: unreachable since a watch round, left out of a setup or a
        write, or whose stream ended (a switch never asked is taken to answer)."""
        failover = self.ctx.failover
        found = set(failover.unreachable) | failover.unsynced
        found |= {s for s, c in self.ctx.io.connections() if not c.alive}
        return found & set(self.ctx.topology.devices)

    def replan(self, members: list[str], alpha: float | None, ring_sum: str, ring_layout: str | None,
               lanes: int = 1) -> admission.Replan:
        """Admission's planner: trees packed on the topology it shows (in the job's ``lanes``, each on the pool
        it is given; a server's rows a core per lane), the model on the whole network."""
        ctx = self.ctx
        P = ctx.protocol()

        def replan(topology: Topology, trees: int | None, mode: str, pool_size: int) -> JobPlan:
            if mode == "ring":
                return plan_job(ctx.topology, members, P, None, "ring", None, ring_sum, pool_size, ring_layout,
                                ctx.host_latency, host_cost=ctx.host_cost)
            try:
                found = plan.pack_trees(topology, members, P.MAX_CHILDREN, trees, P.wire_factor, lanes=lanes)
            except plan.PlanError as e:
                raise JobError(str(e)) from None
            return with_trees(ctx.topology, in_lanes(found, lanes), P, mode, alpha if mode == "hybrid" else None,
                              ring_sum, pool_size, ring_layout, ctx.host_latency, host_cost=ctx.host_cost,
                              lanes=lanes)

        return replan

    def check_pool(self, pool_size: int) -> None:
        """An asked pool size: JobError unless it is within the largest switch's slot pool."""
        most = max(self.ctx.pipeline(s).pool_slots for s in self.ctx.topology.devices)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or not 1 <= pool_size <= most:
            raise JobError(f"pool size {pool_size} is outside 1..{most} (the switches' slot pools)")
