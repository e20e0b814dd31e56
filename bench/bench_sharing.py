"""Two jobs at once against one alone (issue 61): 64 workers each on fat_tree(8), 100 Gbit/s hosts and fabric, 1 µs
links, 1 MB of float32 a call, auto windows, in the virtual fabric, the model's prediction beside each call.

Why: the planner packs a job's trees by the links' capacities; a second job planned on the whole fabric takes the
same best trees and shares every uplink.  The controller plans a new job on what the running ones leave
(``controller.shared_fabric``), so jobs whose hosts interleave should each run as fast as alone.

    python -m bench.bench_sharing            # about 2 min on 2 cores
    python -m bench.bench_sharing --plot-only

Three layouts: one job alone (the even hosts), two jobs split by pods (h1-h64, h65-h128) and two interleaved (odd
and even hosts).  Writes bench/results/sharing.csv.  Figures are virtual time, a function of the config and the
commit; only wall time is this machine's.
"""

from __future__ import annotations

import argparse
import functools
import time

from bench.common import RESULTS, measure_points
from controller.topology import Topology, fat_tree
from virtual_fabric.jobs_at_once import run_jobs

SIZE = 262144  # values: 1 MB of float32


def topology() -> Topology:
    data = fat_tree(8, host_bw=100_000.0, fabric_bw=100_000.0)
    for link in data["links"]:
        link[2]["delay"] = "1us"
    return Topology.from_dict(data)


def layouts(hosts: list[str]) -> dict[str, list[list[str]]]:
    return {"alone": [hosts[0::2]], "pods": [hosts[:64], hosts[64:]], "interleaved": [hosts[0::2], hosts[1::2]]}


def point(layout: str) -> list[dict]:
    """One run's rows, one per job and call."""
    net = topology()
    hosts = sorted(net.hosts, key=lambda h: int(h[1:]))
    started = time.perf_counter()
    jobs = run_jobs(net, layouts(hosts)[layout], SIZE)
    wall = time.perf_counter() - started
    shared = len(jobs[0].links & jobs[1].links) if len(jobs) > 1 else 0
    return [{"layout": layout, "job": j.name, "call": c, "window": j.window, "roots": " ".join(j.roots),
             "shared_links": shared, "measured_us": s * 1e6 if s is not None else None,
             "model_us": m * 1e6 if m is not None else None, "identical": j.identical, "wall_s": wall}
            for j in jobs for c, (s, m) in enumerate(zip(j.seconds, j.model))]


def describe(rows: list[dict]) -> list[str]:
    return [f"{r['layout']:>11} {r['job']} call {r['call']}: W = {r['window']}, roots {r['roots']}, "
            + (f"{float(r['measured_us']):7.1f} us" if r["measured_us"] not in (None, "") else " failed")
            + f", the model {float(r['model_us']):7.1f} us; fabric links shared by the jobs {r['shared_links']}; "
              f"identical {r['identical']}; wall {float(r['wall_s']):.0f} s" for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plot-only", action="store_true", help="describe the CSV's rows; run nothing")
    args = ap.parse_args(argv)
    csv_path = RESULTS / "sharing.csv"
    measure_points(csv_path, (functools.partial(point, name) for name in ("alone", "pods", "interleaved")),
                   describe, args.plot_only)
    print(f"wrote {csv_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
