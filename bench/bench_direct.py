"""Direct-connect clusters (controller/direct.py): how long planning takes at 1,024 and 2,048 workers, what
each device buys (the devices-against-time curve), and NTT's eight-node table.

Why: NTT plans 1,024 workers in under a minute and 2,048 in under five (E = 8) with their knapsack;
a tree per interface needs D x ceil((N-2)/(E-2)) devices, which few clusters have, so the curve of time
against devices, beside the plain ring and a tree per interface, is what a cluster's owner decides with.

    python -m bench.bench_direct [--runs 3] [--publish]      # planning times, the curve, the table
    python -m bench.bench_direct --plot-only

Planning time is the median of ``--runs`` plans per (N, D, E) with the whole catalogue, twice: with NIC
streaming on (the NIC meshes searched too) and M = D trees' devices, so every shape fits; and with M = N/16,
where partial trees are what the devices allow.  The curve: N = 128, D = 4,
E = 4, devices summing at L, 25 MB per worker, at 100 and 10 Gbit/s, M from 0 to 4 x 63, with the whole
catalogue and with the baseline's (ring and full tree only).  Writes bench/results/direct-planning.csv,
direct-devices.csv and direct-devices.png (``--publish``: docs/figures/direct-devices.png).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from dataclasses import replace
from pathlib import Path

from bench.common import RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from controller import circuits, direct
from controller.direct import DirectCluster

CURVE = {"workers": 128, "interfaces": 4, "ports": 4, "bytes": 25 << 20, "gbps": (100.0, 10.0)}
BASELINE = ("ring", "torus", "tree")  # what a cluster without partial trees can do


def planning(runs: int) -> list[dict]:
    rows = []
    for n, d, e, scarce in itertools.product((1024, 2048), (4, 8), (4, 8), (False, True)):
        devices = n // 16 if scarce else d * circuits.tree_devices(n, e)
        cluster = DirectCluster(n, d, 100.0, devices, e, nic_streaming=not scarce)
        took, found = [], None
        for _ in range(runs):
            circuits.mesh_offsets.cache_clear()  # every run searches the NIC meshes again
            started = time.perf_counter()
            found = direct.plan(cluster, 25 << 20)
            took.append(time.perf_counter() - started)
        assert found is not None
        rows.append({"workers": n, "interfaces": d, "ports": e, "devices": devices,
                     "nic_streaming": cluster.nic_streaming, "shapes": len(direct.shapes(cluster)),
                     "seconds_median": statistics.median(took), "seconds_max": max(took),
                     "plan": "+".join(p.shape.name for p in found.parts)})
        r = rows[-1]
        print(f"N={n:5d} D={d} E={e} M={devices:4d}{' NIC' if cluster.nic_streaming else '    '}: "
              f"{r['shapes']} shapes, planned in {r['seconds_median']:.2f} s (max {r['seconds_max']:.2f}): "
              f"{r['plan']}")
    return rows


def curve() -> list[dict]:
    rows = []
    trees = CURVE["interfaces"] * circuits.tree_devices(CURVE["workers"], CURVE["ports"])
    for gbps in CURVE["gbps"]:
        cluster = DirectCluster(CURVE["workers"], CURVE["interfaces"], gbps, 0, CURVE["ports"])
        for m in range(trees + 1):
            for catalogue, kinds in (("all", None), ("baseline", BASELINE)):
                found = direct.plan(replace(cluster, devices=m), CURVE["bytes"], kinds)
                rows.append({"gbps": gbps, "devices": m, "catalogue": catalogue, "ms": found.seconds * 1e3,
                             "devices_used": found.devices_used, "steps": found.steps,
                             "parts": "+".join(p.shape.name for p in found.parts)})
    return rows


def needed(rows: list[dict], gbps: float, catalogue: str, within: float) -> int | None:
    """The fewest devices with which the catalogue comes within ``within`` of the all-tree time."""
    mine = [r for r in rows if float(r["gbps"]) == gbps and r["catalogue"] == catalogue]
    best = min(float(r["ms"]) for r in rows if float(r["gbps"]) == gbps)
    return next((int(r["devices"]) for r in mine if float(r["ms"]) <= best * (1 + within)), None)


def describe_curve(rows: list[dict]) -> list[str]:
    lines = []
    for gbps in CURVE["gbps"]:
        def at(m: int, catalogue: str, gbps: float = gbps) -> float:
            return next(float(r["ms"]) for r in rows if float(r["gbps"]) == gbps and int(r["devices"]) == m
                        and r["catalogue"] == catalogue)
        lines.append(f"{gbps:g} Gbit/s: rings alone (M = 0) {at(0, 'all'):.3f} ms; all trees (M = 252) "
                     f"{at(252, 'all'):.3f} ms; within 5% of it from M = {needed(rows, gbps, 'all', 0.05)} "
                     f"(baseline catalogue: M = {needed(rows, gbps, 'baseline', 0.05)})")
        for target in (2.0, 1.5, 1.25, 1.1):
            lines.append(f"  within {target:.2f}x of all trees: M = {needed(rows, gbps, 'all', target - 1)} with "
                         f"partial trees, {needed(rows, gbps, 'baseline', target - 1)} with rings and trees only")
        for m in (11, 22, 63, 126):
            lines.append(f"  M = {m:3d}: {at(m, 'all'):.3f} ms with partial trees, "
                         f"{at(m, 'baseline'):.3f} ms without")
    return lines


def ntt_table() -> list[str]:
    cluster = DirectCluster(8, 4, 100.0, nic_streaming=True)
    lines = ["NTT's table (8 nodes, 4 interfaces): plan's steps / transfer time (L.b) / NTT's"]
    for name, kinds, theirs in (("ring", "ring", 14), ("ring, NIC streaming", "nic_mesh(2)", 7),
                                ("optimised topology, NIC streaming", "nic_mesh(4)", 3)):
        found = direct.plan(cluster, 1 << 20, [kinds])
        lines.append(f"  {name:35s} {found.steps:3d} steps  {found.transfer_lb:.4f} L.b   NTT: {theirs} steps, "
                     f"0.4375 L.b")
    return lines


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    fig, axes = plt.subplots(1, len(CURVE["gbps"]), figsize=(6.2 * len(CURVE["gbps"]), 4.8), squeeze=False)
    for ax, gbps in zip(axes[0], CURVE["gbps"]):
        for catalogue, colour, label in (("all", "tab:blue", "whole catalogue (partial trees)"),
                                         ("baseline", "tab:orange", "rings and full trees only")):
            mine = [r for r in rows if float(r["gbps"]) == gbps and r["catalogue"] == catalogue]
            ax.step([int(r["devices"]) for r in mine], [float(r["ms"]) for r in mine], where="post",
                    color=colour, label=label)
        marks = {c: needed(rows, gbps, c, 0.05) for c in ("all", "baseline")}
        for catalogue, m in marks.items():
            if m is None:
                continue
            same = marks["all"] == marks["baseline"]
            colour = "black" if same else {"all": "tab:blue", "baseline": "tab:orange"}[catalogue]
            ax.axvline(m, color=colour, linestyle=":", linewidth=1)
            if not same or catalogue == "all":
                ax.text(m, 0.5, f"within 5% of all trees from M = {m}" + (" (both catalogues)" if same else ""),
                        transform=ax.get_xaxis_transform(), color=colour, fontsize=8, ha="right", va="center",
                        rotation=90)
        best = min(float(r["ms"]) for r in rows if float(r["gbps"]) == gbps)
        ax.axhline(best, color="grey", linewidth=0.8, linestyle="--")
        ax.text(0, best, f" a tree per interface (4 x 63 devices): {best:.3f} ms", fontsize=8, va="bottom")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("aggregation devices M")
        ax.set_ylabel("planned time per allreduce (ms, log)")
        ax.set_title(f"{gbps:g} Gbit/s links, hop 1 us, host 20 us", fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(f"Direct-connect cluster: {CURVE['workers']} workers x {CURVE['interfaces']} interfaces, devices of "
                 f"{CURVE['ports']} ports at L, {CURVE['bytes'] >> 20} MB per worker", fontsize=10)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plot-only", action="store_true")
    add_publish_argument(ap)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    devices_csv, png = args.out_dir / "direct-devices.csv", args.out_dir / "direct-devices.png"
    if not args.plot_only:
        rows = planning(args.runs)
        write_rows(args.out_dir / "direct-planning.csv", rows)
        found = curve()
        write_rows(devices_csv, found)
    print("\n".join(describe_curve(read_rows(devices_csv))))
    print("\n".join(ntt_table()))
    publish(plot(devices_csv, png), args.publish, devices_csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
