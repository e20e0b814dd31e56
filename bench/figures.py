"""Copy the benchmarks' and ``make train``'s plots from bench/results/ to docs/figures/.

They write their plots to bench/results/ (ignored by git), and to docs/figures/ (tracked,
shown by the READMEs) only when asked.

Running a benchmark must not change the repository, so every plot is written to
bench/results/ (or a bench's ``--out-dir``).  ``--publish`` on a bench, or
``python -m bench.figures`` (``make figures``) for whatever is in bench/results/, copies them
to docs/figures/ under the names the READMEs use, for a commit that updates the figures.

    python -m bench.figures                  # copy every plot bench/results/ has
    python -m bench.figures worker.png       # only these
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
FIGURES = REPO / "docs" / "figures"

# the plot's name in bench/results/ -> its name in docs/figures/
PUBLISHED = {
    "allreduce.png": "allreduce-ina-vs-ring.png",  # bench_allreduce
    "hybrid.png": "hybrid.png",  # bench_hybrid
    "loss.png": "loss.png",  # bench_loss
    "trees.png": "trees-packed-vs-one.png",  # bench_trees
    "target-speed.png": "target-speed.png",  # bench_ina
    "veth-ina.png": "veth-ina.png",  # bench_veth_ina
    "worker.png": "worker.png",  # bench_worker
    "fabric-agreement.png": "fabric-agreement.png",  # bench_fabric
    "scale-packing.png": "scale-packing.png",  # bench_scale
    "scale-hybrid.png": "scale-hybrid.png",  # bench_scale
    "scale-loss.png": "scale-loss.png",  # bench_scale
    "scale-cost.png": "scale-cost.png",  # bench_scale
    "train-loss.png": "train-loss.png",  # examples/mininet_train.py
    "direct-devices.png": "direct-devices.png",  # bench_direct
    "rails.png": "rails.png",  # bench_rails
    "servers.png": "servers.png",  # bench_servers
    "window.png": "window-vs-time.png",  # bench_window
    "train-timeline.png": "train-timeline.png",  # examples/mininet_train.py
    "train-comm-loss.png": "train-comm-loss.png",  # examples/mininet_train.py --config comm-bound
    "train-comm-timeline.png": "train-comm-timeline.png",  # examples/mininet_train.py --config comm-bound
    "train-tp-timeline.png": "train-tp-timeline.png",  # examples/mininet_train_tp.py (make train-tp), shaped links
}

PUBLISH_HELP = "also copy the plot to docs/figures/ (tracked; default: only bench/results/)"


def publish(png: Path, figures: Path = FIGURES) -> Path:
    """Copy one plot (named as in PUBLISHED) to docs/figures/; the copy's path."""
    try:
        target = figures / PUBLISHED[png.name]
    except KeyError:
        raise ValueError(f"{png.name}: not a published plot ({', '.join(PUBLISHED)})") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, target)
    print(f"published {png} as {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"plots in the results folder (default: all of {', '.join(PUBLISHED)})")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the plots are (default: %(default)s)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in PUBLISHED]
    if unknown:
        ap.error(f"not a published plot: {', '.join(unknown)}")
    names = args.names or [n for n in PUBLISHED if (args.results / n).exists()]
    missing = [n for n in names if not (args.results / n).exists()]
    if missing:
        print(f"not in {args.results}: {', '.join(missing)} (run its benchmark first)", file=sys.stderr)
        return 1
    if not names:
        print(f"no plots in {args.results}: run `make bench` or `make train` first", file=sys.stderr)
        return 1
    for name in names:
        publish(args.results / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
