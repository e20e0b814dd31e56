"""One rank of tests/test_torch_node.py: ``init_process_group("ina")`` on nodes of several ranks.

    LOCAL_WORLD_SIZE=L LOCAL_RANK=i GROUP_RANK=k INA_JOB_SPEC=rail{rail}.json [NODE_DEVICE=cuda] \
        python -m tests.node_rank RANK WORLD PORT [kill-after CALLS]

Prints one JSON line per check: ``allreduce``, a call through the node's reduce-scatter, its rail's
job and the all-gather, next to the exact sum (every rank's input gathered in float64 by a plain
gloo group) and the bound it must meet; ``async``, calls in flight together; ``rail``, this rank's
rail worker's bytes.  With ``kill-after N`` the rank with LOCAL_RANK 1 of node 1 dies in its
N-th call and every other rank prints the error its call failed with.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

from tests.backend_rank import DTYPES, OPS, everyone, inputs
from tests.rank_procs import leave

SIZES = (1001, 2, 773)  # not a multiple of 2, 3 or 4 ranks per node, nor of 64 values per packet; 2: empty shards


def check_allreduce(dtype_name: str, op_name: str, size: int, world: int, nodes: int, ref: dist.ProcessGroup,
                    rank: int, device: str) -> dict:
    dtype, op = DTYPES[dtype_name], OPS[op_name]
    x = inputs(dtype, rank, size, device)
    stack = everyone(x, ref, world)
    dist.all_reduce(x, op=op)
    got = x.cpu().to(stack.dtype)
    record = {"check": "allreduce", "dtype": dtype_name, "op": op_name, "size": size}
    if dtype == torch.int32:
        exact = stack.sum(0) if op_name == "sum" else torch.div(stack.sum(0), world, rounding_mode="trunc")
        return {**record, "exact": bool(torch.equal(got, exact))}
    per_node = stack.view(nodes, world // nodes, size)
    partial = per_node.sum(1)  # each node's sum: what its ranks send through the switches, in float32
    local = world // nodes
    divide = world if op_name == "avg" else 1
    exact = stack.sum(0) / divide
    eps, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny
    n_bits = (nodes - 1).bit_length()
    # the node's float32 sum of `local` values, then the switches' quantization over `nodes` members
    # (N * 2**(E + b - 31), max|partial| < 2**E: worker/README.md), then the cast to the tensor's dtype
    bound = ((local - 1) * 2.0 ** -24 * stack.abs().sum(0) / divide
             + partial.abs().max() * 2.0 ** (n_bits - 30) * nodes / divide
             + exact.abs() * (eps / 2 + 2.0 ** -23) + tiny * eps / 2)
    return {**record, "over_bound": ((got - exact).abs() / bound).max().item(), "max_abs": exact.abs().max().item()}


def check_async(rank: int, world: int, ref: dist.ProcessGroup) -> dict:
    """Eight calls of different sizes in flight at once, waited for in reverse: each its own exact sum."""
    xs = [inputs(torch.int32, rank + 7 * k, 97 * (k + 1), "cpu") for k in range(8)]
    stacks = [everyone(x, ref, world) for x in xs]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in reversed(works):
        w.wait()
    return {"check": "async", "exact": all(torch.equal(x.to(torch.int64), s.sum(0)) for x, s in zip(xs, stacks))}


def killed(rank: int, calls: int) -> None:
    """Calls until the chosen rank dies in its ``calls``-th: the others print their error and its time."""
    dying = os.environ["GROUP_RANK"] == "1" and os.environ["LOCAL_RANK"] == "1"
    for call in range(1, 1000):
        x = inputs(torch.float32, rank, 50_000, "cpu")
        if dying and call == calls:
            dist.all_reduce(x, async_op=True)  # its reduce-scatter under way
            time.sleep(0.05)
            os._exit(9)
        started = time.perf_counter()
        try:
            dist.all_reduce(x)
        except Exception as e:  # noqa: BLE001 - what the test looks at
            print(json.dumps({"check": "failed", "call": call, "seconds": time.perf_counter() - started,
                              "error": f"{type(e).__name__}: {e}"}), flush=True)
            return


def main() -> None:
    rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    pg = dist.group.WORLD
    if sys.argv[4:5] == ["kill-after"]:
        killed(rank, int(sys.argv[5]))
        os._exit(0)  # the group is broken: no orderly shutdown to wait for
    ref = dist.new_group(backend="gloo")
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    device = "cpu"
    if os.environ.get("NODE_DEVICE") == "cuda":  # a GPU per local rank, as torchrun's users pick it
        device = f"cuda:{int(os.environ['LOCAL_RANK']) % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    nodes = world // local
    for dtype in DTYPES:
        for op in OPS:
            for size in SIZES:
                print(json.dumps(check_allreduce(dtype, op, size, world, nodes, ref, rank, device)), flush=True)
    print(json.dumps(check_async(rank, world, ref)), flush=True)
    worker = pg.worker
    print(json.dumps({"check": "rail", "rank": rank, "job": worker.spec.name, "member": worker.rank,
                      "bytes_sent": worker.stats.bytes_sent}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    leave()
