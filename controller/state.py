"""What the controller must remember between runs: jobs, their trees and allocations, epochs, pipeline knobs.

A job's trees are stored as planned (root and uplink ports), because the plan depends on
link capacities and the solver; table entries and multicast groups are recomputed from
them and the topology by ``controller.plan`` and ``controller.entries``.  Saved as JSON
after every change, replaced atomically.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from controller.entries import Allocation
from controller.pipeline import PipelineOptions
from controller.plan import Tree

EPOCH_LIMIT = 1 << 16  # ina.p4's epoch is bit<16>; 0 means "never used" in its registers


@dataclass
class TreeRecord:
    job_id: int  # the tree's id in the dataplane; its workers listen on WORKER_PORT_BASE + job_id
    tree: Tree
    rate: float  # planned wire Mb/s
    share: float  # of the job's data
    allocations: dict[str, Allocation]  # per switch of the tree
    incarnation: int = 0  # times a switch of the tree lost its registers under the job (the spec tells the workers)


@dataclass
class JobRecord:
    name: str
    members: list[str]  # hosts, in rank order
    pool_size: int  # slots per tree on each of its switches
    trees: list[TreeRecord]  # none for a pure ring
    mode: str = "ina"  # ina, ring or hybrid: what runs
    ina_share: float = 1.0  # of every allreduce through the trees; the rest round the ring
    ring_id: int | None = None  # an id like a tree's, so the ring's port (WORKER_PORT_BASE + id) is the job's own
    pace_mbps: float | None = None  # most each worker offers the trees
    ring_pace_mbps: float | None = None  # most a hybrid's ring sends on each link
    asked_mode: str = "auto"  # what create was asked for: a calibration splits again within it
    asked_alpha: float | None = None
    calibration: dict | None = None  # what `ina-ctl calibrate` measured, and the split it gave
    version: int = 0  # of its plan: grows when a tree moves off a dead switch or link
    ring_sum: str = "native"  # a pure ring's sums: "native" (the tensor's type) or "float64" (wide partials)

    def switches(self) -> set[str]:
        return {s for t in self.trees for s in t.allocations}

    def on(self, switch: str) -> list[TreeRecord]:
        """The job's trees that pass through this switch."""
        return [t for t in self.trees if switch in t.allocations]


@dataclass
class ControllerState:
    options: PipelineOptions = field(default_factory=PipelineOptions)
    jobs: dict[str, JobRecord] = field(default_factory=dict)
    next_epoch: dict[str, int] = field(default_factory=dict)  # per switch, so a reused pool never looks current
    next_job_id: int = 1  # ids are not reused soon: a deleted job's late packets must not match a new job

    def take_epoch(self, switch: str) -> int:
        epoch = self.next_epoch.get(switch, 1)
        self.next_epoch[switch] = epoch % (EPOCH_LIMIT - 1) + 1
        return epoch

    def take_job_id(self, live: set[int], limit: int) -> int | None:
        for _ in range(limit):
            job_id, self.next_job_id = self.next_job_id, self.next_job_id % limit + 1
            if job_id not in live:
                return job_id
        return None

    def save(self, path: Path) -> None:
        data = {"options": asdict(self.options), "next_epoch": self.next_epoch, "next_job_id": self.next_job_id,
                "jobs": {n: asdict(j) for n, j in self.jobs.items()}}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ControllerState:
        data = json.loads(path.read_text())
        jobs = {}
        for name, j in data["jobs"].items():
            if "trees" not in j:
                raise ValueError(f"{path}: job {name} was saved by a controller without packed trees; delete the "
                                 f"state file and the job's entries go with the next `ina-ctl setup`")
            trees = [TreeRecord(t["job_id"], Tree(t["tree"]["root"], tuple(map(tuple, t["tree"]["uplinks"]))),
                                t["rate"], t["share"], {s: Allocation(**a) for s, a in t["allocations"].items()},
                                t.get("incarnation", 0))
                     for t in j.pop("trees")]
            jobs[name] = JobRecord(trees=trees, **j)
        return cls(PipelineOptions(**data["options"]), jobs, data["next_epoch"], data.get("next_job_id", 1))
