"""The benchmarks' one library for results: where they go, their CSV rows, their plots and ``--publish``.

Running a benchmark must not change the repository, so every CSV and plot is written to
bench/results/ (ignored by git; or a bench's ``--out-dir``).  ``--publish`` on a bench (or
``python -m bench.figures``, ``make figures``) copies a plot to docs/figures/ (tracked, shown by the
READMEs) under the name ``PUBLISHED`` gives it; nothing else writes there (tests/test_bench_library.py
keeps it so).  Rows are dicts; floats are written to ``digits`` decimals, which ``--plot-only`` reads
back (old CSVs were written the same way).
"""

from __future__ import annotations

import argparse
import csv
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FIGURES = ROOT / "docs" / "figures"
MIB = 1 << 20

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
    "scale-model.png": "scale-model.png",  # bench_scale
    "scale-rings.png": "scale-rings.png",  # bench_scale
    "scale-packing.png": "scale-packing.png",  # bench_scale
    "scale-hybrid.png": "scale-hybrid.png",  # bench_scale
    "scale-loss.png": "scale-loss.png",  # bench_scale
    "scale-cost.png": "scale-cost.png",  # bench_scale
    "train-loss.png": "train-loss.png",  # examples/mininet_train.py
    "direct-devices.png": "direct-devices.png",  # bench_direct
    "direct-devices-run.png": "direct-devices-run.png",  # bench_direct_runs
    "rails.png": "rails.png",  # bench_rails
    "servers.png": "servers.png",  # bench_servers
    "window.png": "window-vs-time.png",  # bench_window
    "train-timeline.png": "train-timeline.png",  # examples/mininet_train.py
    "train-comm-loss.png": "train-comm-loss.png",  # examples/mininet_train.py --config comm-bound
    "train-comm-timeline.png": "train-comm-timeline.png",  # examples/mininet_train.py --config comm-bound
    "train-tp-timeline.png": "train-tp-timeline.png",  # examples/mininet_train_tp.py (make train-tp), shaped links
}

PUBLISH_HELP = "also copy the plot to docs/figures/ (tracked; default: only bench/results/)"


def add_publish_argument(ap: argparse.ArgumentParser) -> None:
    """A bench's ``--publish`` flag, the same on every one."""
    ap.add_argument("--publish", action="store_true", help=PUBLISH_HELP)


def write_rows(path: Path, rows: list[dict], fields: list[str] | None = None, digits: int | None = 4,
               **options: Any) -> Path:
    """A benchmark's rows as CSV (floats to ``digits`` decimals; None: as Python prints them), also after an
    interrupted run; nothing without rows.  ``fields`` default to the first row's keys; ``options`` go to
    csv.DictWriter (e.g. ``extrasaction="ignore"``)."""
    if rows:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fields or list(rows[0]), **options)
            writer.writeheader()
            writer.writerows(rows if digits is None else
                             ({k: (f"{v:.{digits}f}" if isinstance(v, float) else v) for k, v in r.items()}
                              for r in rows))
    return path


def read_rows(path: Path) -> list[dict]:
    """A CSV's rows (as ``write_rows`` wrote them: every value a string)."""
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def save_figure(fig: Any, path: Path | str, dpi: int = 120) -> Path:
    """Lay the figure out, write it (a bare name: under RESULTS; making its folder) and free it: every plot
    of the benchmarks and examples ends here."""
    import matplotlib.pyplot as plt

    path = RESULTS / path if isinstance(path, str) else path
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def publish(png: Path, to_docs: bool, csv_path: Path | None = None, figures: Path = FIGURES) -> Path | None:
    """Report a benchmark's plot (and CSV); with ``to_docs`` (``--publish``) also copy the plot to
    docs/figures/ under its ``PUBLISHED`` name: the one way into docs/figures/.  The copy's path, if any."""
    print(f"wrote {csv_path} and {png}" if csv_path is not None else f"wrote {png}")
    if not to_docs:
        return None
    try:
        target = figures / PUBLISHED[png.name]
    except KeyError:
        raise ValueError(f"{png.name}: not a published plot ({', '.join(PUBLISHED)})") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, target)
    print(f"published {png} as {target}")
    return target


def measure_points(csv_path: Path, points: Iterable[Callable[[], list[dict]]],
                   describe: Callable[[list[dict]], list[str]], plot_only: bool) -> None:
    """Each point's rows, described as they come and written to ``csv_path`` after each (what is done so
    far stays if a later point is stopped); ``plot_only``: the CSV's rows described, nothing run."""
    if plot_only:
        print("\n".join(describe(read_rows(csv_path))))
        return
    rows: list[dict] = []
    for point in points:
        found = point()
        print("\n".join(describe(found)), flush=True)
        rows += found
        write_rows(csv_path, rows)
