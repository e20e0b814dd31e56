"""The book of jobs: creating one (planned, sized, admitted, given ids and epochs, recorded, installed, its
spec written), a rail set all or none, and deleting one.  Ids and epochs are taken only once a job is
certain to fit, so a refused job changes nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controller import admission, plan
from controller.admission import Admitted, Placement
from controller.capacity import CapacityError
from controller.context import Context
from controller.entries import Allocation
from controller.job_plan import JobError, is_auto
from controller.p4runtime_client import SwitchError
from controller.planning import Planning
from controller.reconcile import WORKER_PORT_BASE
from controller.servers import free_shares, server_loads
from controller.shared_fabric import BUSY_FLOOR
from controller.specs import Specs
from controller.state import ControllerState, JobRecord, TreeRecord
from worker.jobspec import JobSpec, Rail, rail_name

log = logging.getLogger("ina.controller")
MAX_JOB_ID = 32767 - WORKER_PORT_BASE  # a job id's worker port stays below Linux's ephemeral range


class JobBook:
    def __init__(self, ctx: Context, planning: Planning, specs: Specs) -> None:
        self.ctx, self.planning, self.specs = ctx, planning, specs

    def create(self, name: str, members: list[str], pool_size: int | str | None = None,
               pool_base: int | None = None, trees: int | str | plan.Plan | None = "auto", mode: str = "auto",
               alpha: float | None = None, ring_sum: str = "native", ring_layout: str | None = None, *,
               admit: bool = False, lease: tuple[float, str] | None = None, lanes: int | str = 1,
               rail: Rail | None = None) -> JobSpec:
        """Plan the job (``trees``: "auto", or at most N; ``mode``: ina, ring, hybrid, or auto, which picks
        per call; ``alpha`` a hybrid's share through the trees; ``ring_layout`` the ring's; ``lanes``: each
        planned tree installed as that many trees, or "auto", sharing ``pool_size``) and install every tree.
        ``pool_size`` None or "auto": each tree's window is what its bandwidth-delay product needs, within what
        its switches have free now and its fair share where auto-sized jobs meet (``auto_windows``); a job keeps
        its window while it lives.

        ``admit``: a job the switches have no room for gets less rather than an error (``admission``), and
        its record says what and why.  ``lease``: (seconds, sha256 of its secret), for the service.
        ``rail``: the rail of a set it is (``create_rails``), in its record and spec.

        Planned without the lock; sized, admitted, recorded and installed under it."""
        ctx, store = self.ctx, self.ctx.store
        store.check_name(name)
        auto = is_auto(pool_size)
        if not auto:
            self.planning.check_pool(pool_size)
        planned = self.planning.plan(members, trees, mode, alpha, ring_sum, pool_size, ring_layout, lanes)
        need = planned.pool_size
        with ctx.lock:
            store.check_name(name)
            if auto and planned.tree_plan.trees:
                planned = self.planning.fair_sized(name, planned)
            pool_size = planned.pool_size  # each installed (lane) tree's
            if admit:
                admitted = self.planning.admit(name, planned, members, trees, pool_size, alpha, ring_sum,
                                               ring_layout)
                if admitted.note:
                    log.warning("job %s admitted with less: %s", name, admitted.note)
            else:
                try:
                    trees_planned = [p.tree for p in planned.tree_plan.trees]
                    admitted = Admitted(planned, pool_size, admission.place(trees_planned, pool_size, ctx.pools(),
                                                                            ctx.held(), pool_base))
                except CapacityError as e:
                    raise JobError(str(e)) from None
            job = self.record(name, admitted)
            if lease is not None:
                job.lease_seconds, job.secret_hash = lease
            job.rail = rail
            job.auto_window = need if auto and job.trees else None  # a ring alone holds no window
            self.install(name, job)
            spec = self.specs.write(name)
            log.info("job %s: %d members, %d tree(s) (ids %s) over %s, mode %s", name, len(members), len(job.trees),
                     [t.job_id for t in job.trees], sorted(job.switches()), job.mode)
            return spec

    def install(self, name: str, job: JobRecord) -> None:
        """The job recorded, saved, and its entries on every switch of its trees; on a switch's failure, taken off
        them again (best effort) and out of the record."""
        ctx = self.ctx
        ctx.state.jobs[name] = job  # saved before any write: a crash leaves a job setup() completes
        try:
            ctx.store.save()
            for switch in job.switches():  # first the switch's own record of the ids it has seen
                ctx.io.install(switch, [ctx.reconciler.high_water(switch)], [])
            for switch in job.switches():
                ctx.io.install(switch, *ctx.reconciler.job_entries(job, switch))
        except (SwitchError, OSError):
            del ctx.state.jobs[name]
            for switch in job.switches():  # best effort, every switch: a failed batch may be half applied
                try:
                    ctx.io.remove(switch, *ctx.reconciler.job_entries(job, switch))
                except SwitchError as e:
                    log.warning("%s: rollback of job %s incomplete (setup() removes the rest): %s",
                                switch, name, e)
            ctx.store.save()
            raise

    def create_rails(self, name: str, rails: Sequence[Sequence[str]], **options) -> list[JobSpec]:
        """A rail set: rail i's job, ``NAME-rail<i>`` (``rail_name``), of ``rails[i]``'s hosts (every node's
        local rank i, in node order), with ``create_job``'s keyword ``options`` for each.  All or none: every
        name is checked first, and a rail that fails takes the rails made before it away again, so no node
        is left with half a set (its ranks would wait for a rail that is not there)."""
        names = [rail_name(name, i) for i in range(len(rails))]
        if not names:
            raise JobError(f"rail set {name}: no rails")
        for each in names:
            self.ctx.store.check_name(each)
        specs: list[JobSpec] = []
        try:
            for i, (each, members) in enumerate(zip(names, rails)):
                specs.append(self.create(each, list(members), rail=Rail(name, i, len(names)), **options))
        except BaseException:
            for made in reversed(specs):
                try:
                    self.delete(made.name, force=True)
                except Exception as e:  # noqa: BLE001 - the rail's own failure is the one to report
                    log.error("rail set %s: %s not rolled back (delete it): %s", name, made.name, e)
            raise
        return specs

    def delete(self, name: str, force: bool = False) -> None:
        """``Controller.delete_job``: its entries off every switch (``force``: an unreachable switch is left
        for the watch), then the record, its cached plan and its spec file."""
        ctx = self.ctx
        with ctx.lock:
            job = ctx.store.job(name)
            for switch in job.switches():
                try:
                    ctx.io.remove(switch, *ctx.reconciler.job_entries(job, switch))
                except SwitchError as e:
                    if not force:
                        raise
                    ctx.failover.unsynced.add(switch)
                    log.warning("job %s: %s keeps its entries until it answers: %s", name, switch, e)
            del ctx.state.jobs[name]
            self.specs.forget(name)
            ctx.store.save()  # a switch that was down keeps stale entries until setup() converges it
            ctx.store.remove_spec(name)

    def record(self, name: str, admitted: Admitted) -> JobRecord:
        """The job's record: its trees with job ids and fresh epochs, and an id for its ring's port.  Ids
        and epochs are taken only here, once the job is certain to fit: a refused job changes nothing."""
        planned, state = admitted.plan, self.ctx.state
        live = {t.job_id for j in state.jobs.values() for t in j.trees} | \
            {j.ring_id for j in state.jobs.values() if j.ring_id is not None}
        first_free = state.next_job_id
        ids = []
        for _ in range(len(admitted.placements) + 1):  # and one for the ring's port: any call may go round it
            job_id = state.take_job_id(live, MAX_JOB_ID)
            if job_id is None:
                state.next_job_id = first_free
                raise JobError(f"no free job id for {len(admitted.placements)} tree(s) and a ring")
            live.add(job_id)
            ids.append(job_id)
        records = []
        for job_id, p, placed in zip(ids, planned.tree_plan.trees, admitted.placements):
            records.append(TreeRecord(job_id, p.tree, p.rate, p.share, allocations(placed, state)))
        found = free_shares(self.ctx.topology, server_loads(self.planning.running_servers()), True, BUSY_FLOOR)
        return JobRecord(name, list(planned.tree_plan.members), admitted.pool_size, records, planned.mode,
                         planned.alpha, ids[-1], planned.ring_layout, ring_sum=planned.ring_sum,
                         admission=admitted.note, lanes=planned.lanes,
                         server_shares={r.tree.root: found[r.tree.root] for r in records if r.tree.root in found})


def allocations(placed: Placement, state: ControllerState) -> dict[str, Allocation]:
    """A placed tree's slots and cell on each switch, with a fresh epoch there."""
    return {switch: Allocation(base, cell, state.take_epoch(switch)) for switch, (base, cell) in placed.items()}
