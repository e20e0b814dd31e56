"""Copy the benchmarks' and ``make train``'s plots from bench/results/ to docs/figures/.

The command line of ``bench.common.publish`` (the names, folders and the copy are bench/common.py's).

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
import sys
from pathlib import Path

from bench.common import PUBLISHED, RESULTS, publish


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
        publish(args.results / name, to_docs=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
