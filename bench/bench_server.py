"""An aggregation server's rate per CPU-second against a worker's (issue 62): does one server core keep up
with one worker core?

How: the real ``p4target-switch-grpc --udp`` process runs ina.p4 (V = 256) on a loopback address
(``server_network``), set up by the project's controller over P4Runtime as a topology's server host
(``srv1``, members on its port 1; the plain switch of the topology is an in-process P4Runtime target
whose data path is loopback's routing).  Four rank runners (``python -m bench.ranks``, on
127.62.1.1-4) make timed allreduce calls through it.  Once the calls run, a window of ``--duration`` s
is measured: the server's job counters (contributions aggregated), the CPU time of the server process,
of each worker and of the machine (veth_common.cpu_during).  Then

- server MB/s per CPU-second = aggregated contributions x V x 4 bytes / the server's CPU seconds;
- a worker's per-core send rate = its contributions (aggregated / workers) x V x 4 / its CPU seconds,

both from the same window.  Acceptance: the first at least the second.  ``--threads N`` serves the
address on N threads (one socket each, steered by ina_t.job_id) and gives the job N lanes, one per
thread.  ``--veth`` measures HEAD's path in the same run, run by run in alternation: the same
command on raw veth ports (bench_veth_ina's library, root only), its saturation step's MB/s per
switch CPU-second.

    python -m bench.bench_server [--runs 3] [--threads 1] [--duration 3] [--veth]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import p4src
from controller.controller import Controller
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineOptions
from controller.topology import SERVER_AGG_PPS_PER_CORE, Topology
from p4target.dataplane import Dataplane
from p4target.runtime.service import P4RuntimeServer, serve
from worker import protocol
from worker.jobspec import JobSpec

from .ranks import run_ranks, runner_command
from .veth_common import cpu_during, switch_process

SERVER_IP = "127.62.0.77"  # loopback addresses no other test uses (tests/loopback_net.py: 127.0.1.x)
SERVER_DEVICE, PLAIN_DEVICE = 2, 1
UNPACED_PPS, UNPACED_MBPS = 1e8, 1e6  # a server core's contributions/s and a link's Mb/s, for the plan alone
JOB = "bench"


def worker_ip(rank: int) -> str:
    return f"127.62.1.{rank + 1}"


def topology(workers: int, cores: int, server_ip: str = SERVER_IP) -> Topology:
    """h1..hW on 127.62.1.x and the server srv1 (``cores`` cores) on one plain switch, all on loopback.  Links
    and the server's per-core rate are far above what this machine does, so the workers' pacers (at the plan's
    rate) never hold them back: the server's own speed is what is measured."""
    hosts: dict[str, dict[str, Any]] = {f"h{r + 1}": {"ip": f"{worker_ip(r)}/8", "mac": f"02:00:00:00:01:{r + 1:02x}"}
                                        for r in range(workers)}
    hosts["srv1"] = {"ip": f"{server_ip}/8", "mac": "02:00:00:00:00:fe",
                     "server": {"cores": cores, "agg_pps_per_core": UNPACED_PPS}}
    links = [[f"h{r + 1}", f"s1-p{r + 1}", {"bw": UNPACED_MBPS}] for r in range(workers)] + \
        [["srv1", f"s1-p{workers + 1}", {"bw": UNPACED_MBPS}]]
    return Topology.from_dict({"hosts": hosts, "switches": {"s1": {"ip": "127.62.0.253", "plain": True}},
                               "links": links})


@dataclass
class ServerNet:
    """A job of every worker through one server process, set up by the controller."""

    process: subprocess.Popen
    controller: Controller
    spec: JobSpec
    spec_file: Path
    values: int
    udp: dict[str, int] = field(default_factory=dict)  # the server's sockets' counters, once it has stopped

    def counters(self, job: str = JOB) -> dict[str, int]:
        """The server's counters for a job (aggregated, results, ...) and its drops (truncated, ...)."""
        status = self.controller.status()
        return {**status["jobs"][job]["srv1"], **status["drops"]["srv1"]}


