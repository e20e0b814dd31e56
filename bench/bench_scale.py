"""The seeds' scale in the virtual fabric, against the one model (controller/model.py): every call's
simulated time beside the prediction the worker chose it by (docs/scale.md).

Studies (``--study``, default all):

- ``grid``: issue 40's acceptance.  16, 64 and 256 workers (fat_tree(4), fat_tree(8) and fat_tree(16)
  at 100 Gbit/s, 1 us per link) with 256 KB, 4 MB and 64 MB per worker (64 MB at 16 and 64 only), the
  switches summing C = L/4, L/2, 3L/4 or without limit, pools of 4, 64 and 256 slots; and 1,024
  workers with 256 KB and 1 MB, C = L/2 and no limit, 256 slots.  Each cell runs ina, hybrid and auto,
  each with two calls (the first opens the window); the ring once per workers and size (neither C nor
  the pool touches it).  Where the model's choices for both calls of auto are those of a forced run
  (the same method, share and layout), that run *is* auto's in the fabric (its workers do exactly the
  same; tests/test_scale.py checks it), so the expensive cells reuse it; cells of 512 MB or less of
  tensor per call over all workers run auto anyway.
- ``ntt``: NTT's case, where the hybrid should pay off: C = L/2, 16 MB per worker, 16 and 256 workers.
- ``rings``: 1,024 workers, 1 MB: each ring layout, the flat one (gloo's) among them.
- ``packing``, ``loss``, ``failure``, ``cost``: issue 35's studies (packed trees against one, random
  loss, a core dying mid-call, what the fabric costs this machine).

Every point is one ``ina-sim run --json`` in a child process (its peak memory its own), two at a time
unless a point is large (then alone), appended to bench/results/scale.jsonl; the plots go to
bench/results/ (``--publish``: also docs/figures/).  Figures are in virtual time, a function of the
config and the commit; only the wall time and memory depend on this machine.

    python -m bench.bench_scale --study grid         # about 8 h on 2 cores
    python -m bench.bench_scale --study grid --max-load 64        # the cells of at most 64 MB per call
    python -m bench.bench_scale --study grid --match "1024 workers"
    python -m bench.bench_scale --study ntt --study rings
    python -m bench.bench_scale --plot-only          # redraw and summarise from bench/results/scale.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import RESULTS, add_publish_argument, publish, save_figure

LOG = RESULTS / "scale.jsonl"
MB = 262144  # float32 values: 1 MB per worker
FAST = ["--bw", "100000", "--delay", "1us"]
FAT = ["--topology", "fat_tree:16", *FAST]
OVERSUBSCRIBED = [*FAT, "--fabric-bw", "25000", "--window", "128"]
TOPOLOGY = {16: "fat_tree:4", 64: "fat_tree:8", 256: "fat_tree:16", 1024: "fat_tree:16"}
LOSSES = ("0", "0.01", "0.1", "1")  # % on every link: the loss study's, against the clean call
LARGE = 1 << 31  # tensor bytes per call over all workers: such a point runs alone (memory)
CHECKED_AUTO = 1 << 29  # auto runs for real up to this many tensor bytes per call over all workers


@dataclass
class Point:
    study: str
    label: str
    args: list[str]
    cell: dict = field(default_factory=dict)  # the grid's coordinates
    same_as: str | None = None  # the label of the run this one's fabric run is (auto's reuse)

    @property
    def load(self) -> int:
        return self.cell.get("workers", 1) * self.cell.get("bytes", 0)


def grid() -> list[Point]:
    points = []
    cells = [(n, size) for n in (16, 64, 256) for size in (MB // 4, 4 * MB, 64 * MB)
             if not (n == 256 and size > 4 * MB)]
    for n, size in cells:
        points += _cell_points(n, size, (0.25, 0.5, 0.75, None), (4, 64, 256))
    for size in (MB // 4, MB):
        points += _cell_points(1024, size, (0.5, None), (256,))
    return points


def _cell_points(n: int, size: int, rates: tuple, pools: tuple) -> list[Point]:
    base = ["--topology", TOPOLOGY[n], *FAST, "--workers", str(n), "--size", str(size), "--calls", "2"]
    at = {"workers": n, "bytes": size * 4}
    points = [Point("grid", f"{n} workers, {_size(size * 4)}, ring", [*base, "--mode", "ring"], {**at, "mode": "ring"})]
    for rate, pool in itertools.product(rates, pools):
        rated = [*base, "--window", str(pool)] + (["--agg-rate", str(rate)] if rate is not None else [])
        cell = {**at, "C": rate, "pool": pool}
        name = f"{n} workers, {_size(size * 4)}, C={'L*' + str(rate) if rate else 'none'}, pool {pool}"
        for mode in ("ina", "hybrid", "auto"):
            points.append(Point("grid", f"{name}, {mode}", [*rated, "--mode", mode], {**cell, "mode": mode}))
    return points


def studies() -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = {"grid": grid(), "ntt": [], "rings": [], "packing": [], "loss": [], "failure": [],
                                   "cost": []}
    for n in (16, 256):
        base = ["--topology", TOPOLOGY[n], *FAST, "--workers", str(n), "--size", str(16 * MB), "--calls", "2",
                "--window", "256"]
        for mode in ("ina", "ring", "hybrid", "auto"):
            args = [*base, "--mode", mode] + (["--agg-rate", "0.5"] if mode != "ring" else [])
            out["ntt"].append(Point("ntt", f"{n} workers, 16 MB, C=L/2, {mode}", args,
                                    {"workers": n, "bytes": 16 << 20, "C": 0.5, "pool": 256, "mode": mode}))
    for layout in ("halving_doubling", "hierarchical", "flat"):
        out["rings"].append(Point("rings", f"1024 workers, 1 MB, {layout} ring",
                                  [*FAT, "--size", str(MB), "--mode", "ring", "--ring-layout", layout],
                                  {"workers": 1024, "bytes": 1 << 20, "mode": "ring"}))
    for n in (64, 256, 1024):
        for trees in ("1", "auto"):
            out["packing"].append(Point("packing", f"{n} workers, trees {trees}",
                                        [*OVERSUBSCRIBED, "--workers", str(n), "--trees", trees, "--size", str(MB),
                                         "--calls", "2"], {"workers": n, "bytes": 1 << 20}))
    for n in (64, 1024):
        for loss in LOSSES:
            out["loss"].append(Point("loss", f"{n} workers, loss {loss}%",
                                     [*OVERSUBSCRIBED, "--workers", str(n), "--size", str(MB), "--loss", loss],
                                     {"workers": n, "bytes": 1 << 20}))
    for label, fault in (("the first tree's root dies at 40 us", ["--fail", "root@40us"]),
                         ("the first tree's first uplink is cut at 40 us", ["--cut", "uplink@40us"]),
                         ("the first tree's root restarts: down at 40 us, back at 1.5 ms (mid-call)",
                          ["--fail", "root@40us", "--restart", "root@1500us", "--calls", "2"])):
        out["failure"].append(Point("failure", f"1024 workers, {label}", [*OVERSUBSCRIBED, "--size", str(MB), *fault],
                                    {"workers": 1024, "bytes": 1 << 20}))
    out["cost"].append(Point("cost", "16 workers, trees 1", [*OVERSUBSCRIBED, "--workers", "16", "--trees", "1",
                                                            "--size", str(MB), "--calls", "2"],
                             {"workers": 16, "bytes": 1 << 20}))
    return out


def reuse(points: list[Point]) -> None:
    """Mark each expensive auto point whose two calls the model runs as one of its cell's forced runs."""
    from virtual_fabric import cli, runs

    by_label = {p.label: p for p in points}
    for p in points:
        if p.cell.get("mode") != "auto" or p.load <= CHECKED_AUTO:
            continue
        config = cli.config_of(cli.parser().parse_args(["run", *p.args]))
        _, auto = runs.expected(config)
        for mode in ("ina", "hybrid", "ring"):
            label = p.label.rsplit(", ", 1)[0] + f", {mode}"
            other = by_label.get(label) or next((q for q in points if q.cell.get("mode") == mode and
                                                 q.cell["workers"] == p.cell["workers"] and
                                                 q.cell["bytes"] == p.cell["bytes"]), None)
            if other is None:
                continue
            config = cli.config_of(cli.parser().parse_args(["run", *other.args]))
            _, forced = runs.expected(config)
            if [_key(c) for c in forced] == [_key(c) for c in auto]:
                p.same_as = other.label
                break


