"""Time per allreduce: in-network aggregation (``worker.Worker``) against ring allreduce (``worker.ring.RingWorker``).

Why: the point of aggregating in the switch is bytes on the wire.  A ring allreduce makes
every worker send 2(N-1)/N x K bytes of a K-byte tensor (reduce-scatter, then allgather);
with the switch summing, every worker sends K once (plus per-packet headers) and receives
the sum once.  When the host links are the bottleneck, INA should therefore approach
2(N-1)/N (1.5x at N=4, 1.75x at N=8, 2x in the limit) over the ring.  This benchmark
measures that on the same network for both methods.

How: a Mininet network ``controller.topology.single(N)`` (one switch s1, hosts h1..hN), every
host link limited by Mininet's TCLink to ``bw`` Mbit/s each way (htb), with the built-in
target running ``p4src/ina.p4`` built with 256 values per packet
(``PipelineOptions(values=256)``: 16-byte ina header + 1024-byte payload per UDP datagram).
The links are the bottleneck at the default rates, 200/N Mbit/s (50 Mbit/s at N=4, 25 at
N=8): the native switch forwards them with a third of a core, and what stops a faster link
is the two cores the N Python workers, their kernel stacks and the switch share (measured:
at 100 Mbit/s and N=4, INA kept its links only 56% busy, at 6.6 MB/s per worker; at N=8,
30%).  The ring runs over TCP between the hosts (port 47000), forwarded by the same switch
with ina.p4's IPv4 routes.  A third method, ``job-ring``, is what ``ina-ctl job create --mode
ring`` gives a user: a job's ring, run by ``worker.Worker``; it moves the ring's bytes (float32
both ways, 2(N-1)/N) and should take the ring's time.

Both methods are timed the same way, by one rank-runner process per host (``python -m bench.ranks``,
bench/ranks.py, started in the host's namespace): the ranks start, make one untimed
allreduce (warm-up, and a barrier; its result is checked against the exact float64 sum of all
ranks' arrays, which every rank can draw from the seeds), then ``--runs`` timed calls, and
report one JSON line.  An allreduce is done when its slowest rank is done, so the time of
call i is the maximum over ranks; the figure is the median over calls.  Bytes on the wire are
measured: the host interface's tx_bytes (``/proc/self/net/dev`` in the host's namespace;
Ethernet frames as the kernel counts them, no preamble/FCS) before and after each call.
Application bytes are printed next to them: ``Worker.stats.bytes_sent`` (UDP payload,
retransmissions included) and ``RingWorker.bytes_sent`` (tensor bytes only).  Each INA
measurement gets a fresh job (``--pool-size`` slots, which is also the worker's window).

Window (pool size) 64, the controller's default (tests/test_defaults.py keeps them equal): a
1,082-byte frame takes 0.17 ms at 50 Mbit/s, and 8 in flight already keep the links 93% busy
(16: 94%, N=4, 8 MiB), so the window is not what stops the last percent (each call's first
window carries only exponents, and the calls start and end one round trip apart); a larger
one only queues in the host's own htb qdisc, and under loss (bench_loss) keeps the link busy
while a lost packet's slot waits.

TCP congestion control of the ring: CUBIC by default (``--ring-cc``), set per socket.  The
machine this was written on defaults to BBR (v1), which kept the ring's links only 60-70%
busy, without a single TCP retransmission or qdisc drop: ``ss -ti`` showed its bandwidth
estimate falling after the app-limited gaps between ring steps (down to 1.2 Mbit/s on a
4 Mbit/s link, for seconds) and its 0.75-gain probing phases draining a queue that is nearly
empty, while each shaped link also carries the ACKs of the neighbouring flow.  CUBIC (and
Reno) keep the same links 98-100% busy (N=4, 8 MiB: 27.0 s against 38 s with BBR).
``--ring-cc system`` measures with the machine's default instead.

    /tmp/venv/bin/python -m bench.bench_allreduce                   # N=4,8 x 1,8 MiB, 3 timed calls each
    /tmp/venv/bin/python -m bench.bench_allreduce --quick           # smoke run: N=4, 1 MiB
    /tmp/venv/bin/python -m bench.bench_allreduce --workers 4 --sizes 1 --bw 2   # one bandwidth for all N
    /tmp/venv/bin/python -m bench.bench_allreduce --plot-only       # redraw the plot from the CSV
    /tmp/venv/bin/python -m bench.bench_allreduce --topology bmv2-env/topologies/servers-4x2.json --sizes 64 \
        --methods ina,ring --runs 3                                 # through spare servers (below)

Any topology file (``--topology``): its hosts that are not servers are the workers, its links' rates are the
file's (or ``--bw`` for the workers' links and ``--server-bw``, default twice that, for the servers'), and an
INA job is what the controller plans there: with server hosts (docs/servers.md), a tree per server, the call
split over them, the plain switch only routing.  The servers' CPU (their target processes, one core each) is
sampled beside the switch's.  Every point prints the one model's time (``Controller.job_plan`` for a job,
``Controller.plan(mode="ring")`` for the TCP ring) beside the measured one; the CSV and plot are then
``allreduce-<file's stem>``.

Sizes are in MiB of float32 (1 MiB = 262,144 values).  Writes bench/results/allreduce.csv and
bench/results/allreduce.png.  Root only (Mininet); the network, the switch and every
rank-runner are stopped on any exit, Ctrl-C included.  If another network holds the switch
interfaces (NetworkBusy), waits and retries for up to ``--busy-wait`` seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import compare
from bench.common import MIB, RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from bench.ranks import DEFAULT_POOL, METHODS, RING_CC, VALUES, network, run_ranks, runner_command
from bench.veth_common import sigterm_as_interrupt
from controller.rings import ETH_IP_TCP, TCP_MSS
from worker.protocol import ETH_IP_UDP

RING_PORT = 47000


# --- the parent: network, controller, measurements --------------------------------------------


@dataclass
class Measurement:
    method: str
    workers: int
    size_bytes: int
    bw_mbit: float
    pool_size: int
    times: list[float]  # per timed call: the slowest rank's time
    wire: float  # measured tx bytes per worker per call (mean over ranks and calls)
    payload: float  # application bytes per worker per call
    packets: float  # INA datagrams per worker per call (0 for the ring)
    retransmissions: int  # INA, all ranks and calls together
    switch_cpu: float  # switch process CPU time / wall time over the timed calls (1.0 = one core)
    server_cpu: float  # the busiest server process's, likewise (NaN without servers)
    machine_cpu: float  # busy share of all cores over the timed calls
    max_rel_error: float
    tcp_cc: str = ""  # the ring's TCP congestion control
    model: float = math.nan  # the one model's seconds for a call (controller/model.py)
    ranks: list[dict] = field(default_factory=list, repr=False)

    @property
    def seconds(self) -> float:
        return statistics.median(self.times)

    @property
    def goodput(self) -> float:
        """Tensor bytes per second."""
        return self.size_bytes / self.seconds

    @property
    def wire_estimate(self) -> float:
        """Headers added to the application bytes: exact for INA (one datagram per packet), for the
        ring full-MSS segments only (no ACKs, no pure-ACK traffic for the data it receives)."""
        if self.method == "ina":
            return self.payload + ETH_IP_UDP * self.packets
        return self.payload + ETH_IP_TCP * math.ceil(self.payload / TCP_MSS)

    @property
    def link_utilisation(self) -> float:
        """Measured wire bytes per second over the link's rate."""
        return self.wire / self.seconds / (self.bw_mbit * 1e6 / 8)


