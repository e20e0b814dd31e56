"""One rank of tests/test_torch_ddp.py: DDP with ina_hook next to the exact average, for a few steps.

    python -m tests.ddp_rank SPEC RANK WORLD PORT DTYPE VIEW [DEVICE]

Every rank builds the same model (seeded) in DTYPE, twice: a DDP copy with ``ina_hook`` and,
for float32, a DDP copy with DDP's own gloo allreduce; a plain copy computes this rank's
own gradients, which gloo gathers (as float32) so every rank knows the exact average.  Each
step prints one JSON line: per parameter, the largest difference between the hook's
gradient and the exact average (and gloo's), beside the bound it must meet.
"""

import copy
import gc
import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from tests.rank_procs import leave
from worker import Worker
from worker.jobspec import JobSpec
from worker.torch_ddp import InaHookState, ina_hook

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def main() -> None:
    spec, rank, world, port, dtype_name, view = sys.argv[1:7]
    rank, world, dtype = int(rank), int(world), DTYPES[dtype_name]
    device = torch.device(sys.argv[7] if len(sys.argv) > 7 else "cpu")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(24, 96), nn.Tanh(), nn.Linear(96, 64), nn.Tanh(), nn.Linear(64, 5)).to(device, dtype)
    ina = DistributedDataParallel(copy.deepcopy(base), bucket_cap_mb=0.01, gradient_as_bucket_view=view == "view")
    state = InaHookState(Worker(JobSpec.load(spec), rank, timeout=5.0))
    ina.register_comm_hook(state, ina_hook)
    gloo = DistributedDataParallel(copy.deepcopy(base), bucket_cap_mb=0.01) if dtype == torch.float32 else None
    local = copy.deepcopy(base)
    n_bits = (world - 1).bit_length()  # ceil(log2 N)
    eps, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny
    for step in range(3):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = (torch.randn(16, 24, generator=g) * (10.0 ** (step - 1))).to(device, dtype)  # three decades
        y = torch.randint(0, 5, (16,), generator=g).to(device)
        for model in filter(None, (ina, gloo, local)):
            model.zero_grad(set_to_none=False)
            nn.functional.cross_entropy(model(x).float(), y).backward()
        mine = torch.cat([p.grad.reshape(-1).float() for p in local.parameters()]).cpu()
        everyone = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(everyone, mine)
        stack = torch.stack(everyone).double()
        exact = stack.mean(0)
        biggest = stack.abs().max().item()  # >= every chunk's largest input: a bound for every chunk
        got = torch.cat([p.grad.reshape(-1).double() for p in ina.parameters()]).cpu()
        # quantization (worker/README.md), divided by N; then the cast to the bucket's dtype
        bound = biggest * 2.0 ** (n_bits - 30) + exact.abs() * (eps / 2 + 2.0 ** -23) + tiny * eps / 2  # subnormals
        report = {"step": step, "max_error": (got - exact).abs().max().item(),
                  "max_error_over_bound": ((got - exact).abs() / bound).max().item(),
                  "max_abs": exact.abs().max().item(), "buckets": len(list(ina.parameters()))}
        worst = int(((got - exact).abs() / bound).argmax())
        report["worst"] = [exact[worst].item(), got[worst].item(), bound[worst].item()]
        if gloo is not None:
            theirs = torch.cat([p.grad.reshape(-1).double() for p in gloo.parameters()]).cpu()
            report["max_error_vs_gloo"] = (got - theirs).abs().max().item()
            gloo_rounding = stack.abs().sum(0) * 2.0 ** -23  # its float32 adds round at the partial sums' size
            report["vs_gloo_over_bound"] = ((got - theirs).abs() / (bound + gloo_rounding)).max().item()
        print(json.dumps(report), flush=True)
        with torch.no_grad():  # the same step for every copy, from the exact average
            start = 0
            for copies in zip(*(m.parameters() for m in filter(None, (ina, gloo, local)))):
                size = copies[0].numel()
                update = exact[start:start + size].reshape(copies[0].shape).to(device, dtype)
                for p in copies:
                    p -= 0.1 * update
                start += size
    state.close()
    del ina, gloo  # the reducers before their process group
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    leave()
