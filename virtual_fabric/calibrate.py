"""``ina-ctl calibrate``'s bursts in a simulated fabric (``controller.calibrate.Burst``): the temporary job's
workers run in the fabric's virtual time instead of as processes on the hosts, so a server's rate is measured
against its simulated engines as it is against a real server's cores."""

from __future__ import annotations

import statistics

import numpy as np

from controller.calibrate import Burst
from controller.controller import Controller, JobError
from virtual_fabric.fabric import Fabric
from worker.jobspec import JobSpec

CALLS = 3  # a warm-up of the size, then the timed calls (as the hosts' bursts: ``worker.cli --repeat 3``)


def fabric_burst(fabric: Fabric, deadline: float = 10.0) -> Burst:
    """A burst of ``CALLS`` float calls of small whole numbers (so every sum is exact and checked) on the spec's
    members, within ``deadline`` seconds of virtual time; JobError naming the rank that failed."""
    def burst(ctl: Controller, spec: JobSpec, values: int, timeout: float) -> tuple[float, list[float]]:
        hosts = [m.host for m in spec.members]
        arrays = [[np.full(values, rank + call + 1, np.float32) for call in range(CALLS)]
                  for rank in range(len(hosts))]
        job = fabric.start_workers(spec, hosts, arrays, timeout)
        try:
            fabric.run(fabric.loop.now + deadline)
        finally:
            fabric.jobs.pop(spec.name, None)
            for host in hosts:
                fabric.hosts.pop(host, None)
        for w in job.workers:
            records = w.records
            failed = next((r.error for r in records if r.error), None)
            if failed or len(records) < CALLS or any(r.ended is None for r in records):
                raise JobError(f"calibration: rank {w.rank} ({hosts[w.rank]}): "
                               f"{failed or f'{len(records)} of {CALLS} calls within {deadline:g} s'}")
            for call, r in enumerate(records):
                expected = sum(rank + call + 1 for rank in range(len(hosts)))
                if not np.array_equal(r.result, np.full(values, expected, np.float32)):
                    raise JobError(f"calibration: rank {w.rank}'s call {call}: wrong sums")
        seconds = [max(w.records[call].ended - w.records[call].started for w in job.workers)
                   for call in range(1, CALLS)]
        return statistics.median(seconds), []

    return burst
