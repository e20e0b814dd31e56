"""The job spec: everything a worker needs to join a job, written by the controller as JSON.

A worker loads it and picks its own entry by rank; nothing here needs gRPC, so training
hosts read it with the standard library alone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Member:
    rank: int
    host: str
    ip: str  # the worker's own address; results come to ip:port
    port: int  # the worker's UDP port
    child: int  # its index at its switch: the `child` header field
    switch: str
    switch_ip: str  # where aggregation packets go (UDP to switch_ip:udp_port)
    switch_mac: str


@dataclass(frozen=True)
class JobSpec:
    name: str
    job_id: int
    values: int  # int32 values per packet (INA_VALUES)
    udp_port: int  # the switches' aggregation port
    pool_size: int  # slots a worker may use: 0 .. pool_size-1, two sets each
    members: tuple[Member, ...]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        data = json.loads(Path(path).read_text())
        members = tuple(Member(**m) for m in data.pop("members"))
        return cls(members=members, **data)