class CpuSampler:
    """Samples some processes' (the switch's, the servers') and the machine's CPU seconds every ``period`` s in a
    thread."""

    def __init__(self, pids: list[int], period: float = 0.25) -> None:
        self.pids, self.period = pids, period
        self.samples: list[tuple[float, list[float], float]] = []  # (wall time, each pid's cpu s, machine busy s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from bench.veth_common import cpu_seconds, machine_cpu_seconds

        while not self._stop.is_set():
            try:
                self.samples.append((time.time(), [cpu_seconds(p) for p in self.pids], machine_cpu_seconds()))
            except OSError:
                return
            self._stop.wait(self.period)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def share(self, start: float, end: float) -> tuple[list[float], float]:
        """(each process's CPU share of one core, machine busy share of all cores) between two wall times."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return [math.nan] * len(self.pids), math.nan
        (t0, c0, m0), (t1, c1, m1) = inside[0], inside[-1]
        return [(b - a) / (t1 - t0) for a, b in zip(c0, c1)], (m1 - m0) / (t1 - t0) / (os.cpu_count() or 1)


def topology_with_bw(workers: int, bw: float) -> Any:
    from controller.topology import Topology, single

    spec = single(workers)
    for link in spec["links"]:
        link.append({"bw": bw})
    return Topology.from_dict(spec)


def file_topology(path: Path, bw: float | None, server_bw: float | None) -> Any:
    """A topology file, its workers' host links at ``bw`` and its servers' at ``server_bw`` where given."""
    from controller.topology import Topology, read_json

    spec = read_json(path, ValueError)
    for link in spec["links"]:
        host = spec["hosts"].get(link[0])
        rate = None if host is None else server_bw if "server" in host else bw
        if rate is not None:
            link[2:] = [{**(link[2] if len(link) > 2 else {}), "bw": rate}]
    return Topology.from_dict(spec, str(path))


def workers_of(topology: Any) -> list[str]:
    return [h for h in topology.hosts if h not in topology.servers]


def measure(method: str, net: Any, controller: Any, workers: int, size_bytes: int, bw: float,
            args: argparse.Namespace) -> Measurement:
    hosts = workers_of(net.topology)[:workers]
    ideal = 2 * size_bytes / (bw * 1e6 / 8)  # seconds per call at twice the ring's bytes
    wait = (args.runs + 1) * ideal * 3 + 120
    job = None
    if method in ("ina", "job-ring"):
        job = f"bench-{workers}-{size_bytes}-{method}"
        controller.create_job(job, hosts, pool_size=args.pool_size, mode="ring" if method == "job-ring" else "ina")
        spec, peers = controller.spec_dir / f"{job}.json", None
        model = controller.job_plan(job).choose(size_bytes).seconds
    else:
        ips = [str(net.topology.hosts[h].ip.ip) for h in hosts]
        spec, peers = None, ",".join(f"{ip}:{RING_PORT}" for ip in ips)
        model = controller.plan(hosts, mode="ring").choose(size_bytes).seconds
    try:
        with CpuSampler([net.switch("s1").process.pid, *(s.process.pid for s in net.servers)]) as cpu:
            reports = run_ranks(net, hosts, [runner_command(method, r, h, size_bytes, args, spec, peers)
                                             for r, h in enumerate(hosts)], wait)
    finally:
        if job is not None:
            controller.delete_job(job)
    calls = args.runs
    (switch_cpu, *server_cpu), machine_cpu = cpu.share(max(r["start"] for r in reports),
                                                       max(r["end"] for r in reports))

    def mean(key: str) -> float:
        return statistics.fmean(v for r in reports for v in r[key])

    return Measurement(method=method, workers=workers, size_bytes=size_bytes, bw_mbit=bw, pool_size=args.pool_size,
                       times=[max(r["times"][i] for r in reports) for i in range(calls)], wire=mean("wire"),
                       payload=mean("payload"), packets=mean("packets"),
                       retransmissions=sum(sum(r["retransmissions"]) for r in reports), switch_cpu=switch_cpu,
                       server_cpu=max(server_cpu, default=math.nan), machine_cpu=machine_cpu, model=model,
                       max_rel_error=max(r["max_rel_error"] for r in reports),
                       tcp_cc=",".join(sorted({r["tcp_cc"] for r in reports if "tcp_cc" in r})), ranks=reports)


# --- output ----------------------------------------------------------------------------------

CSV_FIELDS = ["method", "workers", "size_bytes", "bw_mbit_per_link", "pool_size", "runs", "seconds_median",
              "seconds_min", "seconds_max", "goodput_MBps", "wire_bytes_per_worker", "wire_bytes_estimate",
              "app_bytes_per_worker", "packets_per_worker", "wire_per_tensor_byte", "link_utilisation",
              "retransmissions", "switch_cpu", "server_cpu", "machine_cpu", "max_rel_error", "tcp_cc", "ring_over_ina",
              "model_seconds", "measured_over_model"]


def ratio(results: list[Measurement], m: Measurement) -> float:
    """Ring time over INA time for m's (N, size), NaN while one of them is missing."""
    pair = {r.method: r for r in results if (r.workers, r.size_bytes) == (m.workers, m.size_bytes)}
    return pair["ring"].seconds / pair["ina"].seconds if "ring" in pair and "ina" in pair else math.nan


