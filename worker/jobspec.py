"""The job spec: everything a worker needs to join a job, as JSON.

The worker owns this format and the controller writes it (the worker never imports the
controller), so training hosts read it with the standard library and numpy alone.

A job runs over one or more aggregation trees.  Each tree is its own job id in the
dataplane, with its own slot pools on its switches and its own UDP port at every worker;
a call's share through the switches is split over the trees by their shares, on chunk
boundaries.  A planned tree may be installed as several *lanes* (``lane_of`` names the planned
tree): trees on the same switches, each with its part of the share, so a worker runs them on
several threads; to the worker they are trees like any other::

    {"format": "ina-job/3", "name": "train", "values": 64, "udp_port": 48879, "pool_size": 64,
     "members": [{"rank": 0, "host": "h1", "ip": "10.0.0.1", "switch": "leaf1",
                  "switch_ip": "10.0.0.254", "switch_mac": "02:00:00:00:fe:01"}, ...],
     "trees": [{"job_id": 7, "root": "spine1", "share": 0.5, "rate_mbps": 4.0, "port": 16391,
                "children": [0, 1, 0, 1]}, ...],
     "mode": "auto", "ring_port": 16396, "layouts": [{"name": "flat", "levels": [4], "order": [0, 1, 2, 3]}],
     "model": {...}}

``children[rank]`` is the member's child index at its switch in that tree (the ``child``
header field, its bit in the slot bitmap).

A job may be one *rail* of a set (``"rail": {"set": "train", "index": 1, "count": 4}``, absent for a
plain job): nodes of L local ranks each sum across nodes in L jobs, job i of the nodes' rank-i
addresses, named ``SET-rail<i>``.  After a reduce-scatter in the node, local rank i sends shard i
of the node's tensor through job i and gets shard i's sum back, for the all-gather in the node.

Each call runs as the job's ``mode`` says: ``ina`` through the trees, ``ring`` round a TCP ring of the
members (each listening on ``ring_port``) in one of the job's ``layouts``, ``hybrid`` both at once on
shares of the call, or ``auto``: whichever the model (``worker.tuner.CallModel``, the controller's
numbers) predicts fastest for the call's size, as NCCL's tuner chooses.  ``alpha`` fixes a hybrid's
share through the switches, ``ring_layout`` the ring's layout.  A ring alone sums in the tensor's own
type, as gloo and NCCL do (2(N-1)/N of it on each link); with ``"ring_sum": "float64"`` it sums float32
in float64 partials (3(N-1)/N), as a hybrid's ring part always does, so that part keeps the switches'
stated error bound.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from worker.ring_layout import Layout, LayoutError
from worker.tuner import MODES, CallModel, Choice, split_chunks

FORMAT = "ina-job/3"
RING_SUMS = ("native", "float64")  # a pure ring's sums: in the tensor's type (as gloo), or float64 partials
# how often a worker looks at its spec file (a stat): a tree moved off a dead switch is taken up within this
SPEC_PERIOD = 0.01
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
    lane_of: int | None = None  # the planned tree it is a lane of (its index; None: a spec written before lanes)
    to_ip: str | None = None  # where its contributions go: an aggregation server's address (None: the member's switch)
    # per rank, where a server tree of two levels takes that member's contributions (its leaf or the root);
    # None: every member sends to ``to_ip``
    to_ips: tuple[str, ...] | None = None

    def destination(self, rank: int) -> str | None:
        """Where this rank sends the tree's contributions (None: its switch)."""
        return self.to_ips[rank] if self.to_ips else self.to_ip


