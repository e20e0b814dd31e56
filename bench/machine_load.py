"""Whether the machine is quiet: the cores busy outside this benchmark, and who keeps them busy.

Mininet's figures are the machine's as much as the network's: four workers and the switches
share two cores, so a measurement taken while another job runs says little.  A benchmark
prints ``load_note`` before each such measurement (and may wait for the machine to be quiet).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.veth_common import cpu_seconds, machine_cpu_seconds

BUSY_SHARE = 0.2  # cores busy outside the benchmark below which the machine counts as quiet


def _ours() -> set[int]:
    """This process and its descendants (the networks' switches and rank runners)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in mine} - mine
        mine |= more
        grew = bool(more)
    return mine


def _command(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return cmd or f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]"
    except OSError:
        return "?"


def busy_others(period: float = 2.0) -> tuple[float, list[tuple[str, float, int]]]:
    """Cores busy outside this benchmark over ``period`` s, and the commands over BUSY_SHARE of a core:
    (command, share of a core, processes).  Processes are summed by command line, so the short-lived
    children of a forking job (a campaign's seeds) count with it."""
    def sample() -> dict[int, float]:
        out = {}
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    out[int(d.name)] = cpu_seconds(int(d.name))
                except (OSError, ValueError, IndexError):
                    continue
        return out

    before, machine = sample(), machine_cpu_seconds()
    time.sleep(period)
    after, machine, ours = sample(), machine_cpu_seconds() - machine, _ours()
    used = {pid: cpu - before.get(pid, 0.0) for pid, cpu in after.items()}  # a new process: all of its time
    by_command: dict[str, list[float]] = {}
    for pid, cpu in used.items():
        if pid not in ours:
            by_command.setdefault(_command(pid)[:90], []).append(cpu / period)
    mine = sum(cpu for pid, cpu in used.items() if pid in ours)
    busy = sorted(((c, sum(v), len(v)) for c, v in by_command.items() if sum(v) > BUSY_SHARE), key=lambda b: -b[1])
    return max(0.0, machine - mine) / period, busy


def load_note(quiet_wait: float) -> str:
    """The load average and what else keeps the cores busy, after waiting up to ``quiet_wait`` s for it to go."""
    deadline = time.monotonic() + quiet_wait
    while True:
        cores, busy = busy_others()
        if cores < BUSY_SHARE or time.monotonic() >= deadline:
            break
        print(f"    waiting for the machine to be quiet: {cores:.2f} cores busy outside this benchmark: "
              f"{'; '.join(f'{s:.0%} {c} ({n} processes)' for c, s, n in busy)}", flush=True)
        time.sleep(min(20.0, max(0.0, deadline - time.monotonic())))
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    others = "; ".join(f"{c} at {s:.0%} of a core ({n} processes)" for c, s, n in busy) or "none"
    return f"load {load} ({os.cpu_count()} cores), {cores:.2f} cores busy outside this benchmark; busy: {others}"