def row(results: list[Measurement], m: Measurement) -> dict[str, Any]:
    return {"method": m.method, "workers": m.workers, "size_bytes": m.size_bytes, "bw_mbit_per_link": m.bw_mbit,
            "pool_size": m.pool_size if m.method == "ina" else "", "runs": len(m.times),
            "seconds_median": f"{m.seconds:.4f}", "seconds_min": f"{min(m.times):.4f}",
            "seconds_max": f"{max(m.times):.4f}", "goodput_MBps": f"{m.goodput / 1e6:.4f}",
            "wire_bytes_per_worker": round(m.wire), "wire_bytes_estimate": round(m.wire_estimate),
            "app_bytes_per_worker": round(m.payload), "packets_per_worker": round(m.packets),
            "wire_per_tensor_byte": f"{m.wire / m.size_bytes:.4f}", "link_utilisation": f"{m.link_utilisation:.3f}",
            "retransmissions": m.retransmissions, "switch_cpu": f"{m.switch_cpu:.3f}",
            "server_cpu": f"{m.server_cpu:.3f}", "machine_cpu": f"{m.machine_cpu:.3f}",
            "max_rel_error": f"{m.max_rel_error:.2e}", "tcp_cc": m.tcp_cc, "ring_over_ina": f"{ratio(results, m):.3f}",
            "model_seconds": f"{m.model:.4f}", "measured_over_model": f"{m.seconds / m.model:.3f}"}


