"""The job spec: everything a worker needs to join a job, as JSON.

The worker owns this format and the controller writes it (the worker never imports the
controller), so training hosts read it with the standard library and numpy alone.

A job runs over one or more aggregation trees.  Each tree is its own job id in the
dataplane, with its own slot pools on its switches and its own UDP port at every worker;
every allreduce is split over the trees by their shares, on chunk boundaries::

    {"format": "ina-job/2", "name": "train", "values": 64, "udp_port": 48879, "pool_size": 64,
     "members": [{"rank": 0, "host": "h1", "ip": "10.0.0.1", "switch": "leaf1",
                  "switch_ip": "10.0.0.254", "switch_mac": "02:00:00:00:fe:01"}, ...],
     "trees": [{"job_id": 7, "root": "spine1", "share": 0.5, "rate_mbps": 4.0, "port": 16391,
                "children": [0, 1, 0, 1]}, ...]}

``children[rank]`` is the member's child index at its switch in that tree (the ``child``
header field, its bit in the slot bitmap).

A hybrid job also sends the share ``1 - ina_share`` of every allreduce through a TCP ring of
its members (each listening on ``ring_port``) at the same time, and paces its packets to the
switches at ``ina_pace_mbps`` (wire Mb/s) so they never offer more than the trees take, and
the ring's connections at ``ring_pace_mbps`` (the rest of the link): unpaced, TCP fills the
queues in front of the switches' packets, whose RTT-bound slot window then starves::

    "ina_share": 0.6, "ring_port": 16396, "ina_pace_mbps": 2.0, "ring_pace_mbps": 1.6

``ina_share`` 1 (the default) is pure in-network aggregation, 0 a pure ring (no trees).  A pure
ring sums in the tensor's own type, as gloo and NCCL do (2(N-1)/N of it on each link); with
``"ring_sum": "float64"`` it sums float32 in float64 partials (3(N-1)/N), as a hybrid's ring part
always does, so that part keeps the switches' stated error bound.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

FORMAT = "ina-job/2"
RING_SUMS = ("native", "float64")  # a pure ring's sums: in the tensor's type (as gloo), or float64 partials
DEFAULT_SPEC = "ina-job.json"  # where a worker looks, in its working directory, when INA_JOB_SPEC is not set


class JobSpecError(ValueError):
    """A job spec file that a worker cannot use."""


@dataclass(frozen=True)
class Member:
    rank: int
    host: str
    ip: str  # the worker's own address; results come to ip:tree.port
    switch: str  # the switch its one link leads to
    switch_ip: str  # where aggregation packets go (UDP to switch_ip:udp_port)
    switch_mac: str


@dataclass(frozen=True)
class TreeSpec:
    job_id: int  # the tree's id in the dataplane (the header's job_id)
    root: str
    share: float  # of every allreduce's chunks
    rate_mbps: float  # the planner's rate for this tree (wire Mb/s on each of its links)
    port: int  # the UDP port where this tree's results arrive at every member
    children: tuple[int, ...]  # per rank: the member's child index at its switch
    incarnation: int = 0  # grows each time a switch of the tree loses its registers (restart, new pipeline)


@dataclass(frozen=True)
class JobSpec:
    name: str
    values: int  # int32 values per packet (INA_VALUES)
    udp_port: int  # the switches' aggregation port
    pool_size: int  # slots of each tree a worker may use: 0 .. pool_size-1, two sets each
    members: tuple[Member, ...]
    trees: tuple[TreeSpec, ...]
    ina_share: float = 1.0  # of every allreduce through the trees; the rest goes round the ring
    ring_port: int | None = None  # where each member's ring listens (needed when ina_share < 1)
    ina_pace_mbps: float | None = None  # most each worker offers the trees, wire Mb/s (None: as fast as they go)
    ring_pace_mbps: float | None = None  # most the ring sends on each link: the rest of it, so no queue builds
    version: int = 0  # of the plan: grows when the controller moves a tree off a dead switch or link
    ring_sum: str = "native"  # a pure ring sums in the tensor's type; "float64": wide partial sums (3(N-1)/N)

    def __post_init__(self) -> None:
        if not self.members:
            raise JobSpecError(f"job {self.name}: needs at least one member")
        share = self.ina_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise JobSpecError(f"job {self.name}: ina_share must be within [0, 1], not {share!r}")
        if share > 0 and not self.trees:
            raise JobSpecError(f"job {self.name}: ina_share {share} needs at least one tree")
        if share < 1 and self.ring_port is None:
            raise JobSpecError(f"job {self.name}: ina_share {share} sends data round a ring, but no ring_port is given")
        for name, rate in (("ina_pace_mbps", self.ina_pace_mbps), ("ring_pace_mbps", self.ring_pace_mbps)):
            if rate is not None and not 0 < rate < math.inf:
                raise JobSpecError(f"job {self.name}: {name} must be a positive rate, not {rate!r}")
        if self.ring_sum not in RING_SUMS:
            raise JobSpecError(f"job {self.name}: ring_sum must be one of {', '.join(RING_SUMS)}, "
                               f"not {self.ring_sum!r}")
        if [m.rank for m in self.members] != list(range(len(self.members))):
            raise JobSpecError(f"job {self.name}: members must be listed by rank 0..{len(self.members) - 1}")
        for t in self.trees:
            if len(t.children) != len(self.members):
                raise JobSpecError(f"job {self.name}: tree {t.job_id} names {len(t.children)} children for "
                                   f"{len(self.members)} members")
        shares = [t.share for t in self.trees]
        if shares and (any(s <= 0 for s in shares) or not math.isclose(sum(shares), 1.0, abs_tol=1e-6)):
            raise JobSpecError(f"job {self.name}: tree shares {shares} must be positive and sum to 1")
        if len({t.port for t in self.trees}) != len(self.trees):
            raise JobSpecError(f"job {self.name}: two trees share a worker port")

    @property
    def ring_in_tensor_type(self) -> bool:
        """Whether the ring sums in the tensor's own type (a pure ring, ``ring_sum`` native) rather than in
        float64 partials (a hybrid's ring part keeps the switches' bound; ``ring_sum`` float64)."""
        return self.ina_share == 0 and self.ring_sum == "native"

    @property
    def ring_peers(self) -> list[str]:
        """The ring's "ip:port" of every member, in rank order."""
        return [f"{m.ip}:{self.ring_port}" for m in self.members]

    def ina_chunks(self, chunks: int) -> int:
        """How many of an allreduce's chunks go through the trees (the first ones); the rest go round the ring."""
        return chunks if self.ina_share >= 1 else round(self.ina_share * chunks)

    def split(self, chunks: int) -> list[tuple[int, int]]:
        """Each tree's [first, end) range of an allreduce's chunks, in proportion to the shares.

        Largest remainder over the shares as given (normalised, so shares that sum to 1 only up to
        rounding still cover every chunk exactly once), so every worker computes the same split.
        """
        if not self.trees:
            return []
        total = sum(t.share for t in self.trees)
        ideal = [t.share / total * chunks for t in self.trees]
        counts = [min(chunks, math.floor(x)) for x in ideal]
        by_remainder = sorted(range(len(ideal)), key=lambda i: (counts[i] - ideal[i], i))
        for k in range(chunks - sum(counts)):
            counts[by_remainder[k % len(counts)]] += 1
        while sum(counts) > chunks:  # floating point put one too many somewhere
            counts[max(range(len(counts)), key=counts.__getitem__)] -= 1
        ranges, start = [], 0
        for c in counts:
            ranges.append((start, start + c))
            start += c
        return ranges

    def save(self, path: Path) -> None:
        """Written whole, then renamed: workers that watch the file never read half of it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json() + "\n")
        tmp.replace(path)

    def to_json(self) -> str:
        """What ``save`` writes and the controller service sends (``from_json`` reads either)."""
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=2)

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise JobSpecError(f"{path}: cannot read the job spec: {e}") from None
        return cls.from_json(text, path)

    @classmethod
    def from_json(cls, text: str, where: str | Path) -> JobSpec:
        """The spec as ``save`` writes it, from a file or the controller service; ``where`` names the
        source in errors."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise JobSpecError(f"{where}: cannot read the job spec: {e}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise JobSpecError(f"{where}: not a job spec of format {FORMAT} (written by another controller version?)")
        try:
            del data["format"]
            members = tuple(Member(**m) for m in data.pop("members"))
            trees = tuple(TreeSpec(**{**t, "children": tuple(t["children"])}) for t in data.pop("trees"))
            return cls(members=members, trees=trees, **data)
        except (KeyError, TypeError) as e:
            raise JobSpecError(f"{where}: malformed job spec: {e}") from None


