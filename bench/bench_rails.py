"""Multi-GPU nodes on a rail-optimised fabric (issue 44's figure): a hierarchical allreduce's time in the virtual
fabric against the model, and the bytes each NIC carries, as the nodes grow.

Why: with a NIC per GPU, each node's gradient goes to the switches once each way spread over its L NICs (rail i's
job sums shard i across the nodes), so a node moves its gradient in about 1/L of one NIC's time plus the in-node
phases; this measures that on the real P4 program, every rail at once, and holds it against
``controller.model.hierarchical_call`` (reduce-scatter + the slowest rail job's predicted call + all-gather).

    python -m bench.bench_rails [--nodes 16,32,64,128] [--windows 64,256] [--publish]   # about 9 min on 2 cores
    python -m bench.bench_rails --plot-only

Each point is one ``ina-sim rails --json`` (8 rails, 32 nodes a leaf, 32 spines, 100 Gbit/s NICs, 8 MB of float32
per GPU, two calls: the first opens the windows; each rail job's window 64, ina-sim's default, and 256, near the
model's best for 1 MiB a NIC: more soon adds more exponent-only frames than it saves) in a child process, one after
another (the 128-node point holds about 1,024 workers' state).  Writes bench/results/rails.csv and rails.png
(``--publish``: docs/figures/rails.png).  Figures are virtual time, a function of the config and the commit; only
wall time and memory are this machine's.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import subprocess
import sys
from pathlib import Path

from bench.common import RESULTS, add_publish_argument, measure_points, publish, read_rows, save_figure

FABRIC = {"rails": 8, "per_leaf": 32, "spines": 32, "gbps": 100.0, "size": 8 << 20}
NODES = (16, 32, 64, 128)


def point(nodes: int, window: int) -> list[dict]:
    """One run's rows, one per call."""
    args = [sys.executable, "-m", "virtual_fabric.cli", "rails", "--nodes", str(nodes), "--rails", str(FABRIC["rails"]),
            "--per-leaf", str(FABRIC["per_leaf"]), "--spines", str(FABRIC["spines"]), "--gbps", str(FABRIC["gbps"]),
            "--size", str(FABRIC["size"]), "--window", str(window), "--calls", "2", "--json", "--quiet"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout:
        raise RuntimeError(f"{' '.join(args[2:])}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout)
    b, check = result["bytes"], result["check"]
    rows = []
    for call, f in enumerate(result["calls"]):
        rows.append({"nodes": nodes, "rails": FABRIC["rails"], "window": window, "call": call,
                     "measured_us": f["seconds"] * 1e6 if f["seconds"] is not None else None,
                     "model_us": f["model"] * 1e6, "ratio": f["ratio"],
                     "rails_us": f["rails"] * 1e6 if f["rails"] is not None else None,
                     "model_rails_us": f["model_rails"] * 1e6,
                     "in_node_us": (f["reduce_scatter"] + f["all_gather"]) * 1e6,
                     "sent_per_nic": b["sent_mean"], "received_per_nic": b["received_mean"],
                     "reference_per_nic": b["reference"], "gradient_per_nic": b["gradient_per_nic"],
                     "within_bound": check["within_bound"], "identical": check["identical"],
                     "roots": " ".join(sorted({r for j in result["jobs"] for r in j["roots"]})),
                     "wall_s": result["wall"]["total"], "peak_rss_mb": result["peak_rss_mb"]})
    return rows


def describe(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        measured = float(r["measured_us"]) if r["measured_us"] not in (None, "") else None
        lines.append(f"{int(r['nodes']):4d} nodes x {r['rails']} rails, W = {r['window']}, call {r['call']}: "
                     + (f"{measured:,.1f} us" if measured is not None else "failed")
                     + f" against the model's {float(r['model_us']):,.1f} us"
                     + (f" ({measured / float(r['model_us']):.3f}x)" if measured is not None else "")
                     + f"; per NIC {float(r['sent_per_nic']):,.0f} B sent, {float(r['received_per_nic']):,.0f} "
                       f"received (gradient/L {int(r['gradient_per_nic']):,} + headers "
                       f"{int(r['reference_per_nic']):,}); within bound {r['within_bound']}, identical "
                       f"{r['identical']}; wall {float(r['wall_s']):.0f} s")
    return lines


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    windows = sorted({int(r["window"]) for r in rows})
    colours = dict(zip(windows, ("tab:blue", "tab:green", "tab:purple", "tab:red")))
    every = sorted({int(r["nodes"]) for r in rows})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.8))
    for w in windows:
        for call, style, marker, label in (("0", ":", "o", "first call"), ("1", "--", "s", "second call")):
            mine = sorted((r for r in rows if int(r["window"]) == w and r["call"] == call),
                          key=lambda r: int(r["nodes"]))
            left.plot([int(r["nodes"]) for r in mine], [float(r["model_us"]) for r in mine], color=colours[w],
                      linestyle=style, label=f"W = {w}, {label}: model")
            done = [r for r in mine if r["measured_us"]]
            left.plot([int(r["nodes"]) for r in done], [float(r["measured_us"]) for r in done], marker,
                      color=colours[w], markerfacecolor="none" if call == "0" else colours[w],
                      label=f"W = {w}, {label}: fabric")
    first = rows[0]
    in_node = float(first["in_node_us"])
    line = float(first["reference_per_nic"]) * 8 / (FABRIC["gbps"] * 1e3) + in_node  # us: a frame per chunk at L
    left.axhline(line, color="black", linewidth=0.8, linestyle="-.")
    left.text(every[0], line, " a frame per chunk at 100 Gbit/s, plus the in-node phases", fontsize=8, va="bottom")
    left.axhline(in_node, color="grey", linewidth=0.8, linestyle=":")
    left.text(every[0], in_node, " in-node reduce-scatter + all-gather (NVLink 450 GB/s)", fontsize=8, va="bottom")
    left.set_xscale("log", base=2)
    left.set_xticks(every, [str(n) for n in every])
    left.set_ylim(bottom=0)
    left.set_xlabel("nodes (8 GPUs and 8 NICs each; 32 a leaf: a spine from 64)")
    left.set_ylabel("hierarchical allreduce (us, virtual)")
    left.set_title("8 MB per GPU: the fabric (marks) against the model (lines)", fontsize=10)
    left.legend(fontsize=7, loc="upper left", ncol=2)
    left.set_ylim(0, max(float(r["model_us"]) for r in rows) * 1.45)
    width = 0.08
    for k, w in enumerate(windows):
        later = sorted((r for r in rows if int(r["window"]) == w and r["call"] == "1"), key=lambda r: int(r["nodes"]))
        for way, marker, shift in (("sent", "^", -width), ("received", "v", width)):
            right.plot([int(r["nodes"]) * 2 ** (shift + (k - (len(windows) - 1) / 2) * 3 * width) for r in later],
                       [float(r[f"{way}_per_nic"]) / 2**20 for r in later], marker, color=colours[w],
                       label=f"W = {w}, {way} (mean per NIC)")
    right.axhline(int(first["gradient_per_nic"]) / 2**20, color="black", linewidth=0.8, label="one gradient / L")
    right.axhline(int(first["reference_per_nic"]) / 2**20, color="grey", linestyle="--", linewidth=0.8,
                  label="gradient / L + headers (a frame per chunk)")
    right.set_xscale("log", base=2)
    right.set_xticks(every, [str(n) for n in every])
    right.set_ylim(0, max(float(r["sent_per_nic"]) for r in rows) / 2**20 * 1.3)
    right.set_xlabel("nodes")
    right.set_ylabel("MiB per NIC per call, each way")
    right.set_title("bytes on each NIC's link (the fabric's count); W exponent-only frames a call", fontsize=10)
    right.legend(fontsize=7, loc="lower right")
    fig.suptitle("Rail-optimised fabric, 100 Gbit/s NICs, 32 spines: each rail's INA job at once, between an in-node "
                 "reduce-scatter and all-gather", fontsize=10)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default=",".join(map(str, NODES)), help="node counts, comma-separated")
    ap.add_argument("--windows", default="64,256", help="each rail job's pool size, comma-separated (default 64, "
                                                        "ina-sim's, and 256, near the model's best)")
    ap.add_argument("--plot-only", action="store_true")
    add_publish_argument(ap)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    csv_path, png = args.out_dir / "rails.csv", args.out_dir / "rails.png"
    windows, nodes = (int(x) for x in args.windows.split(",")), [int(x) for x in args.nodes.split(",")]
    measure_points(csv_path, (functools.partial(point, n, w) for w, n in itertools.product(windows, nodes)),
                   describe, args.plot_only)
    publish(plot(csv_path, png), args.publish, csv_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
