"""One rank of tests/test_torch_backend.py: collectives through ``init_process_group("ina")``.

    INA_JOB_SPEC=SPEC python -m tests.backend_rank RANK WORLD PORT DEVICE   # cpu, cuda, or none: set-up only
    INA_CONTROLLER=... python -m tests.backend_rank RANK WORLD PORT service  # the job from the service

Prints one JSON line per check.  ``allreduce``: an ``all_reduce`` through the switches next to
the exact result (every rank's input gathered in float64 by a plain gloo group), with the
largest error over the bound it must meet.  ``delegated``: a collective the backend hands to
its gloo group, next to the same collective on the plain gloo group (they must be equal).
``worker``: the worker's packet counts, so the test can tell what went through the switches.
``service``: the controller service's job while the group lives, and an int32 sum through it.
"""

import json
import sys
import time

import torch
import torch.distributed as dist

from tests.rank_procs import leave

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32}
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG}


def inputs(dtype: torch.dtype, rank: int, size: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 * rank + size)
    if dtype == torch.int32:
        return torch.randint(-(1 << 24), 1 << 24, (size,), generator=g, dtype=torch.int32).to(device)
    scale = 10.0 ** torch.randint(-3, 3, (size,), generator=g)  # six decades
    return (torch.randn(size, generator=g) * scale).to(dtype).to(device)


def everyone(x: torch.Tensor, ref: dist.ProcessGroup, world: int) -> torch.Tensor:
    wide = x.cpu().to(torch.int64 if x.dtype == torch.int32 else torch.float64)
    out = [torch.empty_like(wide) for _ in range(world)]
    dist.all_gather(out, wide, group=ref)
    return torch.stack(out)


def check_allreduce(dtype_name: str, op_name: str, rank: int, world: int, ref: dist.ProcessGroup,
                    device: str) -> dict:
    dtype, op = DTYPES[dtype_name], OPS[op_name]
    x = inputs(dtype, rank, 3001, device)
    stack = everyone(x, ref, world)
    dist.all_reduce(x, op=op)
    got = x.cpu().to(stack.dtype)
    if dtype == torch.int32:
        exact = stack.sum(0) if op_name == "sum" else torch.div(stack.sum(0), world, rounding_mode="trunc")
        return {"check": "allreduce", "dtype": dtype_name, "op": op_name, "exact": bool(torch.equal(got, exact)),
                "device": device}
    exact = stack.sum(0) / (world if op_name == "avg" else 1)
    eps, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny
    n_bits = (world - 1).bit_length()
    # quantization, N * 2**(E + b - 31) with max|x| < 2**E (worker/README.md), divided by N for an
    # average; then the cast to the tensor's dtype
    bound = (stack.abs().max() * 2.0 ** (n_bits - 30) * (1 if op_name == "avg" else world)
             + exact.abs() * (eps / 2 + 2.0 ** -23) + tiny * eps / 2)
    return {"check": "allreduce", "dtype": dtype_name, "op": op_name, "device": device,
            "over_bound": ((got - exact).abs() / bound).max().item(), "max_abs": exact.abs().max().item()}


def check_async(rank: int, world: int, ref: dist.ProcessGroup) -> dict:
    """Eight calls in flight at once, waited for in reverse: each has its own exact sum."""
    xs = [inputs(torch.int32, rank + 7 * k, 257 * (k + 1), "cpu") for k in range(8)]
    stacks = [everyone(x, ref, world) for x in xs]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    futures = [w.get_future() for w in works]
    for w in reversed(works):
        w.wait()
    ok = all(torch.equal(x.to(torch.int64), s.sum(0)) for x, s in zip(xs, stacks))
    values = all(f.value()[0] is x or torch.equal(f.value()[0], x) for f, x in zip(futures, xs))
    return {"check": "async", "exact": ok, "future_values": values}


def check_behind(world: int) -> dict:
    """An async call finishes while this thread computes and never waits: the worker's native loop runs it
    on its own thread, without the GIL (what Domino's hidden allreduces need)."""
    x, a = torch.ones(1 << 16), torch.randn(64, 64)
    work = dist.all_reduce(x, async_op=True)
    started, products = time.monotonic(), 0
    while not work.is_completed() and time.monotonic() - started < 60:
        a = torch.tanh(a @ a)
        products += 1
    done_unwaited = work.is_completed()
    work.wait()
    return {"check": "behind", "done_before_wait": done_unwaited, "computed": products > 0,
            "exact": bool(torch.all(x == world))}


def delegated(rank: int, world: int, ref: dist.ProcessGroup) -> list[dict]:
    """The same collective on the backend and on the plain gloo group: equal results."""
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(12, generator=g)
    runs = {
        "allreduce_max": lambda t, group: dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group) or t,
        "allreduce_product": lambda t, group: dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, group=group) or t,
        "broadcast": lambda t, group: dist.broadcast(t, src=world - 1, group=group) or t,
        "all_gather": lambda t, group: _all_gather(t, group, world),
        "all_gather_into_tensor": lambda t, group: _gather_into(t, group, world),
        "reduce_scatter_tensor": lambda t, group: _reduce_scatter(t, group, world),
        "all_to_all_single": lambda t, group: _all_to_all(t, group),
        "barrier": lambda t, group: dist.barrier(group=group) or torch.zeros(1),
        "reduce_scatter": lambda t, group: _reduce_scatter_list(t, group, world),
        "send_recv": lambda t, group: _ring(t, group, rank, world),
    }
    out = []
    for name, run in runs.items():
        mine, theirs = run(x.clone(), None), run(x.clone(), ref)
        out.append({"check": "delegated", "name": name, "equal": bool(torch.equal(mine, theirs))})
    total, wide = x.double().clone(), x.double().clone()  # float64 is not for the switches: gloo sums it
    dist.all_reduce(wide)
    dist.all_reduce(total, group=ref)
    out.append({"check": "delegated", "name": "allreduce_float64", "equal": bool(torch.equal(wide, total))})
    mean = x.double().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # gloo has no AVG: the backend divides gloo's sum
    out.append({"check": "delegated", "name": "allreduce_avg_float64",
                "equal": bool(torch.allclose(mean, total / world, rtol=0, atol=1e-15))})
    return out


