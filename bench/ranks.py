"""The Mininet benchmarks' rank runners: one process per host, started in its namespace, timing allreduce calls.

A bench (bench_allreduce, bench_trees, bench_hybrid, bench_loss, bench_fabric, bench_server) starts a network
(``network``), builds each host's command (``runner_command``: ``python -m bench.ranks ...``) and collects
their reports (``run_ranks``).  A runner makes one untimed allreduce (warm-up and barrier; its result is
checked against the exact float64 sum of every rank's array, drawn from the seeds), then ``--runs`` timed
calls, and prints one JSON line: per call its time, the interface's tx bytes (``tx_bytes``), the
application bytes, packets and retransmissions.  Methods: ``ina`` and ``job-ring`` (a job's spec, run by
``worker.Worker``), ``ring`` (``worker.ring.RingWorker`` over TCP between the hosts' ``--peers``).

The settings the figures are for live here too (tests/test_defaults.py keeps the defaults equal to them):
``VALUES`` (INA_VALUES of ina.p4), ``DEFAULT_POOL`` (the window; bench_allreduce's docstring says why 64)
and ``RING_CC`` (the ring's TCP congestion control: why CUBIC, ditto).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT

VALUES = 256  # INA_VALUES the defaults give ina.p4 (tests/test_defaults.py): the V these figures are for
DEFAULT_POOL = 64  # window: see bench_allreduce's docstring
RING_CC = "cubic"  # the ring's TCP congestion control: see bench_allreduce's docstring
# ina: a job through the switch; ring: a float32 TCP ring (RingWorker, as gloo's); job-ring: a job created
# with --mode ring, run by the worker (it should match "ring": the same bytes, 2(N-1)/N)
METHODS = ("ina", "ring", "job-ring")


def tx_bytes(iface: str) -> int:
    """Bytes this namespace's ``iface`` has sent: /proc/self/net/dev follows the network namespace
    (unlike /sys/class/net, which shows the namespace that mounted sysfs)."""
    for line in Path("/proc/self/net/dev").read_text().splitlines()[2:]:
        name, _, counters = line.partition(":")
        if name.strip() == iface:
            return int(counters.split()[8])
    raise RuntimeError(f"no interface {iface} in this network namespace")


def tensor(seed: int, rank: int, values: int) -> np.ndarray:
    return np.random.default_rng(seed + rank).standard_normal(values).astype(np.float32)


def relative_error(result: np.ndarray, seed: int, workers: int) -> float:
    """max |result - exact| / max |exact|, the exact float64 sum drawn from every rank's seed."""
    exact = np.zeros(len(result), np.float64)
    for r in range(workers):
        exact += tensor(seed, r, len(result))
    return float(np.abs(result.astype(np.float64) - exact).max() / np.abs(exact).max())


