"""`ina-ctl calibrate JOB`: measure a job's aggregation capacity C and its ring's rate on its own hosts.

The hybrid split (controller/hybrid.py) needs C, what the switches take from each worker.
Declared rates are a guess; this runs the real thing: a short burst of INA-only allreduces
over the job's trees and one of ring-only allreduces, by ``ina-allreduce`` on every member
host (through the network file's ``host_exec``, which bmv2-env writes for Mininet hosts).
Each burst runs under a temporary job of the same members, trees count and pool (a job is
one session: its own trees must see their workers' packets from the first), which is
deleted afterwards.  The job then gets the split the measured C gives; in auto mode a
hybrid is tried too, and the fastest method measured is the one the job runs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from controller import hybrid
from controller.controller import Controller, JobError
from worker import protocol
from worker.jobspec import JobSpec


@dataclass(frozen=True)
class Calibration:
    ina_mbps: float | None  # wire Mb/s each worker sent to the switches, INA alone (None: the job has no trees)
    ring_mbps: float  # wire Mb/s a ring put on each link, alone
    seconds_per_mb: dict[str, float]  # each burst's time by method ("ina", "ring", and "hybrid" if tried)
    spec: JobSpec  # the job's spec after the new split


def calibrate(ctl: Controller, name: str, values: int = 1 << 18, timeout: float = 20.0) -> Calibration:
    """Run the bursts (``values`` float32 per call, one warm-up and two timed calls) and split the job again.

    An ``auto`` job the model would make a hybrid also gets a hybrid burst at the model's split,
    and runs whichever of the three was fastest: the model takes C as measured alone, and the
    ring's traffic can slow the switches' part (docs/hybrid.md)."""
    job = ctl.state.jobs.get(name)
    if job is None:
        raise JobError(f"no job named {name!r} (jobs: {sorted(ctl.state.jobs)})")
    for host in job.members:
        try:
            ctl.network.run_on(host, [])  # a clear error before anything is created
        except ValueError as e:
            raise JobError(f"calibration of job {name}: {e}") from None
    P = protocol.load(ctl.state.options.values, ctl.state.options.udp_port)
    seconds = {mode: _trial(ctl, name, mode, values, timeout) for mode in (("ina", "ring") if job.trees else ("ring",))}
    n = len(job.members)
    tensor = 4 * values
    ina = tensor * P.wire_factor * 8 / seconds["ina"] / 1e6 if "ina" in seconds else None
    ring = tensor * hybrid.ring_tensors(job.ring_sum, alone=True) * (n - 1) / n * 8 / seconds["ring"] / 1e6
    spec = ctl.calibrated(name, ina, ring)
    if spec.ina_share not in (0.0, 1.0) and job.asked_mode == "auto":
        seconds["hybrid"] = _trial(ctl, name, "hybrid", values, timeout, spec.ina_share, (ina, ring))
    per_mb = {mode: s / (tensor / 1e6) for mode, s in seconds.items()}
    if "hybrid" in per_mb:
        spec = ctl.calibrated(name, ina, ring, per_mb)
    return Calibration(ina, ring, per_mb, spec)


def _trial(ctl: Controller, name: str, mode: str, values: int, timeout: float, alpha: float | None = None,
           rates: tuple[float | None, float] | None = None) -> float:
    """A burst under a temporary job of ``name``'s members, trees count and pool, in ``mode``."""
    job = ctl.state.jobs[name]
    trial = f"{name}-calibrate-{mode}"
    spec = ctl.create_job(trial, job.members, job.pool_size, trees=len(job.trees) or 1, mode=mode, alpha=alpha,
                          ring_sum=job.ring_sum)
    try:
        if rates is not None:  # a hybrid is paced as the measured rates make it
            spec = ctl.calibrated(trial, *rates)
        return _burst(ctl, spec, values, timeout)
    finally:
        ctl.delete_job(trial)


def _burst(ctl: Controller, spec: JobSpec, values: int, timeout: float) -> float:
    """Median over the timed calls of the slowest rank's time; JobError naming the host that failed."""
    with tempfile.TemporaryDirectory(prefix="ina-calibrate-") as tmp:
        path = Path(tmp) / f"{spec.name}.json"
        spec.save(path)  # paced only by a rate the topology declares: a limit the job must keep
        command = [sys.executable, "-m", "worker.cli", "--spec", str(path), "--size", str(values), "--repeat", "3",
                   "--timeout", str(timeout)]
        procs = {m.host: subprocess.Popen(ctl.network.run_on(m.host, [*command, "--rank", str(m.rank)]),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for m in spec.members}
        runs: dict[str, list[float]] = {}
        try:
            for host, p in procs.items():
                try:
                    out, err = p.communicate(timeout=4 * timeout + 60)
                except subprocess.TimeoutExpired:
                    raise JobError(f"calibration: {host} gave no answer within {4 * timeout + 60:.0f} s") from None
                lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
                failed = next((r["error"] for r in lines if "error" in r), None)
                if p.returncode != 0 or failed or len(lines) < 3:
                    why = failed or err.strip()[-300:] or f"exit status {p.returncode}"
                    raise JobError(f"calibration: {host} (is it running?): {why}")
                runs[host] = [r["seconds"] for r in lines[1:3]]
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                p.wait()
    return statistics.median(max(times[i] for times in runs.values()) for i in range(2))
