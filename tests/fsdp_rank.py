"""One rank of tests/test_torch_backend.py's FSDP test (needs a CUDA device).

    INA_JOB_SPEC=SPEC python -m tests.fsdp_rank RANK WORLD PORT

FSDP with NO_SHARD over ``init_process_group("ina")``: its gradients are averaged with
all_reduce, so through the switches.  Each step prints the largest error of FSDP's gradient
against the exact average (every rank's own gradient, gathered by a gloo group) over the bound.
"""

import copy
import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy

from tests.rank_procs import leave


def main() -> None:
    rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    ref = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(24, 96), nn.Tanh(), nn.Linear(96, 5)).to(device)
    local = copy.deepcopy(base)
    model = FullyShardedDataParallel(base, sharding_strategy=ShardingStrategy.NO_SHARD, device_id=device,
                                     use_orig_params=True)
    n_bits = (world - 1).bit_length()
    for step in range(3):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x, y = torch.randn(16, 24, generator=g).to(device), torch.randint(0, 5, (16,), generator=g).to(device)
        for m in (model, local):
            m.zero_grad(set_to_none=False)
            nn.functional.cross_entropy(m(x), y).backward()
        mine = torch.cat([p.grad.reshape(-1) for p in local.parameters()]).cpu()
        everyone = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(everyone, mine, group=ref)
        stack = torch.stack(everyone).double()
        exact = stack.mean(0)
        got = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).cpu().double()
        bound = stack.abs().max() * 2.0 ** (n_bits - 30) + exact.abs() * 2.0 ** -22 + 1e-30
        print(json.dumps({"step": step, "over_bound": ((got - exact).abs() / bound).max().item(),
                          "packets": dist.group.WORLD.worker.stats.packets_sent}), flush=True)
        with torch.no_grad():
            for a, b in zip(model.parameters(), local.parameters()):
                a -= 0.1 * b.grad  # any update, the same on both copies' weights...
                b.copy_(a)  # ...so the copies stay equal
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    leave()
