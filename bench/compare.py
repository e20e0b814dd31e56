"""Old and new side by side in one run: a worktree of another commit runs the same benchmark
as this checkout, in alternation, on the same machine.

These machines are noisy; a speed-up means something only when both sides are measured in
the same run.  ``worktree(rev)`` checks the commit out beside this one; ``run_module`` runs a
module of either tree in its own process, with that tree first on the path; ``alternate`` runs a
whole benchmark from either tree in turn, and ``side_by_side`` sets their medians beside each other.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import ROOT, read_rows

REPO = ROOT  # this checkout: the new side


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A detached checkout of ``rev``, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="bench-old-"))
    path.rmdir()
    done = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), rev],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"cannot check out {rev}: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def python_env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment in which ``python`` imports the project from ``root``."""
    return {**os.environ, **(extra or {}),
            "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def run_module(root: Path, module: str, args: list[str], env: dict[str, str] | None = None,
               timeout: float = 3600) -> str:
    """``python -m module args`` with ``root``'s code (and ``env`` added); its standard output."""
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=root, env=python_env(root, env),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{module} in {root} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def alternate(rev: str, module: str, args: list[str], rounds: int, csv_name: str) -> dict[str, list[list[dict]]]:
    """A whole benchmark, ``python -m module args``, from ``rev``'s worktree and from this tree in turn,
    ``rounds`` times (the old side first in even rounds, the new one in odd), each into its own
    ``--out-dir``: per side, each round's rows of its ``csv_name``.  For benchmarks that build their own
    network per run (Mininet), whose old and new code cannot share one."""
    found: dict[str, list[list[dict]]] = {"old": [], "new": []}
    with worktree(rev) as old, tempfile.TemporaryDirectory(prefix="bench-against-") as tmp:
        for r in range(rounds):
            for side, root in ([("old", old), ("new", REPO)] if r % 2 == 0 else [("new", REPO), ("old", old)]):
                out = Path(tmp) / f"{side}-{r}"
                print(f"  round {r + 1}/{rounds}: {side} ({rev if side == 'old' else 'this tree'}) ...", flush=True)
                run_module(root, module, [*args, "--out-dir", str(out)])
                found[side].append(read_rows(out / csv_name))
    return found


def side_by_side(found: dict[str, list[list[dict]]], key: Callable[[dict], str], column: str) -> list[str]:
    """Per key: each side's median over rounds of ``column`` (each round's value after it), and new / old."""
    lines = []
    for k in dict.fromkeys(key(row) for rows in found["new"] for row in rows):
        values = {side: [float(row[column]) for rows in found[side] for row in rows if key(row) == k]
                  for side in ("old", "new")}
        if all(values.values()):
            old, new = (statistics.median(values[side]) for side in ("old", "new"))
            each = "; ".join(f"{side} " + ", ".join(f"{v:.3f}" for v in values[side]) for side in ("old", "new"))
            lines.append(f"{k}: old {old:.3f}, new {new:.3f} (new / old {new / old:.3f}) [{each}]")
    return lines


def forwarded(argv: list[str], own: tuple[str, ...] = ("--against", "--rounds", "--out-dir")) -> list[str]:
    """A benchmark's command line for both sides of ``alternate``: without the options that are its own."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in own:
            skip = True
        elif not a.startswith(tuple(f"{o}=" for o in own)):
            out.append(a)
    return out


def against(rev: str, rounds: int, argv: list[str], module: str, csv_name: str, key: Callable[[dict], str],
            column: str = "seconds_median") -> int:
    """A benchmark's ``--against REV``: the whole benchmark from ``rev`` and from this tree in turn, and the
    medians of ``column`` per ``key`` side by side."""
    found = alternate(rev, module, forwarded(argv), rounds, csv_name)
    print(f"\n{column}, median over {rounds} runs of each side:")
    for line in side_by_side(found, key, column):
        print(f"  {line}")
    return 0
