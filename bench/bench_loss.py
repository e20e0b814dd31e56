"""Time per INA allreduce under random loss, clean and lossy side by side in one run.

Why: a slot completes only when all N contributions and then the result to each worker got
through, so the share of slots that wait on a loss grows with N (and with the links of a
tree).  The worker recovers by fast retransmit (a packet whose result is missing while later
ones are in goes again) and cuts its window only when the round trip has grown, not on every
loss (worker/README.md, "Protocol").

How: Mininet, ``single(N)`` for each N of ``--workers`` and ``tree(2, 4)`` (a root and two leaf
switches, 8 hosts), every link dropping ``loss`` % of the frames it sends in each direction
(a tbf that cuts GSO sends into frames, then a BPF filter: bmv2-env/links.py), with the
workers' defaults (UDP GSO on); built-in target, ina.p4 at V = 256, every link shaped to 200/N Mbit/s
(bench_allreduce's rates, at which the links and not the two cores are the limit; 25 Mbit/s
on the tree), so that a loss costs what it costs on a real link: the time to send again.  Per
configuration a fresh network and job, one rank runner per host
(``python -m bench.ranks``): a checked warm-up call, then ``--runs`` timed
calls, each call's time its slowest rank's; the figure is the median, printed beside the
clean time of the same topology from the same run.

    python -m bench.bench_loss [--workers 2,4,8] [--loss 0,0.5,1,2,5] [--size 4] [--runs 3]
    python -m bench.bench_loss --plot-only

Writes bench/results/loss.csv and loss.png (``--publish``: also copied to docs/figures/loss.png).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_allreduce import default_bw
from bench.common import RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from bench.ranks import DEFAULT_POOL, network, run_ranks, runner_command
from bench.veth_common import sigterm_as_interrupt

FIELDS = ["topology", "workers", "bw_mbit", "loss_percent", "size_bytes", "seconds_median", "seconds_min",
          "seconds_max", "over_clean", "retransmissions", "early_retransmissions", "window_cuts", "max_rel_error"]
# retransmissions: all ranks, the timed calls; early_retransmissions and window_cuts: all ranks, warm-up included


def topology(name: str, workers: int, loss: float):
    from controller.topology import Topology, single, tree

    spec = single(workers) if name == "single" else tree(2, workers // 2)
    for link in spec["links"]:
        link.append({"bw": default_bw(workers), **({"loss": loss} if loss else {})})
    return Topology.from_dict(spec)


def measure(name: str, workers: int, loss: float, args: argparse.Namespace, run: Path) -> dict:
    from controller.controller import Controller
    from controller.pipeline import PipelineOptions

    hosts = [f"h{i}" for i in range(1, workers + 1)]
    with network(topology(name, workers, loss), run, args.busy_wait) as net:
        with Controller(net.network, run / "controller-state.json", PipelineOptions(values=256)) as ctl:
            ctl.setup()
            ctl.create_job("loss", hosts, pool_size=args.pool)
            reports = run_ranks(net, hosts, [runner_command("ina", r, h, args.size_bytes, args,
                                                            ctl.spec_dir / "loss.json", None)
                                             for r, h in enumerate(hosts)], args.runs * 300 + 120)
    times = [max(r["times"][i] for r in reports) for i in range(args.runs)]
    return {"topology": name, "workers": workers, "bw_mbit": default_bw(workers), "loss_percent": loss,
            "size_bytes": args.size_bytes,
            "seconds_median": statistics.median(times), "seconds_min": min(times), "seconds_max": max(times),
            "retransmissions": sum(sum(r["retransmissions"]) for r in reports),
            "early_retransmissions": sum(r.get("early_retransmissions", 0) for r in reports),
            "window_cuts": sum(r.get("window_cuts", 0) for r in reports),
            "max_rel_error": max(r["max_rel_error"] for r in reports)}


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key in dict.fromkeys((r["topology"], r["workers"]) for r in rows):
        mine = sorted((r for r in rows if (r["topology"], r["workers"]) == key), key=lambda r: float(r["loss_percent"]))
        x = [float(r["loss_percent"]) for r in mine]
        label = f"{key[0]}, N = {key[1]}, {float(mine[0].get('bw_mbit') or 0):g} Mbit/s"
        ax.errorbar(x, [float(r["seconds_median"]) for r in mine], marker="o", capsize=3, label=label,
                    yerr=[[float(r["seconds_median"]) - float(r["seconds_min"]) for r in mine],
                          [float(r["seconds_max"]) - float(r["seconds_median"]) for r in mine]])
        rel.plot(x, [float(r["over_clean"]) for r in mine], marker="o", label=label)
    ax.set(xlabel="loss per link and direction (%)", ylabel="time per allreduce (s)")
    rel.set(xlabel="loss per link and direction (%)", ylabel="time / clean time of the same topology")
    for target, where in ((1.3, "1.3x"), (1.6, "1.6x")):
        rel.axhline(target, color="grey", linestyle=":", linewidth=1)
        rel.text(0, target, where, fontsize=7, va="bottom", color="grey")
    for a in (ax, rel):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(f"INA allreduce of {int(rows[0]['size_bytes']) / 1e6:g} MB float32 under random loss "
                 f"(built-in target, median of the timed calls)", fontsize=10)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2,4,8", help="N on one switch")
    ap.add_argument("--loss", default="0,0.5,1,2,5", help="percent per link and direction")
    ap.add_argument("--tree-loss", default="0,1", help="percent on the 3-switch tree (8 hosts); empty: none")
    ap.add_argument("--size", type=float, default=4.0, help="MB of float32 per allreduce")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pool", type=int, default=DEFAULT_POOL, help="slots of the job = the workers' window")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--busy-wait", type=float, default=1800.0)
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    add_publish_argument(ap)
    args = ap.parse_args(argv)
    args.size_bytes = int(args.size * 1e6) // 4 * 4
    args.ring_cc = "cubic"
    csv_path = args.out_dir / "loss.csv"
    if not args.plot_only:
        if os.geteuid() != 0:
            print("Mininet needs root", file=sys.stderr)
            return 2
        sigterm_as_interrupt()
        configs = [("single", int(n), float(p)) for n in args.workers.split(",") if n for p in args.loss.split(",")]
        configs += [("tree", 8, float(p)) for p in args.tree_loss.split(",") if p]
        rows: list[dict] = []
        run = Path(tempfile.mkdtemp(prefix="bench-loss-"))
        try:
            for i, (name, n, loss) in enumerate(configs, 1):
                t0 = time.monotonic()
                row = measure(name, n, loss, args, run / f"{name}-{n}-{loss}")
                clean = next((r["seconds_median"] for r in rows if (r["topology"], r["workers"], r["loss_percent"])
                              == (name, n, 0.0)), None)
                row["over_clean"] = row["seconds_median"] / clean if clean else 1.0
                rows.append(row)
                print(f"[{i}/{len(configs)}] {name} N={n} loss {loss:g}%: median {row['seconds_median']:.2f} s "
                      f"({row['over_clean']:.2f}x clean), {row['retransmissions']} retransmissions in the timed "
                      f"calls; over all calls {row['early_retransmissions']} early, {row['window_cuts']} window cuts "
                      f"[{time.monotonic() - t0:.0f} s]", flush=True)
        except KeyboardInterrupt:
            print("\ninterrupted; network stopped", file=sys.stderr)
            return 130
        finally:
            write_rows(csv_path, rows, FIELDS)
        shutil.rmtree(run, ignore_errors=True)
    publish(plot(csv_path, args.out_dir / "loss.png"), args.publish, csv_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