def _key(choice) -> tuple:
    return choice.method, round(choice.ina_share, 9), choice.layout, choice.ina_pace_mbps, choice.ring_pace_mbps


def run_points(todo: list[Point], done: dict[str, dict]) -> None:
    """Two points at a time (a large one alone); each result appended to the log as it ends."""
    queue = sorted((p for p in todo if p.same_as is None and p.label not in done), key=lambda p: p.load)
    running: list[tuple[Point, subprocess.Popen, float]] = []
    total, finished = len(queue), 0
    while queue or running:
        while queue and len(running) < 2 and not (running and (queue[0].load >= LARGE or
                                                                running[0][0].load >= LARGE)):
            p = queue.pop(0)
            proc = subprocess.Popen([sys.executable, "-m", "virtual_fabric.cli", "run", *p.args, "--json"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            running.append((p, proc, time.perf_counter()))
        time.sleep(1.0)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            p, proc, started = item
            out, err = proc.communicate()
            finished += 1
            if not out.strip():
                print(f"[{finished}/{total}] {p.label}: ina-sim failed ({proc.returncode}): {err[-1500:]}", flush=True)
                continue
            result = json.loads(out)
            result.pop("report", None)
            point = {"study": p.study, "label": p.label, "args": p.args, "cell": p.cell, "exit": proc.returncode,
                     "wall_outside": time.perf_counter() - started, **result}
            with LOG.open("a") as f:
                f.write(json.dumps(point) + "\n")
            done[p.label] = point
            print(f"[{finished}/{total}] {line(point)}", flush=True)


def line(point: dict) -> str:
    calls = "; ".join(f"{c['seconds'] * 1e6:,.1f} us {c['method']} (model {c['model'] * 1e6:,.1f}, "
                      f"{c['seconds'] / c['model']:.3f}x)" if c["seconds"] else f"FAILED ({c['error']})"
                      for c in point["calls"])
    check = point["check"]
    return (f"{point['study']:8} {point['label']:52} {calls}; bound {check.get('within_bound')}, identical "
            f"{check.get('identical')}; wall {point['wall']['total']:.0f} s, {point['peak_rss_mb']:,.0f} MB")


def load() -> dict[str, dict]:
    latest: dict[str, dict] = {}
    if LOG.exists():
        for text in LOG.read_text().splitlines():
            p = json.loads(text)
            latest[p["label"]] = p  # the last run of each point
    return latest


# --- the acceptance figures ------------------------------------------------------------------------

def grid_summary(points: list[Point], done: dict[str, dict]) -> tuple[list[str], list[dict]]:
    """Auto against the fastest of ina, ring and hybrid per call and cell; every prediction's error."""
    rows, cells = [], defaultdict(dict)
    for p in points:
        result = done.get(p.same_as or p.label)
        if result is None:
            continue
        cell = (p.cell["workers"], p.cell["bytes"], p.cell.get("C"), p.cell.get("pool"))
        cells[cell][p.cell["mode"]] = result
        for i, c in enumerate(result["calls"]):
            if c["seconds"] and c["model"]:
                rows.append({"label": p.label, "call": "first" if i == 0 else "later", "simulated": c["seconds"],
                             "predicted": c["model"], "method": c["method"], "reused": p.same_as is not None})
    worst, lines = [], []
    for (n, nbytes, rate, pool), modes in sorted(cells.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if pool is None:
            continue
        ring = next((r for (m, b, _, pl), ms in cells.items() for r in [ms.get("ring")]
                     if m == n and b == nbytes and pl is None and r), None)
        if "auto" not in modes or ring is None:
            continue
        for i in range(2):
            best = min(r["calls"][i]["seconds"] or float("inf") for r in (modes.get("ina"), modes.get("hybrid"), ring)
                       if r)
            auto = modes["auto"]["calls"][i]["seconds"] or float("inf")
            worst.append((auto / best, f"{n} workers, {_size(nbytes)}, C={rate or 'none'}, pool {pool}, "
                                       f"{'first' if i == 0 else 'later'} call"))
    wanted = len({(p.cell["workers"], p.cell["bytes"], p.cell.get("C"), p.cell.get("pool")) for p in points
                  if p.cell.get("pool")})
    if wanted:
        lines.append(f"grid cells measured: {sum(1 for c in cells if c[3] is not None)} of {wanted}")
    if worst:
        ratio, where = max(worst)
        over = [w for r, w in worst if r > 1.05]
        lines.append(f"auto / fastest of ina, ring, hybrid: worst {ratio:.3f}x ({where}); {len(over)} of "
                     f"{len(worst)} calls over 5%" + (f": {'; '.join(over[:6])}" if over else ""))
    for when in ("first", "later"):
        errors = [abs(r["simulated"] / r["predicted"] - 1) for r in rows if r["call"] == when and not r["reused"]]
        if errors:
            bad = [r["label"] for r in rows if r["call"] == when and not r["reused"]
                   and abs(r["simulated"] / r["predicted"] - 1) > 0.10]
            lines.append(f"predictions, {when} calls: {len(errors)}, median |error| {statistics.median(errors):.1%}, "
                         f"max {max(errors):.1%}, {len(bad)} over 10%" + (f": {'; '.join(bad[:8])}" if bad else ""))
    return lines, rows


def _of(done: dict[str, dict], study: str) -> list[dict]:
    return [done[k] for k in done if done[k]["study"] == study]


def _model_figure(plt: Any, done: dict[str, dict], rows: list[dict]) -> Any:
    """Every call of the grid, simulated against predicted."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 6))
    colours = {"ina": "tab:blue", "ring": "tab:orange", "hybrid": "tab:green"}
    for when, marker in (("first", "o"), ("later", "x")):
        for method, colour in colours.items():
            mine = [r for r in rows if r["call"] == when and r["method"] == method and not r["reused"]]
            ax.scatter([r["predicted"] * 1e3 for r in mine], [r["simulated"] * 1e3 for r in mine], s=14,
                       marker=marker, color=colour, label=f"{method}, {when} call", alpha=0.8)
    lo = min(min(r["predicted"], r["simulated"]) for r in rows) * 1e3 / 1.5
    hi = max(max(r["predicted"], r["simulated"]) for r in rows) * 1e3 * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.2, label="±10%")
    ax.set(xscale="log", yscale="log", xlabel="predicted (ms)", ylabel="simulated (ms, virtual time)",
           title="Every call of the grid: the model against the fabric")
    ax.legend(fontsize=7)
    return fig


def _hybrid_figure(plt: Any, done: dict[str, dict], rows: list[dict]) -> Any:
    """NTT's case: each method's second call, fabric against model, at 16 and 256 workers."""
    if not (ntt := _of(done, "ntt")):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, n in zip(axes, (16, 256)):
        mine = sorted((p for p in ntt if p["job"]["workers"] == n), key=lambda p: p["label"])
        labels = [p["label"].rsplit(", ", 1)[1] for p in mine]
        ax.bar(range(len(mine)), [p["calls"][-1]["seconds"] * 1e3 for p in mine], color="tab:blue", label="fabric")
        ax.plot(range(len(mine)), [p["calls"][-1]["model"] * 1e3 for p in mine], "kx", label="model")
        ax.set_xticks(range(len(mine)), [f"{x}\n({p['calls'][-1]['method']})" for x, p in zip(labels, mine)],
                      fontsize=8)
        ax.set(ylabel="ms per call (2nd)", title=f"{n} workers, 16 MB, C = L/2")
        ax.legend(fontsize=7)
    return fig


def _rings_figure(plt: Any, done: dict[str, dict], rows: list[dict]) -> Any:
    """1,024 workers: each ring layout's call beside the model."""
    if not (rings := _of(done, "rings")):
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([p["label"].split(", ")[-1] for p in rings], [p["calls"][0]["seconds"] * 1e3 for p in rings])
    ax.plot(range(len(rings)), [p["calls"][0]["model"] * 1e3 for p in rings], "kx", label="model")
    ax.axhline(2.0, color="red", lw=0.8, label="2 ms")
    ax.set(yscale="log", ylabel="ms per 1 MB allreduce", title="1,024 workers on fat_tree(16), 100 Gbit/s")
    ax.legend(fontsize=7)
    return fig


def _packing_figure(plt: Any, done: dict[str, dict], rows: list[dict]) -> Any:
    """Packed trees against one tree, fabric and model, over the workers."""
    if not (packing := _of(done, "packing")):
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for trees, colour in (("1", "tab:blue"), ("auto", "tab:orange")):
        ps = sorted((p for p in packing if p["label"].endswith(f"trees {trees}")), key=lambda p: p["job"]["workers"])
        xs = [p["job"]["workers"] for p in ps]
        name = "one tree" if trees == "1" else "packed trees"
        ax.plot(xs, [p["calls"][-1]["seconds"] * 1e6 for p in ps], "o-", color=colour, label=f"{name}: fabric")
        ax.plot(xs, [p["calls"][-1]["model"] * 1e6 for p in ps], "x--", color=colour, label=f"{name}: model")
    ax.set(xscale="log", xlabel="workers (fat_tree(16), 100G hosts, 25G fabric)", ylabel="us per 1 MB allreduce",
           title="Packed trees vs one tree, virtual time (2nd call)")
    ax.set_xticks([64, 256, 1024], ["64", "256", "1024"])
    ax.legend(fontsize=7)
    return fig


def _loss_figure(plt: Any, done: dict[str, dict], rows: list[dict]) -> Any:
    """A lossy call over the clean one, against issue 41's bound."""
    if not (loss := _of(done, "loss")):
        return None
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for n, colour in ((64, "tab:blue"), (1024, "tab:orange")):
        runs = {p["config"]["loss"]: p["calls"][0]["seconds"] for p in loss
                if p["job"]["workers"] == n and p["calls"][0]["seconds"]}
        if 0.0 in runs:
            xs = sorted(x for x in runs if x > 0)
            ax.plot(xs, [runs[x] / runs[0.0] for x in xs], "o-", color=colour, label=f"{n} workers")
    ax.plot([0.01, 0.1, 1], [1.2, 1.5, 3], "k--", lw=0.8, label="issue 41's bound")
    ax.set(xscale="log", yscale="log", xlabel="loss on every link (%)", ylabel="call / clean call (virtual time)",
           title="1 MB allreduce, fat_tree, 100G hosts, 25G fabric, W = 128")
    ax.legend(fontsize=7)
    return fig


PLOTS = {"scale-model.png": _model_figure, "scale-hybrid.png": _hybrid_figure, "scale-rings.png": _rings_figure,
           "scale-packing.png": _packing_figure, "scale-loss.png": _loss_figure}


def plot(done: dict[str, dict], rows: list[dict], to_docs: bool) -> list[Path]:
    """Each figure the runs so far have points for, in bench/results/ (``to_docs``: published too)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for name, draw in PLOTS.items():
        if (fig := draw(plt, done, rows)) is not None:
            made.append(save_figure(fig, name, dpi=110))
            publish(made[-1], to_docs)
    return made


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", action="append", choices=list(studies()), help="only these (default: all)")
    ap.add_argument("--match", action="append", default=[], help="only points whose label holds this text")
    ap.add_argument("--max-load", type=int, help="only points of at most this many MB of tensor per call, all "
                                                 "workers together (the grid's cells cost wall time in proportion)")
    ap.add_argument("--plot-only", action="store_true")
    add_publish_argument(ap)
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    chosen = {s: points for s, points in studies().items() if not args.study or s in args.study}
    todo = [p for points in chosen.values() for p in points
            if all(m in p.label for m in args.match) and (args.max_load is None or p.load <= args.max_load << 20)]
    done = load()
    reuse(todo)  # the summary counts a reused run as auto's too
    if not args.plot_only:
        run_points(todo, done)
    lines, rows = grid_summary(chosen.get("grid", []), done)
    for text in lines:
        print(text)
    plot(done, rows, args.publish)
    return 0


if __name__ == "__main__":
    sys.exit(main())
