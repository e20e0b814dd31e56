"""One worker process for bench_worker: timed allreduce calls of one tree against the ideal switch.

Run as a script with the checkout to measure first on PYTHONPATH (bench_worker runs this file
against older commits too), so it uses only the worker's public interface: ``Worker(spec, rank,
window=...)``, ``allreduce``, ``allreduce_`` and ``stats``; it writes the one-member job's spec with
that checkout's own ``JobSpec`` (``job_spec``), whose format changed with the per-call model.
After a checked warm-up call it prints ``ready`` and waits for a line on stdin (the benchmark
attaches its syscall counter then), makes ``--calls`` timed calls (``--call``: ``allreduce_``, in
place as DDP's buckets are reduced, or ``allreduce``, a new array each time) and prints one JSON
line: wall and CPU seconds (user + system, all threads) of the timed calls, the packets sent and
the I/O loop's waits (``Stats.polls``, where the worker counts them).  ``--threads N`` goes to
``Worker(..., threads=N)`` where the checkout's ``Worker`` takes it (older ones do not: they run only
``--threads 1``).  ``arguments`` and ``timed`` are shared with bench/plain_runner.py, the plain C loop's
runner, so that bench_worker starts, times and reads both alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from worker import Worker, protocol
from worker.jobspec import JobSpec, Member, TreeSpec


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def job_spec(args: argparse.Namespace) -> JobSpec:
    """A one-member job on the ideal switch; paced at ``--pace`` (what a calibrated job gets).  With
    ``--threads N`` above 1, N trees of equal shares (job ids job_id * 100 + i, ports port + i): the
    worker's threads each run one."""
    P = protocol.load(args.values)
    member = Member(0, "h1", args.worker_ip, "ideal", args.switch_ip, "02:00:00:00:00:fe")
    count = max(1, args.threads)
    trees = tuple(TreeSpec(args.job_id * 100 + i if count > 1 else args.job_id, "ideal", 1.0 / count, 1e6,
                           args.port + i, (0,)) for i in range(count))
    extra = {}
    if args.pace and "ina_pace_mbps" in {f.name for f in dataclasses.fields(JobSpec)}:  # before the per-call model
        extra["ina_pace_mbps"] = args.pace
    elif args.pace:
        from worker.tuner import CallModel, InaCost, TreePipe

        extra["model"] = CallModel(args.values, InaCost((TreePipe(1.0, 1e-5, 1e-6),), args.window, args.pace), ())
    return JobSpec(f"bench{args.job_id}", args.values, P.INA_UDP_PORT, args.window, (member,), trees, **extra)


def arguments(description: str) -> argparse.ArgumentParser:
    """The command line bench_worker gives every runner (bench_worker.run_workers)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--values", type=int, required=True, help="values per packet")
    ap.add_argument("--job-id", type=int, required=True)
    ap.add_argument("--port", type=int, required=True, help="the worker's UDP port for its results")
    ap.add_argument("--worker-ip", required=True)
    ap.add_argument("--switch-ip", required=True)
    ap.add_argument("--pace", type=float, help="Mb/s the worker offers the switch (default: unpaced)")
    ap.add_argument("--mb", type=float, required=True, help="MB of float32 per call")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--window", type=int, required=True)
    ap.add_argument("--call", choices=["allreduce_", "allreduce"], default="allreduce_")
    ap.add_argument("--threads", type=int, default=1, help="the worker's datapath threads, where it takes them")
    return ap


def timed(calls: int, call: Callable[[], object]) -> tuple[float, float]:
    """Print ``ready``, wait for a line on stdin (the benchmark attaches its syscall counter meanwhile), make
    ``calls`` calls: their wall and CPU seconds (user + system, all threads)."""
    print("ready", flush=True)
    sys.stdin.readline()
    cpu, wall = cpu_seconds(), time.perf_counter()
    for _ in range(calls):
        call()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) per thread of this process so far, by thread name (Linux /proc): Python's
    names (a pool's prefix, the number dropped), else the kernel's."""
    names = {t.native_id: t.name.rsplit("_", 1)[0] for t in threading.enumerate()}
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            name = names.get(int(task.name)) or (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> int:
    ap = arguments(__doc__.splitlines()[0])
    args = ap.parse_args()
    options = {}
    if "threads" in inspect.signature(Worker).parameters:
        options["threads"] = args.threads
    elif args.threads != 1:
        ap.error(f"--threads {args.threads}: this checkout's Worker takes no threads (it runs one; use --threads 1)")
    spec = job_spec(args)
    data = np.random.default_rng(0).standard_normal(int(args.mb * 1e6) // 4).astype(np.float32)
    with Worker(spec, 0, window=args.window, timeout=30.0, **options) as w:
        out = w.allreduce(data)  # warm-up, checked: one worker's sum is its own values, quantized
        scale = np.abs(data).max()
        if not np.allclose(out, data, rtol=0, atol=scale * 2.0 ** -20):
            print(json.dumps({"error": "the warm-up call's result is not the input"}), flush=True)
            return 1
        before, polls = w.stats.packets_sent, getattr(w.stats, "polls", None)
        call = getattr(w, args.call)
        # in place: one worker's sum is its quantized input, which quantizes to itself
        before_threads = thread_cpu()
        wall, cpu = timed(args.calls, lambda: call(data))
        split = {k: round(v - before_threads.get(k, 0.0), 3) for k, v in thread_cpu().items()}
        print(json.dumps({"wall": wall, "cpu": cpu, "calls": args.calls, "bytes": data.nbytes * args.calls,
                          "threads_cpu": {k: v for k, v in split.items() if v > 0},
                          "packets": w.stats.packets_sent - before,
                          "polls": None if polls is None else w.stats.polls - polls}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
