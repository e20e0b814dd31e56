"""One job in the fabric, as ``ina-sim run`` and the scale benchmark describe it: build the network
(a topology file, or a builder such as ``fat_tree:16``), run the job's calls in virtual time, and
say how long each took beside the controller's model, whether every result is within the bound,
and where the time went.

The answer is a plain dict (``--json`` prints it) whose figures depend only on the config and the
commit, apart from ``wall`` and ``peak_rss_mb``, which say what the run cost this machine.
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from controller.controller import plan_job
from controller.plan import depth, nodes
from controller.topology import Topology, fat_tree, leaf_spine, single, tree
from virtual_fabric.fabric import Fabric, seconds
from virtual_fabric.ring import HOST_LATENCY
from worker import quantize
from worker.cli import gradient
from worker.engine import INITIAL_IN_FLIGHT
from worker.protocol import load as load_protocol
from worker.ring import summation_bound

BUILDERS = {"single": single, "tree": tree, "leaf_spine": leaf_spine, "fat_tree": fat_tree}
LEGACY = {"single": "single:{w}", "tree": "tree:2,{half}", "leaf_spine": "leaf_spine:2,2,{half}",
          "fat_tree": "fat_tree:4"}  # the names without arguments that ``ina-sim run`` always took


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
    pool_size: int = 64  # slots per tree and switch: the window
    trees: int | str = "auto"
    mode: str = "ina"  # ina, ring, hybrid or auto
    alpha: float | None = None
    agg_rate: float | None = None  # each switch sums this fraction of the link rate per child it has
    loss: float = 0.0  # % of frames lost on every link
    fail: list[tuple[str, float]] = field(default_factory=list)  # (switch or "root", virtual s): killed then
    timeout: float = 10.0  # a worker's seconds without progress
    until: float = 3600.0  # virtual seconds at most
    seed: int = 0  # the run's random draws (loss)
    watch_interval: float = 0.5  # the controller's watch period (virtual s)
    check: bool = True  # compare every result with the exact sum


def build_topology(config: RunConfig) -> Topology:
    """The network: a builder's (``fat_tree:16``, ``leaf_spine:2,4,8``, ``single:4``, ``tree:2,4``)
    with ``bw``/``fabric_bw``/``delay`` on its links, or a topology file as it is."""
    text = config.topology
    name, _, argtext = text.partition(":")
    if name in BUILDERS and not argtext:
        n = config.workers or 4
        name, _, argtext = LEGACY[name].format(w=n, half=max(n // 2, 1)).partition(":")
    if name not in BUILDERS:
        return Topology.load(text)
    try:
        args = [int(a) for a in argtext.split(",")]
    except ValueError:
        raise ValueError(f"topology {text!r}: a builder's arguments are integers, like fat_tree:16") from None
    fabric_bw = config.fabric_bw or config.bw
    if name == "leaf_spine":
        spec = leaf_spine(*args, host_bw=config.bw, fabric_bw=fabric_bw)
    elif name == "fat_tree":
        spec = fat_tree(*args, host_bw=config.bw, fabric_bw=fabric_bw)
    else:
        spec = BUILDERS[name](*args)
        for link in spec["links"]:
            link.append({"bw": config.bw if any(e.startswith("h") and "-p" not in e for e in link[:2]) else fabric_bw})
    if config.delay:
        seconds(config.delay)  # a bad delay fails here, by name
        for link in spec["links"]:
            link[2]["delay"] = config.delay
    return Topology.from_dict(spec)


def members(topology: Topology, workers: int | None) -> list[str]:
    hosts = sorted(topology.hosts, key=lambda h: (len(h), h))
    if workers is not None and not 1 <= workers <= len(hosts):
        raise ValueError(f"{workers} workers asked for; the topology has {len(hosts)} hosts")
    return hosts[:workers]


def with_aggregation_rate(topology: Topology, hosts: list[str], config: RunConfig) -> Topology:
    """The topology with every switch of the job's trees summing ``agg_rate`` x the link rate per child:
    ``agg_pps`` = rate x L / (frame bits) x (its children in the planned trees), so each switch lets
    each worker send at ``agg_rate`` x L (C, in docs/hybrid.md's terms).  The planner does not read
    ``agg_pps``, so the trees are those planned without it."""
    P = load_protocol(config.values)
    found = plan_job(topology, hosts, P, config.trees, "ina").tree_plan
    frames = config.agg_rate * found.rate * 1e6 / (P.frame_bytes * 8)  # per child and second, at C
    load: dict[str, float] = {}
    for t in found.trees:
        for node in nodes(topology, hosts, t.tree).values():
            load[node.switch] = load.get(node.switch, 0.0) + t.share * len(node.children)
    data = topology.to_dict()
    for switch, children in load.items():
        data["switches"][switch]["agg_pps"] = frames * children
    return Topology.from_dict(data)


def run(config: RunConfig) -> dict:
    """Build, run, check; the figures as a dict."""
    started = time.perf_counter()
    topology = build_topology(config)
    hosts = members(topology, config.workers)
    if config.agg_rate is not None:
        topology = with_aggregation_rate(topology, hosts, config)
    fabric = Fabric(topology, config.seed, values=config.values, watch_interval=config.watch_interval)
    arrays = [[gradient(call, rank, config.size, config.dtype) for call in range(config.calls)]
              for rank in range(len(hosts))]
    options = {"pool_size": config.pool_size, "trees": config.trees, "mode": config.mode}
    if config.alpha is not None:
        options["alpha"] = config.alpha
    job = fabric.create_job("sim", hosts, arrays, timeout=config.timeout, **options)
    for c in fabric.all_channels():
        c.faults.loss = config.loss / 100
    injected = []
    for name, at in config.fail:
        switch = job.spec.trees[0].root if name == "root" else name
        if switch not in fabric.switches:
            raise ValueError(f"--fail {name}: no switch {switch!r}")
        fabric.loop.at(at, fabric.kill_switch, switch)
        injected.append({"switch": switch, "at": at})
    built = time.perf_counter()
    fabric.run(config.until)
    ran = time.perf_counter()
    planned = fabric.controller.plan(hosts, trees=config.trees, mode=config.mode, alpha=config.alpha)
    nbytes = config.size * np.dtype(config.dtype).itemsize
    model = planned.seconds_per_mb() * nbytes / 1e6
    latency = latency_terms(topology, hosts, planned, job, config)
    with_latency = model + {"ina": latency["ina"], "ring": latency["ring"]}.get(
        planned.split.mode, max(latency["ina"], latency["ring"]))
    calls = []
    for c in range(config.calls):
        records = [w.records[c] for w in job.workers if len(w.records) > c]
        errors = sorted({r.error for r in records if r.error})
        ended = [r.ended for r in records if r.ended is not None and not r.error]
        done = len(ended) == len(hosts)
        took = max(ended) - min(r.started for r in records) if done else None
        predicted = with_latency + (latency["slow_start"] if c == 0 and planned.split.mode != "ring" else 0.0)
        calls.append({"seconds": took, "model": model, "ratio": took / model if took and model else None,
                      "model_with_latency": predicted,
                      "ratio_with_latency": took / predicted if took and predicted else None,
                      "error": None if done else (errors[0] if errors else "unfinished")})
    check = _check(job, arrays, config) if config.check else {}
    checked = time.perf_counter()
    spec = job.spec
    return {
        "config": asdict(config),
        "job": {"workers": len(hosts), "switches": len(topology.switches), "trees": len(spec.trees),
                "roots": [t.root for t in spec.trees], "values": spec.values, "pool_size": spec.pool_size,
                "mode": planned.split.mode, "ina_share": spec.ina_share, "why": planned.split.why,
                "model_seconds_per_mb": planned.split.seconds_per_mb, "plan_rate_mbps": planned.tree_plan.rate},
        "calls": calls,
        "check": check,
        "faults": {"injected": injected, "controller": [f"{t:.6f} s: {line}" for t, line in fabric.log]},
        "latency": latency,
        "where": where_time_went(fabric, job),
        "virtual": fabric.loop.now,
        "events": fabric.loop.events,
        "passes": sum(s.passes for s in fabric.switches.values()),
        "wall": {"setup": built - started, "run": ran - built, "check": checked - ran, "total": checked - started},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "report": fabric.report(),
    }


def latency_terms(topology: Topology, hosts: list[str], planned, job, config: RunConfig) -> dict:
    """What the link-rate model leaves out, per call (steady state: the window already open):
    INA, two round trips of the deepest tree (the exponent-only packets that open the call wait a
    round trip for their results before values go; the last results come a round trip after the
    last packet), a round trip being at least what the trees' windows take to cross a host link,
    and on the first call the slow start that opens the window;
    a ring, 2(N-1) steps of its path's propagation and the host's latency each."""
    P = load_protocol(config.values)
    bits, delay = P.frame_bytes * 8, seconds(config.delay) if config.delay else 0.0
    host_hop = bits / (config.bw * 1e6) + delay
    fabric_hop = bits / ((config.fabric_bw or config.bw) * 1e6) + delay
    trees = planned.tree_plan.trees
    deepest = max((depth(topology, hosts, t.tree) for t in trees), default=0)
    empty = 2 * (host_hop + deepest * fabric_hop) + HOST_LATENCY
    # every tree's full window in flight: what the host link cannot carry in one empty round trip
    # waits in its queue, and the round trip is as long as the link takes to send the windows
    windows = job.spec.pool_size * len(trees) * bits / (planned.tree_plan.rate * 1e6) if trees else 0.0
    round_trip = max(empty, windows)
    ring = job.ring
    step = float(np.mean(ring.latency)) if ring is not None and ring.latency else 0.0
    # the first call opens each tree's window by slow start: a round trip per doubling from
    # INITIAL_IN_FLIGHT to what the tree's rate fills in a round trip, less what those rounds sent
    slow_start = 0.0
    if trees:
        rate = min(planned.tree_plan.rate, planned.split.capacity.ina_mbps) * 1e6 / len(trees)
        target = min(job.spec.pool_size, rate * round_trip / bits)
        rounds = max(0, math.ceil(math.log2(max(target, 1) / INITIAL_IN_FLIGHT)))
        slow_start = max(0.0, rounds * round_trip - INITIAL_IN_FLIGHT * (2 ** rounds - 1) * bits / rate)
    return {"round_trip": round_trip, "ina": 2 * round_trip if trees else 0.0, "slow_start": slow_start,
            "ring_step": step, "ring": 2 * (len(hosts) - 1) * step}


def where_time_went(fabric: Fabric, job) -> dict:
    """The figures behind ``Fabric.report``, for scripts: links, queues, the switches' engines, the workers."""
    elapsed = max(fabric.loop.now, 1e-12)
    channels = fabric.all_channels()
    busiest = max(channels, key=lambda c: c.stats.busy)
    switches = [s for s in fabric.switches.values() if s.agg_pps]
    states = {s: float(np.mean([w.time_in[s] for w in job.workers])) for s in job.workers[0].time_in}
    return {
        "busiest_link": {"name": busiest.name, "busy": busiest.stats.busy / elapsed},
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
        "window_cuts": int(sum(w.stats.window_cuts for w in job.workers)),
    }


def _check(job, arrays: list[list[np.ndarray]], config: RunConfig) -> dict:
    """Every completed call against the exact sum: within the switches' bound (a ring alone: float
    summation's), and the same bits on every worker.  Streams over the ranks (1,024 x 1 MB fits)."""
    out = {"within_bound": True, "identical": True, "max_error": 0.0, "calls_checked": 0}
    in_type = job.spec.ring_in_tensor_type
    for c in range(config.calls):
        results = [w.records[c].result for w in job.workers if len(w.records) > c]
        if any(r is None for r in results) or len(results) < len(job.workers):
            continue
        inputs = [per_rank[c] for per_rank in arrays]
        exact = np.zeros(inputs[0].size)
        for a in inputs:
            exact += a.astype(np.float64).reshape(-1)
        bound = summation_bound(inputs).reshape(-1) if in_type else quantize.elementwise_bound(inputs, job.spec.values)
        out_type = np.float32 if config.dtype == "int32" else np.dtype(config.dtype)
        bound = bound + np.abs(exact) * float(np.finfo(out_type).eps)
        first = results[0].reshape(-1)
        err = np.abs(first.astype(np.float64) - exact)
        out["max_error"] = max(out["max_error"], float(err.max(initial=0.0)))
        out["within_bound"] &= bool((err <= bound).all())
        out["identical"] &= all(np.array_equal(first, r.reshape(-1)) for r in results[1:])
        out["calls_checked"] += 1
    if out["calls_checked"] == 0:
        out["within_bound"] = out["identical"] = False
    return out


def summary(result: dict) -> list[str]:
    """What ``ina-sim run`` prints."""
    job, cfg = result["job"], result["config"]
    lines = [f"job: {job['workers']} workers on {cfg['topology']} ({job['switches']} switches), mode {job['mode']}"
             f" (ina share {job['ina_share']:.3f}), {job['trees']} tree(s), V={job['values']}, "
             f"W={job['pool_size']}, {cfg['size']} {cfg['dtype']} values per call",
             f"why: {job['why']}"]
    for i, c in enumerate(result["calls"]):
        if c["error"]:
            lines.append(f"call {i}: failed: {c['error']}")
        else:
            lines.append(f"call {i}: {c['seconds'] * 1e6:.1f} us virtual; link-rate model {c['model'] * 1e6:.1f} us "
                         f"({c['ratio']:.3f}x), with round trips and ring steps {c['model_with_latency'] * 1e6:.1f} us "
                         f"({c['ratio_with_latency']:.3f}x)")
    check = result["check"]
    if check:
        lines.append(f"every result within the bound: {check['within_bound']}; identical on every worker: "
                     f"{check['identical']}; max |error| {check['max_error']:.3g} ({check['calls_checked']} call(s))")
    for f in result["faults"]["injected"]:
        lines.append(f"fault: {f['switch']} killed at {f['at'] * 1e6:.1f} us")
    lines += [f"controller: {line}" for line in result["faults"]["controller"]]
    lines += result["report"]
    w = result["wall"]
    lines.append(f"wall {w['total']:.1f} s (setup {w['setup']:.1f}, run {w['run']:.1f}, check {w['check']:.1f}); "
                 f"{result['passes'] / max(w['run'], 1e-9):,.0f} pipeline passes/s; peak memory "
                 f"{result['peak_rss_mb']:,.0f} MB")
    return lines

