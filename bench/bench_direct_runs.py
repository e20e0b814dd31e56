"""Direct-connect plans run in the virtual fabric (virtual_fabric/direct.py) against their plans: every kind of
part, NTT's eight-node table with the steps counted from the run, and what partial trees buy as devices grow.

Why: a plan the fabric does not run as planned is a promise (issue 58): here each plan's second call (windows
open) is held against the one model's prediction, and each part's steps against the longest chain of dependent
transfers the run's results came by (``virtual_fabric.steps``).

    python -m bench.bench_direct_runs ntt                      # NTT's table: ring, ring + NIC streaming, K_{4,4}
    python -m bench.bench_direct_runs kinds [--workers 16,64] [--gbps 10,100] [--mb 4,16]
    python -m bench.bench_direct_runs devices [--publish]      # N = 128, D = 4, E = 4, 25 MB: M = 11 and 63
    python -m bench.bench_direct_runs case96                   # 96 workers x 4 at 25 Gbit/s, 20 devices of 8 ports

Writes bench/results/direct-runs-<what>.csv (a row per run, as it ends) and, for ``devices``,
direct-devices-run.png (``--publish``: docs/figures/).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from controller import direct
from controller.direct import DirectCluster
from virtual_fabric.direct import fabric_cluster, run_plan

NTT = (("ring", ("ring", "ring"), 14), ("ring, NIC streaming", ("nic_mesh(2)", "nic_mesh(2)"), 7),
       ("optimised topology, NIC streaming", ("nic_mesh(4)",), 3))


def measure(what: str, cluster: DirectCluster, nbytes: int, parts: tuple[str, ...] | None = None,
            kinds: tuple[str, ...] | None = None) -> dict:
    """One plan (exactly ``parts``, or the planner's among ``kinds``) run for two calls: a row."""
    c = fabric_cluster(cluster)
    p = direct.plan_of(c, nbytes, parts) if parts else direct.plan(c, nbytes, kinds)
    result = run_plan(p, calls=2, until=120.0)
    second = result["call_figures"][1]
    row = {"case": what, "workers": cluster.workers, "interfaces": cluster.interfaces, "gbps": cluster.link_gbps,
           "devices": cluster.devices, "mb": nbytes / (1 << 20), "plan": "+".join(x.shape.name for x in p.parts),
           "planned_ms": p.seconds * 1e3, "call1_ms": _ms(result["call_figures"][0]["seconds"]),
           "call2_ms": _ms(second["seconds"]), "ratio": second["ratio"], "steps_planned": p.steps,
           "steps_run": result["steps_run"], "transfer_lb": p.transfer_lb,
           "within_bound": result["check"]["within_bound"], "identical": result["check"]["identical"],
           "wall_s": result["wall"]["total"], "error": (result["errors"] or [""])[0][:120]}
    counts = [part.get("steps_counts") for part in result["parts"] if part.get("steps_counts")]
    row["rounds_by_steps"] = " ".join(str(c) for c in counts)
    print(f"{what}: N={row['workers']} D={row['interfaces']} {row['gbps']:g} Gb/s M={row['devices']} "
          f"{row['mb']:g} MB {row['plan']}: plan {row['planned_ms']:.3f} ms, call 2 {row['call2_ms']:.3f} ms "
          f"({row['ratio'] or 0:.3f}x), steps {row['steps_planned']} planned / {row['steps_run']} run "
          f"{row['rounds_by_steps']}, bound {row['within_bound']}, identical {row['identical']}, "
          f"wall {row['wall_s']:.0f} s {row['error']}", flush=True)
    return row


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def ntt(gbps: float) -> list[dict]:
    cluster = DirectCluster(8, 4, gbps, nic_streaming=True)
    rows = [measure(name, cluster, 4 << 20, parts) for name, parts, _ in NTT]
    for row, (_, _, theirs) in zip(rows, NTT):
        row["ntt_steps"] = theirs
    return rows


def kinds(workers: list[int], rates: list[float], sizes: list[int], mixed: bool = True,
          alone: bool = True) -> list[dict]:
    """ring_tree and nic_mesh alone and beside a tree and a ring (``alone``, ``mixed``), each as the planner
    shapes it for the cluster (its group size or degree), at every N, L and size."""
    rows = []
    for n in workers:
        for gbps in rates:
            for mb in sizes:
                nbytes = mb << 20
                devices = 4 * direct.tree_devices(n, 8)
                chained = DirectCluster(n, 2, gbps, n // 4, 8)
                beside = DirectCluster(n, 5, gbps, devices, 8)
                nics = DirectCluster(n, 4, gbps, nic_streaming=True)
                nics_beside = DirectCluster(n, 5, gbps, devices, 8, nic_streaming=True)
                g = direct.plan(fabric_cluster(chained), nbytes, ["ring_tree"]).parts[0].shape.name
                if alone:
                    rows.append(measure("ring_tree", chained, nbytes, (g,)))
                if mixed:
                    rows.append(measure("ring_tree + tree + ring", beside, nbytes, (g, "tree", "ring")))
                if alone:
                    rows.append(measure("nic_mesh", nics, nbytes, ("nic_mesh(4)",)))
                if mixed:
                    rows.append(measure("nic_mesh + tree + ring", nics_beside, nbytes,
                                        ("nic_mesh(2)", "tree", "ring")))
    return rows


def devices(points: tuple[tuple[float, int], ...] = ((10.0, 11), (100.0, 63), (10.0, 63), (100.0, 11))) -> list[dict]:
    """The devices curve's points (L, M), each the planner's plan run beside the best plan without partial trees
    (at 100 Gbit/s and M = 11 both are the torus: partial trees do not help there)."""
    rows = []
    for gbps, m in points:
        cluster = DirectCluster(128, 4, gbps, m, 4)
        rows.append(measure("whole catalogue", cluster, 25 << 20))
        rows.append(measure("without partial trees", cluster, 25 << 20, kinds=("ring", "torus", "tree")))
    return rows


def case96() -> list[dict]:
    return [measure("96 workers", DirectCluster(96, 4, 25.0, 20, 8), 8 << 20)]


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    rates = sorted({float(r["gbps"]) for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.4), squeeze=False)
    for ax, gbps in zip(axes[0], rates):
        mine = [r for r in rows if float(r["gbps"]) == gbps]
        labels = [f"M = {r['devices']}\n{r['case']}\n{r['plan']}" for r in mine]
        x = range(len(mine))
        ax.bar([i - 0.2 for i in x], [float(r["planned_ms"]) for r in mine], 0.4, label="plan", color="tab:grey")
        ax.bar([i + 0.2 for i in x], [float(r["call2_ms"] or 0) for r in mine], 0.4, label="fabric, call 2",
               color="tab:blue")
        ax.set_xticks(list(x), labels, fontsize=7)
        ax.set_ylabel("ms per allreduce")
        ax.set_title(f"{gbps:g} Gbit/s", fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle("128 workers x 4 interfaces, devices of 4 ports, 25 MB: partial trees run in the virtual fabric",
                 fontsize=10)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("ntt", "kinds", "devices", "case96"))
    ap.add_argument("--workers", default="16,64,128")
    ap.add_argument("--gbps", default="10,100")
    ap.add_argument("--mb", default="4,16")
    ap.add_argument("--alone", action="store_true", help="kinds: each kind alone only, not beside a tree and a ring")
    ap.add_argument("--beside", action="store_true", help="kinds: each kind beside a tree and a ring only")
    add_publish_argument(ap)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    path = args.out_dir / f"direct-runs-{args.what}.csv"
    if args.what == "ntt":
        rows = ntt(100.0) + ntt(10.0)
    elif args.what == "kinds":
        rows = kinds([int(x) for x in args.workers.split(",")], [float(x) for x in args.gbps.split(",")],
                     [int(x) for x in args.mb.split(",")], not args.alone, not args.beside)
    elif args.what == "devices":
        rows = devices()
    else:
        rows = case96()
    write_rows(path, rows, list(dict.fromkeys(k for r in rows for k in r)))
    if args.what == "devices":
        publish(plot(path, args.out_dir / "direct-devices-run.png"), args.publish, path)
    else:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
