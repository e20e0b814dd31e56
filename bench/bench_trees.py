"""Packed aggregation trees against one tree, on a leaf-spine whose uplinks are the bottleneck.

Why: one aggregation tree sends each leaf's partial sums up one spine and leaves the other
uplink idle.  The planner (controller/plan.py) packs one tree per spine and splits every
allreduce between them by their rates, so on ``leaf_spine(2, 2, 2)`` with host links twice
as fast as the leaf-spine links the packed job should take half the time of one tree: both
uplinks of every leaf busy, and the host links exactly full.  The controller's model predicts the
time (``JobPlan.choose``: the trees' rates, round trips and window); each measurement is printed
beside its prediction.

How: a Mininet network of the built-in target running ina.p4 with 256 values per packet
(``PipelineOptions(values=256)``), every link shaped by TCLink (htb): host links
``2 x --fabric-bw``, leaf-spine links ``--fabric-bw`` Mbit/s each way (default 15: host links
at 30 Mbit/s).  That is the fastest these links stay the limit: four switch processes, four
Python workers and their kernel stacks share two cores, and every packet crosses three
switches.  Measured (8 MiB, V = 256): packed 1.94x one tree at 15/30 Mbit/s, 1.78x at 20/40
and 1.74x at 25/50, where the packed job took 1.16-1.19x its predicted time.
For each of "1 tree" (``create_job(trees=1)``) and "packed" (``trees="auto"``) a fresh job
is created and one rank runner per host (``python -m bench.ranks``) makes one
checked warm-up call and ``--runs`` timed calls; a call's time is its slowest rank's, the
figure the median over calls.  The prediction counts every packet's Ethernet/IPv4/UDP and
ina headers; it leaves out the exponent-only packets that start each tree's stream (one
window per tree and call, 64 of the 4,096 packets of each tree here) and the round trip
that fills and drains the window.

The second part plans, without a network, every host of ``fat_tree(k)`` (k = 4 .. 16:
1,024 hosts at k = 16) with host links 4x as fast as the fabric links (so several trees
are needed), and prints the planner's time on one core and its check that no link is over
capacity.

    python -m bench.bench_trees                  # network part and planner part
    python -m bench.bench_trees --plan-only      # the planner part (no root needed)
    python -m bench.bench_trees --plot-only      # redraw from bench/results/trees.csv

Writes bench/results/trees.csv and trees.png (``--publish``: also docs/figures/trees-packed-vs-one.png).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.common import MIB, RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from bench.ranks import DEFAULT_POOL, VALUES, network, run_ranks, runner_command
from bench.veth_common import sigterm_as_interrupt

HOSTS = ["h1", "h2", "h3", "h4"]
MODES = {"1 tree": 1, "packed": "auto"}
CSV_FIELDS = ["kind", "mode", "trees", "size_bytes", "fabric_mbit", "host_mbit", "runs", "seconds_median",
              "seconds_min", "seconds_max", "predicted_seconds", "measured_over_predicted", "retransmissions",
              "max_rel_error", "hosts", "links", "plan_seconds", "max_link_load"]


@dataclass
class Measured:
    mode: str
    trees: int
    size_bytes: int
    fabric: float
    times: list[float]
    predicted: float
    retransmissions: int
    max_rel_error: float

    @property
    def seconds(self) -> float:
        return statistics.median(self.times)

    def row(self) -> dict:
        return {"kind": "leafspine", "mode": self.mode, "trees": self.trees, "size_bytes": self.size_bytes,
                "fabric_mbit": self.fabric, "host_mbit": 2 * self.fabric, "runs": len(self.times),
                "seconds_median": f"{self.seconds:.4f}", "seconds_min": f"{min(self.times):.4f}",
                "seconds_max": f"{max(self.times):.4f}", "predicted_seconds": f"{self.predicted:.4f}",
                "measured_over_predicted": f"{self.seconds / self.predicted:.3f}",
                "retransmissions": self.retransmissions, "max_rel_error": f"{self.max_rel_error:.2e}"}


def leaf_spine_topology(fabric: float):
    from controller.topology import Topology, leaf_spine

    return Topology.from_dict(leaf_spine(2, 2, 2, host_bw=2 * fabric, fabric_bw=fabric))


def measure(net, controller, mode: str, args: argparse.Namespace) -> Measured:
    job = f"trees-{mode.replace(' ', '')}"
    spec = controller.create_job(job, HOSTS, pool_size=args.pool_size, trees=MODES[mode])
    plan = controller.plan(HOSTS, MODES[mode], mode="ina", pool_size=args.pool_size)
    predicted = plan.choose(args.size_bytes).seconds  # a call after the first: the window open
    wait = (args.runs + 1) * predicted * 3 + 120
    try:
        reports = run_ranks(net, HOSTS, [runner_command("ina", r, h, args.size_bytes, args,
                                                        controller.spec_dir / f"{job}.json", None)
                                         for r, h in enumerate(HOSTS)], wait)
    finally:
        controller.delete_job(job)
    return Measured(mode, len(spec.trees), args.size_bytes, args.fabric_bw,
                    [max(r["times"][i] for r in reports) for i in range(args.runs)], predicted,
                    sum(sum(r["retransmissions"]) for r in reports), max(r["max_rel_error"] for r in reports))


def bench_network(args: argparse.Namespace) -> list[Measured]:
    from controller.controller import Controller
    from controller.pipeline import PipelineOptions

    results: list[Measured] = []
    run_root = Path(tempfile.mkdtemp(prefix="bench-trees-"))
    print(f"leaf_spine(2, 2, 2): host links {2 * args.fabric_bw:g} Mbit/s, leaf-spine links {args.fabric_bw:g} "
          f"Mbit/s; {args.size_bytes / MIB:g} MiB float32, V={VALUES}, pool/window {args.pool_size} per tree, "
          f"{args.runs} timed calls per mode and round, {args.rounds} round(s); run directory {run_root}", flush=True)
    with ExitStack() as stack:
        net = stack.enter_context(network(leaf_spine_topology(args.fabric_bw), run_root / "net", args.busy_wait))
        controller = stack.enter_context(Controller(net.network, run_root / "controller-state.json",
                                                    PipelineOptions()))  # the defaults: V = VALUES
        controller.setup()
        if failed := net.ping_all():
            raise RuntimeError(f"hosts cannot reach each other after setup: {failed}")
        for round_ in range(args.rounds):  # modes alternate, so a noisy moment hits both
            for mode in MODES:
                t0 = time.monotonic()
                print(f"  round {round_ + 1}/{args.rounds} {mode}: {args.runs + 1} calls ...", end=" ", flush=True)
                m = measure(net, controller, mode, args)
                results.append(m)
                print(f"{m.trees} tree(s), median {m.seconds:.3f} s ({', '.join(f'{t:.2f}' for t in m.times)}), "
                      f"predicted {m.predicted:.3f} s (measured/predicted {m.seconds / m.predicted:.2f}), "
                      f"{m.retransmissions} retransmissions, rel. error {m.max_rel_error:.1e} "
                      f"[{time.monotonic() - t0:.0f} s]", flush=True)
    shutil.rmtree(run_root, ignore_errors=True)
    return results


def bench_planner(ks: list[int]) -> list[dict]:
    """Plan every host of fat_tree(k): time and the largest link load over its capacity."""
    from controller import plan
    from controller.topology import Topology, fat_tree

    rows = []
    for k in ks:
        topo = Topology.from_dict(fat_tree(k, host_bw=40, fabric_bw=10))
        members = sorted(topo.hosts, key=lambda h: int(h[1:]))
        t0 = time.process_time()
        p = plan.pack_trees(topo, members, 32)
        cpu = time.process_time() - t0
        load = [0.0] * len(topo.links)
        for t in p.trees:
            for i in [topo.host_link(m) for m in members] + plan.fabric_links(topo, t.tree):
                load[i] += t.rate
        worst = max(load[i] / link.capacity for i, link in enumerate(topo.links))
        print(f"  fat_tree({k}): {len(members):>5} hosts, {len(topo.switches):>3} switches, {len(topo.links):>5} "
              f"links: {len(p.trees)} tree(s) of {p.candidates} candidates, rate {p.rate:g} Mb/s (bound "
              f"{p.upper_bound:g}), planned in {cpu:.2f} s CPU, busiest link at {worst:.1%} of capacity", flush=True)
        rows.append({"kind": "planner", "trees": len(p.trees), "hosts": len(members), "links": len(topo.links),
                     "plan_seconds": f"{cpu:.3f}", "max_link_load": f"{worst:.4f}"})
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    write_rows(path, rows, CSV_FIELDS, digits=None)


def summary(rows: list[dict]) -> dict[str, dict]:
    """Per mode: median over all timed calls of all rounds, min, max, prediction, trees."""
    out = {}
    for mode in MODES:
        mine = [r for r in rows if r["kind"] == "leafspine" and r["mode"] == mode]
        if mine:
            medians = [float(r["seconds_median"]) for r in mine]
            out[mode] = {"median": statistics.median(medians), "min": min(float(r["seconds_min"]) for r in mine),
                         "max": max(float(r["seconds_max"]) for r in mine),
                         "predicted": float(mine[0]["predicted_seconds"]), "trees": int(mine[0]["trees"]),
                         "size": int(mine[0]["size_bytes"]), "fabric": float(mine[0]["fabric_mbit"])}
    return out


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    modes = summary(rows)
    planner = [r for r in rows if r["kind"] == "planner"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1.2, 1]})
    ax = axes[0]
    for i, (mode, m) in enumerate(modes.items()):
        ax.bar(i - 0.2, m["median"], 0.38, color="tab:blue" if mode == "packed" else "tab:gray",
               yerr=[[m["median"] - m["min"]], [m["max"] - m["median"]]], capsize=3,
               label="measured (median, min-max)" if i == 0 else None)
        ax.bar(i + 0.2, m["predicted"], 0.38, color="white", edgecolor="black", hatch="//",
               label="planner's prediction" if i == 0 else None)
        ax.text(i - 0.2, m["median"] / 2, f"{m['median']:.2f} s", ha="center", rotation=90, color="white")
        ax.text(i + 0.2, m["predicted"] / 2, f"{m['predicted']:.2f} s", ha="center", rotation=90,
                bbox={"facecolor": "white", "edgecolor": "none"})
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels([f"{mode} (--trees {MODES[mode]})\n{m['trees']} tree{'s' if m['trees'] > 1 else ''}"
                        for mode, m in modes.items()])
    if len(modes) == 2:
        one, packed = modes["1 tree"], modes["packed"]
        ax.set_title(f"leaf_spine(2, 2, 2), {one['size'] / MIB:g} MiB float32: packed "
                     f"{one['median'] / packed['median']:.2f}x faster\nhost links {2 * one['fabric']:g}, leaf-spine "
                     f"links {one['fabric']:g} Mbit/s", fontsize=10)
    ax.set_ylabel("time per allreduce (s)")
    ax.legend(loc="upper right", fontsize=8)
    ax = axes[1]
    if planner:
        hosts = [int(r["hosts"]) for r in planner]
        ax.plot(hosts, [float(r["plan_seconds"]) for r in planner], "o-")
        for r in planner:
            ax.annotate(f"{float(r['plan_seconds']):.2f} s, {r['trees']} trees", (int(r["hosts"]),
                        float(r["plan_seconds"])), textcoords="offset points", xytext=(-40, 8), fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("hosts (every host of fat_tree(k), k = 4..16)")
        ax.set_ylabel("planning time, one core (s)")
        ax.set_title("planner: fat-trees, host links 4x the fabric links", fontsize=10)
        ax.set_ylim(bottom=0)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric-bw", type=float, default=15.0, help="leaf-spine links, Mbit/s (host links twice this)")
    ap.add_argument("--size", type=float, default=8.0, help="tensor size in MiB of float32")
    ap.add_argument("--runs", type=int, default=3, help="timed allreduce calls per mode and round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (1 tree, packed), alternating")
    ap.add_argument("--pool-size", type=int, default=DEFAULT_POOL, help="slots per tree = each tree's window")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--busy-wait", type=float, default=1800.0, help="seconds to wait for a busy network")
    ap.add_argument("--fat-tree-k", default="4,8,12,16", help="fat-tree sizes for the planner part")
    ap.add_argument("--plan-only", action="store_true", help="only the planner part (no network, no root)")
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    add_publish_argument(ap)
    args = ap.parse_args(argv)
    args.size_bytes = int(args.size * MIB) // 4 * 4
    args.ring_cc = "system"  # runner_command passes it on; only the ring uses it
    csv_path, png_path = args.out_dir / "trees.csv", args.out_dir / "trees.png"
    if not args.plot_only:
        rows: list[dict] = []
        print("planner, every host of fat_tree(k):", flush=True)
        rows += bench_planner([int(k) for k in args.fat_tree_k.split(",") if k])
        if not args.plan_only:
            if os.geteuid() != 0:
                print("the network part needs root (Mininet); --plan-only runs the rest", file=sys.stderr)
                return 2
            sigterm_as_interrupt()
            try:
                rows += [m.row() for m in bench_network(args)]
            except KeyboardInterrupt:
                print("\ninterrupted; network stopped", file=sys.stderr)
                return 130
        write_csv(rows, csv_path)
        modes = summary(rows)
        for mode, m in modes.items():
            print(f"{mode:>7}: {m['trees']} tree(s), median {m['median']:.3f} s, predicted {m['predicted']:.3f} s "
                  f"(measured/predicted {m['median'] / m['predicted']:.2f})")
        if len(modes) == 2:
            print(f"packed trees: {modes['1 tree']['median'] / modes['packed']['median']:.2f}x faster than one tree "
                  f"(predicted {modes['1 tree']['predicted'] / modes['packed']['predicted']:.2f}x)")
    plot(csv_path, png_path)
    if not args.plan_only:
        publish(png_path, args.publish, csv_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