@contextmanager
def _plain_switch() -> Iterator[str]:
    """The topology's plain switch: a built-in-target P4Runtime server the controller provisions; its data
    path is loopback's own routing (hosts reach the server directly)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    server = serve(P4RuntimeServer(Dataplane([]), device_id=PLAIN_DEVICE), address)
    try:
        yield address
    finally:
        server.stop(None)


@contextmanager
def server_network(workers: int, values: int, threads: int = 1, pool_size: int = 64,
                   state_dir: Path | None = None, server_ip: str = SERVER_IP) -> Iterator[ServerNet]:
    """``p4target-switch-grpc --udp SERVER_IP:port --threads N`` and a job of ``workers`` members with a lane
    per thread through it, created by the controller; everything is stopped on exit."""
    P = protocol.load(values)
    config = ["--device-id", str(SERVER_DEVICE), "--udp", f"{server_ip}:{P.INA_UDP_PORT}",
              "--threads", str(threads), *(["--steer", "ina_t.job_id"] if threads > 1 else []),
              f"-DINA_VALUES={values}", str(p4src.path("ina.p4"))]
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp, _plain_switch() as plain, \
            tempfile.TemporaryFile("w+") as log:
        net = None
        try:
            with switch_process(config, {}, log=log) as (proc, address):
                where = Path(state_dir or tmp)
                network = Network(topology(workers, threads, server_ip), {
                    "s1": SwitchAccess(plain, PLAIN_DEVICE, "builtin"),
                    "srv1": SwitchAccess(address, SERVER_DEVICE, "builtin")})
                with Controller(network, where / "state.json", PipelineOptions(values=values), spec_dir=where) as ctl:
                    ctl.setup()
                    members = [f"h{r + 1}" for r in range(workers)]
                    spec = ctl.create_job(JOB, members, pool_size, mode="ina", lanes=threads)
                    if {t.to_ip for t in spec.trees} != {server_ip}:
                        raise RuntimeError(f"the job's trees do not go through the server: {spec.trees}")
                    net = ServerNet(proc, ctl, spec, where / f"{JOB}.json", values)
                    yield net
        finally:
            if net is not None:  # the server has stopped: its last words are its sockets' counters
                log.seek(0)
                net.udp = {k: int(v) for line in log.read().splitlines() if ": udp " in line
                           for k, v in (kv.split("=") for kv in line.split(": udp ", 1)[1].split())}


# --- measuring -------------------------------------------------------------------------------------------


@dataclass
class Window:
    """One measured window of a server run."""

    threads: int
    values: int
    workers: int
    duration: float
    aggregated: int  # contributions summed by the server in the window
    cpu: dict[str, float]  # share of one core: "server", "w0".., "all" (the machine, of os.cpu_count())
    call_time: float  # median over the timed calls of the slowest rank's time (s)
    retransmissions: int  # the workers' over the timed calls

    @property
    def contribution_bytes(self) -> int:
        return self.values * 4

    @property
    def server_mbps(self) -> float:
        """MB/s of gradient the server aggregated."""
        return self.aggregated * self.contribution_bytes / self.duration / 1e6

    @property
    def server_per_cpu(self) -> float:
        """The server's MB/s per CPU-second of its process."""
        return self.server_mbps / self.cpu["server"]

    @property
    def worker_per_cpu(self) -> float:
        """A worker's MB/s of gradient sent per CPU-second (its contributions over its CPU, mean of the workers)."""
        each = self.server_mbps / self.workers
        return statistics.mean(each / self.cpu[f"w{r}"] for r in range(self.workers))


class _Loopback:
    """run_ranks's network for ranks on loopback: every host is this machine; keeps the processes' ids."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def host(self, _name: str) -> _Loopback:
        return self

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, **kwargs)
        self.procs.append(proc)
        return proc


def measure(net: ServerNet, threads: int, size_mb: float, calls: int, warm: float, duration: float) -> Window:
    """Rank runners make ``calls`` allreduce calls of ``size_mb`` MiB; a window of ``duration`` s, ``warm`` s after
    the server's first aggregation, is measured."""
    workers = len(net.spec.members)
    args = SimpleNamespace(runs=calls, timeout=10.0, seed=1, ring_cc="system")
    commands = [runner_command("ina", r, "h", int(size_mb * (1 << 20)), args, net.spec_file, None)
                for r in range(workers)]
    for cmd in commands:
        cmd[cmd.index("--iface") + 1] = "lo"
    hosts, ranks = [f"h{r + 1}" for r in range(workers)], _Loopback()
    reports: list[dict] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            reports.extend(run_ranks(ranks, hosts, commands, wait=600))
        except BaseException as e:  # noqa: BLE001 - handed to the measuring thread
            failed.append(e)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    first = net.counters()["aggregated"]
    deadline = time.monotonic() + 120
    while net.counters()["aggregated"] == first:
        if not runner.is_alive() or time.monotonic() > deadline:
            runner.join()
            raise RuntimeError(f"the workers never reached the server: {failed or reports}")
        time.sleep(0.1)
    start = time.time() + warm
    pids = {"server": net.process.pid} | {f"w{r}": p.pid for r, p in enumerate(ranks.procs)}
    time.sleep(max(0.0, start - time.time() - 0.05))
    before = net.counters()["aggregated"]
    try:
        cpu = cpu_during(pids, start, duration)
    except FileNotFoundError:  # a process has exited
        cpu = {}
    after = net.counters()["aggregated"]
    runner.join()
    if failed:
        raise failed[0]
    if not cpu or min(r["end"] for r in reports) < start + duration:
        raise RuntimeError("the calls ended inside the measured window: give more --calls")
    worst = max(r["max_rel_error"] for r in reports)
    if worst > 1e-2:
        raise RuntimeError(f"a worker's sum is off by {worst:.2g} (relative)")
    times = [max(r["times"][i] for r in reports) for i in range(calls)]
    return Window(threads, net.values, workers, duration, after - before, cpu, statistics.median(times),
                  sum(sum(r["retransmissions"]) for r in reports))


