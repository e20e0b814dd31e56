"""Keeping the switches provisioned: the pipeline, routes and every live job on each, and what a switch that
restarted lost (its registers: the trees on it grow an incarnation and their specs are written again)."""

from __future__ import annotations

import logging

from controller.context import Context
from controller.p4runtime_client import SwitchError
from controller.specs import Specs

log = logging.getLogger("ina.controller")


class Provisioning:
    def __init__(self, ctx: Context, specs: Specs) -> None:
        self.ctx, self.specs = ctx, specs

    def setup(self, strict: bool = True) -> list[str]:
        """Pipeline, routes and every live job on every switch; safe to repeat.

        ``strict`` False (a watch or the service starting): a switch that does not answer, or stops
        answering meanwhile, is left for the watch (``check_switches`` provisions it once it answers)
        and every other switch is provisioned; returns the switches left."""
        left = []
        with self.ctx.lock:
            for switch in self.ctx.topology.devices:
                try:
                    self.provision(switch)
                except SwitchError as e:
                    if strict:
                        raise
                    self.ctx.failover.unsynced.add(switch)
                    left.append(switch)
                    log.warning("%s: not provisioned (%s); the watch provisions it once it answers", switch, e)
        return left

    def provision(self, switch: str) -> bool:
        """Bring one switch up to date; True when it needed the pipeline (fresh or restarted).

        A switch that needed it has lost its registers under every live job on it: once its entries
        are back, each such tree's incarnation grows and its job spec is written again, which tells the
        job's workers to send their last window again (docs/protocol.md, "A switch restart")."""
        with self.ctx.lock:
            fresh = self.ctx.reconciler.provision(switch)
            if fresh:
                self.lost_registers(switch)
            return fresh

    def lost_registers(self, switch: str) -> None:
        """Each live tree on a restarted switch: incarnation grown, saved, its job's spec written again."""
        jobs = [job for job in self.ctx.state.jobs.values() if job.on(switch)]
        for job in jobs:
            for tree in job.on(switch):
                tree.incarnation += 1
        if not jobs:
            return
        self.ctx.store.save()
        for job in jobs:
            self.specs.write(job.name)
            log.warning("%s lost its registers under job %s: tree(s) %s now at incarnation %s; spec written again, "
                        "so the workers send their last window again", switch, job.name,
                        [t.job_id for t in job.on(switch)], [t.incarnation for t in job.on(switch)])

    def reachable(self, switch: str) -> bool:
        """Whether the switch answered last time it was asked (without asking it now)."""
        return self.ctx.failover.reachable(self.ctx.io, switch)

    def check_switches(self) -> list[str]:
        """Re-provision switches that restarted (or lost their pipeline), and those a tree's move could not
        reach; returns the names of those that needed the pipeline."""
        return self.ctx.failover.check(self.ctx.io, self.ctx.topology, self.provision)
