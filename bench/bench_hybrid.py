"""INA alone, a ring alone and both at once (hybrid), where the switches take less than the links give.

Why: when the aggregation capacity C per worker is below the link rate L, pure INA runs at C
and leaves link idle; the hybrid job sends the share alpha* = C r / (f (L - C) + C r) through
the switches and the rest round a TCP ring at the same time (docs/hybrid.md), at the share the
model (controller/model.py) gives each call.  The model's prediction is printed beside each
measurement.

How: Mininet, ``single(4)`` (one built-in-target switch, ina.p4 at V = 256), host links shaped
to ``--bw`` Mbit/s (50 by default: bench_allreduce's rate for 4 workers, at which the links and
not the two cores are the limit).  Per configuration a job is created in ``auto`` mode and calibrated
(``controller.calibrate``: bursts of INA-only, ring-only and one-value calls on the hosts give C,
the ring's rate and the hosts' latency); jobs in modes ina, ring, hybrid and auto get the same
measurements (``Controller.calibrated``), and the four are timed in ``--runs`` rounds, each mode once per
round and the order rotated, so that a slow spell of the machine hits every mode: one rank
runner per host (``python -m bench.ranks``, which runs whatever the job spec
says), a checked warm-up and one timed call, its time the slowest rank's; the figure is the
median over the rounds.

Configurations: (a) ``small-pool``: one slot on ``--fast-bw`` links, so the window, not the
link, bounds INA (C = window x frame / round trip: about 28 Mb/s at 50 Mbit/s); (b)
``shared-switch``: the switch declares an aggregation rate (``agg_pps``) that gives each
worker ``--shared-mbps``, the job's share of a switch several tenants use, which its workers'
pacers hold to (calibration measures C with that pace on); (c) ``control``: a pool of 16 on
``--bw`` links, INA link-bound (C >= L), where auto must pick pure INA.

Figures and what they show: docs/hybrid.md ("Measured so far").

    python -m bench.bench_hybrid [--bw 50] [--size 8] [--runs 5] [--configs small-pool,shared-switch,control]
    python -m bench.bench_hybrid --plot-only

Writes bench/results/hybrid.csv and hybrid.png (``--publish``: also copied to docs/figures/hybrid.png).
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
from pathlib import Path

from bench import compare
from bench.common import MIB, RESULTS, add_publish_argument, publish, read_rows, save_figure, write_rows
from bench.ranks import network, run_ranks, runner_command
from bench.veth_common import sigterm_as_interrupt
from worker.ring_layout import LAYOUTS

HOSTS = ["h1", "h2", "h3", "h4"]
MODES = ("ina", "ring", "hybrid", "auto")
CONFIGS = ("small-pool", "shared-switch", "control")
FIELDS = ["config", "mode", "runs_as", "alpha", "pool", "bw_mbit", "size_bytes", "ina_mbps", "ring_mbps",
          "seconds_median", "seconds_min", "seconds_max", "predicted", "measured_over_predicted", "max_rel_error"]


def topology(bw: float, agg_pps: float | None):
    from controller.topology import Topology, single

    spec = single(len(HOSTS))
    for link in spec["links"]:
        link.append({"bw": bw})
    if agg_pps:
        spec["switches"]["s1"]["agg_pps"] = agg_pps
    return Topology.from_dict(spec)


def measure_config(net, ctl, config: str, pool: int, bw: float, declared: bool,
                   args: argparse.Namespace) -> list[dict]:
    from controller.calibrate import calibrate

    ctl.create_job(f"{config}-auto", HOSTS, pool_size=pool, mode="auto")
    measured = calibrate(ctl, f"{config}-auto", values=args.size_bytes // 4, timeout=args.timeout)
    ina_mbps = measured.ina_mbps
    paced = ", paced to the declared rate" if declared else ""
    bursts = ", ".join(f"{m} {s:.3g}" for m, s in measured.seconds.items())
    ring_mbps = max(measured.ring_mbps.values())
    print(f"  {config}: C = {ina_mbps:.3g} Mb/s per worker (measured{paced}), a ring alone per link "
          f"{measured.rings()} (links {bw:g} Mb/s), host latency "
          f"{measured.host_latency * 1e6:.0f} us; bursts {bursts} s per call", flush=True)
    ctl.delete_job(f"{config}-auto")
    once = argparse.Namespace(**{**vars(args), "runs": 1})
    predicted = {}
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    parts: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}  # the slowest rank's, per run
    errors: dict[str, float] = dict.fromkeys(MODES, 0.0)
    for i in range(args.runs):  # round by round, each round in another order: a slow spell hits all modes
        for mode in MODES[i % len(MODES):] + MODES[:i % len(MODES)]:
            job = f"{config}-{mode}-{i}"  # a job is one session of its workers: a fresh one per run
            ctl.create_job(job, HOSTS, pool_size=pool, mode=mode, ring_layout=args.ring_layout)
            try:
                ctl.calibrated(job, ina_mbps, measured.ring_mbps, measured.host_latency, measured.ring_efficiency)
                predicted[mode] = ctl.job_plan(job).choose(args.size_bytes)
                reports = run_ranks(net, HOSTS, [runner_command("ina", r, h, args.size_bytes, once,
                                                                ctl.spec_dir / f"{job}.json", None)
                                                 for r, h in enumerate(HOSTS)], 8 * predicted[mode].seconds + 120)
            finally:
                ctl.delete_job(job)
            slowest = max(reports, key=lambda r: r["times"][0])
            times[mode].append(slowest["times"][0])
            parts[mode].append(slowest["parts"][0])
            errors[mode] = max(errors[mode], *(r["max_rel_error"] for r in reports))
    rows = []
    for mode in MODES:
        choice = predicted[mode]
        runs_as, expected, alpha = choice.method, choice.seconds, choice.ina_share
        median = statistics.median(times[mode])
        both = f"; trees {_median(parts[mode], 'trees')} s (predicted {choice.ina_seconds:.3f}), ring " \
               f"{_median(parts[mode], 'ring')} s (predicted {choice.ring_seconds:.3f})" if runs_as == "hybrid" else ""
        print(f"    {mode:>6}: runs as {runs_as} (alpha {alpha:.2f}), median {median:.3f} s "
              f"({', '.join(f'{t:.2f}' for t in times[mode])}), predicted {expected:.3f} s "
              f"(measured/predicted {median / expected:.2f}){both}", flush=True)
        rows.append({"config": config, "mode": mode, "runs_as": runs_as, "alpha": f"{alpha:.4f}",
                     "pool": pool, "bw_mbit": bw, "size_bytes": args.size_bytes,
                     "ina_mbps": f"{ina_mbps:.4f}", "ring_mbps": f"{ring_mbps:.4f}",
                     "seconds_median": f"{median:.4f}", "seconds_min": f"{min(times[mode]):.4f}",
                     "seconds_max": f"{max(times[mode]):.4f}", "predicted": f"{expected:.4f}",
                     "measured_over_predicted": f"{median / expected:.3f}", "max_rel_error": f"{errors[mode]:.2e}"})
    return rows


def _median(parts: list[dict[str, float]], part: str) -> str:
    took = [p[part] for p in parts if part in p]
    return f"{statistics.median(took):.3f}" if took else "-"


def plot(csv_path: Path, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig, axes = plt.subplots(1, len(configs), figsize=(5.5 * len(configs), 4.8), squeeze=False)
    colours = {"ina": "tab:blue", "ring": "tab:orange", "hybrid": "tab:green", "auto": "tab:purple"}
    for ax, config in zip(axes[0], configs):
        mine = [r for r in rows if r["config"] == config]
        for i, r in enumerate(mine):
            med, lo, hi = (float(r[k]) for k in ("seconds_median", "seconds_min", "seconds_max"))
            ax.bar(i - 0.2, med, 0.38, color=colours[r["mode"]], yerr=[[med - lo], [hi - med]], capsize=3)
            ax.bar(i + 0.2, float(r["predicted"]), 0.38, color="white", edgecolor="black", hatch="//",
                   label="model" if i == 0 else None)
            ax.text(i - 0.2, med / 2, f"{med:.2f} s", ha="center", rotation=90, color="white")
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels([f"{r['mode']}\n(runs {r['runs_as']},\nalpha {float(r['alpha']):.2f})" for r in mine],
                           fontsize=8)
        best = min(float(r["seconds_median"]) for r in mine if r["mode"] in ("ina", "ring"))
        hybrid = next(float(r["seconds_median"]) for r in mine if r["mode"] == "hybrid")
        ax.set_title(f"{config}: pool {mine[0]['pool']}, C = {float(mine[0]['ina_mbps']):.2g} Mb/s, "
                     f"L = {float(mine[0]['bw_mbit']):g} Mb/s\nhybrid {best / hybrid:.2f}x the faster pure method",
                     fontsize=9)
        ax.set_ylabel("time per allreduce (s)")
        ax.legend(fontsize=8)
    fig.suptitle(f"INA, ring and hybrid: 4 workers, {int(rows[0]['size_bytes']) / MIB:g} MiB float32, one P4 switch",
                 fontsize=10)
    return save_figure(fig, path)


def _configs(text: str) -> list[str]:
    names = [x for x in text.split(",") if x]
    if unknown := [x for x in names if x not in CONFIGS]:
        raise argparse.ArgumentTypeError(f"unknown configuration(s) {', '.join(unknown)} (of {', '.join(CONFIGS)})")
    return names


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bw", type=float, default=50.0, help="host links of the control configuration, Mbit/s")
    ap.add_argument("--fast-bw", type=float, default=50.0,
                    help="host links of the small-pool configuration, Mbit/s: fast enough that one slot's round "
                         "trip, not the link, bounds INA")
    ap.add_argument("--size", type=float, default=8.0, help="MiB of float32 per allreduce")
    ap.add_argument("--runs", type=int, default=5, help="rounds: each mode once per round, the order rotated")
    ap.add_argument("--small-pool", type=int, default=1, help="slots of configuration (a)")
    ap.add_argument("--shared-mbps", type=float, default=25.0,
                    help="configuration (b): the switch declares the aggregation rate that gives each worker this C")
    ap.add_argument("--configs", type=_configs, default=list(CONFIGS),
                    help=f"comma-separated configurations to run, of {','.join(CONFIGS)} (e.g. small-pool alone: the "
                         "window-bound case of issue 32)")
    ap.add_argument("--ring-layout", choices=LAYOUTS, help="the ring's layout in every mode (default: the "
                                                                   "model's choice per call)")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--busy-wait", type=float, default=1800.0)
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    add_publish_argument(ap)
    ap.add_argument("--against", metavar="REV", help="also run this commit's bench_hybrid, in alternation with this "
                                                     "tree's (--rounds), and set the medians side by side")
    ap.add_argument("--rounds", type=int, default=2, help="with --against: runs of each side")
    return ap


def run_configs(args: argparse.Namespace, csv_path: Path) -> list[dict]:
    """Each chosen configuration on its own network, its rows written to ``csv_path`` (also when stopped)."""
    from controller.controller import Controller
    from controller.pipeline import PipelineOptions
    from worker import protocol

    rows: list[dict] = []
    run = Path(tempfile.mkdtemp(prefix="bench-hybrid-"))
    try:
        frame = protocol.load(256).frame_bytes
        shared = args.shared_mbps * 1e6 / 8 / frame * len(HOSTS)  # contributions/s that give C = shared_mbps
        for config, pool, bw, declared in (("small-pool", args.small_pool, args.fast_bw, False),
                                            ("shared-switch", 16, args.bw, True),
                                            ("control", 16, args.bw, False)):
            if config not in args.configs:
                continue
            t0 = time.monotonic()
            with ExitStack() as stack:
                net = stack.enter_context(network(topology(bw, shared if declared else None), run / config,
                                                  args.busy_wait))
                ctl = stack.enter_context(Controller(net.network, run / config / "controller-state.json",
                                                     PipelineOptions(values=256)))
                ctl.setup()
                rows += measure_config(net, ctl, config, pool, bw, declared, args)
            print(f"  [{time.monotonic() - t0:.0f} s]", flush=True)
    finally:
        write_rows(csv_path, rows, FIELDS)
    shutil.rmtree(run, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.against:
        return compare.against(args.against, args.rounds, list(argv if argv is not None else sys.argv[1:]),
                               "bench.bench_hybrid", "hybrid.csv", lambda r: f"{r['config']:>13} {r['mode']:>6}")
    args.size_bytes = int(args.size * MIB) // 4 * 4
    args.ring_cc = "cubic"
    csv_path = args.out_dir / "hybrid.csv"
    if not args.plot_only:
        if os.geteuid() != 0:
            print("Mininet needs root", file=sys.stderr)
            return 2
        sigterm_as_interrupt()
        try:
            run_configs(args, csv_path)
        except KeyboardInterrupt:
            print("\ninterrupted; network stopped", file=sys.stderr)
            return 130
    publish(plot(csv_path, args.out_dir / "hybrid.png"), args.publish, csv_path)
    return 0

if __name__ == "__main__":
    sys.exit(main())
