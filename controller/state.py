"""What the controller must remember between runs: jobs, their allocations, epochs, pipeline knobs.

Everything else (tree, table entries, multicast groups) is recomputed from this and the
topology by ``controller.plan``.  Saved as JSON after every change, replaced atomically.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from controller.pipeline import PipelineOptions
from controller.plan import Allocation

EPOCH_LIMIT = 1 << 16  # ina.p4's epoch is bit<16>; 0 means "never used" in its registers


@dataclass
class JobRecord:
    name: str
    job_id: int
    members: list[str]  # hosts, in rank order
    pool_size: int
    allocations: dict[str, Allocation]  # per switch of the job's tree


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
            allocs = {s: Allocation(**a) for s, a in j.pop("allocations").items()}
            jobs[name] = JobRecord(allocations=allocs, **j)
        return cls(PipelineOptions(**data["options"]), jobs, data["next_epoch"], data.get("next_job_id", 1))
