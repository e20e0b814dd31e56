"""The watch: rounds that follow the state file, provision switches that restarted and move trees off what
stays down, every interval or at once when a switch reports something; and a stalled job's probe, which
asks its switches now rather than waiting for ``dead_after`` of silence."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection

from controller.context import Context
from controller.failover import PROBE_DEADLINE
from controller.provisioning import Provisioning
from controller.relocation import Relocation

log = logging.getLogger("ina.controller")


class Watch:
    def __init__(self, ctx: Context, provisioning: Provisioning, relocation: Relocation) -> None:
        self.ctx, self.provisioning, self.relocation = ctx, provisioning, relocation

    def watch(self, interval: float = 1.0, stop: threading.Event | None = None) -> None:
        """``Controller.watch``: a round every ``interval``, or at once when woken, until ``stop``."""
        stop = stop or threading.Event()
        while not stop.is_set():
            self.wait(interval)
            if not stop.is_set():
                self.once()

    def wait(self, interval: float) -> bool:
        """Until ``interval`` passes or a switch reports a port change or its stream ends (``wake``, which
        this clears); True when woken.  Whatever happens during the round that follows wakes the next."""
        woken = self.ctx.wake.wait(interval)
        self.ctx.wake.clear()
        return woken

    def once(self) -> list[str]:
        """One round, alone (``rounds``); a line per thing done."""
        with self.ctx.rounds:
            return self.round()

    def round(self) -> list[str]:
        ctx = self.ctx
        ctx.store.reload(ctx.lock)  # `ina-ctl job create/delete` run by others since
        lines = []
        for switch in self.provisioning.check_switches():
            jobs = sum(bool(j.on(switch)) for j in ctx.state.jobs.values())
            lines.append(f"{switch} restarted: pipeline, routes and {jobs} job(s) installed again")
            log.warning("%s", lines[-1])
        failures = self.relocation.failures()
        for line in self.relocation.route_around(*failures) + self.relocation.return_home(*failures):
            lines.append(line)
            log.warning("%s", line)
        return lines

    def probe(self, name: str, job_ids: Collection[int]) -> list[str]:
        """A worker of job ``name`` reports these trees stalled: ask each of their switches for its pipeline
        cookie with a short deadline (``failover.PROBE_DEADLINE``; a switch asked within ``PROBE_GAP`` is
        not asked again), take those that do not answer for dead, and run a watch round, so their trees move
        now rather than after ``dead_after`` of silence.  Ids that are not the job's trees are ignored.
        Returns (and logs) a line per switch found silent and per thing the round did."""
        ctx = self.ctx
        job = ctx.state.jobs.get(name)
        ids = set(job_ids)
        trees = [t for t in job.trees if t.job_id in ids] if job is not None else []
        if not trees:
            return []
        switches = sorted({s for t in trees for s in t.tree.switches()})
        with ctx.rounds:
            lines = [f"{s}: does not answer within {PROBE_DEADLINE:g} s, and job {name} reports tree(s) "
                     f"{sorted(t.job_id for t in trees)} stalled: down"
                     for s in ctx.failover.probe(ctx.io, switches)]
            for line in lines:
                log.warning("%s", line)
            return lines + (self.round() if lines else [])