@dataclass(frozen=True)
class Rail:
    """Which rail of which set a job is, so a rank knows its part: local rank ``index`` of every node sends
    shard ``index`` of the node's ``count`` shards (one per local rank) through this job, and only that."""

    set: str  # the set's name: its jobs are SET-rail0 .. SET-rail<count - 1>
    index: int
    count: int

    def __post_init__(self) -> None:
        name, index, count = self.set, self.index, self.count
        if not isinstance(name, str) or not name:
            raise JobSpecError(f"rail.set must be the set's name, not {name!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise JobSpecError(f"rail.count must be a positive integer, not {count!r}")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise JobSpecError(f"rail.index must be an integer in 0..{count - 1}, not {index!r}")

    @classmethod
    def from_dict(cls, data: object, where: str | Path) -> Rail:
        """A spec's (or a state file's) ``rail``; errors name ``where`` and the field."""
        if not isinstance(data, dict) or sorted(data) != ["count", "index", "set"]:
            raise JobSpecError(f"{where}: rail must be an object of set, index and count, not {data!r}")
        try:
            return cls(**data)
        except JobSpecError as e:
            raise JobSpecError(f"{where}: {e}") from None


def shard_bounds(elements: int, count: int) -> list[tuple[int, int]]:
    """Each local rank's shard [lo, hi) of a tensor of ``elements`` on a node of ``count`` ranks, in rank
    order: ceil(elements / count) each, the last ones shorter or empty, so the node's reduce-scatter splits
    any size into equal parts of a padded buffer and no rail's call carries padding."""
    if count < 1 or elements < 0:
        raise ValueError(f"{elements} elements over {count} ranks: at least one rank and no negative size")
    size = -(-elements // count)
    return [(min(i * size, elements), min((i + 1) * size, elements)) for i in range(count)]


def rail_name(name: str, index: int) -> str:
    """The name of rail ``index``'s job of the set ``name``: what a rank that did not create the set joins."""
    return f"{name}-rail{index}"


@dataclass(frozen=True)
class JobSpec:
    name: str
    values: int  # int32 values per packet (INA_VALUES)
    udp_port: int  # the switches' aggregation port
    pool_size: int  # slots of each tree a worker may use: 0 .. pool_size-1, two sets each
    members: tuple[Member, ...]
    trees: tuple[TreeSpec, ...]
    mode: str = "ina"  # ina, ring, hybrid, or auto: the fastest of them for each call (``model``)
    ring_port: int | None = None  # where each member's ring listens (needed for any ring)
    layouts: tuple[Layout, ...] = ()  # the ring's arrangements (default: the flat ring)
    model: CallModel | None = None  # the controller's numbers: each call's choice and pace
    alpha: float | None = None  # a hybrid's share through the switches, fixed (None: the model's, per call)
    ring_layout: str | None = None  # the ring's layout, fixed (None: the model's, per call)
    version: int = 0  # of the plan: grows when the controller moves a tree off a dead switch or link
    ring_sum: str = "native"  # a pure ring sums in the tensor's type; "float64": wide partial sums (3(N-1)/N)
    rail: Rail | None = None  # the rail of a set this job is (None: a plain job)

    def __post_init__(self) -> None:
        if not self.members:
            raise JobSpecError(f"job {self.name}: needs at least one member")
        if self.mode not in MODES:
            raise JobSpecError(f"job {self.name}: mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode in ("ina", "hybrid") and not self.trees:
            raise JobSpecError(f"job {self.name}: mode {self.mode} needs at least one tree")
        if self.mode != "ina" and self.ring_port is None and len(self.members) > 1:
            raise JobSpecError(f"job {self.name}: mode {self.mode} may send data round a ring, but no ring_port "
                               f"is given")
        alpha = self.alpha
        if alpha is not None and (self.mode != "hybrid" or isinstance(alpha, bool)
                                  or not isinstance(alpha, int | float) or not 0 <= alpha <= 1):
            raise JobSpecError(f"job {self.name}: alpha is a hybrid's share within [0, 1], not {alpha!r} "
                               f"in mode {self.mode}")
        if self.ring_sum not in RING_SUMS:
            raise JobSpecError(f"job {self.name}: ring_sum must be one of {', '.join(RING_SUMS)}, "
                               f"not {self.ring_sum!r}")
        if [m.rank for m in self.members] != list(range(len(self.members))):
            raise JobSpecError(f"job {self.name}: members must be listed by rank 0..{len(self.members) - 1}")
        for layout in self.layouts:
            if len(layout.order) != len(self.members):
                raise JobSpecError(f"job {self.name}: ring layout {layout.name} has {len(layout.order)} ranks, "
                                   f"not {len(self.members)}")
        model = self.model
        if model is not None and ((self.mode in ("ina", "hybrid") and model.ina is None) or
                                  (self.mode != "ina" and len(self.members) > 1 and not model.rings)):
            raise JobSpecError(f"job {self.name}: its model has {'no trees' if model.ina is None else 'no ring'} "
                               f"for mode {self.mode}")
        if self.ring_layout is not None and self.ring_layout not in {x.name for x in self.ring_arrangements}:
            raise JobSpecError(f"job {self.name}: ring_layout {self.ring_layout!r} is not one of the job's layouts "
                               f"({', '.join(x.name for x in self.ring_arrangements)})")
        for t in self.trees:
            if len(t.children) != len(self.members):
                raise JobSpecError(f"job {self.name}: tree {t.job_id} names {len(t.children)} children for "
                                   f"{len(self.members)} members")
            if t.to_ips is not None and len(t.to_ips) != len(self.members):
                raise JobSpecError(f"job {self.name}: tree {t.job_id} names {len(t.to_ips)} servers (to_ips) for "
                                   f"{len(self.members)} members")
        shares = [t.share for t in self.trees]
        if shares and (any(s <= 0 for s in shares) or not math.isclose(sum(shares), 1.0, abs_tol=1e-6)):
            raise JobSpecError(f"job {self.name}: tree shares {shares} must be positive and sum to 1")
        if len({t.port for t in self.trees}) != len(self.trees):
            raise JobSpecError(f"job {self.name}: two trees share a worker port")

    @property
    def lanes(self) -> int:
        """Trees per planned tree (1: no lanes, or a spec written before them)."""
        planned = {t.lane_of for t in self.trees if t.lane_of is not None}
        return len(self.trees) // len(planned) if planned else 1

    @property
    def ring_arrangements(self) -> tuple[Layout, ...]:
        """The layouts a ring of this job may use: the spec's, or the flat ring."""
        return self.layouts or (Layout.flat(len(self.members)),)

    def layout(self, name: str | None) -> Layout:
        """The job's layout of this name (None: its first)."""
        for layout in self.ring_arrangements:
            if name in (None, layout.name):
                return layout
        raise JobSpecError(f"job {self.name}: no ring layout {name!r}")

    @property
    def ring_peers(self) -> list[str]:
        """The ring's "ip:port" of every member, in rank order."""
        return [f"{m.ip}:{self.ring_port}" for m in self.members]

    def choose(self, elements: int, dtype: np.dtype | type, sent: Sequence[int] | None = None) -> Choice:
        """How a call of ``elements`` of ``dtype`` runs, the trees having sent ``sent`` packets before
        (None: their windows open): the same on every rank, for the same calls."""
        in_type = self.ring_sum == "native"
        if self.model is None:  # a hand-made spec: the mode as it is, unpaced
            if self.mode == "hybrid" and self.alpha is not None:
                return Choice("hybrid", self.alpha, self.layout(self.ring_layout).name, 0.0)
            if self.mode == "ring" or not self.trees:
                return Choice("ring", 0.0, self.layout(self.ring_layout).name, 0.0)
            return Choice("ina", 1.0, None, 0.0)
        return self.model.choose(elements, dtype, sent, self.mode, in_type, self.ring_layout, self.alpha)

    def split(self, chunks: int) -> list[tuple[int, int]]:
        """Each tree's [first, end) range of a call's chunks through the trees, in proportion to the
        shares (``tuner.split_chunks``), so every worker computes the same split."""
        ranges, start = [], 0
        for c in split_chunks([t.share for t in self.trees], chunks):
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
        data = asdict(self)
        data["layouts"] = [x.to_dict() for x in self.layouts]
        data["model"] = None if self.model is None else self.model.to_dict()
        if self.rail is None:  # written only when present: a plain job's spec is as before rails
            del data["rail"]
        return json.dumps({"format": FORMAT, **data}, indent=2)

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
            trees = tuple(TreeSpec(**{**t, "children": tuple(t["children"]),
                                      "to_ips": tuple(t["to_ips"]) if t.get("to_ips") else None})
                          for t in data.pop("trees"))
            layouts = tuple(Layout.from_dict(x) for x in data.pop("layouts", ()))
            model = data.pop("model", None)
            rail = data.pop("rail", None)
            return cls(members=members, trees=trees, layouts=layouts,
                       model=None if model is None else CallModel.from_dict(model),
                       rail=None if rail is None else Rail.from_dict(rail, where), **data)
        except (KeyError, TypeError, LayoutError) as e:
            raise JobSpecError(f"{where}: malformed job spec: {e}") from None


def spec_path(given: str | Path | None = None, rail: int = 0) -> Path:
    """The job spec a worker joins: ``given``, else INA_JOB_SPEC, else ``ina-job.json`` in the working
    directory (``ina-ctl job create --export`` prints the line that sets INA_JOB_SPEC).  ``{rail}`` in
    the path is the rail's number (nodes of several ranks: a job per rail)."""
    env = os.environ.get("INA_JOB_SPEC")
    path = Path(str(given if given is not None else env or DEFAULT_SPEC).replace("{rail}", str(rail)))
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
