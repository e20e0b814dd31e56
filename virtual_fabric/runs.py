"""One job in the fabric, as ``ina-sim run`` and the scale benchmark describe it: build the network
(a topology file, or a builder such as ``fat_tree:16``), run the job's calls in virtual time, and
say how long each took beside the controller's model (the prediction the worker chose the call by,
and every method's with its latency and bandwidth terms, as `ina-ctl job plan` prints them),
whether every result is within the bound, and where the time went.

The inputs are made as each call starts, and each call's sums are checked as they come (every
rank's against the first's, which alone is kept for the bound), so a run's memory is one call's
arrays per worker, not every call's.

The answer is a plain dict (``--json`` prints it) whose figures depend only on the config and the
commit, apart from ``wall`` and ``peak_rss_mb``, which say what the run cost this machine.
"""

from __future__ import annotations

import dataclasses
import resource
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from controller.job_plan import JobPlan, method_lines, plan_job
from controller.model import HostCost, JobTree, aggregation_rates
from controller.topology import Topology, delay_seconds, fat_tree, leaf_spine, rail_optimised, servers, single, tree
from virtual_fabric import host_cost, host_latency
from virtual_fabric.fabric import Fabric, Job, Sums
from worker import quantize
from worker.calls import ina_chunks
from worker.gradients import gradient
from worker.protocol import load as load_protocol
from worker.ring import summation_bound
from worker.tuner import Choice

BUILDERS = {"single": single, "tree": tree, "leaf_spine": leaf_spine, "fat_tree": fat_tree,
            "rails": rail_optimised,  # rails:NODES,RAILS,PER_LEAF,SPINES (issue 44: a NIC per GPU, rail-optimised)
            "servers": servers}  # servers:WORKERS,SERVERS,CORES[,SWITCHES] (issue 62: spare servers aggregate)
LEGACY = {"single": "single:{w}", "tree": "tree:2,{half}", "leaf_spine": "leaf_spine:2,2,{half}",
          "fat_tree": "fat_tree:4"}  # the names without arguments that ``ina-sim run`` always took
RATED = ("leaf_spine", "fat_tree", "rails", "servers")  # host_bw on hosts' links, fabric_bw between switches


@dataclass
class RunConfig:
    topology: str = "single:4"  # a builder with its arguments, a bare builder name, or a topology file
    workers: int | None = None  # the first N hosts (by number); None: every host
    bw: float = 50.0  # host links, Mb/s
    fabric_bw: float | None = None  # links between switches, Mb/s (None: bw)
    delay: str | None = None  # every link's propagation delay ("1us")
    size: int = 1 << 20  # values per call
    dtype: str = "float32"
    calls: int = 1
    values: int | None = None  # per packet (None: the most the program takes)
    pool_size: int | None = None  # slots per tree and switch, the window (None: auto, controller.windows)
    trees: int | str = "auto"
    mode: str = "ina"  # ina, ring, hybrid or auto
    alpha: float | None = None
    ring_layout: str | None = None  # flat, hierarchical or halving_doubling (None: the model's per call)
    agg_rate: float | None = None  # each switch sums this fraction of the link rate per child it has
    loss: float = 0.0  # % of frames lost on every link
    fail: list[tuple[str, float]] = field(default_factory=list)  # (switch or "root", virtual s): killed then
    restart: list[tuple[str, float]] = field(default_factory=list)  # (switch or "root", virtual s): booted again
    # (a switch port "agg1-p5", or "uplink": the first tree's first uplink, virtual s): that link's carrier lost
    cut: list[tuple[str, float]] = field(default_factory=list)
    timeout: float = 10.0  # a worker's seconds without progress
    until: float = 3600.0  # virtual seconds at most
    seed: int = 0  # the run's random draws (loss)
    watch_interval: float = 0.5  # the controller's watch period (virtual s)
    check: bool = True  # compare every result with the exact sum
    host_cost: str = "none"  # what a datagram costs a host's CPU: none, measured, "<us>" or "<send>/<receive>" (us)
    host_cores: int = 1  # the CPUs each host serves its trees on (tree i on core i mod min(cores, trees))
    lanes: int | str = 1  # each planned tree installed as this many trees ("auto": a core per lane at its rate)