def rank_runner(args: argparse.Namespace) -> int:
    """One rank: warm-up call (checked), then ``args.runs`` timed calls; one JSON line on stdout."""
    values = args.size_bytes // 4
    mine = tensor(args.seed, args.rank, values)
    report: dict[str, Any] = {"rank": args.rank, "method": args.method}
    try:
        if args.method in ("ina", "job-ring"):
            from worker import Worker
            from worker.jobspec import JobSpec

            spec = JobSpec.load(args.spec)
            member = Worker(spec, args.rank, timeout=args.timeout)
            workers = len(spec.members)

            def counters() -> tuple[int, int, int]:
                s = member.stats
                return s.bytes_sent + member.ring_bytes_sent, s.packets_sent, s.retransmissions
        else:
            from worker.ring import RingWorker

            peers = args.peers.split(",")
            member = RingWorker(args.rank, peers, timeout=args.timeout,
                                tcp_congestion=None if args.ring_cc == "system" else args.ring_cc)
            workers = len(peers)
            report["tcp_cc"] = member.congestion_control

            def counters() -> tuple[int, int, int]:
                return member.bytes_sent, 0, 0
        with member:
            report["max_rel_error"] = relative_error(member.allreduce(mine), args.seed, workers)
            report["start"] = time.time()
            times, wire, payload, packets, retrans, parts = [], [], [], [], [], []
            for _ in range(args.runs):
                c0, w0 = counters(), tx_bytes(args.iface)
                t0 = time.perf_counter()
                member.allreduce(mine)
                times.append(time.perf_counter() - t0)
                c1, w1 = counters(), tx_bytes(args.iface)
                wire.append(w1 - w0)
                payload.append(c1[0] - c0[0])
                packets.append(c1[1] - c0[1])
                retrans.append(c1[2] - c0[2])
                parts.append(getattr(member, "last_parts", {}))
            report.update(end=time.time(), times=times, wire=wire, payload=payload, packets=packets,
                          retransmissions=retrans, parts=parts)
            if args.method == "ina":  # over the worker's life, warm-up included
                report.update(early_retransmissions=member.stats.early_retransmissions,
                              window_cuts=member.stats.window_cuts)
    except Exception as e:  # reported to the parent, which names the rank
        report["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(report), flush=True)
        return 1
    print(json.dumps(report), flush=True)
    return 0


@contextmanager
def network(topology: Any, run_dir: Path, busy_wait: float) -> Iterator[Any]:
    """The started InaNetwork; waits while another network holds the interfaces (NetworkBusy)."""
    from bmv2env.network import InaNetwork
    from bmv2env.runstate import NetworkBusy

    deadline = time.monotonic() + busy_wait
    while True:
        net = InaNetwork(topology, run_dir, target="builtin")
        try:
            net.start()
            break
        except NetworkBusy as e:
            if time.monotonic() >= deadline:
                raise
            print(f"  network busy ({str(e)[:100]}...); retrying in 20 s", flush=True)
            time.sleep(20)
    try:
        yield net
    finally:
        net.stop()


def runner_command(method: str, rank: int, host: str, size_bytes: int, args: argparse.Namespace,
                   spec: Path | None, peers: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "bench.ranks", "--method", method, "--rank", str(rank),
           "--size-bytes", str(size_bytes), "--runs", str(args.runs), "--iface", f"{host}-eth0",
           "--timeout", str(args.timeout), "--seed", str(args.seed), "--ring-cc", args.ring_cc]
    if spec is not None:
        cmd += ["--spec", str(spec)]
    if peers is not None:
        cmd += ["--peers", peers]
    return cmd


def run_ranks(net: Any, hosts: list[str], commands: list[list[str]], wait: float) -> list[dict]:
    """Start one runner per host, collect their JSON reports; every runner is gone on return."""
    procs: list[subprocess.Popen] = []
    try:
        for host, cmd in zip(hosts, commands):
            procs.append(net.host(host).popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True))
        deadline = time.monotonic() + wait
        reports, errors = [], []  # every rank's error: the first to fail is often not the first host
        for host, p in zip(hosts, procs):
            try:
                stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                errors.append(f"{host}: no report within {wait:.0f} s")
                continue
            lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
            if not lines:
                errors.append(f"{host}: runner printed nothing (exit {p.returncode}); stderr: {stderr[-1500:]}")
            elif "error" in lines[-1]:
                errors.append(f"{host} (rank {lines[-1]['rank']}): {lines[-1]['error']}")
            else:
                reports.append(lines[-1])
        if errors:
            raise RuntimeError("; ".join(errors))
        return reports
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="one rank (internal: one per host, started by a benchmark)")
    ap.add_argument("--method", choices=METHODS, required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--size-bytes", type=int, required=True)
    ap.add_argument("--runs", type=int, default=3, help="timed allreduce calls (after one warm-up)")
    ap.add_argument("--iface", required=True, help="the host's interface, whose tx bytes are counted")
    ap.add_argument("--timeout", type=float, default=60.0, help="INA without progress, ring per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ring-cc", default=RING_CC, help="the ring's TCP congestion control, or system")
    ap.add_argument("--spec", type=Path, help="ina, job-ring: the job's spec file")
    ap.add_argument("--peers", help="ring: every rank's ip:port, comma-separated")
    return rank_runner(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
