"""A live job's plan and spec: its model made again only when what it is made of changes (its trees, a
calibration, the hosts' latency or cost, a server's rate), and its spec file, which its workers follow."""

from __future__ import annotations

import json
from collections.abc import Mapping

from controller import plan
from controller.context import Context
from controller.job_plan import JobError, JobPlan, with_trees
from controller.reconcile import worker_port
from controller.servers import with_shares
from worker.jobspec import JobSpec, Member, TreeSpec


class Specs:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._plans: dict[str, tuple[tuple, JobPlan]] = {}  # a live job's plan, while what it is made of holds

    def job_plan(self, name: str) -> JobPlan:
        """A live job's plan: the trees it holds now, its layouts and its model (made again only when the
        trees move, a calibration measures, or the hosts' latency or cost changes: for 1,024 hosts it takes
        seconds, and the service answers with it)."""
        ctx = self.ctx
        job = ctx.store.job(name)
        measured = job.calibration or {}
        key = (tuple(job.members), [(t.tree, t.rate, t.share) for t in job.trees], json.dumps(measured, sort_keys=True),
               ctx.host_latency, ctx.host_cost, job.mode, job.alpha, job.ring_layout, job.ring_sum, job.pool_size,
               job.lanes, tuple(sorted(ctx.state.server_rates.items())), tuple(sorted(job.server_shares.items())))
        cached = self._plans.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        P = ctx.protocol()
        trees = tuple(plan.PlannedTree(t.tree, t.rate, t.share) for t in job.trees)
        found = plan.Plan(tuple(job.members), trees, sum(t.rate for t in trees), 0.0, (), 0, 0.0, P.wire_factor)
        latency = measured.get("host_latency") or ctx.host_latency
        shared = with_shares(ctx.topology, job.server_shares)  # of each server, what it found when planned
        planned = with_trees(shared, found, P, job.mode, job.alpha, job.ring_sum, job.pool_size, job.ring_layout,
                             latency, measured.get("ina_mbps"), efficiencies(measured), ctx.host_cost, job.lanes)
        self._plans[name] = (key, planned)
        return planned

    def forget(self, name: str) -> None:
        """Drop a deleted job's cached plan."""
        self._plans.pop(name, None)

    def job_spec(self, name: str) -> JobSpec:
        """What the job's workers need: members, trees (ports, children, incarnations, lanes), layouts, model."""
        ctx = self.ctx
        job, topology = ctx.store.job(name), ctx.topology
        P = ctx.protocol()
        members = []
        for rank, host in enumerate(job.members):
            switch = topology.switches[topology.attachment[host][0]]
            members.append(Member(rank, host, str(topology.hosts[host].ip.ip), switch.name, str(switch.ip),
                                  switch.mac))
        planned = self.job_plan(name)
        trees = []
        for i, t in enumerate(job.trees):
            nodes = ctx.reconciler.tree_nodes(job, t)
            server = plan.is_server_tree(topology, t.tree)  # the members send to it, not to their switch
            at = plan.server_of(job.members, t.tree) if server else {m.host: m.switch for m in members}
            children = tuple(next(c.index for c in nodes[at[m.host]].children if c.node == m.host) for m in members)
            ips = tuple(str(topology.hosts[at[m.host]].ip.ip) for m in members) if server else None
            trees.append(TreeSpec(t.job_id, t.tree.root, t.share, t.rate, worker_port(t.job_id), children,
                                  t.incarnation, planned.lane_of(i),
                                  str(topology.hosts[t.tree.root].ip.ip) if server else None,
                                  ips if t.tree.uplinks else None))
        return JobSpec(name, P.values, P.INA_UDP_PORT, job.pool_size, tuple(members), tuple(trees), job.mode,
                       None if job.ring_id is None else worker_port(job.ring_id), planned.layouts, planned.model,
                       job.alpha, job.ring_layout, job.version, job.ring_sum, job.rail)

    def write(self, name: str) -> JobSpec:
        """The job's spec, written to its file (when the controller keeps them)."""
        spec = self.job_spec(name)
        self.ctx.store.save_spec(spec)
        return spec

    def calibrated(self, name: str, ina_mbps: float | None, ring_mbps: Mapping[str, float] | None,
                   host_latency: float | None = None, ring_efficiency: Mapping[str, float] | None = None) -> JobSpec:
        """Record what a calibration measured (``controller.calibrate``): C where the trees carried less than
        their links, each ring layout's rate and what TCP got of its fair share, and the hosts' latency (also
        the controller's for later jobs).  The job's model is made again from them; returns the new spec."""
        ctx = self.ctx
        with ctx.lock:
            job = ctx.store.job(name)
            links = sum(t.rate for t in job.trees) or ctx.topology.slowest_link_mbps(job.members)
            job.calibration = {"ina_mbps": ina_mbps if ina_mbps is not None and ina_mbps < links * 0.98 else None,
                               "ring_mbps": dict(ring_mbps or {}), "ring_efficiency": dict(ring_efficiency or {}),
                               "host_latency": host_latency, "link_mbps": links}
            if host_latency is not None:
                ctx.state.host_latency = host_latency
            ctx.store.save()
            return self.write(name)

    def server_calibrated(self, server: str, per_core_pps: float) -> list[str]:
        """Record a server's measured per-core rate (``calibrate.calibrate_server``): from now on the topology every
        plan, model, admission and move sees says so.  Live jobs' models are made again (their specs written);
        returns their names.  A job keeps its trees and their shares (``ina-ctl job delete/create`` plans anew)."""
        ctx = self.ctx
        if server not in ctx.network.topology.servers:
            raise JobError(f"{server} is not an aggregation server of the topology (servers: "
                           f"{', '.join(ctx.network.topology.servers) or 'none'})")
        if not per_core_pps > 0:
            raise JobError(f"{server}: a measured rate must be positive, not {per_core_pps!r}")
        with ctx.lock:
            ctx.state.server_rates[server] = float(per_core_pps)
            ctx.store.save()
            jobs = sorted(j.name for j in ctx.state.jobs.values() if any(t.tree.root == server for t in j.trees))
            for name in jobs:
                self.write(name)
            return jobs


def efficiencies(measured: dict) -> dict[str, float]:
    """A calibration's ring efficiencies by layout; a state file written before they were measured (or
    edited by hand) has none, or values the model cannot use, which count as unmeasured."""
    found = measured.get("ring_efficiency")
    if not isinstance(found, dict):
        return {}
    return {k: float(v) for k, v in found.items()
            if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1}
