"""Ranks as real processes, for the PyTorch tests: start them together, collect what each printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from tests.loopback_net import LoopbackNet

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_ddp.py"


def run_ranks(commands: list[list[str]], envs: list[dict[str, str]], timeout: float) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each rank; every rank still running after ``timeout`` is killed."""
    procs = [subprocess.Popen(c, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, e in zip(commands, envs)]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append((p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return out


def leave() -> NoReturn:
    """A rank's exit once its ``main()`` returned, without the interpreter's teardown.

    torch's gloo threads release a finished collective's tensors after the call has returned, and that
    release takes the GIL; when it comes during the interpreter's teardown the process aborts with
    "terminate called without an active exception" (pytorch/pytorch#179291; once in CI, in a DDP rank
    that had destroyed its process group).  Everything the test checks is printed by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def train_command(comm: str, *extra: str) -> list[str]:
    """examples/train_ddp.py with a short worker timeout."""
    return [sys.executable, str(EXAMPLE), "--comm", comm, "--timeout", "3", *extra]


def train_envs(spec: Path | None, port: int, world: int = 3) -> list[dict[str, str]]:
    """torchrun's environment for each rank (and INA_JOB_SPEC)."""
    base = dict(os.environ, WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return [dict(base, RANK=str(r), **({"INA_JOB_SPEC": str(spec)} if spec else {})) for r in range(world)]


def spec_file(net: LoopbackNet, tmp_path: Path, name: str) -> Path:
    """A job of every host of ``net``, its spec written where the ranks can read it."""
    path = tmp_path / f"{name}.json"
    net.job(name, pool_size=32).save(path)
    return path
