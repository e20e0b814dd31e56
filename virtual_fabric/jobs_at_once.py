"""Several jobs in one fabric at once, each its own workers and calls, created one after the other as a cluster's
jobs arrive (the controller plans each on what the ones before it leave: ``controller.shared_fabric``).

What ``ina-sim run`` measures for one job, for jobs that meet on links and switches: each call's time, the
model's prediction for it, the job's window and trees, and whether every worker got the same sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from controller.plan import fabric_links
from controller.topology import Topology
from virtual_fabric.fabric import Fabric
from worker.gradients import gradient


@dataclass
class JobRun:
    name: str
    workers: int
    window: int
    roots: list[str]
    links: set[int]  # the fabric links its trees cross (indexes in the topology's links)
    seconds: list[float | None]  # per call: first start to last end (None: some worker failed it)
    model: list[float | None]  # per call: the prediction its workers went by
    identical: bool  # every worker's sums equal, call by call


def run_jobs(topology: Topology, groups: list[list[str]], size: int, calls: int = 2, seed: int = 0,
             timeout: float = 10.0, until: float = 60.0) -> list[JobRun]:
    """Jobs ``j0``, ``j1``, ... of these hosts, created in order, each making ``calls`` float32 calls of ``size``
    values from virtual time 0; run until every worker is done (or ``until``)."""
    fabric = Fabric(topology, seed)
    jobs = [fabric.create_job(f"j{i}", hosts, [[gradient(c, r, size, "float32") for c in range(calls)]
                                               for r in range(len(hosts))], timeout=timeout, mode="ina")
            for i, hosts in enumerate(groups)]
    fabric.run(until)
    out = []
    for job in jobs:
        record = fabric.controller.state.jobs[job.spec.name]
        seconds, model, identical = [], [], True
        for c in range(calls):
            records = [w.records[c] for w in job.workers if len(w.records) > c]
            done = len(records) == len(job.workers) and all(r.error is None and r.ended is not None for r in records)
            seconds.append(max(r.ended for r in records) - min(r.started for r in records) if done else None)
            model.append(records[0].choice.seconds if records and records[0].choice else None)
            identical &= done and all(np.array_equal(r.result, records[0].result) for r in records)
        out.append(JobRun(job.spec.name, len(job.workers), job.spec.pool_size, [t.root for t in job.spec.trees],
                          {i for t in record.trees for i in fabric_links(topology, t.tree)}, seconds, model,
                          identical))
    return out
