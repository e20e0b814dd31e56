"""What the controller must remember between runs: jobs, their trees and allocations, epochs, pipeline knobs.

A job's trees are stored as planned (root and uplink ports), because the plan depends on
link capacities and the solver; table entries and multicast groups are recomputed from
them and the topology by ``controller.plan`` and ``controller.entries``.  Saved as JSON
after every change: written whole, synced, renamed over the old file, and the folder synced, so
a crash leaves the old state or the new one, never half of either.  One process writes it at a
time (``StateLock``): the controller service holds it while it runs, each ``ina-ctl`` command for
its own run.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from controller.entries import Allocation
from controller.pipeline import PipelineOptions
from controller.plan import Tree
from worker.jobspec import JobSpecError, Rail

STATE_FILE = "controller-state.json"  # beside the network file, unless told otherwise
FORMAT = 3  # 3: a job's mode is chosen per call (its model); 2: leases; a file without "format" is 1
_BEFORE_3 = ("ina_share", "pace_mbps", "ring_pace_mbps", "asked_mode", "asked_alpha")  # a job's format-2 fields
EPOCH_LIMIT = 1 << 16  # ina.p4's epoch is bit<16>; 0 means "never used" in its registers


_REMEDY = ("restore it, or move it away: its jobs are then forgotten, and `ina-ctl setup` removes their entries "
           "(the switches' own high-water marks keep epochs and job ids from repeating)")


class StateError(ValueError):
    """A state file this controller cannot read: truncated, edited, or from a newer controller."""


def _why(e: json.JSONDecodeError | UnicodeDecodeError) -> str:
    """What is wrong with the file's text, and whether it ends early (a truncated write, a full disk)."""
    if isinstance(e, UnicodeDecodeError):
        return f"byte {e.start} is not UTF-8"
    if not e.doc.strip():
        return "it is empty"
    cut = e.pos >= len(e.doc.rstrip()) or e.msg.startswith("Unterminated string")
    return f"{e.msg}: line {e.lineno} column {e.colno}" + (" (it ends there: truncated?)" if cut else "")


@dataclass
class TreeRecord:
    job_id: int  # the tree's id in the dataplane; its workers listen on WORKER_PORT_BASE + job_id
    tree: Tree
    rate: float  # planned wire Mb/s
    share: float  # of the job's data
    allocations: dict[str, Allocation]  # per switch of the tree
    incarnation: int = 0  # times a switch of the tree lost its registers under the job (the spec tells the workers)
    home: Tree | None = None  # where the planner put it, while it runs elsewhere (moved off a failure)
    home_rate: float = 0.0


