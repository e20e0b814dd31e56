"""Multi-GPU nodes on a rail-optimised fabric (issue 44): a hierarchical allreduce in the virtual fabric, every
rail's job at once in one virtual time, against the model (``controller.model.hierarchical_call``).

Nodes of L GPUs have L NICs, rail-optimised (``controller.topology.rail_optimised``): local rank i of every node
is on NIC i and rail i's leaves.  A call of S bytes per rank is

1. a reduce-scatter among the node's L ranks (NVLink): time at the in-node rate, not simulated;
2. local rank i's shard (1/L of the tensor, the node's partial sum of it) summed across the nodes by rail i's
   job (``NAME-rail<i>``, members rail i's NIC of every node in node order, so member rank k is node k), created by
   the real controller and run by the worker's core on every NIC and the real P4 program on every switch; every
   rail's call starts at one moment (a barrier, as ``virtual_fabric.direct`` starts a plan's parts);
3. an all-gather among the node's ranks once the node's L rail calls have ended: time at the in-node rate.

Call k+1 starts on every node when the last node's all-gather of call k ended.  The call's time runs from its
start to the last node's end.  Each node's bytes to the switches are one gradient each way, spread over its L
NICs: the fabric's links count what each NIC sent and received.

The data: every rank's gradient is drawn from the run's seed (a stream per call, node and local rank), and rail
i's input at node k is the node's float32 sum of its L ranks' shard i (numpy, rank order), as the reduce-scatter
leaves it.  Every rail's result is checked against the float64 sum of all ranks' gradients: within the switches'
bound for the node sums (``worker.quantize.elementwise_bound``) plus the float32 roundings of the node sums
(``worker.ring.summation_bound``) and the final cast, and the same bits on every node.  One call's node sums are
kept (N x S bytes), and each call is checked as soon as it ends, before the next makes its own.
"""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from controller.job_plan import DEFAULT_POOL_SIZE
from controller.model import NVLINK_GBPS, hierarchical_call, in_node_seconds
from controller.topology import Topology
from virtual_fabric.fabric import CallSlices, Fabric, Job, Sums
from virtual_fabric.runs import RunConfig, build_topology
from worker import quantize
from worker.jobspec import shard_bounds
from worker.protocol import load as load_protocol
from worker.ring import summation_bound

DTYPE = np.dtype(np.float32)  # what the GPUs' gradients are
FAILURE_CHECK = 1e-3  # virtual seconds between two looks for a failed rail call (the run stops at the first)
PROGRESS_EVERY = 50e-6  # virtual seconds between two progress lines (a large run's wall time is minutes)


@dataclass
class RailsConfig:
    """A run; the defaults are issue 44's figure: 128 nodes of 8 GPUs, 32 nodes a leaf (a DGX SuperPOD's scalable
    unit: a leaf per rail), 32 spines, 100 Gbit/s NICs, 8 MB per GPU."""

    nodes: int = 128
    rails: int = 8  # GPUs and NICs per node
    per_leaf: int = 32  # nodes under one leaf of a rail
    spines: int = 32
    gbps: float = 100.0  # each NIC's link, each way
    fabric_gbps: float | None = None  # leaf-spine links (None: gbps)
    node_gbps: float = NVLINK_GBPS  # in-node (NVLink) rate per GPU, each way
    size: int = 8 << 20  # bytes of float32 per rank (GPU) and call
    window: int = DEFAULT_POOL_SIZE  # slots per tree and switch of each rail's job
    delay: str | None = "1us"  # every link's propagation delay
    calls: int = 2
    name: str = "grad"  # rail i's job is NAME-rail<i>
    seed: int = 0  # every gradient, and the fabric's streams
    timeout: float = 3.0  # a worker's seconds without progress
    until: float = 60.0  # virtual seconds at most

    @property
    def topology(self) -> str:
        return f"rails:{self.nodes},{self.rails},{self.per_leaf},{self.spines}"

    @property
    def elements(self) -> int:
        return self.size // DTYPE.itemsize