def spec_path(given: str | Path | None = None) -> Path:
    """The job spec a worker joins: ``given``, else INA_JOB_SPEC, else ``ina-job.json`` in the working
    directory (``ina-ctl job create --export`` prints the line that sets INA_JOB_SPEC)."""
    env = os.environ.get("INA_JOB_SPEC")
    path = Path(given if given is not None else env or DEFAULT_SPEC)
    if not path.is_file():
        source = "as given" if given is not None else "from INA_JOB_SPEC" if env else "the default"
        raise JobSpecError(f"no job spec at {path.absolute()} ({source}): set INA_JOB_SPEC to the spec file the "
                           f"controller wrote (ina-ctl job create --export prints it), or put it at ./{DEFAULT_SPEC}")
    return path


class SpecWatch:
    """The job spec file, read again whenever it changes: the controller writes it again when a
    switch of a tree lost its registers (the tree's ``incarnation`` grows), and ``Worker.update_spec``
    then sends the tree's last window again (``engine.Tree.recover``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None  # read at the first look: it may be newer than the worker's

    def changed(self) -> JobSpec | None:
        """The spec the file holds, if it changed since the last look."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return None
        try:
            spec = JobSpec.load(self.path)
        except JobSpecError:
            return None  # not a spec for now (a job deleted, a hand edit): look again next time
        self._stamp = stamp
        return spec
