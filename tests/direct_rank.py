"""One rank of tests/test_mininet_direct.py: a DirectWorker on parts.json, in its worker's Mininet host.

    python -m tests.direct_rank PARTS_JSON RANK WORKERS SIZE SEED [--calls K] [--timeout S]

Every rank makes every rank's inputs from the seed (so each knows the exact sum) and runs K rounds of a float32
then an int32 call, printing a JSON line per call: its dtype, a digest of the result (every rank's must be the
same), whether it is within the bound (``tests.test_direct_worker.check``: each tree part's and each ring
half's), and the seconds each part took; or, for a call that fails, the error and the parts it names, and then
it stops.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from tests.test_direct_worker import check
from worker import DirectWorker
from worker.direct import DirectAllreduceError, parts_from_json


def inputs(dtype: type, workers: int, size: int, seed: int, call: int) -> list[np.ndarray]:
    """Every rank's input of a call: float32 over six decades either sign, or int32 that never overflows."""
    rng = np.random.default_rng([seed, call])
    if dtype == np.float32:
        return [(rng.standard_normal(size) * 10 ** rng.uniform(-3, 3, size)).astype(np.float32)
                for _ in range(workers)]
    return [rng.integers(-2**20, 2**20, size, dtype=np.int32) for _ in range(workers)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("parts", type=Path)
    ap.add_argument("rank", type=int)
    ap.add_argument("workers", type=int)
    ap.add_argument("size", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("--calls", type=int, default=1, help="rounds of a float32 and an int32 call")
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    parts = parts_from_json(args.parts.read_text(), args.parts)
    with DirectWorker(parts, args.rank, timeout=args.timeout) as worker:
        ranges = worker.split(args.size)
        for call in range(2 * args.calls):
            dtype = (np.float32, np.int32)[call % 2]
            arrays = inputs(dtype, args.workers, args.size, args.seed, call)
            started = time.monotonic()
            try:
                result = worker.allreduce(arrays[args.rank])
            except DirectAllreduceError as e:
                print(json.dumps({"rank": args.rank, "call": call, "error": str(e), "failed": sorted(e.failures),
                                  "seconds": time.monotonic() - started}), flush=True)
                return 1
            try:
                check([result], arrays, ranges, parts)
                within = True
            except AssertionError:
                within = False
            print(json.dumps({"rank": args.rank, "call": call, "dtype": np.dtype(dtype).name, "within_bound": within,
                              "digest": hashlib.sha256(result.tobytes()).hexdigest(),
                              "seconds": time.monotonic() - started, "parts": worker.last_parts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
