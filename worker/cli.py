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

import numpy as np

from worker import AllreduceError, Worker, quantize
from worker.jobspec import JobSpec
from worker.ring import summation_bound


def gradient(seed: int, rank: int, size: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(seed + rank)
    return (rng.standard_normal(size) * 10 ** rng.uniform(-3, 1)).astype(dtype)


def bound_ok(result: np.ndarray, arrays: list[np.ndarray], values: int,
             summed_in_type: bool = False) -> tuple[float, bool]:
    """Max |error| against the float64 sum, and whether every element is within the stated bound:
    the switches' (worker/quantize.py), or with ``summed_in_type`` (a ring job summing in the
    tensor's type, as gloo) recursive summation's, (N-1) eps of the sum of magnitudes."""
    exact = np.sum([a.astype(np.float64) for a in arrays], axis=0)
    eps = float(np.finfo(result.dtype).eps)
    bound = summation_bound(arrays) if summed_in_type else quantize.elementwise_bound(arrays, values)
    bound = bound + np.abs(exact) * eps  # the final cast
    err = np.abs(result.astype(np.float64) - exact)
    return float(err.max(initial=0.0)), bool((err <= bound).all())


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