@dataclass
class JobRecord:
    name: str
    members: list[str]  # hosts, in rank order
    pool_size: int  # slots per tree on each of its switches
    trees: list[TreeRecord]  # none for a job that runs a ring alone
    mode: str = "auto"  # ina, ring, hybrid, or auto: each call as the model predicts fastest
    alpha: float | None = None  # a hybrid's share through the switches, if fixed
    ring_id: int | None = None  # an id like a tree's, so the ring's port (WORKER_PORT_BASE + id) is the job's own
    ring_layout: str | None = None  # the ring's layout, if fixed
    calibration: dict | None = None  # what `ina-ctl calibrate` measured (ina_mbps, by layout ring_mbps and
    # ring_efficiency, host_latency)
    version: int = 0  # of its plan: grows when a tree moves off a dead switch or link
    ring_sum: str = "native"  # a pure ring's sums: "native" (the tensor's type) or "float64" (wide partials)
    lease_seconds: float | None = None  # a service's job lives this long unrenewed (None: until deleted)
    secret_hash: str | None = None  # sha256 of the secret its owner renews and deletes it with
    admission: str = ""  # what the job got, and why, when it is less than it asked for
    lanes: int = 1  # each planned tree installed as this many consecutive trees (``job_plan.in_lanes``)
    rail: Rail | None = None  # the rail of a set it is (``Controller.create_rails``); None: a plain job
    auto_window: int | None = None  # an auto-sized job's need (``windows.bdp_window``); None: its size was asked
    # per server of its trees: the share of its cores the job found when it was planned (what running jobs left,
    # at least a fair share: ``servers.free_shares``); its model sums there at that share of the server's rate
    server_shares: dict[str, float] = field(default_factory=dict)

    def spec_version(self) -> int:
        """Grows with every change of the job's spec: its plan's version and its trees' incarnations only grow."""
        return self.version + sum(t.incarnation for t in self.trees)

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
    host_latency: float | None = None  # seconds, wire to a worker's loop, as the last calibration measured
    # per aggregation server: contributions one core sums per second, as `ina-ctl calibrate --server` measured
    server_rates: dict[str, float] = field(default_factory=dict)

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
        data = {"format": FORMAT, "options": asdict(self.options), "next_epoch": self.next_epoch,
                "next_job_id": self.next_job_id, "host_latency": self.host_latency,
                "server_rates": self.server_rates,
                "jobs": {n: _job_dict(j) for n, j in self.jobs.items()}}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as f:
            f.write(json.dumps(data, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    @classmethod
    def load(cls, path: Path) -> ControllerState:
        """The state saved at ``path``; StateError naming the file and what is wrong with it."""
        try:
            data = json.loads(path.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise StateError(f"{path}: not a controller state file: {_why(e)}; {_REMEDY}") from None
        try:
            return cls._parse(path, data)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            if isinstance(e, StateError):
                raise
            what = f"no {e.args[0]!r} where one was expected" if isinstance(e, KeyError) else str(e)
            raise StateError(f"{path}: not a controller state file of format {FORMAT} or older ({what}); "
                             f"{_REMEDY}") from None

    @classmethod
    def _parse(cls, path: Path, data: dict) -> ControllerState:
        if not isinstance(data, dict):
            raise StateError(f"{path}: not a controller state file: a JSON {type(data).__name__}, not an object; "
                             f"{_REMEDY}")
        if data.get("format", 1) > FORMAT:
            raise StateError(f"{path}: state format {data['format']} is newer than this controller's ({FORMAT})")
        jobs = {}
        for name, j in data["jobs"].items():
            if "trees" not in j:
                raise StateError(f"{path}: job {name} was saved by a controller without packed trees; delete the "
                                 f"state file and the job's entries go with the next `ina-ctl setup`")
            trees = [TreeRecord(t["job_id"], _tree(t["tree"]),
                                t["rate"], t["share"], {s: Allocation(**a) for s, a in t["allocations"].items()},
                                t.get("incarnation", 0), _tree(t.get("home")), t.get("home_rate", 0.0))
                     for t in j.pop("trees")]
            if data.get("format", 1) < 3:  # the mode it asked for is now chosen per call
                j["mode"], j["alpha"] = (j.get("asked_mode", "auto") if trees else "ring"), j.get("asked_alpha")
                for key in _BEFORE_3:
                    j.pop(key, None)
            rail = j.pop("rail", None)
            try:
                rail = None if rail is None else Rail.from_dict(rail, f"job {name}")
            except JobSpecError as e:
                raise StateError(f"{path}: {e}; {_REMEDY}") from None
            jobs[name] = JobRecord(trees=trees, rail=rail, **j)
        return cls(PipelineOptions(**data["options"]), jobs, data["next_epoch"], data.get("next_job_id", 1),
                   data.get("host_latency"), _server_rates(path, data.get("server_rates", {})))


def _server_rates(path: Path, data: object) -> dict[str, float]:
    """What calibrations measured of the servers: each a positive number of contributions per second and core."""
    if not isinstance(data, dict) or not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0
                                             for v in data.values()):
        raise StateError(f"{path}: server_rates must map each server to a positive number of contributions per "
                         f"second and core, not {data!r}; {_REMEDY}")
    return {str(k): float(v) for k, v in data.items()}


def _job_dict(job: JobRecord) -> dict:
    """A job as the file holds it; ``rail`` only when it is one, so a plain job's record is as before rails."""
    data = asdict(job)
    if job.rail is None:
        del data["rail"]
    return data


def _tree(data: dict | None) -> Tree | None:
    return None if data is None else Tree(data["root"], tuple(map(tuple, data["uplinks"])), data.get("meeting"))


class StateLock:
    """An exclusive lock beside the state file (``flock``, so a dead holder frees it): one writer at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self._fd: int | None = None

    def acquire(self, wait: bool) -> bool:
        """Take it; with ``wait`` False, False at once when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def holder(self) -> str:
        """What the holder wrote in the lock file (the service writes its address)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def note(self, text: str) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text.encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
