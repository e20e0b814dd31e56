"""How long a job takes to set up: ``init_process_group`` and one allreduce right after, nothing else.

One JSON line per rank: ``{"setup": {"entered": ..., "init_process_group_seconds": ...,
"first_allreduce_seconds": ...}}`` (``entered``: wall clock before ``init_process_group``; the others
from it).  bench/bench_service.py runs it under torchrun on Mininet hosts, with gloo and with "ina".

    torchrun ... examples/setup_latency.py --backend ina
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="ina", choices=["ina", "gloo"])
    args = ap.parse_args()
    entered = time.time()
    dist.init_process_group(args.backend)
    returned = time.time()
    x = torch.ones(1 << 16)
    started = time.time()
    dist.all_reduce(x)
    assert float(x[0]) == dist.get_world_size()
    print(json.dumps({"setup": {"entered": entered, "init_process_group_seconds": returned - entered,
                                "first_allreduce_seconds": started - entered,
                                "allreduce_seconds": time.time() - started}}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