def write_csv(results: list[Measurement], path: Path) -> Path:
    return write_rows(path, [row(results, m) for m in results], CSV_FIELDS, digits=None)


def plot(csv_path: Path, path: Path) -> Path:
    """Bars of time per allreduce from the CSV, INA next to ring, one group per (N, size), ring/INA above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    points = {(r["method"], int(r["workers"]), int(r["size_bytes"])): r for r in rows}
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    bw = {int(r["workers"]): float(r["bw_mbit_per_link"]) for r in rows}
    fig, axes = plt.subplots(1, len(sizes), figsize=(max(6.0, 4.5 * len(sizes)), 5.0), squeeze=False)
    colours = {"ina": "tab:blue", "ring": "tab:orange", "job-ring": "tab:green"}
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    width = 0.8 / len(methods)
    for ax, size in zip(axes[0], sizes):
        ns = sorted({int(r["workers"]) for r in rows if int(r["size_bytes"]) == size})
        top = 0.0
        for i, n in enumerate(ns):
            for j, method in enumerate(methods):
                if (r := points.get((method, n, size))) is None:
                    continue
                med, lo, hi = (float(r[k]) for k in ("seconds_median", "seconds_min", "seconds_max"))
                x = i + (j - (len(methods) - 1) / 2) * width
                ax.bar(x, med, width, color=colours[method], label=method.upper() if i == 0 else None,
                       yerr=[[med - lo], [hi - med]], capsize=3)
                ax.text(x, med / 2, f"{med:.2f} s", ha="center", va="center", fontsize=8, rotation=90, color="white")
                top = max(top, hi)
            if ("ina", n, size) in points and ("ring", n, size) in points:
                ina, ring = points["ina", n, size], points["ring", n, size]
                r = float(ring["seconds_median"]) / float(ina["seconds_median"])
                wire = float(ring["wire_bytes_per_worker"]) / float(ina["wire_bytes_per_worker"])
                ax.text(i, max(float(ina["seconds_max"]), float(ring["seconds_max"])) * 1.03,
                        f"ring/INA = {r:.2f}x\n(wire bytes {wire:.2f}x,\n2(N-1)/N = {2 * (n - 1) / n:.2f})",
                        ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(ns)))
        ax.set_xticklabels([f"N={n}\n{bw[n]:g} Mbit/s per link" for n in ns])
        ax.set_xlim(-0.7, len(ns) - 0.3)
        ax.set_ylim(0, top * 1.4 if top else 1)
        ax.set_title(f"{size / MIB:g} MiB float32")
        ax.set_ylabel("time per allreduce (s): median, min-max")
        ax.legend(loc="upper left")
    cc = ",".join(sorted({r["tcp_cc"] for r in rows if r["method"] == "ring" and r.get("tcp_cc")}))
    fig.suptitle(f"INA (switch aggregation, V=256) vs ring allreduce (TCP{' ' + cc if cc else ''})\n"
                 "through one P4 switch (built-in target), bandwidth-limited host links")
    return save_figure(fig, path)


def print_table(results: list[Measurement]) -> None:
    print(f"\n{'N':>2} {'size':>7} {'method':>8} {'Mbit/s':>6} {'time s':>8} {'min-max s':>15} {'MB/s':>6} "
          f"{'wire B/worker':>13} {'wire/K':>6} {'app B/worker':>12} {'link use':>8} {'retx':>5} {'sw CPU':>6} "
          f"{'srv CPU':>7} {'model s':>8} {'/model':>6} {'ring/INA':>8}")
    for m in results:
        r = ratio(results, m)
        print(f"{m.workers:>2} {m.size_bytes / MIB:>5g}Mi {m.method:>8} {m.bw_mbit:>6g} {m.seconds:>8.3f} "
              f"{min(m.times):>7.3f}-{max(m.times):<7.3f} {m.goodput / 1e6:>6.3f} {m.wire:>13,.0f} "
              f"{m.wire / m.size_bytes:>6.3f} {m.payload:>12,.0f} {m.link_utilisation:>8.2f} {m.retransmissions:>5} "
              f"{m.switch_cpu:>6.2f} {m.server_cpu:>7.2f} {m.model:>8.3f} {m.seconds / m.model:>6.3f} "
              f"{'' if math.isnan(r) or m.method != 'ring' else f'{r:.2f}x':>8}")


def networks(args: argparse.Namespace) -> Iterator[tuple[int, float, Any]]:
    """(workers, their links' Mbit/s, topology) of each network to start: single(N) for each of ``--workers``,
    or the ``--topology`` file."""
    if args.topology is not None:
        topology = file_topology(args.topology, args.bw[0] if args.bw else None,
                                 args.server_bw or (2 * args.bw[0] if args.bw else None))
        workers = workers_of(topology)
        yield len(workers), topology.slowest_link_mbps(workers), topology
        return
    for n in args.workers:
        bw = args.bw[0] if args.bw and len(args.bw) == 1 else \
            args.bw[args.workers.index(n)] if args.bw else default_bw(n)
        yield n, bw, topology_with_bw(n, bw)


def default_bw(workers: int) -> float:
    """Mbit/s per host link, each way: 200/N keeps the load the N workers put on two cores at ~25 MB/s."""
    return 200.0 / workers


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def bench(args: argparse.Namespace) -> int:
    from controller.controller import Controller
    from controller.pipeline import PipelineOptions

    if os.geteuid() != 0:
        print("Mininet needs root", file=sys.stderr)
        return 2
    sigterm_as_interrupt()
    results: list[Measurement] = []
    complete = False
    name = "allreduce" if args.topology is None else f"allreduce-{args.topology.stem}"
    csv_path, png_path = args.out_dir / f"{name}.csv", args.out_dir / f"{name}.png"
    run_root = Path(tempfile.mkdtemp(prefix="bench-allreduce-"))
    print(f"run directory {run_root} (switch logs; removed after a complete run); {args.runs} timed call(s) "
          f"per point, pool/window {args.pool_size}, V={VALUES}", flush=True)
    try:
        for n, bw, topology in networks(args):
            print(f"\nN={n}: starting {args.topology or f'single({n})'} with {bw:g} Mbit/s worker links ...",
                  flush=True)
            with ExitStack() as stack:
                net = stack.enter_context(network(topology, run_root / f"n{n}", args.busy_wait))
                controller = stack.enter_context(Controller(net.network, run_root / f"n{n}" / "controller-state.json",
                                                            PipelineOptions()))  # the defaults: V = 256
                controller.setup()
                if failed := net.ping_all():
                    raise RuntimeError(f"hosts cannot reach each other after setup: {failed}")
                for size in args.sizes:
                    for method in args.methods:
                        t0 = time.monotonic()
                        print(f"  N={n} {size / MIB:g} MiB {method}: {args.runs + 1} calls ...", end=" ", flush=True)
                        m = measure(method, net, controller, n, size, bw, args)
                        results.append(m)
                        print(f"median {m.seconds:.3f} s ({', '.join(f'{t:.2f}' for t in m.times)}), "
                              f"{m.goodput / 1e6:.3f} MB/s, {m.wire / m.size_bytes:.3f} wire bytes per tensor byte, "
                              f"links {m.link_utilisation:.0%} busy, switch CPU {m.switch_cpu:.0%}, "
                              f"{'' if math.isnan(m.server_cpu) else f'server CPU {m.server_cpu:.0%}, '}"
                              f"model {m.model:.3f} s (x{m.seconds / m.model:.3f}), "
                              f"{m.retransmissions} retransmissions, rel. error {m.max_rel_error:.1e} "
                              f"[{time.monotonic() - t0:.0f} s]", flush=True)
                        write_csv(results, csv_path)
        shutil.rmtree(run_root, ignore_errors=True)  # switch logs are kept only when something failed
        complete = not args.quick
    except KeyboardInterrupt:
        print("\ninterrupted; network stopped", file=sys.stderr)
        return 130
    finally:
        if results:
            print_table(results)
            write_csv(results, csv_path)
            print(f"\nwrote {csv_path} and {plot(csv_path, png_path)}")
    if complete:
        publish(png_path, args.publish, csv_path)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="timed allreduce calls per point (after one warm-up)")
    ap.add_argument("--sizes", type=_floats, default=[1.0, 8.0], help="tensor sizes in MiB of float32")
    ap.add_argument("--workers", type=_ints, default=[4, 8], help="worker counts N (one network each)")
    ap.add_argument("--bw", type=_floats, default=None,
                    help="Mbit/s per host link: one value for every N, or one per --workers entry "
                         "(default 200/N: 50 at N=4, 25 at N=8)")
    ap.add_argument("--topology", type=Path, default=None,
                    help="a topology file to run on instead of single(N) (its non-server hosts are the workers)")
    ap.add_argument("--server-bw", type=float, default=None,
                    help="with --topology and --bw: Mbit/s of the server hosts' links (default twice --bw)")
    ap.add_argument("--pool-size", type=int, default=DEFAULT_POOL, help="slots of each INA job = worker window")
    ap.add_argument("--methods", type=lambda text: [m for m in text.split(",") if m], default=list(METHODS),
                    help=f"comma-separated, of {', '.join(METHODS)} (default: all, in that order)")
    ap.add_argument("--timeout", type=float, default=60.0, help="runner timeout: INA without progress, ring per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ring-cc", default=RING_CC,
                    help="TCP congestion control of the ring's connections: a name from /proc/sys/net/ipv4/"
                         "tcp_available_congestion_control, or system (the machine's default; see the docstring)")
    ap.add_argument("--busy-wait", type=float, default=1800.0, help="seconds to wait for a busy network")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    add_publish_argument(ap)
    ap.add_argument("--quick", action="store_true", help="smoke run: N=4, 1 MiB")
    ap.add_argument("--plot-only", action="store_true", help="redraw the plot from the CSV in --out-dir, no network")
    ap.add_argument("--against", metavar="REV", help="also run this commit's bench_allreduce, round by round in "
                                                     "alternation with this tree's (--rounds), and set the medians "
                                                     "side by side")
    ap.add_argument("--rounds", type=int, default=3, help="with --against: runs of each side")
    args = ap.parse_args(argv)
    if args.against:
        return compare.against(args.against, args.rounds, list(argv if argv is not None else sys.argv[1:]),
                               "bench.bench_allreduce", "allreduce.csv",
                               lambda r: f"{r['method']:>8} N={r['workers']} {int(r['size_bytes']) / MIB:g} MiB")
    if args.plot_only:
        publish(plot(args.out_dir / "allreduce.csv", args.out_dir / "allreduce.png"), args.publish)
        return 0
    if args.quick:
        args.workers, args.sizes = [4], [1.0]
    if unknown := set(args.methods) - set(METHODS):
        ap.error(f"unknown method(s) {', '.join(sorted(unknown))}")
    if args.bw and len(args.bw) not in (1, len(args.workers)):
        ap.error("--bw takes one value or one per --workers entry")
    args.sizes = [int(s * MIB) // 4 * 4 for s in args.sizes]
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