def veth_head(values: int, duration: float) -> tuple[float, float]:
    """HEAD's path, the same command on raw veth ports (bench_veth_ina): (MB/s, MB/s per switch CPU-second) of
    its saturating step."""
    from . import bench_veth_ina

    runs = bench_veth_ina.run(values, [20_000, 40_000, 60_000], 1, duration, bench_veth_ina.WINDOW)
    peak = max(runs[0], key=lambda s: s.mbytes_per_s)
    return peak.mbytes_per_s, peak.mbytes_per_s / peak.cpu["switch"]


def report(w: Window) -> str:
    cpu = " ".join(f"{k} {v:.0%}" for k, v in w.cpu.items())
    return (f"server {w.server_mbps:7.1f} MB/s = {w.server_per_cpu:7.1f} MB/s per CPU-s;"
            f" a worker {w.worker_per_cpu:7.1f} MB/s per CPU-s; cpu {cpu} (machine: {os.cpu_count()} cores);"
            f" a call {w.call_time * 1e3:.0f} ms, {w.retransmissions} retransmissions")


def summary(windows: list[Window], model: float) -> dict[str, Any]:
    """Medians over one thread count's runs, and the acceptance: the server's MB/s per CPU-s against a worker's."""
    server = statistics.median(w.server_per_cpu for w in windows)
    worker = statistics.median(w.worker_per_cpu for w in windows)
    out = {"threads": windows[0].threads, "values": windows[0].values, "runs": len(windows),
           "server_mbps": statistics.median(w.server_mbps for w in windows), "server_mbps_per_cpu_s": server,
           "worker_mbps_per_cpu_s": worker, "server_cpu": statistics.median(w.cpu["server"] for w in windows),
           "machine_cpu": statistics.median(w.cpu["all"] for w in windows), "model_mbps_per_core": model}
    print(f"{out['threads']} thread(s), median of {len(windows)}: server {out['server_mbps']:.1f} MB/s at "
          f"{out['server_cpu']:.0%} of a core = {server:.1f} MB/s per CPU-s against a worker's {worker:.1f} "
          f"({'MET' if server >= worker else 'NOT MET'}); machine {out['machine_cpu']:.0%} of {os.cpu_count()} "
          f"cores; the model's per-core default (SERVER_AGG_PPS_PER_CORE) is {model:.1f} MB/s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="measured windows (the sides alternate run by run)")
    ap.add_argument("--threads", type=lambda t: [int(v) for v in t.split(",")], default=[1],
                    help="server threads (and the job's lanes), comma-separated: each in turn, run by run")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--values", type=int, default=256)
    ap.add_argument("--pool-size", type=int, default=512, help="slots per lane (each worker's window)")
    ap.add_argument("--size-mb", type=float, default=8.0, help="MiB of float32 per call")
    ap.add_argument("--calls", type=int, default=80, help="calls per run (enough to outlast the window)")
    ap.add_argument("--warm", type=float, default=1.5, help="seconds from the first aggregation to the window")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds of the measured window")
    ap.add_argument("--veth", action="store_true", help="HEAD's path on veth ports too, in alternation (root)")
    args = ap.parse_args(argv)
    windows: dict[int, list[Window]] = {t: [] for t in args.threads}
    veth: list[tuple[float, float]] = []
    for run in range(args.runs):
        for threads in args.threads:
            with server_network(args.workers, args.values, threads, args.pool_size) as net:
                w = measure(net, threads, args.size_mb, args.calls, args.warm, args.duration)
            windows[threads].append(w)
            print(f"run {run + 1}/{args.runs} udp, {threads} thread(s): {report(w)}\n  server's sockets: "
                  + " ".join(f"{k}={v:,}" for k, v in net.udp.items()), flush=True)
        if args.veth:
            veth.append(veth_head(args.values, 2.0))
            print(f"run {run + 1}/{args.runs} veth (HEAD's raw ports): {veth[-1][0]:.1f} MB/s = "
                  f"{veth[-1][1]:.1f} MB/s per switch CPU-s", flush=True)
    model = SERVER_AGG_PPS_PER_CORE * args.values * 4 / 1e6
    results = [summary(ws, model) for ws in windows.values()]
    if veth:
        results.append({"veth_mbps": statistics.median(v[0] for v in veth),
                        "veth_mbps_per_cpu_s": statistics.median(v[1] for v in veth)})
        print(f"HEAD's raw ports (veth), median of {len(veth)}: {results[-1]['veth_mbps']:.1f} MB/s = "
              f"{results[-1]['veth_mbps_per_cpu_s']:.1f} MB/s per switch CPU-s")
    if len(args.threads) > 1:
        one, most = results[0], results[len(args.threads) - 1]
        print(f"{most['threads']} threads against {one['threads']}: {most['server_mbps'] / one['server_mbps']:.2f}x "
              f"the MB/s, the machine {most['machine_cpu']:.0%} busy of {os.cpu_count()} cores")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
