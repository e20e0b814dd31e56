"""One rank of tests/test_tp.py: a tensor-parallel GPT on gloo, every check of one TP degree.

    python -m tests.tp_rank RANK WORLD PORT [ina]     # ina: TP groups through the switches, exactness only

Prints one JSON line: the largest relative differences between the schedules and the
single-process reference (outputs, input gradients, every parameter's gradient), the same
through a comm that fills a tensor with NaN until its allreduce is waited, the event traces of a
Domino step, and what each bad set-up raised.
"""

import json
import math
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

from tests.rank_procs import leave
from worker.tp import GPT, FullGPT, GPTShape, NoComm, TorchComm
from worker.tp.layers import shard

SHAPE = GPTShape(layers=2, hidden=48, heads=12, mlp=192)  # hidden, heads and mlp divide by 2, 3 and 4
BATCH, SEQ = 5, 6  # 5 rows: uneven micro-batches for m = 2 and 3
MICRO_BATCHES = (1, 2, 3, 5)


class Late:
    """An allreduce done only when waited: the sum of what the tensor held when it started."""

    def __init__(self, tensor: torch.Tensor, kept: torch.Tensor, comm: TorchComm) -> None:
        self.tensor, self.kept, self.comm = tensor, kept, comm

    def wait(self) -> None:
        dist.all_reduce(self.kept, group=self.comm.group)
        self.tensor.copy_(self.kept)


class PoisonComm(TorchComm):
    """Fills a tensor with NaN from its allreduce's start to its wait: any read in between shows."""

    def allreduce_async(self, tensor: torch.Tensor) -> Late:
        kept = tensor.clone()
        tensor.fill_(math.nan)
        return Late(tensor, kept, self)


def full_model(shape: GPTShape = SHAPE) -> FullGPT:
    """The same weights on every rank; LayerNorms not at their identity, so their gradients matter."""
    torch.manual_seed(0)
    full = FullGPT(shape)
    for module in full.modules():
        if isinstance(module, nn.LayerNorm):
            nn.init.normal_(module.weight, 1.0, 0.2)
            nn.init.normal_(module.bias, 0.0, 0.2)
    return full


def step(model: nn.Module, x: torch.Tensor, probe: torch.Tensor, **schedule) -> dict[str, torch.Tensor]:
    """Output, input gradient and parameter gradients of one forward and backward."""
    x = x.clone().requires_grad_(True)
    out = model(x, **schedule)
    (out * probe).sum().backward()
    got = {"output": out.detach(), "input grad": x.grad}
    for name, p in model.named_parameters():
        got[name], p.grad = p.grad, None
    return got


# A TP parameter's name -> (the reference's name, the dimension it is cut along, parts); None: whole.
RENAMES = {"attention.ln": ("ln1", None, 1), "attention.column": ("qkv", 0, 3), "attention.row": ("proj", 1, 1),
           "mlp.ln": ("ln2", None, 1), "mlp.column": ("fc1", 0, 1), "mlp.row": ("fc2", 1, 1)}


def reference_shards(full: dict[str, torch.Tensor], comm: TorchComm) -> dict[str, torch.Tensor]:
    """The reference's gradients under the TP model's names, cut as this rank's parameters are."""
    out = {"output": full["output"], "input grad": full["input grad"],
           "ln_f.weight": full["ln_f.weight"], "ln_f.bias": full["ln_f.bias"]}
    for layer in range(SHAPE.layers):
        for ours, (theirs, dim, parts) in RENAMES.items():
            for leaf in ("weight", "bias"):
                g = full[f"blocks.{layer}.{theirs}.{leaf}"]
                cut = dim if leaf == "weight" else (0 if dim == 0 else None)  # a row layer's bias is whole
                out[f"blocks.{layer}.{ours}.{leaf}"] = g if cut is None else shard(g, cut, comm.rank, comm.size, parts)
    return out


