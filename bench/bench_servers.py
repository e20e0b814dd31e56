"""Spare servers as aggregation devices (issue 62, acceptance 2): workers at 100 Gbit/s on a plain switch, the
call split over several servers of 16 cores each, in the virtual fabric, with the model's prediction beside each
measurement and the speed-up over the fewest servers measured.

    python -m bench.bench_servers [--workers 64] [--servers 1,2,3,4,6,8] [--size 262144] [--calls 2] [--publish]

A server core sums ``topology.SERVER_AGG_PPS_PER_CORE`` contributions a second unless ``--per-core-pps`` says
otherwise (the built-in target's native C loop: 3.3 us per V = 256 packet on this machine, so 300,000), and a
tree's lane sits on one core, so a job takes a lane per core (``--lanes``, default 16).  The servers' links are
the workers' rate, so the servers' CPUs, not their links, set the rate: each server adds its cores' worth.
More than 32 workers take server trees of two levels (``controller.plan.server_nodes``): each server roots a
tree whose leaves are the next servers, so 64 workers need 3 servers at least; a count too small for the workers
is reported with the planner's reason.  Each point is one run in this process; figures are virtual time (the last
call's, its window open), a function of the config and the commit.  Writes bench/results/servers.csv and
servers.png (``--publish``: docs/figures/servers.png).
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

from bench.common import RESULTS, add_publish_argument, measure_points, publish, read_rows, save_figure
from controller import topology
from controller.job_plan import JobError
from virtual_fabric.runs import RunConfig, run


def measure(workers: int, servers: int, args: argparse.Namespace) -> list[dict]:
    """One run: the last call's time and the model's, the plan's rate; a count that cannot carry the
    workers gives a row with the planner's reason instead."""
    spec = topology.servers(workers, servers, args.cores, 1, args.gbps * 1e3, args.gbps * 1e3, args.per_core_pps)
    path = args.out_dir / f"servers_{workers}_{servers}.json"
    topology.Topology.from_dict(spec)  # bad figures fail here, by field
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    row = {"workers": workers, "servers": servers, "mb": args.size * 4 / 2**20, "measured_us": "", "model_us": "",
           "ratio": "", "plan_mbps": "", "exact": "", "wall_s": "", "error": ""}
    started = time.perf_counter()
    try:
        result = run(RunConfig(topology=str(path), bw=args.gbps * 1e3, size=args.size, calls=args.calls, mode="ina",
                               lanes=args.lanes, pool_size=args.pool_size, delay=args.delay))
    except JobError as e:
        return [{**row, "error": str(e)}]
    last = result["calls"][-1]
    return [{**row, "measured_us": last["seconds"] * 1e6, "model_us": last["model"] * 1e6, "ratio": last["ratio"],
             "plan_mbps": result["job"]["plan_rate_mbps"],
             "exact": result["check"]["within_bound"] and result["check"]["identical"],
             "wall_s": time.perf_counter() - started}]


def describe(done: list[dict], found: list[dict]) -> list[str]:
    """Each row as a line, with the speed-up over the fewest servers that ran (and the ideal, their ratio)."""
    lines = []
    for row in found:
        if row["error"]:
            lines.append(f"{row['servers']:>7} cannot: {row['error']}")
            continue
        done.append(row)
        first = done[0]
        speedup = float(first["measured_us"]) / float(row["measured_us"])
        ideal = int(row["servers"]) / int(first["servers"])
        lines.append(f"{row['servers']:>7} {float(row['measured_us']):>12,.1f} {float(row['model_us']):>12,.1f} "
                     f"{float(row['ratio']):>6.3f} {speedup:>6.2f} {ideal:>6.2f} {float(row['plan_mbps']):>10,.0f} "
                     f"{str(row['exact']):<6} {float(row['wall_s']):.0f}")
    return lines


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(csv_path) if not r["error"]]
    if not rows:
        raise SystemExit(f"{csv_path}: no point ran")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    counts = [int(r["servers"]) for r in rows]
    left.plot(counts, [float(r["model_us"]) / 1e3 for r in rows], "--", color="tab:blue", label="model")
    left.plot(counts, [float(r["measured_us"]) / 1e3 for r in rows], "o", color="tab:blue", label="fabric")
    for n, r in zip(counts, rows):
        left.annotate(f"{float(r['ratio']):.2f}x", (n, float(r["measured_us"]) / 1e3), textcoords="offset points",
                      xytext=(4, 4), fontsize=8)
    left.set_xlabel("servers (16 cores each)")
    left.set_ylabel("call time (ms, virtual)")
    left.set_title(f"{rows[0]['workers']} workers, {float(rows[0]['mb']):g} MB a call: measured / model", fontsize=10)
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    first = rows[0]
    right.plot(counts, [n / counts[0] for n in counts], "--", color="grey", label="ideal (servers' ratio)")
    right.plot(counts, [float(first["measured_us"]) / float(r["measured_us"]) for r in rows], "o-", color="tab:green",
               label="fabric")
    right.plot(counts, [float(first["model_us"]) / float(r["model_us"]) for r in rows], "x:", color="tab:blue",
               label="model")
    right.set_xlabel("servers")
    right.set_ylabel(f"speed-up over {counts[0]} server(s)")
    right.legend(fontsize=8)
    fig.suptitle("Spare servers aggregating (ina.p4 on 16 cores at 300,000 contributions/s each), 100 Gbit/s links",
                 fontsize=10)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=64)
    p.add_argument("--servers", default="1,2,3,4,6,8")
    p.add_argument("--cores", type=int, default=16)
    p.add_argument("--per-core-pps", type=float, default=topology.SERVER_AGG_PPS_PER_CORE)
    p.add_argument("--lanes", type=int, default=16)
    p.add_argument("--pool-size", type=int, default=128, help="slots per server tree, shared by its lanes")
    p.add_argument("--gbps", type=float, default=100.0)
    p.add_argument("--delay", default="1us")
    p.add_argument("--size", type=int, default=1 << 18, help="float32 values per call")
    p.add_argument("--calls", type=int, default=2)
    p.add_argument("--plot-only", action="store_true")
    add_publish_argument(p)
    p.add_argument("--out-dir", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    print(f"{args.workers} workers at {args.gbps:g} Gbit/s, servers of {args.cores} cores at "
          f"{args.per_core_pps:,.0f} contributions/s each, {args.size * 4 / 2**20:g} MB per call")
    print(f"{'servers':>7} {'measured us':>12} {'model us':>12} {'ratio':>6} {'x few':>6} {'ideal':>6} "
          f"{'plan Mb/s':>10} exact  wall s")
    csv_path, png = args.out_dir / "servers.csv", args.out_dir / "servers.png"
    counts = [int(s) for s in args.servers.split(",")]
    measure_points(csv_path, (functools.partial(measure, args.workers, n, args) for n in counts),
                   functools.partial(describe, []), args.plot_only)
    publish(plot(csv_path, png), args.publish, csv_path)


if __name__ == "__main__":
    main()
