"""Old and new side by side in one run: a worktree of another commit runs the same benchmark
as this checkout, in alternation, on the same machine.

These machines are noisy; a speed-up means something only when both sides are measured in
the same run.  ``worktree(rev)`` checks the commit out beside this one; ``run_module`` runs a
module of either tree in its own process, with that tree first on the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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