def worst(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> float:
    """The largest of max|got - want| / max|want| over every tensor (NaN if any NaN)."""
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    errors = [((got[k] - want[k]).abs().max() / want[k].abs().max()).item() for k in want]
    return math.nan if any(map(math.isnan, errors)) else max(errors)


def exactness(comm: TorchComm, x: torch.Tensor, probe: torch.Tensor) -> dict[str, float]:
    """Every schedule against the reference, and Domino against sync, over ``comm``."""
    want = reference_shards(step(full_model(), x, probe), comm)
    model = GPT.from_full(full_model(), comm)
    sync = step(model, x, probe, schedule="sync")
    errors = {"sync vs reference": worst(sync, want)}
    for m in MICRO_BATCHES:
        domino = step(model, x, probe, schedule="domino", micro_batches=m)
        errors[f"domino m={m} vs sync"] = worst(domino, sync)
        errors[f"domino m={m} vs reference"] = worst(domino, want)
    errors["left in flight"] = len(model.handles.in_flight)
    return errors


def traces(comm: TorchComm, x: torch.Tensor, probe: torch.Tensor) -> dict[int, list]:
    """The events of one Domino step (forward and backward) for m = 2 and 3."""
    model = GPT.from_full(full_model(), comm)
    out = {}
    for m in (2, 3):
        model.handles.trace = []
        step(model, x, probe, schedule="domino", micro_batches=m)
        out[m] = model.handles.trace
    return out


def refusals(comm: TorchComm, x: torch.Tensor) -> dict[str, str | None]:
    """What each bad set-up raised on this rank (None: nothing)."""
    cases = {
        "hidden": lambda: GPT.from_full(full_model(GPTShape(1, 49, 7, 196)), comm),
        "heads": lambda: GPT.from_full(full_model(GPTShape(1, 48, 1, 192)), comm),
        "mlp": lambda: GPT.from_full(full_model(GPTShape(1, 48, 12, 193)), comm),
        "disagree": lambda: GPT.from_full(full_model(GPTShape(1, 48, 12, 192 if comm.rank == 0 else 96)), comm),
        "micro_batches 0": lambda: GPT.from_full(full_model(), comm)(x, "domino", 0),
        "micro_batches > batch": lambda: GPT.from_full(full_model(), comm)(x, "domino", BATCH + 1),
        "schedule": lambda: GPT.from_full(full_model(), comm)(x, "bogus"),
    }
    said: dict[str, str | None] = {}
    for name, build in cases.items():
        try:
            build()
            said[name] = None
        except ValueError as e:
            said[name] = str(e)
    return said


def through_switches(rank: int, world: int, x: torch.Tensor, probe: torch.Tensor) -> None:
    """TP groups of 2 consecutive ranks in a gloo world, each group a job of its own through the switches
    (``new_group(backend="ina")``, the specs in INA_TP_SPECS): exactness, and that the sums went there."""
    from worker.torch_backend import InaOptions

    specs = os.environ["INA_TP_SPECS"].split(",")
    groups = [dist.new_group([2 * g, 2 * g + 1], backend="ina", pg_options=InaOptions(spec=spec))
              for g, spec in enumerate(specs)]
    mine = groups[rank // 2]
    report = {"rank": rank, "world": world, "ina": exactness(TorchComm(mine), x, probe),
              "job": mine.worker.spec.name, "packets": mine.worker.stats.packets_sent}
    print(json.dumps(report), flush=True)


def main() -> None:
    rank, world, port = map(int, sys.argv[1:4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    g = torch.Generator().manual_seed(7)
    x, probe = torch.randn(BATCH, SEQ, SHAPE.hidden, generator=g), torch.randn(BATCH, SEQ, SHAPE.hidden, generator=g)
    if sys.argv[4:] == ["ina"]:
        through_switches(rank, world, x, probe)
        dist.destroy_process_group()
        return
    comm = TorchComm()
    no_comm = GPT.from_full(full_model(), NoComm(world, rank))(x, "domino", 2)  # runs, sums nothing
    report = {"rank": rank, "world": world, "gloo": exactness(comm, x, probe),
              "poisoned": exactness(PoisonComm(), x, probe), "traces": traces(comm, x, probe),
              "refused": refusals(comm, x), "no comm shape": list(no_comm.shape)}
    print(json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    leave()
