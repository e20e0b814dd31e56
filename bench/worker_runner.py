"""One worker process for bench_worker: timed allreduce calls of one tree against the ideal switch.

Run as a script with the checkout to measure first on PYTHONPATH (bench_worker runs this file
against older commits too), so it uses only the worker's public interface: ``Worker(spec, rank,
window=...)``, ``allreduce``, ``allreduce_`` and ``stats``.  After a checked warm-up call it prints ``ready`` and
waits for a line on stdin (the benchmark attaches its syscall counter then), makes ``--calls``
timed calls (``--call``: ``allreduce_``, in place as DDP's buckets are reduced, or ``allreduce``,
a new array each time) and prints one JSON line: wall and CPU seconds (user + system, all threads) of the
timed calls, the packets sent and the I/O loop's waits (``Stats.polls``, where the worker counts them).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from worker import Worker
from worker.jobspec import JobSpec


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--mb", type=float, required=True, help="MB of float32 per call")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--window", type=int, required=True)
    ap.add_argument("--call", choices=["allreduce_", "allreduce"], default="allreduce_")
    args = ap.parse_args()
    spec = JobSpec.load(args.spec)
    data = np.random.default_rng(0).standard_normal(int(args.mb * 1e6) // 4).astype(np.float32)
    with Worker(spec, 0, window=args.window, timeout=30.0) as w:
        out = w.allreduce(data)  # warm-up, checked: one worker's sum is its own values, quantized
        scale = np.abs(data).max()
        if not np.allclose(out, data, rtol=0, atol=scale * 2.0 ** -20):
            print(json.dumps({"error": "the warm-up call's result is not the input"}), flush=True)
            return 1
        before, polls = w.stats.packets_sent, getattr(w.stats, "polls", None)
        print("ready", flush=True)
        sys.stdin.readline()
        call = getattr(w, args.call)
        cpu, wall = cpu_seconds(), time.perf_counter()
        for _ in range(args.calls):
            call(data)  # in place: one worker's sum is its quantized input, which quantizes to itself
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        print(json.dumps({"wall": wall, "cpu": cpu, "calls": args.calls, "bytes": data.nbytes * args.calls,
                          "packets": w.stats.packets_sent - before,
                          "polls": None if polls is None else w.stats.polls - polls}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
