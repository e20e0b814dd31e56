"""A GPT stack whose GEMMs are split over a tensor-parallel group, in two schedules.

``sync`` is Megatron's: the whole batch, f and g blocking (2 allreduces per block each way).
``domino`` is Domino's (Wang et al. 2024, DeepSpeed PR #7178), generalised from 2 micro-batches
to m: the batch is cut into m micro-batches (``torch.tensor_split``, so uneven cuts work), and
each sublayer (attention, MLP) of each micro-batch is one *unit*, taken in the order
(sublayer 0, mb 0), (sublayer 0, mb 1), … A unit has a head (wait for its micro-batch's last
allreduce, add the residual, LayerNorm, and ``WaitGrad``), a middle (column GEMM and the local
attention or GELU) and a tail (row GEMM, allreduce started). For m ≥ 2 the next unit's head runs
between a unit's middle and its tail, as in PR #7178:

- forward, an allreduce started by a unit's tail is waited by its micro-batch's next head, so it
  runs behind the m − 1 middles in between (the last MLP's behind the next layer's attention);
- backward, autograd runs nodes in reverse creation order, so a unit's input-gradient allreduce
  (started by its column GEMM's backward) runs behind its own weight-gradient GEMM and the
  previous unit's row GEMM backward, and is waited by its ``WaitGrad`` after them.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Hashable

import torch
import torch.nn.functional as F  # noqa: N812 - as PyTorch writes it
from torch import nn

from worker.tp.comm import TPComm
from worker.tp.layers import ColumnParallelLinear, RowParallelLinear
from worker.tp.mappings import HandleTable
from worker.tp.reference import FullBlock, FullGPT, GPTShape, causal_attention

SCHEDULES = ("sync", "domino")


def check_layout(comm: TPComm, shape: GPTShape) -> None:
    """Refuse, on every rank alike, a layout the ranks disagree on or the TP degree does not divide.

    One allgather of the layout's numbers first, so every rank raises the same error, never hangs.
    """
    fields = ("layers", "hidden", "heads", "mlp")
    mine = [shape.layers, shape.hidden, shape.heads, shape.mlp]
    for rank, theirs in enumerate(comm.allgather_ints(mine)):
        if theirs != mine:
            differ = ", ".join(f"{f} {a} on rank {comm.rank}, {b} on rank {rank}"
                               for f, a, b in zip(fields, mine, theirs) if a != b)
            raise ValueError(f"tensor parallel: the ranks disagree on the layout: {differ}")
    for name, value in (("hidden size", shape.hidden), ("head count", shape.heads), ("mlp width", shape.mlp)):
        if value % comm.size:
            raise ValueError(f"tensor parallel: the {name} {value} is not divisible by the TP degree {comm.size}")


class Sublayer(nn.Module):
    """``x + row(local(column(ln(x))))``: pre-LN attention or MLP, in one piece or as Domino's pieces."""

    def __init__(self, ln: nn.LayerNorm, column: ColumnParallelLinear, local: Callable, row: RowParallelLinear):
        super().__init__()
        self.ln, self.column, self.local, self.row = ln, column, local, row

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.row(self.local(self.column(self.ln(x))))

    def head(self, x: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        """The normed input, its gradient's allreduce waited here in backward."""
        return self.column.guard(self.ln(x), table, ("dgrad", *key))

    def middle(self, normed: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        return self.local(self.column.forward_async(normed, table, ("dgrad", *key)))

    def tail(self, hidden: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        """The row GEMM's partial output, its allreduce started; give it back to ``finish``."""
        return self.row.start(hidden, table, ("reduce", *key))

    def finish(self, x: torch.Tensor, partial: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        return x + self.row.finish(partial, table, ("reduce", *key))


class GPTBlock(nn.Module):
    """Attention with its heads split over the group (QKV column, projection row), then the MLP."""

    def __init__(self, attention: Sublayer, mlp: Sublayer) -> None:
        super().__init__()
        self.attention, self.mlp = attention, mlp

    @classmethod
    def from_full(cls, full: FullBlock, comm: TPComm) -> GPTBlock:
        local_heads = functools.partial(causal_attention, heads=full.heads // comm.size)
        attention = Sublayer(copy.deepcopy(full.ln1), ColumnParallelLinear.from_linear(full.qkv, comm, parts=3),
                             local_heads, RowParallelLinear.from_linear(full.proj, comm))
        mlp = Sublayer(copy.deepcopy(full.ln2), ColumnParallelLinear.from_linear(full.fc1, comm), F.gelu,
                       RowParallelLinear.from_linear(full.fc2, comm))
        return cls(attention, mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x))


class GPT(nn.Module):
    """Tensor-parallel ``FullGPT``: ``forward(x, schedule="sync"|"domino", micro_batches=m)``."""

    def __init__(self, blocks: list[GPTBlock], ln_f: nn.LayerNorm, comm: TPComm) -> None:
        super().__init__()
        self.blocks, self.ln_f, self.comm = nn.ModuleList(blocks), ln_f, comm
        self.handles = HandleTable(comm)  # Domino's allreduces in flight; ``handles.trace = []`` records them

    @classmethod
    def from_full(cls, full: FullGPT, comm: TPComm) -> GPT:
        """This rank's shards of ``full`` (the same weights on every rank), after ``check_layout``."""
        check_layout(comm, full.shape)
        return cls([GPTBlock.from_full(b, comm) for b in full.blocks], copy.deepcopy(full.ln_f), comm)

    def forward(self, x: torch.Tensor, schedule: str = "sync", micro_batches: int = 2) -> torch.Tensor:
        if schedule == "sync":
            for block in self.blocks:
                x = block(x)
            return self.ln_f(x)
        if schedule != "domino":
            raise ValueError(f"tensor parallel: schedule must be one of {SCHEDULES}, not {schedule!r}")
        if not isinstance(micro_batches, int) or not 1 <= micro_batches <= x.shape[0]:
            raise ValueError(f"tensor parallel: micro_batches must be 1..batch ({x.shape[0]}), not {micro_batches!r}")
        return self._domino(x, micro_batches)

    def _domino(self, x: torch.Tensor, m: int) -> torch.Tensor:
        """The unit order of the module docstring; micro-batch i's residual stream is ``stream[i]``."""
        table, sublayers = self.handles, [s for b in self.blocks for s in (b.attention, b.mlp)]
        units = [(n, i) for n in range(len(sublayers)) for i in range(m)]
        stream = list(torch.tensor_split(x, m))
        in_flight: dict[int, tuple[int, torch.Tensor]] = {}  # micro-batch -> (sublayer, partial output)
        normed: dict[int, torch.Tensor] = {}  # unit -> its head's output

        def settle(i: int) -> None:  # micro-batch i's last allreduce waited, its residual added
            if i in in_flight:
                n, partial = in_flight.pop(i)
                stream[i] = sublayers[n].finish(stream[i], partial, table, (n, i))

        def head(k: int) -> None:
            n, i = units[k]
            settle(i)
            normed[k] = sublayers[n].head(stream[i], table, (n, i))

        head(0)
        for k, (n, i) in enumerate(units):
            hidden = sublayers[n].middle(normed.pop(k), table, (n, i))
            if m > 1 and k + 1 < len(units):
                head(k + 1)  # waits for micro-batch i+1-m's allreduce, started m-1 units ago
            in_flight[i] = (n, sublayers[n].tail(hidden, table, (n, i)))
            if m == 1 and k + 1 < len(units):
                head(k + 1)
        out = []
        for i in range(m):
            settle(i)
            out.append(self.ln_f(stream[i]))
        return torch.cat(out)