class Inputs(Sequence):
    """One rank's arrays, one per call, made when asked (``gradient``: the same every time)."""

    def __init__(self, rank: int, config: RunConfig) -> None:
        self.rank, self.config = rank, config

    def __len__(self) -> int:
        return self.config.calls

    def __getitem__(self, call: int) -> np.ndarray:
        if not 0 <= call < self.config.calls:
            raise IndexError(call)
        return gradient(call, self.rank, self.config.size, self.config.dtype)


def build_topology(config: RunConfig) -> Topology:
    """The network: a builder's (``fat_tree:16``, ``leaf_spine:2,4,8``, ``single:4``, ``tree:2,4``,
    ``rails:128,8,32,32``) with ``bw``/``fabric_bw``/``delay`` on its links (``bw`` on the hosts' (NICs') links,
    ``fabric_bw`` between switches), or a topology file as it is."""
    text = config.topology
    name, _, argtext = text.partition(":")
    if name in LEGACY and not argtext:
        n = config.workers or 4
        name, _, argtext = LEGACY[name].format(w=n, half=max(n // 2, 1)).partition(":")
    if name not in BUILDERS:
        return Topology.load(text)
    try:
        args = [int(a) for a in argtext.split(",")]
    except ValueError:
        raise ValueError(f"topology {text!r}: a builder's arguments are integers, like fat_tree:16") from None
    fabric_bw = config.fabric_bw or config.bw
    rated = name in RATED
    try:
        spec = BUILDERS[name](*args, host_bw=config.bw, fabric_bw=fabric_bw) if rated else BUILDERS[name](*args)
    except TypeError:  # too many or too few arguments
        raise ValueError(f"topology {text!r}: not {name}'s arguments (rails:NODES,RAILS,PER_LEAF,SPINES, "
                         f"servers:WORKERS,SERVERS,CORES[,SWITCHES], "
                         f"leaf_spine:SPINES,LEAVES,HOSTS, fat_tree:K, single:HOSTS, tree:LEAVES,PER_LEAF)") from None
    if not rated:
        for link in spec["links"]:
            link.append({"bw": config.bw if any(e.startswith("h") and "-p" not in e for e in link[:2]) else fabric_bw})
    if config.delay:
        delay_seconds(config.delay)  # a bad delay fails here, by name
        for link in spec["links"]:
            link[2]["delay"] = config.delay
    return Topology.from_dict(spec)


def members(topology: Topology, workers: int | None) -> list[str]:
    """The first ``workers`` hosts by number (every one by default), aggregation servers aside."""
    hosts = sorted((h for h in topology.hosts if topology.hosts[h].server is None), key=lambda h: (len(h), h))
    if workers is not None and not 1 <= workers <= len(hosts):
        raise ValueError(f"{workers} workers asked for; the topology has {len(hosts)} hosts")
    return hosts[:workers]


def with_aggregation_rate(topology: Topology, hosts: list[str], config: RunConfig) -> Topology:
    """The topology with every switch of the job's trees summing ``agg_rate`` x the link rate per child:
    ``agg_pps`` = rate x L / (frame bits) x (its children in the planned trees), so each switch lets
    each worker send at ``agg_rate`` x L (C, in docs/hybrid.md's terms: ``model.aggregation_rates``).  The
    planner does not read ``agg_pps``, so the trees are those planned without it."""
    P = load_protocol(config.values)
    found = plan_job(topology, hosts, P, config.trees, "ina", pool_size=config.pool_size).tree_plan
    trees = [JobTree(t.tree, t.rate, t.share) for t in found.trees]
    data = topology.to_dict()
    for switch, pps in aggregation_rates(topology, hosts, trees, P.frame_bytes, config.agg_rate * found.rate).items():
        data["switches"][switch]["agg_pps"] = pps
    return Topology.from_dict(data)


def host_costs(config: RunConfig) -> HostCost:
    """What a datagram costs the hosts' CPUs, and how many each host has."""
    return dataclasses.replace(host_cost.parse(config.host_cost), cores=config.host_cores)


def expected(config: RunConfig) -> tuple[JobPlan, list[Choice]]:
    """The job's plan as the fabric's controller makes it, and how each call will run (its method, split,
    layout and predicted time), without running it: the workers' choices follow from the spec, the
    calls' sizes and the packets the trees sent before, all known in advance."""
    topology = build_topology(config)
    hosts = members(topology, config.workers)
    if config.agg_rate is not None:
        topology = with_aggregation_rate(topology, hosts, config)
    P = load_protocol(config.values)
    planned = plan_job(topology, hosts, P, config.trees, config.mode, config.alpha, pool_size=config.pool_size,
                       ring_layout=config.ring_layout, host_latency=host_latency.MEAN,
                       host_cost=host_costs(config), lanes=config.lanes)
    dtype, chunks = np.dtype(config.dtype), -(-config.size // P.values)
    sent, choices, seen = [0] * len(planned.tree_plan.trees), [], set()
    for _ in range(config.calls):
        choice = planned.model.choose(config.size, dtype, sent, planned.mode, planned.ring_sum == "native",
                                      planned.ring_layout, planned.alpha)
        # the first call of a trees' part's size pays a window of exponent-only packets, later ones none
        k = ina_chunks(choice.ina_share, chunks)
        first = k not in seen and dtype != np.int32
        seen.add(k)
        choices.append(planned.model.as_first(choice, config.size, dtype, sent, planned.ring_sum == "native")
                       if first else choice)
        if planned.model.ina is not None:
            done = planned.model.ina.packets(k, dtype == np.int32, first)
            sent = [s + d for s, d in zip(sent, done)]
    return planned, choices


def run(config: RunConfig) -> dict:
    """Build, run, check; the figures as a dict."""
    started = time.perf_counter()
    topology = build_topology(config)
    hosts = members(topology, config.workers)
    if config.agg_rate is not None:
        topology = with_aggregation_rate(topology, hosts, config)
    cost = host_costs(config)
    fabric = Fabric(topology, config.seed, values=config.values, watch_interval=config.watch_interval,
                    host_cost=cost)
    options = {"pool_size": config.pool_size, "trees": config.trees, "mode": config.mode,
               "ring_layout": config.ring_layout, "lanes": config.lanes}
    if config.alpha is not None:
        options["alpha"] = config.alpha
    sums = Sums()
    job = fabric.create_job("sim", hosts, [Inputs(rank, config) for rank in range(len(hosts))],
                            timeout=config.timeout, **options)
    for w in job.workers:
        w.hand_over = sums.take
    for c in fabric.all_channels():
        c.faults.loss = config.loss / 100
    injected = _inject_faults(fabric, job, topology, config)
    built = time.perf_counter()
    fabric.run(config.until)
    ran = time.perf_counter()
    planned = fabric.controller.job_plan("sim")
    calls = [_call_figures(job, planned, config, c) for c in range(config.calls)]
    check = _check(job, sums, config) if config.check else {}
    checked = time.perf_counter()
    return {
        "config": asdict(config),
        "job": _job_figures(fabric, job, planned),
        "calls": calls,
        "check": check,
        "faults": {"injected": injected, "controller": [f"{t:.6f} s: {line}" for t, line in fabric.log]},
        "where": where_time_went(fabric, job),
        "host_cost": None if cost.free else {  # per datagram (and byte of it), and how busy the CPUs were
            "send_us": cost.send * 1e6, "receive_us": cost.receive * 1e6, "send_us_per_byte": cost.send_per_byte * 1e6,
            "receive_us_per_byte": cost.receive_per_byte * 1e6,
            "busy_seconds_per_worker": float(np.mean([w.cpu_busy for w in job.workers]))},
        "virtual": fabric.loop.now,
        "events": fabric.loop.events,
        "passes": sum(s.passes for s in fabric.switches.values()),
        "wall": {"setup": built - started, "run": ran - built, "check": checked - ran, "total": checked - started},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "report": fabric.report(),
    }


def _inject_faults(fabric: Fabric, job: Job, topology: Topology, config: RunConfig) -> list[dict]:
    """Schedule the switches' deaths and restarts, then the links' cuts, on the fabric's clock; what was set."""
    injected = []
    for (name, at), action in [*((f, "kill") for f in config.fail), *((f, "restart") for f in config.restart)]:
        switch = job.spec.trees[0].root if name == "root" else name
        if switch not in fabric.switches:
            raise ValueError(f"--{'fail' if action == 'kill' else action} {name}: no switch {switch!r}")
        fabric.loop.at(at, fabric.kill_switch if action == "kill" else fabric.restart_switch, switch)
        injected.append({"switch": switch, "at": at} if action == "kill" else {"restart": switch, "at": at})
    for name, at in config.cut:
        end = "{}-p{}".format(*fabric.controller.state.jobs["sim"].trees[0].tree.uplinks[0]) if name == "uplink" \
            else name
        index = next((i for i, lk in enumerate(topology.links) if end in (lk.a, lk.b)), None)
        if index is None:
            raise ValueError(f"--cut {name}: no link at {end!r} (a switch port, like agg1-p5)")
        fabric.loop.at(at, fabric.set_link, index, False)
        injected.append({"cut": f"{topology.links[index].a} -- {topology.links[index].b}", "at": at})
    return injected


def _call_figures(job: Job, planned: JobPlan, config: RunConfig, c: int) -> dict:
    """Call ``c``: how long it took on every worker, how it was run, and every method's prediction then."""
    records = [w.records[c] for w in job.workers if len(w.records) > c]
    errors = sorted({r.error for r in records if r.error})
    ended = [r.ended for r in records if r.ended is not None and not r.error]
    done = len(ended) == len(job.workers)
    took = max(ended) - min(r.started for r in records) if done else None
    choice = records[0].choice if records else None  # a size's first call timed with its exponent window
    options_then = planned.model.options(config.size, np.dtype(config.dtype), records[0].sent,
                                         planned.ring_sum == "native", planned.ring_layout, planned.alpha,
                                         first=records[0].first) if records else {}
    return {"seconds": took, "method": choice and choice.method, "ina_share": choice and choice.ina_share,
            "layout": choice and choice.layout, "model": choice and choice.seconds,
            "ratio": took / choice.seconds if took and choice and choice.seconds else None,
            "methods": {m: {"seconds": o.seconds, "latency": o.latency, "ina_share": o.ina_share,
                            "layout": o.layout} for m, o in options_then.items()},
            "error": None if done else (errors[0] if errors else "unfinished")}


def _job_figures(fabric: Fabric, job: Job, planned: JobPlan) -> dict:
    """The job as the controller set it up: its trees, packets, window, mode, and the plan's reasons."""
    spec = job.spec
    return {"workers": len(job.workers), "switches": len(fabric.topology.switches), "trees": len(spec.trees),
            "lanes": spec.lanes,
            "roots": [t.root for t in spec.trees], "values": spec.values, "pool_size": spec.pool_size,
            "auto_window": fabric.controller.state.jobs["sim"].auto_window,
            "mode": spec.mode, "layouts": [x.name for x in spec.ring_arrangements],
            "ina_limit_mbps": None if planned.limit_mbps == float("inf") else planned.limit_mbps,
            "why": planned.why, "plan_rate_mbps": planned.tree_plan.rate}


def where_time_went(fabric: Fabric, job) -> dict:
    """The figures behind ``Fabric.report``, for scripts: links, queues, the switches' engines, the workers."""
    elapsed = max(fabric.loop.now, 1e-12)
    channels = fabric.all_channels()
    busiest = max(channels, key=lambda c: c.busy_by(elapsed))
    switches = [s for s in fabric.switches.values() if s.agg_pps]
    states = {s: float(np.mean([w.time_in[s] for w in job.workers])) for s in job.workers[0].time_in}
    return {
        "busiest_link": {"name": busiest.name, "busy": busiest.busy_by(elapsed) / elapsed},
        "queue_wait_us_per_frame": 1e6 * sum(c.stats.queued for c in channels)
        / max(sum(c.stats.frames for c in channels), 1),
        "tail_drops": sum(c.stats.dropped_queue for c in channels),
        "lost": sum(c.stats.dropped_fault for c in channels),
        "aggregation_busiest": max((s.agg_busy / elapsed for s in switches), default=None),
        "aggregation_wait_us": 1e6 * sum(s.agg_waited for s in switches) / max(sum(s.passes for s in switches), 1)
        if switches else None,
        "aggregation_drops": sum(s.agg_dropped for s in switches),
        "worker_seconds": states,
        "retransmissions": int(sum(w.stats.retransmissions for w in job.workers)),
        "early_retransmissions": int(sum(w.stats.early_retransmissions for w in job.workers)),
        "window_cuts": int(sum(w.stats.window_cuts for w in job.workers)),
    }


def _check(job, sums: Sums, config: RunConfig) -> dict:
    """Every completed call against the exact sum: within the switches' bound (a ring alone in the tensor's
    type: float summation's), and the same bits on every worker.  The inputs are made again, one rank at a
    time (1,024 x 1 MB fits)."""
    out = {"within_bound": True, "identical": True, "max_error": 0.0, "calls_checked": 0}
    n = len(job.workers)
    for c in range(config.calls):
        records = [w.records[c] for w in job.workers if len(w.records) > c]
        if len(records) < n or any(r.error or r.ended is None for r in records) or c not in sums.first:
            continue
        small = n * config.size * np.dtype(config.dtype).itemsize <= 1 << 29
        inputs = [Inputs(rank, config)[c] for rank in range(n)] if small else _Made(n, config, c)
        exact = np.zeros(config.size)
        for a in inputs:
            exact += a.astype(np.float64).reshape(-1)
        choice = records[0].choice
        in_type = choice.method == "ring" and job.spec.ring_sum == "native" and config.dtype != "int32"
        bound = summation_bound(inputs).reshape(-1) if in_type else quantize.elementwise_bound(inputs, job.spec.values)
        out_type = np.float32 if config.dtype == "int32" else np.dtype(config.dtype)
        bound = bound + np.abs(exact) * float(np.finfo(out_type).eps)
        err = np.abs(sums.first[c].reshape(-1).astype(np.float64) - exact)
        out["max_error"] = max(out["max_error"], float(err.max(initial=0.0)))
        out["within_bound"] &= bool((err <= bound).all())
        out["identical"] &= sums.identical[c]
        out["calls_checked"] += 1
    if out["calls_checked"] == 0:
        out["within_bound"] = out["identical"] = False
    return out


class _Made(Sequence):
    """Every rank's input of one call, made when asked: a large job's are never all in memory at once."""

    def __init__(self, n: int, config: RunConfig, call: int) -> None:
        self.n, self.config, self.call = n, config, call

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rank: int) -> np.ndarray:
        if not 0 <= rank < self.n:
            raise IndexError(rank)
        return Inputs(rank, self.config)[self.call]


def _limit(job: dict) -> str:
    if job["ina_limit_mbps"] is None:
        return "no aggregation limit known"
    return f"{job['ina_limit_mbps']:g} Mb/s per worker ({job['why']})"


def _auto(job: dict) -> str:
    """An auto window's need beside it: W=391 (auto) or W=200 (auto; its trees need 391, the switches' fair share)."""
    need = job.get("auto_window")
    if need is None:
        return ""
    return " (auto)" if need == job["pool_size"] else f" (auto; its trees need {need}, the switches' fair share)"


def _trees(job: dict) -> str:
    lanes = job.get("lanes", 1)
    return f"{job['trees']} tree(s)" if lanes == 1 else f"{job['trees'] // lanes} tree(s) in {lanes} lanes each"


def summary(result: dict) -> list[str]:
    """What ``ina-sim run`` prints."""
    job, cfg = result["job"], result["config"]
    lines = [f"job: {job['workers']} workers on {cfg['topology']} ({job['switches']} switches), mode {job['mode']}, "
             + _trees(job) + f", V={job['values']}, W={job['pool_size']}{_auto(job)}, ring layouts "
             f"{', '.join(job['layouts'])}; {cfg['size']} {cfg['dtype']} values per call",
             f"C: {_limit(job)}"]
    for i, c in enumerate(result["calls"]):
        if c["error"]:
            lines.append(f"call {i}: failed: {c['error']}")
            continue
        lines.append(f"call {i}: {c['seconds'] * 1e6:,.1f} us virtual, {c['method']}; the model said "
                     f"{c['model'] * 1e6:,.1f} us ({c['ratio']:.3f}x)")
        lines += ["  " + line for line in method_lines(c["methods"], c["method"])]
    check = result["check"]
    if check:
        lines.append(f"every result within the bound: {check['within_bound']}; identical on every worker: "
                     f"{check['identical']}; max |error| {check['max_error']:.3g} ({check['calls_checked']} call(s))")
    for f in result["faults"]["injected"]:
        what = (f"{f['switch']} killed" if "switch" in f else f"{f['restart']} back" if "restart" in f
                else f"{f['cut']} cut")
        lines.append(f"fault: {what} at {f['at'] * 1e6:.1f} us")
    lines += [f"controller: {line}" for line in result["faults"]["controller"]]
    lines += result["report"]
    w = result["wall"]
    lines.append(f"wall {w['total']:.1f} s (setup {w['setup']:.1f}, run {w['run']:.1f}, check {w['check']:.1f}); "
                 f"{result['passes'] / max(w['run'], 1e-9):,.0f} pipeline passes/s; peak memory "
                 f"{result['peak_rss_mb']:,.0f} MB")
    return lines

