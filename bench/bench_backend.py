"""What the torch layer costs: ``dist.all_reduce`` through the "ina" backend against the worker's own call.

Why: ``init_process_group("ina")`` puts a Python ``ProcessGroup``, a ``Work`` and a torch
future between a training script and ``Worker``.  If that layer cost much, the backend would
be slower than the hook or the worker for the same bytes.  This measures it alone: a
one-member job against bench_worker's ideal switch (a C process on loopback that answers each
contribution at once, so the switch is never the limit), world size 1, one process.

How: per call size, in one process, alternating run by run (median over ``--runs``, each
``--calls`` timed calls after a warm-up):
- ``worker``: ``Worker.allreduce_`` on the float32 numpy array (in place, as the hook's buckets);
- ``backend f32``: ``dist.all_reduce`` of a float32 tensor (SUM) through the backend;
- ``backend f32 avg``: the same with AVG (the result divided by the world size on the host);
- ``backend bf16``: a bfloat16 tensor: converted to float32 and back on the host;
- ``backend async x4``: four calls of a quarter of the size each, in flight together, as DDP's
  buckets (each call's fixed cost shows here).
Printed: MB/s of the tensor's float32 size per wall-second and per CPU-second of the process,
and the model's prediction for a single call through the backend beside it: the worker's time
(a float32 tensor is the host buffer the worker sums into, so nothing is copied), plus one pass
over the values for AVG's division (a ``np.copyto`` of the same size, at the memory bandwidth
measured here), plus a bfloat16 conversion each way for bf16.

    python -m bench.bench_backend [--mb 0.1,4,64] [--values 256] [--runs 5] [--calls 3]

Writes bench/results/backend.csv.
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .bench_worker import SWITCH_IP, WORKER_IP, free_udp_port, ideal_switch
from .common import RESULTS, write_rows
from .worker_runner import arguments, job_spec

PATHS = ("worker", "backend f32", "backend f32 avg", "backend bf16", "backend async x4")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(call: Callable[[], None], calls: int) -> tuple[float, float]:
    """Wall and CPU seconds per call."""
    call()  # warm-up: buffers, pages
    cpu, wall = cpu_seconds(), time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - wall) / calls, (cpu_seconds() - cpu) / calls


def copy_seconds(n: int, dtype: object = np.float32) -> float:
    """One copy of n values at this machine's memory bandwidth (median of 5)."""
    a, b = np.ones(n, dtype), np.empty(n, dtype)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(args: argparse.Namespace) -> list[dict]:
    import torch.distributed as dist

    import worker.torch_backend  # noqa: F401 - registers "ina" where the entry point is not installed
    from worker.torch_backend import InaOptions

    rows = []
    with tempfile.TemporaryDirectory() as tmp, ideal_switch(args.values):
        spec = Path(tmp) / "job.json"
        runner = arguments("").parse_args(["--values", str(args.values), "--job-id", "1", "--mb", "1",
                                           "--port", str(free_udp_port()), "--worker-ip", WORKER_IP,
                                           "--switch-ip", SWITCH_IP, "--window", str(args.window)])
        job_spec(runner).save(spec)  # the one-member job bench_worker's runners make, on the same ideal switch
        dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                                pg_options=InaOptions(spec=spec, timeout=30.0))
        worker = dist.group.WORLD.worker
        try:
            for mb in args.mb:
                n = int(mb * 1e6) // 4
                paths, bf16 = calls(worker, n)
                copy = copy_seconds(n)
                convert = _bf16_seconds(bf16)
                for run in range(args.runs):
                    for name, call in paths.items():
                        wall, cpu = timed(call, args.calls)
                        rows.append({"mb": mb, "path": name, "run": run, "wall": wall, "cpu": cpu,
                                     "copy": copy, "convert": convert})
                    print(f"  {mb:g} MB: run {run + 1}/{args.runs}", file=sys.stderr, flush=True)
        finally:
            dist.destroy_process_group()
    return rows


def calls(worker: object, n: int) -> tuple[dict[str, Callable[[], object]], object]:
    """Each path's call on n values (the same values), and the bfloat16 tensor."""
    import torch
    import torch.distributed as dist

    data = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    f32 = torch.from_numpy(data.copy())
    bf16 = f32.to(torch.bfloat16)
    quarters = [t.clone() for t in f32.chunk(4)]
    return {
        "worker": lambda: worker.allreduce_(data),
        "backend f32": lambda: dist.all_reduce(f32),
        "backend f32 avg": lambda: dist.all_reduce(f32, op=dist.ReduceOp.AVG),
        "backend bf16": lambda: dist.all_reduce(bf16),
        "backend async x4": lambda: [w.wait() for w in [dist.all_reduce(q, async_op=True) for q in quarters]],
    }, bf16


def _bf16_seconds(t: object) -> float:
    """bfloat16 to float32 and back: the host conversions of a bf16 call."""
    import torch

    times = []
    for _ in range(5):
        start = time.perf_counter()
        t.to(torch.float32).to(torch.bfloat16)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def table(rows: list[dict]) -> None:
    print(f"\n{'MB':>6} {'path':<18} {'MB/s wall':>10} {'MB/s CPU':>9} {'ms/call':>8} {'model ms':>9}")
    for mb in sorted({r["mb"] for r in rows}):
        mine = [r for r in rows if r["mb"] == mb]
        base = statistics.median(r["wall"] for r in mine if r["path"] == "worker")
        for path in PATHS:
            runs = [r for r in mine if r["path"] == path]
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            model = base + {"backend f32 avg": runs[0]["copy"], "backend bf16": runs[0]["convert"]}.get(path, 0.0)
            shown = f"{1e3 * model:9.2f}" if path not in ("worker", "backend async x4") else f"{'-':>9}"
            print(f"{mb:>6g} {path:<18} {mb / wall:>10.0f} {mb / cpu:>9.0f} {1e3 * wall:>8.2f} {shown}")
    print("(medians over runs; model: the worker's call, plus a pass for AVG's division, and for bf16 "
          "a conversion each way)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=lambda t: [float(x) for x in t.split(",")], default=[0.1, 4.0, 64.0])
    ap.add_argument("--values", type=int, default=256)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    rows = measure(args)
    table(rows)
    print(f"\nwrote {write_rows(RESULTS / 'backend.csv', rows, digits=None)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
