"""One rank of bench/bench_direct_mininet.py: a DirectWorker on parts.json, in its worker's Mininet host, timing
back-to-back calls of one float32 input (made once, so nothing but the calls runs between them).

    python -m bench.direct_mininet_rank PARTS_JSON RANK ELEMENTS CALLS [--timeout S]

Prints a JSON line per call: its seconds and a digest of the result (every rank's must be the same); or, for a
call that fails, the error, and then stops.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from worker import DirectWorker
from worker.direct import DirectAllreduceError, parts_from_json


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("parts", type=Path)
    ap.add_argument("rank", type=int)
    ap.add_argument("elements", type=int)
    ap.add_argument("calls", type=int)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    data = np.random.default_rng(args.rank).standard_normal(args.elements).astype(np.float32)
    with DirectWorker(parts_from_json(args.parts.read_text(), args.parts), args.rank, timeout=args.timeout) as worker:
        for call in range(args.calls):
            started = time.monotonic()
            try:
                result = worker.allreduce(data)
            except DirectAllreduceError as e:
                print(json.dumps({"rank": args.rank, "call": call, "error": str(e)[:2000]}), flush=True)
                return 1
            print(json.dumps({"rank": args.rank, "call": call, "seconds": time.monotonic() - started,
                              "digest": hashlib.sha256(result.tobytes()).hexdigest()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