def _all_gather(t: torch.Tensor, group: dist.ProcessGroup | None, world: int) -> torch.Tensor:
    out = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(out, t, group=group)
    return torch.cat(out)


def _gather_into(t: torch.Tensor, group: dist.ProcessGroup | None, world: int) -> torch.Tensor:
    out = torch.empty(world * t.numel())
    dist.all_gather_into_tensor(out, t, group=group)
    return out


def _reduce_scatter(t: torch.Tensor, group: dist.ProcessGroup | None, world: int) -> torch.Tensor:
    out = torch.empty(t.numel() // world)
    dist.reduce_scatter_tensor(out, t, group=group)
    return out


def _reduce_scatter_list(t: torch.Tensor, group: dist.ProcessGroup | None, world: int) -> torch.Tensor:
    out = torch.empty(t.numel() // world)
    dist.reduce_scatter(out, list(t.chunk(world)), group=group)
    return out


def _ring(t: torch.Tensor, group: dist.ProcessGroup | None, rank: int, world: int) -> torch.Tensor:
    """Each rank's tensor to the next (even ranks send first, so no two wait on each other)."""
    got = torch.empty_like(t)
    to, source = (rank + 1) % world, (rank - 1) % world
    for sending in (rank % 2 == 0, rank % 2 != 0):
        if sending:
            dist.send(t, to, group=group)
        else:
            dist.recv(got, source, group=group)
    return got


def repeated(rank: int, world: int, calls: int) -> dict:
    """Many small gloo collectives through the backend, each on new tensors: torch's trampoline for a
    Python group once held the GIL inside gloo's enqueue and hung here within tens of calls."""
    for i in range(calls):
        out = [torch.empty(64) for _ in range(world)]
        dist.all_gather(out, torch.full((64,), float(rank + i)))
        dist.broadcast(torch.full((8,), float(rank)), 0)
        dist.barrier()
    return {"check": "repeated", "calls": 3 * calls, "last": [float(o[0]) for o in out]}


def _all_to_all(t: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t, group=group)
    return out


def check_subgroup(rank: int, world: int, ref: dist.ProcessGroup) -> dict:
    """A group made later (here of every rank) cannot share the job: it sums with gloo."""
    sub = dist.new_group()
    x = inputs(torch.int32, rank, 1000, "cpu")
    stack = everyone(x, ref, world)
    dist.all_reduce(x, group=sub)
    return {"check": "subgroup", "type": type(sub).__name__, "worker": sub.worker is not None,
            "exact": bool(torch.equal(x.to(torch.int64), stack.sum(0)))}


def check_service(rank: int, world: int) -> dict:
    """The job the backend got from the controller service exists while the group lives, and sums."""
    from ina_api.client import JobsClient

    pg = dist.group.WORLD
    name = pg.worker.service.name
    with JobsClient.from_env() as client:
        exists = name in [job.name for job in client.list()]
    x = inputs(torch.int32, rank, 3001, "cpu")
    exact = sum(inputs(torch.int32, r, 3001, "cpu").to(torch.int64) for r in range(world))
    dist.all_reduce(x)
    return {"check": "service", "job": name, "exists": exists, "exact": bool(torch.equal(x.to(torch.int64), exact)),
            "setup_seconds": pg.setup_seconds, "packets": pg.worker.stats.packets_sent}


def main() -> None:
    rank, world, port, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    if device == "service":
        print(json.dumps(check_service(rank, world)), flush=True)
        dist.destroy_process_group()
        return
    if device == "none":  # set-up only
        print(json.dumps({"check": "init", "backend": dist.get_backend()}), flush=True)
        dist.destroy_process_group()
        return
    ref = dist.new_group(backend="gloo")
    pg = dist.group.WORLD
    print(json.dumps({"check": "backend", "name": dist.get_backend(), "type": type(pg).__name__}), flush=True)
    for dtype in DTYPES:
        for op in OPS:
            print(json.dumps(check_allreduce(dtype, op, rank, world, ref, device)), flush=True)
    print(json.dumps(check_async(rank, world, ref)), flush=True)
    print(json.dumps(check_behind(world)), flush=True)
    before = pg.worker.stats.packets_sent
    for record in delegated(rank, world, ref):
        print(json.dumps(record), flush=True)
    print(json.dumps(check_subgroup(rank, world, ref)), flush=True)
    print(json.dumps(repeated(rank, world, 300)), flush=True)
    print(json.dumps({"check": "worker", "packets_before_delegated": before,
                      "packets_after_delegated": pg.worker.stats.packets_sent}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    leave()