def build(config: RailsConfig) -> Topology:
    """The rail-optimised network (``ina-sim run --topology rails:...``'s), NICs at ``gbps``, leaf-spine links
    at ``fabric_gbps``."""
    if config.size % DTYPE.itemsize or config.elements < config.rails:
        raise ValueError(f"size: {config.size} bytes per rank is not a whole number of float32 values, at least "
                         f"one per rail ({config.rails})")
    return build_topology(RunConfig(topology=config.topology, bw=config.gbps * 1e3,
                                    fabric_bw=(config.fabric_gbps or config.gbps) * 1e3, delay=config.delay))


def rail_members(topology: Topology, rails: int) -> list[list[str]]:
    """Each rail's members: its NIC of every node, in node order (member rank k is node k)."""
    nodes = list(topology.nodes.values())
    if any(len(nics) != rails for nics in nodes):
        raise ValueError(f"every node needs {rails} NICs, one per rail")
    return [[nics[i] for nics in nodes] for i in range(rails)]


def rank_gradient(seed: int, call: int, node: int, local: int, elements: int) -> np.ndarray:
    """One GPU's gradient for one call: uniform in (-scale, scale) at a scale of its own (1e-3 to 10, as
    ``worker.gradients.gradient``'s), from a stream of the run's seed for this call, node and local rank.  Uniform, not
    normal: numpy draws it 3.5x faster, and 1,024 GPUs' 8 MB are drawn every call."""
    rng = np.random.default_rng([seed, call, node, local])
    scale = np.float32(10 ** rng.uniform(-3, 1))
    g = rng.random(elements, dtype=np.float32)
    g -= np.float32(0.5)
    g *= np.float32(2) * scale
    return g


class NodeSums:
    """One call's data at a time: each node's float32 sum of its ranks' gradients (what the reduce-scatter leaves
    on its ranks, shard by shard), the float64 sum of every rank's gradient, and the bound on the float32
    roundings of the node sums."""

    def __init__(self, config: RailsConfig) -> None:
        self.config = config
        self.call = -1
        self.partials: list[np.ndarray] = []
        self.exact = np.zeros(0)
        self.local_bound = np.zeros(0)

    def of(self, call: int) -> NodeSums:
        """Made for ``call`` (the call before's are let go)."""
        if call != self.call:
            c = self.config
            self.call, self.partials = call, []
            self.exact, self.local_bound = np.zeros(c.elements), np.zeros(c.elements)
            for node in range(c.nodes):
                ranks = [rank_gradient(c.seed, call, node, local, c.elements) for local in range(c.rails)]
                partial = ranks[0].copy()
                for g in ranks[1:]:
                    partial += g  # float32, in rank order
                for g in ranks:
                    self.exact += g
                self.local_bound += summation_bound(ranks)
                self.partials.append(partial)
        return self

    def release(self) -> None:
        self.call, self.partials, self.exact, self.local_bound = -1, [], np.zeros(0), np.zeros(0)


