"""`ina-allreduce`: one worker of a job doing allreduces of random gradients, for demos and tests.

Every rank draws its array from ``seed + rank``, so each can also compute the exact float64
sum of all ranks by itself and check its result against the bound of worker/quantize.py,
without talking to the others.  Prints one JSON line per run.

    ina-allreduce --spec RUN/jobs/demo.json --rank 0 --size 1000000 [--repeat 3] [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from worker import AllreduceError, Worker
from worker.gradients import bound_ok, gradient
from worker.jobspec import JobSpec

__all__ = ["bound_ok", "gradient", "main"]  # gradient and bound_ok: re-exported for older callers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ina-allreduce", description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True, help="the job spec the controller wrote")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--size", type=int, default=1 << 20, help="values per allreduce")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds without progress before giving up")
    ap.add_argument("--check", action="store_true", help="compare with the exact sum (computes all ranks' arrays)")
    args = ap.parse_args(argv)
    spec = JobSpec.load(args.spec)
    mine = gradient(args.seed, args.rank, args.size, args.dtype)
    try:
        with Worker(spec, args.rank, timeout=args.timeout, spec_file=args.spec) as w:
            for run in range(args.repeat):
                start = time.perf_counter()
                result = w.allreduce(mine)
                elapsed = time.perf_counter() - start
                report = {"rank": args.rank, "run": run, "seconds": elapsed, "values": args.size,
                          "goodput_MBps": mine.nbytes / elapsed / 1e6, "bytes_sent": w.stats.bytes_sent,
                          "retransmissions": w.stats.retransmissions, "recoveries": w.stats.recoveries,
                          "parts": w.last_parts, "round_trip_min": w.round_trip_min}
                if args.check:
                    arrays = [gradient(args.seed, r, args.size, args.dtype) for r in range(len(spec.members))]
                    in_type = w.last_choice.method == "ring" and spec.ring_sum == "native" and result.dtype.kind == "f"
                    report["max_error"], report["within_bound"] = bound_ok(result, arrays, spec.values, in_type)
                print(json.dumps(report), flush=True)
    except (AllreduceError, OSError, ValueError) as e:
        print(json.dumps({"rank": args.rank, "error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
