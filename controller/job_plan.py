"""A job's plan without a switch: its packed trees (``plan``), its ring layouts (``rings``) and the model of
its calls (``model``), which chooses each call's method.  Pure functions of the topology, so
`ina-ctl job plan`, the virtual fabric and the controller plan alike."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from controller import plan
from controller.model import DEFAULT_HOST_LATENCY, NO_HOST_COST, HostCost, JobTree, aggregation_limit, call_model
from controller.rings import layouts
from controller.topology import Topology
from controller.windows import bdp_window
from worker import protocol
from worker.jobspec import RING_SUMS
from worker.ring_layout import LAYOUTS, Layout
from worker.tuner import MODES, CallModel, Choice

# Slots per switch for each of a job's trees, so the workers' window: 8 already fill 50 Mbit/s links
# (bench_allreduce), and 64 keep them full at 1-5% loss, where a lost packet's slot waits a while
# (bench_loss), in 1/16 of ina.p4's pool.  tests/test_defaults.py keeps the benchmarks on it.  A job that asks
# for no size (pool_size None, "auto") gets its trees' bandwidth-delay product instead (``controller.windows``),
# at least this.
DEFAULT_POOL_SIZE = 64
# call sizes a job's predictions are shown for: a tensor-parallel layer's activations, a megabyte, a DDP bucket
REFERENCE_SIZES = (64 << 10, 1 << 20, 25 << 20)
# Lanes: a planned tree installed as L trees on the same switches (each its own job id, slots and worker socket,
# so its own thread at a worker).  "auto" takes as many as one core per lane needs to keep up with the tree's
# rate, at most MAX_LANES; each lane's pool is the asked pool over L, at least MIN_LANE_POOL (fewer lanes else).
MAX_LANES = 8
MIN_LANE_POOL = 8


class JobError(ValueError):
    """A job request that cannot be carried out; nothing was changed."""


@dataclass(frozen=True)
class JobPlan:
    """A job's trees, ring layouts and model, and how it asked to run (``mode``, ``alpha``, ``ring_layout``)."""

    tree_plan: plan.Plan  # the packed trees (none for a job that runs a ring alone)
    layouts: tuple[Layout, ...]
    model: CallModel
    mode: str = "auto"
    alpha: float | None = None
    ring_layout: str | None = None
    ring_sum: str = "native"
    limit_mbps: float = math.inf  # C: what the switches sum per worker (inf: no limit known)
    why: str = ""  # where C comes from
    lanes: int = 1  # each planned tree is installed as this many lane trees (tree_plan holds the lanes)
    pool_size: int = DEFAULT_POOL_SIZE  # slots of each installed (lane) tree on each switch: the workers' window
    auto_window: bool = False  # pool_size is what the trees' bandwidth-delay product needs (none was asked)

    def lane_of(self, index: int) -> int:
        """The planned tree that installed tree ``index`` is a lane of (lanes are consecutive)."""
        return index // self.lanes

    def choose(self, nbytes: int, dtype: np.dtype | type = np.float32, opening: bool = False) -> Choice:
        """How a call of ``nbytes`` runs (``opening``: the job's first, its windows still opening and its size
        not seen before: one window of exponent-only packets more)."""
        return self.model.choose(*self._call(nbytes, dtype, opening), mode=self.mode,
                                 in_tensor_type=self.ring_sum == "native", layout=self.ring_layout, alpha=self.alpha,
                                 first=opening)

    def options(self, nbytes: int, dtype: np.dtype | type = np.float32, opening: bool = False) -> dict[str, Choice]:
        """Each method at its best for such a call, whatever the mode."""
        return self.model.options(*self._call(nbytes, dtype, opening), in_tensor_type=self.ring_sum == "native",
                                  layout=self.ring_layout, alpha=self.alpha, first=opening)

    def _call(self, nbytes: int, dtype: np.dtype | type, opening: bool) -> tuple[int, np.dtype, list[int] | None]:
        dtype = np.dtype(dtype)
        return max(1, nbytes // dtype.itemsize), dtype, [0] * len(self.tree_plan.trees) if opening else None

    def crossovers(self, dtype: np.dtype | type = np.float32) -> list[tuple[int, str, str]]:
        """The call sizes (bytes) where the method that runs changes, with the window open."""
        return self.model.crossovers(dtype, mode=self.mode, in_tensor_type=self.ring_sum == "native",
                                     layout=self.ring_layout, alpha=self.alpha)

    def to_dict(self, topology: Topology, sizes: tuple[int, ...] = ()) -> dict:
        found = self.tree_plan.to_dict(topology)
        found["trees"] = [{**t, "lane_of": self.lane_of(i)} for i, t in enumerate(found["trees"])]
        return {**found, "mode": self.mode, "alpha": self.alpha,
                "ring_layout": self.ring_layout, "ring_sum": self.ring_sum, "lanes": self.lanes,
                "pool_size": self.pool_size, "auto_window": self.auto_window,
                "ina_limit_mbps": None if self.limit_mbps == math.inf else self.limit_mbps, "why": self.why,
                "layouts": [x.to_dict() for x in self.layouts], "model": self.model.to_dict(),
                "calls": [predictions(self, n) for n in sizes],
                "crossovers": [{"bytes": b, "below": lo, "above": hi} for b, lo, hi in self.crossovers()]}


def predictions(job: JobPlan, nbytes: int, dtype: np.dtype | type = np.float32) -> dict:
    """A call of ``nbytes``: each method's time with its latency and bandwidth terms, first call and later,
    and which one runs."""
    out: dict = {"bytes": nbytes}
    for when, opening in (("later", False), ("first", True)):
        chosen = job.choose(nbytes, dtype, opening)
        out[when] = {"runs": chosen.method, "ina_share": chosen.ina_share, "layout": chosen.layout,
                     "seconds": chosen.seconds,
                     "methods": {m: {"seconds": c.seconds, "latency": c.latency, "bandwidth": c.seconds - c.latency,
                                     "ina_share": c.ina_share, "layout": c.layout}
                                 for m, c in job.options(nbytes, dtype, opening).items()}}
    return out


def method_lines(methods: dict[str, dict], runs: str | None = None) -> list[str]:
    """Each method's predicted time with its latency and bandwidth terms (``predictions``' "methods"), as
    `ina-ctl job plan` and `ina-sim run` print them; ``runs`` is marked."""
    lines = []
    for method, m in methods.items():
        how = {"ina": "", "ring": f" ({m['layout']} ring)",
               "hybrid": f" ({m['ina_share']:.0%} through the switches, {m['layout']} ring)"}[method]
        lines.append(f"{method:<6} {m['seconds'] * 1e6:>12,.1f} us = latency {m['latency'] * 1e6:,.1f} + bandwidth "
                     f"{(m['seconds'] - m['latency']) * 1e6:,.1f}{how}{'   <- runs' if method == runs else ''}")
    return lines


def plan_job(topology: Topology, members: list[str], P: protocol.Protocol,
             trees: int | str | plan.Plan | None = "auto",
             mode: str = "auto", alpha: float | None = None, ring_sum: str = "native",
             pool_size: int | str | None = None, ring_layout: str | None = None,
             host_latency: float = DEFAULT_HOST_LATENCY, limit_mbps: float | None = None,
             host_cost: HostCost = NO_HOST_COST, lanes: int | str = 1) -> JobPlan:
    """The packed trees for these members (``trees``: "auto" or at most N; none in ``mode`` ring), their
    ring layouts and the model of their calls, from the topology alone: no switch is needed (``trees`` may
    also be trees planned elsewhere, a ``plan.Plan``, installed as they are).  ``mode``:
    ina, ring, hybrid, or auto (the fastest for each call); ``alpha`` fixes a hybrid's share through the
    switches, ``ring_layout`` the ring's layout; ``limit_mbps`` is C where it was measured; ``host_cost``
    what a packet costs the hosts' CPU (``model.HostCost``); ``lanes``: each planned tree installed as that
    many trees ("auto": ``lane_count``), sharing ``pool_size`` (``job_lanes``); ``pool_size`` None or "auto":
    each installed tree's window is what its bandwidth-delay product needs (``windows.bdp_window``), as if
    the switches had room for it (the controller caps it by theirs).  Here planned trees become the trees a
    job installs, so the planner knows nothing of lanes."""
    check_request(mode, alpha, ring_sum, ring_layout)
    auto = is_auto(pool_size)
    first = lanes if isinstance(lanes, int) and not isinstance(lanes, bool) and lanes > 0 else 1  # servers' rows
    try:
        if mode == "ring":
            plan.check_members(topology, members)
            found = plan.Plan(tuple(members), (), 0.0, 0.0, (), 0, 0.0, P.wire_factor,
                              ("a ring alone: no aggregation trees",))
        elif isinstance(trees, plan.Plan):  # trees planned elsewhere (a direct-connect plan's meeting trees)
            plan.check_members(topology, members)
            for t in trees.trees:
                plan.check_tree(topology, members, t.tree, P.MAX_CHILDREN)
            found = dataclasses.replace(trees, members=tuple(members))
        else:
            found = plan.pack_trees(topology, members, P.MAX_CHILDREN, tree_count(trees), P.wire_factor,
                                    P.frame_bytes, first)
        asked = DEFAULT_POOL_SIZE if auto else pool_size
        count = job_lanes(lanes, found, P, host_cost, asked, topology)
        if count != first and not isinstance(trees, plan.Plan) and \
                any(plan.is_server_tree(topology, t.tree) for t in found.trees):
            # a server sums on a core per lane: its trees' rates follow the lanes
            found = plan.pack_trees(topology, members, P.MAX_CHILDREN, tree_count(trees), P.wire_factor,
                                    P.frame_bytes, count)
    except plan.PlanError as e:
        raise JobError(str(e)) from None
    planned = with_trees(topology, in_lanes(found, count), P, mode, alpha, ring_sum, asked // count, ring_layout,
                         host_latency, limit_mbps, host_cost=host_cost, lanes=count)
    if not auto:
        return planned
    need = bdp_window(planned.model.ina, least=planned.pool_size)  # lanes share the floor, as an asked pool
    return sized(topology, planned, P, need, host_latency, limit_mbps, host_cost)


def is_auto(pool_size: int | str | None) -> bool:
    """Whether a job asked for no pool size (None or "auto"): its window comes from its trees (``windows``)."""
    return pool_size is None or pool_size == "auto"


def pool_size_of(text: str) -> int | None:
    """A command line's pool size: a positive whole number, or "auto" (None)."""
    if text.strip().lower() == "auto":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise JobError(f"pool size {text!r}: a positive whole number of slots, or auto")
    return int(text)


def sized(topology: Topology, planned: JobPlan, P: protocol.Protocol, window: int,
          host_latency: float = DEFAULT_HOST_LATENCY, limit_mbps: float | None = None,
          host_cost: HostCost = NO_HOST_COST) -> JobPlan:
    """The auto-sized job's plan on its trees with ``window`` slots per installed tree (the model's window)."""
    resized = with_trees(topology, planned.tree_plan, P, planned.mode, planned.alpha, planned.ring_sum, window,
                         planned.ring_layout, host_latency, limit_mbps, host_cost=host_cost, lanes=planned.lanes)
    return dataclasses.replace(resized, auto_window=True)


def with_trees(topology: Topology, found: plan.Plan, P: protocol.Protocol, mode: str = "auto",
               alpha: float | None = None, ring_sum: str = "native", pool_size: int = DEFAULT_POOL_SIZE,
               ring_layout: str | None = None, host_latency: float = DEFAULT_HOST_LATENCY,
               limit_mbps: float | None = None, ring_efficiency: Mapping[str, float] | None = None,
               host_cost: HostCost = NO_HOST_COST, lanes: int = 1) -> JobPlan:
    """The job's plan on these trees as installed (lanes already made: ``in_lanes``; or as a job holds them
    after a move), ``pool_size`` slots each; ``limit_mbps`` and ``ring_efficiency`` as a calibration measured
    them (``model.call_model``)."""
    members = list(found.members)
    found_layouts = tuple(layouts(topology, members))
    if ring_layout is not None and ring_layout not in {x.name for x in found_layouts}:
        raise JobError(f"ring layout {ring_layout!r} does not fit these members (they have "
                       f"{', '.join(x.name for x in found_layouts)})")
    trees = [JobTree(p.tree, p.rate, p.share) for p in found.trees]
    limit, why = aggregation_limit(topology, members, trees, P.frame_bytes)
    if limit_mbps is not None:
        limit, why = limit_mbps, f"measured {limit_mbps:.4g} Mb/s per worker"
    model = call_model(topology, members, trees, P, pool_size, found_layouts, host_latency,
                       limit if limit < math.inf else None, ring_efficiency, host_cost)
    return JobPlan(found, found_layouts, model, mode, alpha, ring_layout, ring_sum, limit, why, lanes, pool_size)


def check_request(mode: str, alpha: float | None, ring_sum: str, ring_layout: str | None) -> None:
    if mode not in MODES:
        raise JobError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if alpha is not None:
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
            raise JobError(f"the share through the switches (alpha) must be within [0, 1], not {alpha!r}")
        if mode != "hybrid":
            raise JobError(f"alpha is the hybrid mode's split; mode {mode} chooses its own")
    if ring_sum not in RING_SUMS:
        raise JobError(f"ring_sum must be one of {', '.join(RING_SUMS)}, not {ring_sum!r}")
    if ring_layout is not None and ring_layout not in LAYOUTS:
        raise JobError(f"ring layout must be one of {', '.join(LAYOUTS)}, not {ring_layout!r}")


def tree_count(trees: int | str | None) -> int | None:
    """"auto" (or None) lets the planner choose; a whole number (or its text) is the most trees to use."""
    if trees is None or trees == "auto":
        return None
    if isinstance(trees, str) and trees.strip().isdigit():
        trees = int(trees)
    if isinstance(trees, bool) or not isinstance(trees, int) or trees < 1:
        raise JobError(f"trees must be 'auto' or a positive whole number, not {trees!r}")
    return trees


def lane_count(rate_mbps: float, host_cost: HostCost, packet_bytes: int, frame_bytes: int,
               most: int = MAX_LANES) -> int:
    """The lanes a tree at ``rate_mbps`` (wire) needs for its hosts to keep up, a core per lane: a core sends a
    packet and takes its result per ``host_cost.per_packet``; 1 where the hosts' cost is not known."""
    if host_cost.free or rate_mbps <= 0:
        return 1
    return max(1, min(most, math.ceil(rate_mbps / host_cost.core_mbps(packet_bytes, frame_bytes) * (1 - 1e-9))))


def job_lanes(lanes: int | str | None, found: plan.Plan, P: protocol.Protocol, host_cost: HostCost,
              pool_size: int, topology: Topology | None = None) -> int:
    """The lanes of a job's trees: as asked, or "auto" (``lane_count`` of its fastest tree, and a lane per core
    of its servers: a lane's tree sits on one server core), and no more than leave each lane MIN_LANE_POOL of
    ``pool_size`` slots (the switches hold as many slots as without lanes)."""
    if lanes is None or lanes == "auto":
        count = max((lane_count(t.rate, host_cost, P.packet_bytes, P.frame_bytes) for t in found.trees), default=1)
        if topology is not None:
            count = max([count] + [topology.hosts[t.tree.root].server.cores for t in found.trees
                                   if t.tree.root in topology.hosts])
    else:
        if isinstance(lanes, str) and lanes.strip().isdigit():
            lanes = int(lanes)
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise JobError(f"lanes must be 'auto' or a positive whole number, not {lanes!r}")
        count = lanes
    return max(1, min(count, pool_size // MIN_LANE_POOL)) if found.trees else 1


def in_lanes(found: plan.Plan, lanes: int) -> plan.Plan:
    """Each planned tree as ``lanes`` trees on the same switches, each with 1/lanes of its rate and share: the
    model sees parallel trees sharing its links, the controller installs each as a tree of its own."""
    if lanes == 1:
        return found
    return dataclasses.replace(found, trees=tuple(plan.PlannedTree(p.tree, p.rate / lanes, p.share / lanes)
                                                  for p in found.trees for _ in range(lanes)))
