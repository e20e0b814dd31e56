"""A call's time against the job's window (issue 61): 128 workers on fat_tree(8), 100 Gbit/s, 1 MB of float32 each,
windows from 32 to 1,024 slots and the auto one (``controller.windows``: the trees' bandwidth-delay product from
the one model, x MARGIN), in the virtual fabric, with the model's prediction beside each run.

Why: a window below the bandwidth-delay product leaves the link idle part of every round trip; one far above it
only adds exponent-only frames (a float call's first min(W, n) frames) and a longer slow start.  The line to beat
is the link's: the call's data frames on the busiest host link at its rate, plus one round trip.

    python -m bench.bench_window [--windows 32,64,128,256,512,1024] [--publish]   # about 6 min on 2 cores
    python -m bench.bench_window --plot-only

Each point is one ``ina-sim run --json --calls 2`` (the first call opens the window from 8 packets in flight,
the second runs with it open) in a child process, one after another.  Writes bench/results/window.csv and
window.png (``--publish``: docs/figures/window-vs-time.png).  Figures are virtual time, a function of the config
and the commit; only wall time is this machine's.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path

from bench.common import RESULTS, add_publish_argument, measure_points, publish, read_rows, save_figure

FABRIC = {"topology": "fat_tree:8", "workers": 128, "bw": 100000.0, "delay": "1us", "size": 262144}
WINDOWS = (32, 64, 128, 256, 512, 1024)


def link_limit() -> tuple[float, float, int]:
    """(seconds, round trip, auto window) of the config: the call's data frames on a host link at its rate plus one
    round trip, both from the one model's figures (``runs.expected``: the plan the fabric's controller makes)."""
    from virtual_fabric.runs import RunConfig, expected

    planned, _ = expected(RunConfig(**FABRIC))
    tree = planned.model.ina.trees[0]
    frames = -(-FABRIC["size"] // planned.model.values)
    return frames * tree.spacing + tree.round_trip, tree.round_trip, planned.pool_size


def point(window: int | None) -> list[dict]:
    """One run's rows, one per call (``window`` None: auto)."""
    args = [sys.executable, "-m", "virtual_fabric.cli", "run", "--topology", FABRIC["topology"],
            "--workers", str(FABRIC["workers"]), "--bw", str(FABRIC["bw"]), "--delay", FABRIC["delay"],
            "--size", str(FABRIC["size"]), "--calls", "2", "--json", "--window", str(window or "auto")]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout:
        raise RuntimeError(f"{' '.join(args[2:])}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout)
    job = result["job"]
    return [{"window": job["pool_size"], "auto": job["auto_window"] is not None, "call": call,
             "measured_us": c["seconds"] * 1e6 if c["seconds"] is not None else None, "model_us": c["model"] * 1e6,
             "ratio": c["ratio"], "within_bound": result["check"]["within_bound"], "wall_s": result["wall"]["total"]}
            for call, c in enumerate(result["calls"])]


def describe(rows: list[dict]) -> list[str]:
    return [f"W = {int(r['window']):5d}{' (auto)' if str(r['auto']) == 'True' else '       '} call {r['call']}: "
            + (f"{float(r['measured_us']):8.1f} us" if r["measured_us"] not in (None, "") else "  failed")
            + f", the model {float(r['model_us']):8.1f} us; within bound {r['within_bound']}; wall "
              f"{float(r['wall_s']):.0f} s" for r in rows]


def plot(csv_path: Path, path: Path, limit_us: float, round_trip_us: float) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for call, colour, label in (("0", "tab:blue", "first call (window opening)"), ("1", "tab:green", "second call")):
        mine = sorted((r for r in rows if r["call"] == call), key=lambda r: int(r["window"]))
        ax.plot([int(r["window"]) for r in mine], [float(r["model_us"]) for r in mine], "--", color=colour,
                label=f"{label}: model")
        done = [r for r in mine if r["measured_us"]]
        ax.plot([int(r["window"]) for r in done], [float(r["measured_us"]) for r in done], "o", color=colour,
                label=f"{label}: fabric")
        for r in done:
            if r["auto"] == "True":
                ax.plot(int(r["window"]), float(r["measured_us"]), "*", color="tab:red", markersize=14,
                        label="auto window" if call == "0" else None)
    ax.axhline(limit_us, color="black", linewidth=0.8, linestyle="-.")
    ax.text(32, limit_us, f" the link's limit: 1 MB of frames at 100 Gbit/s + a round trip ({round_trip_us:.1f} us)",
            fontsize=8, va="bottom")
    ax.set_xscale("log", base=2)
    windows = sorted({int(r["window"]) for r in rows})
    ax.set_xticks(windows, [str(w) for w in windows], fontsize=8)
    ax.set_ylim(0, max(float(r["model_us"]) for r in rows) * 1.1)
    ax.set_xlabel("window (slots per tree and switch)")
    ax.set_ylabel("allreduce (us, virtual)")
    ax.set_title("128 workers, fat_tree(8), 100 Gbit/s, 1 MB of float32 each", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", default=",".join(map(str, WINDOWS)),
                    help="windows, comma-separated (the auto one is run too)")
    ap.add_argument("--plot-only", action="store_true")
    add_publish_argument(ap)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    csv_path, png = args.out_dir / "window.csv", args.out_dir / "window.png"
    limit, round_trip, auto = link_limit()
    print(f"the link's limit {limit * 1e6:.1f} us (round trip {round_trip * 1e6:.2f} us); auto window {auto}")
    windows = [int(x) for x in args.windows.split(",")] + [None]
    measure_points(csv_path, (functools.partial(point, w) for w in windows), describe, args.plot_only)
    publish(plot(csv_path, png, limit * 1e6, round_trip * 1e6), args.publish, csv_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
