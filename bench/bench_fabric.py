"""The virtual fabric measured: its allreduce times against Mininet's on the same jobs, and its own speed.

Why: the fabric (virtual_fabric/) is worth its figures only if a job takes there the time it
takes on a network: the issue's aim is agreement with Mininet within 10%.  And it is worth
running at scale only if it is fast: the aim is 100,000 pipeline passes per second of wall
time (P4sim, one BMv2 behind a simulated network, moves 2,150 packets/s).

How, (1) agreement, old-style measurement and fabric side by side in one run: two jobs
Mininet can run on these two cores, built and measured by the benches that publish them
(their own functions, imported):

- bench_allreduce's ``single(4)`` with 50 Mbit/s host links (``topology_with_bw``), an INA job
  of ``DEFAULT_POOL`` slots, V = 256, 1 and 8 MiB of float32 (``bench_allreduce.measure``);
- bench_trees' ``leaf_spine(2, 2, 2)`` with host links at 30 and leaf-spine links at 15 Mbit/s,
  4 workers, 8 MiB, one tree and the planner's packed trees (``bench_trees.measure``).

Mininet first, ``--rounds`` rounds back to back (the jobs alternate, so a noisy moment hits
each), each measurement one checked warm-up call and ``--runs`` timed calls, a call's time its
slowest rank's.  Before each, the load average and the cores busy outside the benchmark are
printed (and kept in the CSV); ``--quiet-wait`` waits that long for them to go.  On the
single(4) network a link check first measures what htb counts of a frame: h1 sends the
workers' 1,082-byte frames faster than its link lets them go, and the frame bytes leaving per
second, over the rate htb was given, are its bytes per frame.  Then the same jobs in the
fabric: same topology and rates, pool, V, trees and arrays, mode ina, a warm-up call and
``--runs`` timed calls; a call's time is max(ended) - min(started) over the workers, in
virtual time (deterministic: one run per job).  Each is printed beside the controller's model
(``JobPlan.choose``: a call with the window open) and the wire bytes each worker sent per call
(Mininet: the host interface's tx bytes).

What it found (2026-11-26, 2 cores): the fabric agrees with Mininet within 6% (fabric/Mininet
0.95-1.00) wherever Mininet's links are the limit, and is 18-21% faster (0.79-0.82) where its
two cores are.  htb counts 1,081.8-1,082.8 bytes of a 1,082-byte frame (the Ethernet frame, no
preamble or FCS, as the fabric does), both sides put the same bytes on the wire (1,177,216 per
worker per MiB), and no queue fills (a window of 64 frames; 0-64 retransmissions per 8 MiB at
50 Mbit/s).  What changes with the rate is CPU: four Python workers and the switches share two
cores, and at 50 Mbit/s per worker (single(4)) or 30 (the packed leaf-spine) they keep the
links only 77-82% busy; at a half or a quarter of those rates (``--single-bw 12.5,25,50
--fabric-bw 7.5,15``) Mininet's time comes back to the fabric's (0.95-0.99 single(4),
0.99-1.00 leaf-spine); what is left is per call (1 MiB calls differ most), CPU the fabric does
not count either (docs/fabric.md: it does not model CPU time).

(2) speed: a 16-worker job on ``fat_tree(4)`` (every link at ``--speed-bw``: 10 and 100 Gbit/s),
``--speed-values`` float32 values per call, as ``ina-sim run --topology fat_tree --workers 16``
runs it: pipeline passes, link deliveries and events per second of wall time, and virtual
seconds per wall second, median of ``--speed-runs``; one more run under cProfile prints the
top functions by own time.

The worker's protocol core the fabric runs is measured old against new by
``python -m bench.bench_worker --against REV``.

    python -m bench.bench_fabric                    # (1) with Mininet (root), then (2); ~6 min
    python -m bench.bench_fabric --single-bw 12.5,25,50 --fabric-bw 7.5,15   # (1) at several rates; ~16 min
    python -m bench.bench_fabric --no-mininet       # the fabric's side of (1), and (2)
    python -m bench.bench_fabric --speed-only       # (2) alone
    python -m bench.bench_fabric --plot-only [--publish]

Writes bench/results/fabric-agreement.csv, fabric-agreement.png (``--publish``: also
docs/figures/fabric-agreement.png), fabric-speed.csv and fabric-profile.txt.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench import bench_allreduce, bench_trees, ranks
from bench.common import MIB, RESULTS, ROOT, add_publish_argument, publish, read_rows, save_figure, write_rows
from bench.machine_load import load_note
from bench.veth_common import sigterm_as_interrupt
from worker.protocol import ETH_IP_UDP

AIM = 0.10  # the agreement aim: fabric within 10% of Mininet
AIM_PASSES = 100_000  # the aim for the fabric's speed, pipeline passes per wall second
P4SIM_PPS = 2_150  # P4sim's packets/s through one BMv2, the point of comparison
SINGLE_WORKERS = 4  # bench_allreduce's single(4), at its 200/N = 50 Mbit/s by default
DISCARD_PORT = 9  # the link check's datagrams go to the discard port
SO_SNDBUFFORCE = 32  # Linux (root may exceed wmem_max); the socket module does not name it


# --- (1) agreement ---------------------------------------------------------------------------


@dataclass
class Point:
    """One job measured in Mininet and in the fabric, with the controller's model."""

    kind: str  # "single": bench_allreduce's single(4); "leafspine": bench_trees' leaf_spine(2, 2, 2)
    mode: str  # "ina" (single), or bench_trees' mode: "1 tree", "packed"
    size_bytes: int
    bw_mbit: float  # host links
    fabric_mbit: float = 0.0  # leaf-spine links
    trees: int = 0
    predicted: float = 0.0  # the controller's model, seconds per call
    rate_mbps: float = 0.0  # the planned rate each worker sends at (wire Mb/s, all its trees)
    mininet: list[float] = field(default_factory=list)  # timed calls of every round
    fabric: list[float] = field(default_factory=list)
    mininet_wire: list[float] = field(default_factory=list)  # tx bytes per worker per call, per round (single)
    fabric_wire: float | None = None
    retransmissions: int = 0  # Mininet, all rounds
    mininet_cpu: list[float] = field(default_factory=list)  # machine busy share per round (1.0 = all cores)
    switch_cpu: list[float] = field(default_factory=list)  # single: the switch process, share of one core
    loads: list[str] = field(default_factory=list)
    link_check: str = ""  # single: what htb counts of a frame, measured

    @property
    def config(self) -> str:
        if self.kind == "single":
            return f"single({SINGLE_WORKERS}) {self.bw_mbit:g} Mbit/s"
        return f"leaf_spine(2,2,2) {self.bw_mbit:g}/{self.fabric_mbit:g} Mbit/s"

    @property
    def job(self) -> str:
        return f"{self.size_bytes / MIB:g} MiB" + (f", {self.mode}" if self.kind == "leafspine" else "")

    @property
    def trees_option(self) -> int | str:
        """``create_job(trees=)``: bench_trees' mode, or the default (auto) for single(4)."""
        return bench_trees.MODES.get(self.mode, "auto")

    def topology(self) -> Any:
        if self.kind == "single":
            return bench_allreduce.topology_with_bw(SINGLE_WORKERS, self.bw_mbit)
        return bench_trees.leaf_spine_topology(self.fabric_mbit)

    def row(self) -> dict[str, Any]:
        m = statistics.median(self.mininet) if self.mininet else float("nan")
        f = statistics.median(self.fabric) if self.fabric else float("nan")
        mininet_wire = statistics.fmean(self.mininet_wire) if self.mininet_wire else None

        def use(wire: float | None, seconds: float) -> str:
            return f"{wire / seconds / (self.bw_mbit * 1e6 / 8):.3f}" if wire else ""

        return {"config": self.config, "job": self.job, "size_bytes": self.size_bytes, "trees": self.trees,
                "rate_mbps": f"{self.rate_mbps:g}", "mininet_calls": len(self.mininet), "mininet_median": f"{m:.4f}",
                "mininet_min": f"{min(self.mininet, default=m):.4f}",
                "mininet_max": f"{max(self.mininet, default=m):.4f}", "fabric_calls": len(self.fabric),
                "fabric_median": f"{f:.4f}", "fabric_min": f"{min(self.fabric, default=f):.4f}",
                "fabric_max": f"{max(self.fabric, default=f):.4f}", "fabric_over_mininet": f"{f / m:.3f}",
                "predicted": f"{self.predicted:.4f}", "mininet_over_predicted": f"{m / self.predicted:.3f}",
                "fabric_over_predicted": f"{f / self.predicted:.3f}",
                "mininet_wire_per_worker": round(mininet_wire) if mininet_wire else "",
                "fabric_wire_per_worker": round(self.fabric_wire) if self.fabric_wire else "",
                "mininet_link_use": use(mininet_wire, m), "fabric_link_use": use(self.fabric_wire, f),
                "mininet_retransmissions": self.retransmissions,
                "mininet_machine_cpu": ";".join(f"{c:.2f}" for c in self.mininet_cpu),
                "mininet_switch_cpu": ";".join(f"{c:.2f}" for c in self.switch_cpu),
                "link_check": self.link_check, "load": " | ".join(self.loads)}