class RailsRun:
    """Every rail's job in one fabric, ready to run ``config.calls`` hierarchical calls."""

    def __init__(self, config: RailsConfig, progress: Callable[[str], None] | None = None) -> None:
        if config.calls < 1:
            raise ValueError(f"calls: a whole number >= 1, not {config.calls!r}")
        self.config, self.progress = config, progress
        self.topology = build(config)
        self.members = rail_members(self.topology, config.rails)
        self.spans = shard_bounds(config.elements, config.rails)
        self.phase = in_node_seconds(config.size, config.rails, config.node_gbps)  # reduce-scatter, all-gather
        self.sums = NodeSums(config)
        self.fabric = Fabric(self.topology, config.seed)
        self.loop = self.fabric.loop
        n = config.nodes
        self.started: dict[int, float] = {0: self.loop.now}  # per call: when it started on every node
        self.ended: dict[int, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))  # call, rail, node
        self.running: dict[int, int] = {0: n * config.rails}
        self.results = Sums()  # (rail, call): the first sums to come, and whether the rest agree
        self.checks: dict[int, dict] = {}
        self.errors: list[str] = []
        self._open = 0  # the last call whose rail calls may start
        self._waiting: dict[int, list[Callable[[], None]]] = defaultdict(list)
        self.jobs: list[Job] = []
        for i, hosts in enumerate(self.members):  # admit: a spine's pool full of other rails' trees is planned around
            arrays = [CallSlices(lambda call, k=k: self.sums.of(call).partials[k], self.spans[i], config.calls)
                      for k in range(n)]
            job = self.fabric.create_job(f"{config.name}-rail{i}", hosts, arrays, timeout=config.timeout, mode="ina",
                                         pool_size=config.window, admit=True, start=self.loop.now + self.phase)
            for w in job.workers:
                w.hand_over = lambda node, call, result, i=i: self._done(i, node, call, result)
                w.gate = self._gate
            self.jobs.append(job)
        self.loop.check_every(FAILURE_CHECK, self._failure)
        if progress is not None:
            self._wall = time.perf_counter()
            self.loop.check_every(PROGRESS_EVERY, self._tell)

    # --- the calls: reduce-scatter, the rails at once, all-gather --------------------------------

    def _start(self, call: int) -> None:
        """Call ``call`` starts on every node now: its reduce-scatter, then its rail calls."""
        self.started[call] = self.loop.now
        self.running[call] = self.config.nodes * self.config.rails
        self.loop.after(self.phase, self._rails, call)

    def _rails(self, call: int) -> None:
        self._open = call
        for go in self._waiting.pop(call, []):
            go()

    def _gate(self, call: int, go: Callable[[], None]) -> None:
        """A rail member is ready for ``call``: it starts once the call's reduce-scatter is done."""
        if call <= self._open:
            go()
        else:
            self._waiting[call].append(go)

    def _done(self, rail: int, node: int, call: int, result: np.ndarray) -> None:
        """Rail ``rail``'s call ended at node ``node`` with these sums."""
        self.ended[call][rail][node] = self.loop.now
        key = (rail, call)
        self.results.agree(key, result)
        self.running[call] -= 1
        if self.running[call]:
            return
        self.checks[call] = self._check(call)
        if self.progress is not None:
            self.progress(f"call {call} done at {self.loop.now * 1e6:,.1f} us virtual (+ all-gather), checked; "
                          f"wall {time.perf_counter() - self._wall:,.0f} s")
        if call + 1 < self.config.calls:  # the next starts when the last node's all-gather ended
            self.loop.after(self.phase, self._start, call + 1)
        self.sums.release()

    def _failure(self) -> str | None:
        """The first rail call that failed on some node (the run stops: the barrier would wait for it forever)."""
        if not self.errors:
            self.errors = [f"rail {i}, node {k}, call {c}: {r.error}" for i, job in enumerate(self.jobs)
                           for k, w in enumerate(job.workers) for c, r in enumerate(w.records) if r.error]
        return self.errors[0] if self.errors else None

    def _tell(self) -> None:
        c = self.config
        done = sum(len(nodes) for rails in self.ended.values() for nodes in rails.values())
        self.progress(f"virtual {self.loop.now * 1e6:,.0f} us: {done:,} of {c.calls * c.nodes * c.rails:,} rail "
                      f"results in; {self.loop.events:,} events; wall {time.perf_counter() - self._wall:,.0f} s")

    # --- running and figures -------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return len(self.checks) == self.config.calls

    def run(self) -> None:
        """Until every call ended on every node, a rail call failed, or virtual time ``until``."""
        self.fabric.run(self.config.until)

    def calls_figures(self) -> list[dict]:
        """Each call: its time (start to the last node's all-gather), its phases, and the model's beside them
        (each rail's prediction the workers chose the call by, ``CallRecord.choice``)."""
        out = []
        for call in range(self.config.calls):
            rails = self.ended.get(call, {})
            complete = call in self.checks
            predicted = [job.workers[0].records[call].choice.seconds if len(job.workers[0].records) > call else None
                         for job in self.jobs]
            model = hierarchical_call(self.config.size, self.config.rails, self.config.node_gbps, predicted) \
                if None not in predicted else None
            entry = {"seconds": None, "rails": None, "per_rail": None, "reduce_scatter": self.phase,
                     "all_gather": self.phase, "model": model and model.seconds, "model_rails": model and model.rails,
                     "predicted_per_rail": predicted, "ratio": None}
            if complete:
                begin = self.started[call] + self.phase
                per_rail = [max(rails[i].values()) - begin for i in range(self.config.rails)]
                seconds = max(per_rail) + 2 * self.phase
                entry.update(seconds=seconds, rails=max(per_rail), per_rail=per_rail,
                             ratio=seconds / model.seconds if model else None)
            out.append(entry)
        return out

    def _check(self, call: int) -> dict:
        """Call ``call``'s results against the exact sum of every rank's gradient (see the module's docstring)."""
        sums = self.sums.of(call)
        out = {"within_bound": True, "identical": True, "max_error": 0.0, "rails": []}
        values = self.jobs[0].spec.values
        for rail, (lo, hi) in enumerate(self.spans):
            inputs = [p[lo:hi] for p in sums.partials]
            exact = sums.exact[lo:hi]
            bound = quantize.elementwise_bound(inputs, values) + sums.local_bound[lo:hi] \
                + np.abs(exact) * float(np.finfo(DTYPE).eps)  # the switches', the node sums', the final cast
            result = self.results.first[rail, call]
            err = np.abs(result.astype(np.float64) - exact) if result.size == hi - lo else np.full(1, np.inf)
            mine = {"within_bound": bool(result.size == hi - lo and (err <= bound).all()),
                    "identical": self.results.identical[rail, call], "max_error": float(err.max(initial=0.0))}
            out["rails"].append(mine)
            out["within_bound"] &= mine["within_bound"]
            out["identical"] &= mine["identical"]
            out["max_error"] = max(out["max_error"], mine["max_error"])
        return out

    def check(self) -> dict:
        """Every call's check together: within the bound and identical only if every call was, and ran."""
        checks = [self.checks[c] for c in sorted(self.checks)]
        complete = len(checks) == self.config.calls
        return {"within_bound": complete and all(c["within_bound"] for c in checks),
                "identical": complete and all(c["identical"] for c in checks),
                "max_error": max((c["max_error"] for c in checks), default=0.0), "calls_checked": len(checks)}

    def nic_bytes(self) -> dict:
        """Bytes each NIC sent and received over the run (its link's frames, as delivered), per call, against one
        gradient/L per NIC plus headers: every chunk of the NIC's shard in one frame, each way."""
        P = load_protocol(self.jobs[0].spec.values)
        sent, received = [], []
        for hosts in self.members:
            for host in hosts:
                index = self.topology.host_link(host)
                up, down = self.fabric.channels[index]
                if self.topology.links[index].a != host:
                    up, down = down, up
                sent.append(up.stats.bytes / self.config.calls)
                received.append(down.stats.bytes / self.config.calls)
        shard = max(hi - lo for lo, hi in self.spans)
        reference = -(-shard // P.values) * P.frame_bytes
        return {"gradient_per_nic": shard * DTYPE.itemsize, "reference": reference, "frame_bytes": P.frame_bytes,
                **{f"{way}_{stat}": float(f(figures)) for way, figures in (("sent", sent), ("received", received))
                   for stat, f in (("mean", np.mean), ("min", np.min), ("max", np.max))}}

    def trees(self) -> list[dict]:
        """Each rail's job as the controller made it: its trees' roots and switches, and what admission said."""
        out = []
        for i, job in enumerate(self.jobs):
            record = self.fabric.controller.state.jobs[job.spec.name]
            switches = sorted({s for t in record.trees for s in t.tree.switches()})
            out.append({"job": job.spec.name, "trees": len(job.spec.trees), "roots": [t.root for t in job.spec.trees],
                        "pool_size": job.spec.pool_size, "switches": switches,
                        "on_rail": all(on_rail(s, i) for s in switches), "admission": record.admission or ""})
        return out


def on_rail(switch: str, rail: int) -> bool:
    """Whether a switch is rail ``rail``'s leaf or a spine (``rail_optimised``'s names)."""
    return switch.startswith("spine") or switch.startswith(f"r{rail}leaf")


def run(config: RailsConfig, progress: Callable[[str], None] | None = None) -> dict:
    """Build, run and check; the figures as a dict (``summary`` prints them)."""
    started = time.perf_counter()
    r = RailsRun(config, progress)
    built = time.perf_counter()
    if progress is not None:
        progress(f"built {len(r.topology.hosts)} NICs, {len(r.topology.switches)} switches, {config.rails} jobs in "
                 f"{built - started:.1f} s; running")
    r.run()
    ran = time.perf_counter()
    return {
        "config": {**asdict(config), "topology": config.topology},
        "jobs": r.trees(),
        "calls": r.calls_figures(),
        "check": r.check(),
        "errors": r.errors,
        "bytes": r.nic_bytes(),
        "virtual": r.loop.now, "events": r.loop.events,
        "passes": sum(s.passes for s in r.fabric.switches.values()),
        "wall": {"setup": built - started, "run": ran - built, "total": ran - started},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "report": r.fabric.report(),
    }


def summary(result: dict) -> list[str]:
    """What ``ina-sim rails`` prints."""
    c = result["config"]
    lines = [f"fabric: {c['nodes']} nodes x {c['rails']} rails ({c['topology']}), NICs at {c['gbps']:g} Gbit/s, "
             f"leaf-spine at {c['fabric_gbps'] or c['gbps']:g} Gbit/s, delay {c['delay'] or 0} per link; in-node "
             f"{c['node_gbps']:g} Gbit/s per GPU; {c['size']:,} bytes of float32 per rank, window {c['window']}"]
    for j in result["jobs"]:
        lines.append(f"  {j['job']}: {j['trees']} tree(s), root(s) {', '.join(j['roots'])}, pool {j['pool_size']}; "
                     f"{len(j['switches'])} switch(es), all on rail or spines: {j['on_rail']}"
                     + (f"; admission: {j['admission']}" if j["admission"] else ""))
    for i, f in enumerate(result["calls"]):
        model = (f"the model said {f['model'] * 1e6:,.1f} us = reduce-scatter {f['reduce_scatter'] * 1e6:,.1f} + "
                 f"slowest rail {f['model_rails'] * 1e6:,.1f} + all-gather {f['all_gather'] * 1e6:,.1f}"
                 if f["model"] is not None else "no model (the call did not start)")
        if f["seconds"] is None:
            lines.append(f"call {i}: failed or unfinished; {model}")
            continue
        lines.append(f"call {i}: {f['seconds'] * 1e6:,.1f} us virtual (rails {f['rails'] * 1e6:,.1f}: "
                     f"{min(f['per_rail']) * 1e6:,.1f} to {max(f['per_rail']) * 1e6:,.1f} over the rails); {model} "
                     f"({f['ratio']:.3f}x)")
    b = result["bytes"]
    for way in ("sent", "received"):
        lines.append(f"bytes per NIC per call, {way}: {b[f'{way}_mean']:,.0f} (min {b[f'{way}_min']:,.0f}, max "
                     f"{b[f'{way}_max']:,.0f}); one gradient/L {b['gradient_per_nic']:,} + headers = "
                     f"{b['reference']:,} ({b[f'{way}_mean'] / b['reference']:.3f}x of it, "
                     f"{b[f'{way}_mean'] / b['gradient_per_nic']:.3f}x of the gradient/L alone)")
    lines += [f"error: {e}" for e in result["errors"][:5]]
    check = result["check"]
    lines.append(f"every result within the bound: {check['within_bound']}; identical on every node: "
                 f"{check['identical']}; max |error| {check['max_error']:.3g} ({check['calls_checked']} call(s))")
    lines += result["report"]
    w = result["wall"]
    lines.append(f"wall {w['total']:.1f} s (setup {w['setup']:.1f}, run {w['run']:.1f}); "
                 f"{result['passes'] / max(w['run'], 1e-9):,.0f} pipeline passes/s; peak memory "
                 f"{result['peak_rss_mb']:,.0f} MB")
    return lines
