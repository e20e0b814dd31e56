"""Spare servers as aggregation devices (issue 62, acceptance 2): workers at 100 Gbit/s on a plain switch, the
call split over 1, 2, 4 and 8 servers of 16 cores each, in the virtual fabric, with the model's prediction
beside each measurement and the speed-up over one server.

    python -m bench.bench_servers [--workers 32] [--servers 1,2,4,8] [--size 1048576] [--calls 2]

A server core sums ``topology.SERVER_AGG_PPS_PER_CORE`` contributions a second unless ``--per-core-pps`` says
otherwise (the built-in target's native C loop: 3.3 us per V = 256 packet on this machine, so 300,000), and a
tree's lane sits on one core, so a job takes a lane per core (``--lanes``, default 16).  The servers' links are
the workers' rate, so the servers' CPUs, not their links, set the rate: each server adds its cores' worth.
A server's tree has the members as its children, so at most 32 of them (ina.p4's slot bitmap), which caps
``--workers``.  Each point is one run in this process; figures are virtual time (the last call's, its window
open), a function of the config and the commit.
"""

from __future__ import annotations

import argparse
import json
import time

from controller import topology
from virtual_fabric.runs import RunConfig, run


def measure(workers: int, servers: int, args: argparse.Namespace) -> dict:
    """One run: the last call's seconds, the model's and the plan's rate."""
    spec = topology.servers(workers, servers, args.cores, 1, args.gbps * 1e3, args.gbps * 1e3, args.per_core_pps)
    path = f"{args.scratch}/servers_{workers}_{servers}.json"
    topology.Topology.from_dict(spec)  # bad figures fail here, by field
    with open(path, "w") as f:
        json.dump(spec, f)
    started = time.perf_counter()
    result = run(RunConfig(topology=path, bw=args.gbps * 1e3, size=args.size, calls=args.calls, mode="ina",
                           lanes=args.lanes, pool_size=args.pool_size, delay=args.delay))
    last = result["calls"][-1]
    return {"servers": servers, "seconds": last["seconds"], "model": last["model"], "ratio": last["ratio"],
            "rate_mbps": result["job"]["plan_rate_mbps"], "exact": result["check"]["within_bound"]
            and result["check"]["identical"], "wall": time.perf_counter() - started}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--servers", default="1,2,4,8")
    p.add_argument("--cores", type=int, default=16)
    p.add_argument("--per-core-pps", type=float, default=topology.SERVER_AGG_PPS_PER_CORE)
    p.add_argument("--lanes", type=int, default=16)
    p.add_argument("--pool-size", type=int, default=256, help="slots per server tree, shared by its lanes")
    p.add_argument("--gbps", type=float, default=100.0)
    p.add_argument("--delay", default="1us")
    p.add_argument("--size", type=int, default=1 << 20, help="float32 values per call")
    p.add_argument("--calls", type=int, default=2)
    p.add_argument("--scratch", default="/tmp")
    args = p.parse_args(argv)
    rows = []
    print(f"{args.workers} workers at {args.gbps:g} Gbit/s, servers of {args.cores} cores at "
          f"{args.per_core_pps:,.0f} contributions/s each, {args.size * 4 / 2**20:g} MB per call")
    print(f"{'servers':>7} {'measured us':>12} {'model us':>12} {'ratio':>6} {'x one':>6} {'plan Mb/s':>10} "
          f"exact  wall s")
    for count in (int(s) for s in args.servers.split(",")):
        row = measure(args.workers, count, args)
        rows.append(row)
        one = next((r for r in rows if r["servers"] == 1), None)
        speedup = f"{one['seconds'] / row['seconds']:6.2f}" if one else f"{'-':>6}"
        print(f"{count:>7} {row['seconds'] * 1e6:>12,.1f} {row['model'] * 1e6:>12,.1f} {row['ratio']:>6.3f} "
              f"{speedup} {row['rate_mbps']:>10,.0f} {str(row['exact']):<6} {row['wall']:.0f}", flush=True)


if __name__ == "__main__":
    main()
