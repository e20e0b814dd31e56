"""`make demo`: the whole system once, on a Mininet network of P4 switches (root).

Starts bmv2-env/topologies/single-4.json (the built-in target, or simple_switch_grpc when it
is installed), lets the controller push ina.p4 and create a job for h1..h4, runs an
allreduce of random float32 gradients on all four workers (each in its own host), checks
every result against numpy's float64 sum within the bound of worker/quantize.py, prints
time, goodput and max error, and shuts everything down.

    python -m bmv2env.demo [--values 1000000] [--repeat 3] [--target auto|builtin|bmv2] [--program v1model|tna]

``--program tna`` (``make demo PROGRAM=tna``) runs the Tofino program p4src/tofino/ina_tna.p4
instead: the switch is the built-in target running TNA (it recirculates on port 68 inside
the switch), the controller provisions the TNA program's tables, and V is 64 (its only size).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from controller.controller import Controller
from controller.programs import P4SRC, V1MODEL, by_arch

from .network import InaNetwork

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "single-4.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=1_000_000, help="float32 values per allreduce (default 4 MB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target", default="auto", choices=["auto", "builtin", "bmv2"])
    ap.add_argument("--program", default="v1model", choices=["v1model", "tna"],
                    help="v1model: p4src/ina.p4 (V=256); tna: p4src/tofino/ina_tna.p4 (V=64) on the built-in target")
    args = ap.parse_args(argv)
    program = by_arch(args.program)
    if program is not V1MODEL and args.target == "bmv2":
        ap.error(f"BMv2 cannot run the {program.arch} program: use --target builtin (or auto)")
    if os.geteuid() != 0:
        print("make demo starts a Mininet network: run it as root", file=sys.stderr)
        return 1
    run = Path(tempfile.mkdtemp(prefix="ina-demo-"))
    print(f"[1/4] starting {TOPOLOGY.name}: 4 hosts on one P4 switch (run dir {run})", flush=True)
    with InaNetwork(TOPOLOGY, run / "net", target=args.target, arch=program.arch) as net:
        target = net.network.access["s1"].target
        print(f"      switch s1: {target}, P4Runtime at {net.network.access['s1'].grpc_address}", flush=True)
        with Controller(net.network, run / "controller-state.json") as controller:  # the defaults: the fast path
            source = program.source.relative_to(P4SRC.parent)
            print(f"[2/4] controller: pipeline {source} ({program.arch}, V={controller.state.options.values}), "
                  f"IPv4 routes", flush=True)
            controller.setup()
            hosts = ["h1", "h2", "h3", "h4"]
            spec = controller.create_job("demo", hosts, mode="ina")  # the demo is the switch summing
            print(f"[3/4] job {spec.name} ({len(spec.trees)} tree(s)): {len(hosts)} workers, {spec.pool_size} "
                  f"slots, spec "
                  f"{controller.spec_dir / 'demo.json'}", flush=True)
            print(f"[4/4] allreduce of {args.values:,} float32 values ({args.values * 4 / 1e6:.1f} MB) per worker, "
                  f"{args.repeat} times", flush=True)
            reports, failed, wall = _run_workers(net, hosts, controller.spec_dir / "demo.json", args)
            counters = controller.status()["jobs"]["demo"]["s1"]
    if failed:
        return 1
    _print_summary(reports, len(hosts), counters, args)
    print(f"  wall time {wall:.1f} s; network stopped, {run} kept for its logs")
    return 0 if all(r["within_bound"] for r in reports) else 1


def _run_workers(net: InaNetwork, hosts: list[str], spec: Path,
                 args: argparse.Namespace) -> tuple[list[dict], bool, float]:
    """``ina-allreduce --check`` on every host at once; their JSON lines, whether any rank failed, and the wall
    time from all started to all done."""
    procs = [net.host(h).popen([sys.executable, "-m", "worker.cli", "--spec",
                                str(spec), "--rank", str(rank), "--size",
                                str(args.values), "--repeat", str(args.repeat), "--check"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank, h in enumerate(hosts)]
    start = time.monotonic()
    reports, failed = [], False
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=600)
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines or any("error" in x for x in lines):
            print(f"      rank {rank} failed: {lines or err.strip()[-1000:]}", file=sys.stderr)
            failed = True
        reports += lines
    return reports, failed, time.monotonic() - start


def _print_summary(reports: list[dict], workers: int, counters: dict, args: argparse.Namespace) -> None:
    """Time (the slowest worker's, median of the runs), goodput, error and the switch's counters."""
    per_run = [max(r["seconds"] for r in reports if r["run"] == k) for k in range(args.repeat)]
    median = statistics.median(per_run)
    print()
    print(f"  time per allreduce (slowest worker, median of {args.repeat}): {median * 1e3:.0f} ms "
          f"(runs: {', '.join(f'{t * 1e3:.0f}' for t in per_run)} ms)")
    print(f"  goodput per worker: {args.values * 4 / median / 1e6:.2f} MB/s of float32 gradient")
    print(f"  max |error| vs float64 sum: {max(r['max_error'] for r in reports):.3g} "
          f"(every element within the stated bound: {all(r['within_bound'] for r in reports)})")
    print(f"  retransmissions: {sum(r['retransmissions'] for r in reports[-workers:])}; switch counters: "
          f"{counters['aggregated']:,} contributions summed, {counters['results']:,} results multicast")


if __name__ == "__main__":
    sys.exit(main())
