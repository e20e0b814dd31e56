"""Column- and row-parallel linears (Megatron), each cut from a full-size ``nn.Linear``.

A column-parallel linear holds rows ``[rank·out/p, (rank+1)·out/p)`` of the full ``[out, in]``
weight and its part of the bias: it takes the whole input and gives this rank's slice of the
output features. A row-parallel linear holds the matching columns ``[out, in/p]`` and the whole
bias: it takes that slice and gives a partial sum of the output, summed over the group, then
the bias added once. Each has a blocking form (f and g inside: Megatron) and Domino's start/wait
form (``mappings``).
"""

from __future__ import annotations

from collections.abc import Hashable

import torch
from torch import nn

from worker.tp.comm import TPComm
from worker.tp.mappings import (
    ColumnLinearAsyncDgrad,
    HandleTable,
    RowLinearStart,
    WaitGrad,
    WaitReduce,
    copy_to_tp,
    reduce_from_tp,
)


def shard(full: torch.Tensor, dim: int, rank: int, size: int, parts: int = 1) -> torch.Tensor:
    """This rank's 1/size of ``full`` along ``dim``, taken from each of ``parts`` equal blocks.

    ``parts=3`` cuts a fused QKV weight: this rank's rows of Q, of K and of V, stacked.
    """
    blocks = full.chunk(parts, dim)
    return torch.cat([b.chunk(size, dim)[rank] for b in blocks], dim).clone()


class _Shard(nn.Module):
    """A linear's weight and bias as this rank holds them, and the group it sums over."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, comm: TPComm) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = None if bias is None else nn.Parameter(bias)
        self.comm = comm


class ColumnParallelLinear(_Shard):
    """``Y_rank = X·A_rankᵀ + b_rank``: weight ``[out/p, in]``, the whole input in, a slice out."""

    @classmethod
    def from_linear(cls, full: nn.Linear, comm: TPComm, parts: int = 1) -> ColumnParallelLinear:
        bias = None if full.bias is None else shard(full.bias.detach(), 0, comm.rank, comm.size, parts)
        return cls(shard(full.weight.detach(), 0, comm.rank, comm.size, parts), bias, comm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Megatron: f on the input (its gradient summed, blocking), then the local GEMM."""
        return nn.functional.linear(copy_to_tp(x, self.comm), self.weight, self.bias)

    def guard(self, x: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        """Domino, on the input: where ``forward_async``'s input-gradient allreduce is waited in backward.

        Apply it where X is made, not just before ``forward_async``: what is created between the
        two in forward runs between the allreduce's start and its wait in backward.
        """
        return WaitGrad.apply(x, table, key)

    def forward_async(self, x: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        """Domino: the GEMM; in backward, the input gradient's allreduce started before the weight gradient."""
        return ColumnLinearAsyncDgrad.apply(x, self.weight, self.bias, table, key)


class RowParallelLinear(_Shard):
    """``Y = Σ_rank X_rank·B_rankᵀ + b``: weight ``[out, in/p]``, a slice in, the whole output out."""

    @classmethod
    def from_linear(cls, full: nn.Linear, comm: TPComm) -> RowParallelLinear:
        bias = None if full.bias is None else full.bias.detach().clone()
        return cls(shard(full.weight.detach(), 1, comm.rank, comm.size), bias, comm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Megatron: the partial GEMM, g (summed, blocking), then the bias once."""
        return self._add_bias(reduce_from_tp(nn.functional.linear(x, self.weight), self.comm))

    def start(self, x: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        """Domino: the partial GEMM with its allreduce started; read it only through ``finish``."""
        return RowLinearStart.apply(x, self.weight, table, key)

    def finish(self, partial: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        """Wait for ``start``'s allreduce, then add the bias."""
        return self._add_bias(WaitReduce.apply(partial, table, key))

    def _add_bias(self, y: torch.Tensor) -> torch.Tensor:
        return y if self.bias is None else y + self.bias