def points(args: argparse.Namespace) -> list[Point]:
    pts = []
    if "single" in args.configs:
        pts += [Point("single", "ina", int(s * MIB) // 4 * 4, bw) for bw in args.single_bw for s in args.sizes]
    if "leafspine" in args.configs:
        pts += [Point("leafspine", mode, int(args.trees_size * MIB) // 4 * 4, 2 * bw, bw)
                for bw in args.fabric_bw for mode in bench_trees.MODES]
    return pts


def _started(net_cm: Any, stack: ExitStack, run_dir: Path) -> tuple[Any, Any]:
    """The started network and its set-up controller (the defaults: V = 256), hosts reachable."""
    from controller.controller import Controller
    from controller.pipeline import PipelineOptions

    net = stack.enter_context(net_cm)
    controller = stack.enter_context(Controller(net.network, run_dir / "controller-state.json", PipelineOptions()))
    controller.setup()
    if failed := net.ping_all():
        raise RuntimeError(f"hosts cannot reach each other after setup: {failed}")
    return net, controller


def blast(args: argparse.Namespace) -> int:
    """In a host's namespace: UDP datagrams of ``--payload`` bytes to ``--dest`` as fast as the socket takes
    them for ``--seconds``; one JSON line: the interface's tx bytes per second after the first second."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # a send buffer larger than the qdisc's queue (1,000 frames), so the queue never runs dry while this
    # process waits for a core: what leaves is then htb's rate alone
    sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 16 << 20)
    payload, dest = bytes(args.payload), (args.dest, DISCARD_PORT)
    started = time.monotonic()
    first: tuple[float, int] | None = None
    while (now := time.monotonic()) < started + args.seconds:
        if first is None and now >= started + 1.0:  # past htb's burst and the queue filling
            first = now, ranks.tx_bytes(args.iface)
        sock.sendto(payload, dest)
    last = time.monotonic(), ranks.tx_bytes(args.iface)
    print(json.dumps({"bytes_per_s": (last[1] - first[1]) / (last[0] - first[0])}), flush=True)
    return 0


def link_check(net: Any, bw: float) -> str:
    """What a shaped Mininet link counts of a frame: h1 sends the workers' frames (42 header bytes and an
    ina packet) faster than htb lets them go, and the frame bytes leaving h1-eth0 per second, over the
    rate htb was given, say how many bytes htb counts per frame (the fabric counts the frame, no
    preamble or FCS)."""
    from worker import protocol

    payload = protocol.load(ranks.VALUES).packet_bytes
    frame = payload + ETH_IP_UDP
    dest = str(net.topology.hosts["h2"].ip.ip)
    cmd = [sys.executable, "-m", "bench.bench_fabric", "--blast", "--iface", "h1-eth0", "--dest", dest,
           "--payload", str(payload), "--seconds", "4"]
    p = net.host("h1").popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    out, err = p.communicate(timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"the link check failed: {err[-1500:]}")
    rate = json.loads(out.splitlines()[-1])["bytes_per_s"]
    counted = frame * bw * 1e6 / 8 / rate
    return (f"htb at {bw:g} Mbit/s passed {rate * 8 / 1e6:.2f} Mbit/s of {frame}-byte frames (Ethernet header, "
            f"no preamble or FCS): it counts {counted:.1f} bytes per frame (the fabric: {frame})")


def mininet(pts: list[Point], args: argparse.Namespace) -> None:
    """Every point in Mininet, by bench_allreduce's and bench_trees' own measurements, ``--rounds`` times."""
    run_root = Path(tempfile.mkdtemp(prefix="bench-fabric-"))
    print(f"Mininet (run directory {run_root}): {args.rounds} round(s) of {args.runs} timed calls per job", flush=True)
    runner = SimpleNamespace(runs=args.runs, timeout=args.timeout, seed=args.seed, ring_cc="system",
                             pool_size=args.pool_size)
    for config in dict.fromkeys(p.config for p in pts):
        mine = [p for p in pts if p.config == config]
        print(f"  {config}: starting the network ...", flush=True)
        with ExitStack() as stack:
            run_dir = run_root / mine[0].kind
            net, controller = _started(ranks.network(mine[0].topology(), run_dir, args.busy_wait), stack,
                                       run_dir)
            hosts = sorted(net.topology.hosts, key=lambda h: int(h[1:]))
            for p in mine:
                plan = controller.plan(hosts, p.trees_option, mode="ina", pool_size=args.pool_size)
                p.trees, p.predicted = len(plan.tree_plan.trees), plan.choose(p.size_bytes).seconds
                p.rate_mbps = plan.tree_plan.rate
            if mine[0].kind == "single":
                print(f"  link check: {load_note(args.quiet_wait)}", flush=True)
                check = link_check(net, mine[0].bw_mbit)
                print(f"    {check}", flush=True)
                for p in mine:
                    p.link_check = check
            for round_ in range(args.rounds):
                for p in mine:
                    note = load_note(args.quiet_wait)
                    p.loads.append(note)
                    print(f"  round {round_ + 1}/{args.rounds} {config}, {p.job}: {note}", flush=True)
                    t0 = time.monotonic()
                    if p.kind == "single":
                        m = bench_allreduce.measure("ina", net, controller, SINGLE_WORKERS, p.size_bytes, p.bw_mbit,
                                                    runner)
                        cpu = m.machine_cpu
                        p.mininet_wire.append(m.wire)
                        p.switch_cpu.append(m.switch_cpu)
                        extra = f", switch CPU {m.switch_cpu:.0%} of a core, links {m.link_utilisation:.0%} busy"
                    else:
                        with bench_allreduce.CpuSampler([net.switch("leaf1").process.pid]) as sampler:
                            start = time.time()
                            m = bench_trees.measure(net, controller, p.mode,
                                                    SimpleNamespace(**vars(runner), size_bytes=p.size_bytes,
                                                                    fabric_bw=p.fabric_mbit))
                        cpu, extra = sampler.share(start, time.time())[1], " (whole measurement)"
                    p.mininet += m.times
                    p.mininet_cpu.append(cpu)
                    p.retransmissions += m.retransmissions
                    print(f"    {', '.join(f'{t:.3f}' for t in m.times)} s (model {p.predicted:.3f} s), "
                          f"{m.retransmissions} retransmissions, machine CPU {cpu:.0%}{extra} "
                          f"[{time.monotonic() - t0:.0f} s]", flush=True)
    shutil.rmtree(run_root, ignore_errors=True)


@dataclass
class FabricCalls:
    times: list[float]  # virtual seconds of each timed call
    wire: float  # bytes each worker sent per call (frames on its host link)
    predicted: float  # the fabric's controller's model of a call
    rate_mbps: float  # the planned rate each worker sends at
    trees: int
    error: float  # worst relative error of the last sum against the exact float64 sum


def fabric_calls(topology: Any, hosts: list[str], size_bytes: int, calls: int, seed: int, pool_size: int,
                 trees: int | str, timeout: float) -> FabricCalls:
    """One warm-up and ``calls`` timed calls of an INA job in the fabric, on bench_allreduce's arrays."""
    from virtual_fabric.fabric import Fabric

    fabric = Fabric(topology, seed)
    values = size_bytes // 4
    arrays = [[ranks.tensor(seed, rank, values)] * (calls + 1) for rank in range(len(hosts))]
    job = fabric.create_job("agreement", hosts, arrays, timeout=timeout, pool_size=pool_size, trees=trees, mode="ina")
    fabric.run(3600.0)
    times = []
    for c in range(1, calls + 1):
        records = [w.records[c] for w in job.workers]
        if errors := [r.error or "unfinished" for r in records if r.error or r.ended is None]:
            raise RuntimeError(f"fabric call {c} failed: {errors[0]}")
        times.append(max(r.ended for r in records) - min(r.started for r in records))
    uplinks = [w.uplink for w in job.workers]
    plan = fabric.controller.job_plan("agreement")
    return FabricCalls(times, sum(u.stats.bytes for u in uplinks) / len(uplinks) / (calls + 1),
                       plan.choose(size_bytes).seconds, plan.tree_plan.rate, len(job.spec.trees),
                       ranks.relative_error(job.workers[0].records[-1].result, seed, len(hosts)))


def fabric(pts: list[Point], args: argparse.Namespace) -> None:
    for p in pts:
        topology = p.topology()
        hosts = sorted(topology.hosts, key=lambda h: int(h[1:]))
        t0 = time.monotonic()
        got = fabric_calls(topology, hosts, p.size_bytes, args.runs, args.seed, args.pool_size, p.trees_option,
                           args.timeout)
        if p.predicted and (abs(got.predicted / p.predicted - 1) > 1e-9 or got.trees != p.trees):
            print(f"  note: the fabric's controller planned {got.trees} tree(s), {got.predicted:.4f} s; Mininet's "
                  f"{p.trees}, {p.predicted:.4f} s", flush=True)
        p.fabric, p.fabric_wire, p.trees, p.predicted = got.times, got.wire, got.trees, got.predicted
        p.rate_mbps = got.rate_mbps
        print(f"  fabric {p.config}, {p.job}: {', '.join(f'{t:.4f}' for t in p.fabric)} s (model "
              f"{p.predicted:.3f} s), {p.fabric_wire:,.0f} wire bytes per worker per call, rel. error "
              f"{got.error:.1e} [{time.monotonic() - t0:.0f} s wall]", flush=True)


def agreement_table(pts: list[Point]) -> None:
    print("\n(1) time per allreduce, Mininet against the virtual fabric, beside the controller's model "
          f"(median of the timed calls; aim: within {AIM:.0%})")
    print(f"{'configuration':<30} {'job':<18} {'trees':>5} | {'Mininet s':>9} {'min-max':>13} | {'fabric s':>8} | "
          f"{'fabric/Mininet':>14} | {'model s':>7} {'Mn/model':>8} {'fab/model':>9} | "
          f"{'wire B/worker Mn, fabric':>24}")
    for p in pts:
        r = p.row()
        ratio = float(r["fabric_over_mininet"])
        flag = "  <- outside the aim" if abs(ratio - 1) > AIM else ""
        wire = f"{r['mininet_wire_per_worker'] or '-'}, {r['fabric_wire_per_worker'] or '-'}"
        print(f"{p.config:<30} {p.job:<18} {p.trees:>5} | {r['mininet_median']:>9} "
              f"{r['mininet_min'] + '-' + r['mininet_max']:>13} | {r['fabric_median']:>8} | {ratio:>14.3f} | "
              f"{r['predicted']:>7} {r['mininet_over_predicted']:>8} {r['fabric_over_predicted']:>9} | "
              f"{wire:>24}{flag}")


def plot(csv_path: Path, path: Path) -> Path:
    """Every job's time over the controller's model, Mininet (median, min-max) beside the fabric, the
    seconds on the bars and fabric/Mininet above them; the jobs in order of the rate each worker sends at,
    where Mininet's two cores, not its links, become the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(csv_path) if r["mininet_calls"] != "0" and r["fabric_calls"] != "0"]
    rows.sort(key=lambda r: (r["config"].split()[0], float(r["rate_mbps"]), int(r["size_bytes"])))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(rows) + 2.5), 5.2))
    top = 1.0
    for i, r in enumerate(rows):
        model = float(r["predicted"])
        m, lo, hi = (float(r[k]) / model for k in ("mininet_median", "mininet_min", "mininet_max"))
        f = float(r["fabric_median"]) / model
        ax.bar(i - 0.2, m, 0.38, color="tab:gray", yerr=[[m - lo], [hi - m]], capsize=3,
               label="Mininet (median, min-max)" if i == 0 else None)
        ax.bar(i + 0.2, f, 0.38, color="tab:blue", label="virtual fabric" if i == 0 else None)
        for x, seconds in ((i - 0.2, r["mininet_median"]), (i + 0.2, r["fabric_median"])):
            ax.text(x, 0.5, f"{float(seconds):.3f} s", ha="center", va="center", rotation=90, fontsize=8,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7})
        ratio = float(r["fabric_over_mininet"])
        ax.text(i, max(hi, f) + 0.02, f"{ratio:.2f}", ha="center", va="bottom", fontsize=9, fontweight="bold",
                color="tab:green" if abs(ratio - 1) <= AIM else "tab:red")
        top = max(top, hi, f)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--", label="controller's model (wire bits / planned rate)")
    ax.set_xticks(range(len(rows)), [f"{r['config'].replace(' ', chr(10), 1)}\n{r['job']}\n{r['trees']} tree(s), "
                                     f"{float(r['rate_mbps']):g} Mb/s\nper worker" for r in rows], fontsize=7)
    ax.set_ylim(0, top * 1.35)
    ax.set_ylabel("time per allreduce / the model's")
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    ax.set_title(f"The virtual fabric against Mininet on the same jobs (INA, V=256, float32, htb-shaped links)\n"
                 f"above the bars: fabric/Mininet, green within {AIM:.0%}", fontsize=10)
    return save_figure(fig, path)


# --- (2) speed -------------------------------------------------------------------------------


@dataclass
class Speed:
    bw_mbit: float
    run: int
    workers: int
    trees: int
    values: int  # float32 values per call
    calls: int
    virtual_s: float  # virtual time of the whole run
    call_s: float  # virtual time of the last call
    predicted_s: float  # the controller's model of a call
    setup_s: float  # wall: building the fabric, the controller's setup and the job
    wall_s: float  # wall: running it
    passes: int
    deliveries: int
    events: int

    @property
    def passes_per_s(self) -> float:
        return self.passes / self.wall_s

    def row(self) -> dict[str, Any]:
        return {**asdict(self), "passes_per_s": round(self.passes_per_s),
                "deliveries_per_s": round(self.deliveries / self.wall_s),
                "events_per_s": round(self.events / self.wall_s),
                "virtual_per_wall": self.virtual_s / self.wall_s}


def speed_run(bw: float, values: int, calls: int, run: int, profile: cProfile.Profile | None = None) -> Speed:
    """``ina-sim run --topology fat_tree --workers 16 --bw BW --size VALUES --calls CALLS``, timed from here."""
    from controller.topology import Topology, fat_tree
    from virtual_fabric.fabric import Fabric
    from worker.gradients import gradient

    started = time.perf_counter()
    topology = Topology.from_dict(fat_tree(4, host_bw=bw, fabric_bw=bw))
    hosts = sorted(topology.hosts, key=lambda h: int(h[1:]))
    fabric = Fabric(topology, 0)
    arrays = [[gradient(c, rank, values, "float32") for c in range(calls)] for rank in range(len(hosts))]
    job = fabric.create_job("speed", hosts, arrays, timeout=10.0, trees="auto", mode="ina")
    built = time.perf_counter()
    if profile is not None:
        profile.enable()
    fabric.run(3600.0)
    if profile is not None:
        profile.disable()
    wall = time.perf_counter() - built
    last = [w.records[-1] for w in job.workers]
    if any(r.error or r.ended is None for r in last) or any(len(w.records) < calls for w in job.workers):
        raise RuntimeError(f"fat_tree(4) at {bw:g} Mb/s: a call did not complete")
    predicted = fabric.controller.job_plan(job.spec.name).choose(values * 4).seconds
    return Speed(bw, run, len(hosts), len(job.spec.trees), values, calls, fabric.loop.now,
                 max(r.ended for r in last) - min(r.started for r in last), predicted, built - started, wall,
                 sum(s.passes for s in fabric.switches.values()), sum(c.stats.frames for c in fabric.all_channels()),
                 fabric.loop.events)


def speed_table(results: list[Speed]) -> None:
    print(f"\n(2) speed of the fabric: fat_tree(4), 16 workers, one job (median of runs; wall time of the run, "
          f"setup apart); aim {AIM_PASSES:,} pipeline passes/s, P4sim {P4SIM_PPS:,} packets/s through one BMv2")
    print(f"{'links':>9} {'runs':>4} {'trees':>5} {'MB/call':>7} | {'passes/s':>9} {'of aim':>6} {'x P4sim':>7} | "
          f"{'deliveries/s':>12} {'events/s':>9} | {'virtual s/wall s':>16} | {'call ms':>8} {'model ms':>8} | "
          f"{'wall s':>6} {'setup s':>7}")
    for bw in dict.fromkeys(r.bw_mbit for r in results):
        mine = [r for r in results if r.bw_mbit == bw]

        def med(f: Callable[[Speed], float], mine: list[Speed] = mine) -> float:
            return statistics.median(f(r) for r in mine)

        pps = med(lambda r: r.passes_per_s)
        s = mine[0]
        print(f"{bw / 1000:>6g} Gb {len(mine):>4} {s.trees:>5} {s.values * 4 / 1e6:>7g} | {pps:>9,.0f} "
              f"{pps / AIM_PASSES:>6.0%} {pps / P4SIM_PPS:>7.1f} | {med(lambda r: r.deliveries / r.wall_s):>12,.0f} "
              f"{med(lambda r: r.events / r.wall_s):>9,.0f} | {med(lambda r: r.virtual_s / r.wall_s):>16.2e} | "
              f"{s.call_s * 1e3:>8.3f} {s.predicted_s * 1e3:>8.3f} | {med(lambda r: r.wall_s):>6.2f} "
              f"{med(lambda r: r.setup_s):>7.2f}")


def profile_report(profile: cProfile.Profile, top: int = 8) -> str:
    """The ``top`` functions by own time, with their share of the run."""
    stats = pstats.Stats(profile)
    total = sum(v[2] for v in stats.stats.values())
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    out = io.StringIO()
    out.write(f"{'own s':>7} {'share':>6} {'cum s':>7} {'calls':>10}  function\n")
    for (file, line, name), (_, calls, own, cum, _) in rows:
        where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if line else file
        out.write(f"{own:>7.2f} {own / total:>6.1%} {cum:>7.2f} {calls:>10,}  {name} ({where})\n")
    out.write(f"{total:>7.2f} s own time in all ({len(stats.stats)} functions)\n")
    return out.getvalue()


def speed(args: argparse.Namespace) -> list[Speed]:
    print(f"speed of the fabric (wall time: {load_note(0)})", flush=True)
    results = []
    for bw in args.speed_bw:
        for run in range(args.speed_runs):
            s = speed_run(bw, args.speed_values, args.speed_calls, run)
            results.append(s)
            print(f"  fat_tree(4) at {bw / 1000:g} Gb/s run {run + 1}/{args.speed_runs}: {s.passes:,} passes, "
                  f"{s.deliveries:,} deliveries, {s.events:,} events in {s.wall_s:.2f} s ({s.passes_per_s:,.0f} "
                  f"passes/s; setup {s.setup_s:.2f} s); call {s.call_s * 1e3:.3f} ms virtual, model "
                  f"{s.predicted_s * 1e3:.3f} ms", flush=True)
    profile = cProfile.Profile()
    s = speed_run(args.speed_bw[0], args.speed_values, args.speed_calls, -1, profile)
    report = profile_report(profile)
    print(f"\ncProfile of one run at {args.speed_bw[0] / 1000:g} Gb/s ({s.wall_s:.2f} s under the profiler, "
          f"{s.passes:,} passes): top functions by own time\n{report}", end="")
    path = args.out_dir / "fabric-profile.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report)
    return results


# --- main ------------------------------------------------------------------------------------


def _list(kind: type) -> Callable[[str], list]:
    return lambda text: [kind(v) for v in text.split(",") if v.strip()]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="timed calls per measurement (after one warm-up)")
    ap.add_argument("--rounds", type=int, default=2, help="Mininet rounds over the jobs, back to back")
    ap.add_argument("--configs", type=_list(str), default=["single", "leafspine"],
                    help="(1): single (bench_allreduce's single(4)), leafspine (bench_trees' leaf_spine(2, 2, 2))")
    ap.add_argument("--sizes", type=_list(float), default=[1.0, 8.0], help="single(4): MiB of float32 per call")
    ap.add_argument("--single-bw", type=_list(float), default=[bench_allreduce.default_bw(SINGLE_WORKERS)],
                    help="single(4): host links, Mbit/s (bench_allreduce's 200/N); several: a network each")
    ap.add_argument("--trees-size", type=float, default=8.0, help="leaf-spine: MiB of float32 per call")
    ap.add_argument("--fabric-bw", type=_list(float), default=[15.0],
                    help="leaf-spine: leaf-spine links, Mbit/s, host links twice this (bench_trees' default); "
                         "several: a network each")
    ap.add_argument("--pool-size", type=int, default=ranks.DEFAULT_POOL)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--busy-wait", type=float, default=1800.0, help="seconds to wait for a busy Mininet network")
    ap.add_argument("--quiet-wait", type=float, default=300.0,
                    help="before each Mininet measurement, seconds to wait for other busy processes to go")
    ap.add_argument("--no-mininet", action="store_true", help="(1) in the fabric only (no root needed)")
    ap.add_argument("--speed-only", action="store_true", help="only (2)")
    ap.add_argument("--no-speed", action="store_true", help="only (1)")
    ap.add_argument("--speed-bw", type=_list(float), default=[10_000.0, 100_000.0], help="(2): link rates, Mb/s")
    ap.add_argument("--speed-values", type=int, default=1_000_000, help="(2): float32 values per call")
    ap.add_argument("--speed-calls", type=int, default=1, help="(2): calls per run")
    ap.add_argument("--speed-runs", type=int, default=3, help="(2): runs per link rate")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    ap.add_argument("--plot-only", action="store_true")
    add_publish_argument(ap)
    blaster = ap.add_argument_group("link check (internal: run in a host by the benchmark)")
    blaster.add_argument("--blast", action="store_true")
    blaster.add_argument("--iface")
    blaster.add_argument("--dest")
    blaster.add_argument("--payload", type=int)
    blaster.add_argument("--seconds", type=float)
    return ap


def run(args: argparse.Namespace, agreement_csv: Path, with_mininet: bool) -> list[Point]:
    """(1) and (2) as asked, their tables printed and CSVs written; (1)'s points."""
    pts: list[Point] = []
    if not args.speed_only:
        pts = points(args)
        if with_mininet:
            mininet(pts, args)
        print("virtual fabric: the same jobs", flush=True)
        fabric(pts, args)
        agreement_table(pts)
        write_rows(agreement_csv, [p.row() for p in pts], digits=None)
    if not args.no_speed:
        results = speed(args)
        speed_table(results)
        write_rows(args.out_dir / "fabric-speed.csv", [r.row() for r in results], digits=None)
    return pts


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.blast:
        return blast(args)
    import logging

    logging.basicConfig(level=logging.ERROR)  # the controller's warnings in the fabric are the run's, not ours
    agreement_csv, png = args.out_dir / "fabric-agreement.csv", args.out_dir / "fabric-agreement.png"
    if args.plot_only:
        publish(plot(agreement_csv, png), args.publish)
        return 0
    with_mininet = not (args.no_mininet or args.speed_only)
    if with_mininet and os.geteuid() != 0:
        print("Mininet needs root; --no-mininet runs the fabric's side", file=sys.stderr)
        return 2
    sigterm_as_interrupt()
    try:
        pts = run(args, agreement_csv, with_mininet)
    except KeyboardInterrupt:
        print("\ninterrupted; networks stopped", file=sys.stderr)
        return 130
    if pts and with_mininet:
        publish(plot(agreement_csv, png), args.publish, agreement_csv)
    return 0

if __name__ == "__main__":
    sys.exit(main())
