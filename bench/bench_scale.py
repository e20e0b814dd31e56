"""The seeds' scale in the virtual fabric: 1,024 workers on fat_tree(16) at 100 Gbit/s, against the
planner's and the hybrid model's predictions (docs/scale.md).

Every point is one ``ina-sim run --json`` in a child process (so its peak memory is its own),
appended to bench/results/scale.jsonl; the plots go to bench/results/ (``--publish``: also to
docs/figures/).  Figures are in virtual time, a function of the config and the commit; only the
wall time and memory depend on this machine.

    python -m bench.bench_scale                      # every study (about 45 min on 2 cores)
    python -m bench.bench_scale --study packing      # one of: packing ntt smallpool loss failure cost
    python -m bench.bench_scale --plot-only          # redraw from bench/results/scale.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.figures import FIGURES, RESULTS

LOG = RESULTS / "scale.jsonl"
MB = 262144  # float32 values: 1 MB per worker
# 100 Gbit/s hosts, 1 us per link; the fabric's links at a quarter, so packed trees have work to do
FAT = ["--topology", "fat_tree:16", "--bw", "100000", "--delay", "1us"]
OVERSUBSCRIBED = [*FAT, "--fabric-bw", "25000", "--window", "128"]


def studies() -> dict[str, list[tuple[str, list[str]]]]:
    """Study -> [(label, ina-sim run arguments)], cheapest first within each."""
    out: dict[str, list[tuple[str, list[str]]]] = {"cost": [], "smallpool": [], "ntt": [], "packing": [],
                                                   "loss": [], "failure": []}
    for n in (64, 256, 1024):
        for trees in ("1", "auto"):
            out["packing"].append((f"{n} workers, trees {trees}", [*OVERSUBSCRIBED, "--workers", str(n), "--trees",
                                                                     trees, "--size", str(MB), "--calls", "2"]))
    # NTT's case: a switch summing a fraction of the link rate.  16 workers with 16 MB each, where
    # the ring's 30 step latencies are small beside its transfer; then 1,024 workers with 1 MB
    small = ["--topology", "fat_tree:4", "--bw", "100000", "--delay", "1us", "--window", "256", "--trees", "1",
             "--size", str(16 * MB)]
    out["ntt"].append(("16 workers, ring", [*small, "--mode", "ring"]))
    for fraction in ("0.25", "0.5", "0.75"):
        for mode in ("ina", "hybrid"):
            out["ntt"].append((f"16 workers, C={fraction}L, {mode}", [*small, "--agg-rate", fraction, "--mode", mode]))
    big = [*FAT, "--window", "256", "--trees", "1", "--size", str(MB)]
    out["ntt"].append(("1024 workers, C=0.5L, ina", [*big, "--agg-rate", "0.5", "--mode", "ina"]))
    out["ntt"].append(("1024 workers, C=0.5L, hybrid", [*big, "--agg-rate", "0.5", "--mode", "hybrid"]))
    out["ntt"].append(("1024 workers, ring", [*big, "--mode", "ring"]))
    # a small pool: the window, not a rate, limits the switches (C = 4 slots x frame / round trip)
    pool = ["--topology", "fat_tree:4", "--bw", "100000", "--delay", "1us", "--window", "4", "--trees", "1",
            "--size", str(4 * MB)]
    out["smallpool"] += [("16 workers, 4 slots, ina", [*pool, "--mode", "ina"]),
                         ("16 workers, ring", [*pool, "--mode", "ring"]),
                         ("16 workers, 4 slots, hybrid", [*pool, "--mode", "hybrid", "--agg-rate", "0.0125"])]
    # without loss: the packing study's first call, the same run.  At 1,024 workers only 0.01%: every
    # loss in a call's last window stalls all workers for an RTO and makes each send its window again,
    # and at 0.1% that is hours of wall time (docs/scale.md)
    for n, losses in ((64, ("0.01", "0.1", "1")), (1024, ("0.01",))):
        for loss in losses:
            out["loss"].append((f"{n} workers, loss {loss}%", [*OVERSUBSCRIBED, "--workers", str(n), "--size", str(MB),
                                                               "--loss", loss]))
    out["failure"].append(("1024 workers, the first tree's root dies at 40 us",
                           [*OVERSUBSCRIBED, "--size", str(MB), "--fail", "root@40us"]))
    out["cost"].append(("16 workers, trees 1", [*OVERSUBSCRIBED, "--workers", "16", "--trees", "1", "--size", str(MB),
                                                "--calls", "2"]))
    return out


def run_point(study: str, label: str, args: list[str]) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "virtual_fabric.cli", "run", *args, "--json"], capture_output=True,
                          text=True)
    if not proc.stdout.strip():
        raise SystemExit(f"{study} / {label}: ina-sim failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    result.pop("report", None)
    point = {"study": study, "label": label, "args": args, "exit": proc.returncode,
             "wall_outside": time.perf_counter() - started, **result}
    with LOG.open("a") as f:
        f.write(json.dumps(point) + "\n")
    return point


def line(point: dict) -> str:
    last = point["calls"][-1]
    check = point["check"]
    took = f"{last['seconds'] * 1e6:,.1f} us" if last["seconds"] else f"FAILED ({last['error']})"
    return (f"{point['study']:9} {point['label']:42} {took:>14}  link-rate model {last['model'] * 1e6:,.1f} us, "
            f"with latency {last['model_with_latency'] * 1e6:,.1f} us; mode {point['job']['mode']} "
            f"(share {point['job']['ina_share']:.2f}), {point['job']['trees']} tree(s); bound "
            f"{check.get('within_bound')}, identical {check.get('identical')}; wall {point['wall']['total']:.0f} s, "
            f"{point['peak_rss_mb']:,.0f} MB")


def load() -> list[dict]:
    if not LOG.exists():
        return []
    latest: dict[tuple[str, str], dict] = {}
    for text in LOG.read_text().splitlines():
        p = json.loads(text)
        latest[p["study"], p["label"]] = p  # the last run of each point
    return list(latest.values())


def plot(points: list[dict], publish: bool) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def us(p: dict) -> float | None:
        s = p["calls"][-1]["seconds"]
        return s * 1e6 if s else None

    made = []
    packing = [p for p in points if p["study"] == "packing"]
    if packing:
        fig, ax = plt.subplots(figsize=(7, 4))
        for trees, colour in (("1", "tab:blue"), ("auto", "tab:orange")):
            ps = sorted((p for p in packing if p["label"].endswith(f"trees {trees}")),
                        key=lambda p: p["job"]["workers"])
            xs = [p["job"]["workers"] for p in ps]
            name = "one tree" if trees == "1" else "packed trees"
            ax.plot(xs, [us(p) for p in ps], "o-", color=colour, label=f"{name}: fabric")
            ax.plot(xs, [p["calls"][-1]["model"] * 1e6 for p in ps], "x--", color=colour, label=f"{name}: planner")
            ax.plot(xs, [p["calls"][-1]["model_with_latency"] * 1e6 for p in ps], "+:", color=colour,
                    label=f"{name}: planner + 2 round trips")
        ax.set(xscale="log", xlabel="workers (fat_tree(16), 100G hosts, 25G fabric)", ylabel="us per 1 MB allreduce",
               title="Packed trees vs one tree, virtual time (2nd call)")
        ax.set_xticks([64, 256, 1024], ["64", "256", "1024"])
        ax.legend(fontsize=7)
        made.append(_save(fig, "scale-packing.png"))
    ntt = [p for p in points if p["study"] in ("ntt", "smallpool")]
    if ntt:
        fig, ax = plt.subplots(figsize=(8, 4))
        labels = [p["label"] for p in ntt]
        ax.bar(range(len(ntt)), [us(p) or 0 for p in ntt], color="tab:blue", label="fabric")
        ax.plot(range(len(ntt)), [p["calls"][-1]["model"] * 1e6 for p in ntt], "kx", label="model (links)")
        ax.plot(range(len(ntt)), [p["calls"][-1]["model_with_latency"] * 1e6 for p in ntt], "r+",
                label="model + round trips and ring steps")
        ax.set_xticks(range(len(ntt)), labels, rotation=70, ha="right", fontsize=6)
        ax.set(yscale="log", ylabel="us per allreduce (virtual)", title="NTT's case: a switch summing C < L")
        ax.legend(fontsize=7)
        made.append(_save(fig, "scale-hybrid.png"))
    loss = sorted((p for p in points if p["study"] == "loss"),
                  key=lambda p: (p["job"]["workers"], float(p["label"].split()[-1][:-1])))
    if loss:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        xs = [f"{p['job']['workers']} w, {p['label'].split()[-1]}" for p in loss]
        ax.bar(xs, [us(p) or 0 for p in loss])
        ax.set(yscale="log", xlabel="workers, random loss on every link", ylabel="us per 1 MB allreduce (virtual)",
               title="Packed trees (4), 25G fabric, loss")
        made.append(_save(fig, "scale-loss.png"))
    cost = sorted({(p["job"]["workers"], p["label"]): p for p in points
                   if p["study"] in ("packing", "cost") and p["label"].endswith("trees 1")}.values(),
                  key=lambda p: p["job"]["workers"])
    if cost:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        xs = [p["job"]["workers"] for p in cost]
        ax.plot(xs, [p["wall"]["setup"] for p in cost], "o-", label="wall: setup (320 switches)")
        ax.plot(xs, [p["wall"]["run"] for p in cost], "o-", label="wall: run (2 calls)")
        ax2 = ax.twinx()
        ax2.plot(xs, [p["peak_rss_mb"] / 1024 for p in cost], "s--", color="tab:red", label="peak memory (GB)")
        ax.set(xscale="log", xlabel="workers, fat_tree(16), 1 MB each", ylabel="wall seconds",
               title="The fabric's own cost")
        ax2.set_ylabel("GB")
        ax.legend(loc="upper left", fontsize=7)
        ax2.legend(loc="lower right", fontsize=7)
        made.append(_save(fig, "scale-cost.png"))
    for path in made:
        if publish:
            (FIGURES / path.name).write_bytes(path.read_bytes())
    return made


def _save(fig, name: str) -> Path:
    import matplotlib.pyplot as plt

    path = RESULTS / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", action="append", choices=list(studies()), help="only these (default: all)")
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--publish", action="store_true", help="also write the plots to docs/figures/")
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.plot_only:
        todo = [(s, label, a) for s, points in studies().items() if not args.study or s in args.study
                for label, a in points]
        for i, (study, label, a) in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {study}: {label} ...", file=sys.stderr, flush=True)
            print(line(run_point(study, label, a)), flush=True)
    points = load()
    for p in plot(points, args.publish):
        print(f"plot: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
